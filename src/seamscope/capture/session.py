"""Live capture: observe every ``torch.compile`` in a process and fill a ledger, per call.

Four hooks, all cheap on the hot path:
- ``torch.compile`` is wrapped so that each call of a compiled callable from user code opens and
  closes a *call* (nested calls into compiled code are part of the outer call);
- callables compiled before the session began (decorators at import, ``model.compile()``) open and
  close calls through the entry and exit hook of their Dynamo context (``adapter.hook_compiled_calls``);
- every graph any backend compiles is wrapped (``adapter.wrap_compiled_graphs``) so that each run of
  it is a timed *region*, with the tensors and bytes it hands back (seam traffic);
- the structured-trace events Dynamo emits while compiling are fed to the same assembler that
  imports ``TORCH_TRACE`` logs, which yields compilations, break sites and failed guards.
Islands are what is left of a call's wall time; seamscope's own bookkeeping is measured and
reported as overhead, never hidden in an island.
"""

from __future__ import annotations

import contextlib
import functools
import os
import platform
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import msgspec

from .. import __version__, _native
from ..ingest.compile_events import CompileEventAssembler, needed
from ..model.builder import DEFAULT_CALL_CAP, DEFAULT_FIRST_CALLS, LedgerBuilder
from ..model.ledger import BreakSite, Compilation, Environment, Ledger, RunInfo
from ..model.receipt import Decision, Receipt
from ..model.spans import REGION
from . import adapter

_ACTIVE: Session | None = None


def active_session() -> Session | None:
    return _ACTIVE


class Session:
    """One observed run. Use as a context manager; ``ledger`` is set on exit."""

    def __init__(
        self,
        out: str | os.PathLike[str] | None = None,
        *,
        command: list[str] | None = None,
        input_trace_sha256: str | None = None,
        first_calls: int = DEFAULT_FIRST_CALLS,
        call_cap: int = DEFAULT_CALL_CAP,
        decision: Decision | None = None,
        cwd: str | None = None,
        write_html: bool = True,
        device: str = "auto",
    ) -> None:
        self.out = os.fspath(out) if out is not None else None
        self.command = command or []
        self.input_trace_sha256 = input_trace_sha256
        self.first_calls = first_calls
        self.call_cap = call_cap
        self.decision = decision
        self.cwd = cwd or os.getcwd()
        self.write_html = write_html
        if device not in ("auto", "off"):
            raise ValueError("device is 'auto' (time calls on CUDA where the model runs there) or 'off'")
        self.device_mode = "off" if os.environ.get("SEAMSCOPE_NO_DEVICE", "") not in ("", "0") else device
        self._device_probe = False
        """Whether region runs are still checked for CUDA inputs (then the device is attached)."""
        self._device_source: Any = None
        self.trace_filter = os.environ.get("SEAMSCOPE_FULL_TRACE") != "1"
        """Ask PyTorch only for the structured-trace records capture reads (set it to False before
        ``start()``, or ``SEAMSCOPE_FULL_TRACE=1``, to have every record built, as before)."""
        self.clock: Callable[[], int] = time.perf_counter_ns
        self.active = False
        self._interrupted = False
        self._live: LedgerBuilder | None = None
        """The builder while active, else None: the one attribute the region wrapper reads."""
        self.native = _native.NATIVE
        """The C hot path (``_speedups``), or None: Python wrappers, same figures. Set it to None
        before ``start()`` to compare."""
        self._lane: Any = None
        """The C lane while active: calls open and close there (those of a family excepted), and
        region timers record into its open call."""
        self.warnings: list[str] = []
        self.ledger: Ledger | None = None
        self.receipt_path: str | None = None
        self.last_receipt: Receipt | None = None
        self.on_call_end: list[Callable[[Session], None]] = []
        """Called with the session after every call it closes. Append to this list, do not
        replace it: the C lane holds this very list."""
        self._undo: list[Callable[[], None]] = []
        self._family: str | None = None
        self._depth = 0
        self._call_thread = 0
        """The thread of the call the Python path opened (``_depth`` 1)."""
        self._foreign_calls = 0
        self.outside_graph_runs = 0
        self.graphs_before = 0
        """Graphs compiled before the session began: not wrapped, so their runs are not timed."""
        """Graph runs while no call was open (a compiled backward excepted): calls not observed."""
        self._slot = [True]
        """The pure-Python path's open-call slot (``_claim``): a list, as its pop is atomic."""
        """Calls made on another thread while one was open: run, not observed (see ``build``)."""
        self._graph_index: dict[str, int] = {}
        self._compile_start: dict[str, int] = {}
        self._compile_options: dict[str, str] = {}
        self._backend: str | None = None
        self.builder: LedgerBuilder | None = None
        self.assembler: CompileEventAssembler | None = None

    # --- lifecycle ---------------------------------------------------------------------------

    @property
    def interrupted(self) -> bool:
        """Set by ``seamscope run``'s Ctrl-C handler. Library code can swallow the first
        KeyboardInterrupt (a ``__del__``, a weakref callback); the next call then raises it."""
        return self._interrupted

    @interrupted.setter
    def interrupted(self, value: bool) -> None:
        self._interrupted = value
        self._sync_lane()

    def _sync_lane(self) -> None:
        """Whether C may open calls: only in an active session, outside a family label, not
        interrupted (the Python path raises then)."""
        if self._lane is not None:
            self._lane.ready = (
                self.active and self.builder is not None and self._family is None and not self._interrupted
            )

    def __enter__(self) -> Session:
        self.start()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self.stop()
        if self.out is not None:
            self.write(self.out)

    def start(self) -> None:
        global _ACTIVE
        if _ACTIVE is not None and _ACTIVE is not self:
            raise RuntimeError("a seamscope session is already active in this process")
        import torch

        warn = adapter.version_warning()
        if warn:
            self.warnings.append(warn)
        if self.native is None and _native.WHY_NOT is not None:
            self.warnings.append(
                f"captured without the C hot path ({_native.WHY_NOT}): same figures, about 1 µs more "
                "per region crossing"
            )
        self.builder = LedgerBuilder(
            RunInfo(
                source="live",
                command=list(self.command),
                input_trace_sha256=self.input_trace_sha256,
                rank=_env_int("RANK"),
                world_size=_env_int("WORLD_SIZE"),
            ),
            Environment(
                seamscope_version=__version__,
                python_version=platform.python_version(),
                torch_version=str(torch.__version__),
                platform=f"{platform.system()} {platform.machine()}",
                device=_device(torch),
                dynamo_config=adapter.dynamo_settings(),
            ),
            clock=self.clock,
            first_calls=self.first_calls,
            call_cap=self.call_cap,
        )
        if self.native is not None:
            self._lane = self.native.Lane()
            self._lane.tensor_type = torch.Tensor  # seam traffic, in the calls kept in detail
            self._lane.owner = self
            self._lane.callbacks = self.on_call_end
            self._lane.error_text = _error_text
            self._lane.outside_run = self._foreign_run
            self.builder.attach_lane(self._lane, self.native.PlanSums)
        self.assembler = CompileEventAssembler(cwd=self.cwd, sink=self)
        for install in (self._install_trace, self._install_graphs, self._install_compile, self._install_calls):
            try:
                self._undo.append(install())
            except adapter.AdapterProblem as e:
                self.warnings.append(str(e))
        self._device_probe = self.device_mode == "auto" and _cuda_available(torch)
        self.active = True
        self._live = self.builder
        _ACTIVE = self
        self._sync_lane()

    def stop(self) -> None:
        global _ACTIVE
        if not self.active:
            return
        self.active = False
        self._live = None
        self._sync_lane()
        while self._undo:
            self._undo.pop()()
        if _ACTIVE is self:
            _ACTIVE = None
        b = self.builder
        if b is not None and b.in_call:  # interrupted inside a call: keep what was measured
            b.end_call(self.clock(), error="interrupted")
        self._device_probe = False
        if b is not None and b.device is not None:
            # one synchronize resolves the rest; none after Ctrl-C (their lanes say incomplete)
            try:
                b.device.finish(synchronize=not self._interrupted)
            except KeyboardInterrupt:  # Ctrl-C while waiting for the device: keep the host ledger
                self._interrupted = True
                b.device.finish(synchronize=False)
        if self._device_source is not None:
            self._device_source.close()
        if self._lane is not None:
            self._lane.spans = None
            self._lane.budget = 0
            self._lane.keep_detail = False
            self._lane.owner = self._lane.callbacks = None
        self.ledger = self.build()

    # --- results -----------------------------------------------------------------------------

    def build(self) -> Ledger:
        assert self.builder is not None, "session never started"
        ledger = self.builder.build()
        env = msgspec.structs.replace(
            ledger.environment, backend=self._backend, compile_options=dict(self._compile_options)
        )
        warnings = [*self.warnings, *ledger.run.warnings]
        foreign = self._foreign_calls + (self._lane.foreign_calls if self._lane is not None else 0)
        unobserved = self.outside_graph_runs
        if unobserved:
            warnings.append(
                f"{unobserved} compiled graph run(s) happened outside any observed call: a compiled "
                "callable seamscope could not hook ran them (one made with torch._dynamo.optimize, or "
                "with a torch.compile bound before the session began and called in it); compile it "
                "with torch.compile inside the session, or use seamscope run"
            )
        if foreign:
            warnings.append(
                f"{foreign} call(s) made on another thread while a call was open were run but not "
                "observed (one call is observed at a time per process); their graphs count as runs "
                "outside any call"
            )
        run = msgspec.structs.replace(ledger.run, warnings=warnings)
        return msgspec.structs.replace(ledger, environment=env, run=run)

    def receipt(self, **sections: Any) -> Receipt:
        from ..analyze.receipt import make_receipt

        return make_receipt(self.ledger or self.build(), self.decision, **sections)

    def write(self, out: str | os.PathLike[str]) -> str:
        from ..render.receipt_json import write_receipt_files

        receipt = self.receipt()
        self.receipt_path = write_receipt_files(receipt, out)
        self.last_receipt = receipt
        return self.receipt_path

    def _repr_html_(self) -> str:
        """In Jupyter: the report's overview and top findings, so far while it is open."""
        from ..render.notebook import notebook_html

        if self.builder is None:
            return "<p><strong>seamscope</strong> session (not started)</p>"
        receipt = self.last_receipt or self.receipt()
        return notebook_html(receipt, status="open: so far" if self.active else None, source_root=self.cwd)

    @contextlib.contextmanager
    def family(self, label: str | None) -> Iterator[None]:
        """Label the calls made inside (an input family, a probe phase, a length)."""
        old, self._family = self._family, label
        self._sync_lane()
        try:
            yield
        finally:
            self._family = old
            self._sync_lane()

    # --- hook 1: compiled callables, one call per top-level entry -------------------------------

    def _install_compile(self) -> Callable[[], None]:
        import torch

        original = torch.compile
        session = self

        @functools.wraps(original)
        def compile(model: Any = None, **kwargs: Any) -> Any:
            session._note_options(kwargs)
            if model is None:
                decorator = original(**kwargs)
                return lambda fn: session.track(decorator(fn))
            return session.track(original(model, **kwargs))

        compile.__wrapped__ = original  # type: ignore[attr-defined]
        torch.compile = compile

        def undo() -> None:
            torch.compile = original

        return undo

    def _note_options(self, kwargs: dict[str, Any]) -> None:
        backend = kwargs.get("backend", "inductor")
        name = backend if isinstance(backend, str) else getattr(backend, "__name__", type(backend).__name__)
        if self._backend is None:
            self._backend = name
        elif self._backend != name and name not in self._backend.split(","):
            self._backend += "," + name
        for k in ("mode", "dynamic", "fullgraph", "options"):
            if k in kwargs and kwargs[k] is not None:
                self._compile_options.setdefault(k, repr(kwargs[k]))

    def track(self, compiled: Any) -> Any:
        """Make each top-level call of ``compiled`` a ledger call."""
        import torch

        if isinstance(compiled, torch.nn.Module):
            inner = compiled.forward
            object.__setattr__(compiled, "forward", self._tracked(inner))
            return compiled
        if callable(compiled):
            return functools.wraps(compiled)(self._tracked(compiled))
        return compiled

    def _tracked(self, inner: Callable[..., Any]) -> Callable[..., Any]:
        session = self
        clock = self.clock
        is_compiling = adapter.is_compiling_fn()

        def slow(*args: Any, **kwargs: Any) -> Any:
            """The Python path: calls the C tracker cannot open (a family label, a call nested in
            one the builder opened, one due in detail while budgets watch...), or every call
            without the C hot path."""
            if is_compiling():  # first: Dynamo tracing this must not read (and guard on) the session
                return inner(*args, **kwargs)
            b = session.builder
            if session._depth:  # nested in the open call, or made on another thread meanwhile
                if session._call_thread != threading.get_ident():
                    session._foreign_calls += 1
                return inner(*args, **kwargs)
            if not session.active or b is None:
                return inner(*args, **kwargs)
            if session.interrupted:
                raise KeyboardInterrupt
            lane = session._lane
            if not session._claim():  # another thread's call is open (checked and taken at once)
                session._foreign_calls += 1
                return inner(*args, **kwargs)
            try:
                session._depth = 1
                session._call_thread = threading.get_ident()
                t0 = clock()
                b.begin_call(t0, session._family)
                if lane is not None and not b.detailed and b.device_call is None:
                    lane.spans = b.open_spans  # C region timers append there (detailed, timed: Python)
                b.overhead(t0, clock())  # opening the call is seamscope's time, not an island
                try:
                    out = inner(*args, **kwargs)
                except BaseException as e:
                    t2 = clock()
                    if lane is not None:
                        lane.spans = None
                    b.end_call(t2, error=_error_text(e))
                    raise
                t2 = clock()
                if lane is not None:
                    lane.spans = None
                b.end_call(t2)
            finally:
                session._depth = 0
                session._release()
            for cb in session.on_call_end:
                cb(session)
            return out

        if self.native is None or self._lane is None:
            return slow
        # C opens and closes the call (``_speedups.CallTracker``): it sums a steady one and hands
        # one due in detail (or that compiled, failed, fell back) to the builder whole. This shim
        # stays Python so that Dynamo, tracing a compiled caller, sees only ``inner``.
        tracker = self.native.CallTracker(inner, self._lane, slow)

        def call(*args: Any, **kwargs: Any) -> Any:
            if is_compiling():
                return inner(*args, **kwargs)
            return tracker(*args, **kwargs)

        return call

    # --- hook 1b: callables compiled before the session began --------------------------------------

    def _install_calls(self) -> Callable[[], None]:
        contexts = adapter.live_compile_contexts()
        if contexts:
            try:
                before = self.graphs_before = adapter.graphs_compiled_so_far()
            except adapter.AdapterProblem as e:
                self.warnings.append(str(e))
                before = 0
            if before:
                self.warnings.append(
                    f"Dynamo holds {before} graph(s) compiled before the session began: calls that run them "
                    "are observed, but those graphs are not timed as regions (their time counts as "
                    "islands, their breaks are not named); call torch.compiler.reset() before the "
                    "session to have them recompiled and timed"
                )
        return adapter.hook_compiled_calls(self._call_hook, contexts)

    def _call_hook(self, ctx: Any) -> Callable[[], Callable[[], None]]:
        """The entry hook of one compile context made before the session: each top-level call of
        its callables opens a call, closed by the cleanup it returns (Dynamo runs that in a
        ``finally``). A call nested in the open one is part of it; a call on another thread while
        one is open runs unobserved (counted), as for ``track``."""
        session = self
        clock = self.clock
        lane = self._lane
        backend = [adapter.context_backend_name(ctx)]

        def enter() -> Callable[[], None]:
            b = session.builder
            if not session.active or b is None:
                return _nothing
            if backend[0] is not None:
                session._note_options({"backend": backend.pop()})
                backend.append(None)
            if lane is not None:
                if lane.open:  # a call C opened: this one is nested in it, or another thread's
                    if not lane.here:
                        session._foreign_calls += 1
                    return _nothing
                if lane.ready and lane.enter():
                    handled = sys.exc_info()[1]

                    def close_c() -> None:
                        e = sys.exc_info()[1]
                        try:
                            lane.exit(None if e is None or e is handled else _error_text(e))
                            if e is None or e is handled:
                                for cb in tuple(session.on_call_end):
                                    cb(session)
                        except Exception:  # seamscope's failure must not replace the user's result
                            if e is None or e is handled:
                                raise

                    return close_c
            if session._depth:  # nested in the open call, or made on another thread meanwhile
                if session._call_thread != threading.get_ident():
                    session._foreign_calls += 1
                return _nothing
            if session.interrupted:
                # raised on exit: raising here would skip the exits of the hooks entered before
                return _interrupt
            if not session._claim():  # another thread's call is open
                session._foreign_calls += 1
                return _nothing
            session._depth = 1
            session._call_thread = threading.get_ident()
            try:
                t0 = clock()
                b.begin_call(t0, session._family)
                if lane is not None and not b.detailed:
                    lane.spans = b.open_spans  # C region timers append there (detailed: Python)
                b.overhead(t0, clock())
            except BaseException:
                session._depth = 0
                session._release()
                raise
            handled = sys.exc_info()[1]

            def close() -> None:
                t2 = clock()
                e = sys.exc_info()[1]
                failed = e is not None and e is not handled
                try:
                    if lane is not None:
                        lane.spans = None
                    if b.in_call:  # (a session stopped inside the call ended it already)
                        b.end_call(t2, error=_error_text(e) if failed and e is not None else None)
                finally:
                    session._depth = 0
                    session._release()
                if not failed:
                    for cb in tuple(session.on_call_end):
                        cb(session)

            return close

        return enter

    # --- hook 2: every run of every compiled graph is a region -----------------------------------

    def _install_graphs(self) -> Callable[[], None]:
        return adapter.wrap_compiled_graphs(self._wrap_graph)

    def _wrap_graph(
        self, compiled_fn: Callable[..., Any], compile_id: str | None, autograd: bool = True
    ) -> Callable[..., Any]:
        import torch

        cid = compile_id or "?"
        gi = self._graph_index.get(cid, -1) + 1
        self._graph_index[cid] = gi
        session = self
        clock = self.clock
        Tensor = torch.Tensor
        is_grad_enabled = torch.is_grad_enabled
        # a compiled backward to time: only from a backend that returns more than the FX graph
        # (aot_eager, inductor), for a graph compiled with autograd (checking costs ~1 µs a run)
        check_backward = autograd and adapter.may_have_compiled_backward(compiled_fn)

        def find_backward(out: Any) -> None:
            if is_grad_enabled():
                for t in out if isinstance(out, (list, tuple)) else (out,):
                    node = getattr(t, "grad_fn", None)
                    if node is not None:
                        session._hook_backward(node, cid)
                        break

        def region(*args: Any, **kwargs: Any) -> Any:
            b = session._live
            if b is None:
                return compiled_fn(*args, **kwargs)
            if session._device_probe:
                session._probe_device(b, args)
            dc = b.device_call
            if dc is not None and session._call_thread == threading.get_ident():
                entry = b.device.enter(dc, clock())  # timed on the device: events at entry and exit
            else:
                dc = None
            t0 = clock()
            out = compiled_fn(*args, **kwargs)
            t1 = clock()
            if dc is not None:
                b.device.exit(dc, cid, entry, t1)
            if check_backward:
                find_backward(out)
            spans = b.open_spans  # region_run, inlined: this is the per-crossing hot path
            if spans is None or (session._depth and session._call_thread != threading.get_ident()):
                if spans is None:
                    session.outside_graph_runs += 1
                b.outside_region(cid, "forward", t1 - t0, None)  # no call open, or another thread's
            elif b.detailed:
                # Seam traffic (what this region hands back to eager code), sampled: measured
                # in the calls kept in full detail, where it is reported.
                n = nbytes = 0
                if isinstance(out, (list, tuple)):
                    for t in out:
                        if isinstance(t, Tensor):
                            n += 1
                            nbytes += t.nbytes
                elif isinstance(out, Tensor):
                    n, nbytes = 1, out.nbytes
                spans.append((REGION, t0, t1, cid, gi, n, nbytes, clock()))  # model/spans.py's layout
            else:
                spans.append((REGION, t0, t1, cid, gi, None, None, clock()))
            return out

        if self.native is not None and self._lane is not None:
            # Steady calls not kept in detail: the same span, recorded by C (``_speedups.c``);
            # every other case goes to ``region`` above.
            timer = self.native.RegionTimer(
                compiled_fn, self._lane, cid, gi, region, find_backward if check_backward else None
            )
            # Dynamo's disable() wrapper asks every run for ``__name__``: a missing one costs a
            # raised and caught AttributeError per region crossing
            timer.__name__ = getattr(compiled_fn, "__name__", "compiled_graph")
            timer.__qualname__ = getattr(compiled_fn, "__qualname__", timer.__name__)
            return timer  # type: ignore[no-any-return]
        return region

    def _probe_device(self, b: LedgerBuilder, args: Any) -> None:
        """Attach the CUDA device source once a compiled graph runs on CUDA inputs (a model on
        CPU in a CUDA process keeps the CPU path); stop looking after the first calls."""
        from .device import cuda_device, holds_cuda_tensor

        if holds_cuda_tensor(args):
            import torch

            self._device_probe = False
            source = cuda_device(torch)
            if source is not None:
                self._device_source = source
                b.attach_device(source)
        elif b.call_count >= self.first_calls:
            self._device_probe = False

    def _claim(self) -> bool:
        """Take the one open-call slot for this thread, atomically under the GIL (a check then a
        set in Python would let two threads open calls at once)."""
        if self._lane is not None:
            return bool(self._lane.claim())
        try:
            self._slot.pop()
        except IndexError:
            return False
        return True

    def _release(self) -> None:
        if self._lane is not None:
            self._lane.release()
        elif not self._slot:
            self._slot.append(True)

    def _foreign_run(self, compile_id: str, duration_ns: int) -> None:
        """C's report of a graph run on another thread than the open call's."""
        b = self._live
        if b is not None:
            b.outside_region(compile_id, "forward", duration_ns, None)

    def _hook_backward(self, node: Any, cid: str) -> None:
        """Time the compiled backward of this region when autograd runs it (outside the call)."""
        if "CompiledFunction" not in type(node).__name__ and "CompiledFunction" not in node.name():
            return
        b = self.builder
        call_index = b.current_call_index if b is not None else None
        clock = self.clock
        start: list[int] = []

        def pre(grad_outputs: Any) -> None:
            start.append(clock())

        def post(grad_inputs: Any, grad_outputs: Any) -> None:
            if start and self.builder is not None:
                self.builder.outside_region(cid, "backward", clock() - start.pop(), call_index)

        node.register_prehook(pre)
        node.register_hook(post)

    # --- hook 3: compile events (the same stream TORCH_TRACE writes) ----------------------------

    def _install_trace(self) -> Callable[[], None]:
        clock = self.clock

        def on_event(meta: dict[str, Any], payload: str | None) -> None:
            if self.active and self.assembler is not None:
                self.assembler.feed(meta, payload, clock())

        if not self.trace_filter:
            return adapter.add_trace_handler(on_event)
        # PyTorch builds only the records (and payloads) the assembler reads, unless another
        # reader (TORCH_TRACE, the user's handler) is attached: then every record, as without us.
        remove = adapter.add_trace_handler(on_event, wants=needed)
        try:
            unfilter = adapter.filter_trace_records()
        except adapter.AdapterProblem as e:
            self.warnings.append(str(e))
            return remove

        def undo() -> None:
            remove()
            unfilter()

        return undo

    def on_compile_start(self, compile_id: str, t_ns: int | None) -> None:
        if t_ns is not None:
            self._compile_start.setdefault(compile_id, t_ns)

    def on_compilation(self, compilation: Compilation, t_ns: int | None) -> None:
        b = self.builder
        if b is None:
            return
        end = t_ns if t_ns is not None else self.clock()
        start = self._compile_start.pop(compilation.compile_id, end)
        b.set_compilation(msgspec.structs.replace(compilation, start_ns=start - b.origin))
        b.compile_span(compilation.compile_id, start, end)
        if compilation.is_recompile:
            b.guard_miss(compilation.compile_id, start)
        if compilation.status != "ok":
            reason = (compilation.fail_reason or compilation.fail_type or compilation.status).splitlines()[0]
            b.fallback(compilation.compile_id, reason, end)

    def on_site(self, site: BreakSite) -> None:
        if self.builder is not None:
            self.builder.set_break_site(site)


def session(out: str | os.PathLike[str] | None = None, **kwargs: Any) -> Session:
    """``with seamscope.session(out=...) as s:`` observes every ``torch.compile`` inside."""
    return Session(out, **kwargs)


def observe(fn_or_module: Any, **compile_kwargs: Any) -> Any:
    """``torch.compile(fn_or_module, **compile_kwargs)``, observed by the session open when it is
    called.

    Inside an active session its calls go to that session's ledger. Outside one it is a plain
    compiled callable: nothing is started or patched, and once a session opens (``session()``,
    ``budget()``, the pytest marker) its calls go to that session.
    """
    import torch

    s = _ACTIVE
    compile_fn = getattr(torch.compile, "__wrapped__", torch.compile)
    if s is None:
        return compile_fn(fn_or_module, **compile_kwargs)
    s._note_options(compile_kwargs)
    return s.track(compile_fn(fn_or_module, **compile_kwargs))


def _nothing() -> None:
    """The exit of a call not opened (nested, on another thread, no session)."""


def _interrupt() -> None:
    """The exit of a call made after Ctrl-C that library code swallowed: raise it again."""
    if sys.exc_info()[1] is None:
        raise KeyboardInterrupt


def _error_text(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}".splitlines()[0][:500]


def _env_int(name: str) -> int | None:
    v = os.environ.get(name)
    try:
        return int(v) if v is not None else None
    except ValueError:
        return None


def _cuda_available(torch: Any) -> bool:
    try:
        return bool(torch.cuda.is_available())
    except Exception:
        return False


def _device(torch: Any) -> str:
    try:
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            return f"cuda:{torch.cuda.current_device()} {torch.cuda.get_device_name()}"
    except Exception:
        pass
    return "cpu"


__all__ = ["Session", "session", "observe", "active_session"]
