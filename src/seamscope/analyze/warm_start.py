"""Cold against warm: the compile-time ledgers of two runs of one target sharing a persistent
cache directory (the first fills it, the second reads it), as a restarted worker would pay."""

from __future__ import annotations

from ..model.compile_time import STAGES, ArtifactsStart, StageSplit, WarmStage, WarmStart
from ..model.receipt import Receipt
from .compile_time import STAGE_WORDS, analyze_compile_time, split_of
from .findings_common import frame_label
from .units import fmt_ns


def _section(r: Receipt):  # type: ignore[no-untyped-def]
    if r.findings is not None and r.findings.compile_time is not None:
        return r.findings.compile_time
    return analyze_compile_time(r.ledger, [])


def _stages(c_split: StageSplit, w_split: StageSplit) -> list[WarmStage]:
    stages = [
        WarmStage(stage=k, cold_ns=getattr(c_split, f"{k}_ns"), warm_ns=getattr(w_split, f"{k}_ns")) for k in STAGES
    ]
    if c_split.unsplit_ns or w_split.unsplit_ns:
        stages.append(WarmStage(stage="unsplit", cold_ns=c_split.unsplit_ns, warm_ns=w_split.unsplit_ns))
    return stages


def _missed(warm: Receipt) -> list[str]:
    """The run's compilations that did not hit a cache layer, with PyTorch's reason."""
    missed = []
    for c in warm.ledger.compilations:
        if c.status != "ok":
            continue
        for layer, outcome, reason in (("FX graph cache", c.fx_cache, c.fx_bypass_reason),
                                       ("AOTAutograd cache", c.aot_cache, c.aot_bypass_reason)):
            if outcome in ("miss", "bypass"):
                why = reason or (
                    "no reason in PyTorch's log: the key matched no entry"
                    if outcome == "miss"
                    else "no reason recorded"
                )
                missed.append(f"{c.compile_id} {frame_label(c.frame_name, c.file, c.line)}: {layer} {outcome} ({why})")
    return missed


def _wall(r: Receipt) -> int:
    return sum(p.wall_ns for p in r.ledger.totals.phases)


def compare_artifacts(cold: Receipt, run: Receipt, artifacts_file: str, size: int, path: str) -> ArtifactsStart:
    """The run that loaded the cold run's cache artifacts into an empty cache directory."""
    note = run.decision.note if run.decision is not None and run.decision.note else ""
    said = [p for p in note.split("; ") if p.startswith("cache artifacts: ")]
    return ArtifactsStart(
        artifacts_file=artifacts_file, artifacts_bytes=size, receipt=path, compile_ns=_section(run).compile_ns,
        wall_ns=_wall(run), stages=_stages(split_of(cold.ledger.compilations), split_of(run.ledger.compilations)),
        caches=_section(run).caches, still_missed=_missed(run), load_note="; ".join(said) or "no load recorded",
    )


def compare_warm(cold: Receipt, warm: Receipt, cache_dir: str, cold_path: str, warm_path: str,
                 artifacts: ArtifactsStart | None = None, artifacts_note: str | None = None) -> WarmStart:
    cs, ws = _section(cold), _section(warm)
    stages = _stages(split_of(cold.ledger.compilations), split_of(warm.ledger.compilations))
    missed = _missed(warm)
    c_wall, w_wall = _wall(cold), _wall(warm)
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
    if artifacts is not None:
        sentence += (f"; loaded from the cold run's cache artifacts ({artifacts.artifacts_bytes:,} bytes) into an "
                     f"empty cache directory, a fresh worker compiled for {fmt_ns(artifacts.compile_ns)}"
                     + (f" ({len(artifacts.still_missed)} lookup(s) missed)" if artifacts.still_missed else ""))
    return WarmStart(
        cache_dir=cache_dir, cold_receipt=cold_path, warm_receipt=warm_path, cold_compile_ns=cs.compile_ns,
        warm_compile_ns=ws.compile_ns, cold_wall_ns=c_wall, warm_wall_ns=w_wall, stages=stages,
        cold_caches=cs.caches, warm_caches=ws.caches, still_missed=missed, sentence=sentence + ".",
        artifacts=artifacts, artifacts_note=artifacts_note,
    )
