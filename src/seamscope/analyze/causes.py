"""Recompiles grouped by the input change that set them off.

One changed input property (a length, a flag, an optional argument now given) makes every frame
it reaches compile again: the top-level function, the submodules it inlines into separate frames,
the resume functions after each break. Each of those recompiles fails a guard of its own, on its
own name for the tensor (``input_ids`` at the top, ``hidden_states`` below, ``___stack0[1]`` in a
resume function), and the per-frame churn findings list them one by one. This module puts them
back together:

1. Within one call, the recompiles are split by family (size, value, flag, dtype/device, other).
   A value guard on a number that another recompile of the same call had as a size
   (``seq_len == 32`` next to ``size ... expected 32``) belongs to the size change.
2. Each group is named by its first recompile in compile order, the outermost frame the change
   reached: ``input_ids dim 1: 100 → 128``.
3. A group in a later call is the same cause again when it has the same family and names the same
   property of the same frame, or when it recompiles a frame the cause's earlier calls compiled
   or recompiled (the change reaching further code on its next occurrence), unless that frame
   named another property for the cause (a second input of the same kind).
4. The first compilations of other frames in a call with one cause are that cause's too (code
   the change reached for the first time); with several causes in a call they are left unsplit.

Every compilation with a recompile id (``x/y``, y > 0) lands in exactly one cause, so the causes'
compile times add up to the run's recompile compile time.
"""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from dataclasses import dataclass, field

from ..model.findings import ChurnPattern, Finding, Remedy
from ..model.headline import CauseFamily, CauseOccurrence, RecompileCause
from ..model.ledger import Compilation, Ledger, compile_frame_index
from .findings_churn import (
    attribute_path,
    cause_guards,
    global_int_remedy,
    global_int_subject,
    guard_pattern,
    module_int_remedy,
    module_int_subject,
    train_eval_remedy,
)
from .findings_common import compilation_label, config_remedy, stable_frame
from .units import fmt_ns, number_ranges

_SIZE = re.compile(r"size mismatch at index (\d+)\. expected (\S+?),? actual (\S+)")
_STRIDE = re.compile(r"stride mismatch at index (\d+)\. expected (\S+?),? actual (\S+)")
_PREFIX = re.compile(r"^\s*\d+/\d+(?:_\d+)?:\s*")
_SOURCE = re.compile(r"^(?:L|kwargs)(?:\['[^']+'\])*\['([^']+)'\]$")
_DIM_SUFFIX = re.compile(r"\[\d+\]$")
_TENSOR = re.compile(r"tensor '(.+?)' (?:size|stride|dtype|device|requires_grad|dispatch)")
_POSITIONAL = re.compile(r"^args\[(\d+)\]$")
_ORDINALS = ("first", "second", "third", "fourth")


def _passed(subject: str) -> tuple[str, str]:
    """(how a remedy names ``subject``, what it marks): a wrapper's ``*args`` slot (``args[0]``, the
    frame of ``torch.compile(module)`` takes ``*args``) is no name the user wrote, so it is said as
    the call's positional argument it is."""
    m = _POSITIONAL.match(subject)
    if m is None:
        return subject, subject
    i = int(m.group(1))
    place = f"{_ORDINALS[i]} positional argument" if i < len(_ORDINALS) else f"positional argument {i + 1}"
    return f"the call's {place} ({subject})", f"<the tensor passed as the call's {place}>"


_FAMILY: dict[ChurnPattern, CauseFamily] = {
    "shape": "size",
    "stride": "size",
    "value": "value",
    "type": "type",
    "flag": "flag",
    "dtype_device": "dtype_device",
    "recompile_limit": "recompile_limit",
    "other": "other",
}


@dataclass(frozen=True)
class GuardChange:
    """What one recompile's failed guards (:func:`~.findings_churn.cause_guards`) say changed."""

    family: CauseFamily
    subject: str
    dim: int | None
    expected: str | None
    actual: str | None
    guard: str
    shared: tuple[str, ...] = ()
    """Other tensors whose size guard failed with the same change (``attention_mask dim 1`` beside
    ``input_ids dim 1``, padded to one length): one mark covers them all."""
    first_call: tuple[str, ...] = ()
    """Flags that were None at the first compilation and that the program set during its first
    call (:func:`first_call_flags`): they fail once, whatever the inputs."""


def parse_change(guards: list[str], status: str = "ok", first_call: frozenset[str] = frozenset()) -> GuardChange:
    """The change behind one recompile, named by the first of :func:`~.findings_churn.cause_guards`
    (the rule every analysis uses) that is no first-call flag (``first_call``: their subjects)."""
    chosen = cause_guards(guards)
    artifacts = tuple(g for g in chosen if guard_pattern(g)[0] == "flag" and guard_pattern(g)[1] in first_call)
    first = next((g for g in chosen if g not in artifacts), chosen[0] if chosen else "")
    line = _PREFIX.sub("", first.strip().splitlines()[0] if first.strip() else "").strip()
    if not line:
        fam: CauseFamily = "recompile_limit" if status == "fallback" else "other"
        return GuardChange(fam, "", None, None, None, "")
    ch = _change_of(first, line)
    shared = tuple(_shared_dims(ch, [g for g in chosen if g is not first]))
    names = tuple(guard_pattern(g)[1] for g in artifacts)
    return GuardChange(ch.family, ch.subject, ch.dim, ch.expected, ch.actual, ch.guard, shared, names)


def _shared_dims(ch: GuardChange, others: list[str]) -> list[str]:
    """``NAME dim N`` of every other tensor whose size guard failed with ``ch``'s change."""
    if ch.family != "size" or ch.expected is None:
        return []
    out = []
    for g in others:
        m = _SIZE.search(g)
        named = _TENSOR.search(g)
        if m and named and (m.group(2), m.group(3)) == (ch.expected, ch.actual):
            what = f"{_user_name(named.group(1))} dim {m.group(1)}"
            if what not in out and what != f"{ch.subject} dim {ch.dim}":
                out.append(what)
    return out


def _change_of(first: str, line: str) -> GuardChange:
    pattern, subject, value = guard_pattern(first)
    family = _FAMILY[pattern]
    named = _TENSOR.search(line)
    if named and pattern in ("shape", "stride", "dtype_device"):
        # the name may itself hold quotes (``kwargs['input_ids']``)
        subject = _user_name(named.group(1)) + (subject[subject.rfind("."):] if pattern == "dtype_device" else "")
    else:
        subject = _user_name(_DIM_SUFFIX.sub("", subject) if pattern in ("shape", "stride") else subject)
    m = _SIZE.search(line) or _STRIDE.search(line)
    if m and family == "size":
        return GuardChange(family, subject, int(m.group(1)), m.group(2), m.group(3), line)
    if family == "flag" and value is not None:
        return GuardChange(family, subject, None, value, None, line)
    if family == "value" and subject.startswith("len(") and value is not None:
        # len(kwargs) == 1: an optional argument given or left out
        return GuardChange("flag", subject, None, f"== {value}", None, line)
    if family == "value":
        return GuardChange(family, subject, None, value, None, line)
    if family == "type":
        return GuardChange(family, subject, None, value, None, line)
    return GuardChange(family, subject, None, None, None, line)


def first_call_flags(ledger: Ledger) -> dict[str, frozenset[str]]:
    """Per recompile id, the flags the program set during its first call: a guard ``X is None``
    on an attribute (``self.config.problem_type``, never an argument) that fails at the frame's
    first recompile, in the call after its first compilation, and explains none of the frame's
    later recompiles (the value stayed set). A library's lazy setting (transformers' heads set
    ``config.problem_type`` on the first forward) recompiles once per process whatever the
    inputs: warmed away, not a shape to mark."""
    by_frame: dict[int, list[Compilation]] = defaultdict(list)
    for c in ledger.compilations:
        by_frame[compile_frame_index(c.compile_id)[0]].append(c)
    out: dict[str, frozenset[str]] = {}
    for comps in by_frame.values():
        comps.sort(key=lambda c: compile_frame_index(c.compile_id)[1])
        first = comps[0]
        again = [c for c in comps[1:] if c.is_recompile]
        if first.is_recompile or not again:
            continue
        r = again[0]
        if first.call_index is not None and r.call_index is not None and r.call_index != first.call_index + 1:
            continue
        later = {guard_pattern(g)[1] for c in again[1:] for g in cause_guards(c.failed_guards)}
        names = set()
        for g in cause_guards(r.failed_guards):
            pattern, subject, value = guard_pattern(g)
            if pattern == "flag" and value in ("is None", "== None") and "." in subject \
                    and not subject.startswith(("___", "len(")) and subject not in later:
                names.add(subject)
        if names:
            out[r.compile_id] = frozenset(names)
    return out


def _user_name(subject: str) -> str:
    """``L['x']``, ``kwargs['x']``, ``L['kwargs']['x']`` → ``x``; other sources stay as PyTorch
    wrote them (``args[0]``, ``___stack0[1]``)."""
    s = subject.strip()
    m = _SOURCE.match(s)
    return m.group(1) if m else s


def describe(ch: GuardChange) -> str:
    """The change in the user's words (with the inputs that share a changed length, and the
    first-call flags that failed beside it)."""
    notes = []
    if ch.shared:
        notes.append(f"with {', '.join(ch.shared)}: the same length")
    if ch.first_call and not (ch.family == "flag" and ch.subject in ch.first_call):
        notes.append(f"{', '.join(ch.first_call)} also failed: {_ARTIFACT}")
    return attribute_path(_describe(ch) + (f" ({'; '.join(notes)})" if notes else ""))


_ARTIFACT = "a first-call artifact, None at the first compilation and set by the program during its first call"


def _describe(ch: GuardChange) -> str:
    if ch.family == "flag" and ch.subject in ch.first_call:
        return f"{ch.subject}: {_ARTIFACT}"
    if ch.family == "size":
        what = "stride" if "stride" in ch.guard else "dim"
        arrow = f": {ch.expected} → {ch.actual}" if ch.expected is not None and ch.actual is not None else ""
        return f"{ch.subject} {what} {ch.dim}{arrow}"
    if ch.family == "flag" and ch.subject.startswith("len("):
        what = ch.subject[4:-1] if ch.subject.endswith(")") else ch.subject
        count = (ch.expected or "").removeprefix("== ")
        return f"{what}: {count} → another count (an optional argument given or left out)"
    if ch.family == "flag":
        exp = ch.expected or ""
        if exp == "is None":
            return f"{ch.subject} was None, now given"
        if exp == "is not None":
            return f"{ch.subject} was given, now None"
        if exp.endswith("True") or exp.endswith("False"):
            was = exp.split()[-1]
            now = "False" if was == "True" else "True"
            if exp.startswith("!=") or exp.startswith("is not"):
                was, now = now, was
            return f"{ch.subject}: {was} → {now}"
        if exp == "changed":
            return f"{ch.subject} changed between calls"
        return f"{ch.subject} {exp} no longer holds"
    if ch.family == "value":
        return f"{ch.subject}: {ch.expected} → another value"
    if ch.family == "type":
        return f"{ch.subject}: {ch.expected or 'one type'} → another type"
    if ch.family == "dtype_device":
        return f"{ch.subject} changed"
    if ch.family == "recompile_limit":
        return "the frame hit the recompile limit"
    return ch.guard[:120] or "guards failed (not recorded)"


def _cause_id(family: str, root: Compilation, ch: GuardChange) -> str:
    parts = (family, root.file, stable_frame(root.frame_name), ch.subject, "" if ch.dim is None else ch.dim)
    return "RC" + hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).hexdigest()[:8]


def _order(c: Compilation) -> tuple[int, int, int, str]:
    x, y = compile_frame_index(c.compile_id)
    return (c.start_ns if c.start_ns is not None else 1 << 62, x, y, c.compile_id)


@dataclass
class _Group:
    call: int | None
    family: CauseFamily
    members: list[tuple[Compilation, GuardChange]]

    @property
    def root(self) -> tuple[Compilation, GuardChange]:
        return self.members[0]

    @property
    def frames(self) -> set[int]:
        return {compile_frame_index(c.compile_id)[0] for c, _ in self.members}


@dataclass
class _Cause:
    family: CauseFamily
    root: Compilation
    change: GuardChange
    groups: list[_Group] = field(default_factory=list)
    reached: set[int] = field(default_factory=set)
    new_frames: list[Compilation] = field(default_factory=list)
    roots: dict[int, set[tuple[str, int | None]]] = field(default_factory=dict)
    """Frames that named an occurrence of this cause, and the properties they named."""

    def takes(self, g: _Group) -> bool:
        """Is ``g`` this cause again? Same family, and either the same property of the same root
        frame, or a frame this cause reached before, unless that frame named another property
        for this cause (a second input of the same kind changing)."""
        if g.family != self.family:
            return False
        root, ch = g.root
        if self.key == (g.family, root.file, stable_frame(root.frame_name), ch.subject, ch.dim):
            return True
        x = compile_frame_index(root.compile_id)[0]
        named = self.roots.get(x)
        if named is not None and (ch.subject, ch.dim) not in named:
            return False
        return bool(self.reached & g.frames)

    @property
    def key(self) -> tuple[str, str, str, str, int | None]:
        return (self.family, self.root.file, stable_frame(self.root.frame_name), self.change.subject, self.change.dim)


def _call_groups(comps: list[Compilation], first_call: dict[str, frozenset[str]]) -> list[_Group]:
    """One call's recompiles split by family, the value guards on a former size joined to the
    size change."""
    parsed = [(c, parse_change(c.failed_guards, c.status, first_call.get(c.compile_id, frozenset())))
              for c in sorted(comps, key=_order)]
    sizes = {ch.expected for _, ch in parsed if ch.family == "size" and ch.expected is not None}
    by_family: dict[CauseFamily, list[tuple[Compilation, GuardChange]]] = defaultdict(list)
    for c, ch in parsed:
        fam = ch.family
        if fam == "value" and ch.expected in sizes:
            fam = "size"
        if fam == "recompile_limit" and by_family:
            # A frame that gave up without a recorded guard in a call with a named change: the
            # change filled its cache.
            fam = next(iter(by_family))
        by_family[fam].append((c, ch))
    groups = []
    for fam, members in by_family.items():
        # Name the group by a member whose own guard is of the group's family (a joined value
        # guard or a bare fallback never names a size change).
        named = [m for m in members if m[1].family == fam]
        first = named[0] if named else members[0]
        rest = [m for m in members if m is not first]
        groups.append(_Group(call=members[0][0].call_index, family=fam, members=[first, *rest]))
    return groups


def group_recompiles(ledger: Ledger) -> list[_Cause]:
    """Every recompile of ``ledger`` in exactly one cause, causes in order of first occurrence."""
    recompiles = [c for c in ledger.compilations if c.is_recompile]
    by_call: dict[int | None, list[Compilation]] = defaultdict(list)
    for c in recompiles:
        by_call[c.call_index].append(c)
    firsts_by_call: dict[int | None, list[Compilation]] = defaultdict(list)
    for c in ledger.compilations:
        if not c.is_recompile:
            firsts_by_call[c.call_index].append(c)
    calls = sorted(by_call, key=lambda k: (k is None, k if k is not None else 0))
    causes: list[_Cause] = []
    first_call = first_call_flags(ledger)
    for call in calls:
        groups = _call_groups(by_call[call], first_call)
        firsts = firsts_by_call.get(call, []) if call is not None else []
        for g in groups:
            root, ch = g.root
            target = next((cause for cause in causes if cause.takes(g)), None)
            if target is None:
                target = _Cause(family=g.family, root=root, change=ch)
                causes.append(target)
            target.groups.append(g)
            target.reached |= g.frames
            target.roots.setdefault(compile_frame_index(root.compile_id)[0], set()).add((ch.subject, ch.dim))
            if firsts:
                # Frames first compiled in this call were reached by its change; with two changes
                # in one call their compile time is not split, but either change recurring on
                # them later is still recognised.
                target.reached |= {compile_frame_index(c.compile_id)[0] for c in firsts}
                if len(groups) == 1:
                    target.new_frames.extend(firsts)
    return causes


def recompile_causes(ledger: Ledger, churn: list[Finding] | None = None) -> list[RecompileCause]:
    """The ranked causes of ``ledger``'s recompiles (costliest first), each tied to the per-frame
    churn findings that hold its compilations."""
    by_compile: dict[str, str] = {}
    for f in churn or []:
        if f.churn is not None:
            for cid in f.churn.compile_ids:
                by_compile.setdefault(cid, f.finding_id)
    dynamic_false = ledger.environment.compile_options.get("dynamic") == "False"
    out: list[RecompileCause] = []
    for cause in group_recompiles(ledger):
        members = [c for g in cause.groups for c, _ in g.members]
        frames: list[str] = []
        for c in members:
            label = compilation_label(c)
            if label not in frames:
                frames.append(label)
        occurrences = [
            CauseOccurrence(
                call_index=g.call,
                change=describe(g.root[1]),
                compile_ids=[c.compile_id for c, _ in g.members],
                compile_ns=sum(c.duration_ns or 0 for c, _ in g.members),
            )
            for g in cause.groups
        ]
        compile_ns = sum(o.compile_ns for o in occurrences)
        change = describe(cause.change)
        if cause.family == "flag":  # a flag that flips both ways (given, then None again): each way named
            change = "; ".join(dict.fromkeys([change, *(o.change for o in occurrences)]))
        new_ns = sum(c.duration_ns or 0 for c in cause.new_frames)
        missing = []
        if any(c.duration_ns is None for c in members):
            missing.append("compile time: not recorded for some compilations")
        ids = [c.compile_id for c in members]
        rc = RecompileCause(
            cause_id=_cause_id(cause.family, cause.root, cause.change),
            rank=0,
            family=cause.family,
            subject=cause.change.subject,
            dim=cause.change.dim,
            change=change,
            root_frame=cause.root.frame_name,
            root_file=cause.root.file,
            root_line=cause.root.line,
            occurrences=occurrences,
            calls=sorted({g.call for g in cause.groups if g.call is not None}),
            frames=frames,
            compile_ids=ids,
            recompiles=len(members),
            compile_ns=compile_ns,
            fallbacks=sum(1 for c in members if c.status == "fallback"),
            new_frame_ids=[c.compile_id for c in cause.new_frames],
            new_frame_ns=new_ns,
            cost_ns=compile_ns + new_ns,
            churn_finding_ids=sorted({by_compile[i] for i in ids if i in by_compile}),
            remedy=_remedy(cause, dynamic_false),
            missing=missing,
        )
        out.append(rc)
    out.sort(key=lambda r: (-r.cost_ns, -r.recompiles, r.cause_id))
    return [_finish(r, rank, ledger.run.has_runtime) for rank, r in enumerate(out, 1)]


def _finish(r: RecompileCause, rank: int, has_calls: bool = True) -> RecompileCause:
    import msgspec

    return msgspec.structs.replace(r, rank=rank, sentence=cause_sentence(r, has_calls))


def cause_sentence(r: RecompileCause, has_calls: bool = True) -> str:
    """``has_calls``: the ledger records calls (a live run); an imported log records none, so its
    sentence says nothing of calls (never "in call outside calls")."""
    n_calls = len(r.occurrences)
    known = [o.call_index for o in r.occurrences if o.call_index is not None]
    if not has_calls:
        where = ""
    elif not known:
        where = " outside any observed call"
    else:
        outside = " and outside calls" if len(known) < n_calls else ""
        where = f" in call{'s' if len(known) != 1 else ''} {number_ranges(known)}{outside}"
    recur = f" (recurs {n_calls}×)" if n_calls > 1 else ""
    frames = f"{len(r.frames)} frame{'s' if len(r.frames) != 1 else ''}"
    text = (
        f"recompile cause {r.cause_id}: {r.change}{where}{recur} recompiled {frames} "
        f"({r.recompiles} compilation{'s' if r.recompiles != 1 else ''}) and cost {fmt_ns(r.compile_ns)} "
        "of compile time"
    )
    if r.new_frame_ids:
        n = len(r.new_frame_ids)
        text += (f", plus {fmt_ns(r.new_frame_ns)} compiling {n} frame{'s' if n != 1 else ''} "
                 "it reached for the first time")
    if r.fallbacks:
        text += f"; {r.fallbacks} frame{'s' if r.fallbacks != 1 else ''} hit the recompile limit and run eagerly"
    return text


def _remedy(cause: _Cause, dynamic_false: bool = False) -> Remedy:
    ch = cause.change
    if cause.family == "flag" and ch.subject in ch.first_call:
        return Remedy(
            action="warm_first_call",
            text=f"{ch.subject} is set by the program during its first call: the recompile happens once per "
            "process whatever the inputs, and a warm-up call before timing absorbs it; set it before the first "
            "compiled call to avoid it. Nothing to mark: no shape changed",
        )
    if cause.family == "size" and ch.subject.startswith("___stack"):
        return Remedy(
            action="mark_dynamic_or_bucket",
            text="a value carried across a graph break changes size between calls: mark dynamic the input it is "
            "computed from, or pad that input to a few fixed sizes; `seamscope shapes` measures these policies",
            try_with="seamscope shapes FILE.py:FUNC --lengths LENGTHS",
        )
    if cause.family == "size":
        dim = "" if ch.dim is None else f", {ch.dim}"
        said, marked = _passed(ch.subject)
        marks = "; ".join([f"torch._dynamo.mark_dynamic({marked}{dim})",
                           *(f"torch._dynamo.mark_dynamic({n.replace(' dim ', ', ')})" for n in ch.shared)])
        pair = ", ".join(n.split(" dim ")[0] for n in ch.shared)
        what = said if not ch.shared else (
            f"{said} (and {pair}, of the same length: mark them together, or the unmarked one keeps the "
            "length static)")
        return Remedy(
            action="mark_dynamic_or_bucket",
            text=f"{what} changes size between calls: mark it dynamic before the first call "
            f"({marks}) or pad it to a few fixed sizes; "
            "`seamscope shapes` measures these policies on your sizes",
            try_with="seamscope shapes FILE.py:FUNC --lengths LENGTHS",
        )
    if cause.family == "flag" and ch.subject.startswith("len("):
        return Remedy(
            action="split_by_flag",
            text="calls pass different sets of optional arguments, and each set is its own compiled variant: "
            "pass the same arguments every call (an all-ones mask rather than none)",
        )
    if cause.family == "flag" and (mode := train_eval_remedy(
            [guard_pattern(g)[1] for g in cause_guards(cause.root.failed_guards)])) is not None:
        return mode
    if cause.family == "flag" and ch.subject.startswith("global state "):
        return Remedy(
            action="split_by_flag",
            text=f"PyTorch's {ch.subject.removeprefix('global state ')} differs between calls (autocast, grad mode: "
            "global state the compiled code is specialized to): each setting is its own compiled variant, paid once "
            "per setting; call with one setting, or set it inside the compiled function",
        )
    if cause.family == "flag":
        return Remedy(
            action="split_by_flag",
            text=f"each setting of {ch.subject} is its own compiled variant, paid once per setting: keep it fixed, "
            "or hoist the branch out of the compiled function",
        )
    if cause.family == "value":
        if module_int_subject([ch.guard]) is not None:
            return module_int_remedy(ch.subject, dynamic_false)
        if global_int_subject([ch.guard]) is not None:
            return global_int_remedy(ch.subject)
        if ch.subject.startswith("___stack"):
            return config_remedy(
                "capture_scalar_outputs",
                "a value read with .item() is passed to the code after the break and guarded by value: keep it "
                "a tensor, or let Dynamo capture it symbolically",
                "capture_scalar_outputs", "True",
            )
        return Remedy(
            action="pass_as_tensor",
            text=f"{ch.subject} is a Python number specialised as a constant: pass it as a 0-d tensor, or hoist it out",
        )
    if cause.family == "type":
        return Remedy(
            action="keep_type",
            text=f"{ch.subject} is passed as {ch.expected or 'one type'} in some calls and "
            "as another type in others, each type its own compiled variant: pass the same type every call",
        )
    if cause.family == "dtype_device":
        return Remedy(action="cast_inputs", text=f"cast {ch.subject} to one dtype and device before the compiled call")
    if cause.family == "recompile_limit":
        return config_remedy(
            "fix_churn_or_raise_limit",
            "frames gave up compiling and run eagerly: fix what fills their cache, or raise the limit to measure it",
            "recompile_limit", "64",
        )
    return Remedy(action="read_hints", text="read the failed guard: it names what changed between calls")
