"""Remedy trials, torch-free: flags, verdicts, ranking, combining, output comparison, rendering."""

from __future__ import annotations

import html
import os
import re
import shlex

import msgspec
import pytest
from conftest import examples
from hypothesis import example, given
from hypothesis import strategies as st
from trial_fakes import MS, draft, leaf, prints, run_figures, stack_runs

from seamscope.commands.try_ import parse_budget
from seamscope.errors import UnusableInput
from seamscope.experiments.remedy_spec import (
    RemedySpec,
    check_type,
    code_change,
    compile_override,
    parse_target,
    parse_value,
    spec_from_words,
)
from seamscope.experiments.trials import fingerprint as fp
from seamscope.experiments.trials.catalogue import source_of_guard
from seamscope.experiments.trials.runs import shell_join
from seamscope.experiments.trials.verdicts import (
    combine,
    metric_verdict,
    metrics_of,
    overall,
    rank,
    recommendable,
)
from seamscope.model.trials import Candidate, OutputCheck, RunFigures, Trials, group_text
from seamscope.render.trials_table import TrialsHtmlRenderer, TrialsMarkdownRenderer

# --- flags ---------------------------------------------------------------------------------------


def test_flags_round_trip_through_the_parser():
    words = ["--dynamo-config", "capture_scalar_outputs=True", "--compile-option", "dynamic=true",
             "--mark-dynamic", "L['x']:0", "--stance", "eager_then_compile", "--disable", "m:f", "--seed", "3"]
    spec = spec_from_words(words)
    assert spec.flags() == words
    assert spec_from_words(spec.flags()) == spec
    assert not spec.is_empty() and RemedySpec().is_empty()


def test_values_and_targets():
    assert parse_value("True") is True and parse_value("false") is False and parse_value("none") is None
    assert parse_value("64") == 64 and parse_value("'unbacked'") == "unbacked"
    assert parse_target("--disable", "pkg.mod:Cls.fn") == ("pkg.mod", "Cls.fn")
    for bad in ("nomodule", "m:", ":f", "m:f-g", "1m:f"):
        with pytest.raises(UnusableInput, match="MODULE:QUALNAME"):
            parse_target("--disable", bad)


def test_compile_options_are_checked():
    assert compile_override("dynamic=true") == ("dynamic", True)
    assert compile_override("dynamic=None") == ("dynamic", None)
    assert compile_override("backend=aot_eager") == ("backend", "aot_eager")
    assert compile_override("mode=max-autotune") == ("mode", "max-autotune")
    for bad, what in (("dynamic=3", "dynamic"), ("fullgraph=yes", "fullgraph"), ("mode=fastest", "mode"),
                      ("options=1", "expected one of"), ("dynamic", "NAME=VALUE")):
        with pytest.raises(UnusableInput, match=what):
            compile_override(bad)


def test_setting_types_are_strict():
    check_type("recompile_limit", 64, 8)
    check_type("capture_scalar_outputs", True, False)
    check_type("automatic_dynamic_shapes_mark_as", "unbacked", "dynamic")
    for name, value, current in (("recompile_limit", True, 8), ("recompile_limit", "8", 8),
                                 ("capture_scalar_outputs", 1, False), ("reorderable_logging_functions", 1, set())):
        with pytest.raises(UnusableInput, match=name):
            check_type(name, value, current)


def test_code_change_reads_like_the_edit():
    spec = spec_from_words(["--compile-option", "dynamic=true", "--dynamo-config", "recompile_limit=64",
                            "--mark-dynamic", "L['x']:0", "--dynamo-config",
                            "reorderable_logging_functions+=builtins:print"])
    text = code_change(spec)
    assert "torch.compile(model, dynamic=True)" in text
    assert "torch._dynamo.config.recompile_limit = 64" in text
    assert "torch._dynamo.mark_dynamic(x, 0)" in text
    assert "reorderable_logging_functions.add(print)" in text


def test_budget():
    assert parse_budget("10m") == 600 and parse_budget("90") == 90 and parse_budget("1.5h") == 5400
    assert parse_budget(None) is None
    for bad in ("soon", "0", "-3m", "10d"):
        with pytest.raises(UnusableInput, match="--budget"):
            parse_budget(bad)


@pytest.mark.parametrize(("guard", "source"), [
    ("tensor 'x' size mismatch at index 0. expected 3, actual 4", "L['x']:0"),
    ("tensor 'input_ids' size mismatch at index 1. expected 7, actual 9", "L['input_ids']:1"),
    ("tensor 'L['self'].w' size mismatch at index 2. expected 1, actual 2", "L['self'].w:2"),
    ("L['flag'] == True", None),
])
def test_failed_guard_becomes_a_dynamic_source(guard, source):
    assert source_of_guard(guard) == source


@given(st.lists(st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"),
                        max_size=12), max_size=6))
@example(["--mark-dynamic", "L['x']:0", "it's \"q\""])
def test_shell_join_round_trips(words):
    assert shlex.split(shell_join(words)) == words


# --- verdicts ------------------------------------------------------------------------------------


def test_verdict_needs_every_ratio_on_one_side_and_beyond_the_spread():
    assert metric_verdict([0.5, 0.6, 0.55], [100, 102, 101])[0] == "faster"
    assert metric_verdict([1.5, 1.6, 1.4], [100, 102, 101])[0] == "slower"
    assert metric_verdict([0.5, 1.01, 0.6], [100, 100, 100])[0] == "no measurable change"
    # the median ratio 0.95 is within the baseline's own spread (10%)
    v, med, spread = metric_verdict([0.94, 0.95, 0.96], [100, 110, 105])
    assert v == "no measurable change" and med == pytest.approx(0.95) and spread == pytest.approx(10 / 105)
    assert metric_verdict([], [])[0] == "n/a"


@given(st.lists(st.floats(0.05, 20, allow_nan=False), min_size=1, max_size=6),
       st.lists(st.floats(1, 1e6, allow_nan=False), min_size=6, max_size=6))
def test_verdict_properties(ratios, base):
    base = base[: len(ratios)]
    v, med, spread = metric_verdict(ratios, base)
    assert med is not None and spread is not None and spread >= 0
    if v == "faster":
        assert max(ratios) < 1 and 1 - med > spread
    elif v == "slower":
        assert min(ratios) > 1 and med - 1 > spread
    else:
        assert not (max(ratios) < 1 and 1 - med > spread) and not (min(ratios) > 1 and med - 1 > spread)
    # swapping every ratio for its inverse swaps faster and slower when the spread is zero
    flat = [base[0]] * len(ratios)
    a = metric_verdict(ratios, flat)[0]
    b = metric_verdict([1 / r for r in ratios], flat)[0]
    assert {a, b} <= {"faster", "slower", "no measurable change"}
    if a == "faster":
        assert b == "slower"


def _run(label, steady, total, recompiles=0, ok=True, per_call=()):
    return RunFigures(label=label, ok=ok, exit_code=0 if ok else 1, total_ns=total, compile_ns=total // 2,
                      steady_median_ns=steady, steady_p90_ns=steady, steady_calls=10, calls=12, breaks=0,
                      recompiles=recompiles, fallbacks=0, per_call=list(per_call))


def test_metrics_pair_each_repetition_with_its_baseline():
    base = [_run("rep-1", 100, 1000), _run("rep-2", 200, 2000)]
    cand = [_run("rep-1", 50, 900, 1), _run("rep-2", 100, 1900, 3)]
    ms = {m.name: m for m in metrics_of(cand, base)}
    assert ms["steady median"].ratios == [0.5, 0.5]
    assert ms["steady median"].verdict == "n/a"  # medians over each run's own steady calls: never judged
    assert ms["total"].ratios == [0.9, 0.95]
    assert ms["total"].verdict == "noisy"  # the baseline doubled between reps
    assert ms["recompiles"].median == 2 and ms["recompiles"].min == 1 and ms["recompiles"].max == 3
    assert ms["recompiles"].verdict == "n/a"


def test_overall_verdict_follows_total_time_then_steady():
    assert overall("noisy", "no measurable change") == "no measurable change"  # the steady verdict stands beside it
    assert overall("noisy", "faster") == "faster"
    assert overall("faster", "n/a") == "faster"
    assert overall("faster", "no measurable change") == "no measurable change"
    assert overall("slower", "faster") == "faster"
    assert overall("n/a", "slower") == "slower"
    assert overall("n/a", "n/a") == "no measurable change"


def test_one_repetition_claims_no_noise_figure_and_says_it_is_a_sketch():
    """One run per side has no variation to measure: "noise 0.0%" would read as a quiet machine."""
    from seamscope.experiments.trials.verdicts import decision_text
    from seamscope.model.trials import Metric

    def cand(name, reps):
        total = Metric(name="total", median=1.0, min=1.0, max=1.0, ratios=[0.5] * reps, ratio_median=0.5,
                       baseline_spread=0.0, verdict="faster")
        return msgspec.structs.replace(_cand(name, "faster", ["--compile-option", "dynamic=true"]),
                                       metrics=[total], repetitions=reps)

    one, base = cand("dyn", 1), cand("baseline", 1)
    text, _ = decision_text(one, [one], base, None)
    assert "noise not measured: one repetition" in text and "noise 0.0%" not in text
    assert "confirm with --repeat 3" in text
    three = cand("dyn", 3)
    text, _ = decision_text(three, [three], base, None)
    assert "noise 0.0%" in text and "--repeat 3" not in text


def test_break_even_of_a_remedy_that_slows_steady_calls():
    from seamscope.experiments.trials.verdicts import break_even
    from seamscope.model.trials import Metric, Paired

    def cand(total, ratio=None, base_ns=None, total_verdict="faster", steady="slower"):
        return msgspec.structs.replace(_cand("c", "faster", []), metrics=[
            Metric(name="total", median=total, min=total, max=total, verdict=total_verdict)],
            paired=Paired(calls=5, ratio_median=ratio, baseline_ns=base_ns), steady_verdict=steady)

    text = break_even(cand(2e9, 1.5, 100_000), cand(3e9))
    assert "50 µs" in text and "20,000" in text and "paired over 5 calls" in text
    assert break_even(cand(3e9, 1.5, 100_000), cand(2e9)) == "steady calls are slower"
    # a figure its verdict did not decide is no saving and no loss to build a break-even on
    assert break_even(cand(2e9, 1.5, 100_000, total_verdict="noisy"), cand(3e9)) == "steady calls are slower"
    assert break_even(cand(2e9, 1.5, 100_000, steady="noisy"), cand(3e9)) == "steady calls are slower"


def test_a_choice_slower_at_steady_names_the_candidate_for_longer_processes():
    """A remedy chosen for its total time that slows steady calls suits a short process: the best
    recommendable candidate faster at steady is named beside it (a long training run's choice)."""
    from seamscope.experiments.trials.verdicts import for_longer_runs
    from seamscope.model.trials import Paired

    def cand(name, steady, verdict="faster", outputs="equal"):
        return msgspec.structs.replace(_cand(name, verdict, [], outputs), steady_verdict=steady,
                                       paired=Paired(calls=6, ratio_median=1.6 if steady == "slower" else 0.8))

    chosen, worse = cand("ignore-logging", "slower"), cand("changes", "faster", outputs="changes outputs")
    best, other = cand("combined", "faster"), cand("regional", "no measurable change")
    text = for_longer_runs(chosen, [chosen, worse, other, best])
    assert text is not None and "combined makes steady calls faster" in text and "0.800×" in text
    assert for_longer_runs(chosen, [chosen, worse, other]) is None  # none recommendable is faster at steady
    assert for_longer_runs(best, [best, chosen]) is None  # the choice is not slower at steady
    # nothing chosen: a candidate slower in total (its compilation) but faster at steady is named,
    # with its trade; not one that changes outputs, and not when nothing is faster at steady
    costly = msgspec.structs.replace(cand("dynamic-true", "faster", verdict="slower"),
                                     trade="pays off after about 1,732 steady calls per process")
    text = for_longer_runs(None, [cand("unbacked", "no measurable change", verdict="did not remove its target"),
                                  cand("wrong", "faster", verdict="slower", outputs="changes outputs"), costly])
    assert text is not None and text.startswith("for a long process, dynamic-true") and "1,732" in text
    assert for_longer_runs(None, [cand("wrong", "faster", verdict="slower", outputs="changes outputs")]) is None


def _cand(name, verdict, flags, outputs="equal", steady=0.5):
    from seamscope.model.trials import Metric

    return Candidate(name=name, flags=flags, origin="F1", targets="t", code_change="c", command="seamscope run",
                     verdict=verdict, outputs=OutputCheck(status=outputs),
                     metrics=[Metric(name="steady median", median=1.0, min=1.0, max=1.0, ratio_median=steady)])


def test_ranking_and_combining():
    cs = rank([
        _cand("slow", "slower", ["--stance", "eager_then_compile"], steady=1.3),
        _cand("changes", "changes outputs", ["--compile-option", "backend=m:f"], "changes outputs", steady=0.2),
        _cand("dyn", "faster", ["--compile-option", "dynamic=true"], steady=0.6),
        _cand("mark", "faster", ["--mark-dynamic", "L['x']:0"], steady=0.5),
        _cand("cso", "faster", ["--dynamo-config", "capture_scalar_outputs=True"], steady=0.7),
        _cand("failed", "failed", ["--dynamo-config", "recompile_limit=64"]),
        _cand("kept", "did not remove its target", ["--dynamo-config", "x=1"], steady=0.4),
        _cand("unmatched", "no effect", ["--mark-dynamic", "L['y']:0"], steady=0.4),
    ])
    # a candidate that did not do what it was for ranks below every one that did, even a slower one
    assert [c.name for c in cs] == ["mark", "dyn", "cso", "slow", "kept", "unmatched", "changes", "failed"]
    assert [c.rank for c in cs] == [1, 2, 3, 4, 5, 6, 7, 8]
    assert not recommendable(cs[6]) and recommendable(cs[0])
    # one shape policy only (mark-dynamic wins over dynamic=true), never a remedy that changes outputs
    assert combine(cs) == ["--mark-dynamic", "L['x']:0", "--dynamo-config", "capture_scalar_outputs=True"]
    assert combine(cs[:2]) is None


# --- outputs -------------------------------------------------------------------------------------


def test_a_one_percent_change_is_caught_and_rounding_is_not():
    base = prints(leaf())
    assert fp.compare(base, prints(leaf(s=10.0 * 1.01, a=12.0 * 1.01, lo=-1.01, hi=3.03))).equal is False
    assert fp.compare(base, prints(leaf(s=10.0 + 12.0 * 5e-6))).equal is True
    assert fp.compare(base, prints(leaf(s=10.0 + 12.0 * 2e-5))).equal is False
    # bfloat16 is allowed more
    bf = prints(leaf(dtype="torch.bfloat16"))
    assert fp.compare(bf, prints(leaf(dtype="torch.bfloat16", s=10.0 + 12.0 * 5e-3))).equal is True
    # shapes, dtypes and integers exactly
    assert not fp.compare(base, prints(leaf(shape=(5,)))).equal
    assert not fp.compare(base, prints(leaf(dtype="torch.float64"))).equal
    ints = prints(leaf(dtype="torch.int64"))
    assert not fp.compare(ints, prints(leaf(dtype="torch.int64", s=10.0 + 1e-9))).equal
    diff = fp.compare(base, prints(leaf(s=11.0)))
    assert "sum" in (diff.first_difference or "") and diff.max_deviation == pytest.approx(1 / 12)


@given(st.floats(-1e6, 1e6, allow_nan=False), st.floats(0, 1e6, allow_nan=False),
       st.floats(0, 0.5e-5, allow_nan=False))
def test_within_tolerance_is_equal(s, extra, rel):
    a = abs(s) + extra
    base = prints(leaf(s=s, a=a))
    assert fp.compare(base, prints(leaf(s=s + rel * a, a=a))).equal


def test_a_kv_cache_is_one_leaf_whatever_its_class_and_other_objects_keep_theirs():
    """A dynamic and a static ``transformers`` cache in an output (state the next call reads: its
    effect is in the logits compared) fingerprint alike; another object is still told by its class."""
    from types import SimpleNamespace

    def cls(name, module, base=object):
        return type(name, (base,), {"__module__": module})

    cache = cls("Cache", "transformers.cache_utils")
    torch = SimpleNamespace(Tensor=cls("Tensor", "torch"))

    def prints_of(obj):
        out: list = []
        fp._leaves({"logits": None, "past_key_values": obj}, "out", out, torch)
        return fp.Fingerprints(calls=[fp.CallPrint(index=0, leaves=out)], calls_seen=1, stopped_at_update=None,
                               fingerprint_ns=0, script_ns=0)

    dynamic, static = cls("DynamicCache", "transformers.cache_utils", cache), cls("StaticCache", "mylib", cache)
    assert fp.compare(prints_of(dynamic()), prints_of(static())).equal
    assert not fp.compare(prints_of(cls("DynamicCache", "mylib")()), prints_of(cls("StaticCache", "mylib")())).equal


def test_different_numbers_of_calls_differ():
    a = prints(leaf())
    b = msgspec.structs.replace(a, calls=a.calls * 2)
    c = fp.compare(a, b)
    assert not c.equal and c.max_deviation is None and "calls" in (c.first_difference or "")


# --- rendering -----------------------------------------------------------------------------------


def test_renderers_show_every_candidate_with_its_command():
    base = _cand("baseline", "no measurable change", [])
    base = msgspec.structs.replace(base, origin="baseline")
    cs = rank([_cand("cso", "faster", ["--dynamo-config", "capture_scalar_outputs=True"]),
               _cand("bad|pipe", "changes outputs", ["--stance", "force_eager"], "changes outputs")])
    t = Trials(script="s.py", args=[], seed=0, repeat=examples(2), tolerance="x", deterministic=True,
               baseline=base, candidates=cs, chosen="cso", decision="use cso", rollback_trigger="if slower")
    md = TrialsMarkdownRenderer().render(t)
    assert "| 1 | cso ✓ | faster |" in md and "bad\\|pipe" in md and "Rollback trigger" in md
    html = TrialsHtmlRenderer().render_section(t)
    assert html.count("<tr>") == 4 and "changes outputs" in html and "bad|pipe" in html


# --- the orchestration, on fake runs -------------------------------------------------------------


class _FakeRuns:
    """Stands in for one process per run: figures from the flags, a clock that advances 10 s."""

    def __init__(self, steady):
        self.steady = steady  # flags (joined) -> steady median, or None: the run crashes
        self.log = []
        self.extras = {}
        self.now = 0.0

    def clock(self):
        return self.now

    def scale(self, key, rel_dir):
        """How much this run scales its outputs (1.0: as the baseline's)."""
        return 1.01 if "scaled" in key else 1.0

    def __call__(self, setup, flags, rel_dir, label, fingerprint=False, extra=None):
        from seamscope.experiments.trials.runs import Outcome

        self.now += 10.0
        self.log.append(rel_dir)
        self.extras[rel_dir] = extra
        key = " ".join(flags) or (extra.args[0] if extra and extra.args else "")
        steady = self.steady.get(key, 100)
        if steady is None:
            return Outcome(RunFigures(label=label, ok=False, exit_code=-11, error="crashed: killed by signal SIGSEGV"),
                           None, "")
        fig = msgspec.structs.replace(_run(label, steady, steady * 100), process_ns=len(self.log) * 1000)
        out = leaf(s=10.0 * self.scale(key, rel_dir))
        fps = prints(out) if fingerprint else None
        return Outcome(fig, object(), "", fps)


def _drafts():
    from seamscope.experiments.trials.catalogue import Draft

    return [Draft(name="cso", spec=spec_from_words(["--dynamo-config", "capture_scalar_outputs=True"]), origin="F1",
                  targets="t", cost_ns=300),
            Draft(name="dyn", spec=spec_from_words(["--compile-option", "dynamic=true"]), origin="F2", targets="t",
                  cost_ns=200),
            Draft(name="limit", spec=spec_from_words(["--dynamo-config", "recompile_limit=64"]), origin="F3",
                  targets="t", cost_ns=100)]


def _trial(monkeypatch, tmp_path, steady, budget=None, extra=(), starts=(), fake=None, progress=None):
    from seamscope.experiments.trials import runs as trial_runs
    from seamscope.experiments.trials import trial as tr

    fake = fake or _FakeRuns(steady)
    monkeypatch.setattr(tr, "run_once", fake)
    monkeypatch.setattr(tr, "catalogue", lambda receipt, *_, **__: _drafts())
    monkeypatch.setattr(tr, "start_drafts", lambda receipt, *_, **__: list(starts))
    spec = trial_runs.TrialSpec(script="s.py", args=[], out=str(tmp_path), repeat=2, budget_s=budget)
    t = tr.run_trials(spec, [spec_from_words(shlex.split(e)) for e in extra], [], [],
                      trial_runs.Services(clock=fake.clock, progress=progress)).trials
    return t, fake.log


def test_repetitions_interleave_then_outputs_then_the_combined_candidate(monkeypatch, tmp_path):
    t, log = _trial(monkeypatch, tmp_path, {
        "--dynamo-config capture_scalar_outputs=True": 50,
        "--compile-option dynamic=true": 70,
        "--dynamo-config recompile_limit=64": None,
    }, extra=["--compile-option backend=m:scaled"])
    assert log[:9] == [
        "trials/baseline/rep-1", "trials/cso/rep-1", "trials/dyn/rep-1", "trials/limit/rep-1", "trials/user-1/rep-1",
        "trials/baseline/rep-2", "trials/cso/rep-2", "trials/dyn/rep-2", "trials/user-1/rep-2",
    ]
    # the baseline's second check only after user-1's outputs differed from its first
    assert log[9:15] == ["trials/baseline/check-1", "trials/eager/check", "trials/cso/check", "trials/dyn/check",
                         "trials/user-1/check", "trials/baseline/check-2"]
    assert log[15:] == ["trials/baseline/rep-3", "trials/combined/rep-3",
                        "trials/baseline/rep-4", "trials/combined/rep-4", "trials/combined/check"]
    by = {c.name: c for c in t.candidates}
    assert by["cso"].verdict == "faster" and by["dyn"].verdict == "faster"
    assert by["limit"].verdict == "failed" and "SIGSEGV" in (by["limit"].reason or "")
    assert by["user-1"].verdict == "changes outputs" and by["user-1"].outputs.status == "changes outputs"
    assert by["combined"].flags == ["--dynamo-config", "capture_scalar_outputs=True", "--compile-option",
                                    "dynamic=true"]
    assert [c.name for c in t.candidates][:2] == ["cso", "dyn"] or t.candidates[0].name == "combined"
    assert t.chosen == t.candidates[0].name and t.deterministic is True
    assert "roll back" in (t.rollback_trigger or "")
    assert log.count("trials/baseline/check-2") == 1 and t.baseline.outputs.status == "equal"
    assert t.overhead.check_process_ns == _check_ns(log)


def _check_ns(log):
    """The process time of the output runs in ``log`` (a fake run's is 1000 ns × its position)."""
    return sum((i + 1) * 1000 for i, rel in enumerate(log) if "/check" in rel)


class _Scaled(_FakeRuns):
    """Outputs scaled where ``scale(flags, folder)`` says; a KeyboardInterrupt at ``stop_at``."""

    def __init__(self, steady, scale, stop_at=None):
        super().__init__(steady)
        self.scale = scale
        self.stop_at = stop_at

    def __call__(self, setup, flags, rel_dir, label, fingerprint=False, extra=None):
        if rel_dir == self.stop_at:
            raise KeyboardInterrupt
        return super().__call__(setup, flags, rel_dir, label, fingerprint, extra)


FAST = {"--dynamo-config capture_scalar_outputs=True": 50, "--compile-option dynamic=true": 70}


def test_no_second_baseline_check_where_every_candidates_outputs_equal_its_first(monkeypatch, tmp_path):
    said = []
    t, log = _trial(monkeypatch, tmp_path, FAST, progress=said.append)
    assert "trials/baseline/check-2" not in log and t.deterministic is None
    by = {c.name: c for c in t.candidates}
    assert "combined" in by and "trials/combined/check" in log  # the second round's check too
    assert all(c.outputs.status == "equal" for c in t.candidates) and t.chosen is not None
    out = t.baseline.outputs
    assert out.status == "not checked" and out.vs_eager == "equal"
    assert out.detail == "its second run was not needed: every checked candidate's outputs equal its first run's"
    assert f"- baseline outputs: {out.detail}" in TrialsMarkdownRenderer().render(t)
    assert f"<li>baseline outputs: {html.escape(out.detail)}</li>" in TrialsHtmlRenderer().render_section(t)
    assert t.overhead.check_process_ns == _check_ns(log)
    # the runs planned are the runs made: the last timed run says so
    last = [m for m in said if "· run " in m][-1]
    k, n = last.split("· run ")[1].split(" ")[0].split("/")
    assert (int(k), int(n)) == (log.index("trials/combined/rep-4") + 1, len(log))


def test_a_differing_candidate_against_a_baseline_whose_second_run_disagrees_could_not_decide(monkeypatch, tmp_path):
    fake = _Scaled({}, lambda key, rel: 1.01 if "scaled" in key else 1.02 if rel.endswith("check-2") else 1.0)
    t, log = _trial(monkeypatch, tmp_path, FAST, extra=["--compile-option backend=m:scaled"], fake=fake)
    assert log.count("trials/baseline/check-2") == 1
    assert log.index("trials/baseline/check-2") == log.index("trials/user-1/check") + 1
    by = {c.name: c for c in t.candidates}
    assert t.deterministic is False
    assert by["user-1"].outputs.status == "could not decide" and "not deterministic" in (by["user-1"].outputs.detail
                                                                                         or "")
    # equal to a baseline run within the tolerance: equal, whatever the second run showed
    assert by["cso"].outputs.status == "equal" and by["dyn"].outputs.status == "equal"
    assert t.baseline.outputs.status == "could not decide"
    assert t.overhead.check_process_ns == _check_ns(log)


def test_a_stacked_candidate_that_differs_makes_the_second_baseline_check(monkeypatch, tmp_path):
    def scale(key, rel):
        return 1.01 if "capture_scalar_outputs" in key and "dynamic=true" in key else 1.0

    t, log = _trial(monkeypatch, tmp_path, FAST, fake=_Scaled(FAST, scale))
    assert log[-2:] == ["trials/combined/check", "trials/baseline/check-2"]
    assert log.count("trials/baseline/check-2") == 1
    by = {c.name: c for c in t.candidates}
    assert t.deterministic is True and t.baseline.outputs.status == "equal"
    assert by["combined"].outputs.status == "changes outputs" and by["combined"].verdict == "changes outputs"
    assert by["cso"].outputs.status == "equal" and t.chosen == "cso"
    assert t.overhead.check_process_ns == _check_ns(log)


def test_interrupted_before_the_second_baseline_check_keeps_the_checks_made(monkeypatch, tmp_path):
    fake = _Scaled({}, lambda key, rel: 1.01 if "scaled" in key else 1.0, stop_at="trials/baseline/check-2")
    t, log = _trial(monkeypatch, tmp_path, FAST, extra=["--compile-option backend=m:scaled"], fake=fake)
    assert t.interrupted and t.deterministic is None and "trials/baseline/check-2" not in log
    by = {c.name: c for c in t.candidates}
    assert "combined" not in by
    assert by["cso"].outputs.status == "equal" and by["dyn"].outputs.status == "equal"
    user = by["user-1"].outputs
    assert user.status == "changes outputs" and "did not run (interrupted)" in (user.detail or "")
    assert t.baseline.outputs.status == "not checked" and "did not run (interrupted)" in (t.baseline.outputs.detail
                                                                                         or "")
    assert t.overhead.check_process_ns == _check_ns(log)


def test_a_budget_leaves_the_cheapest_findings_not_tried(monkeypatch, tmp_path):
    # every run takes 10 s on the fake clock: the baseline needs 5 runs (2 timed, 3 output runs),
    # each candidate 3; 115 s leave room for two candidates
    t, log = _trial(monkeypatch, tmp_path, {}, budget=115)
    by = {c.name: c for c in t.candidates}
    assert by["cso"].status == "tried" and by["dyn"].status == "tried"
    assert by["limit"].status == "not tried" and (by["limit"].reason or "").startswith("over the budget")
    assert not any("limit" in entry for entry in log)
    assert by["cso"].verdict == "no measurable change"  # equal figures
    assert t.chosen is None and t.decision.startswith("keep the script as it is")


def test_output_check_statuses():
    from seamscope.experiments.trials.runs import Outcome
    from seamscope.experiments.trials.trial import output_check

    base, same, other = prints(leaf()), prints(leaf()), prints(leaf(s=11.0))
    ok = RunFigures(label="check", ok=True, exit_code=0)
    cand = Outcome(ok, object(), "", same)
    assert output_check(cand, base, same, True).status == "equal"
    changed = output_check(Outcome(ok, object(), "", other), base, same, True)
    assert changed.status == "changes outputs" and changed.vs_eager != "equal"
    undecided = output_check(Outcome(ok, object(), "", other), base, same, False)
    assert undecided.status == "could not decide" and "not deterministic" in (undecided.detail or "")
    # equal to the baseline's run: equal, whatever a second run of the baseline shows
    assert output_check(cand, base, same, False).status == "equal"
    crashed = Outcome(RunFigures(label="check", ok=False, exit_code=-11, error="crashed"), None, "", None)
    assert output_check(crashed, base, same, True).status == "failed"
    assert output_check(None, base, same, True).status == "not checked"
    none = fp.Fingerprints(calls=[], calls_seen=3, stopped_at_update=0, fingerprint_ns=0, script_ns=0)
    assert output_check(Outcome(ok, object(), "", none), none, none, True).status == "could not decide"
    # a training step's first call (it took the optimizer step): equal decides, a difference does not
    stepped = fp.Fingerprints(calls=[fp.CallPrint(index=0, leaves=base.calls[0].leaves, updated=True)],
                              calls_seen=3, stopped_at_update=0, fingerprint_ns=0, script_ns=0)
    drifted = fp.Fingerprints(calls=[fp.CallPrint(index=0, leaves=other.calls[0].leaves, updated=True)],
                              calls_seen=3, stopped_at_update=0, fingerprint_ns=0, script_ns=0)
    assert output_check(Outcome(ok, object(), "", stepped), stepped, stepped, True).status == "equal"
    check = output_check(Outcome(ok, object(), "", drifted), stepped, stepped, True)
    assert check.status == "could not decide" and "optimizer step" in (check.detail or "")


def test_module_of_a_source_file(tmp_path):
    from seamscope.experiments.trials.catalogue import module_of

    script = tmp_path / "train.py"
    script.write_text("")
    (tmp_path / "pkg").mkdir()
    assert module_of(str(script), str(script)) == "__main__"
    assert module_of(str(tmp_path / "pkg" / "layers.py"), str(script)) == "pkg.layers"
    assert module_of(str(tmp_path / "pkg" / "__init__.py"), str(script)) == "pkg"
    assert module_of("/x/lib/python3.11/site-packages/transformers/models/gpt2/modeling_gpt2.py",
                     str(script)) == "transformers.models.gpt2.modeling_gpt2"
    assert module_of("/elsewhere/tool.py", str(script)) is None
    assert module_of(str(tmp_path / "my-file.py"), str(script)) is None  # not importable by name
    assert module_of(str(script), f"{script}:workload") is None  # a workload's own file


# --- paired calls, noise, what a candidate breaks (fake runs with per-call figures) ----------------


class _PerCallRuns:
    """One process per run, its figures from ``make(flags, k)`` (k: the how-many-th run of those
    flags); the fake clock advances ``first_s`` for the very first run (the fork server starting),
    then ``run_s``."""

    def __init__(self, make, run_s=10.0, first_s=None):
        self.make, self.run_s, self.first_s = make, run_s, first_s
        self.count: dict[str, int] = {}
        self.now = 0.0
        self.log = []

    def clock(self):
        return self.now

    def __call__(self, setup, flags, rel_dir, label, fingerprint=False, extra=None):
        from seamscope.experiments.trials.runs import Outcome

        self.now += self.first_s if (self.first_s is not None and not self.log) else self.run_s
        self.log.append(rel_dir)
        key = " ".join(flags)
        k = self.count.get(key, 0)
        self.count[key] = k + 1
        fig = msgspec.structs.replace(self.make(flags, k), label=label, script_ns=int(self.run_s * 0.9e9))
        return Outcome(fig, object(), "", prints(leaf()) if fingerprint else None)


def _per_call_trial(monkeypatch, tmp_path, make, drafts, repeat=3, budget=None, first_s=None, max_repeat=None,
                    load=0.8):
    from seamscope.experiments.trials import load as loadmod
    from seamscope.experiments.trials import runs as trial_runs
    from seamscope.experiments.trials import trial as tr

    monkeypatch.setattr(loadmod, "load_average", lambda: load)  # the machine as measured, not this one
    monkeypatch.setattr(loadmod, "cpus", lambda: 2)

    fake = _PerCallRuns(make, first_s=first_s)
    monkeypatch.setattr(tr, "run_once", fake)
    monkeypatch.setattr(tr, "catalogue", lambda receipt, *_, **__: drafts)
    monkeypatch.setattr(tr, "start_drafts", lambda receipt, *_, **__: [])
    spec = trial_runs.TrialSpec(script="s.py", args=[], out=str(tmp_path), repeat=repeat, budget_s=budget,
                                max_repeat=max_repeat)
    t = tr.run_trials(spec, [], [], [], trial_runs.Services(clock=fake.clock)).trials
    return t, fake.log


def _gpt2_like(flags, k):
    """dynamic=False on 12 lengths then 3 repeats (the recompile limit is hit): the baseline's
    steady calls are 12 and 13 only, call 14 runs eagerly; under dynamic=true calls 1-14 are steady
    on one graph, longer inputs costing more. Per repetition a jitter of 1%."""
    j = 1.0 + 0.01 * ((k * 7) % 3 - 1)
    if not flags:  # the baseline
        calls = [("cold", 800 * MS)] + [("cold", 300 * MS)] * 11 + [
            ("steady", 1.27 * MS), ("steady", 1.05 * MS), ("fallback", 2.36 * MS)]
        return run_figures("x", [(p, w * j) for p, w in calls], recompiles=11, fallbacks=2)
    calls = [("cold", 900 * MS)] + [("steady", (1.5 + 0.1 * i) * MS) for i in range(1, 12)] + [
        ("steady", 0.93 * MS), ("steady", 1.01 * MS), ("steady", 1.98 * MS)]
    return run_figures("x", [(p, w * j) for p, w in calls])


def test_steady_calls_are_paired_when_the_candidate_has_more_of_them(monkeypatch, tmp_path):
    """The candidate's steady calls (1-14) are a superset of the baseline's (12, 13): two medians
    over them say "slower"; call by call it is as fast or faster."""
    t, _ = _per_call_trial(monkeypatch, tmp_path, _gpt2_like, [draft("dynamic-true", ["--compile-option",
                                                                                        "dynamic=true"])])
    (c,) = t.candidates
    assert c.paired is not None and c.paired.calls == 2
    assert c.paired.ratio_median == pytest.approx((0.93 / 1.27 + 1.01 / 1.05) / 2, rel=0.02)
    assert c.steady_verdict == "faster" and c.total_verdict == "faster" and t.chosen == "dynamic-true"
    assert "slower" not in t.decision
    texts = [group_text(g) for g in c.paired.unpaired]
    assert texts == ["calls 1–11: compiled (cold) in the baseline, steady here",
                     "call 14: eager fallback in the baseline, steady here: 0.84×"]
    assert "call 14: eager fallback in the baseline, steady here: 0.84×" in t.decision
    md = TrialsMarkdownRenderer().render(t)
    assert "(2 paired)" in md and "call 14: eager fallback" in md
    # the rollback trigger agrees with the chosen candidate: its own slowest steady median, which
    # is above the baseline's (over calls 12 and 13 only)
    from seamscope.analyze.units import fmt_ns

    own = max(r.steady_median_ns for r in c.runs)
    assert own > t.baseline.runs[0].steady_median_ns
    assert f"longer than {fmt_ns(own)} median per call" in t.rollback_trigger


def _equal_work(speed, outlier=None):
    """Call 0 compiles, calls 1-20 steady; the candidate runs at ``speed``× the baseline.
    ``outlier``: (flags key, repetition, call) that took 100× as long."""

    def make(flags, k):
        key = " ".join(flags)
        f = 1.0 if not flags else speed
        j = 1.0 + 0.01 * ((k * 5) % 3 - 1)
        calls = [("cold", 500 * MS * (1.0 if not flags else 0.95) * j)] + [
            ("steady", (1.0 + 0.02 * i) * MS * f * j) for i in range(1, 21)]
        if outlier is not None and outlier[:2] == (key, k):
            p, w = calls[outlier[2]]
            calls[outlier[2]] = (p, w * 100)
        return run_figures("x", calls)

    return make


def test_one_repetition_with_a_100x_outlier_moves_no_verdict(monkeypatch, tmp_path):
    """One call 100× slower in one repetition: the steady verdict (each repetition's median paired
    call) does not move; the total's interval widens, so it is never slower, and the candidate
    gets more repetitions until its interval decides."""
    flags = ["--dynamo-config", "capture_scalar_outputs=True"]
    make = _equal_work(0.8, outlier=(" ".join(flags), 1, 7))
    t, _ = _per_call_trial(monkeypatch, tmp_path, make, [draft("cso", flags)])
    (c,) = t.candidates
    assert c.paired.ratio_median == pytest.approx(0.8, rel=0.02)
    assert c.paired.worst_noise == pytest.approx(100, rel=0.05)  # seen, and said
    assert c.steady_verdict == "faster" and c.total_verdict in ("faster", "noisy") and c.repetitions == 3
    # with more repetitions the stall stays one run's: the verdict is never slower
    t, log = _per_call_trial(monkeypatch, tmp_path, make, [draft("cso", flags)], max_repeat=6)
    (c,) = t.candidates
    assert c.verdict in ("faster", "no measurable change") and c.repetitions > 3
    assert "slower" not in (c.total_verdict, c.steady_verdict) and c.steady_verdict == "faster"
    # and an outlier in the baseline
    t, _ = _per_call_trial(monkeypatch, tmp_path, _equal_work(0.8, outlier=("", 2, 3)), [draft("cso", flags)])
    assert "slower" not in (t.candidates[0].total_verdict, t.candidates[0].steady_verdict)


JITTER = (1.0, 1.3, 0.85, 1.1, 0.95, 1.05, 1.0, 1.2)


def _jittered(effects):
    """Call 0 compiles, 20 steady calls; each candidate (by its first flag's value) at its effect;
    every run's calls scaled by a per-run jitter up to 30% (both sides, out of step)."""

    def make(flags, k):
        f = effects.get(flags[1], 1.0) if flags else 1.0
        j = JITTER[(k + (3 if flags else 0)) % len(JITTER)]
        return run_figures("x", [("cold", 500 * MS * f * j)] + [("steady", 1.0 * MS * f * j)] * 20)

    return make


def test_undecided_candidates_get_more_repetitions_and_decided_ones_none(monkeypatch, tmp_path):
    fast = ["--dynamo-config", "capture_scalar_outputs=True"]
    slow = ["--compile-option", "dynamic=true"]
    make = _jittered({fast[1]: 0.75, slow[1]: 2.0})
    t3, _ = _per_call_trial(monkeypatch, tmp_path, make, [draft("cso", fast), draft("dyn", slow)])
    by3 = {c.name: c for c in t3.candidates}
    assert by3["cso"].verdict != "faster" and by3["cso"].repetitions == 3  # three runs cannot tell
    t, log = _per_call_trial(monkeypatch, tmp_path, make, [draft("cso", fast), draft("dyn", slow)],
                             max_repeat=6)
    by = {c.name: c for c in t.candidates}
    assert by["cso"].verdict == "faster" and 3 < by["cso"].repetitions <= 6
    assert by["dyn"].verdict == "slower" and by["dyn"].repetitions == 3  # decided: no more
    assert log[log.index("trials/dyn/rep-3") + 1:][:2] == ["trials/baseline/rep-4", "trials/cso/rep-4"]
    assert "trials/dyn/rep-4" not in log
    md = TrialsMarkdownRenderer().render(t)
    row = next(line for line in md.splitlines() if line.startswith("| 1 | cso"))
    assert f"| {by['cso'].repetitions} |" in row and "interval" in md


def test_a_busy_machine_is_noisy_never_slower(monkeypatch, tmp_path):
    """Every call 1×-30× slower at random in some repetitions, on both sides, the candidate no
    different: the verdict says so (noisy) and the table says why."""
    import random

    rng = random.Random(3)

    def make(flags, k):
        calls = [("cold", 500 * MS)] + [("steady", 1.0 * MS)] * 20
        return run_figures("x", [(p, w * (rng.choice([1.0, 1.0, 3.0, 30.0]))) for p, w in calls])

    flags = ["--dynamo-config", "capture_scalar_outputs=True"]
    t, _ = _per_call_trial(monkeypatch, tmp_path, make, [draft("cso", flags)], load=7.5)
    (c,) = t.candidates
    assert c.verdict in ("noisy", "no measurable change") and "slower" not in (c.steady_verdict, c.total_verdict)
    assert c.verdict == "noisy" and "the machine is busy (load average 7.5 on 2 CPU(s)" in (c.noise_note or "")
    # the same variation on a machine measured idle: said as variation, never as load
    rng.seed(3)
    t, _ = _per_call_trial(monkeypatch, tmp_path, make, [draft("cso", flags)], load=1.0)
    (c,) = t.candidates
    assert c.verdict == "noisy" and "busy" not in (c.noise_note or "")
    assert "load average 1.0 on 2 CPU(s): not from load" in (c.noise_note or "")
    assert t.chosen is None and "noisy" in t.decision
    text = TrialsMarkdownRenderer().render(t)
    assert "noisy: the same call varied" in text


def test_a_candidate_that_breaks_compilation_is_never_recommended(monkeypatch, tmp_path):
    unbacked = ["--dynamo-config", "automatic_dynamic_shapes_mark_as='unbacked'"]
    dyn = ["--compile-option", "dynamic=true"]

    def make(flags, k):
        if flags == unbacked:  # fastest of all, but 0/2 failed and the frame falls back
            return run_figures("x", [("cold", 300 * MS)] + [("steady", 0.5 * MS)] * 10, breaks=1, recompiles=3,
                          fallbacks=1, frame_status={"forward (unet.py:10) ok": 2, "forward (unet.py:10) failed": 1},
                          problems=["0/2 failed: Could not guard on data-dependent expression in forward (unet.py:10)"])
        f = 0.7 if flags == dyn else 1.0
        return run_figures("x", [("cold", 500 * MS * f)] + [("steady", 1.0 * MS)] * 10, recompiles=2,
                      frame_status={"forward (unet.py:10) ok": 3})

    t, _ = _per_call_trial(monkeypatch, tmp_path, make, [draft("unbacked", unbacked), draft("dyn", dyn)])
    by = {c.name: c for c in t.candidates}
    assert by["unbacked"].verdict == "faster" and by["unbacked"].broke == [
        "0/2 failed: Could not guard on data-dependent expression in forward (unet.py:10)"]
    assert by["unbacked"].adds == ["break sites 0 → 1", "recompiles 2 → 3"]
    assert not recommendable(by["unbacked"]) and t.chosen == "dyn"
    assert [c.name for c in t.candidates][:2] == ["dyn", "unbacked"]
    assert "combined" not in by  # never combined either
    md = TrialsMarkdownRenderer().render(t)
    assert "breaks compilation" in md and "0/2 failed: Could not guard" in md


def test_a_break_the_baseline_never_reached_is_said_though_the_count_is_the_same(monkeypatch, tmp_path):
    # a logging break removed, and the frame then traced to a backward() the baseline never reached:
    # one break site each, so only the site ids tell
    ignore = ["--dynamo-config", "ignore_logging_functions+=logging:Logger.warning"]

    def make(flags, k):
        r = run_figures("x", [("cold", (300 if flags else 500) * MS)] + [("steady", 1.0 * MS)] * 10, breaks=1)
        site = ("B2", "Unsupported Tensor.backward() call") if flags else ("B1", "Logger method not supported")
        return msgspec.structs.replace(r, break_sites=["B0", site[0]], break_reasons=dict([("B0", "print"), site]))

    t, _ = _per_call_trial(monkeypatch, tmp_path, make, [draft("ignore", ignore)])
    (c,) = t.candidates
    assert c.reached == ["B2: Unsupported Tensor.backward() call"] and c.adds == [] and c.verdict == "faster"
    assert t.chosen == "ignore"  # said, not held against it
    md = TrialsMarkdownRenderer().render(t)
    assert "ignore: a break the baseline did not reach shows in each of its runs: B2: Unsupported Tensor" in md


def test_a_candidate_that_adds_breaks_must_beat_every_clean_one():
    from seamscope.experiments.trials.verdicts import choose_best
    from seamscope.model.trials import Metric

    def cand(name, total, adds=()):
        return Candidate(name=name, flags=[], origin="F1", targets="t", code_change="c", command="c",
                         verdict="faster", outputs=OutputCheck(status="equal"), adds=list(adds),
                         metrics=[Metric(name="total", median=1.0, min=1.0, max=1.0, ratio_median=total,
                                         baseline_spread=0.05)])

    assert choose_best(rank([cand("adds", 0.76, ["break sites 5 → 11"]), cand("clean", 0.78)])).name == "clean"
    assert choose_best(rank([cand("adds", 0.5, ["break sites 5 → 11"]), cand("clean", 0.78)])).name == "adds"
    assert choose_best([cand("adds", 0.9, ["recompiles 25 → 35"])]).name == "adds"


def test_a_mark_that_matched_no_source_has_no_effect(monkeypatch, tmp_path):
    mark = ["--mark-dynamic", "L['args'][0]:2"]

    def make(flags, k):
        r = run_figures("x", [("cold", 500 * MS)] + [("steady", 1.0 * MS)] * 10)
        return msgspec.structs.replace(r, unmatched_marks=["L['args'][0]:2"] if flags else [])

    t, _ = _per_call_trial(monkeypatch, tmp_path, make, [draft("mark", mark)])
    (c,) = t.candidates
    assert c.verdict == "no effect" and c.reason == "the mark matched no source"
    assert "no effect: the mark matched no source" in TrialsMarkdownRenderer().render(t)


def test_the_budget_schedules_by_measured_run_times(monkeypatch, tmp_path):
    """The first run also starts the fork server (50 s here, 10 s each later run): estimating
    every run from it left candidates untried in a budget that had room for all of them."""
    drafts = [draft(n, ["--dynamo-config", f"recompile_limit={i}"], cost=100 - i) for i, n in
              enumerate(["a", "b", "c"], 10)]
    # the baseline: 50 + 10 (rep 2) + 30 (outputs); each candidate 3 runs: 90 s more
    t, log = _per_call_trial(monkeypatch, tmp_path, _equal_work(1.0), drafts, repeat=2, budget=185, first_s=50)
    assert all(c.status == "tried" for c in t.candidates), [(c.name, c.reason) for c in t.candidates]
    t, log = _per_call_trial(monkeypatch, tmp_path, _equal_work(1.0), drafts, repeat=2, budget=150, first_s=50)
    by = {c.name: c for c in t.candidates}
    assert by["a"].status == by["b"].status == "tried" and by["c"].status == "not tried"


def test_the_verdict_column_says_each_verdict_once():
    from seamscope.render.trials_table import verdict_cell

    c = _cand("c", "no measurable change", [])
    c = msgspec.structs.replace(c, steady_verdict="no measurable change", total_verdict="no measurable change")
    assert verdict_cell(c) == "no measurable change"
    c = msgspec.structs.replace(c, verdict="faster", total_verdict="faster", steady_verdict="no measurable change")
    assert verdict_cell(c) == "faster (steady no measurable change)"


# --- the catalogue -------------------------------------------------------------------------------


@pytest.mark.parametrize(("guard", "source"), [
    ("tensor 'args[0]' size mismatch at index 2. expected 16, actual 24", "L['args'][0]:2"),
    ("tensor 'kwargs['x']' size mismatch at index 1. expected 1, actual 2", "L['kwargs']['x']:1"),
    ("tensor '___stack0[0]' size mismatch at index 1. expected 1, actual 2", None),
    ("tensor '__resume_frame_values[2]' size mismatch at index 0. expected 1, actual 2", None),
    ("tensor 'dict.__getitem__(___stack0, list(dict.keys(___stack0))[0])' size mismatch at index 1. "
     "expected 1, actual 2", None),
])
def test_guard_sources_in_the_users_syntax(guard, source):
    assert source_of_guard(guard) == source


def _churn_receipt(findings, fallbacks=()):
    from types import SimpleNamespace as NS

    return NS(
        findings=NS(findings=findings, compile_time=None),
        ledger=NS(compilations=[], break_sites=[], environment=NS(torch_version=None)),
        summary=NS(fallback_count=len(fallbacks), fallbacks=[NS(status=st) for st in fallbacks]),
    )


def _churn(fid, cost, guards, frame="forward", pattern="shape", subjects=()):
    from types import SimpleNamespace as NS

    return NS(finding_id=fid, site_id=None, sentence=f"{fid} recompiles", cost=None, remedies=[],
              churn=NS(pattern=pattern, compile_ns=cost, guards=guards, frame_name=frame, fallback=False,
                       subjects=list(subjects)))


def test_one_candidate_per_cause_internal_sources_folded_and_capped():
    from seamscope.experiments.trials.catalogue import catalogue

    unet = _churn("FR1", 900, ["tensor 'args[0]' size mismatch at index 2. expected 16, actual 24",
                               "tensor 'args[0]' size mismatch at index 3. expected 16, actual 24"])
    internal = _churn("FR2", 500, [f"tensor '___stack0[{i}]' size mismatch at index 1. expected 1, actual 2"
                                   for i in range(5)] + [
        "tensor '__resume_frame_values[2]' size mismatch at index 0. expected 1, actual 2"], frame="attn")
    folded: list[str] = []
    ds = catalogue(_churn_receipt([unet, internal]), folded=folded)
    flags = [d.spec.flags() for d in ds]
    # one mark candidate for the cause, marking every dimension it names; nothing for ___stack0
    assert ["--mark-dynamic", "L['args'][0]:2", "--mark-dynamic", "L['args'][0]:3"] in flags
    assert not any("___stack0" in " ".join(f) or "__resume" in " ".join(f) for f in flags)
    assert any("___stack0[0]:1" in f and "folded into dynamic-true" in f for f in folded)
    assert ds[0].spec.flags() == ["--compile-option", "dynamic=true"]  # every cause's best first
    assert len(ds) == len({" ".join(f) for f in flags}) <= 8
    many = [_churn(f"FR{i}", 1000 - i, [f"tensor 'x{i}' size mismatch at index 0. expected 1, actual 2"])
            for i in range(12)]
    folded = []
    ds = catalogue(_churn_receipt(many), folded=folded)
    assert len(ds) == 8 and any("over the cap of 8" in f for f in folded)
    # by the cost of the cause: the costliest causes' marks are in, the cheapest are folded
    names = [d.name for d in ds]
    assert "mark-dynamic-x0-0" in names and not any("x11" in n for n in names)


def test_a_mark_candidate_is_named_by_its_sources_words_cut_at_a_word():
    """PyTorch's source syntax (L['kwargs'], a family's regex) is not in the name; a long name ends on
    a whole word, never a dash."""
    from seamscope.experiments.trials.catalogue import catalogue

    kv = [f"tensor 'kwargs['past_key_values'].layers[{i}].keys' size mismatch at index 2. expected 6, actual 7"
          for i in range(2)]
    f = _churn("FR1", 900, ["tensor 'kwargs['input_ids']' size mismatch at index 1. expected 6, actual 1", *kv])
    marks = [d for d in catalogue(_churn_receipt([f])) if d.spec.flags()[0] == "--mark-dynamic"]
    assert len(marks) == 1
    name = marks[0].name
    assert name.startswith("mark-dynamic-input-ids-1-past-key-values"), name
    assert len(name) <= 48 and not name.endswith("-") and "kwargs" not in name and "-l-" not in name
    # a wrapper's positional slot keeps its word: `args-0-1`, not a bare `0-1`
    pos = _churn("FR2", 900, ["tensor 'args[0]' size mismatch at index 1. expected 10, actual 14"])
    assert [d.name for d in catalogue(_churn_receipt([pos])) if d.spec.flags()[0] == "--mark-dynamic"] == [
        "mark-dynamic-args-0-1"]


def test_a_cause_that_recompiled_several_frames_gets_one_mark_candidate_for_them_all():
    """A break splits a training step into frames; one input's new size recompiles each. Marked frame
    by frame, each candidate would leave the others' recompiles: one candidate marks every frame's
    source, named by the cause; a cause of one frame keeps its own."""
    from types import SimpleNamespace as NS

    from seamscope.experiments.trials.catalogue import catalogue

    step = _churn("FR1", 100, ["tensor 'ids' size mismatch at index 0. expected 8, actual 3"], frame="train_step")
    model = _churn("FR2", 900, ["tensor 'input_ids' size mismatch at index 0. expected 8, actual 3"])
    loss = _churn("FR3", 50, ["tensor 'labels' size mismatch at index 0. expected 8, actual 3",
                              "tensor 'logits' size mismatch at index 0. expected 8, actual 3"], frame="loss")
    alone = _churn("FR4", 10, ["tensor 'mask' size mismatch at index 1. expected 4, actual 5"], frame="other")
    r = _churn_receipt([step, model, loss, alone])
    r.findings.causes = [NS(churn_finding_ids=["FR1", "FR2", "FR3"], subject="ids", dim=0, compile_ns=1050),
                         NS(churn_finding_ids=["FR4"], subject="mask", dim=1, compile_ns=10)]
    ds = catalogue(r)
    marks = {d.name: d for d in ds if d.spec.flags()[0] == "--mark-dynamic"}
    assert set(marks) == {"mark-dynamic-ids-0-in-3-frames", "mark-dynamic-mask-1"}
    both = marks["mark-dynamic-ids-0-in-3-frames"]
    assert both.spec.flags()[1::2] == ["L['ids']:0", "L['input_ids']:0", "L['labels']:0", "L['logits']:0"]
    assert both.cost_ns == 1050  # the cause's cost, not one frame's


def test_a_recompile_limit_candidate_only_for_a_frame_that_hit_the_limit():
    """A frame whose compilation failed (a data-dependent operator Dynamo gave up on) also runs
    eagerly, but no recompile limit brings it back: no candidate for it."""
    from seamscope.experiments.trials.catalogue import catalogue

    def limits(*statuses):
        return [d for d in catalogue(_churn_receipt([], statuses)) if "recompile_limit=64" in d.spec.flags()]

    assert limits("failed") == [] and limits() == []
    (hit,) = [d for d in limits("fallback", "failed") if d.spec.flags()[0] == "--dynamo-config"]
    assert hit.targets == "1 frame(s) hit the recompile limit"


def test_a_mark_whose_size_guard_comes_back_says_what_makes_a_mark_static():
    """A ViT that interpolates its position embeddings branches on the image's height: the mark on
    that dimension is made static again and the same size guard fails. The note says what can do
    that, only for a dimension the candidate marks."""
    from seamscope.experiments.trials.targets import Target, guard_key, kept_target

    g = "tensor 'kwargs['pixel_values']' size mismatch at index 2. expected 32, actual 48"
    key = guard_key(g)
    assert key is not None
    target = Target(guards={key: g}, sites=frozenset())
    run = RunFigures(label="rep-1", ok=True, exit_code=0, size_guards=[g])
    marked = kept_target(target, [run], marks=["L['kwargs']['pixel_values']:2"])
    assert marked is not None and "makes it static again" in marked and marked.startswith("the guard it targeted")
    plain = kept_target(target, [run], marks=["L['kwargs']['pixel_values']:3"])
    assert plain is not None and "static again" not in plain


def test_a_global_state_flag_has_no_candidate_and_says_why():
    from types import SimpleNamespace

    from seamscope.experiments.trials.catalogue import catalogue

    gs = _churn("FR1", 100, ["GLOBAL_STATE changed: autocast(cpu)_enabled"], pattern="flag",
                subjects=["global state autocast(cpu)_enabled"], frame="inner")
    gs.churn.user_frame = SimpleNamespace(function="Sequential.forward")  # torch's inner wraps the module
    folded: list[str] = []
    assert catalogue(_churn_receipt([gs]), folded=folded) == []
    assert any("global state (autocast, grad mode)" in x and "hoist" not in x for x in folded), folded
    assert any("in Sequential.forward)" in x for x in folded), folded


def test_compile_sites_are_read_from_the_script(tmp_path):
    from seamscope.experiments.trials.catalogue import compile_sites

    script = tmp_path / "gpt2_static.py"
    script.write_text("import torch\n\nm = torch.nn.Linear(2, 2)\nf = torch.compile(m, dynamic=False)\n"
                      "@torch.compile\ndef g(x):\n    return x\n")
    assert compile_sites(str(script)) == ["gpt2_static.py:4", "gpt2_static.py:5"]
    assert compile_sites(str(tmp_path / "missing.py")) == []


def test_a_mark_that_leaves_another_dimension_changing_gets_a_candidate_marking_both(monkeypatch, tmp_path):
    """A guard names only the first dimension that changed (height); marked, the run recompiles on
    the next (width): one more candidate marks both."""
    mark = ["--mark-dynamic", "L['sample']:2"]

    def make(flags, k):
        r = run_figures("x", [("cold", 500 * MS)] + [("steady", 1.0 * MS)] * 4)
        if flags == mark:
            return msgspec.structs.replace(r, size_guards=["tensor 'sample' size mismatch at index 3. expected 16, "
                                                           "actual 24"])
        return r

    t, log = _per_call_trial(monkeypatch, tmp_path, make, [draft("mark", mark)], repeat=2)
    by = {c.name: c for c in t.candidates}
    assert by["mark-all"].flags == ["--mark-dynamic", "L['sample']:2", "--mark-dynamic", "L['sample']:3"]
    assert log[:3] == ["trials/baseline/rep-1", "trials/mark/rep-1", "trials/mark-all/rep-1"]
    assert "trials/mark-all/rep-2" in log and "trials/mark-all/check" in log
    assert "still recompiled on L['sample']:3" in by["mark-all"].targets


def test_one_repetition_of_two_paired_calls_gives_no_steady_verdict():
    from seamscope.experiments.trials.verdicts import paired_verdict

    assert paired_verdict(10.9, [10.9], None, calls=2) == "n/a"  # one outlier's to move
    assert paired_verdict(10.9, [10.9], None, calls=3) == "slower"
    assert paired_verdict(0.5, [0.5, 0.52], 0.01, calls=2) == "faster"  # minima over repetitions
    assert paired_verdict(0.9, [0.9, 0.9], 0.5, calls=20) == "noisy"
    assert paired_verdict(0.5, [0.5, 0.5], 0.4, calls=20) == "faster"  # an effect beyond the noise


def test_the_code_change_names_the_torch_compile_call():
    from seamscope.experiments.trials.trial import change_at

    sites = ["gpt2_static.py:10"]
    assert change_at(spec_from_words(["--compile-option", "dynamic=true"]), sites) == (
        "pass dynamic=True to torch.compile at gpt2_static.py:10")
    text = change_at(spec_from_words(["--dynamo-config", "recompile_limit=64"]), sites)
    assert text == "torch._dynamo.config.recompile_limit = 64 (before the torch.compile call at gpt2_static.py:10)"
    assert change_at(spec_from_words(["--disable", "m:f"]), sites) == "@torch.compiler.disable on f (m)"
    assert change_at(spec_from_words(["--compile-option", "dynamic=true"]), []) == "torch.compile(model, dynamic=True)"
    # a stacked spec names every part: the options of regional compilation go to each block's compile
    both = spec_from_words(["--regional", "Block", "--compile-option", "dynamic=true"])
    assert change_at(both, sites) == ("compile each Block instead of the whole model (block.compile(dynamic=True)) "
                                      "(in place of the torch.compile call at gpt2_static.py:10)")
    assert change_at(both, []) == "compile each Block instead of the whole model (block.compile(dynamic=True))"
    text = change_at(spec_from_words(["--compile-option", "dynamic=true", "--guard-filter", "skip_all_guards_unsafe"]),
                     sites)
    assert "dynamic=True" in text and "guard_filter_fn" in text, text


# --- compile-time candidates that change how a process starts: warm caches, compile threads -------


def _cache_receipt(fx=None, aot=None, backend="inductor"):
    """A fake run whose one compilation had these cache outcomes (None: the backend uses no cache)."""
    from fakes import fake_receipt

    r = fake_receipt()
    comps = [msgspec.structs.replace(c, fx_cache=fx, aot_cache=aot, dynamo_ns=(c.duration_ns or 0) // 2,
                                     aot_ns=(c.duration_ns or 0) // 2) for c in r.ledger.compilations]
    env = msgspec.structs.replace(r.ledger.environment, backend=backend)
    return msgspec.structs.replace(r, ledger=msgspec.structs.replace(r.ledger, compilations=comps, environment=env))


def test_start_candidates_are_skipped_with_the_reason_where_the_backend_uses_no_cache():
    from seamscope.experiments.trials.cache import start_drafts

    folded = []
    assert start_drafts(_cache_receipt(backend="aot_eager"), folded, cpu_count=2, env={}) == []
    assert folded[0].startswith("warm cache: the baseline's compilations used no persistent cache (backend aot_eager")
    assert folded[1].startswith("compile threads: backend aot_eager compiles no kernels in parallel")


def test_start_candidates_under_inductor(tmp_path):
    from seamscope.experiments.trials.cache import WARM_ARTIFACTS, WARM_DIR, start_drafts

    r = _cache_receipt(fx="miss", aot="miss")
    folded = []
    art = tmp_path / "a.bin"
    ds = start_drafts(r, folded, artifacts_file=str(art), cpu_count=2, env={})
    assert [d.name for d in ds] == [WARM_DIR, "compile-threads-1"]  # no artifacts saved: not tried
    assert ds[0].start == WARM_DIR and ds[0].spec.flags() == [] and ds[0].cost_ns > 0
    assert ds[1].env == {"TORCHINDUCTOR_COMPILE_THREADS": "1"} and "2 → 1" in ds[1].targets
    assert any(f.startswith("warm cache artifacts: the baseline's first run saved none") for f in folded)
    art.write_bytes(b"x")
    ds = start_drafts(r, [], artifacts_file=str(art), cpu_count=8, env={"TORCHINDUCTOR_COMPILE_THREADS": "1"})
    assert [d.name for d in ds] == [WARM_DIR, WARM_ARTIFACTS, "compile-threads-8"]
    folded = []
    assert [d.name for d in start_drafts(r, folded, cpu_count=1, env={})] == [WARM_DIR]
    assert "compile_threads is already 1" in folded[-1]


def test_only_and_skip_reach_the_candidates_without_flags():
    from seamscope.experiments.trials.cache import start_drafts
    from seamscope.experiments.trials.catalogue import choose

    ds = start_drafts(_cache_receipt(fx="miss"), [], cpu_count=2, env={}) + _drafts()
    assert [d.name for d in choose(ds, ["warm"], [])] == ["warm-cache-dir"]
    assert "compile-threads-1" not in [d.name for d in choose(ds, [], ["compile-threads"])]
    assert [d.name for d in choose(ds, ["capture_scalar"], [])] == ["cso"]  # flags still match as before
    # the start of a long name (the table cuts it): a flag candidate's name is no part of its flags
    assert [d.name for d in choose(ds, ["warm-cache-d"], [])] == ["warm-cache-dir"]
    assert [d.name for d in choose(ds, ["cs"], [])] == ["cso"] and choose(ds, ["so"], []) == []


def _traded(compile_ns, ratio=None, base_ns=None, steady="n/a", name="c", flags=("--x", "1"), compile_verdict=None,
            ci=(None, None)):
    from seamscope.model.trials import Metric, Paired

    verdict = compile_verdict or ("faster" if compile_ns < 6e9 else "slower")
    return msgspec.structs.replace(
        _cand(name, "faster", list(flags)), steady_verdict=steady,
        metrics=[Metric(name="compile", median=compile_ns, min=compile_ns, max=compile_ns, verdict=verdict,
                        ci_low=ci[0], ci_high=ci[1])],
        paired=None if ratio is None else Paired(calls=4, ratio_median=ratio, baseline_ns=base_ns,
                                                 candidate_ns=None if base_ns is None else base_ns * ratio))


def test_the_trade_states_compile_saved_steady_change_and_the_lifetime_that_pays():
    from seamscope.experiments.trials.cache import trade_text
    from seamscope.model.trials import Paired

    base = _traded(6e9, name="baseline", flags=())
    # a warm cache: steady unchanged within the noise, compile cut: pays from the first restart
    warm = trade_text(_traded(1e9, 1.01, 1e6, "no measurable change", "warm-cache-dir", ()), base)
    assert warm.startswith("compile time saved 5 s per process start (6 s → 1 s)")
    assert "paired over 4 call(s), no measurable change" in warm
    assert "pays off from the first restart" in warm and "about 5,000 steady calls" in warm
    # compile cut, steady calls slower: pays for processes up to saved / lost calls
    slow = trade_text(_traded(1e9, 1.5, 1e6, "slower"), base)
    assert "pays off for processes of up to about 10,000 steady calls" in slow
    # compile added, steady calls faster: pays after added / gained calls
    fast = trade_text(_traded(7e9, 0.5, 1e6, "faster"), base)
    assert fast.startswith("compile time added 1 s") and "pays off after about 2,001 steady calls" in fast
    none = trade_text(_traded(7e9), base)
    assert "no call steady in both to pair" in none and "does not pay off" in none
    # a compile time within the noise is its interval, never a saving; a steady time slower as
    # measured (within the noise) never stands beside "pays off from the first call"
    noisy = trade_text(_traded(4e9, 1.3, 1e6, "noisy", compile_verdict="noisy", ci=(0.31, 1.9)), base)
    assert noisy.startswith("compile time per process start 6 s → 4 s (noisy, interval 0.31–1.90×)")
    assert "saved" not in noisy and noisy.endswith("whether it pays off is not known: the timings were too noisy "
                                                   "to tell"), noisy
    first = trade_text(msgspec.structs.replace(
        _traded(4e9, 1.3, 1e6, "noisy"), paired=Paired(calls=4, ratio_median=1.3, baseline_ns=1e6, candidate_ns=1.3e6,
                                                        ci_low=0.8, ci_high=2.1)), base)
    assert "(1.300×, paired over 4 call(s), noisy, interval 0.80–2.10×)" in first, first
    assert first.startswith("compile time saved 2 s") and "from the first call" not in first, first
    assert trade_text(_traded(1e9), msgspec.structs.replace(base, metrics=[])) is None


def test_a_warm_cache_candidate_reads_what_the_baselines_first_run_filled(monkeypatch, tmp_path):
    """GIVEN a warm-directory and a compile-threads candidate, WHEN the trial runs on fakes, THEN
    the baseline's first run fills (and saves artifacts for) the warm directory, the warm
    candidate's timed and output runs read it, the threads candidate's runs get its environment,
    the commands reproduce that, and neither is folded into the combined candidate."""
    from seamscope.experiments.trials.cache import WARM_DIR, warm_paths
    from seamscope.experiments.trials.catalogue import Draft

    starts = [Draft(name=WARM_DIR, spec=RemedySpec(), origin="compile time", targets="t", start=WARM_DIR),
              Draft(name="compile-threads-1", spec=RemedySpec(), origin="compile time", targets="t",
                    env={"TORCHINDUCTOR_COMPILE_THREADS": "1"})]
    fake = _FakeRuns({"--dynamo-config capture_scalar_outputs=True": 50, "--compile-option dynamic=true": 70})
    t, log = _trial(monkeypatch, tmp_path, None, starts=starts, fake=fake)
    cache, artifacts = warm_paths(str(tmp_path))
    first = fake.extras[os.path.join("trials", "baseline", "rep-1")]
    assert first.cache_dir == cache and first.args == ["--save-cache-artifacts", artifacts]
    for rel in ("rep-1", "rep-2", "check"):
        assert fake.extras[os.path.join("trials", WARM_DIR, rel)].cache_dir == cache
        assert fake.extras[os.path.join("trials", "compile-threads-1", rel)].env == {
            "TORCHINDUCTOR_COMPILE_THREADS": "1"
        }
    assert fake.extras[os.path.join("trials", "baseline", "rep-2")] is None  # every other run: an empty cache
    by = {c.name: c for c in t.candidates}
    assert by[WARM_DIR].start == WARM_DIR and by[WARM_DIR].command.startswith(f"TORCHINDUCTOR_CACHE_DIR={cache} ")
    assert "TORCHINDUCTOR_COMPILE_THREADS=1 seamscope run" in by["compile-threads-1"].command
    assert "TORCHINDUCTOR_CACHE_DIR on storage that outlives the process" in by[WARM_DIR].code_change
    assert by[WARM_DIR].trade is not None and by[WARM_DIR].trade.startswith("compile time ")
    combined = by.get("combined")
    assert combined is None or combined.flags == ["--dynamo-config", "capture_scalar_outputs=True",
                                                  "--compile-option", "dynamic=true"]


def test_a_compile_cut_threefold_is_faster_though_millisecond_calls_vary_on_a_busy_machine(monkeypatch, tmp_path):
    """GIVEN a whole-model compile of 10 s (5% apart between repetitions) against a regional one of
    3 s, and steady calls of 1 ms that a busy machine stretched 3× in every other repetition on both sides,
    WHEN judged, THEN the total time is faster: its noise is what the calls making up the total
    vary by (weighted by their time), not what the millisecond calls vary by."""
    def make(flags, k):
        cold = (3.0 if flags else 10.0) * 1000 * MS * (1.0 + 0.05 * (k % 2))
        return run_figures("x", [("cold", cold)] + [("steady", MS * (3.0 if (k + i) % 2 else 1.0)) for i in range(4)])

    flags = ["--regional", "Block"]
    t, _ = _per_call_trial(monkeypatch, tmp_path, make, [draft("regional", flags)], repeat=2)
    (c,) = t.candidates
    total = next(m for m in c.metrics if m.name == "total")
    assert c.paired.noise > 0.25  # the steady calls alone: too noisy to judge
    assert total.baseline_spread < 0.1 and total.verdict == "faster" and c.verdict == "faster"
    assert t.chosen == "regional" and "the trade: compile time saved" in t.decision


def test_the_artifacts_candidate_starts_empty_and_loads_what_the_first_run_saved(tmp_path):
    from seamscope.experiments.trials.cache import (
        WARM_ARTIFACTS,
        env_prefix,
        extra_for,
        prime_extra,
        warm_paths,
    )
    from seamscope.experiments.trials.catalogue import Draft
    from seamscope.experiments.trials.runs import TrialSpec
    from seamscope.experiments.trials.trial import reproduce_command

    cache, artifacts = warm_paths(str(tmp_path))
    os.makedirs(cache)
    (tmp_path / "trials" / "warm-cache" / "compile-cache" / "stale").write_text("x")
    first = prime_extra(str(tmp_path))
    assert os.listdir(cache) == []  # a trial before in the same folder leaves no warm entry behind
    assert first.args == ["--save-cache-artifacts", artifacts]
    d = Draft(name=WARM_ARTIFACTS, spec=RemedySpec(), origin="compile time", targets="t", start=WARM_ARTIFACTS)
    extra = extra_for(d, str(tmp_path))
    assert extra.cache_dir is None and extra.args == ["--load-cache-artifacts", artifacts]
    assert env_prefix(extra) == 'TORCHINDUCTOR_CACHE_DIR="$(mktemp -d)" '
    cmd = reproduce_command([], TrialSpec(script="s.py", args=[], out=str(tmp_path)), d.name, extra)
    assert f"seamscope run --out {tmp_path}/trials/{WARM_ARTIFACTS}/rep-1 --load-cache-artifacts {artifacts}" in cmd
    assert extra_for(Draft(name="x", spec=RemedySpec(), origin="o", targets="t"), str(tmp_path)) is None


def test_without_a_warm_start_candidate_the_warm_cache_folder_is_removed(monkeypatch, tmp_path):
    t, _ = _trial(monkeypatch, tmp_path, {"--dynamo-config capture_scalar_outputs=True": 50})
    assert t.candidates and not (tmp_path / "trials" / "warm-cache").exists()


# --- marks that cover a family of sources --------------------------------------------------------


def test_a_guard_on_one_cache_layer_marks_every_layer_with_one_regex():
    import re

    from seamscope.experiments.trials.catalogue import catalogue, family

    src = "L['kwargs']['cache'].layers[0].keys:2"
    pat = family(src)
    assert pat is not None and "," not in pat and " " not in pat
    name, _, dim = pat.rpartition(":")
    assert dim == "2"
    for member in ("L['kwargs']['cache'].layers[0].keys", "L['kwargs']['cache'].layers[11].values"):
        assert re.match(name, member)
    for other in ("L['kwargs']['cache'].layers[1].keys_scale", "L['kwargs']['other'].layers[0].keys", "L['x']"):
        assert not re.match(name, other)
    assert family("L['args'][0]:2") is None and family("L['x']:0") is None  # arguments, not a family
    kv = _churn("FR1", 900, ["tensor 'kwargs['cache'].layers[0].keys' size mismatch at index 2. expected 5, "
                             "actual 6"])
    marks = [d for d in catalogue(_churn_receipt([kv])) if d.spec.mark_dynamic]
    assert len(marks) == 1 and marks[0].spec.mark_dynamic == (pat,)
    # the printed change is one assignment a user can paste
    change = code_change(marks[0].spec)
    assert change.count("dynamic_sources =") == 1 and change.startswith('torch.compiler.config.dynamic_sources = r"')
    assert eval(change.split(" = ", 1)[1]) == pat
    # and the terminal prints it as written (rich would read each backslash before "[" as an escape)
    from rich.console import Console

    from seamscope.analyze.display import markup

    console = Console(highlight=False, width=400)
    with console.capture() as cap:
        console.print(markup(change))
    assert cap.get().strip() == change
    two = code_change(spec_from_words(["--mark-dynamic", "L['x']:0", "--mark-dynamic", "L['y']:1"]))
    assert two == ("torch.compiler.config.dynamic_sources = \"L['x']:0,L['y']:1\"  # or "
                   "torch._dynamo.mark_dynamic(x, 0); torch._dynamo.mark_dynamic(y, 1)")


def test_a_family_mark_that_leaves_another_dimension_changing_is_followed_by_the_family_on_both(monkeypatch,
                                                                                                tmp_path):
    from seamscope.experiments.trials.catalogue import family

    pat = family("L['cache'].layers[0].keys:2")
    mark = ["--mark-dynamic", pat]

    def make(flags, k):
        r = run_figures("x", [("cold", 500 * MS)] + [("steady", 1.0 * MS)] * 4)
        if flags == mark:
            return msgspec.structs.replace(r, size_guards=["tensor 'cache.layers[3].values' size mismatch at index 1. "
                                                           "expected 1, actual 2"])
        return r

    t, _ = _per_call_trial(monkeypatch, tmp_path, make, [draft("mark", mark)])
    both = next(c for c in t.candidates if c.name == "mark-all")
    assert both.flags[::2] == ["--mark-dynamic"] * 2
    assert sorted(both.flags[1::2]) == sorted([pat, pat.rpartition(":")[0] + ":1"])
    assert both.code_change.count("dynamic_sources =") == 1


def test_the_budget_goes_first_to_the_compile_time_candidates_of_a_compile_dominated_run(monkeypatch, tmp_path):
    """The baseline's compilations cost far more than its recompiles: under a budget for two
    candidates the warm cache and compile threads run, the cheap recompile remedies are not
    tried, each saying how much more budget would try it."""
    from seamscope.experiments.trials.cache import WARM_DIR
    from seamscope.experiments.trials.catalogue import Draft

    starts = [Draft(name=WARM_DIR, spec=RemedySpec(), origin="compile time", targets="t", start=WARM_DIR,
                    cost_ns=20_000),
              Draft(name="compile-threads-1", spec=RemedySpec(), origin="compile time", targets="t",
                    env={"TORCHINDUCTOR_COMPILE_THREADS": "1"}, cost_ns=20_000)]
    t, log = _trial(monkeypatch, tmp_path, {}, budget=115, starts=starts)
    by = {c.name: c for c in t.candidates}
    assert by[WARM_DIR].status == "tried" and by["compile-threads-1"].status == "tried"
    for name in ("cso", "dyn", "limit"):
        assert by[name].status == "not tried" and "more --budget would try it" in (by[name].reason or "")


def test_every_cause_gets_a_candidate_or_a_reason_and_a_type_switch_is_not_the_value_cause():
    from types import SimpleNamespace as NS

    from seamscope.experiments.trials.catalogue import catalogue

    value = _churn("FRV", 8_400, ["t == 999"], frame="unet", pattern="value", subjects=["t"])
    typed = _churn("FRT", 900, ["___check_type_id(t, 1398), type=<class 'int'>"], frame="unet", pattern="type",
                   subjects=["t"])
    count = _churn("FRL", 50, ["len(L['kwargs']) == 2"], pattern="value", subjects=["len(L['kwargs'])"])
    brk = NS(finding_id="B1", site_id=None, sentence="break", cost=NS(estimated_ns=10), churn=None,
             remedies=[NS(action="read_hints", text="read the hints", config={})])
    folded: list[str] = []
    ds = catalogue(_churn_receipt([value, typed, count, brk]), folded=folded)
    by_origin = {d.origin: d for d in ds}
    assert by_origin["FRV"].spec.flags() == ["--compile-option", "dynamic=true"]  # the int churn's candidate
    assert "FRT" not in by_origin and "FRL" not in by_origin and "B1" not in by_origin
    (t_line,) = [f for f in folded if f.startswith("none: FRT")]
    assert "type switch" in t_line and "0-d tensor" not in t_line
    assert any(f.startswith("none: FRL") for f in folded) and any(f.startswith("none: B1") for f in folded)


def test_winners_are_stacked_and_a_remedy_that_failed_alone_is_retried_with_the_one_that_removes_its_cause(
        monkeypatch, tmp_path):
    reg = draft("regional", ["--regional", "Block"], cost=900)
    dyn = draft("dyn", ["--compile-option", "dynamic=true"], cost=800)
    cso = draft("cso", ["--dynamo-config", "capture_scalar_outputs=True"], cost=700)
    t, log = _per_call_trial(monkeypatch, tmp_path, stack_runs, [reg, dyn, cso])
    by = {c.name: c for c in t.candidates}
    assert by["regional"].broke and not recommendable(by["regional"])
    def pairs(c):
        return sorted(zip(c.flags[::2], c.flags[1::2], strict=True))

    assert pairs(by["combined"]) == sorted([("--compile-option", "dynamic=true"),
                                            ("--dynamo-config", "capture_scalar_outputs=True")])
    retried = by["regional+dyn"]
    assert pairs(retried) == sorted([("--regional", "Block"), ("--compile-option", "dynamic=true")])
    assert not retried.broke
    assert retried.verdict == "faster" and t.chosen == "regional+dyn"
    assert "trials/regional+dyn/check" in log and "stacked remedies" in t.decision
    # without the remedy that failed alone: the stacked winners beat either single one
    t, _ = _per_call_trial(monkeypatch, tmp_path, stack_runs, [dyn, cso])
    assert t.chosen == "combined" and "the best single one, dyn" in t.decision


def test_the_top_receipt_is_the_chosen_runs_with_the_trials_decision(tmp_path):
    from fakes import fake_receipt, fake_trials

    from seamscope.experiments.trials.trial import top_receipt
    from seamscope.model.hashing import receipt_sha256
    from seamscope.model.trials import RunFigures
    from seamscope.render.receipt_json import write_receipt_files

    # GIVEN trials whose chosen candidate's first good run wrote a receipt (the baseline's did too)
    trials = fake_trials()
    run = {n: RunFigures(label="rep-1", ok=True, exit_code=0, receipt=f"trials/{n}/rep-1/receipt.json")
           for n in ("baseline", "cso")}
    for n in run:
        write_receipt_files(fake_receipt(), tmp_path / "trials" / n / "rep-1")
    failed = RunFigures(label="rep-0", ok=False, exit_code=1, receipt="trials/cso/nope/receipt.json")
    cso = msgspec.structs.replace(trials.candidates[0], runs=[failed, run["cso"]])
    trials = msgspec.structs.replace(trials, candidates=[cso],
                                     baseline=msgspec.structs.replace(trials.baseline, runs=[run["baseline"]]))
    # WHEN the top receipt is made  THEN it carries the trial's decision record, hashed again
    top = top_receipt(trials, str(tmp_path))
    assert top is not None and top.decision is not None
    d = top.decision
    assert d.intervention == "c (seamscope try: cso; seamscope run)" and d.note == "use cso"
    assert (d.rollback_trigger, d.tolerance) == ("if slower", "x")
    assert top.receipt_sha256 == receipt_sha256(msgspec.structs.replace(top, receipt_sha256=""))
    # nothing chosen: the baseline's, with no intervention; no run wrote one: None
    none_chosen = top_receipt(msgspec.structs.replace(trials, chosen=None), str(tmp_path))
    assert none_chosen is not None and none_chosen.decision is not None and none_chosen.decision.intervention is None
    bare = msgspec.structs.replace(
        trials, chosen=None, baseline=msgspec.structs.replace(trials.baseline, runs=[failed])
    )
    assert top_receipt(bare, str(tmp_path)) is None


def test_a_row_the_total_decided_says_only_the_steady_calls_could_not_tell():
    """A/A on sub-millisecond calls: the total rules out a change, the steady calls vary by half
    between fresh processes. The row is ``no measurable change``; its note must not call the
    total's interval too wide."""
    from seamscope.experiments.trials.verdicts import noise_text
    from seamscope.model.trials import Metric

    total = Metric(name="total", median=1.2e9, min=1.0e9, max=1.5e9, ci_low=0.78, ci_high=1.21)
    text = noise_text(3.15, 1.05, None, "load average 0.6 on 2 CPU(s)", total, steady_only=True)
    assert text.startswith("the steady calls alone cannot tell: the same call varied 3.15×")
    assert "0.78–1.21× decides the row" in text and "too wide" not in text
    assert "too wide to tell" in noise_text(3.15, 1.05, None, "", total)
    assert overall("noisy", "no measurable change") == "no measurable change"


def test_a_code_change_candidate_is_never_the_remedy_a_failed_one_is_retried_with():
    """A code-change candidate is its patch and has no flags: retrying X "with" it would run X
    alone under a name that says both (seen: ``user-1+tensor-where`` ran ``--patch mine.patch``)."""
    from seamscope.experiments.trials.verdicts import retries
    from seamscope.model.trials import Metric, OutputCheck

    def cand(name, flags, verdict, recompiles, origin="F1"):
        return Candidate(name=name, flags=flags, origin=origin, targets="t", code_change="c", command="x",
                         verdict=verdict, outputs=OutputCheck(status="equal"),
                         metrics=[Metric(name="recompiles", median=recompiles, min=recompiles, max=recompiles)])

    base = [RunFigures(label="rep-1", ok=True, exit_code=0, recompiles=3)]
    x = cand("user-1", ["--patch", "mine.patch"], "noisy", 3, origin="user")
    code = cand("tensor-where", [], "faster", 0, origin="code change")
    flag = cand("dyn", ["--compile-option", "dynamic=true"], "faster", 0)
    assert retries([x, code], base) == []
    assert [(a.name, b.name, f) for a, b, f in retries([x, code, flag], base)] == [
        ("user-1", "dyn", ["--patch", "mine.patch", "--compile-option", "dynamic=true"])]


def _faster(name, flags, verdict="faster", recompiles=0.0):
    from seamscope.model.trials import Metric

    return Candidate(name=name, flags=flags, origin="F1", targets="t", code_change="c", command="x",
                     verdict=verdict, outputs=OutputCheck(status="equal"),
                     metrics=[Metric(name="recompiles", median=recompiles, min=recompiles, max=recompiles)])


def test_the_combined_candidate_names_only_the_remedies_it_holds():
    """The decision once named dynamic-true beside the mark it conflicts with, which was left out
    of the stack."""
    from seamscope.experiments.trials.trial import combined_names
    from seamscope.experiments.trials.verdicts import combine

    ranked = [_faster("mark", ["--mark-dynamic", "L['x']:1"]), _faster("dyn", ["--compile-option", "dynamic=true"]),
              _faster("cso", ["--dynamo-config", "capture_scalar_outputs=True"])]
    combo = combine(ranked)
    assert combo is not None and "dynamic=true" not in combo
    assert combined_names(ranked, combo) == ["mark", "cso"]


def test_a_mark_is_not_stacked_with_regional_compilation_dynamic_true_is():
    """Seen on a Llama recompiling on length: regional + the mark on the model's ``input_ids`` were
    stacked, and the blocks regional compiles take ``hidden_states``: the mark matched no frame and
    the patch carried a dead ``dynamic_sources`` line. dynamic=true stacks with regional; the mark
    stacks with anything else, and no retry pairs a mark with regional either."""
    from seamscope.experiments.trials.trial import combined_names
    from seamscope.experiments.trials.verdicts import combine, retries

    regional = _faster("regional", ["--regional", "LlamaDecoderLayer"])
    mark = _faster("mark", ["--mark-dynamic", "L['input_ids']:1"])
    dyn = _faster("dyn", ["--compile-option", "dynamic=true"])
    combo = combine([regional, mark, dyn])
    assert combo == ["--regional", "LlamaDecoderLayer", "--compile-option", "dynamic=true"]
    assert combined_names([regional, mark, dyn], combo) == ["regional", "dyn"]
    assert combine([mark, regional, dyn]) is None  # dynamic=true is the mark's own policy: nothing stacks
    cso = _faster("cso", ["--dynamo-config", "capture_scalar_outputs=True"])
    assert combine([mark, regional, cso]) == ["--mark-dynamic", "L['input_ids']:1", *cso.flags]

    base = [RunFigures(label="rep-1", ok=True, exit_code=0, recompiles=3)]
    churned = _faster("regional", ["--regional", "LlamaDecoderLayer"], verdict="noisy", recompiles=8.0)
    assert [(x.name, y.name) for x, y, _ in retries([mark, churned], base)] == []
    assert [(x.name, y.name) for x, y, _ in retries([mark, dyn, churned], base)] == [("regional", "dyn")]


def test_what_stayed_stable_says_each_count_once():
    """A noisy candidate that adds recompiles: ``recompiles 1 → 2`` (with the baseline's), not
    that and ``recompiles 2`` again; the counts it does not add are said plainly."""
    from seamscope.experiments.trials.verdicts import stable_text
    from seamscope.model.trials import Metric

    counts = [Metric(name=n, median=v, min=v, max=v) for n, v in (("recompiles", 2.0), ("fallbacks", 0.0),
                                                                    ("breaks", 1.0))]
    c = msgspec.structs.replace(_cand("dyn", "noisy", ["--compile-option", "dynamic=true"]),
                                metrics=counts, adds=["recompiles 1 → 2", "break sites 0 → 1"])
    assert stable_text(c) == "recompiles 1 → 2, break sites 0 → 1, fallbacks 0"


@pytest.mark.parametrize("stacked_ratio, chosen", [(0.689, "dyn"), (0.40, "regional+dyn")])
def test_a_stack_is_recommended_only_where_it_beats_the_best_single_one_beyond_its_noise(stacked_ratio, chosen):
    """Seen on a BART under generate: regional attention retried with dynamic=true, 0.689×, ranked
    above dynamic=true alone, 0.696× (noise 12.9%), and was recommended: more change for no time
    measured. The simpler change is recommended, and the decision says why the stack was not."""
    from seamscope.experiments.trials.verdicts import choose_best, decision_text
    from seamscope.model.trials import Metric

    def cand(name, ratio, origin="F1"):
        total = Metric(name="total", median=ratio, min=ratio, max=ratio, ratio_median=ratio, baseline_spread=0.129)
        return Candidate(name=name, flags=["--compile-option", "dynamic=true"], origin=origin, targets="t",
                         code_change=f"change {name}", command="x", verdict="faster",
                         outputs=OutputCheck(status="equal"), metrics=[total])

    ranked = rank([cand("regional+dyn", stacked_ratio, origin="retried"), cand("dyn", 0.696)])
    best = choose_best(ranked)
    assert best is not None and best.name == chosen
    text, _ = decision_text(best, ranked, cand("baseline", 1.0), True)
    assert ("regional+dyn (t) was not measurably faster than dyn alone" in text) is (chosen == "dyn")
    assert ("stacked remedies" in text) is (chosen != "dyn")


def test_an_item_of_a_dict_subclass_is_marked_by_the_source_dynamo_builds_it_from():
    """BART under generate: the guards name ``kwargs['encoder_outputs']['last_hidden_state']`` and
    Dynamo's ``dict.__getitem__(...)`` form of the same tensor; a mark on the first matched nothing.
    The candidate marks the second's container's items (one regex, no comma or space), and that
    mark covers the first name too (its target)."""
    from seamscope.experiments.trials.catalogue import _marks, dict_items, marks_cover

    box = "kwargs['encoder_outputs']"
    guards = [f"tensor '{box}['last_hidden_state']' size mismatch at index 1. expected 8, actual 12",
              f"tensor 'dict.__getitem__({box}, list(dict.keys({box}))[0])' size mismatch at index 1. expected 8, "
              "actual 12"]
    regex = r"dict\.__getitem__\(L\['kwargs'\]\['encoder_outputs'\].*:1"
    assert _marks(guards) == ([regex], [])
    assert "," not in regex and " " not in regex
    built = "dict.__getitem__(L['kwargs']['encoder_outputs'], list(dict.keys(L['kwargs']['encoder_outputs']))[0])"
    assert re.match(regex[:-2], built)  # what dynamic_sources does with it (re.match)
    assert marks_cover("L['kwargs']['encoder_outputs']['last_hidden_state']:1", [regex])
    assert not marks_cover("L['kwargs']['encoder_outputs']['last_hidden_state']:2", [regex])
    assert not marks_cover("L['kwargs']['input_ids']:1", [regex])
    assert dict_items("dict.__getitem__(a, list(dict.keys(b))[0]):1") is None  # two containers: not an item
