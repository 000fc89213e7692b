"""Capture's call hooks: each top-level call of a compiled callable is one ledger call.

- ``torch.compile`` is wrapped while a session is active (``_install_compile``), so that every
  callable compiled inside is tracked (``track``): C opens and closes its calls
  (``_speedups.CallTracker``) where it can, the Python path (``_tracked``'s ``slow``) the others;
- callables compiled before the session began (decorators at import, ``model.compile()``) open and
  close calls through the entry and exit hook of their Dynamo context (``_call_hook``).

A call nested in the open one is part of it; a call made on another thread while one is open runs
unobserved and is counted.
"""

from __future__ import annotations

import functools
import sys
import threading
from collections.abc import Callable
from typing import Any

from . import adapter
from .state import SessionState


def _option_text(value: Any) -> str:
    """An option as written: a function in ``options`` (``guard_filter_fn``) by its qualified name,
    not its repr (which holds a memory address)."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {_option_text(v)}" for k, v in value.items()) + "}"
    if callable(value) and hasattr(value, "__qualname__") and hasattr(value, "__module__"):
        return f"{value.__module__}.{value.__qualname__}"
    return repr(value)


def is_block_compile(target: Any) -> bool:
    """Whether ``torch.compile`` got a module's ``_call_impl``: ``nn.Module.compile`` (``block.compile()``)."""
    return getattr(target, "__name__", None) == "_call_impl" and getattr(target, "__self__", None) is not None


class CallHooks(SessionState):
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
            if not session.tracks_blocks and is_block_compile(model):
                return original(model, **kwargs)
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
        for k in ("mode", "dynamic", "fullgraph", "options", "recompile_limit", "isolate_recompiles",
                  *adapter.SHAPES_ARGUMENTS):
            if k in kwargs and kwargs[k] is not None:
                self._compile_options.setdefault(k, _option_text(kwargs[k]))

    def note_compile_setting(self, name: str, text: str) -> None:
        """A setting a remedy flag gave the run's compiled callables (``--skip-guard-eval-unsafe-after``),
        recorded with the compile options (so ``diff`` shows it)."""
        self._compile_options[name] = text

    def track(self, compiled: Any) -> Any:
        """Make each top-level call of ``compiled`` a ledger call."""
        import torch

        if isinstance(compiled, torch.nn.Module):
            inner = compiled.forward
            # with forward's signature: transformers' generate reads it (no logits_to_keep without it)
            object.__setattr__(compiled, "forward", functools.wraps(inner)(self._tracked(inner)))
            self._hook_context(getattr(compiled, "dynamo_ctx", None))
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
                    return _foreign(session, inner, args, kwargs)
                return inner(*args, **kwargs)
            if not session.active or b is None:
                return inner(*args, **kwargs)
            if session.interrupted:
                raise KeyboardInterrupt
            lane = session._lane
            if not session._claim():  # another thread's call is open (checked and taken at once)
                return _foreign(session, inner, args, kwargs)
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
                    b.end_call(t2, error=error_text(e))
                    raise
                t2 = clock()
                if lane is not None:
                    lane.spans = None
                b.end_call(t2)
            finally:
                session._depth = 0
                session._release()
            for cb in tuple(session.on_call_end):  # a callback may remove itself
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

    def _hook_context(self, ctx: Any) -> None:
        """Observe what else a compiled module's context compiles: ``c.dynamo_ctx(step)``, as
        PyTorch Lightning's ``from_compiled`` builds its steps, runs through that context, not
        through the module's ``forward`` (a call of the module itself is opened by ``track``
        first; the hook then sees it open and nests)."""
        if ctx is None or not self.active:
            return
        try:
            self._undo.append(adapter.hook_compiled_calls(self._call_hook, [ctx]))
        except adapter.AdapterProblem:
            self.warnings.append(
                "this Dynamo's compile contexts have no enter_exit_hooks list: callables compiled with a "
                "compiled module's dynamo_ctx (Lightning's from_compiled) are not observed")

    # --- hook 1b: callables compiled before the session began --------------------------------------

    def _install_calls(self) -> Callable[[], None]:
        contexts = adapter.live_compile_contexts()
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
                        return _foreign_close(session)
                    return _nothing
                if lane.ready and lane.enter():
                    handled = sys.exc_info()[1]

                    def close_c() -> None:
                        e = sys.exc_info()[1]
                        try:
                            lane.exit(None if e is None or e is handled else error_text(e))
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
                    return _foreign_close(session)
                return _nothing
            if session.interrupted:
                # raised on exit: raising here would skip the exits of the hooks entered before
                return _interrupt
            if not session._claim():  # another thread's call is open
                session._foreign_calls += 1
                return _foreign_close(session)
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
                        b.end_call(t2, error=error_text(e) if failed and e is not None else None)
                finally:
                    session._depth = 0
                    session._release()
                if not failed:
                    for cb in tuple(session.on_call_end):
                        cb(session)

            return close

        enter_type = getattr(self.native, "ContextEnter", None) if lane is not None else None
        if enter_type is not None:  # a call nested in the one C opened: C's no-op, no Python frame
            return enter_type(lane, enter, self.native.nothing)  # type: ignore[union-attr,no-any-return]
        return enter


def _nothing() -> None:
    """The exit of a call not opened (nested, on another thread, no session)."""


def _foreign(session: Any, inner: Callable[..., Any], args: Any, kwargs: Any) -> Any:
    """A call made on another thread while one is open: run, not observed, then
    ``session.foreign_exit`` (watch mode raises there what this call compiled)."""
    session._foreign_calls += 1
    out = inner(*args, **kwargs)
    done = session.foreign_exit
    if done is not None:
        done()
    return out


def _foreign_close(session: Any) -> Callable[[], None]:
    """The exit of a context call made on another thread while one is open (``_foreign``)."""
    done = session.foreign_exit
    if done is None:
        return _nothing
    handled = sys.exc_info()[1]

    def close() -> None:
        e = sys.exc_info()[1]
        if e is None or e is handled:
            done()

    return close


def _interrupt() -> None:
    """The exit of a call made after Ctrl-C that library code swallowed: raise it again."""
    if sys.exc_info()[1] is None:
        raise KeyboardInterrupt


def error_text(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}".splitlines()[0][:500]
