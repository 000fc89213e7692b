"""``benchmarks/gpu_check.py``'s parts that do not need CUDA: sync counting and the CPU path."""

from __future__ import annotations

import importlib.util
import json
import warnings
from pathlib import Path
from typing import Any

import pytest


def _gpu_check() -> Any:
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_check.py"
    spec = importlib.util.spec_from_file_location("gpu_check", path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.torch
def test_count_syncs_counts_sync_warnings_only_while_in_warn_mode() -> None:
    gc = _gpu_check()
    mode = {"v": "default"}
    seen: list[Any] = []

    def set_mode(v: Any) -> None:
        seen.append(v)
        mode["v"] = v

    def call() -> None:
        assert mode["v"] == "warn"
        for _ in range(3):
            warnings.warn("called a synchronizing CUDA operation", UserWarning, stacklevel=1)
        warnings.warn("something else", UserWarning, stacklevel=1)

    assert gc.count_syncs(call, set_mode, lambda: mode["v"]) == 3
    assert seen == ["warn", "default"] and mode["v"] == "default"


@pytest.fixture
def _reset() -> Any:
    import torch._dynamo

    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.mark.torch
def test_cpu_path_writes_figures_from_the_receipt(tmp_path: Path, _reset: Any) -> None:
    gc = _gpu_check()
    assert (
        gc.main(["--device", "cpu", "--backend", "eager", "--warm", "1", "--only", "tiny", "--out", str(tmp_path)]) == 0
    )
    data = json.loads((tmp_path / "gpu_check.json").read_text())
    (res,) = data["results"]
    assert res["workload"] == "tiny" and res["syncs_per_call"] == {"eager": None, "compiled": None}
    assert [r["configuration"] for r in res["evidence"]] == ["eager", "compile eager"]
    assert res["evidence"][1]["peak_source"] == "rss"
    assert [(d["input"], d["class"]) for d in res["differential"]] == [("steady[0]", "within_tolerance")]
    assert (tmp_path / "tiny" / "receipt.json").exists()


def _device_timeline() -> Any:
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import device_timeline

    return device_timeline


def test_kernel_spans_attribute_kernels_by_their_launch_inside_a_region_range(tmp_path: Path) -> None:
    """A trace shaped as torch.profiler writes it: the resume region's range nested in the first
    one's; kernels belong to the region whose range (and no later one's) holds their launch."""
    dt = _device_timeline()

    def x(cat: str, name: str, ts: float, dur: float, **args: Any) -> dict[str, Any]:
        return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "args": args}

    events = [
        x("user_annotation", "Torch-Compiled Region: 0/0", 0, 100),
        x("user_annotation", "Torch-Compiled Region: 1/0", 60, 30),
        x("cuda_runtime", "cudaLaunchKernel", 5, 1, correlation=1),
        x("cuda_runtime", "cudaLaunchKernel", 10, 1, correlation=2),
        x("cuda_driver", "cuLaunchKernel", 65, 1, correlation=3),
        x("cuda_runtime", "cudaMemcpyAsync", 40, 1, correlation=9),  # the island's copy: no kernel
        x("kernel", "mm", 20, 1000, correlation=1),
        x("kernel", "mm", 1020, 1000, correlation=2),
        x("gpu_memcpy", "DtoH", 2020, 5, correlation=9),
        x("kernel", "mm", 2100, 1500, correlation=3),
    ]
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": events}))
    assert dt.kernel_spans(str(path), ["0/0", "1/0"]) == [[2_000_000, 1_500_000]]


@pytest.mark.torch
def test_timeline_check_on_cpu_runs_the_cpu_path_and_says_the_device_parts_were_skipped(
    tmp_path: Path, _reset: Any
) -> None:
    gc = _gpu_check()
    argv = ["--device", "cpu", "--backend", "eager", "--only", "timeline", "--calls", "3", "--out", str(tmp_path)]
    assert gc.main(argv) == 0
    (res,) = json.loads((tmp_path / "gpu_check.json").read_text())["results"]
    assert res["workload"] == "timeline" and res["device"].startswith("skipped: no CUDA")
    for variant in ("graph_break", "item"):
        assert res[variant]["ledger_has_device_fields"] is False and res[variant]["schema_version"] == 1
        assert (tmp_path / "timeline" / variant / "receipt.json").exists()
