"""Regional compilation without editing the script: ``seamscope run --regional CLASS``.

While installed, ``torch.compile(module, **options)`` on an ``nn.Module`` that holds instances of
``CLASS`` compiles each instance (``instance.compile(**options)``, one compilation serving every
instance when they trace the same code) instead of the whole module, and returns the module
itself, its calls still observed as the run's calls (the blocks' compiled calls are nested in
them). A module without such an instance is compiled whole, with a warning in the receipt.

``CLASS`` is a class name (``GPT2Block``), a qualified one (``Outer.Block``), or the class's module
and name (``transformers.models.gpt2.modeling_gpt2.GPT2Block``). What it cannot change: a block
whose instances guard on per-instance state (transformers' KV cache, ``layers[i].is_initialized``)
recompiles once per instance; the run's compile-time findings then say so.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any


def matches(cls: type, names: tuple[str, ...]) -> bool:
    full = f"{cls.__module__}.{cls.__qualname__}"
    return any(n in (cls.__name__, cls.__qualname__, full, f"{cls.__module__}:{cls.__qualname__}") for n in names)


def blocks_of(module: Any, names: tuple[str, ...]) -> list[Any]:
    """The outermost submodules of ``module`` whose class is one of ``names`` (not those inside one)."""
    found: list[Any] = []
    inside: set[int] = set()
    for _, m in module.named_modules():
        if id(m) in inside:
            continue
        if matches(type(m), names):
            found.append(m)
            inside.update(id(x) for x in m.modules())
    return found


def install_regional(names: tuple[str, ...], session: Any) -> Callable[[], None]:
    """Replace ``torch.compile`` as described above; returns the undo."""
    import torch

    inner = torch.compile

    @functools.wraps(inner)
    def compile(model: Any = None, **kwargs: Any) -> Any:
        if isinstance(model, torch.nn.Module):
            blocks = blocks_of(model, names)
            if blocks:
                for b in blocks:
                    b._compiled_call_impl = inner(b._call_impl, **kwargs)  # as Module.compile does
                note = (
                    f"--regional {', '.join(names)}: compiled {len(blocks)} instance(s) of {type(blocks[0]).__name__} "
                    f"one by one instead of the whole {type(model).__name__}"
                )
                if note not in session.warnings:
                    session.warnings.append(note)
                return session.track(model) if getattr(session, "active", False) else model
            session.warnings.append(
                f"--regional {', '.join(names)}: no instance in the {type(model).__name__} passed to torch.compile; "
                "compiled it whole"
            )
        if model is None:
            return inner(**kwargs)
        return inner(model, **kwargs)

    torch.compile = compile

    def undo() -> None:
        torch.compile = inner

    return undo
