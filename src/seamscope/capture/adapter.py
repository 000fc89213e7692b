"""Every use of a private PyTorch API, in one place.

PyTorch's internals change between releases. Each function here does one thing, is tested on its
own (tests/test_adapter.py), and degrades with a message instead of a crash when the internal it
needs is missing: capture then records what it still can and says what it could not.

Used internals (torch 2.9–2.14 were read; 2.13 is tested):
- ``torch._logging._internal.trace_log``: the structured-trace logger (``TORCH_TRACE``'s source).
  Records are emitted only while it has a handler.
- ``torch._logging._internal.trace_structured(name, metadata_fn, *, payload_fn, ...)``: the one
  function every record goes through; while any handler is attached it builds each record's
  metadata and payload (readable graphs, generated code...). Capture puts a filter in front of it
  (``filter_trace_records``) so that only what seamscope reads is built. It stands aside for any
  other reader; PyTorch's ``LazyTraceHandler`` without a directory (``TORCH_TRACE`` unset) is not
  one. Dynamo's break-reason ``payload_fn`` (a closure over ``user_stack_trace``) is read to build
  that payload without the compiler's frames (``lean_break_reason``).
- ``torch._dynamo.output_graph.OutputGraph.call_user_compiler``: the single point where Dynamo
  hands a graph to any backend; wrapping its result gives a hook on every run of that graph.
- ``torch._guards.CompileContext.current_compile_id``: the ``x/y`` id inside a compilation.
- ``torch._dynamo.config``: the settings that decide behaviour (read only).
- ``torch._dynamo.eval_frame.OptimizeContext.enter_exit_hooks``: the functions every call of a
  callable compiled by ``torch.compile`` runs on entry (each returns the cleanup the call runs on
  exit, in a ``finally``). Appending one to every live context (found by a ``gc`` scan) observes
  callables compiled before capture started: at import, ``model.compile()``, in another module.
- ``torch._dynamo.config`` and ``torch.compiler.config.dynamic_sources`` set for one run by
  ``run``'s remedy flags; ``torch._dynamo.variables.builder._parse_source_entry`` tells whether
  this torch reads a per-dimension ``:N`` suffix there, and the debug record that module's logger
  writes when a source is marked dynamic names the frames a ``--mark-dynamic`` changed (only
  torch 2.13 was checked; without either, ``--mark-dynamic`` says what is missing).
- ``torch._dynamo.convert_frame.input_codes`` (weak references to every code object Dynamo
  converted) and ``torch._dynamo.eval_frame._debug_get_cache_entry_list``: the live cache entries,
  whose code names the graphs Dynamo can run now (``graphs_compiled_so_far``).
- the attributes ``torch._dynamo.disable`` sets on its wrapper (``_torchdynamo_disable``,
  ``_torchdynamo_orig_callable``...): a backend's graph already disabled is unwrapped before
  seamscope wraps it, as Dynamo's ``innermost_fn`` would.
"""

from __future__ import annotations

import builtins
import inspect
import logging
import sys
import types
from collections.abc import Callable
from typing import Any

TESTED_VERSIONS = ((2, 9), (2, 14))


class AdapterProblem(Exception):
    """An internal is missing or changed; the message says what capture will lack."""


def torch_version() -> tuple[str, tuple[int, int]]:
    import torch

    v = torch.__version__
    try:
        major, minor = (int(p) for p in v.split("+")[0].split(".")[:2])
    except ValueError:
        major, minor = 0, 0
    return v, (major, minor)


def version_warning() -> str | None:
    v, mm = torch_version()
    lo, hi = TESTED_VERSIONS
    if not (lo <= mm <= hi):
        return (
            f"torch {v} is outside the versions seamscope was tested with "
            f"({lo[0]}.{lo[1]}–{hi[0]}.{hi[1]}); capture may be incomplete"
        )
    return None


# --- structured trace, in process ---------------------------------------------------------------


def trace_logger() -> logging.Logger:
    try:
        from torch._logging._internal import trace_log
    except ImportError as e:  # pragma: no cover - depends on torch version
        raise AdapterProblem(f"no structured trace logger ({e}): compile events unavailable") from e
    return trace_log


TraceWants = Callable[[str, "str | None"], int]
"""``wants(kind, artifact_name)``: what a handler reads of a record of that kind: 0 nothing,
1 its metadata, 2 its metadata and payload (``artifact_name`` only for ``artifact`` records)."""


class _TraceHandler(logging.Handler):
    def __init__(
        self, on_event: Callable[[dict[str, Any], str | None], None], wants: TraceWants | None = None
    ) -> None:
        super().__init__(level=logging.DEBUG)
        self._on_event = on_event
        self.seamscope_wants = wants
        """Read by the filter in front of ``trace_structured``: None means every record, whole."""

    def emit(self, record: logging.LogRecord) -> None:
        meta = getattr(record, "metadata", None)
        if isinstance(meta, dict):
            try:
                self._on_event(meta, getattr(record, "payload", None))
            except Exception:  # never break the user's compile
                logging.getLogger("seamscope").debug("trace event handling failed", exc_info=True)


def add_trace_handler(
    on_event: Callable[[dict[str, Any], str | None], None], wants: TraceWants | None = None
) -> Callable[[], None]:
    """Receive structured-trace events in process; returns the function that removes it.

    ``wants`` declares which records (and which payloads) the handler reads; with
    :func:`filter_trace_records` installed, PyTorch then builds nothing else while this handler is
    the only reader. Without ``wants`` it receives every record, whole.
    """
    log = trace_logger()
    handler = _TraceHandler(on_event, wants)
    old_level = log.level
    log.setLevel(logging.DEBUG)
    log.addHandler(handler)

    def remove() -> None:
        log.removeHandler(handler)
        if not log.handlers:
            log.setLevel(old_level)

    return remove


# --- a hook on every call of a callable compiled before capture started --------------------------


def _optimize_context_type() -> type:
    try:
        from torch._dynamo.eval_frame import OptimizeContext
    except ImportError as e:  # pragma: no cover - depends on torch version
        raise AdapterProblem(
            f"no Dynamo OptimizeContext ({e}): calls of callables compiled before the session "
            "began are not observed"
        ) from e
    return OptimizeContext  # type: ignore[no-any-return]


def live_compile_contexts() -> list[Any]:
    """Every live context ``torch.compile`` made (one per compiled callable still referenced).

    A scan of the objects the garbage collector tracks: about 0.1 s over 300k objects.
    """
    import gc

    kind = _optimize_context_type()
    # type(), not isinstance(): a proxy object's __class__ may run arbitrary code
    return [o for o in gc.get_objects() if issubclass(type(o), kind)]


def hook_compiled_calls(
    enter_for: Callable[[Any], Callable[[], Callable[[], Any]]], contexts: list[Any] | None = None
) -> Callable[[], None]:
    """Run ``enter()`` on entry to every call of a callable compiled so far, and the function it
    returns on exit (also when the call raises: ``sys.exc_info()`` then holds the exception).

    ``enter_for(context)`` makes the ``enter`` of one compile context. ``contexts``: the contexts
    to hook (default: every live one). Dynamo runs the hook only for a real call, never while
    tracing a compiled caller (it inlines the callee). Returns the function that removes every
    hook added. Raises :class:`AdapterProblem` when the contexts carry no hook list.
    """
    found = live_compile_contexts() if contexts is None else contexts
    hooked: list[tuple[list[Any], Any]] = []
    for ctx in found:
        hooks = getattr(ctx, "enter_exit_hooks", None)
        if not isinstance(hooks, list):
            if not hooked:
                raise AdapterProblem(
                    "Dynamo's compile contexts have no enter_exit_hooks list: calls of callables "
                    "compiled before the session began are not observed"
                )
            continue
        enter = enter_for(ctx)
        enter.seamscope_hook = True  # type: ignore[attr-defined]
        hooks.append(enter)
        hooked.append((hooks, enter))

    def undo() -> None:
        for hooks, enter in hooked:
            for i in range(len(hooks) - 1, -1, -1):
                if hooks[i] is enter:
                    del hooks[i]
        hooked.clear()

    return undo


def _no_payload() -> None:
    return None


def _make_trace_filter(original: Callable[..., None], log: logging.Logger) -> Callable[..., None]:
    def trace_structured(name: str, metadata_fn: Any = dict, **kwargs: Any) -> None:
        handlers = log.handlers
        if not handlers:
            return original(name, metadata_fn, **kwargs)  # nothing is built (PyTorch checks)
        for h in handlers:
            if getattr(h, "seamscope_wants", None) is None:
                # another reader (TORCH_TRACE's file, a user's handler): every record, whole
                return original(name, metadata_fn, **kwargs)
        artifact = None
        if name == "artifact":
            meta = metadata_fn()  # a name and an encoding: what to build depends on the name
            artifact = meta.get("name") if isinstance(meta, dict) else None
            metadata_fn = lambda: meta  # noqa: E731 - built once, handed on
        need = 0
        for h in handlers:
            try:
                need = max(need, int(h.seamscope_wants(name, artifact)))  # type: ignore[attr-defined]
            except Exception:
                need = 2
        if need <= 0:
            return None
        if need == 1:
            kwargs["payload_fn"] = _no_payload
        elif artifact == "dynamo_graph_break_reason" and "payload_fn" in kwargs:
            kwargs["payload_fn"] = lean_break_reason(kwargs["payload_fn"])
        return original(name, metadata_fn, **kwargs)

    trace_structured.__wrapped__ = original  # type: ignore[attr-defined]
    trace_structured.__doc__ = original.__doc__
    return trace_structured


def lean_break_reason(payload_fn: Callable[[], Any]) -> Callable[[], Any]:
    """The payload of a ``dynamo_graph_break_reason`` record without the frames of Dynamo's own
    traceback, when it is built the way Dynamo builds it (checked on torch 2.13 by a test that fails
    when it is not); any other ``payload_fn`` is returned as it is.

    Dynamo writes the break's message and the user's stack, then ``traceback.format_exc()``: the
    exception chain with every frame of the compiler's stack, each with its source line (about
    10 ms a break; most of what structured logging costs on a model with many breaks). The ledger
    reads the message, the user's stack and the break's ``gb`` code, never those frames. The lean
    payload keeps each exception of the chain, its message and the lines that join them, in the
    same order, with the frames left out; it is parsed into the same break site (a test parses
    both on real breaks).
    """
    code = getattr(payload_fn, "__code__", None)
    cells = getattr(payload_fn, "__closure__", None)
    if (
        code is None
        or not cells
        or code.co_freevars != ("user_stack_trace",)
        or code.co_names != ("traceback", "format_exc")
        or "\n" not in code.co_consts
    ):
        return payload_fn
    cell = cells[0]

    def lean() -> Any:
        try:
            head = cell.cell_contents
        except ValueError:  # pragma: no cover - the variable was never set
            return payload_fn()
        exc = sys.exc_info()[1]
        if not isinstance(head, str) or exc is None:
            return payload_fn()
        chain = exception_chain_text(exc)
        return payload_fn() if chain is None else f"{head}\n{chain}"

    return lean


def exception_chain_text(exc: BaseException) -> str | None:
    """``traceback.format_exception(exc)`` less the stack frames: the chain's messages, each
    after its ``Traceback (most recent call last):`` line, in the order Python prints them. None
    for an exception group (printed otherwise)."""
    import traceback

    chain: list[tuple[str | None, BaseException]] = []  # outermost first, with what joins it
    seen: set[int] = set()
    e: BaseException | None = exc
    group = getattr(builtins, "BaseExceptionGroup", ())
    while e is not None:
        if isinstance(e, group):
            return None
        seen.add(id(e))
        cause, context = e.__cause__, e.__context__
        nxt: BaseException | None = None
        msg: str | None = None
        if cause is not None and id(cause) not in seen:
            msg, nxt = traceback._cause_message, cause  # type: ignore[attr-defined]
        elif context is not None and not e.__suppress_context__ and id(context) not in seen:
            msg, nxt = traceback._context_message, context  # type: ignore[attr-defined]
        chain.append((msg, e))
        e = nxt
    out: list[str] = []
    for m, x in reversed(chain):
        if m is not None:
            out.append(m)
        if x.__traceback__ is not None:
            out.append("Traceback (most recent call last):\n")
        out.extend(traceback.format_exception_only(type(x), x))
    return "".join(out)


_FILTER: list[Any] = []
"""``[original, filter, installs, trace logger]`` while :func:`filter_trace_records` is installed."""


def _rebind(old: Any, new: Any) -> int:
    """Point every loaded module's global ``trace_structured`` that is ``old`` at ``new``.

    Modules bind it at import (``from torch._logging import trace_structured``), so replacing
    the attribute of ``torch._logging`` alone would reach only the callers that look it up there.
    """
    n = 0
    for mod in list(sys.modules.values()):
        try:
            d = vars(mod)
        except TypeError:
            continue
        if d.get("trace_structured") is old:
            d["trace_structured"] = new
            n += 1
    return n


def filter_trace_records() -> Callable[[], None]:
    """Put a filter in front of ``trace_structured``: while every handler of the trace logger
    declares what it reads (``add_trace_handler(..., wants=...)``), a record nobody reads is not
    built at all, and a payload nobody reads is not built (nor serialized, nor hashed). With any
    other handler attached (``TORCH_TRACE``, the user's own) every record is built as before.

    When another reader is attached already, nothing is put in place. Returns the function that
    takes the filter away again. Raises :class:`AdapterProblem` when ``trace_structured`` is
    missing or its signature changed.
    """
    try:
        import torch._logging as public
        import torch._logging._internal as internal
    except ImportError as e:  # pragma: no cover
        raise AdapterProblem(f"no structured trace ({e})") from e
    log0 = getattr(internal, "trace_log", None)
    if not _FILTER and isinstance(log0, logging.Logger) and _other_readers(log0, internal):
        return lambda: None  # they get every record, whole, and exactly as without the filter
    if _FILTER:
        _FILTER[2] += 1
    else:
        original = getattr(internal, "trace_structured", None)
        log = getattr(internal, "trace_log", None)
        if not callable(original) or not isinstance(log, logging.Logger):
            raise AdapterProblem(_FILTER_LOST + "trace_structured is gone")
        try:
            params = inspect.signature(original).parameters
        except (TypeError, ValueError) as e:  # pragma: no cover
            raise AdapterProblem(_FILTER_LOST + str(e)) from e
        names = list(params)
        if (
            names[:2] != ["name", "metadata_fn"]
            or "payload_fn" not in params
            or params["payload_fn"].kind is not inspect.Parameter.KEYWORD_ONLY
        ):
            raise AdapterProblem(_FILTER_LOST + f"trace_structured{inspect.signature(original)} changed")
        filt = _make_trace_filter(original, log)
        _FILTER[:] = [original, filt, 1, log]
        _rebind(original, filt)
        if getattr(public, "trace_structured", None) is not filt:  # pragma: no cover
            _rebind(filt, original)
            _FILTER.clear()
            raise AdapterProblem(_FILTER_LOST + "torch._logging.trace_structured is another function")
        if "findCaller" not in vars(log):
            log.findCaller = _caller_past(log, filt)  # type: ignore[method-assign]
    done = [False]

    def undo() -> None:
        if done[0] or not _FILTER:
            return
        done[0] = True
        _FILTER[2] -= 1
        if _FILTER[2] == 0:
            original, filt, _, log = _FILTER
            _rebind(filt, original)  # also in modules imported since
            if getattr(vars(log).get("findCaller"), "seamscope_filter", None) is filt:
                del log.findCaller
            _FILTER.clear()

    return undo


def hooked_contexts() -> int:
    """How many live compile contexts carry a seamscope hook (tests: none may be left behind)."""
    return sum(
        1 for ctx in live_compile_contexts()
        if any(getattr(h, "seamscope_hook", False) for h in getattr(ctx, "enter_exit_hooks", ()))
    )


COMPILED_FN_PREFIX = "__compiled_fn"
"""Dynamo installs each compiled graph as a global of the compiled frame's module under a name
with this prefix; the code it makes for a frame calls the graph by that name."""


def graphs_compiled_so_far() -> int:
    """How many compiled graphs Dynamo can run now: the graphs called by the code of the live
    cache entries of every frame Dynamo converted.

    Graphs compiled before capture began are not wrapped, so their runs cannot be timed as
    regions; capture says how many there are. The ``__compiled_fn`` globals themselves are no
    measure: ``torch._dynamo.reset()`` drops the cache entries but leaves some of those globals
    behind, so they pile up over compiles and resets. Raises :class:`AdapterProblem` when the
    code tracker or the cache-entry list is missing.
    """
    try:
        from torch._dynamo.convert_frame import input_codes
        from torch._dynamo.eval_frame import _debug_get_cache_entry_list
    except ImportError as e:  # pragma: no cover - depends on torch version
        raise AdapterProblem(f"no Dynamo cache entries to read ({e}): graphs compiled before "
                             "the session began are not counted") from e
    seen = getattr(input_codes, "seen", None)
    if not isinstance(seen, list):  # pragma: no cover - depends on torch version
        raise AdapterProblem("Dynamo's code tracker changed: graphs compiled before the session "
                             "began are not counted")
    names: set[str] = set()
    for ref in list(seen):
        code = ref()
        if code is None:
            continue
        for entry in _debug_get_cache_entry_list(code):
            _graph_names(getattr(entry, "code", None), names)
    return len(names)


def _graph_names(code: Any, into: set[str]) -> None:
    """The compiled graphs a piece of Dynamo's code calls (nested code objects included)."""
    if not isinstance(code, types.CodeType):
        return
    into.update(n for n in code.co_names if n.startswith(COMPILED_FN_PREFIX))
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            _graph_names(const, into)


def context_backend_name(ctx: Any) -> str | None:
    """The name of the backend a compile context compiles with (``"eager"``, ``"inductor"``)."""
    fn = getattr(ctx, "callback", None)
    for _ in range(16):
        inner = getattr(fn, "_torchdynamo_orig_backend", None)
        if inner is None:
            break
        fn = inner
    if fn is None or fn is False:
        return None
    name = getattr(fn, "compiler_name", None) or getattr(fn, "__name__", None)
    return name if isinstance(name, str) else None


def _other_readers(log: logging.Logger, internal: Any) -> list[logging.Handler]:
    """Handlers that read every record: ``TORCH_TRACE``'s file, the user's own handlers.

    PyTorch attaches its ``TORCH_TRACE`` handler at import even when the variable is unset; that
    one has no directory and no file yet and removes itself on the first record (outside Meta's
    servers), so it does not count. With a real reader the filter is not put in place at all:
    records that carry the stack of their caller would otherwise show the filter's frame.
    """
    lazy = getattr(internal, "LazyTraceHandler", None)
    out = []
    for h in log.handlers:
        if getattr(h, "seamscope_wants", None) is not None:
            continue
        if (
            lazy is not None
            and isinstance(h, lazy)
            and getattr(h, "root_dir", "") is None
            and getattr(h, "stream", "") is None
        ):
            continue
        out.append(h)
    return out


def _caller_past(log: logging.Logger, filt: Callable[..., Any]) -> Callable[..., Any]:
    """``log.findCaller`` that looks past the filter's frame.

    ``trace_structured`` logs with ``stacklevel=2``: each record names the code that called it, and
    ``TORCH_TRACE`` writes that file and line in front of the record. With the filter in between,
    it would name the filter.
    """
    base = type(log).findCaller
    code = filt.__code__

    def findCaller(stack_info: bool = False, stacklevel: int = 1) -> Any:  # noqa: N802
        found = base(log, stack_info, stacklevel + 1)  # + this function's own frame
        if found[0] == code.co_filename and found[2] == code.co_name:
            found = base(log, stack_info, stacklevel + 2)
        return found

    findCaller.seamscope_filter = filt  # type: ignore[attr-defined]
    return findCaller


_FILTER_LOST = (
    "PyTorch builds every structured-trace record while capture runs (compilation is slower than "
    "without seamscope; the figures are the same): cannot filter them, "
)


def trace_filter_installed() -> bool:
    """Whether :func:`filter_trace_records` is in place (for tests)."""
    return bool(_FILTER)


# --- a hook on every compiled graph ------------------------------------------------------------


def current_compile_id() -> str | None:
    try:
        from torch._guards import CompileContext

        cid = CompileContext.current_compile_id()
    except Exception:
        return None
    return None if cid is None else str(cid)


def _realize_lazy(compiled_fn: Any) -> Any:
    """Dynamo realises a lazy GraphModule right after the backend returns; do it before wrapping."""
    try:
        from torch.fx._lazy_graph_module import _LazyGraphModule
    except ImportError:
        return compiled_fn
    lazy = None
    if isinstance(compiled_fn, _LazyGraphModule):
        lazy = compiled_fn
    elif isinstance(getattr(compiled_fn, "__self__", None), _LazyGraphModule) and getattr(
        compiled_fn, "__name__", ""
    ) == "_lazy_forward":
        lazy = compiled_fn.__self__
    if lazy is None:
        return compiled_fn
    _LazyGraphModule.force_recompile(lazy)
    return compiled_fn if isinstance(compiled_fn, _LazyGraphModule) else lazy.forward


def wrap_compiled_graphs(
    wrap: Callable[[Callable[..., Any], str | None, bool], Callable[..., Any]],
) -> Callable[[], None]:
    """Make ``wrap(compiled_fn, compile_id, autograd)`` see every graph any backend compiles.

    ``autograd``: whether the graph was compiled with autograd on and an input (or parameter)
    requiring grad, the only case where a backend can attach a compiled backward to its outputs.
    Dynamo guards on both, so a run of this graph never differs. Returns the function that undoes
    it. Raises :class:`AdapterProblem` when the hook point is gone.
    """
    try:
        from torch._dynamo.output_graph import OutputGraph
    except ImportError as e:  # pragma: no cover
        raise AdapterProblem(f"no OutputGraph ({e}): regions cannot be timed") from e
    original = getattr(OutputGraph, "call_user_compiler", None)
    if original is None:  # pragma: no cover
        raise AdapterProblem("OutputGraph.call_user_compiler is gone: regions cannot be timed")

    def call_user_compiler(self: Any, gm: Any, example_inputs: Any) -> Any:
        compiled = original(self, gm, example_inputs)
        try:
            graph = _strip_disable(_realize_lazy(compiled))
            return wrap(graph, current_compile_id(), _needs_autograd(gm, example_inputs))
        except Exception:
            logging.getLogger("seamscope").debug("wrapping a compiled graph failed", exc_info=True)
            return compiled

    call_user_compiler.__wrapped__ = original  # type: ignore[attr-defined]
    OutputGraph.call_user_compiler = call_user_compiler  # type: ignore[method-assign]

    def undo() -> None:
        OutputGraph.call_user_compiler = original  # type: ignore[method-assign]

    return undo


def _strip_disable(compiled_fn: Any) -> Any:
    """The graph inside a ``torch._dynamo.disable`` wrapper, if the backend returned one
    (``aot_eager`` does).

    Dynamo wraps what the backend returns in ``disable`` again, unwrapping an existing wrapper first
    (``innermost_fn``); it cannot see through seamscope's, so two wrappers would run per region
    (measured here: 2-3% of an ``aot_eager`` call). Dynamo's own recursive wrapper, around
    seamscope's, has the same effect as the one stripped, so only recursive ones are stripped.
    """
    fn = compiled_fn
    while (
        getattr(fn, "_torchdynamo_disable", False) is True
        and getattr(fn, "_torchdynamo_disable_recursive", False) is True
        and getattr(fn, "_torchdynamo_wrapper_id", None) == id(fn)
        and callable(getattr(fn, "_torchdynamo_orig_callable", None))
    ):
        fn = fn._torchdynamo_orig_callable
    return fn


def _needs_autograd(gm: Any, example_inputs: Any) -> bool:
    import torch

    if not torch.is_grad_enabled():
        return False
    try:
        if any(getattr(t, "requires_grad", False) for t in example_inputs):
            return True
        return any(p.requires_grad for p in gm.parameters())
    except Exception:  # pragma: no cover - an unexpected graph: assume it may
        return True


def may_have_compiled_backward(compiled_fn: Callable[..., Any]) -> bool:
    """Whether a graph's outputs can carry an AOT-compiled backward node worth timing.

    A backend that returns the FX ``GraphModule`` itself (``eager``, many custom backends) runs
    plain autograd: no compiled backward, so the region wrapper skips looking for one. Anything
    else (``aot_eager``, ``inductor``, unknown callables) may.
    """
    import torch

    owner = getattr(compiled_fn, "__self__", compiled_fn)
    return not isinstance(owner, torch.fx.GraphModule)


# --- settings ----------------------------------------------------------------------------------

DYNAMO_SETTINGS = (
    "recompile_limit",
    "accumulated_recompile_limit",
    "capture_scalar_outputs",
    "capture_dynamic_output_shape_ops",
    "automatic_dynamic_shapes",
    "assume_static_by_default",
    "specialize_int",
    "specialize_float",
    "optimize_ddp",
    "suppress_errors",
)


def dynamo_settings() -> dict[str, str]:
    try:
        import torch._dynamo.config as cfg
    except ImportError:  # pragma: no cover
        return {}
    import warnings

    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # some settings warn that they are deprecated
        for name in DYNAMO_SETTINGS:
            if hasattr(cfg, name):
                out[name] = repr(getattr(cfg, name))
    return out


def dynamo_config_patch(settings: dict[str, Any]) -> Any:
    """A context manager that sets Dynamo settings (``capture_scalar_outputs=True``, ...) for the
    time of an experiment. Unknown names raise ``KeyError`` naming them."""
    import torch._dynamo.config as cfg

    unknown = [k for k in settings if not hasattr(cfg, k)]
    if unknown:
        raise KeyError(", ".join(sorted(unknown)))
    return cfg.patch(**settings)


def is_compiling_fn() -> Callable[[], bool]:
    """The public ``torch.compiler.is_compiling``, looked up once (it sits on the hot path)."""
    import torch

    fn = getattr(getattr(torch, "compiler", None), "is_compiling", None)
    return fn if callable(fn) else (lambda: False)


def is_compiling() -> bool:
    import torch

    try:
        return bool(torch.compiler.is_compiling())
    except Exception:  # pragma: no cover
        return False


def dynamo_reset() -> None:
    """Forget every compiled frame (a fresh cache for the next experiment)."""
    import torch._dynamo

    torch._dynamo.reset()


def clear_counters() -> None:
    from torch._dynamo.utils import counters

    counters.clear()


def frames_ok() -> int:
    """``counters["frames"]["ok"]``: frames Dynamo converted (compiled or skipped) without error."""
    from torch._dynamo.utils import counters

    return int(counters["frames"]["ok"])


def set_recompile_limit(limit: int) -> None:
    import torch._dynamo.config as cfg

    cfg.recompile_limit = limit


def mark_dynamic(t: Any, dim: int, min: int | None = None, max: int | None = None) -> None:  # noqa: A002
    import torch._dynamo

    torch._dynamo.mark_dynamic(t, dim, min=min, max=max)


def lookup_backend(name: str) -> Callable[..., Any]:
    """A backend name (``"eager"``, ``"aot_eager"``, ...) as the callable Dynamo would use."""
    from torch._dynamo.backends.registry import lookup_backend as lookup

    return lookup(name)  # type: ignore[no-any-return]


def compile_wrapper(backend: Any, mode: Any, options: Any, dynamic: Any) -> Any:
    """What ``torch.compile`` wraps a backend in when mode or options are given."""
    import torch

    if backend == "inductor":
        return torch._TorchCompileInductorWrapper(mode, options, dynamic)
    return torch._TorchCompileWrapper(backend, mode, options, dynamic)


def is_compile_error(e: BaseException) -> bool:
    """Raised while capturing or compiling (Dynamo, a backend), not while running the result."""
    from torch._dynamo.exc import TorchDynamoException

    return isinstance(e, TorchDynamoException)


def dynamo_counters() -> dict[str, dict[str, int]]:
    """PyTorch's own counters, for tests and cross-checks only (capture never reads them)."""
    from torch._dynamo.utils import counters

    return {k: dict(v) for k, v in counters.items()}


# --- remedies applied by ``run`` (``--dynamo-config``, ``--mark-dynamic``, ``--stance``) ---------


def dynamo_setting(name: str) -> tuple[bool, Any]:
    """Whether ``torch._dynamo.config`` has the setting ``name``, and its current value."""
    import warnings

    import torch._dynamo.config as cfg

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if not hasattr(cfg, name):
            return False, None
        return True, getattr(cfg, name)


def dynamic_sources_support() -> tuple[bool, bool]:
    """(``torch.compiler.config.dynamic_sources`` exists, it accepts a per-dimension ``:N``
    suffix). The suffix parser is private; without it an entry ``L['x']:0`` would be read as a
    regular expression that matches no source."""
    import torch

    cfg = getattr(getattr(torch, "compiler", None), "config", None)
    has = cfg is not None and hasattr(cfg, "dynamic_sources")
    if not has:
        return False, False
    try:
        from torch._dynamo.variables.builder import _parse_source_entry
    except ImportError:
        return True, False
    return True, _parse_source_entry("L['x']:0") == ("L['x']", 0)


def dynamic_sources_patch(value: str) -> Any:
    """A context manager that sets ``torch.compiler.config.dynamic_sources`` (comma-separated)."""
    import torch

    return torch.compiler.config.patch(dynamic_sources=value)  # type: ignore[attr-defined]


DYNAMIC_SOURCE_LOGGER = "torch._dynamo.variables.builder"


def watch_dynamic_source_marks(on_mark: Callable[[str, str, str | None], None]) -> Callable[[], None]:
    """``on_mark(source, entry, compile_id)`` each time Dynamo marks a source dynamic because of a
    ``dynamic_sources`` entry (its debug record on the builder's logger). Returns the undo."""
    log = logging.getLogger(DYNAMIC_SOURCE_LOGGER)
    shown = log.getEffectiveLevel()

    class _Watch(logging.Filter):
        # A filter on the logger sees each record before any handler (its own or an ancestor's);
        # records below the level the logger had are dropped again, so nothing more is printed.
        def filter(self, record: logging.LogRecord) -> bool:
            try:
                if "marked dynamic due to dynamic-sources entry" in str(record.msg) and len(record.args or ()) == 2:
                    src, entry = record.args  # type: ignore[misc]
                    on_mark(str(src), str(entry), current_compile_id())
            except Exception:  # never break the user's compile
                pass
            return record.levelno >= shown

    watch = _Watch()
    old_level = log.level
    log.setLevel(logging.DEBUG)
    log.addFilter(watch)

    def undo() -> None:
        log.removeFilter(watch)
        log.setLevel(old_level)

    return undo


def stance_names() -> tuple[str, ...]:
    """The stances ``torch.compiler.set_stance`` accepts (read from its signature's Literal)."""
    import typing

    import torch

    fn = getattr(getattr(torch, "compiler", None), "set_stance", None)
    if fn is None:
        return ()
    try:
        hint = typing.get_type_hints(fn).get("stance")
        args = typing.get_args(hint)
        if args and all(isinstance(a, str) for a in args):
            return tuple(args)
    except Exception:
        pass
    return ("default", "force_eager", "eager_on_recompile", "fail_on_recompile", "eager_then_compile",
            "aot_eager_then_compile")
