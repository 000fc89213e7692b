"""What eager's rounding can explain, measured for the differential test, and random ops.

- ``reduction_trace``: eager under a dispatch mode that carries, for every tensor, the longest
  reduction in its history and the reduction allowance K * u * m (K terms of magnitude <= m, u the
  unit roundoff of the accumulation dtype).
- ``float64_run``: eager on the same inputs in float64, the reference that ``differential``
  measures eager's own rounding error against.
- ``random_ops``: random ops in a graph a backend received (eager and compiled draw different
  numbers).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from .differential import Rounding, clone_tree, flatten, module_state, unit_roundoff
from .workload import first_line, map_tensors

_RANDOM_WORDS = (
    "rand",
    "dropout",
    "bernoulli",
    "normal",
    "uniform",
    "multinomial",
    "exponential",
    "poisson",
    "rrelu",
    "cauchy",
    "geometric",
    "log_normal",
)


def random_ops(gm: Any) -> list[str]:
    """Random ops in an FX graph handed to a backend (dropout with training=False or p=0 is not)."""
    found = []
    for n in getattr(getattr(gm, "graph", None), "nodes", []):
        if n.op not in ("call_function", "call_method", "call_module"):
            continue
        tgt = n.target
        name = tgt if isinstance(tgt, str) else getattr(tgt, "__name__", str(tgt))
        if n.op == "call_module":
            sub = gm.get_submodule(tgt)
            name = type(sub).__name__
            if "dropout" in name.lower() and (not sub.training or getattr(sub, "p", 1) == 0):
                continue
        low = str(name).lower()
        if not any(w in low for w in _RANDOM_WORDS):
            continue
        if "dropout" in low:
            training = n.kwargs.get("training", n.args[2] if len(n.args) > 2 else True)
            p = n.kwargs.get("p", n.args[1] if len(n.args) > 1 else 0.5)
            if training is False or p == 0:
                continue
        found.append(str(name))
    return found


def _reduction_length(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
    """Terms summed per output element by one aten op (0: not a reduction)."""
    name = getattr(func, "__name__", str(func)).split(".")[0]
    a0 = args[0] if args else None
    try:
        if name in ("mm", "addmm", "bmm", "baddbmm", "addbmm", "mv", "addmv", "dot", "vdot", "matmul"):
            t = args[1] if name.startswith("add") or name == "baddbmm" else a0
            return int(t.shape[-1]) if isinstance(t, torch.Tensor) else 0
        if name in (
            "sum",
            "mean",
            "nansum",
            "var",
            "std",
            "var_mean",
            "std_mean",
            "prod",
            "norm",
            "linalg_vector_norm",
            "logsumexp",
            "cumsum",
            "cumprod",
            "amax",
            "amin",
        ):
            if not isinstance(a0, torch.Tensor):
                return 0
            dims = args[1] if len(args) > 1 else kwargs.get("dim")
            if (
                dims is None
                or (isinstance(dims, (list, tuple)) and len(dims) == 0)
                or not isinstance(dims, (int, list, tuple))
            ):
                return int(a0.numel())
            dims = [dims] if isinstance(dims, int) else list(dims)
            return int(math.prod(a0.shape[d] for d in dims)) if a0.dim() else 1
        if name in ("_softmax", "_log_softmax", "softmax", "log_softmax"):
            return int(a0.shape[args[1]]) if isinstance(a0, torch.Tensor) and a0.dim() else 0
        if name in ("native_layer_norm", "layer_norm", "native_group_norm", "_fused_rms_norm", "rms_norm"):
            ns = args[1] if len(args) > 1 else None
            return int(math.prod(ns)) if isinstance(ns, (list, tuple)) else 0
        if name in ("convolution", "_convolution", "conv2d", "conv1d", "conv3d"):
            w = args[1]
            return int(w.numel() // max(1, w.shape[0])) if isinstance(w, torch.Tensor) else 0
        if "scaled_dot_product" in name:
            q, k = args[0], args[1]
            return int(max(q.shape[-1], k.shape[-2]))
    except Exception:
        return 0
    return 0


def _term_magnitude(func: Any, args: tuple[Any, ...]) -> float:
    """The largest magnitude of one term a reduction op sums (a product of two maxima for a
    matrix product; 0.0 when unknown)."""
    name = getattr(func, "__name__", str(func)).split(".")[0]
    tensors = [t for t in args if isinstance(t, torch.Tensor) and (t.is_floating_point() or t.is_complex())]

    def top(t: torch.Tensor) -> float:
        return float(t.detach().abs().max()) if t.numel() else 0.0

    if name in ("mm", "bmm", "mv", "dot", "vdot", "matmul"):
        pair = tensors[:2]
    elif name in ("addmm", "baddbmm", "addbmm", "addmv"):
        pair = tensors[1:3]
    elif name in ("convolution", "_convolution", "conv2d", "conv1d", "conv3d") or "scaled_dot_product" in name:
        pair = tensors[:2]
    elif name in ("_softmax", "_log_softmax", "softmax", "log_softmax"):
        return 1.0  # exp(x - max) <= 1
    else:
        pair = tensors[:1]
    if not pair:
        return 0.0
    return float(math.prod(top(t) for t in pair))


def reduction_provenance(
    fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], prefix: str = "out"
) -> tuple[Any, dict[str, int]]:
    """Run ``fn`` eagerly under a dispatch mode that carries, for every tensor, the longest
    reduction in its history; return the output and path → length for its tensor leaves."""
    out, lengths, _ = reduction_trace(fn, args, kwargs, prefix)
    return out, lengths


def reduction_trace(
    fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], prefix: str = "out"
) -> tuple[Any, dict[str, int], dict[str, float]]:
    """Run ``fn`` eagerly under a dispatch mode that carries, for every tensor, the longest
    reduction in its history and the largest reduction allowance K * u * m in it (K terms of
    magnitude <= m, u the accumulation dtype's unit roundoff); return the output and, per tensor
    leaf path, both."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten
    from torch.utils.weak import WeakTensorKeyDictionary

    prov: Any = WeakTensorKeyDictionary()
    allow: Any = WeakTensorKeyDictionary()

    class _Mode(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, a: Any = (), kw: Any = None) -> Any:
            kw = kw or {}
            res = func(*a, **kw)
            ins, _ = tree_flatten((a, kw))
            tins = [t for t in ins if isinstance(t, torch.Tensor)]
            k = _reduction_length(func, a, kw)
            n = max([prov.get(t, 0) for t in tins] + [k])
            al = max([allow.get(t, 0.0) for t in tins] + [0.0])
            if k > 1:
                try:
                    dts = [t.dtype for t in tins if t.is_floating_point() or t.is_complex()]
                    u = unit_roundoff(dts[0], accumulation=True) if dts else 0.0
                    al = max(al, k * u * _term_magnitude(func, tuple(a)))
                except Exception:
                    pass
            if n or al:
                outs, _ = tree_flatten(res)
                for t in outs:
                    if isinstance(t, torch.Tensor):
                        if n:
                            prov[t] = max(n, prov.get(t, 0))
                        if al:
                            allow[t] = max(al, allow.get(t, 0.0))
            return res

    with _Mode():
        out = fn(*args, **kwargs)
    leaves = [(p, v) for p, v in flatten(out, prefix) if isinstance(v, torch.Tensor)]
    lengths = {p: int(prov.get(v, 0)) for p, v in leaves}
    allowances = {p: float(allow.get(v, 0.0)) for p, v in leaves if allow.get(v, 0.0)}
    return out, lengths, allowances


def float64_run(
    fn: Callable[..., Any], entry: Any, as_call: Callable[[Any], tuple[tuple[Any, ...], dict[str, Any]]],
) -> Rounding:
    """Eager on the same inputs in float64 (a float64 copy of the module; floating inputs widened):
    the values by leaf path, or why the run could not be made (then the tolerance factor decides)."""
    import copy

    tensors = [v for _, v in flatten(entry, "x") if isinstance(v, torch.Tensor)]
    if isinstance(fn, torch.nn.Module):
        tensors += [*fn.parameters(), *fn.buffers()]
    floats = [t for t in tensors if t.is_floating_point() or t.is_complex()]
    if floats and all(t.dtype in (torch.float64, torch.complex128) for t in floats):
        return Rounding(missing="the workload already runs in float64")
    need = sum(t.numel() * 16 if t.is_complex() else t.numel() * 8 for t in floats)
    free = _free_bytes(floats[0].device if floats else torch.device("cpu"))
    if free is not None and 2 * need > free:
        return Rounding(missing=f"a float64 copy needs about {2 * need >> 20} MiB, {free >> 20} MiB free")
    try:
        if isinstance(fn, torch.nn.Module):
            run: Any = copy.deepcopy(fn).to(torch.float64)
        else:
            run = fn
        wide = _widen(clone_tree(entry))
        args, kwargs = as_call(wide)
        with torch.random.fork_rng(devices=[]):
            out = run(*args, **kwargs)
    except Exception as e:  # an op or dtype without float64, memory
        return Rounding(missing=f"the float64 run raised {type(e).__name__}: {first_line(e)[:160]}")
    values: dict[str, Any] = dict(flatten(out, "out"))
    values.update(flatten(wide, "input"))
    if isinstance(fn, torch.nn.Module):
        values.update({f"module.{k}": v for k, v in module_state(run).items()})
    return Rounding(values=values)


def _widen(obj: Any) -> Any:
    def widen(t: torch.Tensor) -> torch.Tensor:
        if t.is_complex():
            return t.to(torch.complex128)
        return t.to(torch.float64) if t.is_floating_point() else t

    return map_tensors(obj, widen)


def _free_bytes(device: torch.device) -> int | None:
    """Memory free on the device (CUDA: the driver's figure; CPU: ``MemAvailable``), None if unknown."""
    try:
        if device.type == "cuda":
            return int(torch.cuda.mem_get_info(device)[0])
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except Exception:
        return None
    return None
