"""A hook on every graph any backend compiles, so that each run of it can be timed.

Internals used:
- ``torch._dynamo.output_graph.OutputGraph.call_user_compiler``: the single point where Dynamo
  hands a graph to any backend; wrapping its result gives a hook on every run of that graph.
- ``torch._guards.CompileContext.current_compile_id``: the ``x/y`` id inside a compilation.
- the attributes ``torch._dynamo.disable`` sets on its wrapper (``_torchdynamo_disable``,
  ``_torchdynamo_orig_callable``...): a backend's graph already disabled is unwrapped before
  seamscope wraps it, as Dynamo's ``innermost_fn`` would.
- ``torch.fx._lazy_graph_module._LazyGraphModule``: realised before it is wrapped, as Dynamo does.
- ``torch.autograd.function.BackwardCFunction._forward_cls``: the autograd ``Function`` class
  (AOT's ``CompiledFunction``, one per compiled graph) whose ``backward`` the node's ``apply`` runs;
  swapping that static method times every compiled backward of the graph (``wrap_backward_of``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from .base import AdapterProblem


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
    on_graph: Callable[[Any, str | None], None] | None = None,
) -> Callable[[], None]:
    """Make ``wrap(compiled_fn, compile_id, autograd)`` see every graph any backend compiles.

    ``autograd``: whether the graph was compiled with autograd on and an input (or parameter)
    requiring grad, the only case where a backend can attach a compiled backward to its outputs.
    Dynamo guards on both, so a run of this graph never differs. Returns the function that undoes
    it. Raises :class:`AdapterProblem` when the hook point is gone. ``on_graph(gm, compile_id)``,
    when given, sees each FX graph before the backend does (its failure is logged, never raised).
    """
    try:
        from torch._dynamo.output_graph import OutputGraph
    except ImportError as e:  # pragma: no cover
        raise AdapterProblem(f"no OutputGraph ({e}): regions cannot be timed") from e
    original = getattr(OutputGraph, "call_user_compiler", None)
    if original is None:  # pragma: no cover
        raise AdapterProblem("OutputGraph.call_user_compiler is gone: regions cannot be timed")

    def call_user_compiler(self: Any, gm: Any, example_inputs: Any) -> Any:
        if on_graph is not None:
            try:
                on_graph(gm, current_compile_id())
            except Exception:
                logging.getLogger("seamscope").debug("reading a graph failed", exc_info=True)
        compiled = original(self, gm, example_inputs)
        try:
            graph = strip_disable(_realize_lazy(compiled))
            return wrap(graph, current_compile_id(), _needs_autograd(gm, example_inputs))
        except Exception:
            logging.getLogger("seamscope").debug("wrapping a compiled graph failed", exc_info=True)
            return compiled

    call_user_compiler.__wrapped__ = original  # type: ignore[attr-defined]
    OutputGraph.call_user_compiler = call_user_compiler  # type: ignore[method-assign]

    def undo() -> None:
        OutputGraph.call_user_compiler = original  # type: ignore[method-assign]

    return undo


def strip_disable(compiled_fn: Any) -> Any:
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


def wrap_backward_of(node: Any, wrap: Callable[[Callable[..., Any]], Callable[..., Any]]) -> Callable[[], None] | None:
    """Swap the ``backward`` of the autograd ``Function`` an output's node belongs to for
    ``wrap(backward)``: once per class, it then sees every backward of every node of that class,
    with the node as its first argument. Returns the function that swaps it back, or None where
    the node is not a custom ``Function``'s or the class defines ``vjp`` instead."""
    fwd = getattr(type(node), "_forward_cls", None)
    if not isinstance(fwd, type):
        return None
    raw = vars(fwd).get("backward")
    fn = raw.__func__ if isinstance(raw, staticmethod) else None
    if fn is None or "vjp" in vars(fwd):
        return None
    timed = staticmethod(wrap(fn))
    fwd.backward = timed  # type: ignore[attr-defined]

    def undo() -> None:
        if vars(fwd).get("backward") is timed:
            fwd.backward = raw  # type: ignore[attr-defined]

    return undo
