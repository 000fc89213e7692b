"""Findings on real torch.compile runs (backend "eager"): planted breaks of every class and churn
of every pattern, a transformers model whose modeling code calls ``.item()``, and finding ids
that survive a second run and a line shift above the site."""

from __future__ import annotations

import importlib.util
import linecache
import logging
import re
import sys
import textwrap
import zlib

import pytest

torch = pytest.importorskip("torch")

from seamscope.analyze.findings import analyze_findings  # noqa: E402
from seamscope.capture.session import session  # noqa: E402

pytestmark = pytest.mark.torch

_log = logging.getLogger("seamscope.test.findings")
_log.addHandler(logging.NullHandler())
_log.propagate = False


def p_print(x):
    y = x.sin()
    print("step", file=sys.stderr)
    return y.cos()


def p_log(x):
    y = x.sin()
    _log.warning("step")
    return y.cos()


def p_item(x):
    y = x.sin()
    if y.sum().item() > -1e9:
        return y.cos()
    return y


def p_branch(x):
    y = x.sin()
    if y.sum() > -1e9:
        return y.cos()
    return y


def p_tolist(x):
    y = x.sin()
    n = len(y.tolist())
    return y * n


def p_nonzero(x):
    y = x.sin()
    return torch.nonzero(y > 0).sum() + y.sum()


@torch.compiler.disable
def _eager_only(x):
    return x + 1


def p_disable(x):
    return _eager_only(x.sin()).cos()


def p_graph_break(x):
    y = x.sin()
    torch._dynamo.graph_break()
    return y.cos()


def p_extension(x):
    y = x.sin()
    return y.cos() + zlib.crc32(b"seam")


def p_mutation(x):
    y = x.sin()
    x.data = y.double()
    return y.cos()


PLANTED = {
    "p_print": ("host_side_effect", False),
    "p_log": ("host_side_effect", False),
    "p_item": ("data_dependent_control_flow", True),
    "p_branch": ("data_dependent_control_flow", True),
    "p_tolist": ("data_dependent_control_flow", True),
    "p_nonzero": ("data_dependent_control_flow", False),
    "p_disable": ("explicit_boundary", False),
    "p_graph_break": ("explicit_boundary", False),
    "p_extension": ("unsupported_op", False),
    "p_mutation": ("python_state_mutation", False),
}


def test_planted_breaks_are_classified(dynamo_reset):
    fns = {name: globals()[name] for name in PLANTED}
    with session() as s:
        compiled = {n: torch.compile(f, backend="eager") for n, f in fns.items()}
        for _ in range(3):
            for _n, c in compiled.items():
                c(torch.randn(8))
    sec = analyze_findings(s.ledger)
    breaks = [f for f in sec.findings if f.axis == "fragmentation"]
    by_fn: dict[str, list] = {}
    for f in breaks:
        by_fn.setdefault(f.where.function, []).append(f)
    for name, (cls, host_read) in PLANTED.items():
        assert name in by_fn, f"no break finding for {name}: {sorted(by_fn)}"
        classes = {(f.cause.break_class, f.cause.host_read) for f in by_fn[name]}
        assert (cls, host_read) in classes, (name, classes, [f.cause for f in by_fn[name]])
        (f,) = [f for f in by_fn[name] if f.cause.break_class == cls]
        assert f.where.package is None and f.where.user_frame.function == name
        assert f.remedies, name
    item = next(f for f in by_fn["p_item"])
    assert item.cause.gb_code == "GB0124" and item.remedies[0].config == {"capture_scalar_outputs": "True"}
    assert by_fn["p_print"][0].cause.label == "print"
    # steady calls crossed each planted site once per call of its function
    assert by_fn["p_print"][0].cost.crossings_min >= 1 and by_fn["p_print"][0].cost.stable


def _churn(x, flag):
    return x.sin() if flag else x.cos()


def _strided(x):
    return x.sin()


def _shaped(x):
    return x.sin()


def _optional(x, mask=None):
    return x * mask if mask is not None else x


def test_planted_churn_patterns_are_named(dynamo_reset):
    a = torch.randn(4, 4)
    with session() as s:
        op = torch.compile(_optional, backend="eager")
        op(a, a)  # a tensor first, then None: PyTorch's tensor guard meets None
        op(a)
        fl = torch.compile(_churn, backend="eager")
        st = torch.compile(_strided, backend="eager")
        sh = torch.compile(_shaped, backend="eager", dynamic=False)
        it = torch.compile(p_item, backend="eager")
        for i in range(4):
            fl(a, i % 2 == 0)
            st(a if i % 2 == 0 else a.t())
            sh(torch.randn(4 + i))
            it(torch.randn(4))
    sec = analyze_findings(s.ledger)
    churn = {(f.churn.frame_name, f.churn.pattern): f for f in sec.findings if f.axis == "churn"}
    assert ("_churn", "flag") in churn and churn[("_churn", "flag")].churn.subjects == ["flag"]
    (optional,) = [c for c in s.ledger.compilations if c.frame_name == "_optional" and c.is_recompile]
    # PyTorch's own text: "to be a tensor type, ' but found" (2.13), "to be <class 'torch.Tensor'>, but found" (2.14.1)
    assert re.search(r"expected type of 'mask' to be (a tensor type|<class 'torch.Tensor'>), '? ?but found",
                     optional.failed_guards[0])
    assert churn[("_optional", "flag")].churn.subjects == ["mask"]
    assert churn[("_optional", "flag")].churn.values_seen == ["is not None"]
    assert ("_strided", "stride") in churn
    assert ("_shaped", "shape") in churn and churn[("_shaped", "shape")].churn.subjects == ["x[0]"]
    value = churn[("p_item", "value")]
    item_site = next(f for f in sec.findings if f.axis == "fragmentation" and f.where.function == "p_item")
    assert value.churn.fed_by == item_site.finding_id
    assert sec.churn.recompiles >= 4 and sec.fragmentation.break_sites == 1


def test_recompile_limit_fallback_is_named(dynamo_reset):
    with torch._dynamo.config.patch(recompile_limit=2), session() as s:
        sh = torch.compile(_shaped, backend="eager", dynamic=False)
        for i in range(5):
            sh(torch.randn(4 + i))
    sec = analyze_findings(s.ledger)
    pats = {f.churn.pattern for f in sec.findings if f.axis == "churn"}
    assert "recompile_limit" in pats and "shape" in pats, [c.status for c in s.ledger.compilations]


MODULE_SRC = '''
import sys

import torch


def step(x):
    y = x.sin()
    print("value", file=sys.stderr)
    z = y.cos()
    if z.sum().item() > -1e9:
        return z + 1
    return z
'''


def _run_module(path, name: str) -> list[str]:
    # A line shift happens between two processes; in one process, drop the cached source lines
    # that tracebacks (and so break reasons) read, as a new process would not have them.
    linecache.clearcache()
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    torch._dynamo.reset()
    with session() as s:
        c = torch.compile(mod.step, backend="eager")
        for _ in range(4):
            c(torch.randn(16))
    return [f.finding_id for f in analyze_findings(s.ledger).findings]


def test_finding_ids_survive_a_second_run_and_a_line_shift(dynamo_reset, tmp_path):
    path = tmp_path / "workload.py"
    path.write_text(MODULE_SRC)
    first = _run_module(path, "workload_a")
    second = _run_module(path, "workload_b")
    path.write_text("# a comment\n\n\n" + textwrap.dedent(MODULE_SRC))
    shifted = _run_module(path, "workload_c")
    assert len([i for i in first if i.startswith("B")]) == 2
    assert any(i.startswith("FR") for i in first)  # the .item() value churn
    assert sorted(first) == sorted(second) == sorted(shifted)


def test_transformers_item_break_is_in_the_library_and_led_by_the_test(dynamo_reset):
    transformers = pytest.importorskip("transformers")
    cfg = transformers.ReformerConfig(
        vocab_size=64, hidden_size=16, num_attention_heads=2, attention_head_size=8,
        axial_pos_shape=(4, 4), axial_pos_embds_dim=(8, 8), feed_forward_size=16,
        attn_layers=["local", "local"], num_hashes=1, local_attn_chunk_length=4,
        max_position_embeddings=16, is_decoder=False, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    torch.manual_seed(0)
    model = transformers.ReformerModel(cfg).eval()

    def run_model(ids):
        return model(input_ids=ids).last_hidden_state

    ids = torch.randint(0, 64, (1, 16))
    with session() as s, torch.no_grad():
        c = torch.compile(run_model, backend="eager")
        for _ in range(3):
            c(ids)
    sec = analyze_findings(s.ledger)
    items = [f for f in sec.findings if f.axis == "fragmentation" and f.cause.gb_code == "GB0124"]
    assert items, [f.sentence for f in sec.findings]
    f = items[0]
    assert f.where.package == "transformers" and f.where.file.endswith("reformer/modeling_reformer.py")
    assert f.where.user_frame is not None and f.where.user_frame.file.endswith("test_findings_torch.py")
    assert f.where.user_frame.function == "run_model"
    assert f.cause.host_read and f.cause.break_class == "data_dependent_control_flow"
    assert "; in transformers, reached from" in f.sentence


def test_a_global_state_change_is_one_flag_cause_with_its_own_remedy(dynamo_reset):
    """Calls with and without autocast: PyTorch's reason names the global state and then every
    tensor check, which fails only because autocast changed the dispatch keys. The cause is the
    global state, a flag (each setting its own variant), with a remedy that says so."""
    m = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU())
    f = torch.compile(m, backend="eager")
    x = torch.randn(4, 8)
    with session() as s, torch.no_grad():
        for i in range(4):
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bool(i % 2)):
                f(x)
    (recompile,) = [c for c in s.ledger.compilations if c.is_recompile]
    assert "GLOBAL_STATE changed: autocast(cpu)_enabled" in recompile.failed_guards[0]  # PyTorch's own text
    assert "check_tensor(" in recompile.failed_guards[0]
    (cause,) = analyze_findings(s.ledger).causes
    assert cause.family == "flag" and cause.subject == "global state autocast(cpu)_enabled"
    assert cause.change == "global state autocast(cpu)_enabled changed between calls"
    assert "check_tensor" not in cause.sentence and "autocast(cpu)_enabled differs between calls" in cause.remedy.text


def test_a_model_that_trains_and_evaluates_is_told_one_variant_per_mode(dynamo_reset):
    """One compiled model trained, then evaluated with ``model.eval()`` under ``torch.no_grad()``
    (a training loop's periodic evaluation): the recompile is the training flags and grad mode,
    said in the user's words (``args[0].layers[0].training``, not ``._modules['layers']``), with
    the remedy for two modes, not "call with one setting"."""
    m = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Dropout(0.1), torch.nn.Linear(8, 1))
    f = torch.compile(m, backend="eager")
    x = torch.randn(4, 8)
    with session() as s:
        for i in range(6):
            m.train(i % 3 != 2)
            with torch.set_grad_enabled(m.training):
                f(x)
    (recompile,) = [c for c in s.ledger.compilations if c.is_recompile]  # each mode compiled once
    assert "GLOBAL_STATE changed: grad_mode" in recompile.failed_guards[0]  # PyTorch's own text
    result = analyze_findings(s.ledger)
    (cause,) = result.causes
    assert cause.family == "flag" and cause.remedy is not None
    assert cause.remedy.text.startswith("the modules' training flag (model.train() / model.eval()) and grad mode")
    assert "evaluate with the module itself" in cause.remedy.text
    (churn,) = [f for f in result.findings if f.churn is not None]
    assert churn.remedies[0].text == cause.remedy.text
    assert ".training" in churn.sentence and "_modules[" not in churn.sentence
