"""Watch mode's metrics: the watcher's counts (``watch.Snapshot``) as Prometheus and
OpenTelemetry metrics (``docs/watch.md`` lists the names). Both packages are optional (the
``watch`` extra); each sink is made only when asked for, and says which package is missing.

Prometheus (``prometheus_client``): a collector registered once per registry reads the counts
when scraped (``Watcher.current``: read then while no call is open, else the last ones, and the
end of the open call reads them again), so the last calls before traffic stops are in the next
scrape. In multiprocess mode (``PROMETHEUS_MULTIPROC_DIR`` set) the endpoint reads the workers'
files instead: each worker pushes its counts into the client's own metric objects (the deltas
since the last push) every ``sync_every`` seconds from a thread of its own (or at the end of the
call open then). Either way every series the watch knows before serving exists at 0 from the end
of warm-up (``Watcher._compose``), so ``increase()`` sees the first event.
OpenTelemetry: observable counters and gauges, with units, read the counts when the SDK collects.
"""

from __future__ import annotations

import errno
import logging
import os
import weakref
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ..errors import UnusableInput
from ..model.watch import COMPILE_BUCKETS_S, STEADY_BUCKETS_S, Histogram, Snapshot

if TYPE_CHECKING:
    from .watch import Watcher

log = logging.getLogger("seamscope")

COUNTERS: dict[str, tuple[str, tuple[str, ...], str]] = {
    "calls": ("Observed calls of compiled callables, by phase (cold, steady, fallback).", ("phase",), "{call}"),
    "compiles": ("Frame compilations that produced code, by frame and stage (warmup, serving).", ("frame", "stage"),
                 "{compilation}"),
    "recompiles": ("Recompilations (a guard failed), by frame, cause and stage.", ("frame", "cause", "stage"),
                   "{compilation}"),
    "fallbacks": ("Compilations that produced no code (the frame runs eagerly), by frame, cause and stage.",
                  ("frame", "cause", "stage"), "{compilation}"),
    "break_crossings": ("Graph-break crossings, by the break's frame and gb_type.", ("frame", "cause"), "{crossing}"),
    "watch_events": ("Events after warm-up (recompile, fallback, graph, break), by frame and cause.",
                     ("kind", "frame", "cause"), "{event}"),
}
"""Snapshot field → (help, labels, OpenTelemetry unit); the Prometheus name is ``seamscope_<field>_total``."""
HISTOGRAMS: dict[str, tuple[str, str]] = {
    "steady": ("seamscope_steady_call_seconds", "Wall time of steady calls (cache hits only)."),
    "compile": ("seamscope_compile_seconds", "Compile time of each frame compilation."),
}
GRAPHS_HELP = "Graphs compiled and held by this process."
WARMED_HELP = "1 once warm-up is over."
FRAME_HELP = "Where each frame label's frame was first compiled: its file and line."


def _need(module: str, extra: str = "watch") -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise UnusableInput(f"watch metrics need {module.split('.')[0]} (pip install 'seamscope[{extra}]')") from None


def parse_port(value: int | str) -> tuple[str, int]:
    """``9464`` or ``"9464"`` → loopback; ``"0.0.0.0:9464"`` → every interface."""
    text = str(value)
    host, _, port = text.rpartition(":")
    try:
        n = int(port)
    except ValueError:
        raise UnusableInput(f"--metrics-port {text}: PORT or ADDRESS:PORT") from None
    if not 0 <= n < 65536:
        raise UnusableInput(f"--metrics-port {text}: a port 0-65535")
    return host.strip("[]") or "127.0.0.1", n


def make_sinks(metrics_port: int | str | None = None, registry: Any = None, otel: Any = None) -> list[Any]:
    sinks: list[Any] = []
    if metrics_port is not None or registry is not None:
        sinks.append(PrometheusSink(metrics_port, registry))
    if otel is not None and otel is not False:
        sinks.append(OtelSink(None if otel is True else otel))
    return sinks


def combined(snaps: list[Snapshot | None]) -> Snapshot | None:
    """Several watchers' counts as one (a registry shared by watches one after another, or at once)."""
    got = [s for s in snaps if s is not None]
    if len(got) <= 1:
        return got[0] if got else None

    def add(name: str) -> dict[Any, int]:
        out: dict[Any, int] = {}
        for s in got:
            for k, n in getattr(s, name).items():
                out[k] = out.get(k, 0) + n
        return out

    def hist(name: str) -> Histogram:
        hs = [getattr(s, name) for s in got]
        return Histogram(hs[0].bounds, tuple(map(sum, zip(*(h.counts for h in hs), strict=True))),
                         sum(h.total for h in hs))

    frames: dict[str, tuple[str, int]] = {}
    for s in got:
        frames = {**s.frames, **frames}
    last = got[-1]
    return Snapshot(calls=add("calls"), compiles=add("compiles"), recompiles=add("recompiles"),
                    fallbacks=add("fallbacks"), break_crossings=add("break_crossings"),
                    watch_events=add("watch_events"), graphs=last.graphs, steady=hist("steady"),
                    compile=hist("compile"), warmed_up=last.warmed_up, frames=frames)


class SnapshotCollector:
    """A Prometheus collector over the live watchers' counts, read at each scrape (one per
    registry, as a registry refuses a name twice: a second watch adds to the first's counts)."""

    def __init__(self) -> None:
        self.live: list[Watcher] = []
        self.closed: Snapshot | None = None
        """What the watches that have ended counted."""

    def release(self, watcher: Watcher) -> None:
        if watcher in self.live:
            self.live.remove(watcher)
            self.closed = combined([self.closed, watcher.last])

    def describe(self) -> list[Any]:
        return list(families(None))

    def collect(self) -> list[Any]:
        return list(families(combined([self.closed, *(w.current() for w in list(self.live))])))


def families(snap: Snapshot | None) -> Iterator[Any]:
    """The metric families of one snapshot (none: the names only)."""
    from prometheus_client.core import (
        CounterMetricFamily,
        GaugeMetricFamily,
        HistogramMetricFamily,
        InfoMetricFamily,
    )
    from prometheus_client.utils import floatToGoString

    for name, (doc, labels, _unit) in COUNTERS.items():
        fam = CounterMetricFamily(f"seamscope_{name}", doc, labels=list(labels))
        for key, n in sorted(getattr(snap, name).items()) if snap is not None else ():
            fam.add_metric(list((key,) if isinstance(key, str) else key), n)
        yield fam
    for field, (metric, doc) in HISTOGRAMS.items():
        h: Histogram | None = getattr(snap, field) if snap is not None else None
        if h is None:
            yield HistogramMetricFamily(metric, doc)
            continue
        running, buckets = 0, []
        for bound, n in zip((*h.bounds, float("inf")), h.counts, strict=True):
            running += n
            buckets.append((floatToGoString(bound), running))
        yield HistogramMetricFamily(metric, doc, buckets=buckets, sum_value=h.total)
    graphs = GaugeMetricFamily("seamscope_graphs", GRAPHS_HELP, value=snap.graphs if snap is not None else None)
    warmed = GaugeMetricFamily("seamscope_warmed_up", WARMED_HELP,
                               value=(1 if snap.warmed_up else 0) if snap is not None else None)
    frames = InfoMetricFamily("seamscope_frame", FRAME_HELP, labels=["frame"])
    for frame, (file, line) in sorted(snap.frames.items()) if snap is not None else ():
        frames.add_metric([frame], {"file": file, "line": str(line)})
    yield from (graphs, warmed, frames)


_COLLECTORS: weakref.WeakKeyDictionary[Any, SnapshotCollector] = weakref.WeakKeyDictionary()
_METRICS: dict[str, Any] = {}
"""Multiprocess mode's metrics (in no registry: the endpoint reads the directory's files)."""


class PrometheusSink:
    def __init__(self, port: int | str | None = None, registry: Any = None) -> None:
        _need("prometheus_client")  # said before anything runs
        self.addr: tuple[str, int] | None = parse_port(port) if port is not None else None
        self.registry = registry
        self.server: Any = None
        self.port: int | None = None
        """The port served (the one bound, where 0 was asked for), or None."""
        self.url: str | None = None
        self.multiprocess = bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR"))
        self.pushed = self.multiprocess
        """The counts are pushed into prometheus_client's own metrics (``sync``), not read when scraped."""
        self.collector: SnapshotCollector | None = None
        self.watcher: Watcher | None = None
        self._last: Snapshot | None = None
        self.m: dict[str, Any] = {}

    def start(self, watcher: Watcher) -> None:
        import prometheus_client as pc

        serve: Any
        if self.multiprocess:  # values go to the directory's files; the endpoint reads them all
            from prometheus_client import multiprocess

            self.m = _metrics(pc)
            serve = pc.CollectorRegistry()
            multiprocess.MultiProcessCollector(serve)
        else:
            serve = self.registry if self.registry is not None else pc.CollectorRegistry()
            self.collector = _COLLECTORS.get(serve)
            if self.collector is None:
                self.collector = _COLLECTORS[serve] = SnapshotCollector()
                serve.register(self.collector)
            self.collector.live.append(watcher)
            self.watcher = watcher
        if self.addr is None:
            return
        host, port = self.addr
        try:
            self.server, _thread = pc.start_http_server(port, addr=host, registry=serve)
        except OSError as e:
            self.close()
            if self.multiprocess and e.errno == errno.EADDRINUSE:
                log.info("seamscope: watch: %s:%d is served by another worker; this one writes its counts to %s",
                         host, port, os.environ.get("PROMETHEUS_MULTIPROC_DIR"))
                return
            raise UnusableInput(f"--metrics-port {host}:{port}: {e.strerror or e}") from None
        self.port = self.server.server_address[1]
        self.url = f"http://{f'[{host}]' if ':' in host else host}:{self.port}/metrics"
        log.info("seamscope: watch: metrics at %s", self.url)

    def sync(self, snap: Snapshot) -> None:
        """Multiprocess mode: push what was counted since the last push (each series made at 0
        when first seen, so the file holds it before its first event)."""
        if not self.m:
            return
        last = self._last
        for name in COUNTERS:
            counter = self.m[name]
            old = getattr(last, name) if last is not None else {}
            for key, n in getattr(snap, name).items():
                d = n - old.get(key, 0)
                if d > 0 or key not in old:
                    child = counter.labels(*((key,) if isinstance(key, str) else key))
                    if d > 0:
                        child.inc(d)
        _push_histogram(self.m["steady_call_seconds"], snap.steady, last.steady if last is not None else None)
        _push_histogram(self.m["compile_seconds"], snap.compile, last.compile if last is not None else None)
        self.m["graphs"].set(snap.graphs)
        self.m["warmed_up"].set(1 if snap.warmed_up else 0)
        self._last = snap

    def close(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None
        if self.collector is not None and self.watcher is not None:
            self.collector.release(self.watcher)
            self.watcher = None
        if self.multiprocess:
            from prometheus_client import multiprocess

            multiprocess.mark_process_dead(os.getpid())


def _metrics(pc: Any) -> dict[str, Any]:
    if _METRICS:
        return _METRICS
    m: dict[str, Any] = {name: pc.Counter(f"seamscope_{name}", doc, list(labels), registry=None)
                         for name, (doc, labels, _unit) in COUNTERS.items()}
    for field, (metric, doc) in HISTOGRAMS.items():
        bounds = STEADY_BUCKETS_S if field == "steady" else COMPILE_BUCKETS_S
        m[metric.removeprefix("seamscope_")] = pc.Histogram(metric, doc, buckets=bounds, registry=None)
    m["graphs"] = pc.Gauge("seamscope_graphs", GRAPHS_HELP, registry=None, multiprocess_mode="livesum")
    m["warmed_up"] = pc.Gauge("seamscope_warmed_up", WARMED_HELP, registry=None, multiprocess_mode="livemin")
    _METRICS.update(m)
    return m


def _push_histogram(hist: Any, now: Histogram, before: Histogram | None) -> None:
    """Add the bucket counts observed since ``before`` (the client has no bulk observe; its
    histogram keeps one value per bucket, not cumulative, and the sum)."""
    buckets = getattr(hist, "_buckets", None)
    total = getattr(hist, "_sum", None)
    if buckets is None or total is None or len(buckets) != len(now.counts):
        return
    for i, n in enumerate(now.counts):
        d = n - (before.counts[i] if before is not None else 0)
        if d > 0:
            buckets[i].inc(d)
    dsum = now.total - (before.total if before is not None else 0.0)
    if dsum > 0:
        total.inc(dsum)


class OtelSink:
    """The same counts through OpenTelemetry's metrics API (a ``MeterProvider``; None: the global
    one), as observable counters and gauges with units, read when the SDK collects."""

    FRESH_S = 0.05
    """One collection reads every instrument: they share the counts read for the first."""

    def __init__(self, provider: Any = None) -> None:
        _need("opentelemetry.sdk.metrics")
        self.provider = provider
        self.meter: Any = None
        self.pushed = False

    def start(self, watcher: Watcher) -> None:
        from opentelemetry import metrics
        from opentelemetry.metrics import CallbackOptions, Observation

        self.meter = (self.provider or metrics.get_meter_provider()).get_meter("seamscope")

        def observer(read: Any) -> Any:
            def callback(options: CallbackOptions) -> list[Observation]:
                snap = watcher.current(self.FRESH_S)
                return [] if snap is None else read(snap)
            return callback

        def counts(name: str, labels: tuple[str, ...]) -> Any:
            return lambda snap: [
                Observation(n, dict(zip(labels, (key,) if isinstance(key, str) else key, strict=True)))
                for key, n in getattr(snap, name).items()]

        for name, (doc, labels, unit) in COUNTERS.items():
            self.meter.create_observable_counter(f"seamscope.{name}", callbacks=[observer(counts(name, labels))],
                                                 unit=unit, description=doc)
        for field, (_metric, doc) in HISTOGRAMS.items():
            self.meter.create_observable_counter(
                f"seamscope.{field}_call.time" if field == "steady" else "seamscope.compile.time",
                callbacks=[observer(lambda snap, f=field: [Observation(getattr(snap, f).total)])], unit="s",
                description=f"Total of: {doc[0].lower()}{doc[1:]}")
        self.meter.create_observable_gauge("seamscope.graphs", callbacks=[observer(
            lambda snap: [Observation(snap.graphs)])], unit="{graph}", description=GRAPHS_HELP)
        self.meter.create_observable_gauge("seamscope.warmed_up", callbacks=[observer(
            lambda snap: [Observation(1 if snap.warmed_up else 0)])], unit="1", description=WARMED_HELP)

    def sync(self, snap: Snapshot) -> None:
        pass

    def close(self) -> None:
        pass
