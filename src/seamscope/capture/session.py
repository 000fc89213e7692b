"""Live capture: observe every ``torch.compile`` in a process and fill a ledger, per call.

Four hooks, all cheap on the hot path:
- ``torch.compile`` is wrapped so that each call of a compiled callable from user code opens and
  closes a *call* (nested calls into compiled code are part of the outer call; ``calls.py``);
- callables compiled before the session began (decorators at import, ``model.compile()``) open and
  close calls through the entry and exit hook of their Dynamo context (``adapter.hook_compiled_calls``;
  ``calls.py``);
- every graph any backend compiles is wrapped (``adapter.wrap_compiled_graphs``) so that each run of
  it is a timed *region*, with the tensors and bytes it hands back (seam traffic; ``regions.py``);
- the structured-trace events Dynamo emits while compiling are fed to the same assembler that
  imports ``TORCH_TRACE`` logs, which yields compilations, break sites and failed guards (here).
Islands are what is left of a call's wall time; seamscope's own bookkeeping is measured and
reported as overhead, never hidden in an island. What the hooks share is ``state.py``'s.
"""

from __future__ import annotations

import contextlib
import os
import platform
from collections.abc import Callable, Iterator
from typing import Any

import msgspec

from .. import _native
from .._version import __version__
from ..ingest.compile_events import CompileEventAssembler, needed
from ..model.builder import LedgerBuilder
from ..model.ledger import (
    TRACKED_PACKAGES,
    BreakSite,
    Compilation,
    CompileCacheState,
    Environment,
    Ledger,
    ModuleRepeat,
    RunInfo,
    RunStatus,
)
from ..model.normalize import normalize_path
from ..model.receipt import Receipt
from . import adapter
from .calls import CallHooks, error_text
from .regions import RegionHooks

_ACTIVE: Session | None = None


def active_session() -> Session | None:
    return _ACTIVE


class Session(CallHooks, RegionHooks):
    """One observed run. Use as a context manager; ``ledger`` is set on exit.

    Its fields are ``SessionState``'s; its call hooks ``CallHooks``', its region hooks
    ``RegionHooks``'. Here: starting and stopping them, the compile events, the results."""

    # --- lifecycle ---------------------------------------------------------------------------

    def __enter__(self) -> Session:
        from .lifecycle import ObservedRun

        host = self._holder_of_out()
        if host is not None:  # `seamscope run` (or a session) already observes into this folder
            self._host = host
            note = (f"a seamscope.session(out={self.out}) opened during this run asked for this run's own "
                    "folder, and joined this run: the calls made inside it are in this receipt")
            if note not in host.warnings:
                host.warnings.append(note)
            return self
        run = ObservedRun(self, self.out, self.checkpoint_every)
        run.__enter__()  # the folder checked and locked before the body runs (UnusableInput)
        self._run = run
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        host, self._host = self._host, None
        if host is not None:
            self.ledger = host.build()  # the run's so far, the calls made inside included
            return
        run, self._run = self._run, None
        if run is not None:
            run.end(exc)  # the user's exception propagates unchanged; a write failure goes with it

    def _holder_of_out(self) -> Session | None:
        """The session open around this one when it writes into the folder this one asks for (the
        README's ``session(out="seamscope-out")`` under ``seamscope run``, whose default folder is
        the same): this one joins it instead of being refused the folder."""
        host = _ACTIVE
        held = getattr(host, "output", None)
        if self.out is None or held is None or host is self:
            return None
        same = os.path.realpath(os.path.abspath(self.out)) == os.path.realpath(held.folder)
        return host if same else None

    def start(self) -> None:
        global _ACTIVE
        if _ACTIVE is not None and _ACTIVE is not self:
            # A session opened inside another (a script's own ``with seamscope.session(...)`` under
            # ``seamscope run``): the outer one pauses until this one stops, then goes on.
            _ACTIVE._suspend(self)
            self._outer = _ACTIVE
            _ACTIVE = None
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
                compile_cache=_compile_cache(),
                packages=installed_versions(),
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
            self._lane.error_text = error_text
            self._lane.outside_run = self._foreign_run
            self._lane.label_nodes = True  # until the builder lists no more backward runs
            self.builder.attach_lane(self._lane, self.native.PlanSums)
        try:
            hints = adapter.live_hint_table()
        except adapter.AdapterProblem as e:
            hints = None
            self.warnings.append(str(e))
        self.assembler = CompileEventAssembler(cwd=self.cwd, sink=self, hints=hints)
        self._install_all()
        self._device_probe = self.device_mode == "auto" and _cuda_available(torch)
        self.active = True
        self._live = self.builder
        _ACTIVE = self
        self._sync_lane()

    def _install_all(self, resume: bool = False) -> None:
        """The hooks; on resuming after a session opened inside this one, not the timers of the
        graphs compiled before (this session's own keep theirs; the inner one's are its own)."""
        installs = (self._install_trace, self._install_graphs, self._install_live_graphs, self._install_compile,
                    self._install_calls, self._install_pg, adapter.report_every_failed_guard)
        for install in installs:
            if resume and install == self._install_live_graphs:
                continue
            try:
                self._undo.append(install())
            except adapter.AdapterProblem as e:
                self.warnings.append(str(e))

    def _suspend(self, inner: Session) -> None:
        """Pause while ``inner`` (a session opened inside this one) observes: hooks removed, the
        ledger kept; ``_resume`` goes on. Not inside an observed call."""
        b = self.builder
        if not self.active or (b is not None and b.in_call):
            raise RuntimeError("a seamscope session is already active in this process (and inside a call)")
        self.active = False
        self._live = None
        self._sync_lane()
        while self._undo:
            self._undo.pop()()
        where = f" (out={inner.out})" if inner.out is not None else ""
        note = (f"calls made inside a seamscope.session(){where} opened during this run are in that "
                "session's receipt, not in this one")
        if note not in self.warnings:
            self.warnings.append(note)

    def _resume(self) -> None:
        """Observe again once the session opened inside this one has stopped."""
        global _ACTIVE
        said = set(self.warnings)
        n = len(self.warnings)
        self._install_all(resume=True)
        self.warnings[n:] = [w for w in self.warnings[n:] if w not in said]  # each said once
        self.active = True
        self._live = self.builder
        _ACTIVE = self
        self._sync_lane()

    def stop(self) -> None:
        try:
            self._stop()
        finally:
            outer, self._outer = self._outer, None
            if outer is not None:
                outer._resume()

    def _stop(self) -> None:
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

    def build(self, status: RunStatus | None = None) -> Ledger:
        """The ledger so far; its ``run.status`` is ``status``, else the session's own."""
        assert self.builder is not None, "session never started"
        self._take_backward()
        ledger = self.builder.build()
        env = msgspec.structs.replace(
            ledger.environment, backend=self._backend, compile_options=dict(self._compile_options)
        )
        warnings = [*self.warnings, *ledger.run.warnings]
        foreign = self.foreign_calls
        unobserved = self.outside_graph_runs
        if unobserved and foreign:  # most likely the other threads' calls: not a callable left unhooked
            warnings.append(
                f"{unobserved} compiled graph run(s) happened outside any observed call, and {foreign} "
                "call(s) were made on another thread while a call was open: such a call runs unobserved (one "
                "call is observed at a time per process) and its graphs count as runs outside any call, so "
                "these runs are most likely those calls' (else a compiled callable seamscope could not hook "
                "ran them: one made with torch._dynamo.optimize, or bound before the session began)"
            )
        elif unobserved:
            warnings.append(
                f"{unobserved} compiled graph run(s) happened outside any observed call: a compiled "
                "callable seamscope could not hook ran them (one made with torch._dynamo.optimize, or "
                "with a torch.compile bound before the session began and called in it); compile it "
                "with torch.compile inside the session, or use seamscope run"
            )
        if foreign and not unobserved:
            warnings.append(
                f"{foreign} call(s) made on another thread while a call was open were run but not "
                "observed (one call is observed at a time per process); their graphs count as runs "
                "outside any call"
            )
        run = msgspec.structs.replace(ledger.run, warnings=warnings, untimed_graphs=self.untimed_graphs)
        pg = self._pg_timeout()
        if pg is not None:
            run = msgspec.structs.replace(run, pg_timeout_ns=pg[0], pg_backend=pg[1])
        status = status if status is not None else self.status
        if status is not None:
            run = msgspec.structs.replace(run, status=status)
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

    # --- hook 3: compile events (the same stream TORCH_TRACE writes) ----------------------------

    def _install_pg(self) -> Callable[[], None]:
        """Keep the process group's timeout when the script destroys its group before the end."""
        def record(got: tuple[int, str]) -> None:
            self._pg_seen = got

        return adapter.watch_process_group(record)

    def _pg_timeout(self) -> tuple[int, str] | None:
        try:
            got = adapter.process_group_timeout()
        except adapter.AdapterProblem as e:
            if str(e) not in self.warnings:
                self.warnings.append(str(e))
            got = None
        return got if got is not None else getattr(self, "_pg_seen", None)

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
        modules = _module_repeats(self._census.pop(compilation.compile_id, []), self.cwd)
        b.set_compilation(msgspec.structs.replace(
            compilation, start_ns=start - b.origin, modules=modules, user_frame=self._namer.name(compilation)))
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


def installed_versions() -> dict[str, str]:
    """The versions of :data:`TRACKED_PACKAGES` installed beside torch (read from their metadata,
    not imported: the script may import them later, or never)."""
    from importlib import metadata

    out = {}
    for name in TRACKED_PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


def _compile_cache() -> CompileCacheState | None:
    """Inductor's cache directory and its entries, before the user's code runs."""
    path = adapter.inductor_cache_dir()
    if path is None:
        return None
    fx, aot = adapter.cache_entries(path)
    return CompileCacheState(dir=normalize_path(path, os.getcwd()), fx_entries=fx, aot_entries=aot)


def _module_repeats(found: list[dict[str, Any]], cwd: str) -> list[ModuleRepeat]:
    """One compilation's census (one entry per graph and class), merged per class."""
    merged: dict[str, ModuleRepeat] = {}
    for d in found:
        m = ModuleRepeat(**{**d, "file": normalize_path(d["file"], cwd)})
        prev = merged.get(m.cls)
        if prev is not None:  # the same class in another graph of the compilation (after a break)
            m = msgspec.structs.replace(
                prev, instances=prev.instances + m.instances, nodes=prev.nodes + m.nodes,
                nodes_min=min(prev.nodes_min, m.nodes_min), nodes_max=max(prev.nodes_max, m.nodes_max),
                graph_nodes=prev.graph_nodes + m.graph_nodes, kv_cache=prev.kv_cache or m.kv_cache,
            )
        merged[m.cls] = m
    return sorted(merged.values(), key=lambda m: (-m.nodes, m.cls))


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
