"""The candidates of a remedy trial, from the baseline's findings (torch-free).

One candidate per cause, not per guard: a shape cause gets one mark candidate that marks every
dimension its guards name, on the user's own inputs (``x``, ``args[0]`` as ``L['args'][0]``).
Sources only Dynamo can name (``___stack0``, resume-frame values, ``dict.__getitem__(...)``) are
folded into the cause's policy candidates (``dynamic=true``, the automatic-dynamic settings)
instead of being tried one by one. Each cause lists its candidates best first; the catalogue takes
every cause's first choice (costliest cause first), then every cause's second, and so on, up to
:data:`CAP`, so that under a budget every cause gets its best candidate.
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Collection
from typing import Any, NamedTuple

from ...analyze.findings_churn import (
    MODULE_INT_SETTING,
    OBLIVIOUS_SETTING,
    global_int_subject,
    module_int_subject,
    train_eval_remedy,
    user_subject,
    zero_one,
)
from ...analyze.units import fmt_ns
from ...model.normalize import library_path, project_root
from ...model.receipt import Receipt
from ..remedy_spec import per_callable_limit, spec_from_words
from ..source_file import read_source
from .draft import Draft
from .rewrites.skipped_frame import regional_classes, wasted_ns
from .rewrites.syntax import is_torch_compile

CAP = 8
"""Candidates tried at most (the baseline's findings can suggest dozens); the rest are listed."""
MARKS_PER_CAUSE = 4
"""Dimensions one mark candidate marks at most."""


_GUARD_SIZE = re.compile(r"tensor '(.+?)' (?:size|stride) mismatch at index (\d+)")
_INTERNAL = re.compile(r"(^|\W)(___|__resume|__stack)|\(")


def is_internal(source: str) -> bool:
    """A source no user can write or act on: Dynamo's stack slots, resume-frame values, calls."""
    return _INTERNAL.search(source) is not None


def user_source(name: str) -> str | None:
    """The guard's tensor name in the syntax of ``dynamic_sources``: a local ``x`` becomes
    ``L['x']``, ``args[0]`` becomes ``L['args'][0]``; ``L[...]``/``G[...]`` are kept; None for an
    internal source."""
    name = name.strip()
    if is_internal(name):
        return None
    if re.match(r"[LG]\[", name):
        return name
    m = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*)((?:\[[^\]]+\]|\.[A-Za-z_][A-Za-z0-9_]*)*)", name)
    if m is None:
        return None
    return f"L['{m.group(1)}']{m.group(2)}"


def source_of_guard(guard: str) -> str | None:
    """``tensor 'x' size mismatch at index 0`` → ``L['x']:0`` (None: not a size guard, or an
    internal source)."""
    m = _GUARD_SIZE.search(guard)
    if m is None:
        return None
    src = user_source(m.group(1))
    return None if src is None else f"{src}:{m.group(2)}"


def internal_guard_source(guard: str) -> str | None:
    m = _GUARD_SIZE.search(guard)
    if m is None or not is_internal(m.group(1).strip()):
        return None
    return f"{m.group(1).strip()}:{m.group(2)}"


def _slug(text: str) -> str:
    """A candidate's name (its folder's too): lower-case words joined by dashes, cut at a word."""
    s = re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower()
    if len(s) > 48:
        s = s[:49].rsplit("-", 1)[0] if "-" in s[:49] else s[:48]
    return s or "candidate"


_SOURCE_NOISE = frozenset({"L", "G", "kwargs", "self", "_modules"})


def _source_words(source: str) -> str:
    """A source as words for a name: ``L['kwargs']['input_ids']:1`` reads ``input_ids 1`` (a family's
    regex loses its ``\\d+`` and ``\\Z`` too)."""
    box = _items_of(source)
    plain = re.sub(r"\\(d\+|Z)", " ", f"{box[0]} items {box[1]}" if box else source)
    return " ".join(w for w in re.findall(r"[A-Za-z0-9_]+", plain) if w not in _SOURCE_NOISE)


def buckets_for(lengths: list[int]) -> str | None:
    """Four buckets at the quartiles of the trace's distinct lengths (the largest is the last), as
    a ``buckets:`` policy; None when there are too few distinct lengths to bucket."""
    distinct = sorted(set(lengths))
    if len(distinct) < 3:
        return None
    picks = sorted({distinct[min(len(distinct) - 1, (len(distinct) * q) // 4)] for q in (1, 2, 3)} | {distinct[-1]})
    return "buckets:" + ",".join(str(n) for n in picks)


def module_of(file: str, script: str | None) -> str | None:
    """The importable name of a source file as ``--disable`` takes it: ``__main__`` for the
    script itself, a dotted path below the script's folder or of a library
    (:func:`~seamscope.model.normalize.library_path`); None when
    there is none to give (a workload's own file cannot be patched either)."""
    if script is None or not file.endswith(".py"):
        return None
    workload = ".py:" in script
    own = os.path.abspath(script.rpartition(":")[0] if workload else script)
    # a run's receipt names files relative to the script's project root (model.normalize.project_root)
    path = file if os.path.isabs(file) else os.path.join(project_root(os.path.dirname(own)), file)
    if path == own:
        return None if workload else "__main__"
    root = os.path.dirname(own)
    rel = library_path(file)
    if rel is None and path.startswith(root + os.sep):
        rel = os.path.relpath(path, root).replace(os.sep, "/")
    if rel is None:
        return None
    parts = rel[: -len(".py")].split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts) if parts and all(p.isidentifier() for p in parts) else None


def disable_targets(receipt: Receipt, script: str | None) -> list[tuple[str, int, int]]:
    """Functions called from a compiled frame that hold two or more break sites, as
    ``(MODULE:QUALNAME, summed cost of their break findings, sites)``, costliest first: wrapped in
    ``torch.compiler.disable`` they become one explicit boundary instead of several breaks."""
    frames = {c.compile_id: c.frame_name for c in receipt.ledger.compilations}
    cost = {f.site_id: (f.cost_ns or 0) for f in (receipt.findings.findings if receipt.findings else []) if f.site_id}
    groups: dict[str, list[str]] = {}
    inlined: set[str] = set()
    for site in receipt.ledger.break_sites:
        scope = site.scope or site.function
        mod = module_of(site.file, script)
        if not scope or "<" in scope or mod is None:
            continue
        target = f"{mod}:{scope}"
        groups.setdefault(target, []).append(site.site_id)
        if any(frames.get(cid) not in (None, scope.rsplit(".", 1)[-1]) for cid in site.compile_ids):
            inlined.add(target)  # reached from a caller's compiled frame: the function is a callee
    out = [(t, sum(cost.get(i, 0) for i in ids), len(ids)) for t, ids in groups.items()
           if len(ids) >= 2 and t in inlined]
    return sorted(out, key=lambda x: (-x[1], x[0]))


_INDEXED = re.compile(r"(\.[A-Za-z_][A-Za-z0-9_]*)\[(\d+)\]|\['(\d+)'\]")
_SIBLINGS = (("keys", "values"), ("key_cache", "value_cache"))
"""Attribute pairs a cache layer holds side by side: a guard on one means the other changes too."""


def family(source: str) -> str | None:
    """A ``dynamic_sources`` regex for every source that differs from ``source`` only by an index
    into a container (``.layers[0]``, ``._modules['3']``), and by ``keys``/``values`` of a cache
    layer: PyTorch names only the first source whose guard failed, and the others recompile next.
    ``L['kwargs']['cache'].layers[0].keys:2`` → ``L\\['kwargs'\\]...\\.layers\\[\\d+\\]\\.(keys|values)\\Z:2``.
    None when there is no such index (``L['args'][0]`` is an argument, not a family member).
    The regex has no comma or space (``dynamic_sources`` splits on commas and drops spaces)."""
    name, sep, dim = source.rpartition(":")
    if not sep or not dim.isdigit():
        name, dim = source, ""
    if not _INDEXED.search(name):
        return None
    out, pos = [], 0
    for m in _INDEXED.finditer(name):
        out.append(re.escape(name[pos:m.start()]))
        out.append(re.escape(m.group(1)) + r"\[\d+\]" if m.group(1) else r"\['\d+'\]")
        pos = m.end()
    tail = re.escape(name[pos:])
    for a, b in _SIBLINGS:
        for one in (a, b):
            if tail.endswith(r"\." + one):
                tail = tail[: -len(one)] + f"({a}|{b})"
                break
        else:
            continue
        break
    pattern = "".join(out) + tail + r"\Z"  # the end, as ``re.match`` anchors only the start
    return pattern + (f":{dim}" if dim else "")


_DICT_ITEM = re.compile(r"^dict\.__getitem__\((.+?), list\(dict\.keys\(\1\)\)\[\d+\]\):(\d+)$")
_ITEMS = r"dict\.__getitem__\("


def dict_items(internal: str) -> str | None:
    """An item of a dict subclass (transformers' ``ModelOutput``) is built by Dynamo from the source
    ``dict.__getitem__(X, list(dict.keys(X))[0])``, which a mark must name: the guards' other name
    for it (``X['last_hidden_state']``) marks nothing. A ``dynamic_sources`` regex for every item
    of X (no comma or space, which ``dynamic_sources`` splits on and drops); None for another source."""
    m = _DICT_ITEM.match(internal)
    src = user_source(m.group(1)) if m else None
    return None if m is None or src is None else f"{_ITEMS}{re.escape(src)}.*:{m.group(2)}"


def _items_of(mark: str) -> tuple[str, str] | None:
    """(X, dimension) of a :func:`dict_items` regex; None for another mark."""
    name, _, dim = mark.rpartition(":")
    if not name.startswith(_ITEMS) or not name.endswith(".*"):
        return None
    return re.sub(r"\\(.)", r"\1", name[len(_ITEMS):-2]), dim


def marks_cover(source: str, marks: Collection[str]) -> bool:
    """Whether ``marks`` mark ``source`` (``NAME:DIM``): by name, by its family's regex, or as an
    item of a dict subclass whose items a :func:`dict_items` regex marks."""
    if source in marks or family(source) in marks:
        return True
    name, _, dim = source.rpartition(":")
    return any(box is not None and box[1] == dim and name.startswith(box[0] + "[") for box in map(_items_of, marks))


def _marks(guards: list[str], cap: int = MARKS_PER_CAUSE) -> tuple[list[str], list[str]]:
    """(the user sources with every dimension the guards name, a family's sources as one regex,
    a dict subclass's items as one regex; the other internal ones folded)."""
    user, internal = [], []
    for g in guards:
        i = internal_guard_source(g)
        s = dict_items(i) if i is not None else source_of_guard(g)
        s = family(s) or s if s is not None and i is None else s
        if s is not None and s not in user:
            user.append(s)
        if i is not None and s is None and i not in internal:
            internal.append(i)
    user = [u for u in user if not any(o != u and marks_cover(u, [o]) for o in user)]  # an item its dict's regex marks
    return sorted(user)[:cap], sorted(internal)


_MARKABLE = ("shape", "recompile_limit", "stride")


class _CauseMarks(NamedTuple):
    name: str
    marks: list[str]
    internal: list[str]
    cost_ns: int


def _cause_marks(fs: Any) -> dict[str, _CauseMarks]:
    """For each churn finding of a cause that recompiled several frames (a break splits one program
    into frames, and one input's new size recompiles each of them): one mark candidate for the
    whole cause, its name, sources, internal sources (folded) and the cause's cost. Marked frame by
    frame, each candidate would remove one of the cause's recompiles and leave the others."""
    churns = {f.finding_id: f.churn for f in fs.findings if f.churn is not None and f.churn.pattern in _MARKABLE}
    out: dict[str, _CauseMarks] = {}
    for cause in getattr(fs, "causes", None) or []:
        mine = [fid for fid in cause.churn_finding_ids if fid in churns]
        if len(mine) < 2:
            continue
        guards = [g for fid in mine for g in churns[fid].guards]
        marks, internal = _marks(guards, cap=MARKS_PER_CAUSE * len(mine))
        framed = sum(1 for fid in mine if _marks(list(churns[fid].guards))[0])
        if len(marks) < 2 or framed < 2:
            continue
        what = f"{cause.subject} {cause.dim}" if cause.subject and cause.dim is not None else _source_words(marks[0])
        name = f"mark dynamic {what} in {framed} frames"
        one = _CauseMarks(name, marks, internal, cause.compile_ns)
        out.update({fid: one for fid in mine})
    return out


def _site_target(receipt: Receipt, site_id: str, script: str | None) -> str | None:
    """``MODULE:QUALNAME`` of the function holding a break site (as :func:`disable_targets` names it)."""
    site = next((b for b in receipt.ledger.break_sites if b.site_id == site_id), None)
    if site is None or module_of(site.file, script) is None:
        return None
    return f"{module_of(site.file, script)}:{site.scope or site.function}"


def _user_values(subjects: list[str]) -> bool:
    """Value guards on the user's own numbers (not ``.item()`` results on Dynamo's stack, not an
    argument count)."""
    return bool(subjects) and all(not s.startswith(("___", "len(")) and not is_internal(s) for s in subjects)


def _symbolic_by_policy(f: Any) -> bool:
    """Whether ``dynamic=True`` can make the finding's changing number symbolic: the user's own,
    not an int attribute of an nn.Module nor a global int (Dynamo keeps both constants whatever
    ``dynamic=`` says; the first has a setting of its own, the second none)."""
    ch = f.churn
    return ch is not None and ch.pattern == "value" and _user_values(ch.subjects) \
        and module_int_subject(list(ch.guards)) is None and global_int_subject(list(ch.guards)) is None


def _what(f: object) -> str:
    ch = getattr(f, "churn", None)
    if ch is not None:
        on = f" on {', '.join(map(user_subject, ch.subjects[:2]))}" if ch.subjects else ""
        shown = getattr(ch, "user_frame", None)  # the frame reports name where the compiled one is a wrapper
        return f"{ch.pattern} churn{on} in {shown.function if shown is not None else ch.frame_name}"
    return "a break"


def _unspec_int(receipt: Receipt) -> list[str]:
    """The flags that let a module's int attribute be symbolic: the setting, and where the script
    compiles with ``dynamic=False`` (which keeps every int static whatever the setting) that option gone."""
    drop = receipt.ledger.environment.compile_options.get("dynamic") == "False"
    return ["--dynamo-config", f"{MODULE_INT_SETTING}=True", *(["--compile-option", "dynamic=none"] * drop)]


_NONE = {
    "type": "a type switch: no flag keeps the type constant; pass the same type every call (the finding's remedy)",
    "flag": "each setting of a flag is its own variant: no flag removes it; keep the setting fixed or hoist the branch",
    "dtype_device": "inputs change dtype or device: no flag removes it; cast them to one before the call",
    "stride": "inputs change layout: call .contiguous() before the call",
    "value": "an argument count or a value no flag makes symbolic: pass the same arguments every call",
}


def _why_none(f: object) -> str:
    """Why a cause of the findings has no candidate: what the change is, and the remedy that needs the code."""
    ch = getattr(f, "churn", None)
    if ch is not None and ch.pattern == "flag" and (mode := train_eval_remedy(list(ch.subjects))) is not None:
        return f"no flag or setting removes it; {mode.text}"
    if ch is not None and ch.pattern == "flag" and any(x.startswith("global state ") for x in ch.subjects):
        return ("PyTorch's global state (autocast, grad mode) differs between calls, each setting its own variant: "
                "no flag removes it; call with one setting, or set it inside the compiled function")
    if ch is not None and ch.pattern in _NONE and global_int_subject(list(ch.guards)) is None:
        return _NONE[ch.pattern]
    rem = next(iter(getattr(f, "remedies", []) or []), None)
    text = getattr(rem, "text", "") if rem is not None else ""
    return "no flag or setting removes it" + (f"; {text}" if text else "")


def catalogue(receipt: Receipt, workload_lengths: list[int] | None = None, workload: bool = False,
              script: str | None = None, folded: list[str] | None = None, cap: int = CAP) -> list[Draft]:
    """One candidate per cause of the baseline's findings, every cause's best first (costliest
    cause first), capped at ``cap``; what was folded or left over the cap goes to ``folded``.

    For a workload target (``FILE.py:FUNC``), shape churn also gets the shape study's padding
    policies: ``pow2``, and with a length trace four buckets at its quartiles. A function that
    holds several break sites gets ``--disable`` (one boundary for them all)."""
    folded = folded if folded is not None else []
    causes: list[tuple[int, str, list[Draft]]] = []  # (cost, id, candidates best first)

    def draft(name: str, flags: list[str], origin: str, targets: str, cost: int) -> Draft:
        return Draft(name=_slug(name), spec=spec_from_words(flags), origin=origin, targets=targets, cost_ns=cost)

    fs = receipt.findings
    if fs is None:
        return []
    disabling = {t for t, _, _ in disable_targets(receipt, script)[:2]}
    by_cause = _cause_marks(fs)
    for f in fs.findings:
        cost = f.cost.estimated_ns if f.cost is not None else (f.churn.compile_ns if f.churn is not None else 0)
        mine: list[Draft] = []
        for r in f.remedies:
            if r.action in ("capture_scalar_outputs", "capture_dynamic_output_shape_ops"):
                mine.append(draft(r.action, ["--dynamo-config", f"{r.action}=True"], f.finding_id, f.sentence, cost))
            elif r.action == "allow_unspec_int_on_nn_module":
                mine.append(draft(r.action, _unspec_int(receipt), f.finding_id, f.sentence, cost))
            elif r.action == "reorder_logging":
                for key, val in r.config.items():
                    fn = val.removeprefix("add ").strip()
                    # findings name the callable as MODULE:QUALNAME (logging:Logger.info); a bare name is a builtin
                    target = fn if ":" in fn else f"builtins:{fn}" if "." not in fn else fn.replace(".", ":", 1)
                    if ":" in target:
                        mine.append(draft(f"{key} {fn.rpartition(':')[2]}", ["--dynamo-config", f"{key}+={target}"],
                                          f.finding_id, f.sentence, cost))
            elif r.action == "fix_churn_or_raise_limit":
                mine.append(draft("recompile_limit 64", ["--dynamo-config", "recompile_limit=64"], f.finding_id,
                                  f.sentence, cost))
        ch = f.churn
        if ch is not None and ch.pattern in _MARKABLE:
            shared = by_cause.get(f.finding_id)
            marks, internal = (shared.marks, shared.internal) if shared else _marks(ch.guards)
            policy = draft("dynamic=True", ["--compile-option", "dynamic=true"], f.finding_id, f.sentence, cost)
            if marks or internal or not (module_int_subject(list(ch.guards)) or global_int_subject(list(ch.guards))):
                mine.insert(0, policy)  # not for ints no policy makes symbolic (a module's, a global)
            if internal:
                folded.append(f"{', '.join(internal)} ({ch.frame_name}): internal sources, folded into "
                              f"{policy.name} and the automatic-dynamic settings")
            if marks:
                words = [w for s in marks for w in ("--mark-dynamic", s)]
                name = shared.name if shared else "mark dynamic " + " ".join(map(_source_words, marks))
                mine.append(draft(name, words, f.finding_id, f.sentence,  # a shared one: the cause's cost
                                  cost if shared is None else max(cost or 0, shared.cost_ns)))
            if any(map(zero_one, ch.guards)):  # a size first compiled as 1: no policy alone makes it symbolic
                mine.append(draft("backed size oblivious", ["--dynamo-config", f"{OBLIVIOUS_SETTING}=True",
                                                            "--compile-option", "dynamic=true"],
                                  f.finding_id, f.sentence, cost))
            if ch.pattern == "shape":
                mine.append(draft("mark as unbacked",
                                  ["--dynamo-config", "automatic_dynamic_shapes_mark_as='unbacked'"],
                                  f.finding_id, f.sentence, cost))
            if ch.fallback:
                mine.append(draft("recompile_limit 64", ["--dynamo-config", "recompile_limit=64"], f.finding_id,
                                  f.sentence, cost))
            if workload and ch.pattern in ("shape", "recompile_limit"):
                mine.append(draft("pad pow2", ["--pad", "pow2"], f.finding_id, f.sentence, cost))
                buckets = buckets_for(workload_lengths or [])
                if buckets is not None:
                    mine.append(draft(f"pad {buckets}", ["--pad", buckets], f.finding_id, f.sentence, cost))
        site = next((b for b in receipt.ledger.break_sites if b.site_id == f.site_id), None) if f.site_id else None
        if site is not None and site.frame_skipped:  # a frame traced for nothing: compile what it calls
            for cls in regional_classes(receipt, script)[:1]:
                cost = max(cost or 0, wasted_ns(receipt, site.compile_ids))
                mine.append(draft(f"regional {cls}", ["--regional", cls], f.finding_id, f.sentence, cost))
        if _symbolic_by_policy(f):
            # an int that changes every call, specialised as a constant: dynamic=True makes it symbolic
            mine.insert(0, draft("dynamic=True", ["--compile-option", "dynamic=true"], f.finding_id, f.sentence, cost))
        if mine:
            causes.append((cost, f.finding_id, mine))
        elif f.site_id is not None and (holder := _site_target(receipt, f.site_id, script)) is not None \
                and holder in disabling:
            folded.append(f"{f.finding_id} (a break in {holder}): folded into the --disable {holder} candidate")
        else:
            folded.append(f"none: {f.finding_id} ({_what(f)}): {_why_none(f)}")
    for ct in fs.compile_time.findings if fs.compile_time is not None else []:  # capture/regional.py
        if ct.kind == "repeated_block" and ct.block is not None:
            causes.append((ct.total_ns, ct.finding_id, [draft(f"regional {ct.block.cls}", ["--regional", ct.block.cls],
                                                              ct.finding_id, ct.sentence, ct.total_ns)]))
    for target, cost, n in disable_targets(receipt, script)[:2]:
        causes.append((cost, f"disable {target}", [draft(f"disable {target}", ["--disable", target], "breaks",
                                                         f"{n} break sites inside {target}", cost)]))
    causes += _guard_causes(receipt, draft, folded) + _run_causes(receipt, draft)
    version = receipt.ledger.environment.torch_version
    for _, _, mine in causes:  # a frame hit the limit: also the per-callable limit (torch 2.13+)
        for i in range(len(mine) - 1, -1, -1):
            d = mine[i]
            if (flags := per_callable_limit(d.spec, version)) is not None:
                mine.insert(i + 1, draft(f"{d.name} per callable", flags, d.origin, d.targets, d.cost_ns))
    return _best_first(causes, cap, folded)


def _run_causes(receipt: Receipt, draft: Any) -> list[tuple[int, str, list[Draft]]]:
    """The whole run's causes: frames that hit the recompile limit (not one whose compilation
    failed: a frame Dynamo gave up on runs eagerly too, and no limit brings it back), and a run in
    which Dynamo compiled no graph at all (it gave up on every frame it traced: compiling costs the
    tracing and runs nothing compiled), whose candidate runs the program eagerly."""
    out = []
    if limited := sum(1 for f in receipt.summary.fallbacks if f.status == "fallback"):
        out.append((0, "fallbacks", [draft("recompile_limit 64", ["--dynamo-config", "recompile_limit=64"],
                                           "fallbacks", f"{limited} frame(s) hit the recompile limit", 0)]))
    traced = receipt.ledger.compilations
    if traced and not receipt.summary.graph_count:
        cost = sum(c.duration_ns or 0 for c in traced)
        out.append((cost, "no graph", [draft("force eager", ["--stance", "force_eager"], "no graph",
                                             f"Dynamo compiled no graph: {len(traced)} frame(s) traced for nothing "
                                             f"({fmt_ns(cost)})", cost)]))
    return out


GUARD_CANDIDATES = ("skip_guard_on_all_nn_modules_unsafe", "skip_guard_on_inbuilt_nn_modules_unsafe")
"""The guard filters tried where module attributes dominate the guards, best first."""


def warmup_calls(receipt: Receipt) -> int | None:
    """The calls up to the last one that compiled (the warm-up after which the baseline only hit its
    cache); None when no kept call compiled."""
    cold = [c.index for c in receipt.ledger.calls if c.phase == "cold"]
    return max(cold) + 1 if cold else None


def _guard_causes(receipt: Receipt, draft: Any, folded: list[str]) -> list[tuple[int, str, list[Draft]]]:
    """The guard settings PyTorch names ``_unsafe``, where the dispatch finding fits them: checks on
    nn.Module attributes at least half of the guard trees' checks → the module guard filters; a
    frame with several cache entries (or several frames) → ``skip_guard_eval_unsafe`` after the
    warm-up (the baseline's calls up to its last compilation), when calls follow it. Each is
    checked by ``try``'s check run before it can be recommended (``guard_check.py``).

    Only where the guard evaluation the finding estimates over the run is at least
    :data:`~.stats.MIN_EFFECT` of the run's time: a verdict is the total time's, and a saving
    below that cannot show (a short script's compilation outweighs its dispatch); ``folded`` says so."""
    from .stats import MIN_EFFECT

    dp = getattr(receipt.findings, "dispatch", None)
    if dp is None or not dp.estimate_ns:
        return []
    total = sum(p.wall_ns for p in receipt.summary.phases)
    if dp.estimate_ns < MIN_EFFECT * total:
        folded.append(f"none: {dp.finding_id} (dispatch): its estimate over the run, {fmt_ns(dp.estimate_ns)}, is "
                      f"under {MIN_EFFECT:.0%} of the run's {fmt_ns(total)}: a guard setting could not show a saving "
                      "here; a run with more steady calls, or --candidate \"--guard-filter NAME\", tries one")
        return []
    out = []
    checks, total = dp.guard_checks, sum(dp.guard_checks.values())
    module = checks.get("module", 0)
    if total and module * 2 >= total:
        why = (f"dispatch: {module:,} of the {total:,} guard checks are on nn.Module attributes "
               f"(unsafe: a changed module attribute runs a stale graph)")
        out.append((dp.estimate_ns, f"{dp.finding_id} guard filters",
                    [draft(n, ["--guard-filter", n], dp.finding_id, why, dp.estimate_ns) for n in GUARD_CANDIDATES]))
    entries = sum(len(f.entries) for f in dp.frames)
    warm = warmup_calls(receipt)
    if entries >= 2 and warm is not None and warm < receipt.summary.call_count:
        why = (f"dispatch: {entries} cache entries in {len(dp.frames)} frame(s), every lookup checking their guards "
               f"(unsafe: after call {warm}, only the guards that tell the entries apart are checked)")
        out.append((dp.estimate_ns, f"{dp.finding_id} skip guard eval",
                    [draft(f"skip_guard_eval_unsafe after {warm} calls", ["--skip-guard-eval-unsafe-after", str(warm)],
                           dp.finding_id, why, dp.estimate_ns)]))
    return out


def _best_first(causes: list[tuple[int, str, list[Draft]]], cap: int, folded: list[str]) -> list[Draft]:
    """Every cause's first candidate (costliest cause first), then every cause's second, and so
    on; a candidate whose flags another has already is one (the higher cost kept); capped."""
    causes.sort(key=lambda c: (-c[0], c[1]))
    out: dict[str, Draft] = {}
    depth = max((len(c[2]) for c in causes), default=0)
    for level in range(depth):
        for _, _, mine in causes:
            if level < len(mine):
                d = mine[level]
                key = " ".join(d.spec.flags())
                if key in out:
                    out[key].cost_ns = max(out[key].cost_ns, d.cost_ns)
                else:
                    out[key] = d
    drafts = list(out.values())
    for d in drafts[cap:]:
        folded.append(f"{d.name}: over the cap of {cap} candidates (its cause's better candidates come first)")
    return unique_names(drafts[:cap])


def schedule(drafts: list[Draft]) -> list[Draft]:
    """The order candidates start in under a budget: by expected saving over expected cost. The
    saving of a cause's k-th candidate is its finding's cost over k (the first may already remove
    what the cause costs); the cost is alike for all (each run is the same script, run as often),
    so the order is by expected saving. The compile-time candidates (a warm cache, compile
    threads: what compilation costs) thereby come before the remedies of a cheap recompile on a
    compile-dominated run, instead of after every finding's."""
    seen: dict[str, int] = {}
    keyed = []
    for i, d in enumerate(drafts):
        seen[d.origin] = seen.get(d.origin, 0) + 1
        keyed.append((-(d.cost_ns / seen[d.origin]), i, d))
    return [d for _, _, d in sorted(keyed, key=lambda x: (x[0], x[1]))]


def unique_names(drafts: list[Draft]) -> list[Draft]:
    seen: dict[str, int] = {}
    for d in drafts:
        n = seen.get(d.name, 0)
        seen[d.name] = n + 1
        if n:
            d.name = f"{d.name}-{n + 1}"
    return drafts


def choose(drafts: list[Draft], only: list[str], skip: list[str]) -> list[Draft]:
    """``--only``/``--skip``: names, the start of one (a long name as the table cuts it), or a part of
    the flags (of the name, for a candidate without flags)."""

    def hit(d: Draft, keys: list[str]) -> bool:
        flags = " ".join(d.spec.flags())
        return any(d.name.startswith(k) or k in flags or (not flags and k in d.name) for k in keys)

    if only:
        drafts = [d for d in drafts if hit(d, only)]
    return [d for d in drafts if not hit(d, skip)]


def only_matched_nothing(drafts: list[Draft], only: list[str]) -> str:
    """The one line for an ``--only`` that selected no candidate, listing those there were."""
    given = ", ".join(f"--only {k}" for k in only)
    if not drafts:
        return f"{given}: no candidate matches: the baseline's findings suggested none for this script"
    return (f"{given}: no candidate matches; the candidates for this script: "
            f"{', '.join(d.name for d in drafts)} (a name, its start, or part of its flags)")


def compile_sites(script: str) -> list[str]:
    """``FILE:LINE`` of each ``torch.compile(...)`` call (or ``@torch.compile``) in the script or a
    workload's file, read from its source; empty when it cannot be read."""
    path = script.rpartition(":")[0] if ".py:" in script else script
    try:
        tree = ast.parse(read_source(path).text)  # a BOM, a coding line, CRLF: as Python reads it
    except (SyntaxError, ValueError):  # SourceUnusable too
        return []
    out = []
    for n in ast.walk(tree):
        if is_torch_compile(n):
            out.append(f"{os.path.basename(path)}:{n.lineno}")
    return sorted(set(out), key=lambda s: int(s.rsplit(":", 1)[1]))
