"""The shape study on real torch.compile runs (backend eager), each policy in its own process
(forked from the test run's one server, ``fresh_server``).

Counts are checked against PyTorch's own counters, read in each policy's process after its run
(``torch_frames_ok``), a source the live capture (``compile_count``) does not read.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest

from seamscope.errors import UnusableInput
from seamscope.experiments.shapes import parse_policy, run_study

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_server")]

TINY = "tests/workloads/shapes_tiny.py"
SEED_TRACE = [128, 129, 256, 257, 512, 513]  # lengths just past powers of two
SLOW_NS = (
    300_000_000  # each of static's 8 calls: 2.4 s planted, over twice what any policy here takes on a loaded machine
)


def _frame(compile_id: str) -> str:
    return compile_id.split("/", 1)[0]


def _counts_match_pytorch(p) -> None:
    assert p.torch_frames_ok is not None, p.policy
    assert p.compile_count == p.torch_frames_ok, (p.policy, p.compile_count, p.torch_frames_ok)
    assert p.fallback_count == p.torch_frames_total - p.torch_frames_ok, p.policy
    assert p.compilations and p.compilations[0].compile_id == "0/0", "each policy starts from a fresh Dynamo"


def _at_most_once_per_bucket(p, trace) -> None:
    buckets = {parse_policy(p.policy).target(n) for n in trace}
    per_frame = Counter(_frame(c.compile_id) for c in p.compilations if c.status == "ok")
    assert per_frame and max(per_frame.values()) <= len(buckets), (per_frame, buckets)
    seen = Counter((_frame(c.compile_id), parse_policy(p.policy).target(c.length)) for c in p.compilations
                   if c.status == "ok" and c.length is not None)
    assert max(seen.values()) == 1, seen


@pytest.fixture(scope="module")
def tiny_study(tmp_path_factory, fresh_server):
    wd = tmp_path_factory.mktemp("tiny")
    return run_study(f"{TINY}:tiny", [5, 6, 9, 17], ["static", "auto", "pow2", "mark_dynamic:4:16", "buckets:128"],
                     repeat=2, workdir=str(wd), delays={"static": SLOW_NS})


def _by(study):
    return {p.policy: p for p in study.results}


def test_each_policy_compile_count_equals_pytorch_counters(tiny_study):
    res = _by(tiny_study)
    for name in ("static", "auto", "pow2", "mark_dynamic:4:16"):
        assert res[name].status == "ok", res[name].error
        _counts_match_pytorch(res[name])
    assert res["static"].compile_count == 4 and res["static"].recompile_count == 3
    assert all("size mismatch at index 1" in c.failed_guards[0] for c in res["static"].compilations[1:])
    assert tiny_study.spec.isolation == "fork"


def test_pow2_compiles_at_most_once_per_bucket_and_pads(tiny_study):
    p = _by(tiny_study)["pow2"]
    _at_most_once_per_bucket(p, tiny_study.spec.trace)
    assert [c.padded_length for c in p.calls[:4]] == [8, 8, 16, 32]
    real, padded = 2 * (5 + 6 + 9 + 17), 2 * (8 + 8 + 16 + 32)
    assert p.padding_fraction == pytest.approx((padded - real) / padded, abs=1e-6)
    assert _by(tiny_study)["static"].padding_fraction == 0
    assert p.correctness == "within_tolerance"


def test_calls_marked_cold_then_warm_with_memory_per_new_length(tiny_study):
    p = _by(tiny_study)["static"]
    assert [c.phase for c in p.calls] == ["cold"] * 4 + ["steady"] * 4
    assert [c.length for c in p.calls] == [5, 6, 9, 17] * 2
    assert [m.length for m in p.memory] == [5, 6, 9, 17] and all(m.rss_bytes for m in p.memory)
    assert [m.compiled_variants for m in p.memory] == [1, 2, 3, 4]
    assert {s.length: s.steady_calls for s in p.lengths} == {5: 1, 6: 1, 9: 1, 17: 1}
    assert p.total_ns == sum(c.latency_ns for c in p.calls)


def test_mark_dynamic_outside_its_range_shows_the_guard_failure(tiny_study):
    p = _by(tiny_study)["mark_dynamic:4:16"]
    out = [c for c in p.compilations if c.length == 17]
    assert len(out) == 1, p.compilations
    guard = out[0].failed_guards[0]
    assert "4 <= tokens.size()[1] <= 16" in guard, guard
    assert not [c for c in p.compilations if c.length in (6, 9)], "in-range lengths reuse the marked graph"


def test_planted_slow_policy_is_not_recommended_and_unusable_padding_is_kept(tiny_study):
    res = _by(tiny_study)
    assert res["static"].total_ns >= 8 * SLOW_NS
    rec = tiny_study.section().recommendation
    ok = [p for p in tiny_study.results if p.status == "ok" and p.correctness == "within_tolerance"]
    assert rec.policy == min(ok, key=lambda p: p.total_ns).policy != "static"
    # buckets:128 pads beyond the workload's max_length 64: reported, never recommended, exit 2 kept
    b = res["buckets:128"]
    assert b.status == "unusable" and "beyond what the model accepts" in b.error
    assert isinstance(tiny_study.error, UnusableInput)
    assert any(x.startswith("buckets:128: unusable") for x in rec.excluded)


def test_recompile_limit_fallbacks_and_a_padding_mismatch(tmp_path):
    study = run_study(f"{TINY}:leaky", [5, 6, 7, 8], ["static", "pow2"], workdir=str(tmp_path), recompile_limit=2)
    res = _by(study)
    s = res["static"]
    _counts_match_pytorch(s)
    assert s.compile_count == 2 and s.fallback_count >= 1
    fb = [c for c in s.compilations if c.status != "ok"]
    assert fb and "recompile" in (fb[0].fail_reason or "").lower()
    assert "fallback" in [c.phase for c in s.calls]
    p = res["pow2"]
    assert p.correctness == "boundary_bug" and p.worst is not None  # the mean sees the padding
    rec = study.section().recommendation
    assert rec.policy == "static" and any(x.startswith("pow2: outputs differ") for x in rec.excluded)


def test_bad_dim_and_too_long_length_are_unusable_before_any_policy(tmp_path):
    with pytest.raises(UnusableInput, match="dim 4 does not exist"):
        study = run_study(f"{TINY}:tiny", [5], ["auto"], dim=4, workdir=str(tmp_path))
        raise study.error
    study = run_study(f"{TINY}:tiny", [5, 65], ["auto"], workdir=str(tmp_path))
    assert not study.results and isinstance(study.error, UnusableInput)
    assert "length 65 is beyond what the model accepts" in str(study.error)


def test_decoder_seed_trace_cli(tmp_path, capsys):
    """The bundled example on that length trace, twice; mark_dynamic's range excludes 513. The
    command runs in this process (each policy still runs in its own)."""
    from seamscope.cli import main

    out = tmp_path / "out"
    with pytest.raises(SystemExit) as e:
        main(["shapes", "src/seamscope/examples/decoder.py:workload", "--lengths", ",".join(map(str, SEED_TRACE)),
              "--repeat", "2", "--policies", "pow2,mark_dynamic:1:64:512", "--out", str(out)])
    proc = capsys.readouterr()
    assert e.value.code == 0, proc.err[-2000:]
    data = json.loads((out / "receipt.json").read_text())
    res = {p["policy"]: p for p in data["shapes"]["policies"]}
    for p in res.values():
        assert p["compile_count"] == p["torch_frames_ok"], p["policy"]
        assert p["fallback_count"] == p["torch_frames_total"] - p["torch_frames_ok"]
    pow2 = res["pow2"]
    per = Counter(
        (c["compile_id"].split("/")[0], parse_policy("pow2").target(c["length"])) for c in pow2["compilations"]
    )
    assert max(per.values()) == 1, per
    md = res["mark_dynamic:1:64:512"]
    guards = [g for c in md["compilations"] if c["length"] == 513 for g in c["failed_guards"]]
    assert any("<= 512" in g for g in guards), guards
    assert data["shapes"]["recommendation"]["policy"] in res
    assert (out / "shapes.png").exists() and (out / "policies" / "pow2" / "receipt.json").exists()
    assert "recommendation:" in proc.out


def test_transformers_gpt2_seed_trace(tmp_path):
    pytest.importorskip("transformers")
    # the seed trace's start: each length a static compilation of GPT-2, 129 and 256 one pow2 bucket
    # (the rest, 257 to 513, would be three more static compilations and no new case for pow2)
    trace = SEED_TRACE[:3]
    study = run_study("tests/workloads/shapes_hf.py:gpt2", trace, ["static", "pow2"], repeat=2, workdir=str(tmp_path))
    assert study.error is None, study.error
    res = _by(study)
    for p in res.values():
        assert p.status == "ok", p.error
        _counts_match_pytorch(p)
        assert p.correctness == "within_tolerance", p.worst
    assert res["static"].compile_count == len(set(trace)) == 3  # one per distinct length
    _at_most_once_per_bucket(res["pow2"], study.spec.trace)
