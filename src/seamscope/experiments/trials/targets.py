"""What a candidate is meant to remove, and whether its runs show it still there (torch-free):
the break site of the finding it answers, the failed size guards a shape policy targets, and the
value or flag guards a change for a value or flag finding targets, each as a run records it
(:class:`~seamscope.model.trials.RunFigures`: ``size_guards``, ``cause_guards`` with
``cause_counts``, ``break_sites``). A candidate whose every run still shows it is
``did not remove its target``, whatever its times say."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ...analyze.findings_churn import OBLIVIOUS_SETTING, guard_pattern, zero_one
from ...model.receipt import Receipt
from ...model.trials import RunFigures
from ..remedy_spec import parse_assignment
from .catalogue import marks_cover, source_of_guard
from .draft import Draft
from .verdicts import is_shape_policy

_GUARD = re.compile(r"tensor '(.+?)' (?:size|stride) mismatch at index (\d+)")


def guard_key(guard: str) -> tuple[str, str] | None:
    """``(tensor, index)`` of a failed size or stride guard (its values differ from run to run)."""
    m = _GUARD.search(guard)
    return (m.group(1), m.group(2)) if m else None


@dataclass(frozen=True)
class Target:
    """What a candidate is meant to remove, as a run shows it."""

    guards: Mapping[tuple[str, str], str]
    """Failed size guards the baseline showed, by ``(tensor, index)``: their text."""
    sites: frozenset[str]
    """Break site ids."""
    reasons: Mapping[str, str] = field(default_factory=dict)
    """The baseline's reason for each of ``sites``, its first line (:attr:`RunFigures.break_reasons`)."""
    causes: Mapping[tuple[str, str], str] = field(default_factory=dict)
    """Value and flag guards (``L['scale'] == 0.5``, ``L['mask'] is None``) that explained the
    baseline's recompiles, by :func:`cause_key`: their text."""
    zero_one: bool = False
    """Whether a size guard on a size first compiled as 0 or 1 counts (:func:`zero_one`): only for
    a candidate that stops PyTorch specializing those sizes; a mark or ``dynamic=True`` leaves it."""


def _size_keys(run: RunFigures, with_zero_one: bool) -> set[tuple[str, str]]:
    return {k for g in run.size_guards if (with_zero_one or not zero_one(g)) and (k := guard_key(g)) is not None}


def cause_key(guard: str) -> tuple[str, str] | None:
    """``(pattern, subject)`` of a value or flag guard, the same for every value it held
    (``L['scale'] == 0.5`` and ``== 0.7``); None for a guard of another kind."""
    pattern, subject, _ = guard_pattern(guard)
    return (pattern, subject) if pattern in ("value", "flag") else None


def value_targets(guards: list[str], base_runs: list[RunFigures]) -> dict[tuple[str, str], str]:
    """The value and flag guards among a finding's ``guards`` that explained a recompile of the
    baseline's first run (:attr:`RunFigures.cause_guards`), by :func:`cause_key`."""
    seen = {k for r in base_runs[:1] if r.ok for g in r.cause_guards if (k := cause_key(g)) is not None}
    out: dict[tuple[str, str], str] = {}
    for g in guards:
        k = cause_key(g)
        if k is not None and k in seen:
            out.setdefault(k, g.split("#", 1)[0].strip())
    return out


def cause_count(run: RunFigures, key: tuple[str, str]) -> int:
    """How many of the run's recompiles a value or flag guard of ``key`` explained (a run recorded
    without counts: one, where it explained any)."""
    texts = [g for g in run.cause_guards if cause_key(g) == key]
    return sum(run.cause_counts.get(g, 1) for g in texts)


SPECIALIZED = ("; the candidate marks that dimension, so either the mark matched no source or the compiled "
               "code needs the size's value (a branch on it, an op that specializes it), which makes it static again: "
               "padding to a few sizes, or compiling the blocks below that code, avoids it")


def _marked(guard: str, marks: Sequence[str]) -> bool:
    """Whether ``marks`` (``--mark-dynamic`` sources) mark the tensor and dimension of a size guard."""
    source = source_of_guard(guard)
    return source is not None and marks_cover(source, marks)


def kept_target(target: Target | None, runs: list[RunFigures], base_runs: Sequence[RunFigures] = (),
                marks: Sequence[str] = ()) -> str | None:
    """Why a candidate did not remove what it targeted: the same failed guard, or the same break,
    in every one of its runs (None: it did, or there is nothing to tell it by). A value the
    baseline recompiled on again and again counts as kept only where it explained as many
    recompiles in every run: a setting that makes it symbolic still recompiles on it once (its
    first value was compiled static), and a branch on it once more (``if n % 2``: odd, even). A size
    guard back on a dimension the candidate's ``marks`` mark says what can make a mark static again."""
    ok = [r for r in runs if r.ok]
    if target is None or not ok:
        return None
    for key, text in target.guards.items():
        if all(key in _size_keys(r, target.zero_one) for r in ok):
            why = SPECIALIZED if _marked(text, marks) else ""
            return f"the guard it targeted failed again in each of its {len(ok)} run(s): {text}{why}"
    for ckey, text in target.causes.items():
        base = max((cause_count(r, ckey) for r in base_runs[:1] if r.ok), default=0)
        need = base if ckey[0] == "value" and base >= 2 else 1
        if all(cause_count(r, ckey) >= need for r in ok):
            return f"the guard it targeted failed again in each of its {len(ok)} run(s): {text}"
    for site in sorted(target.sites):
        if all(site in r.break_sites for r in ok):
            was, now = target.reasons.get(site), {r.break_reasons.get(site) for r in ok}
            if was is not None and None not in now and was not in now:
                return (f"the break it targeted ({site}: {was}) is gone, but the same line still breaks in each of its "
                        f"{len(ok)} run(s), for another reason: {' / '.join(sorted(n for n in now if n))}")
            return f"the break it targeted ({site}) happened again in each of its {len(ok)} run(s)"
    return None


def target_of(d: Draft, receipt: Receipt | None, base_runs: list[RunFigures]) -> Target | None:
    """What a candidate is meant to remove, as its runs can show it: the break site of the finding
    it comes from, for a shape policy the size guards that failed in the baseline (for marks,
    those on the sources it marks; the others, a policy for every input, those of its finding),
    and for a code change answering a value or flag finding, that finding's guards."""
    findings = getattr(getattr(receipt, "findings", None), "findings", None) or []
    finding = next((f for f in findings if getattr(f, "finding_id", None) == d.origin), None)
    sites = frozenset([finding.site_id] if finding is not None and getattr(finding, "site_id", None) else [])
    oblivious = any(parse_assignment("--dynamo-config", c)[0] == OBLIVIOUS_SETTING for c in d.spec.dynamo_config)
    seen = {k: g for r in base_runs[:1] if r.ok for g in r.size_guards
            if (oblivious or not zero_one(g)) and (k := guard_key(g)) is not None}
    guards: dict[tuple[str, str], str] = {}
    if d.spec.mark_dynamic:
        marked = set(d.spec.mark_dynamic)
        guards = {k: g for k, g in seen.items() if (s := source_of_guard(g)) is not None and marks_cover(s, marked)}
    elif is_shape_policy(d.spec.flags()) and finding is not None and getattr(finding, "churn", None) is not None:
        keys = {k for g in finding.churn.guards if (k := guard_key(g)) is not None}
        guards = {k: g for k, g in seen.items() if k in keys}
    churn = getattr(finding, "churn", None)
    causes = {}  # a code change for a value or flag finding (tensor-scalar, always-pass): each recompile's cause
    if d.diff and churn is not None and getattr(churn, "pattern", None) in ("value", "flag"):
        causes = value_targets(list(churn.guards), base_runs)
    if not sites and not guards and not causes:
        return None
    reasons = {s: why for r in base_runs[:1] for s, why in r.break_reasons.items() if s in sites}
    return Target(guards=guards, sites=sites, reasons=reasons, causes=causes, zero_one=oblivious)
