"""The multi-rank section of a merged receipt (``seamscope merge``): one run seen from every rank.

A merged receipt keeps one rank's ledger as its primary ``ledger`` (rank 0 when present), so that
``check``, ``diff`` and every report keep working on it unchanged; this section adds, per rank, the
key figures and per call the regions and times, the ranks' divergences, and what was wrong with
the input. Nothing here imports torch.
"""

from __future__ import annotations

from typing import Literal

from .ledger import Outcome, Phase, Struct

SiteOrigin = Literal["user", "ddp", "fsdp", "framework"]
"""Whose code a break site is in: the user's; else the torch.distributed wrapper the library code
was reached through (innermost first): torch's FSDP code (``torch/distributed/fsdp/``,
``torch/distributed/_composable/fsdp/``: FSDP and FSDP2's ``fully_shard``) or torch's DDP code
(``torch/nn/parallel/``, ``replicate``, DDP's comm hooks), which the user cannot change; other
library or standard-library code (``framework``)."""

DivergenceKind = Literal["versions", "compiled_graphs", "recompile_call", "sites", "call_count", "steady_time"]

ProblemKind = Literal["missing_rank", "unreadable", "mixed_runs", "world_size", "duplicate_rank", "no_rank"]


class RankCall(Struct, frozen=True):
    """One call as one rank ran it."""

    index: int
    phase: Phase
    outcome: Outcome
    wall_ns: int
    region_ns: int
    island_ns: int
    compile_ns: int
    regions: list[str]
    """Compile ids of the regions run, in order."""
    sites: list[str]
    """Break sites crossed, in order."""


class RankSite(Struct, frozen=True):
    site_id: str
    file: str
    line: int
    function: str
    origin: SiteOrigin
    crossings: int | None


class RankRecompile(Struct, frozen=True):
    compile_id: str
    frame_name: str
    call_index: int | None
    failed_guards: list[str]


class DdpSplit(Struct, frozen=True):
    """A compilation whose graph DDPOptimizer split at bucket boundaries (not a graph break)."""

    compile_id: str
    frame_name: str
    submodules: int


class RankEntry(Struct, frozen=True):
    """One rank's receipt, reduced to what the ranks are compared on."""

    rank: int
    source: str
    """Where it was read from (relative to the merged directory)."""
    world_size: int | None
    input_trace_sha256: str | None
    structure_sha256: str
    receipt_sha256: str
    has_runtime: bool
    call_count: int
    compile_count: int
    recompile_count: int
    graph_count: int
    fallback_count: int
    break_site_count: int
    compile_ids: list[str]
    """``x/y frame_name`` of every compilation, in id order."""
    recompiles: list[RankRecompile]
    sites: list[RankSite]
    ddp_splits: list[DdpSplit]
    steady_calls: int
    steady_median_ns: int | None
    steady_iqr_ns: int | None
    """Spread of the steady wall times (p75 − p25, nearest rank); the rank's own noise."""
    calls: list[RankCall]
    """The calls this rank retained (all, unless its detail was bounded)."""
    compile_calls: list[int | None] = []
    """The call each of ``compile_ids`` happened in (None: outside any call), same order."""
    pg_timeout_ns: int | None = None
    """The process group's timeout as this rank recorded it (``RunInfo.pg_timeout_ns``)."""
    pg_backend: str | None = None
    torch_version: str | None = None
    python_version: str | None = None
    """The versions the rank ran (its receipt's ``environment``; None: not recorded)."""
    packages: dict[str, str] = {}
    """The tracked libraries' versions it ran (``environment.packages``: ``transformers``, ...;
    empty: not recorded)."""
    status: str | None = None
    """How the rank's run ended (``completed``, ``terminated (SIGTERM)``, ``incomplete (...)``), as
    its receipt records it; None when it records none (an imported log)."""


class Divergence(Struct, frozen=True):
    kind: DivergenceKind
    ranks: list[int]
    """The ranks that differ from the reference ranks."""
    reference_ranks: list[int]
    first_call: int | None
    """The first call where it appears; None when unknown (imported logs carry no calls)."""
    detail: str


class RankProblem(Struct, frozen=True):
    """Something wrong with the input, named; the ranks that could be read are still merged."""

    kind: ProblemKind
    message: str
    ranks: list[int] = []
    paths: list[str] = []


class CompileSkew(Struct, frozen=True):
    """One call in which the ranks spent different compile time: the ranks that compiled less
    reach the next collective first and wait there for the others (``analyze.skew``)."""

    skew_id: str
    """``SK`` + 8 hex from the call index and the slow ranks."""
    call_index: int
    spread_ns: int
    """Max − min compile time in this call over the ranks that made it: the longest wait it
    implies for a rank at the next collective."""
    max_ns: int
    min_ns: int
    slow_ranks: list[int]
    """The ranks that compiled the most (within half the spread of the maximum)."""
    fast_ranks: list[int]
    """The other ranks: they wait."""
    idle_ranks: list[int]
    """Ranks that compiled nothing in this call while another compiled."""
    lone: bool
    """Some rank compiled in this call and another did not."""
    wait_ns: int
    """The wait this skew implies for the ranks that compiled least (``spread_ns``)."""
    rank_wait_ns: int
    """The waits summed over every rank (Σ max − own compile time): rank-time lost."""
    compile_ids: list[str]
    """What the slowest rank compiled in this call."""
    timeout_share: float | None
    """``wait_ns`` over the process group's timeout (None when no timeout is known)."""
    warning: str | None
    """Set when the wait comes within half of the process group's timeout."""
    sentence: str
    remedy: str


class RanksSection(Struct, frozen=True):
    world_size: int | None
    """As recorded by the ranks (None for imported logs, which do not record it)."""
    ranks_present: list[int]
    primary_rank: int
    ledger_note: str
    """Which rank the receipt's ``ledger``, ``summary`` and hashes describe."""
    ranks: list[RankEntry]
    divergences: list[Divergence]
    problems: list[RankProblem]
    time_rule: str
    """How "beyond noise" was decided for steady times, and when time was not judged."""
    skews: list[CompileSkew] = []
    """Calls in which the ranks' compile times differ, largest wait first."""
    pg_timeout_ns: int | None = None
    """The process group's timeout the skews were compared with."""
    pg_timeout_source: str = ""
    """Where ``pg_timeout_ns`` came from: recorded by the ranks, or NCCL's default."""
    skew_rule: str = ""
    """When a call's compile times count as a skew."""
