"""Regional compilation without editing the script: ``seamscope run --regional CLASS``.

While installed, ``torch.compile(module, **options)`` on an ``nn.Module`` that holds instances of
``CLASS`` (or on its ``forward``, ``torch.compile(model.forward)``) compiles each instance
(``instance.compile(**options)``, one compilation serving every instance when they trace the same
code) instead of the whole module, and returns the module itself (or its forward), its calls still
observed as the run's calls: a block's compiled call is never a call of its own (nested in the
model's, or outside it, as BART's encoder under ``generate``). What holds no such instance is
compiled whole, with a warning in the receipt.

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


def _owner(model: Any, module_type: type) -> Any:
    """The module whose blocks are compiled: the one passed, or the one whose ``forward`` was
    (``torch.compile(model.forward)``, transformers' advice for ``generate``); None otherwise."""
    if isinstance(model, module_type):
        return model
    own = getattr(model, "__self__", None)
    return own if isinstance(own, module_type) and getattr(model, "__name__", None) == "forward" else None


def install_regional(names: tuple[str, ...], session: Any) -> Callable[[], None]:
    """Replace ``torch.compile`` as described above; returns the undo."""
    import torch

    inner = torch.compile

    @functools.wraps(inner)
    def compile(model: Any = None, **kwargs: Any) -> Any:
        owner = _owner(model, torch.nn.Module)
        blocks = blocks_of(owner, names) if owner is not None else []
        if blocks:
            tracks = getattr(session, "tracks_blocks", True)
            session.tracks_blocks = False  # a block's call is no call of the run
            try:
                for b in blocks:
                    b._compiled_call_impl = inner(b._call_impl, **kwargs)  # as Module.compile does
            finally:
                session.tracks_blocks = tracks
            note = (
                f"--regional {', '.join(names)}: compiled {len(blocks)} instance(s) of {type(blocks[0]).__name__} "
                f"one by one instead of the whole {type(owner).__name__}"
            )
            if note not in session.warnings:
                session.warnings.append(note)
            return session.track(model) if getattr(session, "active", False) else model
        if model is not None:
            what = f"the {type(owner).__name__}" if owner is not None else f"what was passed ({type(model).__name__})"
            session.warnings.append(f"--regional {', '.join(names)}: no instance in {what} passed to torch.compile; "
                                    "compiled it whole")
            return inner(model, **kwargs)
        return inner(**kwargs)

    torch.compile = compile

    def undo() -> None:
        torch.compile = inner

    return undo
