"""The differential test: eager against compiled, leaf by leaf, with classes.

Two paths never agree bit for bit (fused multiply-adds, reductions in a new order, rounding steps
fused away), so a leaf is first compared with a dtype-aware tolerance, and a difference over it is
judged against what rounding can explain for that leaf:

- ``within_tolerance``: |a - e| <= atol + rtol * |e| everywhere (arithmetic drift; ULPs reported).
  A tolerance the user gives is a floor: a difference within it is never a bug.
- ``above_tolerance``: over the tolerance, but rounding explains it.
- ``boundary_bug``: rounding cannot explain it by a wide margin (``ROUNDING_MARGIN``), or a wrong
  shape, dtype, structure, aliasing, NaN placement or side effect (integers and bools are exact).

What rounding can explain is measured, not guessed: the same inputs run eagerly in float64, and
|eager - eager in float64| over the leaf is eager's own rounding error. It already holds depth,
cancellation and every rounding step eager takes, so a compiled path (which rounds differently,
often less) lands within a small multiple of it. Two floors keep one lucky sample from making the
bound too tight: half an ulp of the leaf's typical value, and the reduction allowance K * u * m of
the longest reduction behind the leaf (K terms of magnitude <= m, u the unit roundoff of the
accumulation dtype: a new summation order moves the result by about that much). Where no float64
run can be made (an op or a dtype without it, not enough memory), the tolerance factor decides as
before (``BUG_FACTOR``) and the leaf says why.

Inputs and module parameters/buffers mutated in place are compared the same way. The float64 run,
the reduction provenance and the random ops in the graphs a backend received (eager and compiled
draw different numbers) are in ``provenance``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable
from typing import Any

import torch

from ..model.probe import LeafClass, LeafDiff
from .workload import map_tensors

BUG_FACTOR = 100.0
"""Without a float64 reference: a difference at least this many times the tolerance is a boundary bug."""

ROUNDING_MARGIN = 8.0
"""A difference at least this many times what rounding explains is a boundary bug. Measured on CPU:
inductor's drift on the bundled decoder and a 6-layer GPT-2 (float32, bfloat16) is 0.5-1.3x eager's
own error; a compiled-only 5% scaling in bfloat16 (smaller factors round to 1) is 22-26x it."""

# (rtol, atol) per dtype; float32 rtol=1e-4/atol=1e-5 (catches a mis-fused kernel, admits reassociation
# drift), the rest after torch.testing's defaults.
DEFAULT_TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float64: (1e-7, 1e-7),
    torch.float32: (1e-4, 1e-5),
    torch.float16: (1e-3, 1e-5),
    torch.bfloat16: (1.6e-2, 1e-5),
    torch.complex128: (1e-7, 1e-7),
    torch.complex64: (1e-4, 1e-5),
}

_ORDER = {"within_tolerance": 0, "above_tolerance": 1, "boundary_bug": 2}


def worse(a: LeafClass, b: LeafClass) -> LeafClass:
    return a if _ORDER[a] >= _ORDER[b] else b


def classify_ratio(ratio: float) -> LeafClass:
    """The class of a leaf from its worst |a - e| / (atol + rtol |e|) alone (no float64 reference)."""
    if math.isnan(ratio) or ratio >= BUG_FACTOR:
        return "boundary_bug"
    if ratio <= 1.0:
        return "within_tolerance"
    return "above_tolerance"


def classify_leaf(ratio: float, rounding_ratio: float | None) -> LeafClass:
    """The class of a leaf from its tolerance ratio and, when a float64 run was made, its
    max |a - e| / (what rounding explains). The tolerance is a floor: within it, never a bug;
    over it, rounding decides whatever the tolerance ratio is."""
    if math.isnan(ratio):
        return "boundary_bug"
    if ratio <= 1.0:
        return "within_tolerance"
    if rounding_ratio is None:
        return classify_ratio(ratio)
    if math.isnan(rounding_ratio) or rounding_ratio >= ROUNDING_MARGIN:
        return "boundary_bug"
    return "above_tolerance"


def unit_roundoff(dtype: torch.dtype, accumulation: bool = False) -> float:
    """Half the machine epsilon; for a reduction (``accumulation``) float16 and bfloat16 count as
    float32, which is what eager and inductor accumulate them in."""
    if dtype.is_complex:
        dtype = torch.float64 if dtype == torch.complex128 else torch.float32
    if not dtype.is_floating_point:
        return 0.0
    if accumulation and dtype in (torch.float16, torch.bfloat16):
        dtype = torch.float32
    return float(torch.finfo(dtype).eps) / 2.0


def rounding_bound(
    eager_error: float, typical: float, dtype: torch.dtype, allowance: float | None
) -> tuple[float, str]:
    """(What rounding can explain for a leaf, which part set it): the largest of eager's own
    error, half an ulp of the leaf's typical (root-mean-square) value, and the reduction allowance."""
    half_ulp = unit_roundoff(dtype) * typical
    parts = [(eager_error, "eager's own error"), (half_ulp, "half an ulp of the leaf")]
    if allowance:
        parts.append((allowance, "the reduction allowance"))
    return max(parts, key=lambda p: p[0])


def tolerance_for(dtype: torch.dtype, override: tuple[float, float] | None = None) -> tuple[float, float]:
    if not (dtype.is_floating_point or dtype.is_complex):
        return (0.0, 0.0)
    if override is not None:
        return (float(override[0]), float(override[1]))
    return DEFAULT_TOLERANCES.get(dtype, (1e-3, 1e-5))


def is_large_reduction(length: int | None, dtype: torch.dtype, rtol: float) -> bool | None:
    """A reduction over n terms in a new order can move the result by up to about n ulp, so it
    can legitimately exceed ``rtol`` once n * eps >= rtol (float32, rtol 1e-4: n >= ~840)."""
    if length is None or not dtype.is_floating_point:
        return None
    return length * torch.finfo(dtype).eps >= rtol


# --- nested structures ---------------------------------------------------------------------------


def flatten(obj: Any, prefix: str = "out") -> list[tuple[str, Any]]:
    """Leaves of tuples, lists, dicts, dataclasses, namedtuples and ``ModelOutput`` with their paths."""
    out: list[tuple[str, Any]] = []

    def walk(o: Any, p: str) -> None:
        if isinstance(o, torch.Tensor) or o is None or isinstance(o, (int, float, bool, str, complex)):
            out.append((p, o))
        elif isinstance(o, dict):
            attr = dataclasses.is_dataclass(o)  # transformers' ModelOutput: a dict and a dataclass
            for k in o.keys():
                walk(o[k], f"{p}.{k}" if attr and isinstance(k, str) else f"{p}[{k!r}]")
        elif isinstance(o, tuple) and hasattr(o, "_fields"):
            for k in o._fields:
                walk(getattr(o, k), f"{p}.{k}")
        elif isinstance(o, (tuple, list)):
            for i, v in enumerate(o):
                walk(v, f"{p}[{i}]")
        elif dataclasses.is_dataclass(o) and not isinstance(o, type):
            for f in dataclasses.fields(o):
                walk(getattr(o, f.name), f"{p}.{f.name}")
        else:
            out.append((p, o))

    walk(obj, prefix)
    return out


def clone_tree(obj: Any) -> Any:
    """A deep copy in which tensors are cloned (so each path gets untouched inputs)."""
    return map_tensors(obj, lambda t: t.detach().clone().requires_grad_(t.requires_grad))


# --- one leaf ------------------------------------------------------------------------------------


def ulp_distance(a: torch.Tensor, b: torch.Tensor) -> int:
    """Largest distance in units in the last place between same-dtype floating tensors (NaNs
    excluded; +0 and -0 are 0 apart)."""
    if a.numel() == 0:
        return 0
    bits = {8: torch.int64, 4: torch.int32, 2: torch.int16}.get(a.element_size())
    if bits is None or not a.dtype.is_floating_point:
        return 0
    keep = ~(torch.isnan(a) | torch.isnan(b))
    if not bool(keep.any()):
        return 0
    ia = a.detach().cpu().contiguous()[keep].view(bits).to(torch.int64)
    ib = b.detach().cpu().contiguous()[keep].view(bits).to(torch.int64)
    low = -(1 << (8 * a.element_size() - 1))
    oa = torch.where(ia < 0, low - ia, ia)
    ob = torch.where(ib < 0, low - ib, ib)
    if a.element_size() == 8:  # int64 subtraction may overflow; float64 is close enough here
        return int((oa.double() - ob.double()).abs().max().item())
    return int((oa - ob).abs().max().item())


@dataclasses.dataclass
class Rounding:
    """What rounding can explain, from eager's run in float64 on the same inputs: the float64
    values by leaf path (outputs ``out...``, inputs after the call ``input...``, module state
    ``module.NAME``) and the reduction allowance per output path; or why there is no such run."""

    values: dict[str, Any] = dataclasses.field(default_factory=dict)
    allowances: dict[str, float] = dataclasses.field(default_factory=dict)
    missing: str | None = None
    """Why no float64 run was made (the tolerance factor decides then)."""


def compare_leaf(
    path: str,
    expected: Any,
    actual: Any,
    override: tuple[float, float] | None = None,
    reduction_length: int | None = None,
    rounding: Rounding | None = None,
) -> LeafDiff:
    if isinstance(expected, torch.Tensor):
        return _compare_tensor(path, expected, actual, override, reduction_length, rounding)
    if isinstance(expected, float) and not isinstance(expected, bool):
        if not isinstance(actual, (float, int)) or isinstance(actual, bool):
            return LeafDiff(
                path=path, klass="boundary_bug", reason=f"type: eager float, compiled {type(actual).__name__}"
            )
        t = torch.tensor([expected], dtype=torch.float64)
        u = torch.tensor([float(actual)], dtype=torch.float64)
        rtol, atol = tolerance_for(torch.float32, override)
        ratio, max_abs, max_rel = _ratio(t, u, rtol, atol)
        return LeafDiff(
            path=path, klass=classify_ratio(ratio), reason="python float", dtype="float",
            rtol=rtol, atol=atol, max_abs=max_abs, max_rel=max_rel, tolerance_ratio=_finite(ratio),
        )
    if type(expected) is not type(actual) or expected != actual:
        if isinstance(expected, (int, str, bool)) or expected is None:
            return LeafDiff(
                path=path, klass="boundary_bug", reason=f"value: eager {expected!r}, compiled {actual!r}"[:200]
            )
        if type(expected) is not type(actual):
            return LeafDiff(
                path=path, klass="boundary_bug",
                reason=f"type: eager {type(expected).__name__}, compiled {type(actual).__name__}",
            )
    return LeafDiff(path=path, klass="within_tolerance", reason="equal")


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def _ratio(e: torch.Tensor, a: torch.Tensor, rtol: float, atol: float) -> tuple[float, float, float]:
    """(worst |a-e| / (atol + rtol |e|), max abs error, max rel error) over non-NaN positions
    (equal values, infinities included, count as 0)."""
    diff = (a - e).abs()
    same = (a == e) | (torch.isnan(a) & torch.isnan(e))
    diff = torch.where(same, torch.zeros_like(diff), diff)
    diff = torch.nan_to_num(diff, nan=math.inf)
    if diff.numel() == 0:
        return 0.0, 0.0, 0.0
    mag = e.abs()
    allowed = atol + rtol * mag
    with torch.no_grad():
        r = torch.where(diff == 0, torch.zeros_like(diff), diff / allowed)
        rel = torch.where(diff == 0, torch.zeros_like(diff), diff / mag)
    return float(r.max()), float(diff.max()), float(rel.max())


def _mismatch(base: dict[str, Any], expected: torch.Tensor, actual: Any) -> LeafDiff | None:
    """A compiled leaf of another type, shape, dtype or device: a boundary bug before any value."""
    if not isinstance(actual, torch.Tensor):
        return LeafDiff(**base, klass="boundary_bug", reason=f"type: eager Tensor, compiled {type(actual).__name__}")
    if list(actual.shape) != base["shape"]:
        got = list(actual.shape)
        return LeafDiff(**base, klass="boundary_bug", reason=f"shape: eager {base['shape']}, compiled {got}")
    if actual.dtype != expected.dtype:
        compiled = str(actual.dtype).replace("torch.", "")
        return LeafDiff(**base, klass="boundary_bug", reason=f"dtype: eager {base['dtype']}, compiled {compiled}")
    if actual.device.type != expected.device.type:
        return LeafDiff(
            **base, klass="boundary_bug", reason=f"device: eager {expected.device}, compiled {actual.device}"
        )
    return None


def _exact(base: dict[str, Any], e: torch.Tensor, a: torch.Tensor) -> LeafDiff:
    """Integers and booleans: equal, or a boundary bug (no tolerance applies)."""
    neq = int((e != a).sum())
    if neq:
        d = (a.to(torch.float64) - e.to(torch.float64)).abs().max() if e.dtype != torch.bool else torch.tensor(1.0)
        return LeafDiff(
            **base, klass="boundary_bug", reason=f"exact dtype: {neq} of {e.numel()} elements differ",
            max_abs=float(d), tolerance_ratio=None,
        )
    return LeafDiff(**base, klass="within_tolerance", reason="equal", max_abs=0.0, max_rel=0.0, max_ulp=0)


def _float_reason(
    klass: str, ratio: float, max_abs: float, rr: float | None, judged: dict[str, Any], what: Any, large: bool | None
) -> str:
    """Why a floating leaf got its class, with the figures that decided it."""
    if klass == "within_tolerance":
        return "equal" if max_abs == 0 else "arithmetic drift"
    if math.isinf(ratio) or math.isnan(ratio):
        return "non-finite where eager is finite"
    if "rounding_bound" in judged:
        rr_text = f"{rr:.3g}" if rr is not None and math.isfinite(rr) else "inf"
        own = f"eager's own error vs float64 {judged['eager_error']:.3g}"
        basis = own if what == "eager's own error" else f"set by {what}; {own}"
        nums = (f"max |compiled - eager| {max_abs:.3g} is {rr_text}x what rounding explains,"
                f" {judged['rounding_bound']:.3g} ({basis}); {ratio:.3g}x the tolerance")
        if klass == "boundary_bug":
            return f"rounding cannot explain it: {nums}"
        return f"over the tolerance, rounding explains it: {nums}"
    why = judged.get("no_float64")
    tail = f"; no float64 reference ({why}), judged by the tolerance factor" if why else ""
    if klass == "above_tolerance":
        if large:
            return "above tolerance; a large reduction lies behind this leaf (a new summation order can do this)" + tail
        if large is False:
            return "above tolerance; no large reduction behind this leaf" + tail
        return "above tolerance" + tail
    return f">= {BUG_FACTOR:g}x the tolerance ({ratio:.3g}x)" + tail


def _compare_tensor(
    path: str,
    expected: torch.Tensor,
    actual: Any,
    override: tuple[float, float] | None,
    reduction_length: int | None,
    rounding: Rounding | None = None,
) -> LeafDiff:
    dt = expected.dtype
    base: dict[str, Any] = {"path": path, "dtype": str(dt).replace("torch.", ""), "shape": list(expected.shape)}
    bad = _mismatch(base, expected, actual)
    if bad is not None:
        return bad
    rtol, atol = tolerance_for(dt, override)
    e = expected.detach().cpu()
    a = actual.detach().cpu()
    if not (dt.is_floating_point or dt.is_complex):
        return _exact(base, e, a)
    wide = torch.complex128 if dt.is_complex else torch.float64
    e64, a64 = e.to(wide), a.to(wide)
    nan_e, nan_a = torch.isnan(e64), torch.isnan(a64)
    large = is_large_reduction(reduction_length, dt, rtol) if not dt.is_complex else None
    extra: dict[str, Any] = {"rtol": rtol, "atol": atol, "reduction_length": reduction_length, "large_reduction": large}
    if not torch.equal(nan_e, nan_a):
        n = int((nan_e ^ nan_a).sum())
        return LeafDiff(**base, **extra, klass="boundary_bug", reason=f"NaN positions differ at {n} elements")
    ratio, max_abs, max_rel = _ratio(e64, a64, rtol, atol)
    ulp = ulp_distance(e, a) if dt.is_floating_point else None
    judged = _judge_rounding(e64, a64, dt, path, rounding)
    what = judged.pop("_what", None)
    rr = judged.get("rounding_ratio")
    has_bound = "rounding_bound" in judged
    if has_bound and rr is None:
        rr = math.inf  # eager equals float64 exactly and nothing else explains a difference
    judged["rounding_ratio"] = _finite(rr) if rr is not None else None
    extra.update(judged)
    if ratio > 1.0 and not math.isnan(ratio):
        extra["judged_by"] = "rounding" if has_bound else "tolerance"
    klass = classify_leaf(ratio, rr if has_bound else None)
    reason = _float_reason(klass, ratio, max_abs, rr, judged, what, large)
    return LeafDiff(
        **base, **extra, klass=klass, reason=reason, max_abs=max_abs if math.isfinite(max_abs) else None,
        max_rel=max_rel if math.isfinite(max_rel) else None, max_ulp=ulp, tolerance_ratio=_finite(ratio),
    )


def _judge_rounding(
    e: torch.Tensor, a: torch.Tensor, dt: torch.dtype, path: str, rounding: Rounding | None
) -> dict[str, Any]:
    """The rounding fields of a leaf (``e`` and ``a`` already widened): eager's own error, the
    bound, max |a - e| over it; or why there is none."""
    if rounding is None:
        return {}
    if rounding.missing is not None:
        return {"no_float64": rounding.missing}
    if dt in (torch.float64, torch.complex128):
        return {"no_float64": "the leaf is already float64"}
    ref = rounding.values.get(path)
    if not isinstance(ref, torch.Tensor):
        return {"no_float64": "the float64 run has no such leaf"}
    if list(ref.shape) != list(e.shape):
        return {"no_float64": f"the float64 run gave shape {list(ref.shape)}"}
    wide = torch.complex128 if dt.is_complex else torch.float64
    r = ref.detach().cpu().to(wide)
    finite = torch.isfinite(e) & torch.isfinite(r)
    own = (e - r).abs()[finite]
    eager_error = float(own.max()) if own.numel() else 0.0
    mag = r.abs()[finite]
    typical = float(mag.pow(2).mean().sqrt()) if mag.numel() else 0.0
    allowance = rounding.allowances.get(path)
    bound, what = rounding_bound(eager_error, typical, dt, allowance)
    both = torch.isfinite(e) & torch.isfinite(a)
    d = (a - e).abs()[both]
    diff = float(d.max()) if d.numel() else 0.0
    out: dict[str, Any] = {"eager_error": eager_error, "rounding_bound": bound, "_what": what,
                           "reduction_allowance": allowance if allowance else None}
    out["rounding_ratio"] = diff / bound if bound > 0 else (0.0 if diff == 0 else None)
    return out


# --- whole outputs -------------------------------------------------------------------------------


def compare_trees(
    expected: Any,
    actual: Any,
    prefix: str = "out",
    override: tuple[float, float] | None = None,
    reductions: dict[str, int] | None = None,
    rounding: Rounding | None = None,
) -> list[LeafDiff]:
    """Every leaf compared; a leaf present on one side only is a structural boundary bug."""
    le = flatten(expected, prefix)
    la = dict(flatten(actual, prefix))
    out = []
    for p, v in le:
        if p not in la:
            out.append(LeafDiff(path=p, klass="boundary_bug", reason="structure: missing in compiled output"))
            continue
        out.append(compare_leaf(p, v, la.pop(p), override, (reductions or {}).get(p), rounding))
    for p in la:
        out.append(LeafDiff(path=p, klass="boundary_bug", reason="structure: only in compiled output"))
    return out


def worst_leaf(leaves: Iterable[LeafDiff]) -> LeafDiff | None:
    best: LeafDiff | None = None
    for lf in leaves:
        key = (
            _ORDER[lf.klass],
            lf.tolerance_ratio if lf.tolerance_ratio is not None else (math.inf if lf.klass == "boundary_bug" else 0.0),
        )
        if best is None:
            best = lf
            continue
        bk = (
            _ORDER[best.klass],
            best.tolerance_ratio
            if best.tolerance_ratio is not None
            else (math.inf if best.klass == "boundary_bug" else 0.0),
        )
        if key > bk:
            best = lf
    return best


def aliasing(out: Any, inputs: Any, prefix: str = "out") -> dict[str, str | None]:
    """For each output tensor: the input (or earlier output) it shares storage with, if any."""
    owners: dict[int, str] = {}
    for p, v in flatten(inputs, "input"):
        if isinstance(v, torch.Tensor) and v.numel() > 0:
            owners.setdefault(v.untyped_storage().data_ptr(), p)
    res: dict[str, str | None] = {}
    for p, v in flatten(out, prefix):
        if isinstance(v, torch.Tensor) and v.numel() > 0:
            ptr = v.untyped_storage().data_ptr()
            res[p] = owners.get(ptr)
            owners.setdefault(ptr, p)
    return res


def compare_aliasing(eager: dict[str, str | None], compiled: dict[str, str | None]) -> list[LeafDiff]:
    out = []
    for p, who in eager.items():
        other = compiled.get(p)
        if p in compiled and who != other:
            out.append(
                LeafDiff(
                    path=p,
                    klass="boundary_bug",
                    reason=f"aliasing: eager shares storage with {who or 'nothing'}, compiled with "
                        f"{other or 'nothing'}",
                )
            )
    return out


def compare_side_effects(
    before: Any, eager_after: Any, compiled_after: Any, prefix: str, override: tuple[float, float] | None = None,
    rounding: Rounding | None = None,
) -> list[LeafDiff]:
    """In-place mutations: the compiled path must leave inputs/state as eager left them."""
    out = []
    pre = dict(_leaves(before, prefix))
    comp = dict(_leaves(compiled_after, prefix))
    for p, ev in _leaves(eager_after, prefix):
        cv = comp.get(p)
        if not isinstance(ev, torch.Tensor) or not isinstance(cv, torch.Tensor):
            continue
        b = pre.get(p)
        e_changed = isinstance(b, torch.Tensor) and not _same(b, ev)
        c_changed = isinstance(b, torch.Tensor) and not _same(b, cv)
        if e_changed != c_changed:
            who = "eager" if e_changed else "compiled"
            out.append(
                LeafDiff(
                    path=p, klass="boundary_bug", dtype=str(ev.dtype).replace("torch.", ""), shape=list(ev.shape),
                    reason=f"side effect: only {who} mutated it in place",
                )
            )
        elif e_changed:
            lf = compare_leaf(p, ev, cv, override, rounding=rounding)
            out.append(msgspec_replace(lf, reason="mutated in place: " + lf.reason))
    return out


def _leaves(obj: Any, prefix: str) -> list[tuple[str, Any]]:
    """Module state by dotted name (``module.bn.running_mean``), anything else by :func:`flatten`."""
    if prefix == "module" and isinstance(obj, dict):
        return [(f"module.{k}", v) for k, v in obj.items()]
    return flatten(obj, prefix)


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bitwise-equal values (NaN equal to NaN)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    x, y = a.detach().cpu(), b.detach().cpu()
    if torch.equal(x, y):
        return True
    return a.dtype.is_floating_point and bool(torch.allclose(x, y, rtol=0, atol=0, equal_nan=True))


def msgspec_replace(lf: LeafDiff, **kw: Any) -> LeafDiff:
    import msgspec

    return msgspec.structs.replace(lf, **kw)


def module_state(m: Any) -> dict[str, torch.Tensor]:
    """Parameters and buffers, cloned (``module.``-prefixed names)."""
    if not isinstance(m, torch.nn.Module):
        return {}
    with torch.no_grad():
        st = {f"{k}": v.detach().clone() for k, v in m.named_parameters()}
        st.update({f"{k}": v.detach().clone() for k, v in m.named_buffers()})
    return st


def restore_state(m: Any, state: dict[str, torch.Tensor]) -> None:
    if not isinstance(m, torch.nn.Module):
        return
    live: dict[str, torch.Tensor] = dict(m.named_parameters())
    live.update(dict(m.named_buffers()))
    with torch.no_grad():
        for k, v in state.items():
            if k in live and live[k].shape == v.shape:
                live[k].copy_(v)
