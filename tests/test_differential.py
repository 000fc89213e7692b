"""The differential test's classes and their boundaries, without torch.compile.

GIVEN eager and "compiled" values built to sit at a known distance, WHEN compared, THEN the class
is the one the distance implies; every class boundary has a property test.
"""

from __future__ import annotations

import dataclasses
import math
import sys

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

from seamscope.experiments.differential import (  # noqa: E402
    BUG_FACTOR,
    aliasing,
    classify_ratio,
    compare_aliasing,
    compare_leaf,
    compare_side_effects,
    compare_trees,
    flatten,
    is_large_reduction,
    tolerance_for,
    ulp_distance,
)
from seamscope.experiments.provenance import random_ops, reduction_provenance  # noqa: E402

pytestmark = pytest.mark.torch

FAST = settings(max_examples=60, deadline=None)
RTOL, ATOL = 1e-4, 1e-5


@FAST
@given(st.floats(0.0, 1.0))
def test_ratio_up_to_one_is_within_tolerance(r: float) -> None:
    assert classify_ratio(r) == "within_tolerance"


@FAST
@given(st.floats(1.0, BUG_FACTOR, exclude_min=True, exclude_max=True))
def test_ratio_between_one_and_hundred_is_above_tolerance(r: float) -> None:
    assert classify_ratio(r) == "above_tolerance"


@FAST
@given(st.floats(BUG_FACTOR, 1e300) | st.just(math.inf) | st.just(math.nan))
def test_ratio_from_hundred_is_a_boundary_bug(r: float) -> None:
    assert classify_ratio(r) == "boundary_bug"


def _at_ratio(e: torch.Tensor, r: float) -> torch.Tensor:
    """``e`` moved by ``r`` times its element-wise tolerance (float64: no rounding to speak of)."""
    return e + r * (ATOL + RTOL * e.abs())


@FAST
@given(
    st.lists(st.floats(-1e3, 1e3, allow_nan=False), min_size=1, max_size=16),
    st.sampled_from([(0.0, 0.99, "within_tolerance"), (1.01, 99.0, "above_tolerance"), (101.0, 1e6, "boundary_bug")]),
    st.floats(0.0, 1.0),
)
@example(values=[516.6518871796163], band=(0.0, 0.99, "within_tolerance"), u=1.192092896e-07)
def test_leaf_class_follows_distance_in_tolerances(
    values: list[float], band: tuple[float, float, str], u: float
) -> None:
    lo, hi, want = band
    r = lo + (hi - lo) * u
    e = torch.tensor(values, dtype=torch.float64)
    lf = compare_leaf("out", e, _at_ratio(e, r), override=(RTOL, ATOL))
    assert lf.klass == want
    if r > 0:
        # The planted distance is rounded once in float64 where it is added to ``e`` (|e| <= 1e3):
        # that moves the computed ratio by up to eps*|e|/(ATOL+RTOL*|e|) < eps/RTOL in absolute
        # terms, which a tiny ratio cannot match to rel=1e-6 (r ~ 1e-7 missed by 1e-12).
        assert lf.tolerance_ratio == pytest.approx(r, rel=1e-6, abs=4 * sys.float_info.epsilon / RTOL)


@FAST
@given(st.lists(st.integers(-1000, 1000), min_size=1, max_size=8), st.integers(0, 7), st.integers(1, 5))
def test_integers_are_exact(values: list[int], where: int, delta: int) -> None:
    e = torch.tensor(values)
    assert compare_leaf("out", e, e.clone()).klass == "within_tolerance"
    a = e.clone()
    a[where % len(values)] += delta
    lf = compare_leaf("out", e, a)
    assert lf.klass == "boundary_bug" and "exact" in lf.reason


def test_bools_are_exact() -> None:
    e = torch.tensor([True, False])
    assert compare_leaf("m", e, ~e).klass == "boundary_bug"


@FAST
@given(st.integers(1, 50))
def test_ulp_distance_counts_representable_steps(k: int) -> None:
    x = torch.tensor([1.5], dtype=torch.float32)
    y = x.clone()
    for _ in range(k):
        y = torch.nextafter(y, torch.tensor([2.0]))
    assert ulp_distance(x, y) == k
    assert ulp_distance(torch.tensor([-0.0]), torch.tensor([0.0])) == 0
    assert ulp_distance(torch.tensor([-1e-45]), torch.tensor([1e-45])) == 2


def test_drift_reports_ulps_and_stays_within() -> None:
    e = torch.tensor([1.0, 2.0, 3.0])
    a = torch.nextafter(e, torch.full_like(e, 10.0))
    lf = compare_leaf("out", e, a)
    assert lf.klass == "within_tolerance" and lf.max_ulp == 1 and lf.reason == "arithmetic drift"


def test_nan_positions_must_match() -> None:
    e = torch.tensor([1.0, math.nan, 3.0])
    assert compare_leaf("o", e, e.clone()).klass == "within_tolerance"
    moved = torch.tensor([math.nan, 2.0, 3.0])
    lf = compare_leaf("o", e, moved)
    assert lf.klass == "boundary_bug" and "NaN" in lf.reason


def test_infinity_where_eager_is_finite_is_a_bug() -> None:
    e = torch.tensor([1.0, math.inf])
    assert compare_leaf("o", e, e.clone()).klass == "within_tolerance"
    assert compare_leaf("o", e, torch.tensor([math.inf, math.inf])).klass == "boundary_bug"


@pytest.mark.parametrize(
    "actual, word",
    [(torch.zeros(2, 3), "shape"), (torch.zeros(3, 2, dtype=torch.float64), "dtype"), (1.0, "type")],
)
def test_wrong_shape_dtype_or_type_is_a_bug(actual: object, word: str) -> None:
    lf = compare_leaf("o", torch.zeros(3, 2), actual)
    assert lf.klass == "boundary_bug" and lf.reason.startswith(word)


def test_low_precision_dtypes_get_looser_tolerances() -> None:
    assert tolerance_for(torch.float32) == (1e-4, 1e-5)
    assert tolerance_for(torch.bfloat16)[0] > tolerance_for(torch.float16)[0] > tolerance_for(torch.float32)[0]
    assert tolerance_for(torch.int64) == (0.0, 0.0)
    e = torch.tensor([1.0, 2.0], dtype=torch.bfloat16)
    a = torch.nextafter(e, torch.full_like(e, 10.0))  # 1 ulp of bf16 is 8e-3 relative
    assert compare_leaf("o", e, a).klass == "within_tolerance"
    assert compare_leaf("o", e.float(), a.float()).klass != "within_tolerance"


@dataclasses.dataclass
class _Out:
    logits: torch.Tensor
    extra: dict


def test_nested_outputs_are_compared_leaf_by_leaf() -> None:
    t = torch.ones(2)
    tree = (_Out(logits=t, extra={"k": [t, 3]}), None)
    paths = [p for p, _ in flatten(tree)]
    assert paths == ["out[0].logits", "out[0].extra['k'][0]", "out[0].extra['k'][1]", "out[1]"]
    other = (_Out(logits=t + 1, extra={"k": [t, 4]}), None)
    leaves = {lf.path: lf.klass for lf in compare_trees(tree, other)}
    assert leaves["out[0].logits"] == "boundary_bug"
    assert leaves["out[0].extra['k'][1]"] == "boundary_bug"
    assert leaves["out[0].extra['k'][0]"] == "within_tolerance"
    missing = compare_trees({"a": t, "b": t}, {"a": t})
    assert [lf.klass for lf in missing if lf.path == "out['b']"] == ["boundary_bug"]


def test_model_output_leaves_are_named_by_attribute() -> None:
    pytest.importorskip("transformers", reason="transformers (extra models) is not installed")
    from transformers.modeling_outputs import BaseModelOutput

    o = BaseModelOutput(last_hidden_state=torch.ones(1, 2))
    assert [p for p, _ in flatten(o)] == ["out.last_hidden_state"]


def test_side_effect_only_in_eager_is_a_bug() -> None:
    before = (torch.zeros(3),)
    eager_after = (torch.ones(3),)
    assert compare_side_effects(before, eager_after, (torch.zeros(3),), "input")[0].klass == "boundary_bug"
    same = compare_side_effects(before, eager_after, (torch.ones(3),), "input")
    assert [lf.klass for lf in same] == ["within_tolerance"]


def test_aliasing_change_is_a_bug() -> None:
    x = torch.ones(4)
    eager = aliasing(x[:2], (x,))
    assert eager == {"out": "input[0]"}
    copy = aliasing(x[:2].clone(), (x,))
    bugs = compare_aliasing(eager, copy)
    assert bugs and bugs[0].klass == "boundary_bug" and "aliasing" in bugs[0].reason


def test_large_reduction_is_traced_to_the_leaf() -> None:
    big = torch.nn.Linear(4096, 3)
    _, lengths = reduction_provenance(big, (torch.randn(2, 4096),), {})
    assert lengths == {"out": 4096}
    assert is_large_reduction(4096, torch.float32, 1e-4) is True
    small = torch.nn.Linear(8, 3)
    _, lengths = reduction_provenance(lambda x: (small(x), x + 1), (torch.randn(2, 8),), {})
    assert lengths == {"out[0]": 8, "out[1]": 0}
    assert is_large_reduction(8, torch.float32, 1e-4) is False


def test_above_tolerance_says_whether_a_large_reduction_lies_behind() -> None:
    e = torch.tensor([1.0])
    a = torch.tensor([1.0 + 5e-4])
    assert "large reduction lies behind" in compare_leaf("o", e, a, reduction_length=100_000).reason
    assert "no large reduction" in compare_leaf("o", e, a, reduction_length=4).reason


def test_random_ops_in_a_graph_are_flagged() -> None:
    import torch.fx

    class M(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.nn.functional.dropout(x, 0.5, True) + torch.rand_like(x)

    class Quiet(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.nn.functional.dropout(x, 0.5, False) + 1

    assert sorted(random_ops(torch.fx.symbolic_trace(M()))) == ["dropout", "rand_like"]
    assert random_ops(torch.fx.symbolic_trace(Quiet())) == []
