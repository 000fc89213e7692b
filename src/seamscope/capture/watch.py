"""Watch mode: a long-running process (a server) observed as a run is, with what compiles after
warm-up reported as it happens (``docs/watch.md``).

After warm-up (a number of calls, or seconds), each recompile, fallback, first compilation of a
frame and new break site is a ``WatchEvent``: to a JSON-lines file, to the ``seamscope`` logger,
and to the metrics sinks (``watch_metrics``: Prometheus, OpenTelemetry). With
``fail_after_warmup="raise"`` a recompile or fallback after warm-up raises
``RecompileAfterWarmup`` from the call that compiled, once it returned.

What it costs per call: nothing in Python. The events come from the compile events the session
already receives (the assembler's sink is teed here); the calls per phase, the break crossings
and the steady-call histogram (counted in C, ``Lane.wall_histogram``, for the calls C sums; the
builder's ``phase_sink`` for the others) are read once per ``sync_every`` seconds at a call
boundary, through the same one-shot ``on_call_end`` callback the checkpoints use.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import os
import re
import threading
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any, Literal

import msgspec

from ..analyze.causes import describe, parse_change
from ..analyze.display import shown
from ..analyze.findings_churn import cause_guards
from ..analyze.findings_common import frame_label, stable_frame
from ..errors import RecompileAfterWarmup, UnusableInput
from ..model.ledger import BreakSite, Compilation
from ..model.watch import COMPILE_BUCKETS_S, STEADY_BUCKETS_S, Histogram, Snapshot, WatchEvent

log = logging.getLogger("seamscope")

DEFAULT_WARMUP = 100
"""Calls of warm-up when none is given."""
MAX_LABELS = 20
"""Distinct frames (and causes) a metric names; the rest are counted as ``other``."""
KEEP_EVENTS = 1000

FailMode = Literal["raise", "log"] | None
_CONTEXT: contextvars.ContextVar[dict[str, str] | None] = contextvars.ContextVar("seamscope_watch_tags", default=None)


class tag:  # noqa: N801 - used as ``seamscope.watch.tag(request_id=...)``, like a function
    """Attach fields to what compiles in this context (a request): ``seamscope.watch.tag(request_id=r)``
    sets them until the context ends (a thread, an asyncio task); ``with seamscope.watch.tag(...):``
    sets them for the block. Events made meanwhile carry them in ``context``."""

    def __init__(self, **fields: object) -> None:
        merged = {**(_CONTEXT.get() or {}), **{k: str(v) for k, v in fields.items()}}
        self._token = _CONTEXT.set(merged)

    def __enter__(self) -> tag:
        return self

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(ValueError):  # reset in another context than the one that set it
            _CONTEXT.reset(self._token)


def current_tags() -> dict[str, str]:
    return dict(_CONTEXT.get() or {})


def parse_warmup(value: object) -> tuple[int | None, float | None]:
    """``100`` / ``"100"``: calls; ``2.5`` / ``"30s"`` / ``"2m"``: seconds → (calls, seconds)."""
    if isinstance(value, bool):
        raise UnusableInput("--warmup: a number of calls (100) or of seconds (30s)")
    if isinstance(value, int):
        if value < 0:
            raise UnusableInput("--warmup: calls, 0 or more")
        return value, None
    if isinstance(value, float):
        if not value >= 0:
            raise UnusableInput("--warmup: seconds, 0 or more")
        return None, value
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(s|m|h|calls?)?\s*", str(value))
    if not m:
        raise UnusableInput(f"--warmup {value}: a number of calls (100) or of seconds (30s, 2m)")
    number, unit = m.group(1), m.group(2)
    if unit in (None, "call", "calls"):
        if "." in number:
            raise UnusableInput(f"--warmup {value}: a whole number of calls, or seconds with s (30s)")
        return int(number), None
    return None, float(number) * {"s": 1, "m": 60, "h": 3600}[unit]


def parse_fail(value: object) -> FailMode:
    if value in (False, None, "", "off", "no"):
        return None
    if value is True or value == "raise":
        return "raise"
    if value == "log":
        return "log"
    raise UnusableInput(f"fail_after_warmup={value!r}: False, 'raise' or 'log'")


class LabelCap:
    """The first ``limit`` distinct values stay themselves, the others become ``other``."""

    def __init__(self, limit: int = MAX_LABELS) -> None:
        self.limit = limit
        self.seen: dict[str, None] = {}

    def __call__(self, value: str) -> str:
        if value in self.seen:
            return value
        if len(self.seen) < self.limit:
            self.seen[value] = None
            return value
        return "other"


class Watcher:
    """Watch one session (``attach`` once it has started, ``detach`` before it stops)."""

    def __init__(
        self,
        warmup: object = DEFAULT_WARMUP,
        *,
        events: str | os.PathLike[str] | None = None,
        fail_after_warmup: object = False,
        sinks: Sequence[Any] = (),
        sync_every: float = 1.0,
        max_labels: int = MAX_LABELS,
    ) -> None:
        self.warmup_calls, self.warmup_s = parse_warmup(warmup)
        self.fail = parse_fail(fail_after_warmup)
        self.events_path = os.fspath(events) if events is not None else None
        self.sinks = list(sinks)
        self.sync_every = sync_every
        self.frames = LabelCap(max_labels)
        self.causes = LabelCap(max_labels)
        self.events: list[WatchEvent] = []
        """The events so far (the first ``KEEP_EVENTS``; ``event_count`` counts them all)."""
        self.event_count = 0
        self.session: Any = None
        self._file: Any = None
        self._lock: Any = None
        """Made in ``attach``, as the stop event: nothing but plain values before."""
        self._t0 = time.monotonic()
        self._compiles: Counter[tuple[str, str]] = Counter()
        self._recompiles: Counter[tuple[str, str, str]] = Counter()
        self._fallbacks: Counter[tuple[str, str, str]] = Counter()
        self._events: Counter[tuple[str, str, str]] = Counter()
        self._sites: dict[str, tuple[str, str]] = {}
        self._graphs = 0
        self._steady = _Acc(STEADY_BUCKETS_S)
        """Steady calls the builder ended (C's are in the lane's histogram)."""
        self._compile = _Acc(COMPILE_BUCKETS_S)
        self._pending: list[WatchEvent] = []
        """Events to raise at the end of the call (``fail_after_warmup="raise"``)."""
        self._armed = False
        self._stopped: Any = None
        self._thread: threading.Thread | None = None
        self._pid = os.getpid()
        self.last: Snapshot | None = None

    # --- lifecycle -----------------------------------------------------------------------------

    def attach(self, session: Any) -> None:
        if session.builder is None or session.assembler is None:
            raise RuntimeError("watch: attach to a session that has started")
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        if self.events_path is not None:
            try:
                self._file = open(self.events_path, "a", encoding="utf-8", buffering=1)  # noqa: SIM115
            except OSError as e:
                raise UnusableInput(f"{self.events_path}: cannot write: {e.strerror or e}") from None
        try:
            for sink in self.sinks:  # a port in use: exit 2 before anything is hooked
                sink.start(self)
        except BaseException:
            self._close_outputs()
            raise
        self.session = session
        self._t0 = time.monotonic()
        _note(session, self)
        session.assembler.sink = _Tee(session.assembler.sink, self)
        session.builder.phase_sink = self._on_phase
        lane = session._lane
        if lane is not None and hasattr(lane, "set_wall_buckets"):
            lane.set_wall_buckets([round(b * 1e9) for b in STEADY_BUCKETS_S])
        if self.sinks and self.sync_every > 0:
            self._thread = threading.Thread(target=self._loop, name="seamscope-watch", daemon=True)
            self._thread.start()

    def _close_outputs(self) -> None:
        """The metrics sinks and the events file closed (a sink that fails to close is let be)."""
        for sink in self.sinks:
            with contextlib.suppress(Exception):
                sink.close()
        if self._file is not None:
            self._file.close()
            self._file = None

    def detach(self) -> None:
        s = self.session
        if s is None:
            return
        self._stopped.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=1.0)
        with contextlib.suppress(ValueError):
            s.on_call_end.remove(self._at_boundary)
        with contextlib.suppress(ValueError):
            s.on_call_end.remove(self._raise_pending)
        try:
            if s.builder is not None and not s.builder.in_call:
                self.sync()
        finally:
            if s.assembler is not None and isinstance(s.assembler.sink, _Tee):
                s.assembler.sink = s.assembler.sink.inner
            if s.builder is not None:
                s.builder.phase_sink = None
            if s._lane is not None and hasattr(s._lane, "set_wall_buckets"):
                s._lane.set_wall_buckets(())
            self._close_outputs()
            self.session = None

    # --- warm-up -------------------------------------------------------------------------------

    def warmed_up(self, call_index: int | None = None) -> bool:
        if self.warmup_s is not None:
            return time.monotonic() - self._t0 >= self.warmup_s
        if call_index is None:
            b = self.session.builder if self.session is not None else None
            call_index = b.call_count if b is not None else 0
        return call_index >= (self.warmup_calls or 0)

    # --- compile events (teed from the session's assembler) -------------------------------------

    def on_compilation(self, compilation: Compilation) -> None:
        b = self.session.builder
        c = b.compilation(compilation.compile_id) or compilation
        index = c.call_index if c.call_index is not None else b.current_call_index
        after = self.warmed_up(index)
        stage = "serving" if after else "warmup"
        frame = self.frames(frame_label(stable_frame(c.frame_name), c.file, c.line, c.user_frame))
        if c.duration_ns is not None:
            self._compile.add(c.duration_ns / 1e9)
        if c.status == "ok":
            self._compiles[(frame, stage)] += 1
            self._graphs += c.graph_count
        change = parse_change(c.failed_guards, c.status)
        cause = self.causes(change.family)
        if c.is_recompile:
            self._recompiles[(frame, cause, stage)] += 1
        if c.status != "ok":
            fcause = self.causes("recompile_limit" if c.status == "fallback" else c.status)
            self._fallbacks[(frame, fcause, stage)] += 1
        kind: Any = None
        if c.status != "ok":
            kind, cause = "fallback", ("recompile_limit" if c.status == "fallback" else c.status)
            detail = (c.fail_reason or c.fail_type or describe(change)).splitlines()[0][:300]
        elif c.is_recompile:
            kind, detail = "recompile", describe(change)
        elif c.graph_count > 0:
            kind, cause, detail = "graph", "new_frame", f"{c.graph_count} graph(s)"
        if after and kind is not None:
            guard = next(iter(cause_guards(c.failed_guards)), None)  # the one rule (analyze.findings_churn)
            shown_name, shown_file, shown_line = c.shown_frame
            self._emit(WatchEvent(
                kind=kind, frame=frame_label(stable_frame(shown_name), shown_file, shown_line), file=shown_file,
                line=shown_line, cause=cause, detail=detail, failed_guard=guard, compile_id=c.compile_id,
                call_index=index, compile_ns=c.duration_ns, **self._when()))
        self.sync()

    def on_site(self, site: BreakSite) -> None:
        new = site.site_id not in self._sites
        frame = self.frames(frame_label(site.scope or site.function, site.file, site.line))
        cause = self.causes(site.gb_type or "other")
        self._sites[site.site_id] = (frame, cause)
        b = self.session.builder
        index = b.current_call_index
        if new and self.warmed_up(index):
            self._emit(WatchEvent(
                kind="break", frame=frame_label(site.scope or site.function, site.file, site.line), file=site.file,
                line=site.line, cause=site.gb_type or "other", detail=(site.reason or "").splitlines()[0][:300]
                if site.reason else "", site_id=site.site_id, call_index=index, **self._when()))

    def _when(self) -> dict[str, Any]:
        return {"unix_time": time.time(), "since_start_s": round(time.monotonic() - self._t0, 6),
                "context": current_tags(), "pid": os.getpid()}

    def _emit(self, ev: WatchEvent) -> None:
        with self._lock:
            self.event_count += 1
            if len(self.events) < KEEP_EVENTS:
                self.events.append(ev)
            self._events[(ev.kind, self.frames(ev.frame), self.causes(ev.cause))] += 1
            if self._file is not None:
                with contextlib.suppress(OSError, ValueError):
                    self._file.write(json.dumps(msgspec.to_builtins(ev), ensure_ascii=False) + "\n")
        failing = self.fail is not None and ev.kind in ("recompile", "fallback")
        level = logging.ERROR if failing and self.fail == "log" else logging.WARNING
        # user strings (frames, guards, tags) are data: control characters shown, never emitted
        log.log(level, "seamscope: %s", shown(ev.line_text(), None), extra={"seamscope_event": msgspec.to_builtins(ev)})
        if failing and self.fail == "raise":
            self._pending.append(ev)
            s = self.session
            if self._raise_pending not in s.on_call_end:
                s.on_call_end.append(self._raise_pending)

    def _raise_pending(self, session: Any) -> None:
        """At the end of the call that compiled: raise its first event (the call's result is
        lost; the server catches it, as it would torch's ``fail_on_recompile``)."""
        with contextlib.suppress(ValueError):
            session.on_call_end.remove(self._raise_pending)
        if not self._pending or os.getpid() != self._pid:
            return
        ev, self._pending = self._pending[0], []
        raise RecompileAfterWarmup(ev, f"seamscope: {shown(ev.line_text(), None)}")

    # --- the counts ------------------------------------------------------------------------------

    def _on_phase(self, phase: str, wall_ns: int) -> None:
        if phase == "steady":
            self._steady.add(wall_ns / 1e9)

    def snapshot(self) -> Snapshot:
        """The counts so far: between calls, or inside a call the builder holds."""
        s = self.session
        b = s.builder
        phases, crossings_by_site = b.running_counts()
        counts, total = list(self._steady.counts), self._steady.total
        lane = s._lane
        if lane is not None and hasattr(lane, "wall_histogram"):
            in_c, total_ns = lane.wall_histogram()
            if len(in_c) == len(counts):
                counts = [a + c for a, c in zip(counts, in_c, strict=True)]
                total += total_ns / 1e9
        steady = Histogram(STEADY_BUCKETS_S, tuple(counts), total)
        crossings: Counter[tuple[str, str]] = Counter()
        for sid, n in crossings_by_site.items():
            labels = self._sites.get(sid)
            if labels is not None and n:
                crossings[labels] += n
        snap = Snapshot(
            calls={p: n for p, n in phases.items()}, compiles=dict(self._compiles), recompiles=dict(self._recompiles),
            fallbacks=dict(self._fallbacks), break_crossings=dict(crossings), watch_events=dict(self._events),
            graphs=self._graphs,
            steady=steady, compile=self._compile.frozen(),
            warmed_up=self.warmed_up(),
        )
        self.last = snap
        return snap

    def sync(self) -> None:
        """Hand the counts to the sinks now (between calls, or from a compile event)."""
        if not self.sinks or self.session is None or os.getpid() != self._pid:
            return
        snap = self.snapshot()
        for sink in self.sinks:
            try:
                sink.sync(snap)
            except Exception as e:  # a metrics failure must not fail the user's call
                log.warning("seamscope: watch: %s could not take the counts: %s", type(sink).__name__, e)

    def _at_boundary(self, session: Any) -> None:
        with contextlib.suppress(ValueError):
            session.on_call_end.remove(self._at_boundary)
        self._armed = False
        b = session.builder
        if session.active and b is not None and not b.in_call:
            self.sync()

    def _loop(self) -> None:
        while not self._stopped.wait(self.sync_every):
            s = self.session
            if s is None:
                return
            if not self._armed:
                self._armed = True
                s.on_call_end.append(self._at_boundary)


class _Acc:
    """A histogram being filled (``Histogram`` is what the sinks read)."""

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.total = 0.0

    def add(self, value: float) -> None:
        self.counts[Histogram.bucket(self.bounds, value)] += 1
        self.total += value

    def frozen(self) -> Histogram:
        return Histogram(self.bounds, tuple(self.counts), self.total)


class _Tee:
    """The assembler's sink: the session first (it records), then the watcher (it reports)."""

    def __init__(self, inner: Any, watcher: Watcher) -> None:
        self.inner = inner
        self.watcher = watcher

    def on_compile_start(self, compile_id: str, t_ns: int | None) -> None:
        self.inner.on_compile_start(compile_id, t_ns)

    def on_compilation(self, compilation: Compilation, t_ns: int | None) -> None:
        self.inner.on_compilation(compilation, t_ns)
        try:
            self.watcher.on_compilation(compilation)
        except Exception as e:  # never break Dynamo's logging; the run goes on
            log.warning("seamscope: watch: %s: %s", type(e).__name__, e)

    def on_site(self, site: BreakSite) -> None:
        self.inner.on_site(site)
        try:
            self.watcher.on_site(site)
        except Exception as e:
            log.warning("seamscope: watch: %s: %s", type(e).__name__, e)


# --- the public entry: seamscope.watch(...) ------------------------------------------------------


class Watch:
    """``with seamscope.watch(warmup=100, events="events.jsonl", metrics_port=9464) as w:``
    observes every ``torch.compile`` inside (a ``Session``) and watches it (a ``Watcher``)."""

    def __init__(self, out: str | os.PathLike[str] | None, watcher: Watcher, session_kwargs: dict[str, Any]) -> None:
        from .session import Session

        self.session = Session(out, **session_kwargs)
        self.watcher = watcher

    @property
    def events(self) -> list[WatchEvent]:
        return self.watcher.events

    def __enter__(self) -> Watch:
        self.session.__enter__()
        try:
            self.watcher.attach(self.session)
        except BaseException:
            self.session.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        try:
            self.watcher.detach()
        finally:
            self.session.__exit__(exc_type, exc, tb)


def watch(
    out: str | os.PathLike[str] | None = None,
    *,
    warmup: object = DEFAULT_WARMUP,
    events: str | os.PathLike[str] | None = None,
    fail_after_warmup: object = False,
    metrics_port: int | str | None = None,
    prometheus_registry: Any = None,
    otel_meter_provider: Any = None,
    sync_every: float = 1.0,
    **session_kwargs: Any,
) -> Watch:
    """Watch the process from here on: ``warmup`` calls (an int, ``"100"``) or seconds (a float,
    ``"30s"``), then every recompile, fallback, new graph and new break site is an event (to
    ``events``, a JSON-lines file; to the ``seamscope`` logger; to the metrics).
    ``metrics_port``: serve Prometheus metrics there (``"0.0.0.0:9464"`` to listen beyond this
    machine); ``prometheus_registry``: register them there instead of serving;
    ``otel_meter_provider``: also record them through OpenTelemetry (``True``: the global one).
    ``fail_after_warmup``: ``"raise"`` (``True``) raises ``RecompileAfterWarmup`` from the call
    that recompiled after warm-up; ``"log"`` logs it at ERROR. ``out``: a receipt written there
    at the end and checkpointed every ``checkpoint_every`` seconds."""
    from .watch_metrics import make_sinks

    sinks = make_sinks(metrics_port, prometheus_registry, otel_meter_provider)
    w = Watcher(warmup, events=events, fail_after_warmup=fail_after_warmup, sinks=sinks, sync_every=sync_every)
    return Watch(out, w, session_kwargs)


watch.tag = tag  # type: ignore[attr-defined]


class WithWatch:
    """A run's setup (``runner.run_target``; a remedy plan or None inside) that watches it."""

    def __init__(self, inner: Any, watcher: Watcher) -> None:
        self.inner = inner
        self.watcher = watcher

    def needs_transform(self) -> bool:
        return self.inner is not None and bool(self.inner.needs_transform())

    def transform(self, tree: Any) -> Any:
        return self.inner.transform(tree)

    def setup(self, session: Any) -> Any:
        self.watcher.attach(session)
        try:
            inner_finish = self.inner.setup(session) if self.inner is not None else None
        except BaseException:
            self.watcher.detach()
            raise

        def finish() -> None:
            try:
                if inner_finish is not None:
                    inner_finish()
            finally:
                self.watcher.detach()

        return finish


def _note(session: Any, watcher: Watcher) -> None:
    """The receipt's decision records the warm-up (``summary`` and ``report`` list what compiled
    after it, ``analyze.watch_view``); its checkpoints too."""
    from ..model.receipt import Decision
    from ..model.watch import parse_warmup_policy, warmup_policy

    d = session.decision or Decision()
    if parse_warmup_policy(d.warmup_policy) is None:
        policy = f"{d.warmup_policy}; {warmup_policy(watcher.warmup_calls, watcher.warmup_s)}"
        session.decision = msgspec.structs.replace(d, warmup_policy=policy)
