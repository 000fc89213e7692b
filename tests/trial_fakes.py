"""Fakes of a remedy trial's parts, torch-free: a run's figures from its calls' phases and walls, output
fingerprints, a candidate's draft, the runs of a stacked-candidate trial (``test_trials.py``,
``test_patches_stacked.py``)."""

from __future__ import annotations

from seamscope.experiments.remedy_spec import spec_from_words
from seamscope.experiments.trials import fingerprint as fp
from seamscope.model.trials import CallTime, RunFigures

MS = 1_000_000


def run_figures(label, phases_times, breaks=0, recompiles=0, fallbacks=0, frame_status=None, problems=()):
    """A run from ``[(phase, wall_ns), ...]``: its summary figures as a receipt would give them."""
    import statistics

    per = [CallTime(index=i, phase=p, wall_ns=int(w)) for i, (p, w) in enumerate(phases_times)]
    steady = [c.wall_ns for c in per if c.phase == "steady"]
    return RunFigures(label=label, ok=True, exit_code=0, total_ns=sum(c.wall_ns for c in per),
                      compile_ns=sum(c.wall_ns for c in per if c.phase == "cold") // 2,
                      steady_calls=len(steady), steady_median_ns=int(statistics.median(steady)) if steady else None,
                      steady_p90_ns=max(steady) if steady else None, calls=len(per), breaks=breaks,
                      recompiles=recompiles, fallbacks=fallbacks, per_call=per, frame_status=frame_status or {},
                      problems=list(problems))


def leaf(s=10.0, a=12.0, lo=-1.0, hi=3.0, dtype="torch.float32", shape=(4,)):
    return fp.Leaf(path="out", kind="tensor", dtype=dtype, shape=list(shape), sum=s, abs_sum=a, min=lo, max=hi,
                   nans=0)


def prints(*leaves):
    return fp.Fingerprints(calls=[fp.CallPrint(index=0, leaves=list(leaves))], calls_seen=1,
                           stopped_at_update=None, fingerprint_ns=0, script_ns=0)



def draft(name, words, cost=100):
    from seamscope.experiments.trials.catalogue import Draft

    return Draft(name=name, spec=spec_from_words(words), origin="F1", targets="t", cost_ns=cost)


def stack_runs(flags, k):
    """A repeated block that recompiles on sequence length: the baseline compiles four times;
    dynamic=true compiles once; regional alone hits the recompile limit (a fallback) on the same
    churn; regional with dynamic=true compiles one small block once; capture_scalar_outputs
    saves a tenth of everything. 2% jitter per run."""
    j = 1.0 + 0.02 * ((k * 7) % 3 - 1)
    words = " ".join(flags)
    scale = 0.9 if "capture_scalar_outputs" in words else 1.0
    dyn, reg = "dynamic=true" in words, "--regional" in words
    if reg and dyn:
        calls = [("cold", 200 * MS)] + [("steady", 1.0 * MS)] * 13
        return run_figures("x", [(p, w * j * scale) for p, w in calls])
    if reg:
        calls = [("cold", 300 * MS)] * 4 + [("fallback", 5.0 * MS)] + [("steady", 1.0 * MS)] * 9
        return run_figures("x", [(p, w * j) for p, w in calls], recompiles=3, fallbacks=1,
                      frame_status={"forward (s.py:1) ok": 4, "forward (s.py:1) fallback": 1})
    if dyn:
        calls = [("cold", 600 * MS)] + [("steady", 1.1 * MS)] * 13
        return run_figures("x", [(p, w * j * scale) for p, w in calls])
    calls = [("cold", 500 * MS)] * 4 + [("steady", 1.0 * MS)] * 10
    return run_figures("x", [(p, w * j * scale) for p, w in calls], recompiles=3,
                       frame_status={"forward (s.py:1) ok": 4})
