"""Remedies that name the cause: dynamic=False shape churn, an argument passed in some calls and
not others, a branch on a host-side NumPy value, guard sources as PyTorch writes them.

GIVEN compilations and break sites with the guard and reason texts PyTorch 2.13 writes (copied from
real runs on transformers models), WHEN findings are analysed, THEN the first remedy addresses the
cause. Torch-free.
"""

from __future__ import annotations

import msgspec

from seamscope.analyze.classify import HOST_VALUE_BRANCH, classify
from seamscope.analyze.findings import analyze_findings, guard_pattern
from seamscope.model.fake import FakeProgram, play
from seamscope.model.ledger import BreakSite, Compilation, Frame, Ledger

NP_BRANCH = """Data-dependent branching
  Explanation: Detected data-dependent branching (e.g. `if my_tensor.sum() > 0:`). Dynamo does not support tracing dynamic control flow.

      The branch condition involves a tensor computed as follows:
        # File "site-packages/transformers/models/reformer/modeling_reformer.py", line 169, in _get_least_common_mult_chunk_len, code: return np.lcm(config.lsh_attn_chunk_length, config.local_attn_chunk_length)
        least_common_mult_chunk_length = wrapped_lcm(4, 4)
  Hint: Use `torch.cond` to express dynamic control flow.

  Developer debug context: attempted to jump with NumpyNdarrayVariable()

 For more details about this graph break, please visit: https://meta-pytorch.github.io/compile-graph-break-site/gb/gb0170.html"""

TENSOR_BRANCH = NP_BRANCH.replace("NumpyNdarrayVariable()", "TensorVariable()")


def _ledger(comps: list[Compilation], sites: list[BreakSite] | None = None, dynamic: str | None = None) -> Ledger:
    b = play(FakeProgram())
    for c in comps:
        b.set_compilation(c)
    for s in sites or []:
        b.set_break_site(s)
    led = b.build()
    if dynamic is not None:
        env = msgspec.structs.replace(led.environment, compile_options={"dynamic": dynamic})
        led = msgspec.structs.replace(led, environment=env)
    return led


def _churn(fname: str, guards: list[list[str]]) -> list[Compilation]:
    out = [Compilation(compile_id="0/0", frame_name=fname, file="m.py", line=3, status="ok", graph_count=1)]
    for y, g in enumerate(guards, 1):
        out.append(Compilation(compile_id=f"0/{y}", frame_name=fname, file="m.py", line=3, status="ok",
                               graph_count=1, failed_guards=g))
    return out


def test_guard_sources_keep_pytorchs_spelling() -> None:
    g = "0/0: tensor 'kwargs['input_ids']' size mismatch at index 1. expected 8, actual 12"
    assert guard_pattern(g) == ("shape", "kwargs['input_ids'][1]", "size 8")
    assert guard_pattern("tensor 'L['x']' stride mismatch at index 0. expected 4, actual 1")[1] == "L['x'][0]"
    assert guard_pattern("tensor 'x' dtype mismatch. expected Float, actual Long")[1] == "x.dtype"
    assert guard_pattern("tensor 'x' size mismatch at index 0. expected 3, actual 4")[1] == "x[0]"


def test_dynamic_false_shape_churn_is_told_to_drop_dynamic_false_first() -> None:
    comps = _churn("forward", [["0/0: tensor 'x' size mismatch at index 0. expected 3, actual 4"]])
    (f,) = [f for f in analyze_findings(_ledger(comps, dynamic="False")).findings if f.axis == "churn"]
    assert [r.action for r in f.remedies] == ["drop_dynamic_false", "mark_dynamic_or_bucket"]
    assert "dynamic=False" in f.remedies[0].text
    for dynamic in (None, "None", "True"):
        (g,) = [f for f in analyze_findings(_ledger(comps, dynamic=dynamic)).findings if f.axis == "churn"]
        assert [r.action for r in g.remedies] == ["mark_dynamic_or_bucket"]


def test_an_argument_count_guard_is_told_to_pass_the_argument_always() -> None:
    comps = _churn("wrapped_func", [
        ["8/0: len(kwargs) == 3                # func_name = f(...)  # transformers/utils/deprecation.py:126"],
        ["8/1: len(args) == 4", "8/0: len(kwargs) == 3"],
    ])
    (f,) = [f for f in analyze_findings(_ledger(comps)).findings if f.axis == "churn"]
    assert [r.action for r in f.remedies] == ["pass_argument_always"]
    assert "len(args)" in f.remedies[0].text and "len(kwargs)" in f.remedies[0].text
    # a real value guard still gets the 0-d tensor remedy
    vals = _churn("f", [["0/0: L['k'] == 3"], ["0/1: L['k'] == 4"]])
    (v,) = [f for f in analyze_findings(_ledger(vals)).findings if f.axis == "churn"]
    assert "pass_as_tensor" in [r.action for r in v.remedies]
    assert "pass_argument_always" not in [r.action for r in v.remedies]


def test_a_branch_on_a_numpy_value_is_host_side_not_a_tensor_read() -> None:
    host = classify("GB0170", "Data-dependent branching", NP_BRANCH)
    dev = classify("GB0170", "Data-dependent branching", TENSOR_BRANCH)
    assert (host.label, host.host_read) == (HOST_VALUE_BRANCH, False)
    assert (dev.label, dev.host_read) == ("branch on a tensor value", True)

    def site(reason: str, sid: str) -> BreakSite:
        return BreakSite(site_id=sid, file="site-packages/transformers/models/reformer/modeling_reformer.py",
                         line=2023, function="forward", gb_code="GB0170", gb_type="Data-dependent branching",
                         reason=reason, user_stack=[Frame(file="run.py", line=1, function="main")],
                         compile_ids=["0/0"])

    led = _ledger([Compilation(compile_id="0/0", frame_name="forward", file="m.py", line=1, status="ok")],
                  [site(NP_BRANCH, "B00000001"), site(TENSOR_BRANCH, "B00000002")])
    by = {f.site_id: f for f in analyze_findings(led).findings if f.axis == "fragmentation"}
    assert [r.action for r in by["B00000001"].remedies] == ["host_value_as_python"]
    assert "torch.cond" not in " ".join(r.text for r in by["B00000001"].remedies)
    assert "reads a tensor value" not in by["B00000001"].sentence
    assert [r.action for r in by["B00000002"].remedies] == ["tensor_ops_or_cond"]


def test_a_skipped_frame_break_says_that_it_costs_the_whole_frame() -> None:
    def site(skipped: bool, sid: str) -> BreakSite:
        return BreakSite(site_id=sid, file="m.py", line=5, function="f", gb_code="GB4347",
                         gb_type="Missing tp_iternext", reason="Missing tp_iternext\n  Explanation: x",
                         user_stack=[Frame(file="m.py", line=5, function="f")], compile_ids=["0/0"],
                         frame_skipped=skipped)

    led = _ledger([Compilation(compile_id="0/0", frame_name="f", file="m.py", line=1, status="ok")],
                  [site(True, "B00000001"), site(False, "B00000002")])
    by = {f.site_id: f for f in analyze_findings(led).findings if f.axis == "fragmentation"}
    assert by["B00000001"].where.frame_skipped
    assert "runs the whole frame eagerly" in by["B00000001"].sentence
    assert "whole frame" not in by["B00000002"].sentence
