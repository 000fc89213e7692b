"""Capture on a real model: a ``transformers`` BERT built from a config (no download)."""

from __future__ import annotations

import contextlib
import os

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from seamscope.capture import adapter  # noqa: E402
from seamscope.capture.session import session  # noqa: E402
from seamscope.model.ledger import RegionEvent  # noqa: E402
from seamscope.model.selfcheck import self_check  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("dynamo_reset")]


def tiny_bert():
    # one layer: the inference run's compilations are transformers' wrappers around the layers (as
    # many with one layer as with two), and the training step traces one layer, not two
    cfg = transformers.BertConfig(
        vocab_size=100, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64
    )
    torch.manual_seed(0)
    return transformers.BertModel(cfg)


def test_inference_over_several_lengths_matches_pytorch_counters():
    torch._dynamo.utils.set_compilation_metrics_limit(10_000)
    torch._dynamo.utils.clear_compilation_metrics()
    model = tiny_bert().eval()
    with contextlib.redirect_stdout(open(os.devnull, "w")), session() as s:  # noqa: SIM115
        cm = torch.compile(model, backend="eager")
        with torch.no_grad():
            for n in (8, 8, 12, 12, 16, 16):
                cm(input_ids=torch.randint(0, 100, (1, n)), output_attentions=True)
    led = s.ledger
    self_check(led)
    r = s.receipt()
    c = adapter.dynamo_counters()
    metrics = torch._dynamo.utils.get_compilation_metrics()  # one record per compile id
    assert r.summary.call_count == 6
    assert r.summary.graph_count == c["stats"]["unique_graphs"]
    # frames["ok"] also counts frames Dynamo looked at and skipped (transformers' logging helpers
    # run while the callback is active), so here the per-compilation records are the truth:
    assert {comp.compile_id for comp in led.compilations} == {m.compile_id for m in metrics}
    assert r.summary.compile_count == sum(1 for m in metrics if not m.fail_type)
    assert r.summary.fallback_count == sum(1 for m in metrics if m.fail_type)
    assert r.summary.compile_count <= c["frames"]["ok"]
    assert r.summary.recompile_count >= 1  # 8 -> 12 changes a size
    assert led.calls[0].phase == "cold"
    # BERT with output_attentions hits the recompile limit on a kwargs-deprecation wrapper: a
    # fallback. Calls are labelled by what they ran: the wrapper has no graph of its own and the
    # models' frames under it still run compiled, so later cache-hit calls are steady.
    assert r.summary.fallback_count >= 1
    assert any("recompile" in f.reason.lower() for f in r.summary.fallbacks)
    first_fb = min(f.call_index for f in r.summary.fallbacks if f.call_index is not None)
    later = [call for call in led.calls[first_fb + 1 :] if call.outcome == "hit"]
    assert later and all(call.phase == "steady" for call in later)
    assert all(any(isinstance(e, RegionEvent) for e in call.events) for call in later)
    # every region that ran is a compilation the ledger knows
    known = {comp.compile_id for comp in led.compilations}
    assert {rt.compile_id for rt in led.totals.regions} <= known


def test_training_step_with_backward():
    model = tiny_bert().train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with contextlib.redirect_stdout(open(os.devnull, "w")), session() as s:  # noqa: SIM115
        cm = torch.compile(model, backend="aot_eager")
        for _ in range(2):
            out = cm(input_ids=torch.randint(0, 100, (2, 8)))
            out.last_hidden_state.mean().backward()
            opt.step()
            opt.zero_grad()
    led = s.ledger
    self_check(led)
    assert led.totals.calls == 2
    back = [o for o in led.outside if o.kind == "backward"]
    assert back, "the compiled backward ran inside loss.backward() and was recorded"
    assert {o.attributed_call for o in back} == {0, 1}
