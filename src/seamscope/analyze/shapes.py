"""A shape policy's figures, from what its run recorded (a pure function, torch-free).

The worker's loop (``experiments/shapes_worker.run_policy``) drives torch and keeps raw records:
one :class:`CallRecord` per request, the live capture's ledger, PyTorch's counters, and the output
comparison. Everything the study reports about the policy (phases per call, per-length steady
medians, the expected warm cost of a request, the one-time cost, padding) is derived here, so that
it is tested on fake ledgers without torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..model.canonical import round_float
from ..model.ledger import CompileEvent, Ledger
from ..model.shapes import LengthStat, MemoryStep, Mismatch, PolicyResult, ShapeCall, ShapeCompile
from .stats import quantile
from .summary import summarize


@dataclass(frozen=True)
class CallRecord:
    """One request as the loop timed it (the study's own clock, around pad, call and slice)."""

    length: int
    padded_length: int
    latency_ns: int
    numel_padded: int
    """Elements of the varying tensor as called (padded)."""
    numel_real: int
    """Elements of the varying tensor before padding."""
    compiled_variants: int
    """``counters["frames"]["ok"]`` right after the call."""


@dataclass(frozen=True)
class PolicyRecords:
    """What one policy's run measured, before any statistic."""

    policy: str
    kind: str
    compile_options: dict[str, Any]
    status: str
    error: str | None
    trace: list[int]
    calls: list[CallRecord]
    ledger: Ledger
    frames_ok: int
    frames_total: int
    unique_graphs: int
    memory: list[MemoryStep] = field(default_factory=list)
    correctness: str = "not_checked"
    worst: Mismatch | None = None
    warnings: list[str] = field(default_factory=list)
    run_ns: int | None = None


def policy_result(rec: PolicyRecords) -> PolicyResult:
    """The policy's figures. Phases come from the live capture (call ``i`` of the ledger is
    request ``i``); latencies from the loop's own clock."""
    ledger = rec.ledger
    summary = summarize(ledger)
    n = len(rec.trace)
    by_index = {c.index: c for c in ledger.calls}
    calls: list[ShapeCall] = []
    for i, r in enumerate(rec.calls):
        c = by_index.get(i)
        comp = sum(ev.duration_ns for ev in c.events if isinstance(ev, CompileEvent)) if c else 0
        calls.append(ShapeCall(index=i, length=r.length, padded_length=r.padded_length,
                               phase=c.phase if c else "steady", outcome=c.outcome if c else "hit",
                               latency_ns=r.latency_ns, compile_ns=int(comp), compiled_variants=r.compiled_variants))
    compilations = [
        ShapeCompile(compile_id=cp.compile_id, frame_name=cp.frame_name, status=cp.status, call_index=cp.call_index,
                     length=rec.trace[cp.call_index] if cp.call_index is not None and cp.call_index < n else None,
                     duration_ns=cp.duration_ns, failed_guards=list(cp.failed_guards), fail_reason=cp.fail_reason)
        for cp in ledger.compilations
    ]
    stats: list[LengthStat] = []
    steady_med: dict[int, int] = {}
    for length in sorted({c.length for c in calls}):
        mine = [c for c in calls if c.length == length]
        warm = [c.latency_ns for c in mine if c.phase != "cold"]
        med = quantile(warm, 0.5) if warm else None
        if med is not None:
            steady_med[length] = int(med)
        stats.append(LengthStat(length=length, padded_length=mine[0].padded_length, calls=len(mine),
                                steady_calls=len(warm), steady_median_ns=int(med) if med is not None else None,
                                first_ns=mine[0].latency_ns))
    total = sum(c.latency_ns for c in calls)
    steady_per_call = one_time = None
    if steady_med and calls and rec.status == "ok":
        # A length with no warm call is estimated by the nearest length that has one.
        keys = sorted(steady_med)
        est = [steady_med.get(c.length) or steady_med[min(keys, key=lambda k: (abs(k - c.length), k))] for c in calls]
        steady_per_call = int(round(sum(est) / len(est)))
        one_time = max(0, total - sum(est))
    padded = sum(r.numel_padded for r in rec.calls)
    real = sum(r.numel_real for r in rec.calls)
    return PolicyResult(
        policy=rec.policy, kind=rec.kind,  # type: ignore[arg-type]
        compile_options={k: repr(v) for k, v in rec.compile_options.items()},
        status=rec.status, error=rec.error, calls=calls, compilations=compilations,  # type: ignore[arg-type]
        compile_count=summary.compile_count, recompile_count=summary.recompile_count,
        fallback_count=summary.fallback_count, graph_count=summary.graph_count,
        torch_frames_ok=rec.frames_ok, torch_frames_total=rec.frames_total, torch_unique_graphs=rec.unique_graphs,
        compile_ns=sum(cp.duration_ns or 0 for cp in ledger.compilations), total_ns=total,
        cold_ns=sum(c.latency_ns for c in calls if c.phase == "cold"),
        steady_per_call_ns=steady_per_call, one_time_ns=one_time,
        padding_fraction=round_float((padded - real) / padded) if padded else 0.0,
        lengths=stats, memory=list(rec.memory), correctness=rec.correctness, worst=rec.worst,  # type: ignore[arg-type]
        run_ns=rec.run_ns, warnings=list(rec.warnings) + list(ledger.run.warnings),
    )
