"""Every use of a private PyTorch API, in one place.

PyTorch's internals change between releases. Each function here does one thing, is tested on its
own (tests/test_adapter.py), and degrades with a message instead of a crash when the internal it
needs is missing: capture then records what it still can and says what it could not.

Used internals (torch 2.9–2.14 were read; 2.13 is tested):
- ``torch._logging._internal.trace_log``: the structured-trace logger (``TORCH_TRACE``'s source).
  Records are emitted only while it has a handler.
- ``torch._dynamo.output_graph.OutputGraph.call_user_compiler``: the single point where Dynamo
  hands a graph to any backend; wrapping its result gives a hook on every run of that graph.
- ``torch._guards.CompileContext.current_compile_id``: the ``x/y`` id inside a compilation.
- ``torch._dynamo.config``: the settings that decide behaviour (read only).
- ``torch._dynamo.config`` and ``torch.compiler.config.dynamic_sources`` set for one run by
  ``run``'s remedy flags; ``torch._dynamo.variables.builder._parse_source_entry`` tells whether
  this torch reads a per-dimension ``:N`` suffix there, and the debug record that module's logger
  writes when a source is marked dynamic names the frames a ``--mark-dynamic`` changed (only
  torch 2.13 was checked; without either, ``--mark-dynamic`` says what is missing).
- the attributes ``torch._dynamo.disable`` sets on its wrapper (``_torchdynamo_disable``,
  ``_torchdynamo_orig_callable``...): a backend's graph already disabled is unwrapped before
  seamscope wraps it, as Dynamo's ``innermost_fn`` would.
"""

from __future__ import annotations

import logging
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


class _TraceHandler(logging.Handler):
    def __init__(self, on_event: Callable[[dict[str, Any], str | None], None]) -> None:
        super().__init__(level=logging.DEBUG)
        self._on_event = on_event

    def emit(self, record: logging.LogRecord) -> None:
        meta = getattr(record, "metadata", None)
        if isinstance(meta, dict):
            try:
                self._on_event(meta, getattr(record, "payload", None))
            except Exception:  # never break the user's compile
                logging.getLogger("seamscope").debug("trace event handling failed", exc_info=True)


def add_trace_handler(on_event: Callable[[dict[str, Any], str | None], None]) -> Callable[[], None]:
    """Receive every structured-trace event in process; returns the function that removes it."""
    log = trace_logger()
    handler = _TraceHandler(on_event)
    old_level = log.level
    log.setLevel(logging.DEBUG)
    log.addHandler(handler)

    def remove() -> None:
        log.removeHandler(handler)
        if not log.handlers:
            log.setLevel(old_level)

    return remove


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
