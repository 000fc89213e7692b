"""The classification table against PyTorch's own registry of graph-break codes, and against the
short reasons ``torch._dynamo.explain`` gives (no code, no registry name)."""

from __future__ import annotations

import json
import os

import pytest

from seamscope.analyze.classify import CODE_TABLE, classify, gb_code_from_text, gb_type_of

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.torch


def _registry() -> dict[str, str]:
    path = os.path.join(os.path.dirname(torch._dynamo.__file__), "graph_break_registry.json")
    with open(path) as f:
        return {code: entries[0]["Gb_type"] for code, entries in json.load(f).items()}


def test_every_code_in_the_table_is_a_real_registry_code():
    reg = _registry()
    assert set(CODE_TABLE) <= set(reg), sorted(set(CODE_TABLE) - set(reg))


def test_every_registry_entry_gets_a_class_and_keeps_its_name():
    reg = _registry()
    matched = 0
    for code, gtype in reg.items():
        c = classify(code, gtype, "")
        assert c.gb_code == code and c.gb_type == gtype and c.label
        matched += c.matched_by != "none"
    # The table and keyword rules cover most of the registry; the rest is "other", never dropped.
    assert matched / len(reg) > 0.8


@pytest.mark.parametrize(
    "code,cls,host_read",
    [
        ("GB0124", "data_dependent_control_flow", True),   # Tensor.item()
        ("GB0170", "data_dependent_control_flow", True),   # Data-dependent branching
        ("GB0059", "unsupported_op", False),               # builtin op, not print (no text)
        ("GB0291", "host_side_effect", False),             # logging.Logger method
        ("GB0098", "explicit_boundary", False),            # torch.compiler.disable
        ("GB4297", "explicit_boundary", False),            # skip_frame()
        ("GB0220", "python_state_mutation", False),        # .data to another dtype
        ("GB0189", "python_state_mutation", False),        # pending mutation (table)
        ("GB4198", "unsupported_op", False),               # copy.deepcopy a tensor (rules)
        ("GB0222", "unsupported_op", False),               # wrap a set with tensors (rules)
        ("GB5976", "other", False),                        # Data pointer comparison (rules: none)
    ],
)
def test_registry_codes_classified(code, cls, host_read):
    c = classify(code, _registry()[code], "")
    assert (c.break_class, c.host_read) == (cls, host_read)


def test_gb_type_rules_work_without_a_code():
    reg = _registry()
    c = classify(None, reg["GB0291"], "")
    assert c.break_class == "host_side_effect" and c.matched_by == "gb_type"
    c = classify(None, reg["GB0271"], "")  # Class attribute mutation when __dict__ materialized
    assert c.break_class == "python_state_mutation"


def test_code_and_type_are_read_from_the_full_reason_text():
    reason = (
        "Unsupported Tensor.item() call with capture_scalar_outputs=False\n"
        "  Explanation: Dynamo does not support tracing `Tensor.item()` with config.capture_scalar_outputs=False.\n"
        "\n For more details about this graph break, please visit: "
        "https://meta-pytorch.github.io/compile-graph-break-site/gb/gb0124.html"
    )
    assert gb_code_from_text(reason) == "GB0124"
    assert gb_type_of(reason) == "Unsupported Tensor.item() call with capture_scalar_outputs=False"
    c = classify(None, None, reason)
    assert c.gb_code == "GB0124" and c.matched_by == "gb_code" and c.host_read


def _explain_reasons(fn):
    torch._dynamo.reset()
    out = torch._dynamo.explain(fn)(torch.randn(4))
    torch._dynamo.reset()
    return [br.reason for br in out.break_reasons]


def test_explain_short_reasons_classified_by_text(dynamo_reset):
    def branch(x):
        y = x.sin()
        if y.sum() > 0:
            return y.cos()
        return y

    def show(x):
        y = x.sin()
        print("y")
        return y.cos()

    (r,) = _explain_reasons(branch)
    c = classify(None, None, r)
    assert (c.break_class, c.host_read) == ("data_dependent_control_flow", True), r
    (r,) = _explain_reasons(show)
    c = classify(None, None, r)
    assert c.gb_code == "GB0059" and c.break_class == "host_side_effect" and c.label == "print"
