"""The shape study's receipt section: one measured run per shape policy over the same length trace.

Variable sequence lengths cause recompilation storms, and the fix (static, automatic,
dynamic, marked, padded buckets) is chosen by name. This section keeps, per policy, what PyTorch
did (compilations with their reasons, fallbacks, its own counters read in the policy's process),
every call's latency with its phase, memory after each first-seen length, padding work and the
total request cost; and a recommendation derived from those totals only.

Durations are integer nanoseconds; memory is bytes. Nothing here imports torch.
"""

from __future__ import annotations

from typing import Literal

from .ledger import Outcome, Phase, Struct

PolicyKind = Literal["static", "auto", "dynamic", "mark_dynamic", "pow2", "buckets"]
PolicyStatus = Literal["ok", "failed", "unusable", "crashed", "interrupted"]
"""``ok``: the whole trace ran. ``failed``: the compiled call raised (the user's code or the
compiler). ``unusable``: the policy cannot run this model (a padded length it does not accept).
``crashed``: the policy's process died. ``interrupted``: Ctrl-C."""
Correctness = Literal["within_tolerance", "above_tolerance", "boundary_bug", "not_checked"]


class ShapeCall(Struct, frozen=True):
    """One request of the trace, in order."""

    index: int
    length: int
    padded_length: int
    """What the compiled callable was called with (== ``length`` unless the policy pads)."""
    phase: Phase
    """The live capture's phase: ``cold`` something compiled in the call (a cold call),
    ``steady`` cache hits only (a warm call), ``fallback`` after a recompile-limit hit."""
    outcome: Outcome
    latency_ns: int
    """The request: pad, mark, the compiled call, slice back (the study's own clock)."""
    compile_ns: int = 0
    """Compilation time inside this call, from the capture."""
    compiled_variants: int = 0
    """Frame compilations that produced code so far, read after this call
    (``counters["frames"]["ok"]``)."""


class ShapeCompile(Struct, frozen=True):
    """A compilation as PyTorch reported it, tied to the request that caused it."""

    compile_id: str
    frame_name: str
    status: str
    call_index: int | None
    length: int | None
    """The unpadded length of that request."""
    duration_ns: int | None
    failed_guards: list[str] = []
    """PyTorch's recompile reasons (the guards that failed), as the capture recorded them."""
    fail_reason: str | None = None


class LengthStat(Struct, frozen=True):
    length: int
    padded_length: int
    calls: int
    steady_calls: int
    steady_median_ns: int | None
    """Median latency of this length's warm (steady) calls; None when every call compiled."""
    first_ns: int
    """The first request of this length (cold when it compiled)."""


class MemoryStep(Struct, frozen=True):
    """After the first request of each length: compiled variants and process memory."""

    call_index: int
    length: int
    compiled_variants: int
    """Frame compilations that produced code so far (``counters["frames"]["ok"]``)."""
    rss_bytes: int | None
    cuda_allocated_bytes: int | None = None


class Mismatch(Struct, frozen=True):
    """The worst output leaf of a policy, sliced back, against unpadded eager."""

    length: int
    path: str
    klass: Correctness
    reason: str
    tolerance_ratio: float | None = None
    max_abs: float | None = None


class PolicyResult(Struct, frozen=True):
    policy: str
    """As given: ``static``, ``auto``, ``dynamic``, ``mark_dynamic[:MIN:MAX]``, ``pow2``,
    ``buckets:64,128``."""
    kind: PolicyKind
    compile_options: dict[str, str]
    status: PolicyStatus
    error: str | None = None
    calls: list[ShapeCall] = []
    compilations: list[ShapeCompile] = []
    compile_count: int = 0
    """From the live capture's ledger (``compile_count`` as docs/conventions.md defines it)."""
    recompile_count: int = 0
    fallback_count: int = 0
    """Recompile-limit hits and failed compilations: frames that ran eager instead."""
    graph_count: int = 0
    torch_frames_ok: int | None = None
    """``torch._dynamo.utils.counters["frames"]["ok"]`` read in the policy's process after the
    run: the source the capture's ``compile_count`` must equal."""
    torch_frames_total: int | None = None
    torch_unique_graphs: int | None = None
    compile_ns: int = 0
    """Sum of compilation durations (compile seconds)."""
    total_ns: int = 0
    """Total request cost over the trace: the sum of every call's latency."""
    cold_ns: int = 0
    """Latency of the calls in which something compiled."""
    steady_per_call_ns: int | None = None
    """Expected warm cost of one request drawn from this trace (each length's steady median,
    weighted by how often the trace asks for it)."""
    one_time_ns: int | None = None
    """``total_ns`` minus the warm cost of the trace: what a fresh worker pays once."""
    padding_fraction: float = 0.0
    """Padded elements / elements computed, over the varying tensor of every call."""
    lengths: list[LengthStat] = []
    memory: list[MemoryStep] = []
    correctness: Correctness = "not_checked"
    worst: Mismatch | None = None
    process_wall_ns: int | None = None
    """The policy's process, from request to result (measured by the study)."""
    run_ns: int | None = None
    """Inside the process: building the workload and running the trace."""
    warnings: list[str] = []


class Recommendation(Struct, frozen=True):
    policy: str | None
    runner_up: str | None
    margin_ns: int | None
    """Runner-up's total minus the recommended one's."""
    margin_fraction: float | None
    flip: str | None
    """When the answer changes with a worker's lifetime (same length mix), or None."""
    flip_calls: int | None = None
    flip_policy: str | None = None
    flip_direction: Literal["longer", "shorter"] | None = None
    excluded: list[str] = []
    """Policies never recommended, each with why (mismatch, failure)."""
    text: str = ""


class ShapeSpec(Struct, frozen=True):
    workload: str
    backend: str
    dim: int
    trace: list[int]
    """The lengths in request order, after ``--repeat``."""
    repeat: int
    policies: list[str]
    device: str = "cpu"
    rtol: float | None = None
    atol: float | None = None
    recompile_limit: int | None = None
    isolation: Literal["fork", "process"] = "fork"
    """``fork``: each policy in a fresh process forked from one that only imported torch (no
    Dynamo or inductor state); ``process``: each policy in its own interpreter."""


class ShapeStudy(Struct, frozen=True):
    spec: ShapeSpec
    policies: list[PolicyResult]
    recommendation: Recommendation | None
    wall_ns: int
    """The whole study, start-up included."""
    error: str | None = None
    warnings: list[str] = []
