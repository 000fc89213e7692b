"""Structured-trace events → compilations and break sites.

PyTorch writes the same structured events to a ``TORCH_TRACE`` file and to the in-process logger
``torch.__trace``. This module turns them into :class:`Compilation` and :class:`BreakSite` records,
so that live capture and import agree wherever both can know. It is torch-free and never executes
anything from a log.

An event is ``(metadata, payload)``: ``metadata`` is the JSON object of one record (exactly one
event key plus context fields ``frame_id``, ``frame_compile_id``, ``attempt``, ``rank``, ...), and
``payload`` the text that followed it, if any.
"""

from __future__ import annotations

import bisect
import json
import os
import re
from dataclasses import dataclass, field
from typing import Any, Protocol

import msgspec

from ..model.ledger import (
    BreakSite,
    Compilation,
    CompileStatus,
    Frame,
    compile_frame_index,
)
from ..model.normalize import normalize_path, normalize_text, stripped_normalized
from ..model.normalize import normalized as _reasons
from .break_reasons import RESUME_AT, ParsedBreak, parse_break_reason, user_function
from .guard_groups import group_guards
from .hints import HintTable
from .naming import FrameNamer, graph_frames, self_class, trace_module, trace_origin

CONTEXT_KEYS = frozenset(
    {"frame_id", "frame_compile_id", "attempt", "rank", "has_payload", "compiled_autograd_id"}
)

_CACHE_ARTIFACT = re.compile(r"^(fx_graph|aotautograd)_cache_(hit|miss|bypass)$")

#: Event kinds that carry nothing the ledger needs (known, deliberately ignored). A kind neither
#: here nor handled by :meth:`CompileEventAssembler.feed` is counted as unknown.
IGNORED_EVENTS = frozenset(
    {
        "chromium_event", "describe_tensor", "describe_storage", "describe_source", "create_symbol", "guard_added_fast",
        "guard_added", "aot_inference_graph", "aot_forward_graph", "aot_backward_graph", "aot_joint_graph",
        "inductor_output_code", "inductor_post_grad_graph", "inductor_pre_grad_graph", "optimize_ddp_split_graph",
        "dynamo_guards", "symbolic_shape_specialization", "propagate_real_tensors", "link", "graph_break",
        "bwd_compilation_metrics", "compiled_autograd_graph", "aot_autograd_backward_compilation_metrics",
        "missing_fake_kernel", "mismatched_fake_kernel", "exported_program", "dump_file", "expression_created",
        "unbacked_symbol_created", "guard_failed", "recompile_reasons", "freezing_passes", "graph_region_expansion",
        "inductor_provenance_tracking_node_mappings", "inductor_provenance_tracking_kernel_stack_traces", "cache_hit",
        "cache_miss", "cache_bypass", "create_unbacked_symbol", "export", "get_extra_remote_code_state",
        "put_local_code_state", "graph_dump", "guard_on_data_dependent_error", "inductor_input_graph",
        "propagate_real_tensors_provenance",
        # compile work done while the program runs (a lazily compiled backward): not a frame
        # compilation; tlparse lists them apart from the compile ids' metrics too
        "compilation_metrics_runtime", "bwd_compilation_metrics_runtime",
    }
)
#: Artifacts whose payload the ledger reads; every other payload is skipped unread. A cache
#: bypass's payload is small (the reason); a hit's or a miss's holds the whole key's components.
PAYLOAD_ARTIFACTS = frozenset({"dynamo_graph_break_reason", "recompile_reasons", "fx_graph_cache_bypass",
                               "aotautograd_cache_bypass"})
#: ``compilation_metrics`` fields the compile-time stage split reads, by the stage they tell:
#: when a record lacks the key (an older PyTorch), ``Compilation.metrics_absent`` names the stage.
STAGE_METRICS = {
    "dynamo_cumulative_compile_time_us": "dynamo", "aot_autograd_cumulative_compile_time_us": "aot_autograd",
    "backend_compile_time_s": "backend", "inductor_cumulative_compile_time_us": "inductor",
    "compile_time_autotune_time_us": "autotune", "inductor_fx_local_cache_hit_count": "fx_cache",
    "aotautograd_local_cache_hit_count": "aot_cache",
}
#: Event kinds :meth:`CompileEventAssembler.feed` reads the metadata of (never a payload).
METADATA_EVENTS = frozenset({"str", "dynamo_start", "dynamo_output_graph", "optimize_ddp_split_child",
                             "compilation_metrics"})

SKIP, METADATA, PAYLOAD = 0, 1, 2
"""What a reader needs of a record: nothing, its metadata, or its metadata and payload."""


def needed(key: str, artifact: str | None = None) -> int:
    """What the assembler reads of an event of kind ``key`` (for an ``artifact``, named
    ``artifact``): :data:`SKIP`, :data:`METADATA` or :data:`PAYLOAD`.

    Live capture asks PyTorch to build only this; whatever :meth:`CompileEventAssembler.feed`
    reads must be declared here (a test feeds it real events both ways and compares).
    """
    if key == "dynamo_cpp_guards_str":
        return PAYLOAD
    if key == "artifact":
        if artifact in PAYLOAD_ARTIFACTS:
            return PAYLOAD
        return METADATA if artifact is not None and _CACHE_ARTIFACT.match(artifact) else SKIP
    return METADATA if key in METADATA_EVENTS else SKIP


def event_key(meta: dict[str, Any]) -> str | None:
    for k in meta:
        if k not in CONTEXT_KEYS:
            return k
    return None


def compile_id_of(meta: dict[str, Any], autograd: bool = False) -> str | None:
    """``x/y`` from the record's context (attempts are folded in: ``x/y_z`` → ``x/y``).

    A record with a compiled-autograd id (``"compiled_autograd_id": N``; a null one, which builds of
    late 2024 write on every record, is an ordinary record) belongs to Dynamo compiling compiled
    autograd's graph ``N``: ``!N/x/y`` when ``autograd``, else None. The graph itself
    (``!N/-/-``, no frame) is no frame compilation: None.
    """
    fid, fcid = meta.get("frame_id"), meta.get("frame_compile_id")
    ca = meta.get("compiled_autograd_id")
    if ca is not None:
        if autograd and isinstance(ca, int) and isinstance(fid, int) and isinstance(fcid, int):
            return f"!{ca}/{fid}/{fcid}"
        return None
    if isinstance(fid, int) and isinstance(fcid, int):
        return f"{fid}/{fcid}"
    return None


def _metrics_id(value: Any) -> str | None:
    """The compile id a ``compilation_metrics`` payload names, attempt folded (``0/1_2`` → ``0/1``)."""
    if not isinstance(value, str) or not value:
        return None
    return value.split("_", 1)[0]


_US, _S = 1000, 1e9
"""Nanoseconds in a microsecond and in a second (the units of ``compilation_metrics``' times)."""

#: How a ``compilation_metrics`` record gives the frame's compile time, newest layout first:
#: (layout, field, unit). ``log_format`` in :class:`CompileEventAssembler`; docs/import.md.
TIME_FIELDS: tuple[tuple[str, str, float], ...] = (
    ("duration_us", "duration_us", _US),
    ("cumulative_us", "dynamo_cumulative_compile_time_us", _US),
    ("seconds", "entire_frame_compile_time_s", _S),
)


def _depth_in(site: BreakSite, file: str, function: str) -> int | None:
    """Index of the innermost frame of (file, function) in the site's user stack."""
    for depth in range(len(site.user_stack) - 1, -1, -1):
        f = site.user_stack[depth]
        if f.file == file and f.function == function:
            return depth
    return None


def parse_recompile_reasons(payload: str | None, cwd: str | None = None) -> list[str]:
    """``recompile_reasons`` declares JSON, but one reason arrives as plain text (PYTORCH_FACTS)."""
    if not payload:
        return []
    text = payload.strip()
    reasons: list[str]
    if text.startswith("["):
        try:
            try:
                val = _decode_json(text)  # what json.loads gives, faster; else json.loads itself
            except (msgspec.DecodeError, RecursionError):
                val = json.loads(text)
            if type(val) is list:
                kept = stripped_normalized(val, cwd)
                if kept is not None:
                    return kept
            reasons = list(map(str, val)) if isinstance(val, list) else [str(val)]
        except (ValueError, RecursionError):
            reasons = [text]
    else:
        reasons = [text]
    return list(map(_reasons(cwd).__getitem__, [r for r in map(str.strip, reasons) if r]))


def _bypass_reason(payload: str | None, cwd: str | None) -> str | None:
    """``cache_bypass_reason`` of a cache-bypass artifact (a JSON object); None when absent."""
    if not payload:
        return None
    try:
        val = json.loads(payload)
    except ValueError:
        return normalize_text(payload.strip(), cwd)[:500] or None
    reason = val.get("cache_bypass_reason") if isinstance(val, dict) else None
    return normalize_text(str(reason), cwd)[:500] if reason else None


_decode_json = msgspec.json.Decoder().decode
BREAKS_KEPT = 256  # distinct break payloads kept read (memory stays flat however long the log)


def _ns(value: Any, unit: float) -> int | None:
    """A time from the metrics, in ``unit`` (:data:`_US`, :data:`_S`), as integer nanoseconds."""
    return int(round(float(value) * unit)) if isinstance(value, (int, float)) else None


def status_of(metrics: dict[str, Any]) -> CompileStatus:
    fail_type = metrics.get("fail_type")
    if not fail_type:
        return "ok"
    reason = f"{fail_type} {metrics.get('fail_reason') or ''}".lower()
    if "recompile limit" in reason or "recompile_limit" in reason or "cache_size_limit" in reason:
        return "fallback"
    if "skip" in str(fail_type).lower():
        return "skipped"
    return "failed"


class CompileSink(Protocol):
    """Who wants to hear about compilations as they happen (live capture)."""

    def on_compile_start(self, compile_id: str, t_ns: int | None) -> None: ...

    def on_compilation(self, compilation: Compilation, t_ns: int | None) -> None: ...

    def on_site(self, site: BreakSite) -> None: ...


@dataclass
class _Pending:
    frame_name: str = ""
    file: str = ""
    line: int = 0
    graphs: int = 0
    graph_attempt: int = -1
    failed_guards: list[str] = field(default_factory=list)
    site_ids: list[str] = field(default_factory=list)
    fx_cache: str | None = None
    aot_cache: str | None = None
    fx_bypass: str | None = None
    aot_bypass: str | None = None
    started: bool = False
    ddp_splits: int | None = None
    guard_checks: dict[str, int] = field(default_factory=dict)
    graph_frames: list[list[tuple[str, int, str]]] = field(default_factory=list)
    """Each graph's nodes' innermost frames (:func:`.naming.graph_frames`; import only)."""
    self_class: str | None = None
    """The class of the compiled frame's ``self``, from its guard tree (import only)."""
    main_files: list[str] = field(default_factory=list)
    """The files of the stack's module-level frames, innermost first: where ``__main__`` is one
    (import only)."""


class CompileEventAssembler:
    """Feed events in file order; read ``compilations`` and ``sites`` at any time."""

    def __init__(self, cwd: str | None = None, sink: CompileSink | None = None, from_log: bool = False,
                 hints: HintTable | None = None) -> None:
        self.cwd = cwd
        self.hints = hints
        """The hint classes' texts and codes breaks are read with (None: the shipped table)."""
        self.sink = sink
        self.from_log = from_log
        """Reading a whole ``TORCH_TRACE`` log (import), not live events: compiled-autograd
        compilations are kept (``!N/x/y``), ids reused after a reset start a new generation
        (``x/y@g``), and disagreements inside the log are collected in :attr:`notices`."""
        self.generation = 1
        self._done: set[str] = set()  # ids of the current generation whose metrics were read
        self.notices: list[tuple[str, str]] = []
        """``(kind, text)`` of disagreements met by the last :meth:`feed` (``from_log`` only);
        the reader takes them, with the line, and clears the list."""
        self.log_format: dict[str, int] = {}
        """Metrics records by the field their compile time came from (:data:`TIME_FIELDS`)."""
        self.log_format_versions: set[int] = set()
        self.null_autograd_ids = False
        self.strings: dict[int, str] = {}
        self.pending: dict[str, _Pending] = {}
        self.compilations: dict[str, Compilation] = {}
        self.sites: dict[str, BreakSite] = {}
        self.torch_version: str | None = None
        self.python_version: str | None = None
        self.unknown_events: dict[str, int] = {}
        self.missing_fields: dict[str, int] = {}
        """Break records that lacked a field (``user_stack``, ``gb_code``, ``location``), by field;
        such a break is still a site, with the fields it has."""
        self._site_ids: dict[str, set[str]] = {}
        self.namer = FrameNamer(cwd or os.getcwd()) if from_log else None
        """Names imported compilations by the rule live capture names its own by (``naming``)."""
        self._paths: dict[str, None] = {}  # the files a log names in its stacks and graphs (import)
        self._breaks: dict[str, ParsedBreak] = {}
        """Break payloads read, by text: every recompile of a frame breaks at the same statement
        again and writes the same payload, which is read once (at most :data:`BREAKS_KEPT`)."""

    def feed(self, meta: dict[str, Any], payload: str | None, t_ns: int | None = None) -> None:
        key = event_key(meta)
        if key is None:
            return
        value = meta.get(key)
        if key == "str":
            if isinstance(value, list) and len(value) == 2 and isinstance(value[1], int):
                self.strings[value[1]] = str(value[0])
            return
        cid = compile_id_of(meta, self.from_log)
        if self.from_log:
            if not self.null_autograd_ids and "compiled_autograd_id" in meta and meta["compiled_autograd_id"] is None:
                self.null_autograd_ids = True
            if cid is not None:
                if key == "dynamo_start" and cid in self._done and not meta.get("attempt"):
                    # frame ids start again at 0 after torch._dynamo.reset(): a new generation
                    self.generation += 1
                    self._done = set()
                if self.generation > 1:
                    cid = f"{cid}@{self.generation}"
        if key == "dynamo_start":
            if cid is None:
                return
            p = self.pending.setdefault(cid, _Pending())
            if isinstance(value, dict):
                stack = value.get("stack") or []
                if stack and isinstance(stack[-1], dict):
                    top = stack[-1]
                    fn = top.get("filename")
                    path = self.strings.get(fn, str(fn)) if isinstance(fn, int) else str(fn or "")
                    p.file = normalize_path(path, self.cwd)
                    p.line = int(top.get("line") or 0)
                    p.frame_name = str(top.get("name") or "")
                    if self.from_log:
                        p.main_files = self._main_files(stack) or p.main_files
            if not p.started:
                p.started = True
                if self.sink is not None:
                    self.sink.on_compile_start(cid, t_ns)
        elif key == "dynamo_output_graph":
            if cid is not None:
                p = self.pending.setdefault(cid, _Pending())
                raw_attempt = meta.get("attempt")
                attempt = raw_attempt if isinstance(raw_attempt, int) else 0
                if attempt > p.graph_attempt:
                    # A restart after the graph was output (TensorifyScalarRestartAnalysis) throws
                    # that graph away: only the last attempt's graphs reach the backend.
                    p.graphs, p.graph_attempt = 0, attempt
                p.graphs += 1
                if attempt == p.graph_attempt and payload and self.from_log:
                    if p.graphs == 1:
                        p.graph_frames = []
                    frames = graph_frames(payload)
                    p.graph_frames.append(frames)
                    self._paths.update(dict.fromkeys(f for f, _, _ in frames))
        elif key == "artifact":
            name = value.get("name") if isinstance(value, dict) else None
            if cid is None or not isinstance(name, str):
                return
            p = self.pending.setdefault(cid, _Pending())
            if name == "dynamo_graph_break_reason" and payload:
                pb = self._breaks.get(payload)
                if pb is None:
                    if len(self._breaks) >= BREAKS_KEPT:
                        self._breaks.clear()
                    pb = self._breaks[payload] = parse_break_reason(payload, self.cwd, self.hints)
                site = self._site(pb, cid)
                if site.site_id not in p.site_ids:
                    p.site_ids.append(site.site_id)
            elif name == "recompile_reasons":
                p.failed_guards.extend(parse_recompile_reasons(payload, self.cwd))
            else:
                m = _CACHE_ARTIFACT.match(name)
                if m:
                    reason = _bypass_reason(payload, self.cwd) if m.group(2) == "bypass" else None
                    if m.group(1) == "fx_graph":
                        p.fx_cache = m.group(2)
                        p.fx_bypass = reason or p.fx_bypass
                    else:
                        p.aot_cache = m.group(2)
                        p.aot_bypass = reason or p.aot_bypass
        elif key == "optimize_ddp_split_child":
            if cid is not None:  # one per submodule DDPOptimizer split the graph into
                p = self.pending.setdefault(cid, _Pending())
                p.ddp_splits = (p.ddp_splits or 0) + 1
        elif key == "dynamo_cpp_guards_str":
            if cid is not None and payload:  # the entry's guard tree: its checks by group
                p = self.pending.setdefault(cid, _Pending())
                p.guard_checks = group_guards(payload)
                if self.from_log:
                    p.self_class = self_class(payload)
        elif key == "compilation_metrics":
            if isinstance(value, dict):
                self._finish(value, cid, t_ns)
        elif key in IGNORED_EVENTS:
            return
        else:
            self.unknown_events[key] = self.unknown_events.get(key, 0) + 1

    def _duration(self, m: dict[str, Any]) -> int | None:
        """The frame's compile time from the newest field the record has (:data:`TIME_FIELDS`)."""
        for layout, name, unit in TIME_FIELDS:
            ns = _ns(m.get(name), unit)
            if ns is not None:
                self.log_format[layout] = self.log_format.get(layout, 0) + 1
                return ns
        return None

    def _site(self, pb: ParsedBreak, cid: str) -> BreakSite:
        new = pb.site
        sid = new.site_id
        prev = self.sites.get(sid)
        # the site is replaced below; only a sink may still hold the one it replaces
        cids = [] if prev is None else list(prev.compile_ids) if self.sink is not None else prev.compile_ids
        seen = self._site_ids.setdefault(sid, set())  # == set(cids): a long log names a site often
        if cid not in seen:
            seen.add(cid)
            if not cids or compile_frame_index(cid) >= compile_frame_index(cids[-1]):
                cids.append(cid)  # where insort would put it: ids mostly come in order
            else:
                bisect.insort(cids, cid, key=compile_frame_index)
        for name in pb.missing:
            self.missing_fields[name] = self.missing_fields.get(name, 0) + 1
        if prev is None:
            site = msgspec.structs.replace(new, compile_ids=cids)
        elif len(prev.user_stack) > len(new.user_stack):
            # the same statement seen with more detail before: keep that, add what is new
            site = msgspec.structs.replace(
                prev, compile_ids=cids, frame_skipped=prev.frame_skipped or new.frame_skipped
            )
        else:  # this record's fields, and the earlier one's where this one lacks them
            site = msgspec.structs.replace(
                new,
                compile_ids=cids,
                gb_code=new.gb_code or prev.gb_code,
                gb_type=new.gb_type or prev.gb_type,
                reason=new.reason or prev.reason,
                frame_skipped=new.frame_skipped or prev.frame_skipped,
                hint_classes=new.hint_classes or prev.hint_classes,
                chained=new.chained or prev.chained,
            )
        self.sites[sid] = site
        if self.sink is not None:
            self.sink.on_site(site)
        return site

    def _main_files(self, stack: list[Any]) -> list[str]:
        """The files of a ``dynamo_start`` stack's module-level frames, innermost first: the script
        run as ``__main__`` is one (a launcher's, ``runpy``'s, an importing module's are others)."""
        out = []
        for f in reversed(stack):
            if isinstance(f, dict) and f.get("name") == "<module>":
                fn = f.get("filename")
                path = self.strings.get(fn, str(fn)) if isinstance(fn, int) else str(fn or "")
                if path:
                    out.append(path)
        return out

    def _user_frame(self, comp: Compilation, p: _Pending) -> Frame | None:
        """The frame reports name for an imported compilation: the rule live capture names its own
        by (:class:`.naming.FrameNamer`), fed with what the log kept of its graphs."""
        assert self.namer is not None
        module = None
        if p.self_class is not None:
            module = trace_module(p.self_class, [*self.strings.values(), *self._paths], p.main_files, self.namer.cwd)
        for frames in p.graph_frames:
            if frames or module is not None:
                self.namer.add_origin(comp.compile_id, trace_origin(frames, module))
        return self.namer.name(comp)

    def _resume_origin(self, raw_name: str, file: str) -> tuple[str | None, int | None]:
        """The break a resume function ``torch_dynamo_resume_in_<fn>_at_<line>`` resumes after,
        and where its frame sits in that break's user stack."""
        m = RESUME_AT.match(raw_name)
        if not m:
            return None, None
        fn, line = m.group(1), int(m.group(2))
        found: tuple[str | None, int | None] = (None, None)
        for s in self.sites.values():
            for depth, f in enumerate(s.user_stack):
                if f.file == file and f.function == fn and f.line == line:
                    if depth == len(s.user_stack) - 1:
                        return s.site_id, depth  # the break itself is in this frame
                    if found[0] is None:
                        found = (s.site_id, depth)
        return found

    def _finish(self, m: dict[str, Any], ctx_cid: str | None, t_ns: int | None) -> None:
        # The record's own id (its envelope) names the compilation, as in tlparse; the id inside
        # the metrics is used only when the record has none.
        mid = _metrics_id(m.get("compile_id"))
        if ctx_cid is None:
            if mid is None or (mid.startswith("!") and not self.from_log):
                return  # compiled autograd (live capture): not a Dynamo frame compilation
            cid = mid if self.generation == 1 else f"{mid}@{self.generation}"
        else:
            cid = ctx_cid
            base = cid.split("@", 1)[0]
            if mid is not None and mid != base and self.from_log:
                self.notices.append((
                    "id_mismatch",
                    f"compilation_metrics names compile id {mid} but its record is {base}: counted as {base}",
                ))
        p = self.pending.pop(cid, None)
        if self.from_log:
            self._done.add(cid.split("@", 1)[0])
            if (p is None or not p.started) and not m.get("fail_type"):
                self.notices.append(("no_start", f"compilation_metrics for {cid} without its dynamo_start"))
        if p is None:
            p = _Pending()
        if isinstance(m.get("log_format_version"), int):
            self.log_format_versions.add(m["log_format_version"])
        if m.get("pytorch_version"):
            self.torch_version = str(m["pytorch_version"])
        if m.get("python_version"):
            self.python_version = str(m["python_version"]).split(" ", 1)[0]
        own = p.site_ids[-1] if p.site_ids else None
        raw_name = str(m.get("co_name") or p.frame_name)
        frame_name = user_function(raw_name)
        file = normalize_path(str(m.get("co_filename") or p.file), self.cwd)
        own_depth = None
        if own is not None:
            own_depth = _depth_in(self.sites[own], file, frame_name)
        if not raw_name or not file:
            # PyTorch leaves the frame unnamed in a recompile-limit record: its frame id's earlier
            # compilations name it.
            x = compile_frame_index(cid)[0]
            known = next((c for c in self.compilations.values() if compile_frame_index(c.compile_id)[0] == x), None)
            if known is not None:
                raw_name = raw_name or known.frame_name
                frame_name = frame_name or known.frame_name
                file = file or known.file
                m = {**m, "co_firstlineno": m.get("co_firstlineno") or known.line}
        resume_site, resume_depth = self._resume_origin(raw_name, file)
        fx_hits = m.get("inductor_fx_local_cache_hit_count") or 0
        fx_miss = m.get("inductor_fx_local_cache_miss_count") or 0
        aot_hits = m.get("aotautograd_local_cache_hit_count") or 0
        aot_miss = m.get("aotautograd_local_cache_miss_count") or 0
        fx_cache = p.fx_cache or ("hit" if fx_hits else ("miss" if fx_miss else None))
        aot_cache = p.aot_cache or ("hit" if aot_hits else ("miss" if aot_miss else None))
        norm = _reasons(self.cwd)
        restart = [norm[str(r)].splitlines()[0] for r in (m.get("restart_reasons") or []) if r]
        guards = list(p.failed_guards)
        if not guards and m.get("recompile_reason"):
            guards = [normalize_text(str(m["recompile_reason"]), self.cwd)]
        status = status_of(m)
        comp = Compilation(
            compile_id=cid,
            frame_name=frame_name,
            file=file,
            line=int(m.get("co_firstlineno") or p.line or 0),
            status=status,
            duration_ns=self._duration(m),
            dynamo_ns=_ns(m.get("dynamo_cumulative_compile_time_us"), _US),
            aot_ns=_ns(m.get("aot_autograd_cumulative_compile_time_us"), _US),
            backend_ns=_ns(m.get("inductor_cumulative_compile_time_us"), _US)
            or _ns(m.get("backend_compile_time_s"), _S),
            graph_count=p.graphs if status == "ok" else 0,
            guard_count=m.get("guard_count") if isinstance(m.get("guard_count"), int) else None,
            guard_latency_ns=_ns(m.get("guard_latency_us"), _US) if status == "ok" else None,
            guard_checks=p.guard_checks if status == "ok" else {},
            fx_cache=fx_cache,  # type: ignore[arg-type]
            aot_cache=aot_cache,  # type: ignore[arg-type]
            failed_guards=guards,
            restart_reasons=restart,
            fail_type=str(m["fail_type"]) if m.get("fail_type") else None,
            fail_reason=normalize_text(str(m["fail_reason"]), self.cwd) if m.get("fail_reason") else None,
            break_site_ids=p.site_ids,
            own_break_site_id=own,
            own_break_depth=own_depth,
            resume_site_id=resume_site,
            resume_depth=resume_depth,
            ddp_split_count=p.ddp_splits,
            backend_compile_ns=_ns(m.get("backend_compile_time_s"), _S),
            inductor_ns=_ns(m.get("inductor_cumulative_compile_time_us"), _US),
            codegen_ns=_ns(m.get("inductor_code_gen_cumulative_compile_time_us"), _US),
            autotune_ns=_ns(m.get("compile_time_autotune_time_us"), _US),
            fx_bypass_reason=p.fx_bypass,
            aot_bypass_reason=p.aot_bypass,
            metrics_absent=sorted({stage for key, stage in STAGE_METRICS.items() if key not in m}),
        )
        if self.namer is not None:
            comp = msgspec.structs.replace(comp, user_frame=self._user_frame(comp, p))
        self.compilations[cid] = comp
        if self.sink is not None:
            self.sink.on_compilation(comp, t_ns)
