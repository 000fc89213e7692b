"""The benchmarks still run (`make bench-smoke`, not `make test`): small sizes, nothing timed here
(no threshold in a test)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytest.importorskip("torch")

BENCH = os.path.join(os.path.dirname(__file__), "..", "benchmarks")


def run(script: str, *args: str) -> str:
    out = subprocess.run(
        [sys.executable, os.path.join(BENCH, script), *args],
        capture_output=True, text=True, timeout=600, check=True,
    )
    return out.stdout


@pytest.mark.torch
def test_capture_micro_prints_the_cost_per_call_and_per_crossing():
    out = run("capture_micro.py", "--calls", "2000", "--rounds", "1", "--regions", "3")
    assert "a call:" in out and "a region crossing:" in out and "capture path:" in out


@pytest.mark.torch
def test_capture_overhead_prints_both_ratios_and_the_profilers():
    out = run("capture_overhead.py", "--calls", "200", "--rounds", "2", "--size", "8")
    assert "seamscope observed" in out and "calls kept in full detail" in out
    assert "torch.profiler" in out and "µs added per region crossing" in out
    assert "regions per call (observed median 8)" in out  # every steady call crossed all 8


@pytest.mark.torch
def test_capture_overhead_training_rows_print_both_backends():
    out = run("capture_overhead.py", "--training", "--calls", "200", "--rounds", "2", "--size", "8")
    rows = [ln for ln in out.splitlines() if ln.startswith("training step:")]
    assert len(rows) == 2 and "backend eager" in rows[0] and "backend aot_eager" in rows[1]
    assert out.count("seamscope observed") == 2 and "overhead per steady call" in out


@pytest.mark.torch
def test_trace_filter_bench_prints_the_logging_share_and_the_ratios():
    out = run("trace_filter.py", "--kinds", "eager", "--rounds", "1")
    assert "eager: variant, logging / frame compile time" in out
    lines = [ln for ln in out.splitlines() if ln.strip().startswith(("plain ", "seamscope "))]
    assert len(lines) == 2 and all("% " in ln and "wall" in ln and "cpu" in ln for ln in lines)


@pytest.mark.torch
def test_checkpoint_cost_bench_prints_the_checkpoint_and_the_steady_call_ratio():
    out = run("checkpoint_cost.py", "--calls", "300", "--rounds", "1", "--repeat", "1", "--every", "0.01")
    assert "a checkpoint of the whole run so far: median" in out and "KiB" in out
    assert "steady call, no checkpoints:" in out and "ratio" in out and "share of the run's time" in out


@pytest.mark.torch
def test_watch_overhead_prints_the_ratio_and_the_memory():
    pytest.importorskip("prometheus_client")
    out = run("watch_overhead.py", "--calls", "400", "--rounds", "1", "--size", "8", "--memory", "20000")
    assert "watch on / watch off" in out and "one read of the counts" in out
    assert "memory over 20,000 watched calls" in out


def test_merge_scale_prints_time_and_memory_per_rank_count():
    out = run("merge_scale.py", "--ranks", "4,8")
    lines = [ln for ln in out.splitlines() if " ranks: merge " in ln]
    assert [ln.split()[0] for ln in lines] == ["4", "8"]
    assert all("KiB a rank" in ln and "peak" in ln and "1 skew(s)" in ln for ln in lines), out


@pytest.mark.torch
def test_dispatch_cost_prints_the_estimate_beside_the_profilers_lookup():
    pytest.importorskip("transformers")
    out = run("dispatch_cost.py", "--layers", "1", "--entries", "1", "2", "--calls", "4")
    rows = [ln for ln in out.splitlines() if ln.startswith("1 | ")]
    assert len(rows) == 2 and all(ln.count(" µs") >= 4 and "lookups)" in ln and "×" in ln for ln in rows)
