"""The shape study's plot: compiled variants and memory over time, and per-call latency
coloured cold/warm, one line per policy. Renders a ``ShapeStudy`` section; computes nothing."""

from __future__ import annotations

import os
from typing import Any

from ..model.receipt import Receipt
from ..model.shapes import ShapeStudy
from .files import write_atomic

PHASE_COLOURS = {"cold": "#d62728", "steady": "#1f77b4", "fallback": "#ff7f0e"}
PHASE_LABELS = {"cold": "cold (compiled)", "steady": "warm (cache hit)", "fallback": "eager fallback"}


class ShapePlotRenderer:
    extension = ".png"

    def render(self, receipt: Receipt) -> bytes:
        """The receipt's shape study; a receipt without one (or with no policy) is an error."""
        if receipt.shapes is None or not receipt.shapes.policies:
            raise ValueError("the receipt holds no shape study to plot")
        return self.render_study(receipt.shapes)

    def render_study(self, study: ShapeStudy) -> bytes:
        import io

        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, (ax_v, ax_m, ax_l) = plt.subplots(3, 1, figsize=(10, 10), sharex=True)
        n = len(study.spec.trace)
        for p in study.policies:
            line = _variants(ax_v, p, n)
            colour = line.get_color() if line is not None else None
            if p.memory and any(m.rss_bytes is not None for m in p.memory):
                xs = [m.call_index for m in p.memory if m.rss_bytes is not None]
                ys = [(m.rss_bytes or 0) / 2**20 for m in p.memory if m.rss_bytes is not None]
                ax_m.step(xs, ys, where="post", marker="o", ms=3, label=p.policy, color=colour)
            if p.calls:
                xs = [c.index for c in p.calls]
                ys = [max(c.latency_ns, 1) / 1e6 for c in p.calls]
                ax_l.plot(xs, ys, "-", lw=0.8, alpha=0.6, color=colour, label=p.policy)
                for ph, col in PHASE_COLOURS.items():
                    sel = [(c.index, max(c.latency_ns, 1) / 1e6) for c in p.calls if c.phase == ph]
                    if sel:
                        ax_l.scatter([a for a, _ in sel], [b for _, b in sel], s=14, color=col, zorder=3,
                                     edgecolors=colour or "none", linewidths=0.6)
        ax_v.set_ylabel("compiled variants")
        ax_v.set_title("compiled variants after each call (counters frames ok)")
        ax_m.set_ylabel("process RSS (MiB)")
        ax_m.set_title("memory after each first-seen length")
        ax_l.set_ylabel("latency (ms, log)")
        ax_l.set_yscale("log")
        ax_l.set_xlabel("call (trace order)")
        ax_l.set_title("per-call latency: marker colour = phase, line = policy")
        for ax in (ax_v, ax_m):
            if ax.lines:
                ax.legend(fontsize=8, loc="upper left")
        from matplotlib.lines import Line2D

        handles = [Line2D([], [], ls="", marker="o", color=c, label=PHASE_LABELS[k]) for k, c in PHASE_COLOURS.items()]
        pol = ax_l.get_legend_handles_labels()
        ax_l.legend(handles=list(pol[0]) + handles, fontsize=8, loc="upper right")
        rec = study.recommendation
        fig.suptitle(f"shape policies over {n} calls" + (f" - recommended: {rec.policy}" if rec and rec.policy else ""))
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=100)
        plt.close(fig)
        return buf.getvalue()


def _variants(ax: Any, p: Any, n: int) -> Any:
    """Compiled variants after each call, as PyTorch counted them in the policy's process."""
    if not p.calls:
        return None
    xs = [c.index for c in p.calls]
    (line,) = ax.step(xs, [c.compiled_variants for c in p.calls], where="post", label=p.policy)
    return line


def write_shape_plot(study: ShapeStudy | None, path: str | os.PathLike[str]) -> str | None:
    if study is None or not study.policies:
        return None
    return write_atomic(path, ShapePlotRenderer().render_study(study))
