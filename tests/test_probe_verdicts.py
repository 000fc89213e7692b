"""Probe verdicts judged against rounding, and the ladder naming where a boundary bug starts.

GIVEN a compiled-only scaling planted in a module (``torch.compiler.is_compiling()``), WHEN the
probe compares compiled with eager, THEN the difference is measured against eager's own rounding
error (eager again in float64) and called a boundary bug at the first ladder layer, even where it
is under 100x the tolerance; GIVEN only rounding differences (a long reduction reordered by
inductor, a transformer under inductor in float32 and bfloat16, 1e-9 where eager is exactly 0),
THEN no bug is called.
"""

from __future__ import annotations

import copy
import json
import math
import textwrap
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

from seamscope.cli import main  # noqa: E402
from seamscope.experiments.differential import (  # noqa: E402
    BUG_FACTOR,
    ROUNDING_MARGIN,
    Rounding,
    classify_leaf,
    compare_leaf,
    rounding_bound,
)
from seamscope.experiments.ladder import answer, bug_meaning  # noqa: E402
from seamscope.experiments.provenance import float64_run, reduction_trace  # noqa: E402
from seamscope.experiments.workload import as_call  # noqa: E402
from seamscope.model.probe import LayerResult, LeafDiff  # noqa: E402

pytestmark = pytest.mark.torch

FAST = settings(max_examples=60, deadline=None)

HEADER = """
import torch
from seamscope.experiments.workload import Workload


class Planted(torch.nn.Module):
    # Two small linear layers; the compiled path alone scales the output (a planted boundary bug).
    def __init__(self, factor):
        super().__init__()
        self.factor = factor
        self.l1 = torch.nn.Linear(16, 32)
        self.l2 = torch.nn.Linear(32, 8)

    def forward(self, x):
        y = self.l2(torch.relu(self.l1(x)))
        if torch.compiler.is_compiling():
            y = y * self.factor
        return y


def planted(factor=1.01, dtype=None, ladder=("eager", "aot_eager")):
    torch.manual_seed(0)
    return Workload(Planted(factor), inputs={"steady": [torch.randn(4, 16)]}, backend="eager", dtype=dtype,
                    warm_calls=1, ladder=ladder)


def planted_1pct():
    return planted(1.01)


def planted_01pct():
    return planted(1.001)


def planted_bf16():
    return planted(1.05, torch.bfloat16)


W = torch.randn(16, 8, generator=torch.Generator().manual_seed(1))


def no_float64():
    # The weight is a float32 tensor outside any module: a float64 run of mm raises.
    def f(x):
        y = torch.mm(x, W)
        if torch.compiler.is_compiling():
            y = y * 1.01
        return y
    torch.manual_seed(0)
    return Workload(f, inputs={"steady": [torch.randn(4, 16)]}, backend="eager", warm_calls=1, ladder=())


def tiny_offset(gm, example_inputs):
    # Only 1e-9 added to every output (rounding-sized where eager is exactly 0).
    def run(*args):
        return [o + 1e-9 if isinstance(o, torch.Tensor) and o.is_floating_point() else o for o in gm(*args)]
    return run


def exact_zero():
    torch.manual_seed(0)
    return Workload(lambda x: (x * 0.0, x * 2.0), inputs={"steady": [torch.randn(4, 8)]}, backend=tiny_offset,
                    warm_calls=1, ladder=())


class Total(torch.nn.Module):
    def forward(self, x):
        return x.sum()


def long_sum():
    # 10**6 terms that cancel to nearly zero: the sum's order moves it by far more than its tolerance.
    x = torch.randn(10**6, generator=torch.Generator().manual_seed(7))
    x = x - x.mean()
    return Workload(Total(), inputs={"steady": [x]}, backend="inductor", warm_calls=1, ladder=())


def gpt2(dtype=None):
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    cfg = GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=256, n_positions=64)
    m = GPT2LMHeadModel(cfg).eval()
    ids = torch.randint(0, 256, (2, 16), generator=torch.Generator().manual_seed(0))
    return Workload(m, inputs={"steady": [{"input_ids": ids}]}, backend="inductor", dtype=dtype,
                    warm_calls=1, ladder=())


def gpt2_f32():
    return gpt2()


def gpt2_bf16():
    return gpt2(torch.bfloat16)
"""


@pytest.fixture(autouse=True)
def _reset_dynamo() -> Any:
    import torch._dynamo

    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.fixture
def wl(tmp_path: Path) -> Path:
    p = tmp_path / "verdicts.py"
    p.write_text(textwrap.dedent(HEADER))
    return p


def _probe(args: list[str], capsys: Any) -> tuple[int, str]:
    with pytest.raises(SystemExit) as ex:
        main(["probe", *args])
    cap = capsys.readouterr()
    return int(ex.value.code or 0), cap.out + cap.err


def _run(wl: Path, func: str, out: Path, capsys: Any, *extra: str) -> tuple[dict[str, Any], str]:
    code, text = _probe([f"{wl}:{func}", "--out", str(out), *extra], capsys)
    assert code == 0, text
    return json.loads((out / "receipt.json").read_text())["probe"], text


# --- the arithmetic -------------------------------------------------------------------------------


@FAST
@given(st.floats(0.0, 1.0), st.floats(0.0, 1e300) | st.just(math.inf))
def test_within_the_tolerance_is_never_a_bug(ratio: float, rounding_ratio: float) -> None:
    assert classify_leaf(ratio, rounding_ratio) == "within_tolerance"


@FAST
@given(st.floats(1.0, 1e300, exclude_min=True), st.floats(ROUNDING_MARGIN, 1e300) | st.just(math.inf))
def test_over_the_tolerance_and_beyond_rounding_is_a_bug_whatever_the_tolerance_ratio(ratio: float, rr: float) -> None:
    assert classify_leaf(ratio, rr) == "boundary_bug"


@FAST
@given(st.floats(1.0, 1e300, exclude_min=True), st.floats(0.0, ROUNDING_MARGIN, exclude_max=True))
def test_over_the_tolerance_but_explained_by_rounding_is_not_a_bug(ratio: float, rr: float) -> None:
    assert classify_leaf(ratio, rr) == "above_tolerance"


@FAST
@given(st.floats(1.0, 1e300, exclude_min=True))
def test_without_a_float64_run_the_tolerance_factor_decides(ratio: float) -> None:
    want = "boundary_bug" if ratio >= BUG_FACTOR else "above_tolerance"
    assert classify_leaf(ratio, None) == want


@FAST
@given(st.floats(0.0, 1.0), st.floats(0.0, 1e3), st.floats(0.0, 1.0) | st.none())
def test_rounding_bound_is_the_largest_explanation(err: float, typical: float, allowance: float | None) -> None:
    bound, what = rounding_bound(err, typical, torch.float32, allowance)
    assert bound == max(err, typical * 2.0**-24, allowance or 0.0)
    assert what


def test_zero_in_eager_and_1e_9_compiled_is_within_tolerance() -> None:
    e = torch.zeros(4, 8)
    rounding = Rounding(values={"out": torch.zeros(4, 8, dtype=torch.float64)})
    lf = compare_leaf("out", e, e + 1e-9, rounding=rounding)
    assert lf.klass == "within_tolerance" and lf.eager_error == 0.0
    # The same 1e-9 with a user tolerance of zero is over it, and nothing rounding does explains it.
    lf = compare_leaf("out", e, e + 1e-9, override=(0.0, 0.0), rounding=rounding)
    assert lf.klass == "boundary_bug" and lf.judged_by == "rounding"


def test_reduction_allowance_follows_the_terms() -> None:
    x = torch.randn(10**5, generator=torch.Generator().manual_seed(0))
    _, lengths, allow = reduction_trace(lambda t: t.sum(), (x,), {})
    assert lengths == {"out": 10**5}
    assert allow["out"] == pytest.approx(10**5 * 2.0**-24 * float(x.abs().max()))
    # bfloat16 is accumulated in float32: the same allowance per unit of magnitude.
    _, _, allow16 = reduction_trace(lambda t: t.sum(), (x.bfloat16(),), {})
    assert allow16["out"] == pytest.approx(10**5 * 2.0**-24 * float(x.bfloat16().abs().max()))


def test_float64_run_measures_eager_rounding_and_leaves_the_module_alone() -> None:
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 8))
    before = copy.deepcopy(m.state_dict())
    x = torch.randn(4, 16)
    r = float64_run(m, (x,), as_call)
    assert r.missing is None
    assert all(torch.equal(v, before[k]) and v.dtype == torch.float32 for k, v in m.state_dict().items())
    # An independent float64 computation of the same module (weights widened by hand).
    w1, b1, w2, b2 = (p.detach().double() for p in m.parameters())
    want = torch.tanh(x.double() @ w1.T + b1) @ w2.T + b2
    assert torch.allclose(r.values["out"], want, rtol=1e-12, atol=1e-14)
    assert r.values["out"].dtype == torch.float64
    assert float64_run(m.double(), (x.double(),), as_call).missing == "the workload already runs in float64"


# --- the ladder's sentence -------------------------------------------------------------------------


def _layer(backend: str, verdict: str) -> LayerResult:
    worst = LeafDiff(path="out", klass="boundary_bug", reason="r") if verdict == "mismatch" else None
    return LayerResult(backend=backend, verdict=verdict, compiled=True, ran=True,  # type: ignore[arg-type]
                       matches=verdict != "mismatch", worst=worst)


@pytest.mark.parametrize(
    "layers, first, words",
    [
        ([("eager", "mismatch"), ("aot_eager", "mismatch"), ("inductor", "mismatch")], "eager",
         "already at eager (Dynamo's capture alone, no compiler)"),
        ([("eager", "ok"), ("aot_eager", "mismatch"), ("inductor", "mismatch")], "aot_eager",
         "AOTAutograd or the decompositions"),
        ([("eager", "ok"), ("aot_eager", "suspect"), ("inductor", "mismatch")], "inductor",
         "inductor's code generation"),
        ([("eager", "ok"), ("inductor", "mismatch")], "inductor", "aot_eager not tried"),
        ([("eager", "crashed"), ("aot_eager", "mismatch")], "aot_eager", "where the bug starts is not known"),
        ([("eager", "ok"), ("aot_eager", "ok")], None, None),
    ],
)
def test_the_first_bug_layer_says_where_the_bug_starts(layers: list[tuple[str, str]], first: str | None,
                                                        words: str | None) -> None:
    results = [_layer(b, v) for b, v in layers]
    got, meaning = bug_meaning(results)
    assert got == first
    if words is None:
        assert meaning is None
        return
    assert meaning is not None and words in meaning and meaning.count(". ") == 0  # one sentence
    _, text = answer(results)
    if results[0].verdict != "crashed":
        assert text.endswith(meaning)


# --- real workloads --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "func, dtype, under_old_rule",
    [("planted_1pct", "float32", True), ("planted_01pct", "float32", True), ("planted_bf16", "bfloat16", True)],
)
def test_planted_compiled_only_scaling_is_a_bug_at_the_first_layer(
    wl: Path, tmp_path: Path, capsys: Any, func: str, dtype: str, under_old_rule: bool
) -> None:
    p, text = _run(wl, func, tmp_path / "o", capsys)
    leaf = p["differential"][0]["worst"]
    assert leaf["dtype"] == dtype
    assert leaf["klass"] == "boundary_bug" and leaf["judged_by"] == "rounding"
    assert leaf["rounding_ratio"] >= ROUNDING_MARGIN
    # Each of these is under 100x the tolerance: the tolerance factor alone called it a suspect.
    assert (leaf["tolerance_ratio"] < BUG_FACTOR) is under_old_rule
    assert "rounding cannot explain it" in leaf["reason"] and f"{leaf['eager_error']:.3g}" in leaf["reason"]
    assert p["verdict"] == "boundary_bug"
    lad = p["ladder"]
    assert lad["first_bug"] == "eager" and lad["first_failing"] == "eager"
    assert [lr["verdict"] for lr in lad["layers"]] == ["mismatch", "mismatch"]
    assert "already at eager (Dynamo's capture alone, no compiler)" in lad["meaning"]
    assert lad["meaning"] in lad["answer"] and lad["meaning"] in p["answer"]
    assert lad["meaning"] in " ".join(text.split())  # the terminal shows the sentence


def test_planted_bug_is_confirmed_outside_seamscope(wl: Path, tmp_path: Path, capsys: Any) -> None:
    # The compiled result really is 1% off (torch.testing), and eager's own error is what a
    # float64 copy of the module, made here, says it is.
    import importlib.util

    spec = importlib.util.spec_from_file_location("verdicts_mod", wl)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    w = mod.planted_1pct()
    x = w.inputs["steady"][0]
    with torch.no_grad():
        e = w.fn_or_module(x)
        a = torch.compile(w.fn_or_module, backend="eager")(x)
        e64 = copy.deepcopy(w.fn_or_module).double()(x.double())
    with pytest.raises(AssertionError):
        torch.testing.assert_close(a, e, rtol=1e-4, atol=1e-5)
    assert torch.allclose(a, e * 1.01, rtol=1e-6, atol=1e-7)
    p, _ = _run(wl, "planted_1pct", tmp_path / "o", capsys, "--backends", "none")
    leaf = p["differential"][0]["worst"]
    assert leaf["eager_error"] == pytest.approx(float((e.double() - e64).abs().max()), rel=1e-9)


def test_without_a_float64_run_the_old_rule_decides_and_says_so(wl: Path, tmp_path: Path, capsys: Any) -> None:
    p, _ = _run(wl, "no_float64", tmp_path / "o", capsys)
    leaf = p["differential"][0]["worst"]
    assert leaf["judged_by"] == "tolerance" and leaf["rounding_ratio"] is None
    assert leaf["no_float64"].startswith("the float64 run raised RuntimeError")
    assert "no float64 reference" in leaf["reason"]
    assert leaf["klass"] == ("boundary_bug" if leaf["tolerance_ratio"] >= BUG_FACTOR else "above_tolerance")


def test_exact_zero_in_eager_and_1e_9_compiled_is_not_a_bug(wl: Path, tmp_path: Path, capsys: Any) -> None:
    p, _ = _run(wl, "exact_zero", tmp_path / "o", capsys)
    leaves = {lf["path"]: lf for lf in p["differential"][0]["leaves"]}
    assert leaves["out[0]"]["max_abs"] == pytest.approx(1e-9, rel=1e-3)
    assert leaves["out[0]"]["eager_error"] == 0.0
    assert all(lf["klass"] == "within_tolerance" for lf in leaves.values())
    assert p["verdict"] == "ok"


@pytest.mark.inductor
def test_long_sum_reordered_by_inductor_is_not_a_bug(wl: Path, tmp_path: Path, capsys: Any) -> None:
    p, _ = _run(wl, "long_sum", tmp_path / "o", capsys)
    leaf = p["differential"][0]["worst"]
    assert leaf["reduction_length"] == 10**6 and leaf["max_ulp"] > 0  # the order really changed the bits
    assert leaf["klass"] != "boundary_bug" and p["verdict"] in ("ok", "suspect")
    if leaf["klass"] == "above_tolerance":
        assert leaf["judged_by"] == "rounding" and leaf["rounding_ratio"] < ROUNDING_MARGIN


@pytest.mark.inductor
@pytest.mark.parametrize("func", ["gpt2_f32", "gpt2_bf16"])
def test_transformer_under_inductor_is_not_a_bug(wl: Path, tmp_path: Path, capsys: Any, func: str) -> None:
    p, _ = _run(wl, func, tmp_path / "o", capsys)
    d = p["differential"][0]
    logits = next(lf for lf in d["leaves"] if lf["path"] == "out.logits")
    assert logits["max_abs"] > 0  # inductor did change the arithmetic
    assert logits["eager_error"] > 0 and logits["rounding_ratio"] < ROUNDING_MARGIN
    assert d["klass"] != "boundary_bug" and p["verdict"] in ("ok", "suspect")
