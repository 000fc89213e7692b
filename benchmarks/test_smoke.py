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
def test_census_sweep_compares_one_model_and_prints_the_summary(tmp_path):
    pytest.importorskip("transformers")
    out = run("census_sweep.py", "--only", "gpt2", "--timeout", "300", "--json", str(tmp_path / "c.json"))
    assert "[1/1] GPT2Model: compiled" in out and "models tried 1; compiled 1" in out
    assert "all compared counts equal on 1/1" in out and "transformers " in out
    import json

    (res,) = json.loads((tmp_path / "c.json").read_text())["results"]
    assert res["equal"]["compile_ids"] and res["theirs"]["compile_ids"]["ids"] == res["ours"]["compiles"]


def test_census_recipes_read_the_missing_input_and_keep_sizes_coherent():
    """The recipe rules: the input an eager error names is added; a reduced config's sizes agree."""
    pytest.importorskip("transformers")
    import sys

    sys.path.insert(0, BENCH)
    from census_recipes import _scaled, missing_inputs, reduce_config
    from transformers import AutoConfig

    assert missing_inputs("TypeError: M.forward() missing 2 required positional arguments: 'a' and 'grid_thw'") == [
        "a", "grid_thw"]
    assert missing_inputs("ValueError: You have to specify pixel_values") == ["pixel_values"]
    assert missing_inputs("ValueError: Bbox is required for horizontal relative position bias") == ["bbox"]
    assert missing_inputs("RuntimeError: shape mismatch") == []
    assert sum(_scaled([16, 24, 24], 16)) == 8 and _scaled([16, 24, 24], 16) == [2, 3, 3]
    mla = reduce_config(AutoConfig.for_model("deepseek_v3"))
    assert mla.head_dim == mla.qk_rope_head_dim and mla.num_experts_per_tok <= mla.n_routed_experts
    hybrid = reduce_config(AutoConfig.for_model("qwen3_5_text"))
    assert set(hybrid.layer_types) == {"linear_attention", "full_attention"}
    assert hybrid.num_hidden_layers == len(hybrid.layer_types)
    swin = reduce_config(AutoConfig.for_model("swinv2"))
    assert all(swin.embed_dim % h == 0 for h in swin.num_heads)


@pytest.mark.torch
def test_dispatch_cost_prints_the_estimate_beside_the_profilers_lookup():
    pytest.importorskip("transformers")
    out = run("dispatch_cost.py", "--layers", "1", "--entries", "1", "2", "--calls", "4")
    rows = [ln for ln in out.splitlines() if ln.startswith("1 | ")]
    assert len(rows) == 2 and all(ln.count(" µs") >= 4 and "lookups)" in ln and "×" in ln for ln in rows)
