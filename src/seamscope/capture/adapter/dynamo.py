"""Dynamo's own state and entry points: whether it is compiling, its reset, its counters (for
tests and cross-checks only), its backends and its errors."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


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


def compile_accepts(name: str) -> bool:
    """Whether ``torch.compile`` takes the keyword argument ``name`` (``recompile_limit``,
    ``isolate_recompiles``: torch 2.13+), read from its signature."""
    import inspect

    import torch

    try:
        return name in inspect.signature(torch.compile).parameters
    except (TypeError, ValueError):  # pragma: no cover
        return False


SHAPES_ARGUMENTS = ("dynamic_shapes", "shapes_spec")
"""``torch.compile``'s argument for a ``ShapesSpec`` (``torch.fx.experimental.dynamic_spec``):
``shapes_spec`` in 2.13, renamed ``dynamic_shapes`` in 2.14."""


def shapes_argument() -> str | None:
    """The name this torch's ``torch.compile`` takes a ``ShapesSpec`` under (None: neither)."""
    return next((n for n in SHAPES_ARGUMENTS if compile_accepts(n)), None)
