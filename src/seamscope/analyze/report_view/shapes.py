"""The shape study: its plots as inline SVG."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...model.receipt import Receipt
from ..fields import carry
from ..units import fmt_ns
from .base import OVERHEAD_COLOUR, PALETTE

# --- the shape study: its plots as inline SVG -----------------------------------------------------

MAX_SHAPE_POINTS = 400  # per policy and chart; beyond, cold calls are kept, then calls evenly spaced
SVG_W, SVG_H = 640, 190  # a chart's viewBox; the plot box inside it:
PLOT_X0, PLOT_X1, PLOT_Y0, PLOT_Y1 = 64.0, 630.0, 10.0, 160.0
SHAPE_PHASES = (
    ("cold", "#d62728", "cold (compiled)"),
    ("steady", "#1f77b4", "warm (cache hit)"),
    ("fallback", "#ff7f0e", "eager fallback"),
)


@dataclass(frozen=True)
class Dot:
    x: float
    y: float
    phase: str
    colour: str
    tip: str


@dataclass(frozen=True)
class PolicyLine:
    policy: str
    colour: str
    points: str  # an SVG polyline's ``points``, in the chart's viewBox (steps add corners)
    n_points: int  # the figures drawn: calls, or first-seen lengths for memory
    dots: list[Dot] = field(default_factory=list)


@dataclass(frozen=True)
class LineChart:
    key: str
    title: str
    y_top: str
    y_bottom: str
    x_left: str
    x_right: str
    lines: list[PolicyLine]
    note: str = ""


@dataclass(frozen=True)
class PolicyRow:
    """A policy's figures (named as in its ``PolicyResult``), with its colour and the view's text."""

    policy: str
    colour: str
    status: str
    compile_count: int
    recompile_count: int
    fallback_count: int
    compile_ns: int
    total_ns: int
    cold_ns: int
    steady_per_call_ns: int | None
    one_time_ns: int | None
    padding_pct: float
    correctness: str
    recommended: bool
    note: str


@dataclass(frozen=True)
class ShapesView:
    present: bool
    facts: list[tuple[str, str]] = field(default_factory=list)
    recommendation: str = ""
    excluded: list[str] = field(default_factory=list)
    policies: list[PolicyRow] = field(default_factory=list)
    charts: list[LineChart] = field(default_factory=list)
    phases: list[tuple[str, str]] = field(default_factory=list)  # (label, colour) of the latency dots
    warnings: list[str] = field(default_factory=list)
    frame: ChartFrame = field(default_factory=lambda: ChartFrame())


@dataclass(frozen=True)
class ChartFrame:
    """Where a shape chart's box and axis labels sit in its viewBox (shared by the three charts)."""

    width: int = SVG_W
    height: int = SVG_H
    x: float = PLOT_X0
    y: float = PLOT_Y0
    w: float = PLOT_X1 - PLOT_X0
    h: float = PLOT_Y1 - PLOT_Y0
    y_label_x: float = PLOT_X0 - 4
    top_label_y: float = PLOT_Y0 + 8
    bottom_label_y: float = PLOT_Y1
    x_label_y: float = PLOT_Y1 + 16
    right_x: float = PLOT_X1


def _thin(calls: list[Any], limit: int = MAX_SHAPE_POINTS) -> list[Any]:
    if len(calls) <= limit:
        return list(calls)
    cold = [c for c in calls if c.phase != "steady"][: limit // 2]
    keep = {c.index for c in cold}
    rest = [c for c in calls if c.index not in keep]
    room = limit - len(cold)
    step = len(rest) / room
    chosen = cold + [rest[int(k * step)] for k in range(min(room, len(rest)))]
    return sorted(chosen, key=lambda c: c.index)


def _sx(index: int, last: int) -> float:
    return round(PLOT_X0 + (PLOT_X1 - PLOT_X0) * index / max(last, 1), 2)


def _sy(frac: float) -> float:
    """``frac`` 0 at the bottom of the plot box, 1 at its top."""
    return round(PLOT_Y1 - (PLOT_Y1 - PLOT_Y0) * min(max(frac, 0.0), 1.0), 2)


def _pts(xy: list[tuple[float, float]]) -> str:
    return " ".join(f"{x:g},{y:g}" for x, y in xy)


def _steps(xy: list[tuple[float, float]]) -> str:
    """A step line (a count holds until the next call changes it), as matplotlib's
    ``where="post"``: each point's value runs flat to the next point's x, then jumps."""
    out: list[tuple[float, float]] = []
    for k, (x, y) in enumerate(xy):
        if k and xy[k - 1][1] != y:
            out.append((x, xy[k - 1][1]))
        out.append((x, y))
    return _pts(out)


def build_shapes(receipt: Receipt) -> ShapesView:
    """The shape study's plot: compiled variants and memory over calls, per-call latency coloured
    cold/warm, one line per policy; plus the recommendation and the per-policy totals."""
    study = receipt.shapes
    if study is None:
        return ShapesView(False)
    spec = study.spec
    rec = study.recommendation
    colours = {p.policy: PALETTE[k % len(PALETTE)] for k, p in enumerate(study.policies)}
    last = max([len(spec.trace) - 1, *(c.index for p in study.policies for c in p.calls), 1])
    axes = _Axes(colours, {p.policy: _thin(list(p.calls)) for p in study.policies}, last)
    n_shown = sum(len(v) for v in axes.thinned.values())
    n_all = sum(len(p.calls) for p in study.policies)
    thin_note = "" if n_shown == n_all else f"; {n_shown} of {n_all} calls drawn (cold calls kept, then evenly spaced)"
    charts = [_variants_chart(study, axes, thin_note), _memory_chart(study, axes),
              _latency_chart(study, axes, thin_note)]
    recommended = rec.policy if rec is not None else None
    policies = [
        carry(
            PolicyRow,
            p,
            colour=colours[p.policy],
            padding_pct=round(100.0 * p.padding_fraction, 1),
            correctness=p.correctness.replace("_", " "),
            recommended=p.policy == recommended,
            note=p.error or (f"length {p.worst.length}, {p.worst.path}: {p.worst.reason}" if p.worst else ""),
        )
        for p in study.policies
    ]
    facts = [
        ("workload", spec.workload),
        ("backend", spec.backend),
        ("device", spec.device),
        ("varying dim", str(spec.dim)),
        ("trace", f"{len(spec.trace)} calls, {len(set(spec.trace))} distinct lengths, repeat {spec.repeat}"),
        ("isolation", spec.isolation),
        ("study wall time", fmt_ns(study.wall_ns)),
    ]
    return ShapesView(
        present=True,
        facts=facts,
        recommendation=rec.text if rec is not None else "no recommendation recorded",
        excluded=list(rec.excluded) if rec is not None else [],
        policies=policies,
        charts=charts,
        phases=[(label, col) for _, col, label in SHAPE_PHASES],
        warnings=list(study.warnings) + ([study.error] if study.error else []),
    )


@dataclass
class _Axes:
    """What the three charts share: each policy's colour, the calls drawn, the last call (x = 100%)."""

    colours: dict[str, str]
    thinned: dict[str, list[Any]]
    last: int

    @property
    def x_left(self) -> str:
        return "call 0"

    @property
    def x_right(self) -> str:
        return f"call {self.last}"


def _variants_chart(study: Any, axes: _Axes, thin_note: str) -> LineChart:
    """Compiled variants after each call (PyTorch's counters in the policy's process)."""
    top_v = max([1, *(c.compiled_variants for p in study.policies for c in p.calls)])
    variants = [
        PolicyLine(
            p.policy,
            axes.colours[p.policy],
            _steps([(_sx(c.index, axes.last), _sy(c.compiled_variants / top_v)) for c in axes.thinned[p.policy]]),
            len(axes.thinned[p.policy]),
        )
        for p in study.policies
        if p.calls
    ]
    return LineChart("variants", "Compiled variants after each call", str(top_v), "0", axes.x_left, axes.x_right,
                     variants, "frame compilations that produced code so far (counters frames ok)" + thin_note)


def _memory_chart(study: Any, axes: _Axes) -> LineChart:
    """Process memory after each first-seen length."""
    mib = [m.rss_bytes / 2**20 for p in study.policies for m in p.memory if m.rss_bytes is not None]
    lo_m, hi_m = (min(mib), max(mib)) if mib else (0.0, 1.0)
    if hi_m - lo_m < 1.0:
        lo_m, hi_m = lo_m - 0.5, hi_m + 0.5
    memory = []
    for p in study.policies:
        steps = [m for m in p.memory if m.rss_bytes is not None]
        if steps:
            xy = [(_sx(m.call_index, axes.last), _sy(((m.rss_bytes or 0) / 2**20 - lo_m) / (hi_m - lo_m)))
                  for m in steps]
            dots = [
                Dot(x, y, "memory", axes.colours[p.policy],
                    f"{p.policy} · after call {m.call_index} (first of length {m.length}): "
                    f"RSS {(m.rss_bytes or 0) / 2**20:.1f} MiB, {m.compiled_variants} compiled variants")
                for m, (x, y) in zip(steps, xy, strict=True)
            ]
            memory.append(PolicyLine(p.policy, axes.colours[p.policy], _steps(xy), len(steps), dots))
    return LineChart("memory", "Process memory after each first-seen length", f"{hi_m:.1f} MiB", f"{lo_m:.1f} MiB",
                     axes.x_left, axes.x_right, memory, "RSS" if memory else "no memory measured")


def _latency_chart(study: Any, axes: _Axes, thin_note: str) -> LineChart:
    """Per-call latency, log scale, dots coloured by phase."""
    import math

    lat = [max(c.latency_ns, 1) for p in study.policies for c in p.calls]
    lo_l, hi_l = (min(lat), max(lat)) if lat else (1, 1)
    span = math.log(hi_l) - math.log(lo_l)
    phase_colour = {k: col for k, col, _ in SHAPE_PHASES}
    latency = []
    for p in study.policies:
        shown = axes.thinned[p.policy]
        if not shown:
            continue
        xy = [
            (_sx(c.index, axes.last),
             _sy((math.log(max(c.latency_ns, 1)) - math.log(lo_l)) / span if span > 0 else 0.5))
            for c in shown
        ]
        dots = [
            Dot(
                x,
                y,
                c.phase,
                phase_colour.get(c.phase, OVERHEAD_COLOUR),
                f"{p.policy} · call {c.index} · length {c.length}"
                + (f" (padded to {c.padded_length})" if c.padded_length != c.length else "")
                + f" · {c.phase} · {fmt_ns(c.latency_ns)}"
                + (f" (compile {fmt_ns(c.compile_ns)})" if c.compile_ns else ""),
            )
            for c, (x, y) in zip(shown, xy, strict=True)
        ]
        latency.append(PolicyLine(p.policy, axes.colours[p.policy], _pts(xy), len(shown), dots))
    return LineChart("latency", "Per-call latency (log scale)", fmt_ns(hi_l), fmt_ns(lo_l), axes.x_left, axes.x_right,
                     latency, "line colour: policy; dot colour: cold or warm" + thin_note)
