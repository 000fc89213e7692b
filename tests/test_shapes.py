"""The shape study without torch: policies, the length trace, the recommendation, the receipt."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from seamscope.errors import UnusableInput
from seamscope.experiments.shapes import (
    Study,
    lengths_from_file,
    lengths_from_text,
    parse_policy,
    recommend,
    split_policies,
    study_receipt,
)
from seamscope.model.shapes import Mismatch, PolicyResult, ShapeCall, ShapeSpec


def test_policy_targets_pad_up_to_the_next_bucket():
    p2 = parse_policy("pow2")
    assert [p2.target(n) for n in (1, 5, 8, 9, 128, 129, 513)] == [1, 8, 8, 16, 128, 256, 1024]
    b = parse_policy("buckets:128,64,256")
    assert b.sizes == (64, 128, 256)
    assert [b.target(n) for n in (1, 64, 65, 256, 300)] == [64, 64, 128, 256, 300]  # above the largest: unpadded
    assert parse_policy("static").compile_options() == {"dynamic": False}
    assert parse_policy("dynamic").compile_options() == {"dynamic": True}
    assert parse_policy("auto").compile_options() == {} and not parse_policy("auto").pads


def test_mark_dynamic_forms():
    assert parse_policy("mark_dynamic").lo is None
    m = parse_policy("mark_dynamic:64:512")
    assert (m.dim, m.lo, m.hi) == (None, 64, 512) and m.in_range(64) and not m.in_range(513)
    m = parse_policy("mark_dynamic:1:64:512")
    assert (m.dim, m.lo, m.hi) == (1, 64, 512)
    with pytest.raises(UnusableInput, match="MIN 9 is above MAX 3"):
        parse_policy("mark_dynamic:9:3")


@pytest.mark.parametrize(
    "bad,msg",
    [
        ("nope", "unknown policy"),
        ("buckets:", "need sizes"),
        ("buckets:8,x", "not an integer"),
        ("buckets:0", "must be > 0"),
        ("static:3", "takes no arguments"),
        ("mark_dynamic:1:2:3:4", "expected mark_dynamic"),
    ],
)
def test_bad_policies_are_unusable_input(bad, msg):
    with pytest.raises(UnusableInput, match=msg):
        parse_policy(bad)


def test_split_policies_keeps_bucket_sizes_together():
    assert split_policies(["static,auto,buckets:64,128,256,pow2", "dynamic mark_dynamic:1:8:64"]) == [
        "static", "auto", "buckets:64,128,256", "pow2", "dynamic", "mark_dynamic:1:8:64"]


def test_lengths_text_and_files(tmp_path):
    assert lengths_from_text("128, 129,256") == [128, 129, 256]
    lines = tmp_path / "l.txt"
    lines.write_text("# prod sample\n128\n\n513  # long\n")
    assert lengths_from_file(str(lines)) == [128, 513]
    js = tmp_path / "l.json"
    js.write_text(json.dumps([3, 5, 3]))
    assert lengths_from_file(str(js)) == [3, 5, 3]
    for text, msg in [
        ("", "no lengths"),
        ("3,x", "not an integer"),
        ("3,-1", "must be positive"),
        ("0", "must be positive"),
        ("2.5", "not an integer"),
    ]:
        with pytest.raises(UnusableInput, match=msg):
            lengths_from_text(text)
    for content, msg in [
        ("[1, true]", "not an integer"),
        ('{"a": 1}', "JSON list"),
        ("[1,", "not valid JSON"),
        ("[]", "no lengths"),
    ]:
        js.write_text(content)
        with pytest.raises(UnusableInput, match=msg):
            lengths_from_file(str(js))
    with pytest.raises(UnusableInput, match="cannot read"):
        lengths_from_file(str(tmp_path / "missing.txt"))


def _res(name: str, total: int, one_time: int | None = None, steady: int | None = None, **kw) -> PolicyResult:
    return PolicyResult(policy=name, kind=kw.pop("kind", "auto"), compile_options={}, status=kw.pop("status", "ok"),
                        total_ns=total, one_time_ns=one_time, steady_per_call_ns=steady, **kw)


def test_recommendation_is_the_lowest_total_with_runner_up_and_margin():
    r = recommend([_res("static", 900), _res("auto", 500), _res("dynamic", 700)], n_calls=10)
    assert (r.policy, r.runner_up, r.margin_ns) == ("auto", "dynamic", 200)
    assert r.margin_fraction == pytest.approx(0.4)


def test_a_mismatching_or_failed_policy_is_never_recommended_even_when_cheapest():
    bad = _res("pow2", 1, correctness="boundary_bug",
               worst=Mismatch(length=5, path="out", klass="boundary_bug", reason=">= 100x the tolerance"))
    suspect = _res("buckets:8", 2, correctness="above_tolerance")
    failed = _res("static", 3, status="failed", error="boom")
    r = recommend([bad, suspect, failed, _res("auto", 50)], n_calls=4)
    assert r.policy == "auto" and r.runner_up is None
    assert any(x.startswith("pow2: outputs differ") and "length 5" in x for x in r.excluded)
    assert any(x.startswith("buckets:8") for x in r.excluded) and any(
        x.startswith("static: failed") for x in r.excluded
    )
    assert recommend([bad], 4).policy is None


def test_flip_point_from_one_time_and_steady_costs():
    # auto: cheap to start, 10 ms a call warm; dynamic: 4 s more to start, 1 ms a call warm.
    n = 100
    auto = _res("auto", 1_000_000_000 + n * 10_000_000, one_time=1_000_000_000, steady=10_000_000)
    dyn = _res("dynamic", 5_000_000_000 + n * 1_000_000, one_time=5_000_000_000, steady=1_000_000)
    r = recommend([auto, dyn], n)
    assert r.policy == "auto"
    assert (r.flip_policy, r.flip_direction, r.flip_calls) == ("dynamic", "longer", 445)  # 4e9 / 9e6 = 444.4
    assert "longer than 445 calls" in (r.flip or "") and "dynamic wins" in r.text
    # the other way round: the trace is long enough that dynamic wins; auto would in short-lived workers
    n = 1000
    auto = _res("auto", 1_000_000_000 + n * 10_000_000, one_time=1_000_000_000, steady=10_000_000)
    dyn = _res("dynamic", 5_000_000_000 + n * 1_000_000, one_time=5_000_000_000, steady=1_000_000)
    r = recommend([auto, dyn], n)
    assert (r.policy, r.flip_policy, r.flip_direction, r.flip_calls) == ("dynamic", "auto", "shorter", 444)


@given(st.lists(st.tuples(st.integers(1, 10**12), st.booleans()), min_size=1, max_size=6))
def test_recommendation_follows_the_measured_totals(rows):
    results = [
        _res(f"p{i}", t, correctness="boundary_bug" if bad else "within_tolerance") for i, (t, bad) in enumerate(rows)
    ]
    r = recommend(results, 10)
    ok = [p for p in results if p.correctness != "boundary_bug"]
    if not ok:
        assert r.policy is None
    else:
        assert r.policy == min(ok, key=lambda p: (p.total_ns, p.policy)).policy


def test_study_receipt_without_torch_round_trips(tmp_path):
    from seamscope.ingest.receipt import load_receipt
    from seamscope.render.receipt_json import write_receipt_files

    spec = ShapeSpec(workload="w.py:f", backend="eager", dim=1, trace=[4, 8, 4], repeat=1, policies=["auto", "pow2"])
    calls = [ShapeCall(index=i, length=n, padded_length=n, phase="cold" if i < 2 else "steady",
                       outcome="compile" if i < 2 else "hit", latency_ns=10 + i, compiled_variants=min(i + 1, 2))
             for i, n in enumerate([4, 8, 4])]
    study = Study(spec=spec, results=[_res("auto", 33, calls=calls), _res("pow2", 40, kind="pow2", calls=calls)])
    receipt = study_receipt(study, ["seamscope", "shapes"])
    assert receipt.shapes is not None and receipt.shapes.recommendation.policy == "auto"
    assert receipt.ledger.run.source == "shapes" and receipt.decision.call_families == {"4": 2, "8": 1}
    path = write_receipt_files(receipt, tmp_path)
    again = load_receipt(path)
    assert again.shapes == receipt.shapes


def test_plot_is_a_png(tmp_path):
    pytest.importorskip("matplotlib")
    from seamscope.render.shape_plots import write_shape_plot

    spec = ShapeSpec(workload="w.py:f", backend="eager", dim=1, trace=[4, 8], repeat=1, policies=["auto"])
    calls = [
        ShapeCall(
            index=0,
            length=4,
            padded_length=4,
            phase="cold",
            outcome="compile",
            latency_ns=5_000_000,
            compiled_variants=1,
        ),
        ShapeCall(
            index=1, length=8, padded_length=8, phase="steady", outcome="hit", latency_ns=1_000, compiled_variants=1
        ),
    ]
    study = Study(spec=spec, results=[_res("auto", 5_001_000, calls=calls)]).section()
    out = write_shape_plot(study, tmp_path / "shapes.png")
    assert out is not None and open(out, "rb").read(8) == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("args,msg", [
    (["--lengths", ""], "no lengths given"),
    (["--lengths", "4,x"], "not an integer"),
    (["--lengths", "4,-3"], "must be positive"),
    (["--lengths", "4", "--policies", "static,warp"], "unknown policy 'warp'"),
    (["--lengths", "4", "--lengths-file", "x"], "exactly one of"),
    (["--lengths", "4", "--repeat", "0"], "--repeat must be >= 1"),
])
def test_cli_bad_input_exits_2_before_running_anything(args, msg, tmp_path, capsys):
    from seamscope.cli import main

    with pytest.raises(SystemExit) as e:
        main(["shapes", "tests/workloads/shapes_tiny.py:tiny", *args, "--out", str(tmp_path / "o")])
    assert e.value.code == 2
    assert msg in capsys.readouterr().err
    assert not (tmp_path / "o" / "receipt.json").exists()


def test_without_matplotlib_the_plot_is_skipped_in_one_line(tmp_path, monkeypatch, capsys):
    import sys

    from seamscope.commands.shapes import write_plot

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # ``import matplotlib`` raises ImportError
    spec = ShapeSpec(workload="w.py:f", backend="eager", dim=1, trace=[4], repeat=1, policies=["auto"])
    calls = [ShapeCall(index=0, length=4, padded_length=4, phase="cold", outcome="compile",
                       latency_ns=5_000_000, compiled_variants=1)]
    study = Study(spec=spec, results=[_res("auto", 5_000_000, calls=calls)]).section()
    assert write_plot(study, str(tmp_path)) is None
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "plot skipped: matplotlib is not installed" in err[0]
    assert not (tmp_path / "shapes.png").exists()
