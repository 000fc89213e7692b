"""The workload spec: what the probe (and later the shape study) runs.

A user writes a Python file with a function returning :class:`Workload`; ``seamscope probe
FILE.py:FUNC`` loads it. Named input families keep the inputs that should hit one compiled variant
(``steady``) apart from those expected to recompile (``changed``). Loading never imports torch
itself; the user's file does.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import UnusableInput, UserCodeFailed

DEFAULT_LADDER = ("eager", "aot_eager", "inductor")


@dataclass
class Workload:
    """A callable and the inputs to call it with.

    ``inputs`` maps a family name to entries; an entry is a tuple of positional args, a dict of
    keyword args, or a single tensor (one positional arg). ``steady`` is required: its first
    entry is the cold call and the warm calls cycle over it.
    """

    fn_or_module: Callable[..., Any]
    inputs: Mapping[str, Sequence[Any]]
    backend: Any = "inductor"
    """Like ``torch.compile``: a backend name, a callable, or ``"pkg.mod:fn"``."""
    compile_options: dict[str, Any] = field(default_factory=dict)
    """Other ``torch.compile`` keyword arguments (``dynamic``, ``fullgraph``, ``mode``, ``options``)."""
    dtype: Any = None
    """A torch dtype the module and floating inputs are cast to; None keeps them."""
    device: str = "cpu"
    tolerance: tuple[float, float] | None = None
    """(rtol, atol) for every floating leaf; None: per-dtype defaults (float32: 1e-4, 1e-5)."""
    warm_calls: int = 20
    seed: int = 0
    ladder: Sequence[Any] = DEFAULT_LADDER
    """Backends tried in order by the ladder; names, callables or ``"pkg.mod:fn"`` paths."""
    grad: bool = False
    """Run with autograd on (training-like); by default every call runs under ``no_grad``."""
    name: str = ""
    make_input: Callable[[int], Any] | None = None
    """For the shape study: one input entry for a given length (optional)."""
    pad: Callable[[Any, int], Any] | None = None
    """For the shape study: ``pad(entry, target_length)`` → the entry padded to that length (None:
    the first tensor is zero-padded at the end of ``length_dim``)."""
    slice_output: Callable[[Any, int], Any] | None = None
    """For the shape study: ``slice_output(out, length)`` → the output cut back to the unpadded
    length (None: every output tensor whose ``length_dim`` has the padded size is narrowed)."""
    length_dim: int = 1
    """For the shape study: the dim of the varying tensor that is the length (``--dim`` overrides)."""
    max_length: int | None = None
    """For the shape study: the longest length the model accepts (None: found by running eager)."""

    def __post_init__(self) -> None:
        if not callable(self.fn_or_module):
            raise UnusableInput(f"Workload.fn_or_module is not callable: {type(self.fn_or_module).__name__}")
        if not isinstance(self.inputs, Mapping) or not self.inputs.get("steady"):
            raise UnusableInput('Workload.inputs needs a non-empty "steady" family')
        if self.warm_calls < 1:
            raise UnusableInput("Workload.warm_calls must be >= 1")

    def families(self) -> dict[str, list[Any]]:
        """Families in order, ``steady`` first."""
        out = {"steady": list(self.inputs["steady"])}
        for k, v in self.inputs.items():
            if k != "steady":
                out[k] = list(v)
        return out


def as_call(entry: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """An input entry → (args, kwargs)."""
    if isinstance(entry, dict):
        return (), dict(entry)
    if isinstance(entry, tuple):
        return entry, {}
    if isinstance(entry, list):
        return tuple(entry), {}
    return (entry,), {}


def grad_mode(wl: Any) -> Any:
    """The autograd mode a workload's calls run under: ``enable_grad`` with ``grad``, else ``no_grad``."""
    import torch

    return torch.enable_grad() if getattr(wl, "grad", False) else torch.no_grad()


def first_line(e: BaseException) -> str:
    """The first line of an exception's message, at most 300 characters."""
    lines = str(e).strip().splitlines()
    return (lines[0] if lines else "")[:300]


def described(e: BaseException) -> str:
    """``Type: first line of the message``."""
    return f"{type(e).__name__}: {first_line(e)}"


def map_tensors(obj: Any, fn: Callable[[Any], Any], done: Callable[[], bool] | None = None) -> Any:
    """``obj`` with every tensor ``t`` in it replaced by ``fn(t)``: dicts (as plain dicts),
    namedtuples, tuples and lists rebuilt, other leaves kept. With ``done``, a part reached once
    ``done()`` is true is kept as it is."""
    import torch

    def walk(o: Any) -> Any:
        if done is not None and done():
            return o
        if isinstance(o, torch.Tensor):
            return fn(o)
        if isinstance(o, dict):
            return {k: walk(v) for k, v in o.items()}
        if isinstance(o, tuple) and hasattr(o, "_fields"):
            return type(o)(*(walk(v) for v in o))
        if isinstance(o, (tuple, list)):
            return type(o)(walk(v) for v in o)
        return o

    return walk(obj)


def to_device(obj: Any, device: str, dtype: Any) -> Any:
    def move(t: Any) -> Any:
        t = t.to(device)
        return t.to(dtype) if dtype is not None and t.is_floating_point() else t

    return map_tensors(obj, move)


def prepare(wl: Workload) -> Workload:
    """Move the module and the inputs to the workload's device and dtype (the probe, the ladder
    and its isolated children all run a prepared workload)."""
    import dataclasses

    import torch

    m = wl.fn_or_module
    if isinstance(m, torch.nn.Module):
        m.to(wl.device)
        if wl.dtype is not None:
            m.to(wl.dtype)
    inputs = {k: [to_device(e, wl.device, wl.dtype) for e in v] for k, v in wl.families().items()}
    return dataclasses.replace(wl, inputs=inputs)


def is_workload_spec(target: str) -> bool:
    """``path/to/file.py:FUNC`` naming a file that exists (a script path never has ``.py:``)."""
    where, sep, name = target.rpartition(":")
    return bool(sep) and where.endswith(".py") and name.isidentifier() and os.path.isfile(where) \
        and not os.path.isfile(target)


def split_spec(spec: str) -> tuple[str, str]:
    """``path/to/file.py:func`` or ``pkg.mod:func`` → (where, name)."""
    where, sep, name = spec.rpartition(":")
    if not sep or not where or not name:
        raise UnusableInput(f"expected FILE.py:FUNC or pkg.mod:FUNC, got {spec!r}")
    return where, name


def load_object(spec: str, what: str = "function") -> Any:
    """Import ``FILE.py:NAME`` (the file's folder goes on ``sys.path``, as when it runs as a
    script) or ``pkg.mod:NAME``; raise :class:`UnusableInput` naming what is missing."""
    where, name = split_spec(spec)
    if where.endswith(".py") or os.sep in where or "/" in where:
        path = os.path.abspath(where)
        if not os.path.isfile(path):
            raise UnusableInput(f"workload file not found: {where}")
        folder = os.path.dirname(path)
        if folder not in sys.path:
            sys.path.insert(0, folder)
        modname = "_seamscope_workload_" + os.path.splitext(os.path.basename(path))[0]
        sp = importlib.util.spec_from_file_location(modname, path)
        if sp is None or sp.loader is None:
            raise UnusableInput(f"cannot import {where}")
        mod = importlib.util.module_from_spec(sp)
        sys.modules[modname] = mod
        try:
            sp.loader.exec_module(mod)
        except Exception as e:
            raise UserCodeFailed(f"importing {where} raised {type(e).__name__}: {e}") from e
    else:
        try:
            mod = importlib.import_module(where)
        except ModuleNotFoundError as e:
            raise UnusableInput(f"no module {where!r} ({e})") from e
    obj = getattr(mod, name, None)
    if obj is None:
        raise UnusableInput(f"no {what} {name!r} in {where}")
    return obj


def load_workload(spec: str) -> Workload:
    """Call the spec's function and check that it returned a :class:`Workload`."""
    fn = load_object(spec, "function")
    if not callable(fn):
        raise UnusableInput(f"{spec} is not a function")
    try:
        import torch

        torch.manual_seed(0)
    except ImportError:  # pragma: no cover - torch is required to probe anything
        pass
    try:
        wl = fn()
    except UnusableInput:
        raise
    except Exception as e:
        raise UserCodeFailed(f"{spec} raised {type(e).__name__}: {e}") from e
    if not isinstance(wl, Workload):
        raise UnusableInput(
            f"{spec} returned {type(wl).__name__}, expected seamscope.Workload"
        )
    if not wl.name:
        wl.name = spec
    return wl
