"""Churn findings: each frame that recompiled, grouped by the pattern of the guard that failed
(shape, value, flag, stride, dtype/device, recompile limit), with what each costs and how to fix it.

Ranked by compile time: a recompile storm is a different problem from a frequent cheap break.
"""

from __future__ import annotations

import functools
import re
from collections import defaultdict

from ..model.canonical import round_float
from ..model.findings import ChurnAxis, ChurnEvidence, ChurnPattern, Finding, Remedy
from ..model.ledger import Compilation, Ledger, compile_frame_index
from .findings_common import (
    RESUME_FRAME,
    SCRIPT,
    config_remedy,
    frame_label,
    hash_id,
    replaced,
    stable_frame,
    stable_text,
)
from .units import fmt_ns

# --- churn ---------------------------------------------------------------------------------------

_SHAPE = re.compile(r"size mismatch at index (\d+)\. expected (\S+?),? actual")
_STRIDE = re.compile(r"stride mismatch at index (\d+)")
_DTYPE = re.compile(r"(dtype|device|requires_grad|dispatch key set) mismatch", re.I)
# the source as PyTorch writes it (``kwargs['input_ids']``): up to the quote before the mismatch
_TENSOR_NAME = re.compile(
    r"tensor '(.+?)' (?=(?:size|stride|dtype|device|requires_grad|dispatch key set) mismatch)|tensor '([^']+)'"
)
_FLAG = re.compile(r"^\s*(?:\d+/\d+:\s*)?(\S.*?)\s+(==|!=|is not|is)\s+(True|False|None)\b")
_VALUE = re.compile(r"^\s*(?:\d+/\d+:\s*)?(\S.*?)\s+(==|!=)\s+(-?[\d.]+(?:e[-+]?\d+)?|'[^']*')\s*(?:#|$)")
_PREFIX = re.compile(r"^\s*\d+/\d+(?:_\d+)?:\s*")
_GLOBAL_STATE = re.compile(r"^GLOBAL_STATE changed: (.+?)\s*$")
# a type check (an int passed before, a tensor now): ``___check_type_id(t, 1398...), type=<class 'int'>``
_TYPE = re.compile(r"___check_type_id\((.+?), \d+\)(?:, type=<class '([^']+)'>)?")
# a tensor guard that met no tensor: ``expected type of 'mask' to be a tensor type, ' but found
# <class 'NoneType'>`` (torch 2.13; 2.14.1 writes ``to be <class 'torch.Tensor'>, but found ...``)
# (a tensor before, None now: an optional argument left out) or another class
_NOT_A_TENSOR = re.compile(r"^expected type of '(.+?)' to be (?:a tensor type|<class 'torch\.(?:nn\.parameter\.)?"
                           r"(?:Tensor|Parameter)'>), '? ?but found (?:<class '([^']+)'>)?")


# A frame's recompile reasons repeat every earlier entry's reason (see ingest.compile_events): the
# same texts come back once per recompile, so each is parsed once.
@functools.lru_cache(maxsize=8192)
def guard_pattern(guard: str) -> tuple[ChurnPattern, str, str | None]:
    """(pattern, subject, value) of one failed guard text, as PyTorch writes recompile reasons."""
    g = guard.strip()
    name = _TENSOR_NAME.search(g)
    subj = (name.group(1) or name.group(2)) if name else ""
    m = _SHAPE.search(g)
    if m:
        return "shape", f"{subj}[{m.group(1)}]", f"size {m.group(2)}"
    m = _STRIDE.search(g)
    if m:
        return "stride", f"{subj}[{m.group(1)}]", None
    m = _DTYPE.search(g)
    if m:
        return "dtype_device", f"{subj}.{m.group(1).lower()}", None
    first = _PREFIX.sub("", g.splitlines()[0] if g else "")
    m = _GLOBAL_STATE.match(first)
    if m:  # autocast, grad mode, deterministic algorithms: PyTorch's global state, each setting a variant
        return "flag", f"global state {m.group(1)}", "changed"
    m = _TYPE.search(first)
    if m:
        return "type", m.group(1).strip(), m.group(2)
    m = _NOT_A_TENSOR.match(first)
    if m:
        if m.group(2) == "NoneType":
            return "flag", m.group(1), "is not None"
        return "type", m.group(1), "Tensor"
    m = _FLAG.match(first)
    if m:
        return "flag", m.group(1).strip(), f"{m.group(2)} {m.group(3)}"
    m = _VALUE.match(first)
    if m:
        return "value", m.group(1).strip(), m.group(3)
    return "other", stable_text(first.split("#", 1)[0]).strip()[:80], None


_Parsed = tuple[ChurnPattern, str, str | None]


def split_guards(entry: str) -> list[str]:
    """The failed guards of one cached variant's reason: ``0/0: a; b`` (PyTorch's format for
    several, which capture writes with every guard that failed) → ``[a, b]``; the compile id and a
    user stack on the lines after are dropped, and so are the tensor checks that fail beside a
    global state change (``GLOBAL_STATE changed: autocast(cpu)_enabled``: autocast changes every
    tensor's dispatch keys, so each ``check_tensor`` fails with it and names nothing new)."""
    head = _PREFIX.sub("", entry.strip().splitlines()[0] if entry.strip() else "")
    guards = [g for g in (p.strip() for p in head.split("; ")) if g]
    if any(_GLOBAL_STATE.match(g) for g in guards):  # autocast changes every tensor's dispatch keys too
        guards = [g for g in guards if not g.startswith("check_tensor(")]
    return guards


_FAMILY_ORDER: dict[ChurnPattern, int] = {"type": 0, "shape": 1, "stride": 2, "value": 3, "dtype_device": 4,
                                          "other": 5, "flag": 6, "recompile_limit": 7}


def cause_guards(failed_guards: list[str]) -> list[str]:
    """The guards that explain one recompile, the one rule every analysis uses.

    ``failed_guards`` holds one reason per cached variant of the frame, the most recent first,
    each with one failed guard (PyTorch's log) or every one (capture). What failed against every
    variant is what this call changed: a length changed after a call that passed an extra
    argument fails on the argument against the latest variant, and on the length against both. When
    no guard failed against all (each variant names only its first), the first variant's guards
    (listed last) are the change, measured against what the run started from. A type switch
    fails the earlier variants' value guards too: the type is what changed. The guards come
    ordered by what names the change best: a type, a size, a value, then a flag."""
    entries = [gs for gs in map(split_guards, failed_guards) if gs]
    if not entries:
        return []
    flat = [g for gs in entries for g in gs]
    typed = next((g for g in flat if guard_pattern(g)[0] == "type"), None)
    if typed is not None:
        return [typed]

    def key(g: str) -> tuple[ChurnPattern, str]:
        p = guard_pattern(g)
        return p[0], p[1]

    common = set(map(key, entries[0])).intersection(*(set(map(key, gs)) for gs in entries[1:]))
    base = entries[-1]
    chosen = [g for g in base if key(g) in common] or base
    return sorted(chosen, key=lambda g: _FAMILY_ORDER.get(guard_pattern(g)[0], 5))


def _frame_key(c: Compilation) -> tuple[int, str]:
    return compile_frame_index(c.compile_id)[0], c.frame_name


def churn_findings(ledger: Ledger) -> list[Finding]:
    frames: dict[tuple[int, str], list[Compilation]] = defaultdict(list)
    for c in ledger.compilations:
        frames[_frame_key(c)].append(c)
    found: list[Finding] = []
    for (_, fname), comps in frames.items():
        variants = sum(1 for c in comps if c.status == "ok")
        groups: dict[ChurnPattern, list[tuple[Compilation, list[_Parsed]]]] = defaultdict(list)
        for c in comps:
            if c.status == "fallback":
                groups["recompile_limit"].append((c, [("recompile_limit", "", None)]))
                continue
            if not c.is_recompile or c.status != "ok":
                continue
            # what explains this compile (cause_guards) names its group; every guard is evidence
            explaining = cause_guards(c.failed_guards)
            parsed: list[_Parsed] = [guard_pattern(g) for gs in map(split_guards, c.failed_guards) for g in gs]
            pattern = guard_pattern(explaining[0])[0] if explaining else "other"
            groups[pattern].append((c, parsed or [("other", "", None)]))
        for pattern, members in groups.items():
            found.append(_churn_finding(ledger, fname, comps, variants, pattern, members))
    found.sort(
        key=lambda f: (-(f.churn.compile_ns if f.churn else 0), -(f.churn.recompiles if f.churn else 0), f.finding_id)
    )
    return [replaced(f, rank=i) for i, f in enumerate(found, 1)]


def _churn_finding(
    ledger: Ledger,
    fname: str,
    comps: list[Compilation],
    variants: int,
    pattern: ChurnPattern,
    members: list[tuple[Compilation, list[_Parsed]]],
) -> Finding:
    first = comps[0]
    seen: set[_Parsed] = set()
    for _, ps in members:  # a recompile's guards repeat the earlier ones': each distinct once
        seen.update(ps)
    subjects = sorted({p[1] for p in seen if p[0] == pattern and p[1]})
    guards: list[str] = []
    values: list[str] = []
    for c, ps in members:
        for g1 in (g for e in c.failed_guards for g in split_guards(e)) if len(guards) < 5 else ():
            if g1 not in guards:
                guards.append(g1)
                if len(guards) == 5:
                    break
        for p in ps if len(values) < 8 else ():
            if p[0] == pattern and p[2] is not None and p[2] not in values:
                values.append(p[2])
                if len(values) == 8:
                    break
    fed_by = next((c.resume_site_id for c in comps if c.resume_site_id), None)
    m = RESUME_FRAME.match(fname)
    if fed_by is None and m:
        fn, line = m.group(1), int(m.group(2))
        fed_by = next((s.site_id for s in ledger.break_sites if s.function == fn and s.line == line), None)
    stable = stable_frame(fname)
    # Two frames of one function (the function and a resume of it) differ by the seam before them.
    ev = ChurnEvidence(
        pattern=pattern,
        frame_name=fname,
        file=first.file,
        line=first.line,
        compile_ids=[c.compile_id for c, _ in members],
        recompiles=sum(1 for c, _ in members if c.is_recompile and c.status == "ok"),
        variants=variants,
        compile_ns=sum(c.duration_ns or 0 for c, _ in members),
        calls=sorted({c.call_index for c, _ in members if c.call_index is not None}),
        subjects=subjects,
        guards=guards,
        values_seen=values,
        fallback=pattern == "recompile_limit",
        fed_by=fed_by,
        user_frame=first.user_frame,
    )
    fid = hash_id("FR", first.file, stable, fed_by or "", pattern, ",".join(subjects))
    missing: list[str] = []
    if any(c.duration_ns is None for c, _ in members):
        missing.append("compile time: not recorded for some compilations")
    f = Finding(
        finding_id=fid,
        axis="churn",
        rank=0,
        sentence="",
        remedies=_churn_remedies(ev, dynamic_false=ledger.environment.compile_options.get("dynamic") == "False"),
        churn=ev,
        missing=missing,
        cost_ns=ev.compile_ns,
        basis="compile time of these recompiles of the frame",
    )
    return replaced(f, sentence=_churn_sentence(fid, ev))


_PATTERN_WORDS = {
    "shape": "shape churn",
    "value": "value specialization churn",
    "type": "a type switch",
    "flag": "flag churn",
    "stride": "stride churn",
    "dtype_device": "dtype/device churn",
    "recompile_limit": "recompile-limit fallback",
    "other": "recompiles",
}


MODULE_INT_SETTING = "allow_unspec_int_on_nn_module"
"""The Dynamo setting that lets an int attribute of an nn.Module be symbolic (it is a constant to
Dynamo by default: each value its own graph); PyTorch's hint on such a guard names it."""
_MODULE_ROOT = re.compile(r"^(?:self|L\['self'\])[.\[]")
_INT = re.compile(r"^-?\d+$")


def module_int_subject(guards: list[str]) -> str | None:
    """The subject of the first value guard among ``guards`` that holds an int attribute of an
    nn.Module (``self.calls == 3``, ``self._modules['blocks']._modules['0'].pos == 8``): one that
    carries PyTorch's hint naming :data:`MODULE_INT_SETTING`, or an int compared on an attribute
    path below the frame's ``self`` (an extra failed guard capture lists has no hint). None: none."""
    for g in guards:
        pattern, subject, value = guard_pattern(g)
        if pattern == "value" and value is not None and _INT.match(value) and (
                MODULE_INT_SETTING in g or _MODULE_ROOT.match(subject)):
            return subject
    return None


def global_int_subject(guards: list[str]) -> str | None:
    """The subject of the first value guard among ``guards`` that holds a module global to an int
    (``G['step'] == 3``): Dynamo keeps a global int a constant whatever ``dynamic=`` says and no
    setting changes that (a global float is made symbolic after one recompile). None: none."""
    for g in guards:
        pattern, subject, value = guard_pattern(g)
        if pattern == "value" and value is not None and _INT.match(value) and subject.startswith("G["):
            return subject
    return None


def global_int_remedy(subject: str) -> Remedy:
    """Pass the global in: an int argument is made symbolic after one recompile, a global never."""
    return Remedy(
        action="pass_as_tensor",
        text=f"{subject} is a global int, a constant to Dynamo whatever dynamic= says (each value its own graph, "
        "and no setting changes that): pass it to the compiled function as an argument (an int argument is made "
        "symbolic after one recompile), or as a 0-d tensor",
    )


_MODULE_DICT = re.compile(r"\._(?:modules|parameters|buffers)\['([^']+)'\]")


def attribute_path(source: str) -> str:
    """A source as the user writes it: ``self._modules['blocks']._modules['0'].pos`` reads
    ``self.blocks[0].pos``. nn.Module's own dicts are how Dynamo reaches a submodule, a parameter
    or a buffer; the user writes an attribute, or an index into a container. For what is shown
    only: ids and guard texts keep PyTorch's spelling."""
    return _MODULE_DICT.sub(lambda m: f"[{m.group(1)}]" if m.group(1).isdigit() else f".{m.group(1)}", source)


def module_int_remedy(subject: str, dynamic_false: bool = False) -> Remedy:
    """Let the module's int be symbolic: one more compilation, then one graph for every value
    (PyTorch's own hint for such a guard). Under ``dynamic=False`` the int stays static whatever
    the setting, so that option goes too."""
    drop = "remove dynamic=False from torch.compile and " if dynamic_false else ""
    return config_remedy(
        "allow_unspec_int_on_nn_module",
        f"{attribute_path(subject)} is an int attribute of an nn.Module, a constant to Dynamo (each value its "
        f"own graph): {drop}set torch._dynamo.config.{MODULE_INT_SETTING} = True to make it symbolic (one more "
        "compilation, then one graph for every value), or keep it in a 0-d tensor buffer",
        MODULE_INT_SETTING, "True",
    )

_TRAINING = re.compile(r"(?:^|\.)training$")


def train_eval_remedy(subjects: list[str]) -> Remedy | None:
    """A module's ``training`` flag among the subjects: ``model.train()`` / ``model.eval()`` on one
    compiled model (with grad mode, evaluation under ``torch.no_grad()``). One variant per mode is
    what that costs, once each; the evaluation's compile time is what can be saved."""
    if not any(_TRAINING.search(x) for x in subjects):
        return None
    grad = " and grad mode (evaluation under torch.no_grad())" if "global state grad_mode" in subjects else ""
    return Remedy(
        action="split_by_flag",
        text=f"the modules' training flag (model.train() / model.eval()){grad} changed between calls: each mode is "
        "its own compiled variant, compiled once per mode, as expected where one compiled model both trains and "
        "evaluates (a cost only if the modes keep adding variants); to spend no compile time on evaluation, "
        "evaluate with the module itself rather than its compiled form",
    )


_STACK = re.compile(r"^___stack(\d+)(?:\[(\d+)\])?$")


def user_subject(subject: str) -> str:
    """A guard's subject as the user can find it: Dynamo's ``___stackN`` (a value live across a
    graph break, passed to the resume function) has no name in the user's code, so it is said
    what it is; any other subject is the user's own argument or attribute name."""
    m = _STACK.match(subject)
    if m is None:
        return attribute_path(subject)
    dim = f" dim {m.group(2)}" if m.group(2) is not None else ""
    return f"the value carried across the break{dim} (Dynamo's ___stack{m.group(1)})"


def _churn_sentence(fid: str, ev: ChurnEvidence) -> str:
    loc = frame_label(ev.frame_name, ev.file, ev.line, ev.user_frame)
    if ev.pattern == "recompile_limit":
        return (f"churn {fid}: {loc} hit the recompile limit and runs eagerly from call "
                f"{ev.calls[0] if ev.calls else '?'} on ({ev.variants} variants compiled before)")
    on = f" on {', '.join(user_subject(x) for x in ev.subjects[:3])}" if ev.subjects else ""
    vals = f" (expected values {', '.join(ev.values_seen[:4])})" if ev.values_seen else ""
    fed = f", fed by break {ev.fed_by}" if ev.fed_by else ""
    return (
        f"churn {fid}: {loc} recompiled {ev.recompiles}× from {_PATTERN_WORDS[ev.pattern]}{on}{vals}{fed}, "
        f"{ev.variants} variants, {fmt_ns(ev.compile_ns)} compile time in {len(ev.calls)} "
        f"call{'' if len(ev.calls) == 1 else 's'}"
    )


_ARG_COUNT = re.compile(r"^len\((?:L\[')?(args|kwargs)(?:'\])?\)$")
_ZERO_ONE = re.compile(r"tensor '(.+?)' size mismatch at index (\d+)\. expected [01], actual (?![01]\b)\d+")
OBLIVIOUS_SETTING = "backed_size_oblivious"


def zero_one(guard: str) -> bool:
    """A size guard that failed on a size first compiled as 0 or 1 (``expected 1, actual 2``):
    PyTorch specializes those sizes under every shape policy (a mark, ``dynamic=True``), so the
    dimension recompiles once for the first larger size whatever the policy."""
    return _ZERO_ONE.search(guard) is not None


def _zero_one_remedy(ev: ChurnEvidence) -> Remedy | None:
    """Sizes 0 and 1 not specialized: ``backed_size_oblivious`` with a dynamic policy, one graph for
    every size (its outputs checked: code that counts on a size-1 dimension broadcasting may differ)."""
    dims = [f"{m.group(1)}[{m.group(2)}]" for g in ev.guards if (m := _ZERO_ONE.search(g))]
    if not dims:
        return None
    said = ", ".join(dict.fromkeys(dims))
    return Remedy(
        action="size_oblivious",
        text=f"{said} was compiled at size 1 (or 0), which PyTorch specializes under every shape policy: a mark or "
        "dynamic=True still recompiles once for the first larger size; set torch.fx.experimental._config."
        f"{OBLIVIOUS_SETTING} = True with dynamic=True for one graph for every size (check the outputs: code that "
        "counts on a size-1 dimension broadcasting may differ), or make the first call's size 2 or more",
        config={OBLIVIOUS_SETTING: "True"},
        try_with=f"seamscope run --dynamo-config {OBLIVIOUS_SETTING}=True --compile-option dynamic=true {SCRIPT}",
    )


def _shape_remedies(ev: ChurnEvidence, dynamic_false: bool) -> list[Remedy]:
    """Sizes that change between calls: mark the dim dynamic or pad to buckets (drop dynamic=False first)."""
    dims = ", ".join(user_subject(x) for x in ev.subjects[:3])
    first = []
    if dynamic_false:  # the receipt records the option: it forbids what would fix the churn
        first.append(
            Remedy(
                action="drop_dynamic_false",
                text=f"sizes of {dims} change between calls and the frame was compiled with dynamic=False, "
                "which keeps every size static: drop dynamic=False so that automatic dynamic shapes "
                "can compile one variant for all sizes",
            )
        )
    if ev.subjects and all(_STACK.match(x) for x in ev.subjects):
        text = ("a value carried across a graph break changes size between calls: mark dynamic the input it is "
                "computed from (its recompile cause names it), or pad that input to a few buckets")
    else:
        text = (f"sizes of {dims} change between calls: mark the dim dynamic "
                "(torch._dynamo.mark_dynamic) or pad lengths to a few buckets; `seamscope shapes` measures "
                "static, automatic, dynamic and bucketed policies on your length distribution")
    last = [r] if (r := _zero_one_remedy(ev)) is not None else []
    return first + [
        Remedy(action="mark_dynamic_or_bucket", text=text,
               try_with="seamscope shapes FILE.py:FUNC --lengths-file LENGTHS")
    ] + last


def _value_remedies(ev: ChurnEvidence, dynamic_false: bool = False) -> list[Remedy]:
    """A value guard's churn (not an argument count): a scalar specialised as a constant; an int
    attribute of an nn.Module first gets the setting that makes it symbolic."""
    resume = ev.fed_by is not None or any(s.startswith("___stack") for s in ev.subjects)
    rs = []
    if (subject := module_int_subject(ev.guards)) is not None:
        rs.append(module_int_remedy(subject, dynamic_false))
    elif (subject := global_int_subject(ev.guards)) is not None:
        return [global_int_remedy(subject)]
    if resume:
        rs.append(
            config_remedy(
                "capture_scalar_outputs",
                "a value read with .item() is passed into the resume function and guarded by value: "
                "keep it a tensor (no .item()) or let Dynamo capture it symbolically",
                "capture_scalar_outputs", "True",
            )
        )
    rs.append(
        Remedy(
            action="pass_as_tensor",
            text="a Python scalar that changes every call is specialised as a constant: pass it as a 0-d "
            "tensor, or hoist it out of the compiled function",
        )
    )
    return rs


def _churn_remedies(ev: ChurnEvidence, dynamic_false: bool = False) -> list[Remedy]:
    p = ev.pattern
    if p == "shape":
        return _shape_remedies(ev, dynamic_false)
    if p == "value" and ev.subjects and all(_ARG_COUNT.match(x) for x in ev.subjects):
        which = sorted({m.group(1) for x in ev.subjects if (m := _ARG_COUNT.match(x))})
        return [
            Remedy(
                action="pass_argument_always",
                text=f"the number of arguments ({', '.join(f'len({w})' for w in which)}) differs between calls: an "
                "optional argument is passed in some calls and not in others. Pass it in every call (its "
                "default value when unused), or split the call sites so each passes the same arguments",
            )
        ]
    if p == "value":
        return _value_remedies(ev, dynamic_false)
    if p == "type":
        was = f" (it was {', '.join(ev.values_seen[:2])})" if ev.values_seen else ""
        return [
            Remedy(
                action="keep_type",
                text=f"{', '.join(ev.subjects[:3]) or 'an argument'} is passed as different types between calls{was}, "
                "and each type is its own compiled variant: pass the same type every call (always a tensor, or "
                "always a Python number)",
            )
        ]
    if p == "flag":
        if (mode := train_eval_remedy(ev.subjects)) is not None:
            return [mode]
        return [
            Remedy(
                action="split_by_flag",
                text="a Python flag or None-ness flips between calls: each value is one variant, a cost only "
                "if it flips often; hoist the branch out or compile one function per setting",
            )
        ]
    if p == "stride":
        return [Remedy(action="make_contiguous", text="inputs arrive with different layouts: call .contiguous() "
                       "before the compiled call, or mark the dim dynamic")]
    if p == "dtype_device":
        return [Remedy(action="cast_inputs", text="inputs arrive with different dtypes or devices: cast them to one "
                       "before the compiled call")]
    if p == "recompile_limit":
        return [
            config_remedy(
                "fix_churn_or_raise_limit",
                "the frame gave up compiling and runs eagerly: fix the churn that filled the cache (see the "
                "frame's other churn findings), or raise the limit to see what it would cost",
                "recompile_limit", "64",
            )
        ]
    return [Remedy(action="read_hints", text="read the failed guards: each names what changed between calls")]


# --- axes ----------------------------------------------------------------------------------------


def churn_axis(ledger: Ledger) -> ChurnAxis:
    comps = ledger.compilations
    per_frame: dict[tuple[int, str], int] = defaultdict(int)
    for c in comps:
        if c.status == "ok":
            per_frame[_frame_key(c)] += 1
    in_calls = sum(p.compile_ns for p in ledger.totals.phases)
    wall = sum(p.wall_ns for p in ledger.totals.phases)
    cold = next((p.calls for p in ledger.totals.phases if p.phase == "cold"), 0)
    return ChurnAxis(
        frames=len({_frame_key(c) for c in comps}),
        compiles=sum(1 for c in comps if c.status == "ok"),
        recompiles=sum(1 for c in comps if c.status == "ok" and c.is_recompile),
        variants_max=max(per_frame.values(), default=0),
        fallbacks=sum(1 for c in comps if c.status != "ok"),
        compile_ns=sum(c.duration_ns or 0 for c in comps),
        compiling_calls=cold,
        compile_share=round_float(in_calls / wall) if wall and ledger.run.has_runtime else None,
    )


# --- formatting helpers --------------------------------------------------------------------------
