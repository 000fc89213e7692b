"""Which frame reports name for a compilation: the user's, not a generic wrapper's.

Dynamo names a compiled frame after its code object. When that code is a wrapper, the name tells
the user nothing: a decorator's ``wrapper`` (``functools.wraps`` copies the wrapped function's name
onto the function object, not onto its code), torch's own ``wrap_inline`` ``inner`` (what
``torch.compile`` of a ``torch.nn`` module runs), a library's decorator on a model's ``forward``
(diffusers' ``apply_lora_scale`` ``wrapper``), a library wrapper module's ``forward``. The graph's
nodes still say which frames they were traced under (``adapter.graph_origin``): the first of those
below the compiled frame that is not a wrapper, the user's code first, names the compilation in
reports (``Compilation.user_frame``); failing that, the one module every node sits in; a library
frame of a telling name is shown with its class (``BertLayer.forward``), graph or not. The
compilation's ``frame_name``, ``file`` and ``line`` stay the code's, for ids and hashes.

Torch-free: fed with plain values.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ..ingest.break_reasons import user_function
from ..ingest.source_scope import enclosing_def
from ..model.ledger import Frame
from ..model.normalize import is_library, local_file, normalize_path

GENERIC_NAMES = frozenset({
    "wrapper", "_wrapper", "wrapped", "_wrapped", "wrapper_fn", "wrapped_fn", "wrapped_func", "wrap",
    "inner", "_inner", "inner_fn", "_fn", "decorated", "decorator", "new_fn", "forward_wrapper",
    "__call__", "_call_impl", "_wrapped_call_impl", "_lazy_forward",
})
"""Code names that wrappers carry (decorators, torch's and libraries' call-through functions).
A user's own function of such a name keeps it unless its graph was traced entirely inside
another function."""

_TORCH_WRAPPERS = ("torch/_dynamo/external_utils.py", "torch/_dynamo/eval_frame.py")

_Raw = tuple[str, int, str]


def is_wrapper(name: str, file: str) -> bool:
    """Whether a frame of this code name and file is a call-through wrapper."""
    return user_function(name) in GENERIC_NAMES or file.endswith(_TORCH_WRAPPERS)


def recognisable_frame(
    name: str, file: str, line: int, origins: Sequence[dict[str, Any]], cwd: str
) -> Frame | None:
    """The frame to name instead of the compiled frame ``name`` at ``file:line`` (normalised),
    from the ``graph_origin`` of each graph it produced; None when the compiled frame is the
    user's own code under a telling name, or nothing better is known."""
    wrapper = is_wrapper(name, file)
    if not (wrapper or is_library(file)):
        return None
    chain = common_chain(o.get("chain") or [] for o in origins)
    if chain and normalize_path(chain[0][0], cwd) == file and user_function(chain[0][2]) == user_function(name):
        chain = chain[1:]  # Dynamo lists the compiled frame first
    below = [f for f in chain if not is_wrapper(f[2], normalize_path(f[0], cwd))]
    pick = next((f for f in below if not is_library(normalize_path(f[0], cwd))), None)
    if pick is None and wrapper and below:
        pick = below[0]
    if pick is not None:
        return _frame_of(pick, cwd)
    modules = {_module_key(o.get("module")) for o in origins}
    if len(modules) == 1 and origins:
        m = next(iter(modules))
        if m is not None and m[1]:
            return Frame(file=normalize_path(m[1], cwd), line=m[2], function=f"{m[0]}.forward")
    return _own_method(name, file, line, cwd) if not wrapper else None


def _own_method(name: str, file: str, line: int, cwd: str) -> Frame | None:
    """A library frame of a telling name (``forward``) with its class (``BertLayer.forward``),
    read from its source where it is installed here; None for a function or unreadable source."""
    path = local_file(file, cwd)
    found = _def_frame(path, line, name, file) if path else None
    return found if found is not None and "." in found.function else None


def _def_frame(path: str, line: int, fn: str, file: str) -> Frame | None:
    """The ``def`` around ``path:line``: its first line, and its name with the class it belongs
    to (``Block.forward``; ``step`` for a function, even a nested one); ``file`` names it."""
    found = enclosing_def(path, line, user_function(fn))
    if found is None:
        return None
    qualname, start = found
    return Frame(file=file, line=start, function=qualname.rsplit(".<locals>.", 1)[-1])


def common_chain(chains: Iterable[Sequence[Any]]) -> list[_Raw]:
    """The frames ``(file, line, function)`` every chain starts with, compared by file and
    function (a function's nodes come from several of its lines); the first chain's lines."""
    first: list[_Raw] | None = None
    keep = 0
    for chain in chains:
        if first is None:
            first = [(str(f), int(ln), str(fn)) for f, ln, fn in chain]
            keep = len(first)
            continue
        n = 0
        for a, b in zip(first[:keep], chain, strict=False):
            if (a[0], a[2]) != (str(b[0]), str(b[2])):
                break
            n += 1
        keep = n
    return (first or [])[:keep]


def _module_key(m: dict[str, Any] | None) -> tuple[str, str, int] | None:
    if not m:
        return None
    return str(m.get("cls") or ""), str(m.get("file") or ""), int(m.get("line") or 0)


def _frame_of(raw: _Raw, cwd: str) -> Frame:
    """A traced frame as a :class:`Frame` (:func:`_def_frame`; its own line when no ``def`` is
    found: a lambda, unreadable source)."""
    path, line, fn = raw
    file = normalize_path(path, cwd)
    return _def_frame(path, line, fn, file) or Frame(file=file, line=line, function=user_function(fn))
