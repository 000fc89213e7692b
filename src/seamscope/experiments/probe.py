"""The compile probe: eager first, then cold, warm and changed-input compiled calls, as one run.

1. prove eager works (``eager``: the control; a model that fails here is the user's to fix);
2. time the compiled callable's phases apart: ``cold`` (first call: capture + compile + run),
   ``warm`` (N calls cycling the steady family), ``changed`` (one call per other entry), each paired
   with eager on the same inputs the same number of times;
3. compare compiled against eager on every distinct input (``differential``);
4. walk the backend ladder to find the first layer that fails;
5. memory after every first-seen shape; the evidence table.

Everything measured is kept on the :class:`ProbeRun` as it arrives, so a failure part-way still
yields a receipt with what was measured before it.
"""

from __future__ import annotations

import os
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from .._version import __version__
from ..analyze.receipt import make_receipt
from ..analyze.stats import quantile
from ..capture import adapter
from ..errors import SeamscopeError, UserCodeFailed
from ..model.builder import LedgerBuilder
from ..model.ledger import Compilation, Environment, Ledger, RunInfo, compile_frame_index
from ..model.probe import (
    DiffReport,
    EvidenceRow,
    Ladder,
    MemoryPoint,
    PhasePair,
    ProbeResult,
    ProbeSpec,
    Samples,
)
from ..model.receipt import Receipt
from .differential import worse, worst_leaf
from .ladder import (
    BackendWatch,
    Reference,
    backend_label,
    compare_to_reference,
    compile_kwargs,
    distinct_inputs,
    eager_reference,
    run_ladder,
    signature,
)
from .workload import Workload, as_call, described, grad_mode, prepare

__all__ = ["ProbeRun", "prepare", "probe"]

MIB = 1 << 20


# --- preparation and measurement helpers ---------------------------------------------------------


def rss_bytes() -> int | None:
    """Resident set size now (``/proc/self/statm``), else the peak from ``getrusage``."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        try:
            import resource

            r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            return int(r if sys.platform == "darwin" else r * 1024)
        except Exception:
            return None


def frames_ok() -> int:
    return adapter.frames_ok()


def stats(configuration: str, phase: str, samples: list[int]) -> Samples:
    return Samples(
        configuration=configuration, phase=phase,  # type: ignore[arg-type]
        samples_ns=list(samples), min_ns=min(samples) if samples else None,
        median_ns=quantile(samples, 0.5), p90_ns=quantile(samples, 0.9),
    )


@dataclass
class _CallRec:
    family: str
    t0: int
    t1: int
    graphs: tuple[int, int]
    error: str | None = None


@dataclass
class ProbeRun:
    """What the probe has measured so far (mutable while it runs; frozen by ``receipt``)."""

    wl: Workload
    spec_label: str
    ladder_layers: list[Any]
    isolate: bool = False
    timeout: float | None = None
    progress: Callable[[str], None] | None = None
    cuda: bool = False
    eager_samples: dict[str, list[int]] = field(default_factory=lambda: {"cold": [], "warm": [], "changed": []})
    cand_samples: dict[str, list[int]] = field(default_factory=lambda: {"cold": [], "warm": [], "changed": []})
    refs: list[Reference] = field(default_factory=list)
    diffs: list[DiffReport] = field(default_factory=list)
    memory: list[MemoryPoint] = field(default_factory=list)
    ladder: Ladder | None = None
    watch: BackendWatch | None = None
    calls: list[_CallRec] = field(default_factory=list)
    origin: int = 0
    compiles: int = 0
    cuda_peaks: dict[str, int] = field(default_factory=dict)
    error: str | None = None
    failed: str | None = None  # "eager" | "compiled"
    warnings: list[str] = field(default_factory=list)
    capture_ledger: Ledger | None = None
    warm_compiled: int = 0

    @property
    def configuration(self) -> str:
        return f"compile {backend_label(self.wl.backend)}"

    def _say(self, msg: str) -> None:
        if self.progress:
            self.progress(msg)

    def _sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()

    def _timed(self, fn: Callable[..., Any], entry: Any) -> tuple[int, Any]:
        args, kwargs = as_call(entry)
        self._sync()
        t0 = time.perf_counter_ns()
        out = fn(*args, **kwargs)
        self._sync()
        return time.perf_counter_ns() - t0, out

    def _memory(self, configuration: str, phase: str, family: str, entry: Any, seen: set[str], variants: int) -> None:
        sig = signature(entry)
        if sig in seen:
            return
        seen.add(sig)
        peak = int(torch.cuda.max_memory_allocated()) if self.cuda else None
        self.memory.append(
            MemoryPoint(
                configuration=configuration,
                phase=phase,  # type: ignore[arg-type]
                family=family,
                signature=sig,
                rss_bytes=rss_bytes(),
                cuda_peak_bytes=peak,
                compiled_variants=variants,
            )
        )

    def _schedule(self) -> tuple[list[tuple[str, Any]], list[tuple[str, Any]]]:
        fams = self.wl.families()
        steady = fams["steady"]
        warm = [("steady", steady[(i + 1) % len(steady)]) for i in range(self.wl.warm_calls)]
        changed = [(f, e) for f, es in fams.items() if f != "steady" for e in es]
        return warm, changed

    # --- the phases ------------------------------------------------------------------------------

    def run_eager(self) -> None:
        wl = self.wl
        fn = wl.fn_or_module
        first = wl.families()["steady"][0]
        warm, changed = self._schedule()
        seen: set[str] = set()
        if self.cuda:
            torch.cuda.reset_peak_memory_stats()
        self._say("eager: control run")
        torch.manual_seed(wl.seed)
        try:
            with grad_mode(wl):
                ns, _ = self._timed(fn, first)
                self.eager_samples["cold"].append(ns)
                self._memory("eager", "eager", "steady", first, seen, 0)
                for fam, e in warm:
                    ns, _ = self._timed(fn, e)
                    self.eager_samples["warm"].append(ns)
                    self._memory("eager", "eager", fam, e, seen, 0)
                for fam, e in changed:
                    ns, _ = self._timed(fn, e)
                    self.eager_samples["changed"].append(ns)
                    self._memory("eager", "eager", fam, e, seen, 0)
                for fam, i, e, sig in distinct_inputs(wl):
                    self.refs.append(eager_reference(wl, fam, i, e, sig))
        except Exception as e:
            self.failed = "eager"
            self.error = f"fails eager → fix the model first: {described(e)}"
            raise UserCodeFailed(self.error) from e
        if self.cuda:
            self.cuda_peaks["eager"] = int(torch.cuda.max_memory_allocated())

    def run_compiled(self) -> None:
        wl = self.wl
        first = wl.families()["steady"][0]
        warm, changed = self._schedule()
        seen: set[str] = set()
        adapter.dynamo_reset()
        if self.cuda:
            torch.cuda.reset_peak_memory_stats()
        cfg = self.configuration
        self.watch = BackendWatch(wl.backend, cfg, dict(wl.compile_options))
        ok0 = frames_ok()
        self.origin = time.perf_counter_ns()
        torch.manual_seed(wl.seed)
        self._say(f"{cfg}: cold, {len(warm)} warm, {len(changed)} changed calls")
        cap = _capture_session()
        sess: Any = None
        try:
            with cap if cap is not None else _Null() as sess:
                # Compiled inside the session, so live capture observes it (PyTorch-true counts).
                compiled = torch.compile(wl.fn_or_module, backend=self.watch, **compile_kwargs(wl.compile_options))
                with grad_mode(wl):
                    self._one(compiled, "cold", "steady", first, seen, ok0, sess)
                    for fam, e in warm:
                        self._one(compiled, "warm", fam, e, seen, ok0, sess)
                    for fam, e in changed:
                        self._one(compiled, "changed", fam, e, seen, ok0, sess)
        except Exception as e:
            self.failed = "compiled"
            self.error = f"compiled call failed ({described(e)}); see the ladder"
            return
        finally:
            self.compiles = frames_ok() - ok0
            if sess is not None and getattr(sess, "ledger", None) is not None:
                self.capture_ledger = sess.ledger
        self.compiles = frames_ok() - ok0
        if self.cuda:
            self.cuda_peaks[cfg] = int(torch.cuda.max_memory_allocated())
        self._say(f"{cfg}: differential test on {len(self.refs)} distinct inputs")
        with grad_mode(wl):
            for ref in self.refs:
                leaves = compare_to_reference(ref, compiled, wl.fn_or_module, wl.tolerance)
                w = worst_leaf(leaves)
                klass = "within_tolerance"
                for lf in leaves:
                    klass = worse(klass, lf.klass)  # type: ignore[arg-type]
                self.diffs.append(DiffReport(configuration=cfg, family=ref.family, index=ref.index,
                                             signature=ref.signature, klass=klass,  # type: ignore[arg-type]
                                             leaves=leaves, worst=w))

    def _one(self, compiled: Any, phase: str, fam: str, entry: Any, seen: set[str], ok0: int, sess: Any) -> None:
        assert self.watch is not None
        g0 = len(self.watch.graphs)
        args, kwargs = as_call(entry)
        label = sess.family(fam) if sess is not None and hasattr(sess, "family") else _Null()
        with label:
            self._sync()
            t0 = time.perf_counter_ns()
            try:
                compiled(*args, **kwargs)
                self._sync()
            except Exception as e:
                self.calls.append(
                    _CallRec(fam, t0, time.perf_counter_ns(), (g0, len(self.watch.graphs)), type(e).__name__)
                )
                raise
            t1 = time.perf_counter_ns()
        self.calls.append(_CallRec(fam, t0, t1, (g0, len(self.watch.graphs))))
        self.cand_samples[phase].append(t1 - t0)
        if phase == "warm" and len(self.watch.graphs) > g0:
            self.warm_compiled += 1
        self._memory(self.configuration, phase, fam, entry, seen, frames_ok() - ok0)

    def run_ladder(self) -> None:
        if not self.ladder_layers:
            return
        self._say("ladder: " + " → ".join(backend_label(b) for b in self.ladder_layers))
        self.ladder = run_ladder(
            self.wl, self.refs, self.ladder_layers, isolate=self.isolate, timeout=self.timeout,
            spec=self.spec_label if self.isolate else None,
            on_layer=lambda lr: self._say(f"  {lr.backend}: {lr.verdict}"),
        )

    # --- freezing ------------------------------------------------------------------------------

    def result(self) -> ProbeResult:
        wl = self.wl
        cfg = self.configuration
        pairs = []
        for ph in ("cold", "warm", "changed"):
            b, c = self.eager_samples[ph], self.cand_samples[ph]
            if not c:
                continue
            bs, cs = stats("eager", "eager", b), stats(cfg, ph, c)
            ratio = cs.median_ns / bs.median_ns if cs.median_ns and bs.median_ns else None
            pairs.append(PhasePair(phase=ph, baseline=bs, candidate=cs, median_ratio=ratio))  # type: ignore[arg-type]
        all_eager = [x for ph in ("cold", "warm", "changed") for x in self.eager_samples[ph]]
        random = list(self.watch.random) if self.watch else []
        verdict, answer = self._verdict()
        opts = {k: repr(v) for k, v in wl.compile_options.items()}
        spec = ProbeSpec(
            workload=self.spec_label, backend=backend_label(wl.backend), compile_options=opts,
            device=str(wl.device), dtype=str(wl.dtype).replace("torch.", "") if wl.dtype is not None else None,
            warm_calls=wl.warm_calls, seed=wl.seed,
            rtol=wl.tolerance[0] if wl.tolerance else None, atol=wl.tolerance[1] if wl.tolerance else None,
            families={k: len(v) for k, v in wl.families().items()},
            ladder=[backend_label(b) for b in self.ladder_layers], isolate=self.isolate, timeout_s=self.timeout,
        )
        warnings = list(self.warnings)
        if self.warm_compiled:
            warnings.append(f"{self.warm_compiled} of {len(self.cand_samples['warm'])} warm calls compiled:"
                            " the steady family is not one compiled variant (warm figures include compile time)")
        if random:
            warnings.append("random ops in a compiled graph: eager and compiled draw different numbers ("
                            + ", ".join(sorted({r.op for r in random})) + ")")
        return ProbeResult(
            spec=spec, verdict=verdict, answer=answer, pairs=pairs,  # type: ignore[arg-type]
            eager=stats("eager", "eager", all_eager) if all_eager else None,
            differential=self.diffs, random_ops=random, ladder=self.ladder, memory=self.memory,
            evidence=self._evidence(), ledger_source="capture" if self.capture_ledger is not None else "probe",
            error=self.error, warnings=warnings,
        )

    def _verdict(self) -> tuple[str, str]:
        if self.failed == "eager":
            return "fails_eager", self.error or "fails eager"
        lad = self.ladder.answer if self.ladder else ""
        if self.failed == "compiled":
            return "fails_compiled", (self.error or "compiled call failed") + (f"; {lad}" if lad else "")
        if not self.diffs:
            return "incomplete", self.error or "nothing compared"
        klass = "within_tolerance"
        for d in self.diffs:
            klass = worse(klass, d.klass)  # type: ignore[arg-type]
        ladder_bug = self.ladder is not None and self.ladder.first_failing is not None
        if klass == "boundary_bug" or ladder_bug:
            worst = worst_leaf(d.worst for d in self.diffs if d.worst is not None)
            head = (f"boundary bug: {worst.path} ({worst.reason})" if worst and worst.klass == "boundary_bug"
                    else "compiled matches eager for the probed backend")
            if (self.ladder is not None and self.ladder.meaning and worst is not None
                    and worst.klass == "boundary_bug" and self.ladder.first_bug == self.ladder.first_failing):
                # The leaf's figures are in the head already: the ladder adds the layer and its meaning.
                lad = f"first failing layer: {self.ladder.first_bug}. {self.ladder.meaning}"
            return "boundary_bug", head + (f"; {lad}" if lad else "")
        if klass == "above_tolerance":
            worst = worst_leaf(d.worst for d in self.diffs if d.worst is not None)
            return (
                "suspect",
                f"above tolerance, not called a bug: {worst.path if worst else ''} ({worst.reason if worst else ''})",
            )
        return "ok", "compiled matches eager within tolerance on every distinct input" + (f"; {lad}" if lad else "")

    def _evidence(self) -> list[EvidenceRow]:
        rows = []
        peak_src = "cuda_allocator" if self.cuda else "rss"

        def peak(cfg: str) -> float | None:
            if self.cuda:
                v = self.cuda_peaks.get(cfg)
                return round(v / MIB, 1) if v is not None else None
            vals = [m.rss_bytes for m in self.memory if m.configuration == cfg and m.rss_bytes is not None]
            return round(max(vals) / MIB, 1) if vals else None

        e = self.eager_samples
        if e["cold"]:
            rows.append(EvidenceRow(configuration="eager", first_call_ns=e["cold"][0],
                                    steady_median_ns=quantile(e["warm"], 0.5), recompiles=0, compiles=0,
                                    peak_mib=peak("eager"), peak_source=peak_src))  # type: ignore[arg-type]
        c = self.cand_samples
        if c["cold"] or self.failed == "compiled":
            ids = self.watch.compile_ids if self.watch else []
            rec = sum(1 for i in ids if compile_frame_index(i)[1] > 0)
            if self.capture_ledger is not None:
                rec = sum(1 for comp in self.capture_ledger.compilations if comp.is_recompile and comp.status == "ok")
            rows.append(EvidenceRow(configuration=self.configuration, first_call_ns=c["cold"][0] if c["cold"] else None,
                                    steady_median_ns=quantile(c["warm"], 0.5), recompiles=rec, compiles=self.compiles,
                                    peak_mib=peak(self.configuration), peak_source=peak_src))  # type: ignore[arg-type]
        return rows

    def ledger(self) -> Ledger:
        """The live capture's ledger when it ran, else a minimal one from the probe's own evidence."""
        if self.capture_ledger is not None:
            return self.capture_ledger
        wl = self.wl
        env = Environment(
            seamscope_version=__version__, python_version=platform.python_version(),
            torch_version=str(torch.__version__), platform=platform.platform(terse=True), device=str(wl.device),
            backend=backend_label(wl.backend), compile_options={k: repr(v) for k, v in wl.compile_options.items()},
        )
        run = RunInfo(
            source="probe", command=[self.spec_label],
            absent=[
                "regions and islands: the probe's own ledger does not time compiled regions (live capture"
                " was not available); a call's time outside backend compilation is one island",
                "compile time covers only the backend's part of each compilation, not Dynamo's tracing",
                "break sites and guard texts",
            ],
        )
        b = LedgerBuilder(run, env, clock=time.perf_counter_ns)
        b.origin = self.origin or b.origin
        graphs = self.watch.graphs if self.watch else []
        counts: dict[str, int] = {}
        for cid, _, _ in graphs:
            if cid:
                counts[cid.split("_", 1)[0]] = counts.get(cid.split("_", 1)[0], 0) + 1
        seen: set[str] = set()
        for rec in self.calls:
            b.begin_call(rec.t0, rec.family)
            for cid, g0, g1 in graphs[rec.graphs[0]:rec.graphs[1]]:
                key = (cid or "?/?").split("_", 1)[0]
                if key not in seen:
                    seen.add(key)
                    b.set_compilation(Compilation(
                        compile_id=key, frame_name="?", file="?", line=0, status="ok", start_ns=g0 - b.origin,
                        duration_ns=g1 - g0, backend_ns=g1 - g0, graph_count=counts.get(key, 1)))
                    if compile_frame_index(key)[1] > 0:
                        b.guard_miss(key, g0)
                b.compile_span(key, g0, g1)
            b.end_call(rec.t1, rec.error)
        return b.build()

    def receipt(self) -> Receipt:
        return make_receipt(self.ledger(), probe=self.result())


class _Null:
    def __enter__(self) -> Any:
        return None

    def __exit__(self, *a: Any) -> None:
        return None


def _capture_session() -> Any:
    """Live capture's session when it is installed (PyTorch-true compile counts), else None."""
    try:
        from ..capture.session import active_session, session
    except ImportError:
        return None
    if active_session() is not None:  # the probe itself runs under an outer session
        return None
    return session()


def probe(
    wl: Workload,
    *,
    spec: str | None = None,
    ladder: list[Any] | None = None,
    isolate: bool = False,
    timeout: float | None = None,
    warm: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> tuple[Receipt, SeamscopeError | None]:
    """Run the whole probe; return the receipt (always, with what was measured) and the error
    that stopped it, if any (the caller writes the receipt, then raises)."""
    import dataclasses

    if warm is not None:
        wl = dataclasses.replace(wl, warm_calls=warm)
    wl = prepare(wl)
    run = ProbeRun(
        wl=wl, spec_label=spec or wl.name or backend_label(wl.fn_or_module),
        ladder_layers=list(ladder if ladder is not None else wl.ladder), isolate=isolate, timeout=timeout,
        progress=progress, cuda=str(wl.device).startswith("cuda") and torch.cuda.is_available(),
    )
    err: SeamscopeError | None = None
    try:
        run.run_eager()
        run.run_compiled()
        run.run_ladder()
    except SeamscopeError as e:
        err = e
    except KeyboardInterrupt:
        run.error = "interrupted"
        err = Interrupted("interrupted; what was measured is written")
    return run.receipt(), err


class Interrupted(SeamscopeError):
    exit_code = 130
