"""Cold against warm: the compile-time ledgers of two runs of one target sharing a persistent
cache directory (the first fills it, the second reads it), as a restarted worker would pay."""

from __future__ import annotations

from ..model.compile_time import STAGES, WarmStage, WarmStart
from ..model.receipt import Receipt
from .compile_time import STAGE_WORDS, analyze_compile_time, split_of
from .findings_common import frame_label
from .units import fmt_ns


def _section(r: Receipt):  # type: ignore[no-untyped-def]
    if r.findings is not None and r.findings.compile_time is not None:
        return r.findings.compile_time
    return analyze_compile_time(r.ledger, [])


def compare_warm(cold: Receipt, warm: Receipt, cache_dir: str, cold_path: str, warm_path: str) -> WarmStart:
    cs, ws = _section(cold), _section(warm)
    c_split, w_split = split_of(cold.ledger.compilations), split_of(warm.ledger.compilations)
    stages = [
        WarmStage(stage=k, cold_ns=getattr(c_split, f"{k}_ns"), warm_ns=getattr(w_split, f"{k}_ns")) for k in STAGES
    ]
    if c_split.unsplit_ns or w_split.unsplit_ns:
        stages.append(WarmStage(stage="unsplit", cold_ns=c_split.unsplit_ns, warm_ns=w_split.unsplit_ns))
    missed = []
    for c in warm.ledger.compilations:
        if c.status != "ok":
            continue
        for layer, outcome, reason in (("FX graph cache", c.fx_cache, c.fx_bypass_reason),
                                       ("AOTAutograd cache", c.aot_cache, c.aot_bypass_reason)):
            if outcome in ("miss", "bypass"):
                why = reason or ("no reason in PyTorch's log: the key matched no entry" if outcome == "miss" else "no reason recorded")
                missed.append(f"{c.compile_id} {frame_label(c.frame_name, c.file, c.line)}: {layer} {outcome} ({why})")
    c_wall = sum(p.wall_ns for p in cold.ledger.totals.phases)
    w_wall = sum(p.wall_ns for p in warm.ledger.totals.phases)
    left = [s for s in stages if s.warm_ns]
    top = max(left, key=lambda s: s.warm_ns or 0) if left else None
    sentence = (
        f"A restarted worker with a warm cache compiled for {fmt_ns(ws.compile_ns)} instead of {fmt_ns(cs.compile_ns)} "
        f"({len(warm.ledger.compilations)} compilations); its calls took {fmt_ns(w_wall)} instead of {fmt_ns(c_wall)}"
    )
    if top is not None:
        sentence += f"; what remains is mostly {STAGE_WORDS.get(top.stage, top.stage)} ({fmt_ns(top.warm_ns)})"
        if top.stage == "dynamo":
            sentence += ", which no persistent cache skips"
    sentence += f"; {len(missed)} cache lookup(s) still missed" if missed else "; every cache lookup hit"
    return WarmStart(
        cache_dir=cache_dir, cold_receipt=cold_path, warm_receipt=warm_path, cold_compile_ns=cs.compile_ns,
        warm_compile_ns=ws.compile_ns, cold_wall_ns=c_wall, warm_wall_ns=w_wall, stages=stages,
        cold_caches=cs.caches, warm_caches=ws.caches, still_missed=missed, sentence=sentence + ".",
    )
