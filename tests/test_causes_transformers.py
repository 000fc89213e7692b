"""The headline and recompile causes on real ``transformers`` models built from tiny configs
(backend eager), checked against PyTorch's own compilation records and counters."""

from __future__ import annotations

import contextlib
import os

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from seamscope.capture import adapter  # noqa: E402
from seamscope.capture.session import session  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("dynamo_reset")]


def _run(model, inputs):
    torch._dynamo.utils.set_compilation_metrics_limit(10_000)
    torch._dynamo.utils.clear_compilation_metrics()
    with contextlib.redirect_stdout(open(os.devnull, "w")), session() as s:  # noqa: SIM115
        cm = torch.compile(model, backend="eager")
        with torch.no_grad():
            for kw in inputs:
                cm(**kw)
    return s.receipt(), torch._dynamo.utils.get_compilation_metrics()


def test_bert_sweep_mostly_recompilation_groups_by_changed_input():
    cfg = transformers.BertConfig(
        vocab_size=100, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32
    )
    torch.manual_seed(0)
    model = transformers.BertModel(cfg).eval()

    def ids(n):
        return torch.randint(0, 100, (1, n))

    # GIVEN length 8, then an attention mask passed (an optional argument), then lengths 12 and 16
    r, metrics = _run(model, [
        {"input_ids": ids(8)},
        {"input_ids": ids(8), "attention_mask": torch.ones(1, 8, dtype=torch.long)},
        {"input_ids": ids(12)},
        {"input_ids": ids(16)},
    ])
    sec = r.findings
    assert sec is not None and sec.headline is not None
    # THEN every recompile PyTorch recorded (its compilation metrics, not what capture reads) is
    # in exactly one cause, and the causes' compile times add up to the recompiles' exactly
    recompile_ids = {m.compile_id for m in metrics if m.compile_id and not m.compile_id.endswith("/0")}
    assert recompile_ids, "the sweep recompiles"
    grouped = [cid for c in sec.causes for cid in c.compile_ids]
    assert sorted(grouped) == sorted(recompile_ids)
    recompiles = [c for c in r.ledger.compilations if c.is_recompile]
    assert sum(c.compile_ns for c in sec.causes) == sum(c.duration_ns or 0 for c in recompiles)
    # one cause per changed input property, named as the user would
    by_call = {o.call_index: c for c in sec.causes for o in c.occurrences}
    assert by_call[1].family == "flag" and "optional argument" in by_call[1].change
    assert by_call[2].family == "size" and by_call[2].change == "input_ids dim 1: 8 → 12"
    assert by_call[2].remedy is not None and by_call[2].remedy.action == "mark_dynamic_or_bucket"
    assert len(sec.causes) == len({(c.family, c.subject, c.dim) for c in sec.causes})
    # AND a run that is mostly compilation leads with it: headline and first finding
    total = sec.headline.split[0]
    assert total.compile_ns * 2 > total.wall_ns
    # (the first compilations rank too, as compile-time findings; among the rest, a cause leads)
    assert next(i for i in sec.ranked if i.axis != "compile_time").axis == "recompile_cause"
    assert sec.headline.top_item_id == sec.ranked[0].item_id and sec.headline.top_axis == sec.ranked[0].axis
    assert "was compilation" in sec.headline.sentence


def test_longformer_steady_calls_put_the_expensive_break_first():
    cfg = transformers.LongformerConfig(
        vocab_size=100, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
        attention_window=[4], max_position_embeddings=64, pad_token_id=1,
    )
    torch.manual_seed(0)
    model = transformers.LongformerModel(cfg).eval()
    x = torch.randint(2, 100, (1, 8))
    # GIVEN one input shape, called until the calls only hit the cache
    r, metrics = _run(model, [{"input_ids": x}] * 8)
    sec = r.findings
    assert sec is not None and sec.headline is not None
    assert [m.compile_id for m in metrics if not m.compile_id.endswith("/0")] == []  # no recompile
    assert any(p.phase == "steady" and p.calls for p in r.summary.phases)
    # THEN the first finding is a break (Longformer reads .item() to decide on global attention),
    # and it is one PyTorch counted too
    # (the first compilations rank too, as compile-time findings; among the rest, the break leads)
    first = next(i for i in sec.ranked if i.axis != "compile_time")
    assert first.axis == "fragmentation" and sec.headline.top_item_id == sec.ranked[0].item_id
    site = next(s for s in r.ledger.break_sites if s.site_id == first.item_id)
    breaks = adapter.dynamo_counters()["graph_break"]
    assert breaks and any(site.gb_type and site.gb_type in reason for reason in breaks)
    assert first.cost_ns == next(t.island_after_ns for t in r.ledger.totals.sites if t.site_id == site.site_id)
    assert [i.cost_ns for i in sec.ranked] == sorted((i.cost_ns or 0 for i in sec.ranked), reverse=True)
    assert not sec.headline.no_steady_calls
