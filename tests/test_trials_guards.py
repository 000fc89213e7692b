"""The guard settings PyTorch names ``_unsafe`` as ``try`` candidates (torch-free): which dispatch
finding gives which candidate, the check run's verdict on fingerprints, the trial's wiring on fake
runs, and how the table marks them."""

from __future__ import annotations

from types import SimpleNamespace as NS

import msgspec
import pytest
from trial_fakes import MS, leaf, run_figures

from seamscope.errors import UnusableInput
from seamscope.experiments.remedy_spec import code_change, spec_from_words
from seamscope.experiments.trials import fingerprint as fp
from seamscope.experiments.trials.guard_check import REPLAY, guard_check
from seamscope.model.trials import Candidate, GuardCheck, OutputCheck, ProbeResult, Trials
from seamscope.render.trials_table import TrialsMarkdownRenderer, notes, verdict_cell

FILTER = ["--guard-filter", "skip_guard_on_all_nn_modules_unsafe"]


# --- the flags ---------------------------------------------------------------------------------


def test_guard_flags_round_trip_and_read_as_the_code_change():
    spec = spec_from_words([*FILTER, "--skip-guard-eval-unsafe-after", "5"])
    assert spec.flags() == [*FILTER, "--skip-guard-eval-unsafe-after", "5"] and spec.unsafe()
    assert not spec_from_words(["--compile-option", "dynamic=true"]).unsafe()
    text = code_change(spec)
    assert "options={'guard_filter_fn': torch.compiler.skip_guard_on_all_nn_modules_unsafe}" in text
    assert "set_stance('default', skip_guard_eval_unsafe=True) after the first 5 calls" in text
    assert text.count("unsafe:") == 2
    with pytest.raises(UnusableInput, match="is not a valid integer"):
        spec_from_words(["--skip-guard-eval-unsafe-after", "warm"])


def test_a_guard_setting_runs_as_its_flags_and_stacks_with_no_second_filter(tmp_path):
    from seamscope.experiments.trials.patches import spec_patch
    from seamscope.experiments.trials.verdicts import conflict_key

    script = tmp_path / "s.py"
    script.write_text("import torch\nf = torch.compile(lambda x: x + 1)\nf(torch.ones(2))\n")
    assert spec_patch(spec_from_words(["--compile-option", "dynamic=true"]), str(script)) is not None
    # stacked with a flag that has a patch, the patch would run without the filter: flags instead
    assert spec_patch(spec_from_words([*FILTER, "--compile-option", "dynamic=true"]), str(script)) is None
    assert conflict_key(*FILTER) == conflict_key("--guard-filter", "keep_tensor_guards_unsafe") is not None


# --- the catalogue -----------------------------------------------------------------------------


def _receipt(checks, entries=(2,), phases=("cold", "steady", "cold", "steady", "steady"), estimate=5 * MS,
             wall=100 * MS):
    frames = [NS(entries=[object()] * n) for n in entries]
    dispatch = NS(estimate_ns=estimate, guard_checks=checks, frames=frames, finding_id="DP1",
                  sentence="dispatch: ...")
    calls = [NS(index=i, phase=p) for i, p in enumerate(phases)]
    return NS(findings=NS(findings=[], compile_time=None, dispatch=dispatch),
              ledger=NS(compilations=[], break_sites=[], calls=calls, environment=NS(torch_version="2.13.0")),
              summary=NS(fallback_count=0, fallbacks=[], call_count=len(calls), phases=[NS(wall_ns=wall)]))


def test_the_dispatch_finding_gives_the_guard_settings_that_fit_it():
    from seamscope.experiments.trials.catalogue import catalogue

    modules = _receipt({"module": 60, "global": 30, "tensor": 10})
    ds = catalogue(modules)
    by = {d.name: d for d in ds}
    # module attributes dominate: the module filters, all of them first, then inbuilt; several entries:
    # the stance after the warm-up (the calls up to the last that compiled: calls 0-2)
    assert list(by) == ["skip-guard-on-all-nn-modules-unsafe", "skip-guard-eval-unsafe-after-3-calls",
                        "skip-guard-on-inbuilt-nn-modules-unsafe"]
    assert by["skip-guard-on-all-nn-modules-unsafe"].spec.flags() == FILTER
    assert by["skip-guard-eval-unsafe-after-3-calls"].spec.flags() == ["--skip-guard-eval-unsafe-after", "3"]
    assert all(d.spec.unsafe() and "unsafe" in d.name and "unsafe" in d.targets for d in ds)
    assert "60 of the 100 guard checks are on nn.Module attributes" in by["skip-guard-on-all-nn-modules-unsafe"].targets
    # tensors dominate, one cache entry: nothing fits
    assert catalogue(_receipt({"module": 10, "tensor": 60}, entries=(1,))) == []
    # no call after the last compilation: no warm-up to skip after
    assert catalogue(_receipt({"tensor": 60}, phases=("cold", "cold"))) == []
    # no dispatch cost estimated (an imported log): no candidate
    assert catalogue(_receipt({"module": 60}, estimate=0)) == []
    # a saving under 3% of the run (its compilation outweighs it) could not show: folded, with why
    folded: list[str] = []
    assert catalogue(_receipt({"module": 60}, wall=200 * MS), folded=folded) == []
    assert folded == ["none: DP1 (dispatch): its estimate over the run, 5 ms, is under 3% of the run's 200 ms: a "
                      "guard setting could not show a saving here; a run with more steady calls, or --candidate "
                      "\"--guard-filter NAME\", tries one"]


# --- the check run's verdict -------------------------------------------------------------------


def _probes(*pairs, note=None):
    """Fingerprints whose probes are ``(label, sum or an error text)``."""
    probes = [fp.Probe(label=label, kind="attribute", error=v) if isinstance(v, str)
              else fp.Probe(label=label, kind="attribute", leaves=[leaf(s=v)]) for label, v in pairs]
    return fp.Fingerprints(calls=[], calls_seen=0, stopped_at_update=None, fingerprint_ns=0, script_ns=0,
                           probes=None if note else probes, probe_note=note)


def test_the_check_run_names_what_a_candidate_broke():
    base = _probes(("Net.scale: 1.0 → 2.0", 20.0), ("dim 0 of x: 4 → 5", 25.0),
                   ("dtype of x: float32 → float64", "RuntimeError: mat1 and mat2 must have the same dtype"))
    same = _probes(("Net.scale: 1.0 → 2.0", 20.0), ("dim 0 of x: 4 → 5", 25.0),
                   ("dtype of x: float32 → float64", "RuntimeError: mat1 and mat2 must have the same dtype"))
    kept = guard_check(base, same)
    assert kept.status == "kept every recompile"
    assert [r.outcome for r in kept.probes] == ["recompiled", "recompiled", "not applicable"]
    stale = guard_check(base, _probes(("Net.scale: 1.0 → 2.0", 10.0), ("dim 0 of x: 4 → 5", 25.0),
                                      ("dtype of x: float32 → float64", "RuntimeError: x")))
    assert stale.status == "broke a recompile" and stale.broke == "kept a stale graph when Net.scale changed 1.0 → 2.0"
    raised = guard_check(base, _probes(("Net.scale: 1.0 → 2.0", 20.0),
                                       ("dim 0 of x: 4 → 5", "RuntimeError: Recompilation triggered"),
                                       ("dtype of x: float32 → float64", "RuntimeError: x")))
    assert raised.broke == "raised when dim 0 of x changed 4 → 5 (RuntimeError: Recompilation triggered)"
    trained = _probes(note="the script updated parameters (an optimizer step)")
    assert guard_check(trained, same).status == "could not check"
    assert "updated parameters" in (guard_check(base, trained).detail or "")
    assert guard_check(base, None, "exit 1: boom").detail == "the candidate's check run recorded nothing (exit 1: boom)"
    only_na = _probes(("dtype of x: float32 → float64", "RuntimeError: y"))
    assert guard_check(only_na, only_na).status == "could not check"
    missing = guard_check(base, _probes(("Net.scale: 1.0 → 2.0", 20.0)))
    assert missing.status == "could not check" and "missing" in [r.outcome for r in missing.probes]
    # the control: the last call again, unchanged; where it differs already, nothing is judged
    replayed = _probes((REPLAY, 5.0), ("Net.scale: 1.0 → 2.0", 20.0))
    assert guard_check(replayed, _probes((REPLAY, 5.0), ("Net.scale: 1.0 → 2.0", 20.0))).status == \
        "kept every recompile"
    drift = guard_check(replayed, _probes((REPLAY, 6.0), ("Net.scale: 1.0 → 2.0", 20.0)))
    assert drift.status == "could not check" and "unchanged, did not give the baseline's outputs (stale" in drift.detail
    # stale already on the script's own last call, and on a change made on purpose: that change is named
    both = guard_check(replayed, _probes((REPLAY, 6.0), ("Net.scale: 1.0 → 2.0", 10.0)))
    assert both.broke == "kept a stale graph when Net.scale changed 1.0 → 2.0"
    assert guard_check(base, same, deterministic=False).status == "could not check"


# --- the table ---------------------------------------------------------------------------------


def _cand(name, check, verdict="faster"):
    return Candidate(name=name, flags=FILTER, origin="DP1", targets="t", code_change="c", command="seamscope run",
                     verdict=verdict, outputs=OutputCheck(status="equal"), unsafe=True, guard_check=check,
                     broke=[check.broke] if check is not None and check.broke else [])


def test_an_unsafe_candidate_is_marked_and_recommended_only_when_its_check_kept_every_recompile():
    from seamscope.experiments.trials.verdicts import choose_best, decision_text, rank, recommendable

    ok = GuardCheck(status="kept every recompile",
                    probes=[ProbeResult(label="Net.scale: 1.0 → 2.0", outcome="recompiled")])
    bad = GuardCheck(status="broke a recompile", broke="kept a stale graph when Net.scale changed 1.0 → 2.0",
                     probes=[ProbeResult(label="Net.scale: 1.0 → 2.0", outcome="stale", detail="out: sum")])
    unknown = GuardCheck(status="could not check", detail="the baseline's check run made no probe")
    good, broke, unsure = _cand("good", ok), _cand("broke", bad), _cand("unsure", unknown)
    assert recommendable(good) and not recommendable(broke) and not recommendable(unsure)
    assert not recommendable(_cand("unchecked", None))
    assert verdict_cell(good) == "faster · unsafe"
    assert verdict_cell(broke) == "faster · unsafe · breaks a needed recompile"
    ranked = rank([broke, unsure])
    assert choose_best(ranked) is None
    base = Candidate(name="baseline", flags=[], origin="baseline", targets="t", code_change="c", command="c")
    why, _ = decision_text(None, ranked, base, True)
    assert "broke was faster but is not recommended: unsafe, it kept a stale graph when Net.scale changed" in why
    assert "unsure was faster but is not recommended: unsafe, and its check run could not tell" in why
    evidence, _ = decision_text(good, [good], base, True)
    assert "unsafe (it drops guards): every change its check run made gave the baseline's outputs " \
           "(Net.scale: 1.0 → 2.0)" in evidence
    t = Trials(script="s.py", args=[], seed=0, repeat=1, tolerance="t", deterministic=True, baseline=base,
               candidates=[good, broke], chosen="good", decision="d", rollback_trigger=None)
    lines = notes(t)
    assert "broke: unsafe (drops guards): its check run caught it: it kept a stale graph when Net.scale changed " \
           "1.0 → 2.0: never recommended" in lines
    assert sum("kept a stale graph" in ln for ln in lines) == 1  # said once, not again as a compile change
    assert "good: unsafe (drops guards): every change its check run made gave the baseline's outputs " \
           "(Net.scale: 1.0 → 2.0)" in lines
    assert "faster · unsafe · breaks a needed recompile" in TrialsMarkdownRenderer().render(t)


# --- the trial's wiring, on fake runs ----------------------------------------------------------


class _Runs:
    """One process per run: the candidate is faster and its script's outputs equal the baseline's;
    only a change its dropped guard protected (the probe) shows its stale graph."""

    def __init__(self):
        self.log, self.now = [], 0.0

    def clock(self):
        return self.now

    def __call__(self, runner, flags, rel_dir, label, fingerprint=False, extra=None, probe=False):
        from seamscope.experiments.trials.runs import Outcome

        self.now += 10.0
        self.log.append((rel_dir, probe))
        wall = (50 if flags else 100) * MS
        fig = run_figures(label, [("cold", 500 * MS)] + [("steady", wall)] * 5)
        fps = None
        if fingerprint:
            pr = [fp.Probe(label=REPLAY, kind="replay", leaves=[leaf()]),
                  fp.Probe(label="Net.scale: 1.0 → 2.0", kind="attribute", leaves=[leaf(s=10.0 if flags else 20.0)])]
            fps = msgspec.structs.replace(fp.Fingerprints(calls=[fp.CallPrint(index=0, leaves=[leaf()])], calls_seen=1,
                                                          stopped_at_update=None, fingerprint_ns=0, script_ns=0),
                                          probes=pr if probe else None)
        return Outcome(fig, object(), "", fps)


def test_the_check_runs_probe_and_a_stale_candidate_is_never_chosen(monkeypatch, tmp_path):
    from seamscope.experiments.trials import runs as trial_runs
    from seamscope.experiments.trials import trial as tr
    from seamscope.experiments.trials.draft import Draft

    runs = _Runs()
    drafts = [Draft(name="skip-guard-on-all-nn-modules-unsafe", spec=spec_from_words(FILTER), origin="DP1",
                    targets="t", cost_ns=100)]
    monkeypatch.setattr(tr, "run_once", runs)
    monkeypatch.setattr(tr, "catalogue", lambda receipt, *_, **__: list(drafts))
    monkeypatch.setattr(tr, "start_drafts", lambda receipt, *_, **__: [])
    spec = trial_runs.TrialSpec(script="s.py", args=[], out=str(tmp_path), repeat=2)
    t = tr.run_trials(spec, [], [], [], trial_runs.Services(clock=runs.clock)).trials
    probed = {rel for rel, probe in runs.log if probe}
    assert probed == {"trials/baseline/check-1", "trials/skip-guard-on-all-nn-modules-unsafe/check"}
    (c,) = t.candidates
    assert c.verdict == "faster" and c.outputs.status == "equal" and c.unsafe  # the script's calls show nothing
    assert c.guard_check is not None and c.guard_check.broke == "kept a stale graph when Net.scale changed 1.0 → 2.0"
    assert t.chosen is None and "unsafe, it kept a stale graph" in t.decision


# --- the settings in a run (torch) -------------------------------------------------------------


@pytest.mark.torch
def test_the_stance_switches_after_the_warm_up_and_a_missing_filter_is_one_line(monkeypatch, dynamo_reset):
    torch = pytest.importorskip("torch")
    from seamscope.capture.guard_settings import GuardSettings
    from seamscope.experiments.remedy_plan import prepare

    session = NS(warnings=[], options={})
    session.note_compile_setting = session.options.__setitem__
    guards = GuardSettings(session, None, 2, None)
    f = guards.track(torch.compile(lambda x: x * 2, backend="eager"))
    try:
        f(torch.ones(3))
        f(torch.ones(3))  # the warm-up's last call: guard evaluation is skipped from here on
        with pytest.raises(RuntimeError, match="Recompilation triggered with skip_guard_eval_unsafe stance"):
            f(torch.ones(5))  # PyTorch refuses the recompile a new shape needs
    finally:
        guards.undo()
    assert session.options == {"skip_guard_eval_unsafe": "True after 2 calls (stance 'default')"}
    assert torch.equal(f(torch.ones(5)), torch.full((5,), 2.0))  # the stance set back: it recompiles
    from seamscope.capture import adapter  # the module a check run changes: from what torch.compile returned

    m = torch.nn.Linear(2, 2)
    assert adapter.compiled_module(torch.compile(m)) is m and adapter.compiled_module(torch.compile(m.forward)) is m
    assert adapter.compiled_module(f) is None
    monkeypatch.delattr(torch.compiler, "skip_guard_on_all_nn_modules_unsafe")
    with pytest.raises(UnusableInput, match="^--guard-filter skip_guard_on_all_nn_modules_unsafe: "
                       "guard-filter-unavailable: torch .* has no torch.compiler.skip_guard_on_all_nn_modules_unsafe$"):
        prepare(spec_from_words(FILTER), "s.py")
