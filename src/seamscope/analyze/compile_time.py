"""Where compile time goes: the stage split per run and per frame, the cache outcome per layer, and
the findings that attribute first compilations (a repeated block compiled one by one, a cache
that did not hit, a frame compiled for one call, the cold start that remains).

A pure function over a :class:`~seamscope.model.ledger.Ledger` (and the recompile causes already
derived from it, so that no compile time is ranked twice): the ledger is never edited.

Stages (``model/compile_time.py``) are read from PyTorch's ``compilation_metrics``: the frame's
duration; the backend call (``backend_compile_time_s``, in 2.13 equal to
``aot_autograd_cumulative_compile_time_us``), Inductor's part of it
(``inductor_cumulative_compile_time_us``) and the autotuning inside Inductor
(``compile_time_autotune_time_us``). Dynamo's own time is the duration less the backend call.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable

import msgspec

from ..model.canonical import round_float
from ..model.compile_time import (
    STAGES,
    CacheLayer,
    CompileTimeFinding,
    CompileTimeSection,
    FrameCompileTime,
    Stage,
    StageSplit,
)
from ..model.headline import Headline, RankedItem, RecompileCause
from ..model.ledger import Compilation, Ledger, ModuleRepeat, RegionEvent, compile_frame_index
from ..model.normalize import short_path
from ..model.remedy import Remedy
from .findings_churn import split_guards
from .findings_common import compilation_label, frame_label, hash_id
from .units import counted, fmt_ns, fmt_pct, percent

STAGE_WORDS: dict[str, str] = {
    "dynamo": "Dynamo tracing",
    "aot_autograd": "AOTAutograd",
    "inductor": "Inductor code generation",
    "autotune": "autotuning",
}
#: A repeated block is worth a finding when its instances hold at least this share of the graph.
MIN_BLOCK_SHARE = 0.25
ALIKE = 0.9
"""Two instances of a block are one block traced twice when the smaller traced at least this share
of the larger's nodes; below it they took different paths (transformers' ``T5Stack`` is the
encoder, 114 nodes, and the decoder with cross-attention, 165), and compiled on their own each
would compile its own graph: nothing traced again."""
_INDEX = re.compile(r"\[\d+\]")
_PREFIX = re.compile(r"^\s*\d+/\d+:\s*")
_ON_SELF = re.compile(r"(L\['self'\]|\bself\b)[.\[]")


# --- the stage split -----------------------------------------------------------------------------


def stages_of(c: Compilation) -> dict[str, int | None]:
    """One compilation's exclusive stages (None: not recorded), and ``unsplit``."""
    total = c.duration_ns or 0
    call = c.backend_compile_ns if c.backend_compile_ns is not None else c.aot_ns
    ind = c.inductor_ns
    if ind is None and c.backend_ns is not None and call is not None and c.backend_ns < call:
        ind = c.backend_ns  # a ledger written before the fields were split: Inductor's own time
    tune = c.autotune_ns
    out: dict[str, int | None] = dict.fromkeys(STAGES)
    if c.duration_ns is None:
        out["unsplit"] = 0
        return out
    if call is None:
        if c.dynamo_ns is None or {"aot_autograd", "backend"} & set(c.metrics_absent):
            out["unsplit"] = total  # the backend call's time was not recorded: no split
            return out
        call = 0  # recorded as none: the frame never reached a backend
    call = min(call, total)
    out["dynamo"] = total - call
    ind_v = min(ind, call) if ind is not None else None
    out["aot_autograd"] = call - (ind_v or 0)
    if ind_v is not None:
        tune_v = min(tune, ind_v) if tune is not None else None
        out["inductor"] = ind_v - (tune_v or 0)
        out["autotune"] = tune_v
    out["unsplit"] = 0
    return out


def split_of(comps: Iterable[Compilation]) -> StageSplit:
    n = 0
    total = unsplit = 0
    sums: dict[str, int | None] = dict.fromkeys(STAGES)
    codegen: int | None = None
    for c in comps:
        n += 1
        total += c.duration_ns or 0
        st = stages_of(c)
        unsplit += st.get("unsplit") or 0
        for k in STAGES:
            v = st[k]
            if v is not None:
                sums[k] = (sums[k] or 0) + v
        if c.codegen_ns is not None:
            codegen = (codegen or 0) + c.codegen_ns
    return StageSplit(
        compilations=n, total_ns=total, dynamo_ns=sums["dynamo"], aot_autograd_ns=sums["aot_autograd"],
        inductor_ns=sums["inductor"], autotune_ns=sums["autotune"], unsplit_ns=unsplit, codegen_ns=codegen,
    )


def stage_values(s: StageSplit) -> dict[Stage, int]:
    vals = {
        "dynamo": s.dynamo_ns,
        "aot_autograd": s.aot_autograd_ns,
        "inductor": s.inductor_ns,
        "autotune": s.autotune_ns,
    }
    return {k: v for k, v in vals.items() if v}  # type: ignore[misc]


def dominant(s: StageSplit) -> Stage | None:
    vals = stage_values(s)
    if not vals:
        return None
    return max(vals, key=lambda k: (vals[k], -STAGES.index(k)))


def inductor_cached(backend: str | None) -> bool:
    """Whether Inductor's persistent caches (the FX graph and AOTAutograd caches in
    ``TORCHINDUCTOR_CACHE_DIR``, ``save_cache_artifacts``) can serve the run's backend: inductor,
    or a backend not recorded (an imported log). ``eager`` and ``aot_eager`` are never served."""
    return backend is None or str(backend).startswith("inductor")


def stage_word(stage: str, backend: str | None) -> str:
    if (
        stage == "aot_autograd"
        and backend not in (None, "aot_eager", "inductor")
        and not str(backend).startswith("inductor")
    ):
        return f"the {backend} backend's compile" if backend else "the backend's compile"
    return STAGE_WORDS.get(stage, stage)


def split_words(s: StageSplit, backend: str | None) -> str:
    """``Dynamo tracing 2.1 s (68%), AOTAutograd 980 ms (32%)``."""
    vals = stage_values(s)
    parts = [f"{stage_word(k, backend)} {fmt_ns(v)} ({fmt_pct(percent(v, s.total_ns))})" for k, v in vals.items()]
    if s.unsplit_ns:
        parts.append(f"not split by stage {fmt_ns(s.unsplit_ns)}")
    return ", ".join(parts) if parts else "no stage recorded"


# --- caches --------------------------------------------------------------------------------------


def _cache_layers(comps: list[Compilation]) -> list[CacheLayer]:
    out = []
    for layer, attr, why in (
        ("fx_graph", "fx_cache", "fx_bypass_reason"),
        ("aot_autograd", "aot_cache", "aot_bypass_reason"),
    ):
        outcomes = Counter(getattr(c, attr) for c in comps)
        reasons = Counter(getattr(c, why) for c in comps if getattr(c, attr) == "bypass")
        out.append(
            CacheLayer(
                layer=layer,  # type: ignore[arg-type]
                hit=outcomes.get("hit", 0),
                miss=outcomes.get("miss", 0),
                bypass=outcomes.get("bypass", 0),
                unrecorded=outcomes.get(None, 0),
                bypass_reasons=[
                    f"{r or 'no reason recorded'} ({n}×)"
                    for r, n in sorted(reasons.items(), key=lambda t: (-t[1], str(t[0])))
                ],
            )
        )
    return out


def _outcome_words(comps: list[Compilation], attr: str) -> str:
    n = Counter(getattr(c, attr) for c in comps if getattr(c, attr) is not None)
    return ", ".join(f"{v} {k}" for k, v in sorted(n.items())) or "–"


def _warm(ledger: Ledger, comps: list[Compilation]) -> tuple[str | None, bool | None, str]:
    cc = ledger.environment.compile_cache
    if cc is not None:
        warm = (cc.fx_entries + cc.aot_entries) > 0
        basis = f"{cc.fx_entries} FX graph and {cc.aot_entries} AOTAutograd entries in the directory when the run began"
        if warm and comps and not _holds_own_entries(comps):
            basis += ", none of them this program's (no compilation hit)"
        return cc.dir, warm, basis
    if any(c.fx_cache == "hit" or c.aot_cache == "hit" for c in comps):
        return None, True, "inferred: some compilations hit the cache (the directory was not read)"
    return None, None, "unknown: the cache directory was not read (an imported log, or an older capture)"


# --- the section ---------------------------------------------------------------------------------


def _frame_key(c: Compilation) -> tuple[str, int, str]:
    return (c.file, c.line, c.frame_name)


def analyze_compile_time(
    ledger: Ledger, causes: list[RecompileCause], costed_ids: Iterable[str] = ()
) -> CompileTimeSection:
    """The compile-time ledger of ``ledger``. ``causes`` and ``costed_ids`` (compilations whose
    time another ranked item already counts: a break's, without runtime data) are not ranked again."""
    comps = list(ledger.compilations)
    backend = ledger.environment.backend
    has_rt = ledger.run.has_runtime
    wall = sum(p.wall_ns for p in ledger.totals.phases) + sum(c.duration_ns or 0 for c in comps if c.call_index is None)
    split = split_of(comps)
    compile_ns = split.total_ns
    share = round_float(compile_ns / wall) if has_rt and wall else None
    by_frame: dict[tuple[str, int, str], list[Compilation]] = defaultdict(list)
    for c in comps:
        by_frame[_frame_key(c)].append(c)
    frames = []
    for (file, line, name), cs in by_frame.items():
        s = split_of(cs)
        frames.append(FrameCompileTime(
            frame_name=name, file=file, line=line, compile_ids=[c.compile_id for c in cs],
            recompiles=sum(1 for c in cs if c.is_recompile), split=s,
            share=round_float(s.total_ns / wall) if has_rt and wall else None,
            fx_cache=_outcome_words(cs, "fx_cache"), aot_cache=_outcome_words(cs, "aot_cache"),
            user_frame=next((c.user_frame for c in cs if c.user_frame is not None), None),
        ))
    frames.sort(key=lambda f: (-f.split.total_ns, f.file, f.line, f.frame_name))
    cache_dir, warm, warm_basis = _warm(ledger, comps)
    missing = _missing(ledger, comps)
    findings = _findings(ledger, comps, causes, set(costed_ids), warm, warm_basis, backend)
    return CompileTimeSection(
        compile_ns=compile_ns, share=share, split=split, dominant_stage=dominant(split), frames=frames,
        caches=_cache_layers([c for c in comps if c.status == "ok"]), cache_dir=cache_dir, cache_dir_warm=warm,
        cache_dir_basis=warm_basis, findings=findings, missing=missing,
    )


def _missing(ledger: Ledger, comps: list[Compilation]) -> list[str]:
    out: list[str] = []
    absent = Counter(k for c in comps for k in c.metrics_absent)
    for k, n in sorted(absent.items()):
        out.append(
            f"{STAGE_WORDS.get(k, k.replace('_', ' '))}: this PyTorch version's compilation_metrics has no "
            "field for it "
            f"({n} of {len(comps)} compilations); the split cannot tell it"
        )
    untimed = sum(1 for c in comps if c.duration_ns is None)
    if untimed:
        out.append(f"{counted(untimed, 'compilation')} {'has' if untimed == 1 else 'have'} no recorded duration")
    if not any(c.autotune_ns for c in comps) and not absent.get("autotune"):
        out.append("autotuning: none recorded at compile time (not in these compilations, or not by this backend)")
    if ledger.run.source != "live":
        out.append("repeated blocks inside one graph: the graph's module structure is read in live capture only; "
                   "from a log, only a block compiled as its own frame again and again is seen")
    return out


# --- findings ------------------------------------------------------------------------------------


def _claimed_by_causes(causes: list[RecompileCause], durations: dict[str, int]) -> dict[str, int]:
    claimed: dict[str, int] = {}
    for r in causes:
        for cid in [*r.compile_ids, *r.new_frame_ids]:
            claimed[cid] = durations.get(cid, 0)
    return claimed


def _take(claimed: dict[str, int], durations: dict[str, int], cid: str, want: int) -> int:
    """Claim up to ``want`` ns of ``cid``'s compile time not claimed yet; return what was claimed."""
    left = max(0, durations.get(cid, 0) - claimed.get(cid, 0))
    got = min(left, max(0, want))
    claimed[cid] = claimed.get(cid, 0) + got
    return got


def _findings(
    ledger: Ledger, comps: list[Compilation], causes: list[RecompileCause], costed: set[str], warm: bool | None,
    warm_basis: str, backend: str | None,
) -> list[CompileTimeFinding]:
    durations = {c.compile_id: c.duration_ns or 0 for c in comps}
    claimed = _claimed_by_causes(causes, durations)
    claimed.update({cid: durations[cid] for cid in costed if cid in durations})
    out: list[CompileTimeFinding] = []
    out += _repeated_graph_blocks(comps, claimed, durations, backend)
    out += _repeated_frames(comps, claimed, durations, causes, backend)
    own = _holds_own_entries(comps)
    out += _cache_findings(comps, claimed, durations, warm and own, warm_basis, backend)
    out += _cold_once(ledger, comps, claimed, durations, backend)
    out += _cold_start(comps, claimed, durations, backend, _foreign_entries(ledger, comps, own))
    out.sort(key=lambda f: (-f.cost_ns, f.finding_id))
    return [msgspec.structs.replace(f, rank=k) for k, f in enumerate(out, 1)]


def _regional_remedy(cls: str, kv_cache: bool) -> list[Remedy]:
    text = (
        f"compile the block instead of the whole model: each {cls} instance compiled on its own "
        f"(for block in blocks: block.compile()) shares one compilation across the instances; or mark "
        f"{cls}.forward with torch.compiler.nested_compile_region so a whole-model compile traces it once"
    )
    if kv_cache:
        text += (
            ". Its instances update transformers' KV cache: compiled one by one, each instance guards on its "
            "own layer's cache state (layers[i].is_initialized) and recompiles, up to the recompile limit, so "
            "regional compilation gains nothing unless the cache is off (use_cache=False) or static"
        )
    return [Remedy(action="regional_compile", text=text, try_with=f"seamscope run --regional {cls} SCRIPT")]


def _repeated_graph_blocks(
    comps: list[Compilation], claimed: dict[str, int], durations: dict[str, int], backend: str | None
) -> list[CompileTimeFinding]:
    groups: dict[tuple[str, str, int], list[tuple[Compilation, ModuleRepeat]]] = defaultdict(list)
    for c in comps:
        if c.status != "ok" or not c.modules:
            continue
        m = c.modules[0]
        differ = m.instances == 2 and m.nodes_min < ALIKE * m.nodes_max
        if m.instances >= 2 and m.graph_nodes and m.nodes / m.graph_nodes >= MIN_BLOCK_SHARE and not differ:
            groups[(m.cls, m.file, m.line)].append((c, m))
    out = []
    for (cls, file, line), rows in groups.items():
        est = cost = total = 0
        for c, m in rows:
            again = m.nodes - m.nodes_max  # what a single compilation of the block would not trace again
            want = (c.duration_ns or 0) * again // m.graph_nodes
            est += want
            total += c.duration_ns or 0
            cost += _take(claimed, durations, c.compile_id, want)
        first = rows[0][1]
        kv = any(m.kv_cache for _, m in rows)
        ids = [c.compile_id for c, _ in rows]
        per = "each" if first.nodes_min == first.nodes_max else f"{first.nodes_min}–{first.nodes_max}"
        stage = dominant(split_of(c for c, _ in rows))
        sentence = (
            f"{cls}.forward ({short_path(file)}:{line}) was traced {first.instances} times in compilation "
            f"{', '.join(ids[:4])}{', …' if len(ids) > 4 else ''}, once per instance ({first.nodes_max} graph nodes "
            f"{per}, {fmt_pct(percent(first.nodes, first.graph_nodes))} of the graph): about {fmt_ns(est)} of "
            f"{fmt_ns(total)} compile time went to tracing the same block again"
        )
        if stage is not None:
            sentence += f" (mostly {stage_word(stage, backend)})"
        if kv:
            sentence += ("; its instances update the KV cache, so compiled one by one each would recompile on its "
                         "layer's cache state")
        out.append(CompileTimeFinding(
            finding_id=hash_id("CT", "repeated_block", first.module, cls), kind="repeated_block", rank=0,
            sentence=sentence, cost_ns=cost, total_ns=est, compile_ids=ids,
            basis="estimated: the compile time of the compilation(s) times the share of their graph nodes in the "
            "block's instances after the first",
            remedies=_regional_remedy(cls, kv), frame_name=f"{cls}.forward", file=file, line=line, block=first,
            stage=stage,
        ))
    return out


def _same_but_index(guards: list[list[str]]) -> str | None:
    """The failed guards of successive recompiles, when they differ only in their numbers (one
    guard per instance: ``layers[1]`` then ``layers[2]``): the first, with ``i`` for the index."""
    firsts = [_guard_expr(g[0]) for g in guards if g]
    if len(firsts) < 2 or len(set(firsts)) < 2:
        return None
    shapes = {_INDEX.sub("[i]", g) for g in firsts}
    if len(shapes) != 1:
        return None
    return _INDEX.sub("[i]", firsts[0])


def _guard_expr(guard: str) -> str:
    """A failed guard's expression: no ``0/1:`` prefix, no source comment, no user stack."""
    line = guard.splitlines()[0] if guard else ""
    line = _PREFIX.sub("", line)
    return line.split("  #", 1)[0].strip()


def _repeated_frames(
    comps: list[Compilation], claimed: dict[str, int], durations: dict[str, int], causes: list[RecompileCause],
    backend: str | None,
) -> list[CompileTimeFinding]:
    """The same code object compiled again for each instance: successive recompiles of one frame
    whose failed guards differ only by an index (per-instance state), or that guard on ``self``."""
    by: dict[tuple[str, int, str], list[Compilation]] = defaultdict(list)
    for c in comps:
        by[_frame_key(c)].append(c)
    cause_of = {cid: r.cause_id for r in causes for cid in r.compile_ids}
    out = []
    for (file, line, name), cs in by.items():
        if len(cs) < 2:
            continue
        cs = sorted(cs, key=lambda c: compile_frame_index(c.compile_id))
        # which instance: the guards that failed against the most recent variant (its own index),
        # not the cause's guards (what changed since the first variant names the first instance)
        guards = [split_guards(c.failed_guards[0]) if c.failed_guards else [] for c in cs if c.is_recompile]
        per_index = _same_but_index(guards)
        on_self = bool(guards) and all(g and all(_ON_SELF.search(_guard_expr(x)) for x in g) for g in guards)
        if per_index is None and not on_self:
            continue
        total = sum(c.duration_ns or 0 for c in cs[1:])
        cost = sum(_take(claimed, durations, c.compile_id, c.duration_ns or 0) for c in cs[1:])
        fallbacks = sum(1 for c in cs if c.status == "fallback")
        rc = sorted({cause_of[c.compile_id] for c in cs if c.compile_id in cause_of})
        why = f"guard per instance: {per_index}" if per_index else "guarded on the instance (self)"
        sentence = (
            f"{frame_label(name, file, line, cs[0].user_frame)} was compiled {len(cs)} times, once per instance or "
            f"variant ({why}): "
            f"{fmt_ns(total)} of compile time after the first"
        )
        if fallbacks:
            sentence += f"; {fallbacks} hit the recompile limit and run eagerly"
        if rc:
            sentence += f" (the recompiles are also cause {', '.join(rc)})"
        if per_index and "layers[" in per_index:
            text = (
                "each instance recompiles on its own layer's KV-cache state, so compiling the block one instance "
                "at a time gains nothing while the cache is on: run with use_cache=False or a static cache, or "
                "compile the whole model"
            )
        else:
            text = (
                "the instances differ only in state the guard reads: make that state a tensor or an argument the "
                "compiled code does not specialise on, so one compilation serves every instance"
            )
        rem = [Remedy(action="regional_compile", text=text)]
        out.append(CompileTimeFinding(
            finding_id=hash_id("CT", "repeated_frame", file, name), kind="repeated_block", rank=0,
            sentence=sentence, cost_ns=cost, total_ns=total, compile_ids=[c.compile_id for c in cs], remedies=rem,
            basis="the compile time of the frame's compilations after the first, less what recompile causes claim",
            frame_name=name, file=file, line=line, stage=dominant(split_of(cs[1:])),
        ))
    return out


def _holds_own_entries(comps: list[Compilation]) -> bool:
    """Whether the directory held entries of this program: some compilation of the run hit a layer.
    Without a hit, a non-empty directory holds other programs' graphs only, so a miss there is a
    first compilation (a cold start), not an entry that could have hit."""
    return any(c.fx_cache == "hit" or c.aot_cache == "hit" for c in comps)


def _foreign_entries(ledger: Ledger, comps: list[Compilation], own: bool) -> str:
    """The clause a cold start adds when the directory held entries, none of them this program's."""
    cc = ledger.environment.compile_cache
    if own or cc is None or not (cc.fx_entries + cc.aot_entries):
        return ""
    if not any(c.fx_cache == "miss" or c.aot_cache == "miss" for c in comps):
        return ""
    n = cc.fx_entries + cc.aot_entries
    return (
        f"; a cold start: the cache directory held {n} entr{'y' if n == 1 else 'ies'} ({cc.fx_entries} FX graph, "
        f"{cc.aot_entries} AOTAutograd), none of them this program's (no compilation hit)"
    )


def _cache_findings(
    comps: list[Compilation], claimed: dict[str, int], durations: dict[str, int], warm: bool | None,
    warm_basis: str, backend: str | None,
) -> list[CompileTimeFinding]:
    out = []
    for layer, attr, why, name in (
        ("fx_graph", "fx_cache", "fx_bypass_reason", "FX graph cache"),
        ("aot_autograd", "aot_cache", "aot_bypass_reason", "AOTAutograd cache"),
    ):
        ok = [c for c in comps if c.status == "ok"]
        bypass = [c for c in ok if getattr(c, attr) == "bypass"]
        miss = [c for c in ok if getattr(c, attr) == "miss"] if warm else []
        hits = sum(1 for c in ok if getattr(c, attr) == "hit")
        if not bypass and not miss:
            continue
        rows = bypass + miss
        total = cost = 0
        for c in rows:
            st = stages_of(c)
            want = sum(st[k] or 0 for k in ("aot_autograd", "inductor", "autotune"))  # what a hit skips
            total += want
            cost += _take(claimed, durations, c.compile_id, want)
        parts = []
        if miss:
            parts.append(f"{len(miss)} missed on a warm cache directory ({warm_basis})")
        if bypass:
            reasons = Counter(getattr(c, why) or "no reason recorded" for c in bypass)
            parts.append(f"{len(bypass)} bypassed it ({'; '.join(f'{r} ({n}×)' for r, n in reasons.most_common(3))})")
        sentence = (
            f"{name}: of {counted(len(ok), 'compilation')} {hits} hit, " + " and ".join(parts)
            + f": {fmt_ns(total)} of backend compile time a hit would have skipped"
        )
        missing = []
        if miss:
            missing.append("a miss has no reason in PyTorch's log: the key (graph, inputs, configuration, versions) "
                           "matched no entry; a changed graph or setting changes it")
        rem = []
        if bypass:
            rem.append(Remedy(
                action="fix_cache_bypass",
                text="a bypassed graph is never cached, so every restart compiles it again: remove what PyTorch names "
                "as the reason (an unpicklable input or constant, a custom op without a cacheable implementation, a "
                "config that turns the cache off)",
            ))
        if miss:
            rem.append(Remedy(
                action="persistent_cache",
                text="keep inputs, settings and versions identical between the run that fills the cache and the runs "
                "that read it (TORCHINDUCTOR_CACHE_DIR on a persistent disk; torch.compiler.save_cache_artifacts / "
                "load_cache_artifacts to carry it to another machine)",
            ))
        ids = [c.compile_id for c in rows]
        out.append(CompileTimeFinding(
            finding_id=hash_id("CT", "cache_miss", layer), kind="cache_miss", rank=0, sentence=sentence,
            cost_ns=cost, total_ns=total, compile_ids=ids, remedies=rem,
            basis="the backend stages (AOTAutograd, Inductor, autotuning) of the compilations that did not hit",
            stage=dominant(split_of(rows)), missing=missing,
        ))
    return out


def _cold_once(
    ledger: Ledger, comps: list[Compilation], claimed: dict[str, int], durations: dict[str, int], backend: str | None,
) -> list[CompileTimeFinding]:
    if not ledger.run.has_runtime or ledger.totals.calls < 2:
        return []
    runs = {r.compile_id: r.runs for r in ledger.totals.regions}
    calls_ran: dict[str, set[int]] = defaultdict(set)
    for call in ledger.calls:
        for e in call.events:
            if isinstance(e, RegionEvent):
                calls_ran[e.compile_id].add(call.index)
    last = ledger.totals.calls - 1
    out = []
    for c in comps:
        if c.is_recompile or c.status != "ok" or not c.graph_count or c.call_index is None:
            continue
        if c.call_index == 0 or c.call_index >= last or runs.get(c.compile_id, 0) > 1:
            continue
        if ledger.retention.dropped == 0 and len(calls_ran.get(c.compile_id, set())) > 1:
            continue
        cost = _take(claimed, durations, c.compile_id, c.duration_ns or 0)
        if not (c.duration_ns or 0):
            continue
        n_after = last - c.call_index
        sentence = (
            f"{compilation_label(c)} was first compiled in call {c.call_index} "
            f"({fmt_ns(c.duration_ns)}) and its code ran {counted(runs.get(c.compile_id, 0), 'time')}: none of the "
            f"{counted(n_after, 'later call')} needed it (a branch taken once)"
        )
        out.append(CompileTimeFinding(
            finding_id=hash_id("CT", "cold_once", c.file, c.frame_name), kind="cold_once", rank=0, sentence=sentence,
            cost_ns=cost, total_ns=c.duration_ns or 0, compile_ids=[c.compile_id],
            basis="the compile time of a first compilation whose code served one call",
            remedies=[Remedy(
                action="skip_rare_frame",
                text="if the branch is rare, keep it out of compilation (torch.compiler.disable on the function it "
                "calls, or move it outside the compiled code): it then runs eagerly without a compile; if it recurs "
                "in production, it is paid once per worker"
                + (" and a warm persistent cache cuts its backend share" if inductor_cached(backend) else ""),
            )],
            frame_name=c.frame_name, file=c.file, line=c.line, stage=dominant(split_of([c])),
        ))
    return out


_STAGE_REMEDY = {
    "dynamo": "Dynamo tracing is not cached between processes: trace less (compile the repeated block instead of "
    "the whole model, keep cold paths out of the compiled code)",
    "aot_autograd": "a warm persistent cache (TORCHINDUCTOR_CACHE_DIR kept between runs) skips AOTAutograd on a hit "
    "under inductor; other backends are not cached",
    "inductor": "a warm persistent cache (the FX graph cache in TORCHINDUCTOR_CACHE_DIR, or "
    "torch.compiler.save_cache_artifacts / load_cache_artifacts) skips Inductor on a hit; "
    "torch._inductor.config.compile_threads parallelises its kernel compiles",
    "autotune": (
        "autotuning results are cached with the FX graph cache; a lighter mode (no max-autotune) skips "
        "most of it"
    ),
}


def _cold_start(
    comps: list[Compilation], claimed: dict[str, int], durations: dict[str, int], backend: str | None,
    foreign: str = "",
) -> list[CompileTimeFinding]:
    firsts = [c for c in comps if not c.is_recompile and c.duration_ns]
    rest = {c.compile_id: _take(claimed, durations, c.compile_id, c.duration_ns or 0) for c in firsts}
    cost = sum(rest.values())
    if not cost:
        return []
    left = [c for c in firsts if rest[c.compile_id]]
    split = split_of(left)
    stage = dominant(split)
    frames = {(c.frame_name, c.file, c.line) for c in left}
    sentence = (
        f"{fmt_ns(cost)} of the first compilations of {counted(len(frames), 'frame')} is explained by no other finding "
        f"(their stages: {split_words(split, backend)}){foreign}"
    )
    if inductor_cached(backend) or stage == "dynamo":
        rem = [Remedy(action="persistent_cache" if stage != "dynamo" else "regional_compile",
                      text=_STAGE_REMEDY.get(stage or "", "compile less code, or keep the caches warm"))]
    else:  # eager, aot_eager: no persistent cache serves them, whatever the stage
        rem = [Remedy(action="regional_compile",
                      text=f"no persistent cache serves the {backend} backend (Inductor's caches serve inductor only): "
                      "compile less code (compile the repeated block instead of the whole model, keep cold paths "
                      "out of the compiled code)")]
    return [CompileTimeFinding(
        finding_id=hash_id("CT", "cold_start"), kind="cold_start", rank=0, sentence=sentence, cost_ns=cost,
        total_ns=cost, compile_ids=[c.compile_id for c in left][:64],
        basis="first compilations' compile time not claimed by a recompile cause or another compile-time finding",
        remedies=rem, stage=stage,
    )]


# --- into the ranked list and the headline -------------------------------------------------------


def rank_with(
    ranked: list[RankedItem], section: CompileTimeSection, has_runtime: bool, wall_ns: int
) -> list[RankedItem]:
    """The list ranked across axes with the compile-time findings in it, renumbered."""
    items = list(ranked)
    for f in section.findings:
        items.append(RankedItem(
            rank=0, item_id=f.finding_id, axis="compile_time", cost_ns=f.cost_ns, basis=f.basis,
            share=round_float(f.cost_ns / wall_ns) if has_runtime and wall_ns else None, sentence=f.sentence,
        ))
    order = {"recompile_cause": 0, "fragmentation": 1, "compile_time": 2}
    items.sort(key=lambda it: (-(it.cost_ns if it.cost_ns is not None else -1), order[it.axis], it.item_id))
    return [msgspec.structs.replace(it, rank=k) for k, it in enumerate(items, 1)]


def with_stage_sentence(headline: Headline, section: CompileTimeSection, backend: str | None) -> Headline:
    """The headline, saying which compile stage dominates."""
    st = section.dominant_stage
    if st is None or not section.compile_ns:
        return headline
    vals = stage_values(section.split)
    v = vals[st]
    rest = [
        f"{stage_word(k, backend)} {fmt_ns(x)} ({fmt_pct(percent(x, section.split.total_ns))})"
        for k, x in vals.items() if k != st
    ]
    if section.split.unsplit_ns:
        rest.append(f"not split by stage {fmt_ns(section.split.unsplit_ns)}")
    extra = (  # each figure once: the dominant stage, then the others
        f" {stage_word(st, backend)} dominates compile time ({fmt_ns(v)}, {fmt_pct(percent(v, section.compile_ns))})"
        + (f"; then {', '.join(rest)}." if rest else ".")
    )
    return msgspec.structs.replace(headline, sentence=headline.sentence + extra)
