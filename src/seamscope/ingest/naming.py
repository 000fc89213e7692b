"""Which frame reports name for a compilation: the user's, not a generic wrapper's. One rule for
live capture and import.

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

Live capture feeds the rule each graph's nodes (:class:`FrameNamer`); import feeds it what a
``TORCH_TRACE`` log keeps of them (:func:`trace_origin`): the graph's printed code names only the
innermost frame of each node (``# File: path:line in fn``), so its chain is that frame when every
node was traced in the same function, and the module is the compiled frame's ``self`` (its class,
from the guard tree) with the ``forward`` its source defines. Both name a decorator's ``wrapper``
around a model's ``forward`` after that ``forward``; a log can name a function deeper than live
capture would where every node sits in a helper the wrapped function calls.

Torch-free: fed with plain values.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from ..model.ledger import Compilation, Frame, compile_frame_index
from ..model.normalize import is_library, local_file, normalize_path
from .break_reasons import user_function
from .source_scope import def_start, enclosing_def

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


#: A node's innermost frame as a graph's printed code gives it (``torch.fx``'s stack-trace summary).
_GRAPH_FRAME = re.compile(r"# File: ([^\n]+?):(\d+) in (\S+), code: ")
#: The compiled frame's module in a guard tree, in this order: its ``self``; ``args[0]`` for a
#: ``*args`` wrapper; the ``fn`` PyTorch's own ``inner`` wrapper calls under ``torch.compile(module)``.
#: The guard manager of that local (found as text: a guard tree is long), with its class.
_SELF_MANAGERS = tuple(f"+- GuardManager: source=L[{s}], accessed_by=" for s in ("'self'", "'args'][0", "'fn'"))
_NOT_MODULES = frozenset({"torch.Tensor", "torch.nn.parameter.Parameter"})
_CLASS = re.compile(r", type=<class '([\w.]+)'>")


class FrameNamer:
    """Names compilations by :func:`recognisable_frame` as their graphs' origins come in; a
    compilation without a graph (a recompile-limit fallback) takes its frame's earlier name."""

    def __init__(self, cwd: str) -> None:
        self.cwd = cwd
        self._origins: dict[str, list[dict[str, Any]]] = {}
        self._named: dict[int, Frame] = {}

    def add_origin(self, compile_id: str, origin: dict[str, Any]) -> None:
        """Where one graph of ``compile_id`` was traced (``adapter.graph_origin``, :func:`trace_origin`)."""
        self._origins.setdefault(compile_id, []).append(origin)

    def name(self, c: Compilation) -> Frame | None:
        """The frame reports name for ``c`` (``Compilation.user_frame``), its origins used up."""
        x = compile_frame_index(c.compile_id)[0]
        found = recognisable_frame(c.frame_name, c.file, c.line, self._origins.pop(c.compile_id, []), self.cwd)
        if found is None:
            return self._named.get(x) if c.graph_count == 0 else None
        self._named.setdefault(x, found)
        return found


def graph_frames(code: str) -> list[_Raw]:
    """The innermost frame of each node of a graph's printed code (a ``dynamo_output_graph``
    payload), ``(file, line, function)``, in order; empty when it names none ("No stacktrace
    found")."""
    return [(f, int(ln), fn) for f, ln, fn in _GRAPH_FRAME.findall(code)]


def self_class(guards: str) -> str | None:
    """The class of the compiled frame's ``self`` (``pkg.module.Class``; its ``args[0]`` when it
    takes ``*args``; the ``fn`` Dynamo's own wrapper calls) in a guard tree (a
    ``dynamo_cpp_guards_str`` payload), or None. A builtin (a decorator's ``fn`` is a
    ``function``) or a tensor (the first argument of ``torch.compile(module)``'s wrapper) is no
    module, and the next place is read."""
    for manager in _SELF_MANAGERS:
        i = guards.find(manager)
        if i >= 0:
            end = guards.find("\n", i)
            m = _CLASS.search(guards, i, end if end >= 0 else len(guards))
            if m and "." in m.group(1) and m.group(1) not in _NOT_MODULES:
                return m.group(1)
    return None


def trace_origin(frames: Sequence[_Raw], module: dict[str, Any] | None) -> dict[str, Any]:
    """A graph's origin from a ``TORCH_TRACE`` log, as :func:`recognisable_frame` reads it: its
    nodes' innermost ``frames`` (:func:`graph_frames`) are its chain when they are all one
    function's; ``module`` is :func:`trace_module`'s."""
    return {"chain": common_chain([f] for f in frames), "module": module}


def trace_module(cls: str, paths: Iterable[str], main_files: Sequence[str], cwd: str) -> dict[str, Any] | None:
    """The module a compiled frame's ``self`` of class ``cls`` (:func:`self_class`) is, as
    ``adapter.graph_origin`` gives one: where its file, found among the ``paths`` a log names
    (one of ``main_files`` for ``__main__``), defines ``cls.forward``; None when none does."""
    parts = cls.split(".")
    known = list(paths)
    for i in range(len(parts) - 1, 0, -1):  # a nested class's module is a shorter prefix
        module, name = ".".join(parts[:i]), ".".join(parts[i:])
        tails = tuple("/" + module.replace(".", "/") + end for end in (".py", "/__init__.py"))
        files = main_files if module == "__main__" else [p for p in known if p.endswith(tails)]
        for found in files:
            line = def_start(found, f"{name}.forward")
            here = local_file(normalize_path(found, cwd), cwd) if line is None else None  # a log made elsewhere
            line = def_start(here, f"{name}.forward") if here else line
            if line is not None:
                return {"cls": name, "file": found, "line": line}
    return None


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
    if pick is not None:
        return _frame_of(pick, cwd)
    # All library code: the one module every node sits in before the chain's first library frame,
    # since the chain lacks PyTorch's own frames (nn.TransformerEncoder.forward's nodes carry no
    # stack; the chain is then the few nodes of a helper it calls, F._canonical_mask)
    modules = {_module_key(o.get("module")) for o in origins}
    if len(modules) == 1 and origins:
        m = next(iter(modules))
        if m is not None and m[1]:
            return Frame(file=normalize_path(m[1], cwd), line=m[2], function=f"{m[0]}.forward")
    if wrapper and below:
        return _frame_of(below[0], cwd)
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
