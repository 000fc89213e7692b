"""Output fingerprints: what a compiled call returned, small enough to compare between processes.

Each tensor leaf of a call's output becomes its shape, dtype and a few float64 reductions (sum,
sum of absolute values, min, max, NaN count); other leaves their ``repr`` (numbers exactly). Only
top-level calls made before the first optimizer step are kept, and the call that took it (a
compiled training step: its loss was computed before the update, on the same weights in every run),
marked ``updated``: after a parameter update two runs drift apart chaotically, whatever the
compiler did, so a difference in that call's outputs cannot be told from the update's rounding and
decides nothing. A ``transformers`` KV cache in an output (a model's ``past_key_values``) is one
leaf of kind ``kv cache``, whatever its class: it is state the next call reads, not a result, and
its layout is what a remedy may change (``cache_implementation="static"`` allocates it at the
generation's full length); what it holds shows in the next call's logits, which are compared.

The comparison is torch-free. Tolerances are relative to the leaf's scale (the sum of absolute
values for sums, the largest magnitude for min and max), per dtype:

- float64 1e-9, float32 1e-5, float16 1e-3, bfloat16 1e-2: about ten times ``torch.testing``'s
  element-wise default (float32 1.3e-6, float16 1e-3, bfloat16 1.6e-2, rounded), since a
  reduction also sums the rounding of reordered kernels, and below 1e-2 for float32 so that a 1%
  change of one output is always caught; integers, bools and shapes compare exactly.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import math
import time
from collections.abc import Callable, Iterator
from typing import Any

import msgspec

TOLERANCE: dict[str, float] = {
    "torch.float64": 1e-9,
    "torch.float32": 1e-5,
    "torch.float16": 1e-3,
    "torch.bfloat16": 1e-2,
    "torch.complex64": 1e-5,
    "torch.complex128": 1e-9,
}
"""Relative tolerance per floating dtype; any other dtype compares exactly."""

MAX_CALLS = 256
"""Calls fingerprinted per run (the first ones; the rest are counted)."""


def tolerance_text() -> str:
    return "outputs: " + ", ".join(f"{k.split('.')[-1]} {v:g}" for k, v in TOLERANCE.items()) + \
        " relative to each leaf's scale; integer, bool and shape exact"


class Leaf(msgspec.Struct, frozen=True, kw_only=True):
    path: str
    kind: str
    """``tensor`` or the Python type of the leaf."""
    dtype: str | None = None
    shape: list[int] | None = None
    sum: float | None = None
    abs_sum: float | None = None
    min: float | None = None
    max: float | None = None
    nans: int | None = None
    value: str | None = None


class CallPrint(msgspec.Struct, frozen=True, kw_only=True):
    index: int
    leaves: list[Leaf]
    updated: bool = False
    """The call took the first optimizer step before it returned (a compiled training step)."""


class Probe(msgspec.Struct, frozen=True, kw_only=True):
    """One call a check run made on purpose after the script, with an input changed the way a
    dropped guard would have to notice (``guard_probe.py``): its outputs, or what it raised."""

    label: str
    """What changed: ``Net.scale: 1.0 → 2.0``, ``dim 0 of x: 4 → 5``, ``dtype of x: float32 → float64``."""
    kind: str
    """``attribute``, ``training``, ``shape`` or ``dtype``."""
    leaves: list[Leaf] | None = None
    error: str | None = None
    """``TYPE: first line`` of what the call raised (then no leaves)."""


class Fingerprints(msgspec.Struct, frozen=True, kw_only=True):
    calls: list[CallPrint]
    calls_seen: int
    stopped_at_update: int | None
    """Top-level calls made before the first optimizer step (None: no step was taken); the call
    that took it is kept too, ``updated``."""
    fingerprint_ns: int
    script_ns: int
    cpu_ns: int | None = None
    """The process's CPU time (user + system) when it wrote this record."""
    preempted: int | None = None
    """Its involuntary context switches by then."""
    probes: list[Probe] | None = None
    """The check run's probes (``--guard-probe``), in the order they ran; None: not asked for."""
    probe_note: str | None = None
    """Why the probes asked for did not run (the script failed, or updated parameters)."""


# --- recording (torch) ----------------------------------------------------------------------------

_VIEW: contextvars.ContextVar[Callable[[Any], Any] | None] = contextvars.ContextVar("seamscope_output_view",
                                                                                    default=None)


@contextlib.contextmanager
def output_view(view: Callable[[Any], Any] | None) -> Iterator[None]:
    """Fingerprint ``view(output)`` for the calls made inside: what the caller gets back when it
    post-processes the compiled output (a padded call's output cut back to the real length), so
    that runs that pad compare with runs that do not."""
    token = _VIEW.set(view)
    try:
        yield
    finally:
        _VIEW.reset(token)


KV_CACHE = "kv cache"


def is_kv_cache(obj: Any) -> bool:
    """Whether ``obj`` is a ``transformers`` KV cache (``DynamicCache``, ``StaticCache``, ...)."""
    return any(c.__module__.split(".", 1)[0] == "transformers" and c.__name__.endswith("Cache")
               for c in type(obj).__mro__)


def _leaves(obj: Any, path: str, out: list[Leaf], torch: Any) -> None:
    if isinstance(obj, torch.Tensor):
        t = obj.detach()
        if t.is_floating_point() or t.is_complex():
            x = t.to(torch.float64) if not t.is_complex() else t.abs().to(torch.float64)
            n = int(torch.isnan(x).sum().item())
            finite = torch.nan_to_num(x, nan=0.0)
            out.append(Leaf(path=path, kind="tensor", dtype=str(t.dtype), shape=list(t.shape),
                            sum=float(finite.sum().item()), abs_sum=float(finite.abs().sum().item()),
                            min=float(finite.min().item()) if t.numel() else None,
                            max=float(finite.max().item()) if t.numel() else None, nans=n))
        else:
            x = t.to(torch.int64)
            out.append(Leaf(path=path, kind="tensor", dtype=str(t.dtype), shape=list(t.shape),
                            sum=float(x.sum().item()), abs_sum=float(x.abs().sum().item()),
                            min=float(x.min().item()) if t.numel() else None,
                            max=float(x.max().item()) if t.numel() else None, nans=0))
        return
    if isinstance(obj, dict):
        for k in obj:
            _leaves(obj[k], f"{path}[{k!r}]", out, torch)
        return
    if isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            _leaves(v, f"{path}[{i}]", out, torch)
        return
    if obj is None or isinstance(obj, (bool, int, float, str)):
        out.append(Leaf(path=path, kind=type(obj).__name__, value=repr(obj)))
        return
    if is_kv_cache(obj):
        out.append(Leaf(path=path, kind=KV_CACHE))
        return
    fields = getattr(obj, "__dataclass_fields__", None)
    if fields:
        for k in fields:
            _leaves(getattr(obj, k, None), f"{path}.{k}", out, torch)
        return
    out.append(Leaf(path=path, kind=type(obj).__name__))


def leaves_of(out: Any) -> list[Leaf]:
    """The fingerprint of one output (torch)."""
    import torch

    leaves: list[Leaf] = []
    with torch.no_grad():
        _leaves(out, "out", leaves, torch)
    return leaves


class Recorder:
    """Fingerprints the outputs of top-level compiled calls up to the first optimizer step (the call
    that takes it included, ``updated``)."""

    def __init__(self) -> None:
        self.calls: list[CallPrint] = []
        self.seen = 0
        self.stopped_at: int | None = None
        self.ns = 0
        self._depth = 0
        self._stepped_inside = False

    def install(self) -> Callable[[], None]:
        from torch.optim.optimizer import register_optimizer_step_pre_hook

        def on_step(*_: Any, **__: Any) -> None:
            if self.stopped_at is None:
                self.stopped_at = self.seen
                self._stepped_inside = self._depth > 0

        handle = register_optimizer_step_pre_hook(on_step)
        return handle.remove  # type: ignore[no-any-return]

    def wrap(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        import torch

        from ...capture.adapter import is_compiling_fn

        compiling = is_compiling_fn()

        def recorded(*args: Any, **kwargs: Any) -> Any:
            if compiling() or self._depth:
                return fn(*args, **kwargs)
            self._depth += 1
            try:
                out = fn(*args, **kwargs)
            finally:
                self._depth -= 1
            t0 = time.perf_counter_ns()
            index = self.seen
            self.seen += 1
            took_step = self.stopped_at == index and self._stepped_inside
            if (self.stopped_at is None or took_step) and len(self.calls) < MAX_CALLS:
                leaves: list[Leaf] = []
                view = _VIEW.get()
                with torch.no_grad():
                    _leaves(view(out) if view is not None else out, "out", leaves, torch)
                self.calls.append(CallPrint(index=index, leaves=leaves, updated=took_step))
            self.ns += time.perf_counter_ns() - t0
            return out

        return recorded

    def write(self, path: str, script_ns: int, probes: list[Probe] | None = None,
              probe_note: str | None = None) -> None:
        import resource

        use = resource.getrusage(resource.RUSAGE_SELF)  # a forked run's counts start at its fork
        fp = Fingerprints(calls=self.calls, calls_seen=self.seen, stopped_at_update=self.stopped_at,
                          fingerprint_ns=self.ns, script_ns=script_ns,
                          cpu_ns=int((use.ru_utime + use.ru_stime) * 1e9), preempted=use.ru_nivcsw,
                          probes=probes, probe_note=probe_note)
        with open(path, "wb") as f:
            f.write(msgspec.json.encode(fp))


def load(path: str) -> Fingerprints:
    with open(path, "rb") as f:
        return msgspec.json.decode(f.read(), type=Fingerprints)


# --- comparison (torch-free) ----------------------------------------------------------------------


def _close(a: float | None, b: float | None, scale: float, rtol: float) -> bool:
    if a is None or b is None:
        return a is b
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if rtol == 0.0:
        return a == b
    return abs(a - b) <= rtol * scale + 1e-300


def compare_leaf(a: Leaf, b: Leaf) -> tuple[str | None, float]:
    """(None, deviation) when equal within tolerance, else (what differs, deviation)."""
    if a.kind != b.kind or a.path != b.path:
        return f"{a.path}: {a.kind} vs {b.kind}", math.inf
    if a.kind != "tensor":
        return (None, 0.0) if a.value == b.value else (f"{a.path}: {a.value} vs {b.value}", math.inf)
    if a.dtype != b.dtype:
        return f"{a.path}: dtype {a.dtype} vs {b.dtype}", math.inf
    if a.shape != b.shape:
        return f"{a.path}: shape {a.shape} vs {b.shape}", math.inf
    if a.nans != b.nans:
        return f"{a.path}: {a.nans} vs {b.nans} NaN", math.inf
    rtol = TOLERANCE.get(a.dtype or "", 0.0)
    scale_sum = max(a.abs_sum or 0.0, b.abs_sum or 0.0)
    scale_ext = max(abs(a.min or 0.0), abs(a.max or 0.0), abs(b.min or 0.0), abs(b.max or 0.0))
    dev = 0.0
    for name, x, y, scale in (("sum", a.sum, b.sum, scale_sum), ("abs sum", a.abs_sum, b.abs_sum, scale_sum),
                              ("min", a.min, b.min, scale_ext), ("max", a.max, b.max, scale_ext)):
        if x is not None and y is not None and scale > 0:
            dev = max(dev, abs(x - y) / scale)
        if not _close(x, y, scale, rtol):
            return f"{a.path}: {name} {x:.9g} vs {y:.9g} (tolerance {rtol:g} of {scale:.3g})", dev
    return None, dev


class Comparison(msgspec.Struct, frozen=True, kw_only=True):
    equal: bool
    calls_compared: int
    max_deviation: float | None
    """Largest relative deviation of any reduction (0 when bitwise equal; None when the
    structure differs)."""
    first_difference: str | None = None
    after_update: bool = False
    """The first difference is in a call that updated parameters before it returned: it may be
    the update's rounding, not the compiler's."""


def compare_leaves(a: list[Leaf], b: list[Leaf]) -> str | None:
    """The first difference between two outputs' fingerprints, or None when equal within tolerance."""
    if len(a) != len(b):
        return f"{len(a)} vs {len(b)} outputs"
    for la, lb in zip(a, b, strict=True):
        diff, _ = compare_leaf(la, lb)
        if diff is not None:
            return diff
    return None


def compare(a: Fingerprints, b: Fingerprints) -> Comparison:
    """Compare the calls both runs fingerprinted, in order."""
    dev = 0.0
    n = min(len(a.calls), len(b.calls))
    if len(a.calls) != len(b.calls):
        return Comparison(equal=False, calls_compared=n, max_deviation=None,
                          first_difference=f"{len(a.calls)} vs {len(b.calls)} calls up to the first update")
    for ca, cb in zip(a.calls, b.calls, strict=True):
        if len(ca.leaves) != len(cb.leaves):
            return Comparison(equal=False, calls_compared=n, max_deviation=None,
                              first_difference=f"call {ca.index}: {len(ca.leaves)} vs {len(cb.leaves)} outputs")
        for la, lb in zip(ca.leaves, cb.leaves, strict=True):
            diff, d = compare_leaf(la, lb)
            dev = max(dev, d)
            if diff is not None:
                return Comparison(equal=False, calls_compared=n, max_deviation=None if math.isinf(d) else dev,
                                  first_difference=f"call {ca.index}, {diff}", after_update=ca.updated or cb.updated)
    return Comparison(equal=True, calls_compared=n, max_deviation=dev)


def dumps(fp: Fingerprints) -> str:
    return json.dumps(msgspec.to_builtins(fp))
