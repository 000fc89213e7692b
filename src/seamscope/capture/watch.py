"""Watch mode: a long-running process (a server) observed as a run is, with what compiles after
warm-up reported as it happens (``docs/watch.md``).

After warm-up (a number of calls, or seconds), each recompile, fallback, first compilation of a
frame and new break site is a ``WatchEvent``: to a JSON-lines file, to the ``seamscope`` logger,
and to the metrics sinks (``watch_metrics``: Prometheus, OpenTelemetry). With
``fail_after_warmup="raise"`` a recompile or fallback after warm-up raises
``RecompileAfterWarmup`` from the call that compiled, once it returned: the compile event arrives
on the thread that compiles, so the event waits for the end of that thread's call (an observed
call's ``on_call_end``, or ``Session.foreign_exit`` for a call made while another thread's call
was open), never another's.

What it costs per call: nothing in Python. The events come from the compile events the session
already receives (the assembler's sink is teed here); the calls per phase, the break crossings
and the steady-call histogram (counted in C, ``Lane.wall_histogram``, for the calls C sums; the
builder's ``phase_sink`` for the others) are read when a metrics reader asks (``current``: a
Prometheus scrape, an OpenTelemetry collection), while no call is open; during a call, at its end.

The counts the builder keeps are read only while this thread holds the session's open-call slot
(``Session._claim``): no call is open then, and none can open (a call that starts in those tens
of microseconds runs unobserved, counted as a call on another thread). Only that read
(``_read``) holds it; the snapshot is made from it afterwards.
"""

from __future__ import annotations

import contextlib
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
from ..analyze.findings_churn import cause_guards
from ..analyze.findings_common import frame_label, stable_frame
from ..analyze.units import parse_duration
from ..errors import RecompileAfterWarmup, UnusableInput
from ..model.ledger import BreakSite, Compilation
from ..model.watch import (
    COMPILE_BUCKETS_S,
    FALLBACK_CAUSES,
    PHASES,
    RECOMPILE_CAUSES,
    STEADY_BUCKETS_S,
    Histogram,
    Snapshot,
    WatchEvent,
)
from .watch_text import current_tags, frame_key, log_line, log_text, open_events, tag

log = logging.getLogger("seamscope")

FailMode = Literal["raise", "log"] | None

DEFAULT_WARMUP = 100
"""Calls of warm-up when none is given."""
MAX_LABELS = 20
"""Distinct frames (and causes) a metric names; the rest are counted as ``other``."""
KEEP_EVENTS = 1000


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
    text = str(value)
    calls = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(?:calls?)?\s*", text)
    if calls is not None:
        if "." in calls.group(1):
            raise UnusableInput(f"--warmup {value}: a whole number of calls, or seconds with s (30s)")
        return int(calls.group(1)), None
    seconds = parse_duration(text, unit_required=True)
    if seconds is None:
        raise UnusableInput(f"--warmup {value}: a number of calls (100) or of seconds (30s, 2m)")
    return None, seconds


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
        on_serving: Any = None,
    ) -> None:
        self.warmup_calls, self.warmup_s = parse_warmup(warmup)
        self.fail = parse_fail(fail_after_warmup)
        self.events_path = os.fspath(events) if events is not None else None
        self.sinks = list(sinks)
        self.sync_every = sync_every
        self.on_serving = on_serving
        """Told the metrics address once it is bound (the CLI prints it)."""
        self.frames = LabelCap(max_labels)
        self.causes = LabelCap(max_labels)
        for cause in (*RECOMPILE_CAUSES, *FALLBACK_CAUSES):  # the known causes keep their names
            self.causes(cause)
        self.events: list[WatchEvent] = []
        """The events so far (the first ``KEEP_EVENTS``; ``event_count`` counts them all)."""
        self.event_count = 0
        self.events_unwritten = 0
        """Events the events file did not take (it failed: the warning says why, once)."""
        self.events_error: str | None = None
        self.session: Any = None
        self.metrics_url: str | None = None
        """``http://ADDR:PORT/metrics`` once served (the port bound, where 0 was asked for)."""
        self._fd: int | None = None
        self._lock: Any = None
        """Made in ``attach``, as the stop event: nothing but plain values before."""
        self._t0 = time.monotonic()
        self._compiles: Counter[tuple[str, str]] = Counter()
        self._recompiles: Counter[tuple[str, str, str]] = Counter()
        self._fallbacks: Counter[tuple[str, str, str]] = Counter()
        self._events: Counter[tuple[str, str, str]] = Counter()
        self._sites: dict[str, tuple[str, str]] = {}
        self._keys: dict[tuple[str, str, int], str] = {}
        self._where: dict[str, tuple[str, int]] = {}
        """``frame`` label → the file and line it was first compiled at."""
        self._warm_frames: dict[str, None] = {}
        """The frames compiled during warm-up: their series exist at 0 from the end of warm-up."""
        self._graphs = 0
        self._steady = _Acc(STEADY_BUCKETS_S)
        """Steady calls the builder ended (C's are in the lane's histogram)."""
        self._compile = _Acc(COMPILE_BUCKETS_S)
        self._pending: dict[int, WatchEvent] = {}
        """Thread → the first event to raise at the end of its call (``fail_after_warmup="raise"``)."""
        self._armed = False
        self._stopped: Any = None
        self._thread: threading.Thread | None = None
        self._pid = os.getpid()
        self._taken = 0.0
        self.last: Snapshot | None = None

    # --- lifecycle -----------------------------------------------------------------------------

    def attach(self, session: Any) -> None:
        if session.builder is None or session.assembler is None:
            raise RuntimeError("watch: attach to a session that has started")
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        if self.events_path is not None:
            self._fd = open_events(self.events_path)
        try:
            for sink in self.sinks:  # a port in use: exit 2 before anything is hooked
                sink.start(self)
                url = getattr(sink, "url", None)
                if url is not None:
                    self.metrics_url = url
        except BaseException:
            self._close_outputs()
            raise
        self.session = session
        self._t0 = time.monotonic()
        _note(session, self)
        if self.metrics_url is not None and self.on_serving is not None:
            self.on_serving(self.metrics_url)
        session.assembler.sink = _Tee(session.assembler.sink, self)
        session.builder.phase_sink = self._on_phase
        lane = session._lane
        if lane is not None and hasattr(lane, "set_wall_buckets"):
            lane.set_wall_buckets([round(b * 1e9) for b in STEADY_BUCKETS_S])
        if self.fail == "raise":
            session.set_foreign_exit(self._raise_foreign)
        if any(getattr(sink, "pushed", False) for sink in self.sinks) and self.sync_every > 0:
            self._thread = threading.Thread(target=self._loop, name="seamscope-watch", daemon=True)
            self._thread.start()

    def _close_outputs(self) -> None:
        """The metrics sinks and the events file closed (a sink that fails to close is let be)."""
        for sink in self.sinks:
            with contextlib.suppress(Exception):
                sink.close()
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None

    def detach(self) -> None:
        s = self.session
        if s is None:
            return
        self._stopped.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=1.0)
        for cb in (self._at_boundary, self._raise_pending):
            with contextlib.suppress(ValueError):
                s.on_call_end.remove(cb)
        if s.foreign_exit == self._raise_foreign:
            s.set_foreign_exit(None)
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
            if self.events_error is not None:
                s.warnings.append(
                    f"--events {self.events_path}: {self.events_error}: {self.events_unwritten} of "
                    f"{self.event_count} events not written (the receipt's after-warm-up timeline lists them)")
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

    # --- the frame label -----------------------------------------------------------------------

    def frame_key(self, name: str, file: str, line: int, qualname: str | None = None, where: bool = True) -> str:
        """The ``frame`` label: module and qualified name (``server.Net.forward``), the same when
        lines move (a library upgrade); ``file:line`` goes to ``frames`` (the info metric)."""
        got = self._keys.get((name, file, line))
        if got is None:
            got = self._keys[(name, file, line)] = frame_key(name, file, line, self._root(), qualname)
        label = self.frames(got)
        if where and label != "other":
            self._where.setdefault(label, (file, line))
        return label

    def _root(self) -> str:
        s = self.session
        return str(getattr(s, "cwd", None) or os.getcwd())

    # --- compile events (teed from the session's assembler) -------------------------------------

    def on_compilation(self, compilation: Compilation) -> None:
        b = self.session.builder
        c = b.compilation(compilation.compile_id) or compilation
        index = c.call_index if c.call_index is not None else b.current_call_index
        after = self.warmed_up(index)
        stage = "serving" if after else "warmup"
        shown_name, shown_file, shown_line = c.shown_frame
        frame = self.frame_key(shown_name, shown_file, shown_line)
        change = parse_change(c.failed_guards, c.status)
        kind: Any = None
        cause = self.causes(change.family)
        if c.status != "ok":
            kind, cause = "fallback", ("recompile_limit" if c.status == "fallback" else c.status)
            detail = (c.fail_reason or c.fail_type or describe(change)).splitlines()[0][:300]
        elif c.is_recompile:
            kind, detail = "recompile", describe(change)
        elif c.graph_count > 0:
            kind, cause, detail = "graph", "new_frame", f"{c.graph_count} graph(s)"
        with self._lock:
            if c.duration_ns is not None:
                self._compile.add(c.duration_ns / 1e9)
            if c.status == "ok":
                self._compiles[(frame, stage)] += 1
                self._graphs += c.graph_count
                if not after:
                    self._warm_frames[frame] = None
            if c.is_recompile:
                self._recompiles[(frame, self.causes(change.family), stage)] += 1
            if c.status != "ok":
                self._fallbacks[(frame, self.causes(cause), stage)] += 1
        if after and kind is not None:
            guard = next(iter(cause_guards(c.failed_guards)), None)  # the one rule (analyze.findings_churn)
            self._emit(WatchEvent(
                kind=kind, frame=frame_label(stable_frame(shown_name), shown_file, shown_line), qualname=frame,
                file=shown_file, line=shown_line, cause=cause, detail=detail, failed_guard=guard,
                compile_id=c.compile_id, call_index=index, compile_ns=c.duration_ns, **self._when()))
        self.sync()

    def on_site(self, site: BreakSite) -> None:
        new = site.site_id not in self._sites
        frame = self.frame_key(site.function, site.file, site.line, site.scope or None, where=False)
        cause = self.causes(site.gb_type or "other")
        self._sites[site.site_id] = (frame, cause)
        b = self.session.builder
        index = b.current_call_index
        if new and self.warmed_up(index):
            detail = site.reason.splitlines()[0][:300] if site.reason else ""
            self._emit(WatchEvent(
                kind="break", frame=frame_label(site.scope or site.function, site.file, site.line), qualname=frame,
                file=site.file, line=site.line, cause=site.gb_type or "other", detail=detail, site_id=site.site_id,
                call_index=index, **self._when()))

    def _when(self) -> dict[str, Any]:
        return {"unix_time": time.time(), "since_start_s": round(time.monotonic() - self._t0, 6),
                "context": current_tags(), "pid": os.getpid()}

    def _emit(self, ev: WatchEvent) -> None:
        child = os.getpid() != self._pid  # a forked child: its events say so (their pid)
        if child:
            self._lock = threading.Lock()  # the parent's may have been held by a thread the fork left behind
        with self._lock:
            self.event_count += 1
            if len(self.events) < KEEP_EVENTS:
                self.events.append(ev)
            self._events[(ev.kind, ev.qualname or self.frames(ev.frame), self.causes(ev.cause))] += 1
            self._write(ev)
        failing = self.fail is not None and ev.kind in ("recompile", "fallback")
        level = logging.ERROR if failing and self.fail == "log" else logging.WARNING
        line = log_line(ev, ev.pid if child else None)
        log.log(level, "%s", line, extra={"seamscope_event": msgspec.to_builtins(ev)})
        if failing and self.fail == "raise":
            self._pending.setdefault(threading.get_ident(), ev)
            s = self.session
            if self._raise_pending not in s.on_call_end:
                s.on_call_end.append(self._raise_pending)

    def _write(self, ev: WatchEvent) -> None:
        """One line to the events file; a file that fails is said once (a warning) and let be:
        the events stay in ``events`` and the receipt."""
        if self._fd is None:
            if self.events_error is not None:
                self.events_unwritten += 1
            return
        data = (json.dumps(msgspec.to_builtins(ev), ensure_ascii=False) + "\n").encode("utf-8", "replace")
        try:
            while data:  # unbuffered, appended: a forked child's line cannot interleave a half line
                data = data[os.write(self._fd, data):]
        except OSError as e:
            self.events_error = e.strerror or str(e)
            self.events_unwritten += 1
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None
            log.warning("seamscope: watch: --events %s: cannot write: %s; events from here on are logged and "
                        "listed in the receipt only", log_text(self.events_path or ""), self.events_error)

    def _raise_pending(self, session: Any) -> None:
        """At the end of an observed call: raise what this thread's call compiled (the call's
        result is lost; the server catches it, as it would torch's ``fail_on_recompile``)."""
        ev = self._pending.pop(threading.get_ident(), None)
        if not self._pending:
            with contextlib.suppress(ValueError):
                session.on_call_end.remove(self._raise_pending)
        if ev is not None:
            raise RecompileAfterWarmup(ev, log_line(ev))

    def _raise_foreign(self) -> None:
        """At the end of a call made while another thread's call was open (``foreign_exit``)."""
        ev = self._pending.pop(threading.get_ident(), None)
        if ev is not None:
            raise RecompileAfterWarmup(ev, log_line(ev))

    # --- the counts ------------------------------------------------------------------------------

    def _on_phase(self, phase: str, wall_ns: int) -> None:
        if phase == "steady":
            self._steady.add(wall_ns / 1e9)

    def _read(self) -> tuple[dict[str, int], dict[str, int], list[int], float]:
        """What the builder and the lane counted (the part read while the call slot is held)."""
        s = self.session
        phases, crossings_by_site = s.builder.running_counts()
        counts, total = list(self._steady.counts), self._steady.total
        lane = s._lane
        if lane is not None and hasattr(lane, "wall_histogram"):
            in_c, total_ns = lane.wall_histogram()
            if len(in_c) == len(counts):
                counts = [a + c for a, c in zip(counts, in_c, strict=True)]
                total += total_ns / 1e9
        return phases, crossings_by_site, counts, total

    def _compose(self, phases: dict[str, int], crossings_by_site: dict[str, int], counts: list[int],
                 total: float) -> Snapshot:
        steady = Histogram(STEADY_BUCKETS_S, tuple(counts), total)
        crossings: Counter[tuple[str, str]] = Counter()
        for sid, n in crossings_by_site.items():
            labels = self._sites.get(sid)
            if labels is not None and n:
                crossings[labels] += n
        warm = self.warmed_up()
        with self._lock:
            compiles, recompiles = dict(self._compiles), dict(self._recompiles)
            fallbacks, events = dict(self._fallbacks), dict(self._events)
            frames, where = list(self._warm_frames), dict(self._where)
            graphs, compile_h = self._graphs, self._compile.frozen()
        calls = dict(phases)
        if warm:  # every series known before serving, at 0: increase() and rate() see the first event
            for p in PHASES:
                calls.setdefault(p, 0)
            for f in frames:
                compiles.setdefault((f, "serving"), 0)
                for cause in (*RECOMPILE_CAUSES, "recompile_limit"):
                    recompiles.setdefault((f, cause, "serving"), 0)
                for cause in RECOMPILE_CAUSES:
                    events.setdefault(("recompile", f, cause), 0)
                for cause in FALLBACK_CAUSES:
                    fallbacks.setdefault((f, cause, "serving"), 0)
                    events.setdefault(("fallback", f, cause), 0)
        snap = Snapshot(
            calls=calls, compiles=compiles, recompiles=recompiles, fallbacks=fallbacks,
            break_crossings=dict(crossings), watch_events=events, graphs=graphs, steady=steady, compile=compile_h,
            warmed_up=warm, frames=where)
        self.last = snap
        self._taken = time.monotonic()
        return snap

    def current(self, max_age: float = 0.0) -> Snapshot | None:
        """The counts now, for a metrics reader on any thread: read at once while no call is open
        (the session's call slot held meanwhile); during a call, the last ones, and the end of that
        call reads them again. ``max_age``: the last ones if they are that fresh (seconds)."""
        if self.last is not None and max_age > 0 and time.monotonic() - self._taken <= max_age:
            return self.last
        return self.refresh()

    def refresh(self) -> Snapshot | None:
        s = self.session
        if s is None or os.getpid() != self._pid or not s.active or s.builder is None:
            return self.last
        if not s._claim():  # a call is open: its end takes the counts
            self._arm()
            return self.last
        try:
            read = self._read()
        finally:
            s._release()
        snap = self._compose(*read)
        for sink in self.sinks:
            if getattr(sink, "pushed", False):
                try:
                    sink.sync(snap)
                except Exception as e:  # a metrics failure must not fail the user's call
                    log.warning("seamscope: watch: %s could not take the counts: %s", type(sink).__name__, e)
        return snap

    def sync(self) -> None:
        """Take the counts now (between calls; in a call, at its end) and hand them to the sinks
        that keep values of their own (prometheus_client's multiprocess mode)."""
        if self.sinks:
            self.refresh()

    def _arm(self) -> None:
        s = self.session
        if not self._armed and s is not None:
            self._armed = True
            s.on_call_end.append(self._at_boundary)

    def _at_boundary(self, session: Any) -> None:
        with contextlib.suppress(ValueError):
            session.on_call_end.remove(self._at_boundary)
        self._armed = False
        self.refresh()

    def _loop(self) -> None:
        while not self._stopped.wait(self.sync_every):
            if self.session is None:
                return
            self.refresh()


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

    @property
    def metrics_url(self) -> str | None:
        """``http://127.0.0.1:PORT/metrics`` once served (the port bound where 0 was asked for)."""
        return self.watcher.metrics_url

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
        if watcher.metrics_url is not None:
            policy += f"; metrics at {watcher.metrics_url}"
        session.decision = msgspec.structs.replace(d, warmup_policy=policy)
