"""A trial's output checks (torch-free): each candidate's fingerprints against the baseline's first
check run and the eager run, and what the baseline's own row says.

The baseline's second check run tells whether the baseline itself is deterministic. It decides
something only for a candidate whose outputs differ from the first run's: one that equals a
baseline run within the tolerance is ``equal`` whatever another baseline run would show. So the
trial makes it only when some candidate differs (:func:`differing`), and the baseline's row says
why it did not where it did not (:func:`baseline_check`).
"""

from __future__ import annotations

from ...model.trials import OutputCheck
from . import fingerprint as fpmod
from .runs import Outcome


def differing(base: Outcome | None, checks: dict[str, Outcome]) -> list[str]:
    """The candidates whose outputs differ from the baseline's first check run (those a second
    baseline run would decide between "changes outputs" and "could not decide")."""
    if base is None or base.fingerprints is None:
        return []
    return [name for name, oc in checks.items() if name != "baseline" and oc.fingerprints is not None
            and not fpmod.compare(base.fingerprints, oc.fingerprints).equal]


def unknown_text(second: Outcome | None, stopped: str) -> str:
    """Why whether the baseline is deterministic is unknown though a candidate differs."""
    if second is not None:
        return "the baseline's second run recorded no outputs" + (
            f" ({second.figures.error})" if second.figures.error else "")
    return f"the baseline's second run, which tells whether the baseline is deterministic, did not run ({stopped})"


def output_check(cand: Outcome | None, base: fpmod.Fingerprints | None, eager: fpmod.Fingerprints | None,
                 deterministic: bool | None, unknown: str | None = None) -> OutputCheck:
    """A candidate's check against the baseline's first check run. Outputs that differ from a
    baseline that is not deterministic cannot be told from its own variation: "could not decide";
    ``unknown``: why it is not known, said beside a difference when ``deterministic`` is None."""
    if cand is None:
        return OutputCheck(status="not checked")
    if cand.fingerprints is None:
        return OutputCheck(status="failed", detail=cand.figures.error or "no fingerprints written")
    if base is None:
        return OutputCheck(status="could not decide", detail="the baseline's outputs were not recorded")
    vb = fpmod.compare(base, cand.fingerprints)
    ve = fpmod.compare(eager, cand.fingerprints) if eager is not None else None
    text_b = "equal" if vb.equal else vb.first_difference
    text_e = None if ve is None else ("equal" if ve.equal else ve.first_difference)
    if deterministic is False and not vb.equal:
        return OutputCheck(status="could not decide", vs_baseline=text_b, vs_eager=text_e,
                           calls_compared=vb.calls_compared, max_deviation=vb.max_deviation,
                           detail="the baseline is not deterministic: its two runs disagree")
    if vb.after_update:
        return OutputCheck(status="could not decide", vs_baseline=text_b, vs_eager=text_e,
                           calls_compared=vb.calls_compared, max_deviation=vb.max_deviation,
                           detail="the outputs differ only in the call that took the first optimizer step, "
                                  "after which runs differ whatever the compiler did")
    if vb.calls_compared == 0 and vb.equal:
        return OutputCheck(status="could not decide", vs_baseline=text_b, vs_eager=text_e,
                           detail="no observed call returned before the first parameter update")
    return OutputCheck(status="equal" if vb.equal else "changes outputs", vs_baseline=text_b, vs_eager=text_e,
                       calls_compared=vb.calls_compared, max_deviation=vb.max_deviation,
                       detail=unknown if deterministic is None and not vb.equal else None)


def eager_text(base: fpmod.Fingerprints | None, eager: fpmod.Fingerprints | None) -> str | None:
    if base is None or eager is None:
        return None
    c = fpmod.compare(eager, base)
    return "equal" if c.equal else c.first_difference


def baseline_check(first: Outcome | None, second: Outcome | None, eager: fpmod.Fingerprints | None,
                   deterministic: bool | None, checks: dict[str, Outcome], stopped: str) -> OutputCheck:
    """The baseline's own row: its two check runs agree (``equal``) or not (``could not decide``);
    ``not checked`` with the reason where the second run was not needed, did not run or recorded
    nothing. ``checks``: every check run of the trial; ``stopped``: what ended the trial early."""
    base_fp = first.fingerprints if first is not None else None
    vs_eager = eager_text(base_fp, eager)
    if deterministic is True:
        return OutputCheck(status="equal", vs_baseline="equal", vs_eager=vs_eager)
    if deterministic is False:
        return OutputCheck(status="could not decide", vs_baseline="the two runs disagree", vs_eager=vs_eager,
                           detail="not deterministic: the baseline's two runs disagree")
    if base_fp is None:
        return OutputCheck(status="not checked", vs_eager=vs_eager)
    if second is not None or differing(first, checks):
        detail = unknown_text(second, stopped)
    elif any(n != "baseline" and oc.fingerprints is not None for n, oc in checks.items()):
        detail = "its second run was not needed: every checked candidate's outputs equal its first run's"
    else:
        detail = "its second run was not needed: no candidate's outputs were compared with it"
    return OutputCheck(status="not checked", vs_eager=vs_eager, detail=detail)
