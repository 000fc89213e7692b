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
    assert gc.main(["--device", "cpu", "--backend", "eager", "--warm", "1", "--only", "tiny", "--out", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "gpu_check.json").read_text())
    (res,) = data["results"]
    assert res["workload"] == "tiny" and res["syncs_per_call"] == {"eager": None, "compiled": None}
    assert [r["configuration"] for r in res["evidence"]] == ["eager", "compile eager"]
    assert res["evidence"][1]["peak_source"] == "rss"
    assert [(d["input"], d["class"]) for d in res["differential"]] == [("steady[0]", "within_tolerance")]
    assert (tmp_path / "tiny" / "receipt.json").exists()
