"""Watch mode's metrics: the watcher's counts (``watch.Snapshot``) as Prometheus and
OpenTelemetry metrics (``docs/watch.md`` lists the names). Both packages are optional (the
``watch`` extra); each sink is made only when asked for, and says which package is missing.

Prometheus (``prometheus_client``): the counts are pushed into the client's own metric objects at
each sync (the deltas since the last), so its multiprocess mode works unchanged: with
``PROMETHEUS_MULTIPROC_DIR`` set, every worker writes its values there and the endpoint (the first
worker that binds the port, or any process serving ``MultiProcessCollector``) sums them.
OpenTelemetry: observable counters and a gauge read the last snapshot when the SDK collects (the
counts only: its histograms take single values, not buckets).
"""

from __future__ import annotations

import errno
import logging
import os
import weakref
from typing import TYPE_CHECKING, Any

from ..errors import UnusableInput
from ..model.watch import COMPILE_BUCKETS_S, STEADY_BUCKETS_S, Snapshot

if TYPE_CHECKING:
    from .watch import Watcher

log = logging.getLogger("seamscope")

COUNTERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "calls": ("Observed calls of compiled callables, by phase (cold, steady, fallback).", ("phase",)),
    "compiles": ("Frame compilations that produced code, by frame and stage (warmup, serving).", ("frame", "stage")),
    "recompiles": ("Recompilations (a guard failed), by frame, cause and stage.", ("frame", "cause", "stage")),
    "fallbacks": ("Compilations that produced no code (the frame runs eagerly), by frame, cause and stage.",
                  ("frame", "cause", "stage")),
    "break_crossings": ("Graph-break crossings, by the break's frame and gb_type.", ("frame", "cause")),
    "watch_events": ("Events after warm-up (recompile, fallback, graph, break), by frame and cause.",
                     ("kind", "frame", "cause")),
}
"""Snapshot field → (help, labels); the Prometheus name is ``seamscope_<field>_total``."""


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


_METRICS: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()
"""Registry → its seamscope metrics: made once per registry, as a registry refuses a name twice (a
second watch in the process adds to the same counters)."""
_UNREGISTERED: dict[str, Any] = {}
"""Multiprocess mode's metrics (in no registry: the endpoint reads the directory's files)."""


class PrometheusSink:
    def __init__(self, port: int | str | None = None, registry: Any = None) -> None:
        _need("prometheus_client")  # said before anything runs
        self.addr: tuple[str, int] | None = parse_port(port) if port is not None else None
        self.registry = registry
        self.server: Any = None
        self.port: int | None = None
        """The port served (the one bound, where 0 was asked for), or None."""
        self.multiprocess = bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR"))
        self._last: Snapshot | None = None
        self.m: dict[str, Any] = {}

    def start(self, watcher: Watcher) -> None:
        import prometheus_client as pc

        if self.multiprocess:
            reg = None  # values go to the directory's files; the endpoint reads them all
        elif self.registry is not None:
            reg = self.registry
        else:
            reg = pc.CollectorRegistry() if self.addr is not None else pc.REGISTRY
        self.m = _metrics(pc, reg)
        if self.addr is None:
            return
        serve: Any = reg
        if self.multiprocess:
            from prometheus_client import multiprocess

            serve = pc.CollectorRegistry()
            multiprocess.MultiProcessCollector(serve)
        host, port = self.addr
        try:
            self.server, _thread = pc.start_http_server(port, addr=host, registry=serve)
        except OSError as e:
            if self.multiprocess and e.errno == errno.EADDRINUSE:
                log.info("seamscope: watch: %s:%d is served by another worker; this one writes its counts to %s",
                         host, port, os.environ.get("PROMETHEUS_MULTIPROC_DIR"))
                return
            raise UnusableInput(f"--metrics-port {host}:{port}: {e.strerror or e}") from None
        self.port = self.server.server_address[1]
        log.info("seamscope: watch: metrics at http://%s:%d/metrics", host, self.port)

    def sync(self, snap: Snapshot) -> None:
        last = self._last
        for name in COUNTERS:
            counter = self.m[name]
            old = getattr(last, name) if last is not None else {}
            for key, n in getattr(snap, name).items():
                d = n - old.get(key, 0)
                if d > 0:
                    counter.labels(*((key,) if isinstance(key, str) else key)).inc(d)
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
        if self.multiprocess:
            from prometheus_client import multiprocess

            multiprocess.mark_process_dead(os.getpid())


def _metrics(pc: Any, reg: Any) -> dict[str, Any]:
    got = _UNREGISTERED if reg is None else _METRICS.get(reg)
    if got:
        return got
    m: dict[str, Any] = {name: pc.Counter(f"seamscope_{name}", doc, list(labels), registry=reg)
                         for name, (doc, labels) in COUNTERS.items()}
    m["steady_call_seconds"] = pc.Histogram(
        "seamscope_steady_call_seconds", "Wall time of steady calls (cache hits only).", buckets=STEADY_BUCKETS_S,
        registry=reg)
    m["compile_seconds"] = pc.Histogram(
        "seamscope_compile_seconds", "Compile time of each frame compilation.", buckets=COMPILE_BUCKETS_S, registry=reg)
    m["graphs"] = pc.Gauge("seamscope_graphs", "Graphs compiled and held by this process.", registry=reg,
                           multiprocess_mode="livesum")
    m["warmed_up"] = pc.Gauge("seamscope_warmed_up", "1 once warm-up is over.", registry=reg,
                              multiprocess_mode="livemin")
    if reg is None:
        _UNREGISTERED.update(m)
    else:
        _METRICS[reg] = m
    return m


def _push_histogram(hist: Any, now: Any, before: Any) -> None:
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
    one), as observable counters and a gauge read at collection time."""

    def __init__(self, provider: Any = None) -> None:
        _need("opentelemetry.sdk.metrics")
        self.provider = provider
        self.meter: Any = None
        self._last: Snapshot | None = None

    def start(self, watcher: Watcher) -> None:
        from opentelemetry import metrics
        from opentelemetry.metrics import CallbackOptions, Observation

        self.meter = (self.provider or metrics.get_meter_provider()).get_meter("seamscope")

        def observer(name: str, labels: tuple[str, ...]) -> Any:
            def read(options: CallbackOptions) -> list[Observation]:
                snap = self._last
                if snap is None:
                    return []
                return [Observation(n, dict(zip(labels, (key,) if isinstance(key, str) else key, strict=True)))
                        for key, n in getattr(snap, name).items()]
            return read

        for name, (doc, labels) in COUNTERS.items():
            self.meter.create_observable_counter(f"seamscope.{name}", callbacks=[observer(name, labels)],
                                                 description=doc)
        self.meter.create_observable_gauge(
            "seamscope.graphs", callbacks=[lambda options: [Observation(self._last.graphs if self._last else 0)]],
            description="Graphs compiled and held by this process.")

    def sync(self, snap: Snapshot) -> None:
        self._last = snap

    def close(self) -> None:
        pass
