"""PyTorch's structured trace (``TORCH_TRACE``'s source), read in process.

Internals used:
- ``torch._logging._internal.trace_log``: the structured-trace logger. Records are emitted only
  while it has a handler.
- ``torch._logging._internal.trace_structured(name, metadata_fn, *, payload_fn, ...)``: the one
  function every record goes through; while any handler is attached it builds each record's
  metadata and payload (readable graphs, generated code...). Capture puts a filter in front of it
  (``filter_trace_records``) so that only what seamscope reads is built. It stands aside for any
  other reader; PyTorch's ``LazyTraceHandler`` without a directory (``TORCH_TRACE`` unset) is not
  one. Dynamo's break-reason ``payload_fn`` (a closure over ``user_stack_trace``) is read to build
  that payload without the compiler's frames (``lean_break_reason``).
"""

from __future__ import annotations

import builtins
import inspect
import logging
import sys
from collections.abc import Callable
from typing import Any

from .base import AdapterProblem


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
    other handler attached (``TORCH_TRACE``, the user's own) every record is built, as without the filter.

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
