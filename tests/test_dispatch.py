"""Dispatch in the ledger (torch-free): guard trees counted by group, PyTorch's guard figures read
from a committed ``TORCH_TRACE`` log, the lookups of each call replayed most recently used first,
the estimate taken out of the islands, and ``verify`` recomputing it.

GIVEN hand-made ledgers and the committed ``breaks`` log WHEN the receipt is made THEN the dispatch
figures are those the entries' order and PyTorch's measurements imply."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
from fakes import fake_ledger

from seamscope.analyze.receipt import make_receipt
from seamscope.analyze.verify import verify
from seamscope.ingest.guard_groups import group_guards
from seamscope.ingest.torch_trace import import_torch_trace
from seamscope.model.canonical import canonical_bytes
from seamscope.model.ledger import Call, Compilation, CompileEvent, IslandEvent, RegionEvent

BREAKS = Path(__file__).parent / "inputs" / "torch_trace" / "breaks"

TREE = """TREE_GUARD_MANAGER:
+- RootGuardManager
| +- GLOBAL_STATE: ___check_global_state() against {}
| +- GuardManager: source=L['x'], accessed_by=FrameLocalsGuardAccessor(key='x', framelocals_idx=0)
| | +- TENSOR_MATCH: check_tensor(L['x'], Tensor, torch.float32, size=[4], stride=[1])  # x.sin()  # f.py:3 in f
| +- GuardManager: source=L['self']._modules['h'], accessed_by=DictGetItemGuardAccessor('h')
| | +- TYPE_MATCH: ___check_type_id(L['self']._modules['h'], 9409)
| | +- TENSOR_MATCH: check_tensor(L['self']._modules['h']._parameters['weight'], Parameter, size=[4])
| +- ID_MATCH: ___check_obj_id(L['fn'], 1403)  # fn(x)  # G['x'] in a comment is not read
| +- EQUALS_MATCH: L['n'] == 3
| +- ID_MATCH: ___check_obj_id(G['torch'], 1402)

Guard latency = 83.62 us
"""


def test_guard_tree_checks_are_counted_once_by_group() -> None:
    assert group_guards(TREE) == {"module": 2, "tensor": 1, "global": 2, "id": 1, "value": 1}


def test_import_carries_pytorch_guard_figures_per_entry() -> None:
    log = next(BREAKS.glob("*.log"))
    # PyTorch's own figures, read off the log's metrics records with a plain regex (not the importer)
    want = {}
    for line in log.read_text().splitlines():
        if '{"compilation_metrics"' in line:
            meta = json.loads(line.split("] ", 1)[1])
            m = meta["compilation_metrics"]
            if m.get("guard_latency_us") is not None:
                cid = f"{meta['frame_id']}/{meta['frame_compile_id']}"
                want[cid] = (m["guard_count"], m["guard_latency_us"] * 1000)
    ledger = import_torch_trace(str(log)).ledger
    got = {c.compile_id: (c.guard_count, c.guard_latency_ns) for c in ledger.compilations if c.status == "ok"}
    assert got and got == {k: want[k] for k in got}
    assert all(c.guard_checks for c in ledger.compilations if c.status == "ok")
    section = make_receipt(ledger).findings.dispatch
    assert section is not None and section.guard_count == sum(g for g, _ in got.values())
    assert not section.calls and section.missing  # no runtime data: per frame only, said so


def _comp(cid: str, latency: int) -> Compilation:
    return Compilation(compile_id=cid, frame_name="f", file="f.py", line=1, status="ok", graph_count=1,
                       guard_count=10, guard_latency_ns=latency, guard_checks={"tensor": 3})


def _call(i: int, events: list, wall: int) -> Call:
    compiled = any(isinstance(e, CompileEvent) for e in events)
    return Call(index=i, phase="cold" if compiled else "steady", outcome="compile" if compiled else "hit",
                wall_ns=wall, overhead_ns=0, events=events)


def _ledger():
    r = RegionEvent
    calls = [
        _call(0, [CompileEvent(compile_id="0/0", start_ns=0, duration_ns=10), r(compile_id="0/0", graph_index=0,
              start_ns=10, duration_ns=5), IslandEvent(start_ns=15, duration_ns=1000)], 1015),
        _call(1, [IslandEvent(start_ns=0, duration_ns=500), CompileEvent(compile_id="0/1", start_ns=500,
              duration_ns=10), r(compile_id="0/1", graph_index=0, start_ns=510, duration_ns=5)], 515),
        # 0/1 is in front: a lookup for 0/0 checks both
        _call(2, [IslandEvent(start_ns=0, duration_ns=1000), r(compile_id="0/0", graph_index=0, start_ns=1000,
              duration_ns=5)], 1005),
        # 0/0 moved to the front: one entry checked; an island shorter than the latencies caps the estimate
        _call(3, [IslandEvent(start_ns=0, duration_ns=60), r(compile_id="0/0", graph_index=0, start_ns=60,
              duration_ns=5), r(compile_id="0/0", graph_index=1, start_ns=65, duration_ns=5)], 70),
        _call(4, [IslandEvent(start_ns=0, duration_ns=1000), r(compile_id="0/1", graph_index=0, start_ns=1000,
              duration_ns=5)], 1005),
    ]
    return msgspec.structs.replace(fake_ledger(), compilations=[_comp("0/0", 100), _comp("0/1", 300)], calls=calls,
                                   break_sites=[])


def test_lookups_walk_the_entries_most_recently_used_first() -> None:
    d = make_receipt(_ledger()).findings.dispatch
    assert d is not None
    rows = [(c.index, c.lookups, c.walked, c.raw_ns, c.estimate_ns) for c in d.calls]
    # a lookup costs the hit's latency; the entries that failed before it are counted, not timed
    assert rows == [(0, 1, 0, 0, 0), (1, 1, 1, 0, 0), (2, 1, 2, 100, 100), (3, 1, 1, 100, 60),
                    (4, 1, 2, 300, 300)]
    (frame,) = d.frames
    assert (frame.lookups, frame.walked, frame.walked_max, frame.estimate_ns) == (5, 6, 2, 500)
    assert [e.hits for e in frame.entries] == [2, 1]
    assert d.capped_calls == 1 and d.steady_calls == 3 and d.per_call_ns == round(460 / 3)
    assert "guard_latency_ns" in " ".join(d.measured) and "estimate_ns" in " ".join(d.estimated)
    assert d.sentence.startswith("dispatch: ") and "in 1 frame" in d.sentence
    assert [r.action for r in d.remedies][0] == "fewer_cache_entries"


def test_verify_recomputes_the_dispatch_figures() -> None:
    receipt = make_receipt(_ledger())
    raw = json.loads(canonical_bytes(receipt))
    assert "DISPATCH_MISMATCH" not in verify(raw).codes
    raw["findings"]["dispatch"]["calls"][2]["estimate_ns"] -= 1
    assert "DISPATCH_MISMATCH" in verify(raw).codes
    raw = json.loads(canonical_bytes(receipt))
    raw["findings"]["dispatch"]["frames"][0]["entries"][1]["guard_latency_ns"] = 1
    assert "DISPATCH_MISMATCH" in verify(raw).codes


def test_dispatch_is_ranked_with_the_other_findings() -> None:
    ranked = make_receipt(_ledger()).findings.ranked
    assert [r.axis for r in ranked].count("dispatch") == 1
    assert [r.rank for r in ranked] == list(range(1, len(ranked) + 1))


def test_reports_name_the_dispatch_item_and_its_frames() -> None:
    from seamscope.analyze.report_view.findings import ranked_rows

    (row,) = [r for r in ranked_rows(make_receipt(_ledger()), ".") if r.item_id.startswith("DP")]
    assert row.kind == "dispatch" and row.where == "f.py:1"
    assert row.beneath[0].startswith("f (f.py:1): 2 cache entries, 20 guards") and "up to 2" in row.beneath[0]
