"""The receipt's compile-time ledger: where compile time went by stage, what each cache layer did,
and the findings that attribute a frame's first compilations (not only its recompiles).

Part of the ``findings`` section (``FindingsSection.compile_time``). The stages are exclusive and
add up to a compilation's duration:

- ``dynamo``: Dynamo's own work, everything outside the backend call (bytecode tracing, guards,
  building the FX graph);
- ``aot_autograd``: the backend call outside Inductor (AOTAutograd's tracing under ``aot_eager``
  and ``inductor``; the whole compile of any other backend);
- ``inductor``: Inductor's lowering and code generation, autotuning excluded;
- ``autotune``: autotuning at compile time, where recorded.

Every duration is integer nanoseconds; every ratio a float rounded by ``canonical.round_float``.
"""

from __future__ import annotations

from typing import Literal

from .ledger import Frame, ModuleRepeat, Struct
from .remedy import Remedy

Stage = Literal["dynamo", "aot_autograd", "inductor", "autotune"]
STAGES: tuple[Stage, ...] = ("dynamo", "aot_autograd", "inductor", "autotune")

CompileTimeKind = Literal["repeated_block", "cache_miss", "cold_once", "cold_start"]
"""``repeated_block``: the same code traced again for every instance or variant of a block;
``cache_miss``: a persistent cache that did not hit (a miss on a warm cache directory, or a
bypass); ``cold_once``: a first compilation whose code served one call only; ``cold_start``: the
first compilations no other finding claims."""


class StageSplit(Struct, frozen=True):
    """Compile time by stage; ``None``: the stage was not recorded (see ``missing``)."""

    compilations: int
    total_ns: int
    dynamo_ns: int | None
    aot_autograd_ns: int | None
    inductor_ns: int | None
    autotune_ns: int | None
    unsplit_ns: int
    """Compile time no recorded stage accounts for (a compilation without stage fields)."""
    codegen_ns: int | None = None
    """Of ``inductor_ns``: Inductor's code generation, where recorded."""


class CacheLayer(Struct, frozen=True):
    """What one persistent cache layer did over the run's compilations."""

    layer: Literal["fx_graph", "aot_autograd"]
    hit: int
    miss: int
    bypass: int
    unrecorded: int
    """Compilations with no outcome for this layer (the backend does not use it, or it is off)."""
    bypass_reasons: list[str] = []
    """Distinct reasons PyTorch gave for a bypass, each with its count (``reason (3×)``)."""


class FrameCompileTime(Struct, frozen=True):
    """One frame (code object): its compilations and their stages."""

    frame_name: str
    file: str
    line: int
    compile_ids: list[str]
    recompiles: int
    split: StageSplit
    share: float | None
    """Its compile time over the run's time (None without runtime data)."""
    fx_cache: str
    aot_cache: str
    """Outcomes over its compilations, in words (``2 hit, 1 miss``; ``–``: none recorded)."""
    user_frame: Frame | None = None
    """The frame reports name for it (``Compilation.user_frame``): its compiled frame is a wrapper."""


class CompileTimeFinding(Struct, frozen=True):
    finding_id: str
    """``CT`` + 8 hex from the kind and the code object (file, function, or class), never a line
    number or a time: later runs keep it."""
    kind: CompileTimeKind
    rank: int
    sentence: str
    cost_ns: int
    """Compile time this finding accounts for and no other ranked item does: its ranking key."""
    basis: str
    compile_ids: list[str]
    remedies: list[Remedy]
    frame_name: str = ""
    file: str = ""
    line: int = 0
    total_ns: int = 0
    """The compile time of the evidence, before what other items claim is taken off."""
    block: ModuleRepeat | None = None
    """The repeated block (graph evidence), for ``repeated_block``."""
    stage: Stage | None = None
    """The stage that dominates the finding's compile time."""
    missing: list[str] = []


class CompileTimeSection(Struct, frozen=True):
    compile_ns: int
    """Every compilation's duration, in calls and outside them."""
    share: float | None
    """``compile_ns`` over the run's time (calls' wall time plus compilation outside calls)."""
    split: StageSplit
    dominant_stage: Stage | None
    frames: list[FrameCompileTime]
    """Costliest first."""
    caches: list[CacheLayer]
    cache_dir: str | None = None
    cache_dir_warm: bool | None = None
    """Whether the persistent cache directory held entries when the run began (None: unknown)."""
    cache_dir_basis: str = ""
    """How that was told: entries counted at the start, or hits seen in an imported log."""
    findings: list[CompileTimeFinding] = []
    missing: list[str] = []


class WarmStage(Struct, frozen=True):
    stage: str
    """``dynamo``, ``aot_autograd``, ``inductor``, ``autotune``, or ``unsplit``."""
    cold_ns: int | None
    warm_ns: int | None


class ArtifactsStart(Struct, frozen=True):
    """A third run with an empty cache directory that loaded the cold run's
    ``torch.compiler.save_cache_artifacts`` first (a worker on a fresh machine shipped them)."""

    artifacts_file: str
    artifacts_bytes: int
    receipt: str
    compile_ns: int
    wall_ns: int
    stages: list[WarmStage]
    """``cold_ns``: the cold run's; ``warm_ns``: this run's."""
    caches: list[CacheLayer]
    still_missed: list[str]
    load_note: str
    """What loading did, as the run's decision note says (entries per cache, time)."""


class WarmStart(Struct, frozen=True):
    """What a restarted worker pays: the same target run against one persistent cache directory,
    the first run filling it (cold), the second reading it (warm), and, where the cold run saved
    cache artifacts, a third loading them into an empty one (:attr:`artifacts`). Not a receipt
    section: ``seamscope run --warm`` writes it beside the runs' receipts."""

    cache_dir: str
    cold_receipt: str
    warm_receipt: str
    cold_compile_ns: int
    warm_compile_ns: int
    cold_wall_ns: int
    warm_wall_ns: int
    stages: list[WarmStage]
    cold_caches: list[CacheLayer]
    warm_caches: list[CacheLayer]
    still_missed: list[str]
    """The warm run's compilations that did not hit a cache layer, with PyTorch's reason."""
    sentence: str
    artifacts: ArtifactsStart | None = None
    """The run from the cold run's cache artifacts; None where none were saved (see ``artifacts_note``)."""
    artifacts_note: str | None = None
    """Why there is no such run, or what saving the artifacts did."""
