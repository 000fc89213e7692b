"""The ledger: one plain, frozen record of what one compiled run did and what it cost.

Capture (live), import (``TORCH_TRACE`` logs, seamscope traces) and the fake event source all
produce a :class:`Ledger`; analyses read it; renderers only render what analyses derived from it.
Nothing here imports torch.

Units: every duration and timestamp is an integer number of nanoseconds. Integers keep the
accounting identity exact (no float rounding between a call's wall time and its parts) and make
the canonical serialisation byte-stable.
"""

from __future__ import annotations

import functools
from typing import Any, Literal

import msgspec

#: Bumped on any change of the ledger or receipt layout. Version 2 added the optional device
#: timeline (``Call.device``, ``Totals.device``, ``Retention.device_every``); a ledger without one
#: is written as version 1, byte for byte as a version-1 writer writes it.
SCHEMA_VERSION = 2
#: A receipt whose file stores failed guards in ``guard_table`` (``summary.recompiles[].failed_guards``
#: and each compilation's empty in the file, named by index into the table): version 3, so that a
#: reader of the plain JSON knows to read the table (``docs/import-formats.md``). Its ledger keeps
#: its own version (1, or 2 with a device timeline).
GUARD_TABLE_VERSION = 3
SCHEMA_VERSIONS_READ = (1, 2, 3)

#: How break-site ids are made (recorded in every ledger as ``site_id_scheme``). 1: file, bare
#: function name, ``gb_code``, ``gb_type`` and statement text. 2: one id per statement: file, the
#: enclosing function's qualified name, statement text, and the statement's position among
#: identical lines of that function (file and line when the source cannot be read).
SITE_ID_SCHEME = 2

Phase = Literal["cold", "steady", "fallback"]
"""A ``run`` call's phase (docs/conventions.md, "Phases"): something compiled in it, cache hits only, or the call
ran after a recompile-limit fallback."""
PHASES: tuple[Phase, ...] = ("cold", "steady", "fallback")
"""The phases in the order totals list them."""

Outcome = Literal["hit", "compile", "recompile", "fallback", "error"]
"""What happened to the cache in a call: all hits; a first compilation of some frame; a
recompilation (a guard failed); an eager fallback (recompile limit, compile failure, skipped
frame); the user's code raised."""

CompileStatus = Literal["ok", "failed", "fallback", "skipped"]
"""``ok``: produced code. ``fallback``: gave up and runs eager (recompile limit).
``failed``: the compiler raised. ``skipped``: Dynamo skipped the frame."""


class Struct(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=False, forbid_unknown_fields=True):
    """Base of every model type: immutable, keyword-only, strict about unknown fields."""


class Frame(Struct, frozen=True):
    """One frame of a user stack (innermost last in a stack)."""

    file: str
    line: int
    function: str


TRACKED_PACKAGES = ("transformers", "diffusers", "timm", "accelerate", "triton", "numpy")
"""Libraries whose version a receipt records beside torch's: a model library's upgrade changes
the code Dynamo traces as surely as torch's does."""


class Environment(Struct, frozen=True):
    """What decides compile behaviour, recorded so that two receipts can be told apart."""

    seamscope_version: str
    python_version: str
    torch_version: str | None = None
    platform: str = ""
    device: str = "cpu"
    backend: str | None = None
    compile_options: dict[str, str] = {}
    dynamo_config: dict[str, str] = {}
    """Settings that decide Dynamo's behaviour (``recompile_limit``, ``capture_scalar_outputs``,
    ``automatic_dynamic_shapes``, ...), values as their ``repr``."""
    compile_cache: CompileCacheState | None = None
    """Inductor's cache directory at the start of the run (None: not read, e.g. an imported log)."""
    packages: dict[str, str] = {}
    """Versions of the installed libraries that change what compiles (``transformers``, ``triton``,
    ...: :data:`TRACKED_PACKAGES`), those installed only; empty where not read (an imported log)."""


RunState = Literal["completed", "raised", "exited", "interrupted", "terminated", "incomplete"]
"""How a live run ended (docs/conventions.md, "Exit codes"): the script returned; it raised; it
called ``sys.exit`` with a non-zero status; Ctrl-C (SIGINT); SIGTERM or SIGHUP; or nothing was
said: a checkpoint, or the marker a run writes as it starts, read after the process died."""


class RunStatus(Struct, frozen=True):
    """How the run ended, and the calls its receipt covers (``RunInfo.status``)."""

    state: RunState
    detail: str = ""
    """``raised``: the exception's type and first line; ``interrupted``/``terminated``: the
    signal's name; ``incomplete``: when the checkpoint was written."""
    exit_code: int | None = None
    """The status the process ended with: 0, the script's own for ``exited``, 1 for ``raised``,
    128 + the signal's number for a signal; None for ``incomplete``."""


def status_text(status: RunStatus | msgspec.UnsetType) -> str | None:
    """``completed``, ``raised ValueError: bad``, ``exited 3``, ``terminated (SIGTERM)``,
    ``incomplete (checkpoint ...)``; None when the receipt records no status."""
    if isinstance(status, msgspec.UnsetType):
        return None
    if status.state == "exited":
        return f"exited {status.exit_code}" + (f" ({status.detail})" if status.detail else "")
    if status.state == "raised":
        return f"raised {status.detail}" if status.detail else "raised"
    return f"{status.state} ({status.detail})" if status.detail else status.state


def status_note(status: RunStatus | msgspec.UnsetType) -> str:
    """What the figures of a run that did not complete cover ("" for a completed one or none)."""
    if isinstance(status, msgspec.UnsetType) or status.state == "completed":
        return ""
    if status.state == "incomplete":
        return ("the run had not written its final receipt (still running, or killed: SIGKILL, out of "
                "memory, os._exit); the figures cover the calls up to this checkpoint")
    return "the figures cover the calls until then"


class RunInfo(Struct, frozen=True):
    """What was run: the spec, kept apart from samples and statistics."""

    source: Literal["live", "torch_trace", "seamscope_trace", "fake", "probe", "shapes"]
    command: list[str] = []
    """The script and its arguments (``run``), the log path (``import``), the workload (probe)."""
    input_trace_sha256: str | None = None
    """Digest of what was fed in (the script and args, the log's bytes, the inputs)."""
    rank: int | None = None
    world_size: int | None = None
    has_runtime: bool = True
    """False for imported ``TORCH_TRACE`` logs: which regions ran in which call is unknown."""
    absent: list[str] = []
    """What this ledger cannot tell, said plainly (never invented)."""
    warnings: list[str] = []
    status: RunStatus | msgspec.UnsetType = msgspec.UNSET
    """How a live run ended (absent: a receipt of an import, a fake, or from before statuses)."""
    pg_timeout_ns: int | msgspec.UnsetType = msgspec.UNSET
    """The default process group's timeout, when ``torch.distributed`` was initialised during the
    run (absent otherwise): how long a collective waits for a late rank before the job fails."""
    pg_backend: str | msgspec.UnsetType = msgspec.UNSET
    """The default process group's backend (``nccl``, ``gloo``), with ``pg_timeout_ns``."""
    untimed_graphs: int | None = 0
    """Graphs compiled before capture began that it could not time (None: some may exist, how
    many is unknown). Their runs are in no region, so the calls' time between compiled regions and
    eager islands is not known; the headline says so instead of a split."""


class ChainedBreak(Struct, frozen=True):
    """A break Dynamo met while handling a site's own break (a break in a loop, under a context
    manager): it follows from that one."""

    gb_code: str | None
    gb_type: str | None
    hint_classes: list[str] = []
    """Its PyTorch hint classes (``BreakSite.hint_classes``)."""


class BreakSite(Struct, frozen=True):
    """A distinct source location where capture broke; one site can be crossed many times."""

    site_id: str
    """Stable id (``B`` + 8 hex) of the statement: file, the enclosing function's qualified name,
    the statement's text and its position among identical lines of that function; not the line
    number: a line shift keeps the id (see ``Ledger.site_id_scheme``)."""
    file: str
    line: int
    function: str
    gb_code: str | None
    gb_type: str | None
    """The registry's name of the break Dynamo met (the innermost one when Dynamo wrapped it in
    "Failed to handle graph break gracefully")."""
    reason: str
    user_stack: list[Frame]
    compile_ids: list[str]
    """Every compilation in which Dynamo broke here (a break inside an inlined helper shows in the
    caller's compilation and again in the helper's own)."""
    scope: str = ""
    """The enclosing function's qualified name (``Class.forward``); empty when the source could
    not be read."""
    statement: str = ""
    """The text of the line that broke, stripped."""
    frame_skipped: bool = False
    """Dynamo could not resume after this break and ran the whole frame eagerly (a break inside a
    loop, a ``with`` or a ``try``): it costs the frame, not a seam."""
    hint_classes: list[str] = []
    """PyTorch's classes of this break (``torch._dynamo.graph_break_hints``: ``FUNDAMENTAL``,
    ``SUPPORTABLE``, ``USER_ERROR``, ``DYNAMO_BUG``, ``DIFFICULT``, ``CAUSED_BY_EARLIER_GRAPH_BREAK``,
    ...), read from its hints, else from the registry's entry for its code; empty when neither
    names one (most breaks)."""
    chained: list[ChainedBreak] = []
    """Breaks Dynamo met while handling this one, in order (each follows from this site's)."""


class ModuleRepeat(Struct, frozen=True):
    """Instances of one module class that one compilation traced one after another (from the
    graph's ``nn_module_stack``): the outermost repeated class, not the classes inside it."""

    cls: str
    """The class's qualified name (``GPT2Block``)."""
    module: str
    """Its Python module (``transformers.models.gpt2.modeling_gpt2``)."""
    file: str
    """Where its ``forward`` is defined (normalised), and the first line."""
    line: int
    instances: int
    """Distinct instances traced (module paths, ``L['self'].h.0`` ...)."""
    nodes: int
    """Graph nodes traced inside those instances, summed."""
    nodes_min: int
    nodes_max: int
    """Nodes of the smallest and largest instance (equal: every instance traced the same code)."""
    graph_nodes: int
    """Every node of the graphs these instances were found in."""
    first_path: str = ""
    """The first instance's path as Dynamo names it (``L['self'].h.0``)."""
    kv_cache: bool = False
    """Nodes inside the instances come from ``transformers``' cache code (``cache_utils.py``):
    each block updates per-layer cache state, which a regional compile guards on per instance."""


class CompileCacheState(Struct, frozen=True):
    """Inductor's persistent cache directory as the run found it (live capture only)."""

    dir: str
    fx_entries: int
    """Entries of the FX graph cache (``fxgraph/``) before the run started."""
    aot_entries: int
    """Entries of the AOTAutograd cache (``aotautograd/``) before the run started."""


class Compilation(Struct, frozen=True):
    """One frame compilation ``x/y`` (attempts after a restart folded in)."""

    compile_id: str
    frame_name: str
    file: str
    line: int
    status: CompileStatus
    call_index: int | None = None
    """The call during which it happened; None when outside any observed call."""
    start_ns: int | None = None
    """Relative to the ledger's origin; None when unknown (imported logs)."""
    duration_ns: int | None = None
    dynamo_ns: int | None = None
    aot_ns: int | None = None
    backend_ns: int | None = None
    graph_count: int = 0
    """Graphs Dynamo produced in this compilation (handed to the backend)."""
    guard_count: int | None = None
    """Guards Dynamo installed for this cache entry (``compilation_metrics.guard_count``)."""
    guard_latency_ns: int | None = None
    """PyTorch's own measurement of one evaluation of this entry's guards
    (``compilation_metrics.guard_latency_us``): timed once, at compile time, after a cache flush;
    None when the metrics do not carry it."""
    guard_checks: dict[str, int] = {}
    """The checks of this entry's guard tree (``dynamo_cpp_guards_str``) by what they check
    (``ingest.guard_groups``: ``module``, ``tensor``, ``global``, ``id``, ``value``); empty when the
    tree was not seen. Not ``guard_count``'s guards: one guard can become several checks."""
    fx_cache: Literal["hit", "miss", "bypass"] | None = None
    aot_cache: Literal["hit", "miss", "bypass"] | None = None
    failed_guards: list[str] = []
    """The guards that failed and caused this compilation (recompile reasons), normalised."""
    restart_reasons: list[str] = []
    fail_type: str | None = None
    fail_reason: str | None = None
    break_site_ids: list[str] = []
    own_break_site_id: str | None = None
    """The break that ends this frame's graph: the seam right after its region runs."""
    own_break_depth: int | None = None
    """Where this frame sits in that break's user stack (the innermost frame is the break's own;
    a shallower one is a caller that tried to inline the helper that broke)."""
    resume_site_id: str | None = None
    """For a resume function (``torch_dynamo_resume_in_f_at_N``): the break it resumes after. It
    names the seam even when the frame before it produced no graph (a disabled function)."""
    resume_depth: int | None = None
    ddp_split_count: int | None = None
    """Submodules DDPOptimizer split this compilation's graph into at DDP bucket boundaries (each
    compiled by the backend on its own); None when it did not split it. Not graph breaks."""
    backend_compile_ns: int | None = None
    """The whole backend call (``backend_compile_time_s``: AOTAutograd and Inductor inside it)."""
    inductor_ns: int | None = None
    """Inductor's own compile (``inductor_cumulative_compile_time_us``), inside AOTAutograd."""
    codegen_ns: int | None = None
    """Inductor's code generation (``inductor_code_gen_cumulative_compile_time_us``)."""
    autotune_ns: int | None = None
    """Autotuning at compile time (``compile_time_autotune_time_us``), inside Inductor."""
    fx_bypass_reason: str | None = None
    """Why the FX graph cache was bypassed, as PyTorch wrote it."""
    aot_bypass_reason: str | None = None
    """Why the AOTAutograd cache was bypassed, as PyTorch wrote it."""
    metrics_absent: list[str] = []
    """Compile-time fields this PyTorch version's ``compilation_metrics`` did not have (a key
    missing, not a null value): what the stage split cannot tell."""
    modules: list[ModuleRepeat] = []
    """Module classes traced once per instance in this compilation (live capture only)."""
    user_frame: Frame | None = None
    """The frame a user would recognise when the compiled one is a generic wrapper (a
    decorator's ``wrapper``, torch's ``wrap_inline`` ``inner``, a library module's ``forward``):
    the wrapped function (``step``), method (``UNet2DConditionModel.forward``) or module class's
    ``forward``, read from the frames the graph was traced under (live capture), or from what a
    ``TORCH_TRACE`` log keeps of them (import; ``ingest.naming``); None when the compiled frame
    is the user's own, or nothing better is known. Reports name it; ids and hashes use
    ``frame_name``, ``file`` and ``line``."""

    @property
    def is_recompile(self) -> bool:
        return compile_frame_index(self.compile_id)[1] > 0

    @property
    def shown_frame(self) -> tuple[str, str, int]:
        """``(name, file, line)`` of the frame reports name: :attr:`user_frame` when known."""
        return shown_frame(self)


#: Frame indexes of one log generation (ids reused after ``torch._dynamo.reset()``) are offset by
#: this much per generation, so that ``0/0@2`` is another frame than ``0/0``.
GENERATION_STRIDE = 1 << 20


def shown_frame(item: Any) -> tuple[str, str, int]:
    """``(name, file, line)`` reports name for a compilation, or a row copied from one (its
    ``frame_name``, ``file``, ``line`` and ``user_frame``): the user's frame when known."""
    u = item.user_frame
    if u is not None:
        return u.function, u.file, u.line
    return item.frame_name, item.file, item.line


def shown_frame_name(item: Any) -> str:
    """The name reports give a row's frame (a fallback row has no file): :func:`shown_frame`'s."""
    return item.user_frame.function if item.user_frame is not None else item.frame_name


@functools.lru_cache(maxsize=1 << 16)  # read for every comparison of ids when sorting and grouping
def compile_frame_index(compile_id: str) -> tuple[int, int]:
    """``"3/1"`` → (3, 1); ``"3/1_2"`` → (3, 1). Unparseable ids sort last.

    Two forms come from imported logs: ``!N/x/y`` (Dynamo compiling compiled autograd's graph
    ``N``; frame ``x`` of the same counter as plain ids) → (x, y), and ``x/y@g`` (the ``g``-th
    generation of ids, after ``g - 1`` resets) → (x + (g - 1) · :data:`GENERATION_STRIDE`, y).
    """
    head, _, gen = compile_id.partition("@")
    head = head.split("_", 1)[0]
    if head[:1] == "!":
        head = head.split("/", 1)[-1]
    try:
        x, y = head.split("/", 1)
        g = int(gen) - 1 if gen else 0
        return int(x) + g * GENERATION_STRIDE, int(y)
    except ValueError:
        return (1 << 30, 0)


# --- events inside a call, in the order they happened -------------------------------------------


class RegionEvent(Struct, tag="region", frozen=True):
    """One run of one compiled graph."""

    compile_id: str
    graph_index: int
    start_ns: int
    """Relative to the call's start."""
    duration_ns: int
    out_tensors: int | None = None
    out_bytes: int | None = None
    """Seam traffic: tensors and bytes this region hands back to eager code (None: not sampled)."""


class IslandEvent(Struct, tag="island", frozen=True):
    """Time in a call outside compiled regions and compilation: eager code, guard checks, Python."""

    start_ns: int
    duration_ns: int
    after_site_id: str | None = None
    """The break crossed just before this island, when the island follows a broken region."""


class CompileEvent(Struct, tag="compile", frozen=True):
    """A compilation that happened inside the call."""

    compile_id: str
    start_ns: int
    duration_ns: int


class BreakEvent(Struct, tag="break", frozen=True):
    """A break site crossed (a point event)."""

    site_id: str
    at_ns: int


class GuardMissEvent(Struct, tag="guard_miss", frozen=True):
    """Guards failed and a new variant was compiled (a point event; text in the Compilation)."""

    compile_id: str
    at_ns: int


class FallbackEvent(Struct, tag="fallback", frozen=True):
    """Dynamo gave up on a frame in this call and ran it eagerly (a point event)."""

    compile_id: str
    reason: str
    at_ns: int


Event = RegionEvent | IslandEvent | CompileEvent | BreakEvent | GuardMissEvent | FallbackEvent


# --- the device timeline of a call (an accelerator's events; absent on CPU) ---------------------


class DeviceRegion(Struct, frozen=True):
    """The device work one region run queued on the current stream: from an event recorded at
    the region's entry to one recorded at its exit."""

    compile_id: str
    start_ns: int
    """Offset from the call's anchor event (recorded at the call's start)."""
    duration_ns: int


class DeviceSeam(Struct, frozen=True):
    """The device seam gap before a region (or after the last one): from the end of the previous
    region's device work (or the anchor) to the start of the next's (or the call's end event).
    It holds the island's own kernels plus the time the device sat idle."""

    gap_ns: int
    syncs: int | None = None
    """Device-to-host syncs the host made in the island before it (None: not counted)."""
    host_wait_ns: int | None = None
    """Host time from the island's first sync to the island's end (None: syncs not counted)."""


class DeviceTimeline(Struct, frozen=True):
    """A call's device lane. Every time is an offset from one anchor event, rounded to integer
    nanoseconds once, so ``sum(region durations) + sum(seam gaps) == span_ns`` exactly."""

    span_ns: int
    """From the anchor to the completion of the call's last queued work."""
    regions: list[DeviceRegion]
    seams: list[DeviceSeam]
    """One before each region, then one after the last (``len(regions) + 1``)."""
    complete: bool = True
    """False: an event never completed (a hung kernel, an interrupted run); the lane is empty."""


class Call(Struct, frozen=True):
    """One top-level call of a compiled callable from user code."""

    index: int
    phase: Phase
    outcome: Outcome
    wall_ns: int
    overhead_ns: int
    """seamscope's own bookkeeping time inside the call (measured, not estimated)."""
    events: list[Event]
    family: str | None = None
    """Input family or label (the probe's ``steady``/``changed``; a shape length)."""
    error: str | None = None
    device: DeviceTimeline | msgspec.UnsetType = msgspec.UNSET
    """The device lane (absent on CPU, and on a call not timed on the device)."""


class OutsideRegion(Struct, frozen=True):
    """Compiled code that ran outside any call (a compiled backward inside ``loss.backward()``)."""

    compile_id: str
    kind: Literal["backward", "forward"]
    duration_ns: int
    attributed_call: int | None
    """The call whose forward produced it, when known."""


# --- exact totals over every call, retained or not -----------------------------------------------


class RegionTotal(Struct, frozen=True):
    compile_id: str
    runs: int
    total_ns: int
    min_ns: int
    max_ns: int
    outside_runs: int = 0
    outside_ns: int = 0


class SiteTotal(Struct, frozen=True):
    site_id: str
    crossings: int
    calls_crossing: int
    island_after_ns: int
    """Sum of the islands that followed a crossing of this site."""


class PhaseTotal(Struct, frozen=True):
    phase: Phase
    calls: int
    wall_ns: int
    region_ns: int
    island_ns: int
    compile_ns: int
    overhead_ns: int


class DevicePhaseTotal(Struct, frozen=True):
    """Sums over the calls of one phase timed on the device (kept in detail, or sampled)."""

    phase: Phase
    calls: int
    """Calls timed on the device (complete timelines only)."""
    span_ns: int
    region_ns: int
    gap_ns: int
    host_wait_ns: int
    syncs: int
    wall_ns: int
    """The host wall time of the same calls (to scale a sample to the phase)."""


class DeviceSiteTotal(Struct, frozen=True):
    """Over one phase's calls timed on the device: the device seam gaps and syncs after a break."""

    phase: Phase
    site_id: str
    gap_ns: int
    host_wait_ns: int
    syncs: int
    calls: int
    """Timed calls that crossed the site."""


class DeviceRegionTotal(Struct, frozen=True):
    compile_id: str
    runs: int
    total_ns: int


class DeviceTotals(Struct, frozen=True):
    """Device time over the calls timed on the device. Totals of host time cover every call;
    these cover the timed ones only (``calls`` per phase says how many)."""

    source: str
    """What timed it (``cuda``, ``fake``)."""
    phases: list[DevicePhaseTotal]
    regions: list[DeviceRegionTotal]
    sites: list[DeviceSiteTotal]
    incomplete: int = 0
    """Timed calls whose events never completed."""
    syncs_counted: bool = True
    """False where the user had set a sync debug mode: syncs were not counted."""


class Totals(Struct, frozen=True):
    """Exact accumulators over all calls, so that dropping detail never changes a total."""

    calls: int
    phases: list[PhaseTotal]
    regions: list[RegionTotal]
    sites: list[SiteTotal]
    outside_ns: int = 0
    outside_runs: int = 0
    device: DeviceTotals | msgspec.UnsetType = msgspec.UNSET
    """Device time (absent on CPU)."""


class Retention(Struct, frozen=True):
    """How per-call detail was bounded: the first ``first`` calls, then every ``stride``-th."""

    first: int
    cap: int
    stride: int
    retained: int
    dropped: int
    outside_cap: int = 0
    outside_dropped: int = 0
    device_every: int | msgspec.UnsetType = msgspec.UNSET
    """Calls not kept in detail are timed on the device one in ``device_every`` (absent on CPU)."""


class Ledger(Struct, frozen=True):
    """One run (one process, one rank)."""

    schema_version: int
    run: RunInfo
    environment: Environment
    compilations: list[Compilation]
    break_sites: list[BreakSite]
    calls: list[Call]
    outside: list[OutsideRegion]
    totals: Totals
    retention: Retention
    site_id_scheme: int = 1
    """How this ledger's site ids were made (:data:`SITE_ID_SCHEME`); 1 when not recorded."""

