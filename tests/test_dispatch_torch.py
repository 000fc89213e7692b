"""Dispatch figures against PyTorch's own (real torch, eager backend, a transformers model).

GIVEN a 2-layer GPT-2 built from a config, compiled whole and called with two sequence lengths in
turn, run under ``seamscope run`` with ``TORCH_TRACE`` set WHEN its receipt is made and the log is
imported THEN each cache entry's guard count and guard latency equal what
``torch._dynamo.utils.get_compilation_metrics()`` said in the same process, the imported log gives
the same per-frame figures as the live run, and the calls' lookups walk both entries."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fakes import seamscope_forked

from seamscope.analyze.verify import load_raw, verify
from seamscope.ingest.receipt import load_receipt
from seamscope.ingest.torch_trace import find_logs, import_torch_trace

pytest.importorskip("transformers")
WORKLOAD = Path(__file__).parent / "workloads" / "dispatch_gpt2.py"


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory, fresh_server: Any) -> dict[str, Any]:
    d = tmp_path_factory.mktemp("dispatch")
    trace = d / "trace"
    p = seamscope_forked(fresh_server, ["run", "--out", "out", "--quiet", str(WORKLOAD), "metrics.json"], d,
                         env={"TORCH_TRACE": str(trace)})
    assert p.returncode == 0, p.stderr
    (log,) = find_logs(str(trace))
    return {"receipt": load_receipt(str(d / "out" / "receipt.json")), "raw": load_raw(d / "out" / "receipt.json"),
            "metrics": json.loads((d / "metrics.json").read_text()), "imported": import_torch_trace(log, cwd=str(d))}


def _per_frame(compilations: Any) -> dict[str, tuple[Any, ...]]:
    return {c.compile_id: (c.guard_count, c.guard_latency_ns, c.guard_checks)
            for c in compilations if c.status == "ok"}


@pytest.mark.torch
def test_guard_figures_equal_pytorchs_compilation_metrics(run: dict[str, Any]) -> None:
    got = {c.compile_id: (c.guard_count, c.guard_latency_ns) for c in run["receipt"].ledger.compilations}
    want = {m["compile_id"]: (m["guard_count"], round(m["guard_latency_us"] * 1000)) for m in run["metrics"]}
    assert len(got) == 2 and got == want
    assert all(g > 500 for g, _ in got.values())  # a real model's guards, not a stub


@pytest.mark.torch
def test_imported_log_gives_the_live_runs_per_frame_figures(run: dict[str, Any]) -> None:
    live = _per_frame(run["receipt"].ledger.compilations)
    assert live == _per_frame(run["imported"].ledger.compilations)
    assert all(checks.get("module", 0) > sum(checks.values()) / 2 for _, _, checks in live.values())


@pytest.mark.torch
def test_calls_walk_both_entries_and_verify_agrees(run: dict[str, Any]) -> None:
    d = run["receipt"].findings.dispatch
    assert d is not None
    (frame,) = d.frames
    assert len(frame.entries) == 2 and frame.walked_max == 2
    steady = [c for c in d.calls if c.phase == "steady"]
    assert steady and all(c.walked == 2 and c.estimate_ns <= c.island_ns for c in steady)
    assert any(r.axis == "dispatch" for r in run["receipt"].findings.ranked)
    v = verify(run["raw"])
    assert v.ok, v.lines()


@pytest.mark.torch
def test_imported_log_names_the_frames_as_the_live_run(run: dict[str, Any]) -> None:
    """transformers' decorator ``wrapper`` around ``GPT2Model.forward``: both name the ``forward``."""
    live = {c.compile_id: c.shown_frame for c in run["receipt"].ledger.compilations}
    assert {c.compile_id: c.shown_frame for c in run["imported"].ledger.compilations} == live
    assert {name for name, _, _ in live.values()} == {"GPT2Model.forward"}
