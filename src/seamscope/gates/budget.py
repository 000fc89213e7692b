"""Compile budgets: what ``torch.compile`` may do inside a block of code, checked on exit.

``fullgraph=True`` and ``set_stance("fail_on_recompile")`` stop at the first event and say little.
A budget says what is allowed, where and in which phase, lets the code run to the end, and then
lists every offending break site and recompile with its evidence.

Definitions (the words of docs/conventions.md):

- ``breaks=N``: at most N distinct break *sites* (a site crossed a thousand times counts once) that
  are not allow-listed. A site counts when a call in scope crossed it, or when a compilation made
  during such a call broke at it.
- ``recompiles=N``: at most N compilations with ``y > 0`` (compile id ``x/y``: a guard failed) made
  during calls in scope, attempts that hit the recompile limit or failed included. First compilations
  (``x/0``) are never counted: compiling is allowed.
- ``fallbacks=N``: at most N frame compilations that ended in eager execution (compile failure,
  recompile limit) during calls in scope.
- ``phase``: which calls are in scope. ``None``: every call made inside the budget. ``"steady"``:
  from the first call that only hit the cache (a ``steady`` call) to the end; the warm-up before it
  may compile, recompile and break freely. ``"cold"``: the warm-up only (the calls before the
  first steady call).
- ``allow``: break sites accepted as they are, each a site id (``B`` + 8 hex, as receipts and
  findings name it), ``"file:line"`` (the site's innermost user frame) or ``"file"``; a path matches
  by its trailing components (``"decoder.py:25"`` matches ``src/pkg/decoder.py`` line 25).

Every call of a callable compiled with ``torch.compile`` is observed, wherever it was compiled
(inside the budget, in a fixture of any scope, at import time). A budget fails, saying why, rather
than pass on nothing: when no compiled call was observed in it (one compiled inside it with
``torch._dynamo.optimize``, or through an earlier reference to ``torch.compile``, is not), or when
``breaks`` is limited and a call ran only graphs compiled *and run* before the budget began (their
breaks were made before it; docs/budgets.md).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ..model.ledger import BreakEvent, Call, Compilation, FallbackEvent, Ledger, RegionEvent

BudgetPhase = Literal["steady", "cold"]
PHASES = ("steady", "cold", None)


class BudgetUsageError(ValueError):
    """A budget that cannot be checked as written (bad limit, unknown phase, bad allow entry)."""


class BudgetExceeded(AssertionError):
    """The code inside the budget did more than the budget allows (or could not be checked).

    An ``AssertionError`` so that every test runner reports it as a plain test failure.
    """

    def __init__(self, message: str, result: BudgetResult) -> None:
        super().__init__(message)
        self.result = result


@dataclass(frozen=True)
class Budget:
    """What is allowed; ``None`` for a limit means "not limited"."""

    breaks: int | None = None
    recompiles: int | None = None
    fallbacks: int | None = None
    phase: BudgetPhase | None = None
    allow: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name in ("breaks", "recompiles", "fallbacks"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
                raise BudgetUsageError(f"{name}={v!r}: a budget limit is a whole number >= 0 (or None)")
        if self.phase not in PHASES:
            raise BudgetUsageError(
                f"phase={self.phase!r}: unknown phase (use \"steady\", \"cold\" or None for every call)"
            )
        if isinstance(self.allow, str) or not isinstance(self.allow, (tuple, list)):
            raise BudgetUsageError(
                f"allow={self.allow!r}: a list of site ids, \"file:line\" or \"file\" strings"
            )
        for a in self.allow:
            if not isinstance(a, str) or not a.strip():
                raise BudgetUsageError(
                    f"allow entry {a!r}: a site id (B + 8 hex), \"file:line\" or \"file\" string"
                )
        object.__setattr__(self, "allow", tuple(self.allow))
        if self.breaks is None and self.recompiles is None and self.fallbacks is None:
            raise BudgetUsageError(
                "a budget with no limit checks nothing: set breaks=, recompiles= and/or fallbacks="
            )

    def describe(self) -> str:
        parts = [f"{n}={getattr(self, n)}" for n in ("breaks", "recompiles", "fallbacks")
                 if getattr(self, n) is not None]
        parts.append(f"phase={self.phase!r}")
        if self.allow:
            parts.append(f"allow={list(self.allow)!r}")
        return "budget(" + ", ".join(parts) + ")"


@dataclass(frozen=True)
class BreakItem:
    site_id: str
    file: str
    line: int
    function: str
    gb_code: str | None
    reason: str
    """The reason's first line, then its ``Explanation:`` line when PyTorch gave one."""
    crossings: int
    """Crossings by calls in scope (0: Dynamo broke here while compiling, no call crossed it)."""
    allowed_by: str | None = None

    def line_text(self) -> str:
        code = f" [{self.gb_code}]" if self.gb_code else ""
        return (f"{self.site_id}  {self.file}:{self.line} in {self.function}{code}: {self.reason}"
                f" (crossed {self.crossings}x)")


@dataclass(frozen=True)
class RecompileItem:
    compile_id: str
    frame_name: str
    file: str
    line: int
    call_index: int | None
    failed_guards: tuple[str, ...]

    def line_text(self) -> str:
        guards = "; ".join(self.failed_guards) or "(no failed guard recorded)"
        return (f"{self.compile_id} {self.frame_name} ({self.file}:{self.line}) in call "
                f"{self.call_index}: failed guard: {guards}")


@dataclass(frozen=True)
class FallbackItem:
    compile_id: str
    frame_name: str
    call_index: int | None
    reason: str

    def line_text(self) -> str:
        return f"{self.compile_id} {self.frame_name} in call {self.call_index}: {self.reason}"


@dataclass
class BudgetResult:
    """What a budget saw and decided: the view a message (or a test) is made from."""

    budget: Budget
    calls: int
    """Calls observed inside the budget (every phase)."""
    scope_calls: list[int]
    """Indices of the calls the budget's phase selects."""
    breaks: list[BreakItem] = field(default_factory=list)
    """Sites in scope that are not allow-listed."""
    allowed: list[BreakItem] = field(default_factory=list)
    recompiles: list[RecompileItem] = field(default_factory=list)
    fallbacks: list[FallbackItem] = field(default_factory=list)
    unused_allow: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    """One line per broken limit, or why the budget could not be checked; empty: within budget."""
    notes: list[str] = field(default_factory=list)
    """What the budget could not see (graph runs outside any observed call), said in the message."""

    @property
    def ok(self) -> bool:
        return not self.problems

    def message(self) -> str:
        head = "compile budget exceeded" if self.ok is False else "compile budget kept"
        where = self._scope_text()
        lines = [f"{head}: {self.budget.describe()}, {where}"]
        for p in self.problems:
            lines.append(f"  - {p}")
        for n in self.notes:
            lines.append(f"  note: {n}")
        limits: list[tuple[str, int | None, Sequence[Any]]] = [
            ("breaks", self.budget.breaks, self.breaks),
            ("recompiles", self.budget.recompiles, self.recompiles),
            ("fallbacks", self.budget.fallbacks, self.fallbacks),
        ]
        for name, limit, items in limits:
            if limit is not None and len(items) > limit:
                lines.append(f"  {name} ({len(items)}):")
                lines.extend(f"    {it.line_text()}" for it in items)
        if self.allowed:
            lines.append("  allowed breaks:")
            lines.extend(f"    {it.line_text()} <- allow {it.allowed_by!r}" for it in self.allowed)
        if self.unused_allow:
            lines.append(f"  allow entries that matched no break: {self.unused_allow!r}")
        return "\n".join(lines)

    def _scope_text(self) -> str:
        if not self.calls:
            return "no calls observed"
        if self.budget.phase is None:
            return f"{self.calls} calls observed, all in scope"
        return f"{len(self.scope_calls)} of {self.calls} observed calls in the {self.budget.phase} phase"


# --- evaluation (torch-free: a ledger and the calls made inside the budget) -------------------


def _norm_path(p: str) -> str:
    return os.path.normpath(p).replace(os.sep, "/")


def _path_matches(site_file: str, pattern: str) -> bool:
    f, p = _norm_path(site_file), _norm_path(pattern)
    if os.path.isabs(pattern) or os.path.isabs(site_file):
        if _norm_path(os.path.abspath(site_file)) == _norm_path(os.path.abspath(pattern)):
            return True
    return f == p or f.endswith("/" + p)


def allow_matches(entry: str, site_id: str, file: str, line: int) -> bool:
    """A site id, ``file:line`` or ``file`` (see the module docstring)."""
    e = entry.strip()
    if e == site_id:
        return True
    head, sep, tail = e.rpartition(":")
    if sep and tail.isdigit() and head:
        return int(tail) == line and _path_matches(file, head)
    return _path_matches(file, e)


def reason_text(reason: str) -> str:
    """The first line of a break reason, with PyTorch's ``Explanation:`` when it gave one."""
    lines = [ln.strip() for ln in reason.splitlines() if ln.strip()]
    if not lines:
        return ""
    first = lines[0]
    for ln in lines[1:]:
        if ln.startswith("Explanation:"):
            return f"{first} ({ln[len('Explanation:'):].strip()})"
    return first


def scope_of(calls: Sequence[Call], phase: BudgetPhase | None) -> list[Call]:
    """The calls a phase selects: see the module docstring."""
    if phase is None:
        return list(calls)
    first_steady = next((i for i, c in enumerate(calls) if c.phase == "steady"), None)
    if phase == "steady":
        return [] if first_steady is None else list(calls[first_steady:])
    return list(calls if first_steady is None else calls[:first_steady])


def evaluate(
    budget: Budget,
    ledger: Ledger,
    calls: Sequence[Call],
    *,
    unattributed_compiles: int = 0,
    outside_graph_runs: int = 0,
    foreign_calls: int = 0,
    graphs_before: int = 0,
    compiled_before: Collection[tuple[str, int]] = (),
) -> BudgetResult:
    """Decide a budget from the calls made inside it (in order) and the ledger they belong to.

    ``unattributed_compiles``: compilations seen inside the budget outside any observed call, the
    sign of a model compiled before the budget began (used only to explain an empty budget).
    ``outside_graph_runs``: compiled graphs that ran inside the budget outside any observed call,
    the sign of calls seamscope could not observe (said in the message whenever there are some).
    ``foreign_calls``: calls made inside the budget on another thread while one was open, run
    unobserved; their graphs run outside any call, so the message names them, not an unhooked callable.
    ``graphs_before``: graphs compiled before the session began, ``compiled_before`` those timed,
    each as ``(compile id, graph index)``: a graph, not an id, since Dynamo reuses ids after
    ``torch.compiler.reset()``. Their breaks were made before it: with a ``breaks`` limit, a call in scope
    that ran no graph compiled inside it (only those) fails the budget, which could not judge it.
    """
    scope = scope_of(calls, budget.phase)
    result = BudgetResult(budget=budget, calls=len(calls), scope_calls=[c.index for c in scope])
    if not calls:
        result.problems.append(_nothing_observed(unattributed_compiles, outside_graph_runs, foreign_calls))
        return result
    if outside_graph_runs:
        result.notes.append(_outside_note(outside_graph_runs, foreign_calls))
    if graphs_before and budget.breaks is not None:
        blind = [c.index for c in scope if c.outcome not in ("fallback", "error")
                 and not any(isinstance(e, RegionEvent) and (e.compile_id, e.graph_index) not in compiled_before
                             for e in c.events)]
        if blind:
            result.problems.append(
                f"{len(blind)} call(s) in scope ran only graphs compiled before the budget began "
                f"({graphs_before} such graph(s) in the process): their break sites cannot be judged. "
                "Call torch.compiler.reset() before the budget (or in the test) so that they are "
                "compiled, and judged, inside it."
            )
    if not scope:
        result.problems.append(_phase_not_reached(budget.phase, len(calls)))
        return result
    in_scope = {c.index for c in scope}
    _judge_breaks(result, budget, ledger, scope, in_scope)
    _judge_compilations(result, ledger, scope, in_scope)
    checks: list[tuple[str, int | None, int, str]] = [
        ("breaks", budget.breaks, len(result.breaks), "break site(s) crossed"),
        ("recompiles", budget.recompiles, len(result.recompiles), "recompile(s)"),
        ("fallbacks", budget.fallbacks, len(result.fallbacks), "eager fallback(s)"),
    ]
    for name, limit, n, what in checks:
        if limit is not None and n > limit:
            result.problems.append(f"{n} {what}, over the budget {name}={limit}")
    return result


def _nothing_observed(unattributed_compiles: int, outside_graph_runs: int, foreign_calls: int = 0) -> str:
    why = (
        "no compiled call was observed inside the budget, so nothing was checked. Calls of "
        "callables compiled with torch.compile are observed wherever they were compiled; "
        "code that calls none inside the budget (or only through torch._dynamo.optimize, or "
        "a torch.compile reference taken before the budget began and used inside it) leaves "
        "nothing to judge."
    )
    if unattributed_compiles:
        why += (f" ({unattributed_compiles} compilation(s) did happen inside the budget, outside "
                "any observed call.)")
    if outside_graph_runs:
        why += " " + _outside_note(outside_graph_runs, foreign_calls)
    return why


def _phase_not_reached(phase: BudgetPhase | None, calls: int) -> str:
    if phase == "steady":
        return (
            f"no steady call (cache hits only) was observed inside the budget: all {calls} "
            "call(s) compiled something, so the steady phase was never reached. Call the "
            "compiled code again with the same inputs after the warm-up, or use phase=None."
        )
    return (
        "no cold call was observed inside the budget: the first call already only hit the "
        "cache (the warm-up happened before the budget began). Use phase=\"steady\" or None."
    )


def _judge_breaks(result: BudgetResult, budget: Budget, ledger: Ledger, scope: list[Call], in_scope: set[int]) -> None:
    """The break sites the calls in scope crossed or compiled, each allowed or not; the allowances
    no site used."""
    comp_call: dict[str, int | None] = {c.compile_id: c.call_index for c in ledger.compilations}
    crossings: dict[str, int] = {}
    for c in scope:
        for e in c.events:
            if isinstance(e, BreakEvent):
                crossings[e.site_id] = crossings.get(e.site_id, 0) + 1
    used_allow: set[str] = set()
    for site in ledger.break_sites:
        compiled_here = any(comp_call.get(cid) in in_scope for cid in site.compile_ids)
        if site.site_id not in crossings and not compiled_here:
            continue
        allowed_by = next(
            (a for a in budget.allow if allow_matches(a, site.site_id, site.file, site.line)), None
        )
        item = BreakItem(
            site_id=site.site_id, file=site.file, line=site.line, function=site.function,
            gb_code=site.gb_code, reason=reason_text(site.reason),
            crossings=crossings.get(site.site_id, 0), allowed_by=allowed_by,
        )
        if allowed_by is not None:
            used_allow.add(allowed_by)
            result.allowed.append(item)
        else:
            result.breaks.append(item)
    known = {s.site_id for s in ledger.break_sites}
    for sid, n in sorted(crossings.items()):
        if sid not in known:  # crossed, but its site record never arrived: still a break
            allowed_by = next((a for a in budget.allow if a.strip() == sid), None)
            item = BreakItem(site_id=sid, file="?", line=0, function="?", gb_code=None,
                             reason="(site details not recorded)", crossings=n, allowed_by=allowed_by)
            (result.allowed if allowed_by else result.breaks).append(item)
            if allowed_by:
                used_allow.add(allowed_by)
    result.unused_allow = [a for a in budget.allow if a not in used_allow]


def _judge_compilations(result: BudgetResult, ledger: Ledger, scope: list[Call], in_scope: set[int]) -> None:
    """The recompiles and eager fallbacks of the calls in scope."""
    fallback_ids: set[str] = set()
    for comp in ledger.compilations:
        if comp.call_index not in in_scope:
            continue
        if comp.is_recompile:  # failed attempts too, as recompile_count and TORCH_LOGS=recompiles
            result.recompiles.append(_recompile_item(comp))
        if comp.status != "ok":
            fallback_ids.add(comp.compile_id)
            reason = (comp.fail_reason or comp.fail_type or comp.status).splitlines()[0]
            result.fallbacks.append(FallbackItem(comp.compile_id, comp.shown_frame[0], comp.call_index,
                                                 reason))
    for c in scope:
        for e in c.events:
            if isinstance(e, FallbackEvent) and e.compile_id not in fallback_ids:
                fallback_ids.add(e.compile_id)
                result.fallbacks.append(FallbackItem(e.compile_id, "?", c.index, e.reason))


def _outside_note(runs: int, foreign: int = 0) -> str:
    if foreign:
        return (
            f"{runs} compiled graph run(s) happened inside the budget outside any observed call, and "
            f"{foreign} call(s) were made on another thread while a call was open: such a call runs "
            "unobserved (one call is observed at a time per process), so those calls were not judged; "
            "make them from one thread, or one at a time."
        )
    return (
        f"{runs} compiled graph run(s) happened inside the budget outside any observed call, so "
        "their calls were not judged: compile those callables with torch.compile (not "
        "torch._dynamo.optimize or a torch.compile reference taken before the budget began)."
    )


def _recompile_item(comp: Compilation) -> RecompileItem:
    name, file, line = comp.shown_frame  # the user's frame where the compiled one is a wrapper
    return RecompileItem(
        compile_id=comp.compile_id, frame_name=name, file=file, line=line,
        call_index=comp.call_index, failed_guards=tuple(comp.failed_guards),
    )


# --- the context manager -------------------------------------------------------------------------


class BudgetWindow(contextlib.ContextDecorator):
    """``with seamscope.budget(breaks=0, phase="steady"):`` (also usable as a decorator).

    Starts a capture session, or joins the one already open (then only the calls made inside this
    window are judged). ``result`` holds the :class:`BudgetResult` after exit.
    """

    def __init__(self, spec: Budget, *, label: str | None = None,
                 out: str | os.PathLike[str] | None = None) -> None:
        self.spec = spec
        self.label = label
        self.out = out
        self.result: BudgetResult | None = None
        self._session: Any = None
        self._own = False
        self._calls: list[Call] = []
        self._start_index = 0
        self._outside_start = 0
        self._foreign_start = 0
        self._known_compiles: set[str] = set()
        self._builder: Any = None
        self._hook: Callable[[Call], None] | None = None
        self._family: contextlib.AbstractContextManager[None] | None = None

    def _recreate_cm(self) -> BudgetWindow:  # a fresh window per decorated call
        return BudgetWindow(self.spec, label=self.label, out=self.out)

    def __enter__(self) -> BudgetWindow:
        from ..capture.session import Session, active_session

        s = active_session()
        if s is None:
            s, self._own = Session(), True
            s.start()
        else:
            self._known_compiles = {c.compile_id for c in s.build().compilations}
        self._session = s
        b: Any = s.builder
        assert b is not None, "the session has no builder (never started)"
        self._builder = b
        self._start_index = b.call_count
        self._outside_start = s.outside_graph_runs
        self._foreign_start = s.foreign_calls
        # Every call closed inside the window is recorded here, whatever the session's retention
        # (a long joined session keeps only a sample of its calls' detail).

        def observe(call: Call) -> None:
            if call.index >= self._start_index:
                self._calls.append(call)

        self._hook = observe
        b.watch_calls(observe)
        if self.label is not None:
            self._family = s.family(self.label)
            self._family.__enter__()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> Literal[False]:
        __tracebackhide__ = True
        s, b = self._session, self._builder
        if self._family is not None:
            self._family.__exit__(None, None, None)
        b.unwatch_calls(self._hook)
        if self._own:
            s.stop()
            if self.out is not None:
                s.write(self.out)
        if exc_type is not None:
            return False  # the code inside failed: that is the news, not the budget
        ledger = s.ledger if self._own else s.build()
        unattributed = sum(
            1 for c in ledger.compilations
            if c.call_index is None and c.compile_id not in self._known_compiles
        )
        self.result = evaluate(self.spec, ledger, self._calls, unattributed_compiles=unattributed,
                               outside_graph_runs=s.outside_graph_runs - self._outside_start,
                               foreign_calls=s.foreign_calls - self._foreign_start,
                               graphs_before=s.graphs_before, compiled_before=s.compiled_before)
        if not self.result.ok:
            raise BudgetExceeded(self.result.message(), self.result)
        return False


def budget(
    *,
    breaks: int | None = None,
    recompiles: int | None = None,
    fallbacks: int | None = None,
    phase: BudgetPhase | None = None,
    allow: Iterable[str] = (),
    label: str | None = None,
    out: str | os.PathLike[str] | None = None,
) -> BudgetWindow:
    """A compile budget for the code inside ``with``; raises :class:`BudgetExceeded` on exit.

    ``label`` names the calls made inside (``Call.family``) in the session's receipt; ``out``
    writes the budget's own session receipt there (when the budget started the session).
    """
    allow_t = tuple(allow) if not isinstance(allow, str) and isinstance(allow, (list, tuple)) else allow
    spec = Budget(breaks=breaks, recompiles=recompiles, fallbacks=fallbacks, phase=phase,
                  allow=allow_t)  # type: ignore[arg-type]
    return BudgetWindow(spec, label=label, out=out)


__all__ = [
    "Budget", "BudgetExceeded", "BudgetResult", "BudgetUsageError", "BudgetWindow", "budget",
    "evaluate", "allow_matches", "scope_of", "reason_text",
]
