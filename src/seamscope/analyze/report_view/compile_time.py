"""The compile-time table: compile time by stage per frame and for the run, the cache outcome per
layer, and what the split cannot tell; from the receipt's ``findings.compile_time``."""

from __future__ import annotations

from dataclasses import dataclass, field

from ...model.compile_time import StageSplit
from ...model.ledger import Frame
from ...model.normalize import short_path
from ...model.receipt import Receipt
from ..compile_time import stage_word
from ..findings_common import frame_label
from ..units import counted, fmt_ns, fmt_pct

MAX_FRAME_ROWS = 20


@dataclass(frozen=True)
class CompileTimeRow:
    frame: str
    """``forward (transformers/.../x.py:12)``, or ``all frames`` for the run's row."""
    compilations: int
    recompiles: int
    stages: list[str]
    """Formatted durations, one per column of ``CompileTimeView.stage_columns`` (``–``: not recorded)."""
    total: str
    share: str
    """Of the run's time (``–`` without runtime data)."""
    fx_cache: str
    aot_cache: str
    location: str = ""
    """``file:line`` of the frame :attr:`frame` names (empty for the run's row)."""
    name: str = ""
    """The function :attr:`frame` names."""


@dataclass(frozen=True)
class CompileTimeView:
    stage_columns: list[str]
    rows: list[CompileTimeRow]
    """The run first, then the costliest frames."""
    caches: list[tuple[str, str]]
    """(layer, ``1 hit, 2 miss, 0 bypass; 3 not recorded``; bypass reasons)."""
    dominant: str
    cache_dir: str
    notes: list[str] = field(default_factory=list)
    more_frames: int = 0


def _cells(s: StageSplit) -> list[str]:
    stages = (s.dynamo_ns, s.aot_autograd_ns, s.inductor_ns, s.autotune_ns)
    return [fmt_ns(v) if v is not None else "–" for v in stages]


def _located(name: str, file: str, line: int, user_frame: Frame | None) -> dict[str, str]:
    if user_frame is not None:
        name, file, line = user_frame.function, user_frame.file, user_frame.line
    return {"location": f"{short_path(file)}:{line}", "name": name}


def build_compile_time(receipt: Receipt) -> CompileTimeView | None:
    sec = receipt.findings.compile_time if receipt.findings is not None else None
    if sec is None or not sec.split.compilations:
        return None
    backend = receipt.ledger.environment.backend
    cols = [stage_word(k, backend) for k in ("dynamo", "aot_autograd", "inductor", "autotune")]
    run_fx = next((c for c in sec.caches if c.layer == "fx_graph"), None)
    run_aot = next((c for c in sec.caches if c.layer == "aot_autograd"), None)

    def brief(c: object) -> str:
        if c is None:
            return "–"
        parts = [f"{getattr(c, k)} {k}" for k in ("hit", "miss", "bypass") if getattr(c, k)]
        return ", ".join(parts) or "–"

    rows = [CompileTimeRow(
        frame="all frames", compilations=sec.split.compilations,
        recompiles=sum(f.recompiles for f in sec.frames), stages=_cells(sec.split), total=fmt_ns(sec.compile_ns),
        share=fmt_pct(None if sec.share is None else sec.share * 100), fx_cache=brief(run_fx), aot_cache=brief(run_aot),
    )]
    for f in sec.frames[:MAX_FRAME_ROWS]:
        rows.append(
            CompileTimeRow(
                frame=frame_label(f.frame_name, f.file, f.line, f.user_frame),
                compilations=len(f.compile_ids),
                recompiles=f.recompiles,
                stages=_cells(f.split),
                total=fmt_ns(f.split.total_ns),
                share=fmt_pct(None if f.share is None else f.share * 100),
                fx_cache=f.fx_cache,
                aot_cache=f.aot_cache,
                **_located(f.frame_name, f.file, f.line, f.user_frame),
            )
        )
    caches = []
    for c in sec.caches:
        name = "FX graph cache" if c.layer == "fx_graph" else "AOTAutograd cache"
        text = f"{c.hit} hit, {c.miss} miss, {c.bypass} bypass"
        if c.unrecorded:
            text += (f"; {counted(c.unrecorded, 'compilation')} without an outcome "
                     "(the backend does not use it, or it is off)")
        if c.bypass_reasons:
            text += "; bypassed because: " + "; ".join(c.bypass_reasons)
        caches.append((name, text))
    st = sec.dominant_stage
    dom = f"{stage_word(st, backend)} dominates" if st is not None else "no stage recorded"
    if sec.cache_dir_warm is None:
        cache_dir = f"cache directory: {sec.cache_dir_basis}"
    else:
        where = f" {sec.cache_dir}" if sec.cache_dir else ""
        cache_dir = f"cache directory{where} was {'warm' if sec.cache_dir_warm else 'empty'} ({sec.cache_dir_basis})"
    return CompileTimeView(
        stage_columns=cols, rows=rows, caches=caches, dominant=dom, cache_dir=cache_dir, notes=list(sec.missing),
        more_frames=max(0, len(sec.frames) - MAX_FRAME_ROWS),
    )
