"""The receipt's ``probe`` section: what ``seamscope probe`` measured and concluded.

Spec (what was run), raw samples and derived figures are kept apart (STYLE.md): ``ProbeSpec`` says
what ran, ``Samples`` hold every measured call, the classes and the ladder's answer are derived.
Torch-free, like the rest of the model.
"""

from __future__ import annotations

from typing import Literal

from .ledger import Struct

LeafClass = Literal["within_tolerance", "above_tolerance", "boundary_bug"]
"""The differential test's classes: arithmetic drift (within the tolerance); a difference over the
tolerance that rounding can explain; a difference rounding cannot explain by a wide margin (judged
against eager's own error from a float64 run; without one, >= 100x the tolerance), or a wrong shape,
dtype, aliasing, NaN placement or side effect."""

JudgedBy = Literal["rounding", "tolerance"]
"""What a leaf over its tolerance was judged against: ``rounding`` (eager's own error, measured by
running the same inputs eagerly in float64) or ``tolerance`` (no float64 run: the tolerance factor)."""

ProbePhase = Literal["eager", "cold", "warm", "changed"]

LayerVerdict = Literal[
    "ok", "compile_failed", "run_failed", "mismatch", "suspect", "crashed", "timeout", "not_run"
]


class ProbeSpec(Struct, frozen=True):
    """What was run."""

    workload: str
    """``FILE.py:FUNC`` or the Python name of the workload."""
    backend: str
    compile_options: dict[str, str] = {}
    device: str = "cpu"
    dtype: str | None = None
    warm_calls: int = 20
    seed: int = 0
    rtol: float | None = None
    atol: float | None = None
    """A tolerance override for floating leaves; None: the dtype's default."""
    families: dict[str, int] = {}
    """Input family → number of entries."""
    ladder: list[str] = []
    isolate: bool = False
    timeout_s: float | None = None


class Samples(Struct, frozen=True):
    """Every measured call of one phase of one configuration, with its order statistics."""

    configuration: str
    """``eager`` or ``compile <backend>``."""
    phase: ProbePhase
    samples_ns: list[int]
    min_ns: int | None
    median_ns: int | None
    p90_ns: int | None


class PhasePair(Struct, frozen=True):
    """A compiled phase and its eager baseline, measured on the same inputs the same number of
    times (cold and warm are never merged)."""

    phase: Literal["cold", "warm", "changed"]
    baseline: Samples
    candidate: Samples
    median_ratio: float | None
    """candidate median / baseline median (> 1: compiled is slower)."""


class LeafDiff(Struct, frozen=True):
    """One leaf of a nested output (or of an input/parameter after the call) compared."""

    path: str
    """``out[0]``, ``out.logits``, ``out['k']``, ``input[1]``, ``module.bn.running_mean``."""
    klass: LeafClass
    reason: str
    dtype: str | None = None
    shape: list[int] | None = None
    rtol: float = 0.0
    atol: float = 0.0
    max_abs: float | None = None
    max_rel: float | None = None
    max_ulp: int | None = None
    tolerance_ratio: float | None = None
    """max over elements of |a - b| / (atol + rtol * |expected|): <= 1 within, >= 100 a bug."""
    reduction_length: int | None = None
    """Longest reduction (terms summed) behind this leaf in the eager run; None if unknown."""
    large_reduction: bool | None = None
    eager_error: float | None = None
    """max |eager - eager in float64| over the leaf: eager's own rounding error (None: no float64 run)."""
    rounding_bound: float | None = None
    """What rounding can explain, in the leaf's units: the largest of ``eager_error``, half an ulp
    of the leaf's root-mean-square value, and ``reduction_allowance``."""
    reduction_allowance: float | None = None
    """K * u * m for the longest reduction behind the leaf (K terms of magnitude <= m, unit roundoff
    u of the accumulation dtype): how far a new summation order can move it."""
    rounding_ratio: float | None = None
    """max |compiled - eager| / ``rounding_bound``: >= 8 is a difference rounding cannot explain."""
    judged_by: JudgedBy | None = None
    """For a leaf over its tolerance: the bound its class was decided against."""
    no_float64: str | None = None
    """Why there is no float64 reference for this leaf (the tolerance rule decided instead)."""


class DiffReport(Struct, frozen=True):
    """Eager against one compiled configuration on one distinct input."""

    configuration: str
    family: str
    index: int
    signature: str
    """The input's shapes and dtypes, e.g. ``(2x16:int64)``."""
    klass: LeafClass
    """The worst leaf's class."""
    leaves: list[LeafDiff]
    worst: LeafDiff | None


class RandomOp(Struct, frozen=True):
    """A random op found in a graph handed to a backend: eager and compiled draw differently."""

    configuration: str
    compile_id: str | None
    op: str


class LayerResult(Struct, frozen=True):
    """One rung of the backend ladder."""

    backend: str
    verdict: LayerVerdict
    compiled: bool | None
    ran: bool | None
    matches: bool | None
    isolated: bool = False
    exception_type: str | None = None
    message: str | None = None
    worst: LeafDiff | None = None
    inputs_checked: int = 0
    exit_code: int | None = None
    signal: str | None = None
    wall_ns: int | None = None


class Ladder(Struct, frozen=True):
    layers: list[LayerResult]
    first_failing: str | None
    answer: str
    first_bug: str | None = None
    """The first layer whose worst leaf is a boundary bug (None: none is)."""
    meaning: str | None = None
    """One sentence: what the first boundary-bug layer says about where the bug starts."""


class MemoryPoint(Struct, frozen=True):
    """Memory after the first call on a shape not seen before by this configuration."""

    configuration: str
    phase: ProbePhase
    family: str
    signature: str
    rss_bytes: int | None
    cuda_peak_bytes: int | None
    compiled_variants: int
    """Compilations (frames that produced code) so far in this configuration."""


class EvidenceRow(Struct, frozen=True):
    """The compiler evidence table (first call, steady time, recompiles, peak memory), one row per configuration."""

    configuration: str
    first_call_ns: int | None
    steady_median_ns: int | None
    recompiles: int
    compiles: int
    peak_mib: float | None
    peak_source: Literal["cuda_allocator", "rss", "none"]


class ProbeResult(Struct, frozen=True):
    spec: ProbeSpec
    verdict: Literal["ok", "suspect", "boundary_bug", "fails_eager", "fails_compiled", "incomplete"]
    answer: str
    """One sentence: what the probe concludes."""
    pairs: list[PhasePair] = []
    eager: Samples | None = None
    differential: list[DiffReport] = []
    random_ops: list[RandomOp] = []
    ladder: Ladder | None = None
    memory: list[MemoryPoint] = []
    evidence: list[EvidenceRow] = []
    ledger_source: Literal["capture", "probe"] = "probe"
    """``capture``: the ledger came from live capture; ``probe``: the probe's minimal ledger."""
    error: str | None = None
    warnings: list[str] = []
