"""The report's view-model: figures derived from a receipt, compared by value (GIVEN / WHEN / THEN)."""

from __future__ import annotations

import os

import msgspec
import pytest
from fakes import fake_ledger, fake_probe, fake_receipt

from seamscope.analyze.receipt import make_receipt
from seamscope.analyze.report_view import (
    MAX_TIMELINE_ROWS,
    build_comparison,
    build_view,
    pick_timeline_calls,
    read_context,
)
from seamscope.model.ledger import IslandEvent, Ledger, RegionEvent


def regions_in(ledger: Ledger, index: int) -> int:
    call = next(c for c in ledger.calls if c.index == index)
    return sum(1 for e in call.events if isinstance(e, RegionEvent))


# --- tests ----------------------------------------------------------------------------------------


def test_timeline_has_one_region_bar_per_region_event_and_tooltips_name_the_break():
    # GIVEN a run with a break after frame 0's graph
    r = fake_receipt()
    # WHEN the view is built
    v = build_view(r, source_root="/nonexistent")
    # THEN every recorded call has a row whose region bars match the ledger, in order
    assert [row.call_index for row in v.timeline.rows] == [c.index for c in r.ledger.calls]
    for row, call in zip(v.timeline.rows, r.ledger.calls, strict=True):
        regions = [e for e in call.events if isinstance(e, RegionEvent)]
        assert row.region_count == len(regions)
        assert [b.compile_id for b in row.bars if b.kind == "region"] == [e.compile_id for e in regions]
        assert row.island_count == sum(1 for e in call.events if isinstance(e, IslandEvent))
        for b in row.bars:
            assert 0.0 <= b.x <= 100.0 and 0.0 < b.w <= 100.0
    # and an island after the break says which break and why
    steady = v.timeline.rows[1]
    island = next(b for b in steady.bars if b.kind == "island" and "after break" in b.tip)
    assert "fake break print" in island.tip
    # and the recompile's compile bar names its compile id
    recompile_row = v.timeline.rows[3]
    assert any(b.kind == "compile" and b.compile_id == "0/1" for b in recompile_row.bars)


def test_same_compile_id_same_colour_and_legend_lists_region_ids():
    v = build_view(fake_receipt(), source_root="/nonexistent")
    colours: dict[str, str] = {}
    for row in v.timeline.rows:
        for b in row.bars:
            if b.kind == "region":
                assert colours.setdefault(b.compile_id, b.colour) == b.colour
    assert [cid for cid, _ in v.timeline.legend] == ["0/0", "0/1", "1/0"]
    assert len(set(colours.values())) == 3


def test_overview_counts_and_phases_come_from_exact_totals_when_detail_is_dropped():
    # GIVEN 3,000 calls with per-call detail bounded to 64
    r = make_receipt(fake_ledger(3000, first_calls=16, call_cap=64))
    assert r.ledger.retention.dropped > 0
    v = build_view(r, source_root="/nonexistent")
    counts = {c.label: c.value for c in v.counts}
    assert counts["calls"] == 3000
    steady = next(p for p in v.phases if p.phase == "steady")
    assert steady.calls == 2998
    assert steady.wall_ns == 2998 * 170_000
    assert "totals are exact" in v.retention_note
    assert v.timeline.total_calls == 3000 and v.timeline.retained_calls == len(r.ledger.calls)


def test_timeline_downsampling_keeps_every_compiling_call_and_is_bounded():
    ledger = fake_ledger(1000, first_calls=1000, call_cap=1000)
    shown = pick_timeline_calls(ledger.calls)
    assert len(shown) == MAX_TIMELINE_ROWS
    assert {0, 3} <= {c.index for c in shown}
    assert [c.index for c in shown] == sorted(c.index for c in shown)
    v = build_view(make_receipt(ledger), source_root="/nonexistent")
    assert len(v.timeline.rows) == MAX_TIMELINE_ROWS
    assert "200 of 1000 recorded calls shown" in v.timeline.note
    assert len(v.calls_chart.columns) <= 300
    assert sum(c.calls for c in v.calls_chart.columns) == 1000


def test_findings_rank_by_measured_cost_with_source_context(tmp_path):
    # GIVEN the break site's file exists under the source root
    src = tmp_path / "model.py"
    src.write_text("".join(f"line {n}\n" for n in range(1, 40)))
    r = fake_receipt()
    site = r.ledger.break_sites[0]
    v = build_view(r, source_root=str(tmp_path))
    # THEN the recompile (4 ms of compile) outranks the break (8 islands of 20 µs after it)
    kinds = [f.kind for f in v.top_findings]
    assert kinds == ["recompile", "break"]
    assert [f.rank for f in v.top_findings] == [1, 2]
    brk = v.top_findings[1]
    assert brk.cost_ns == 8 * 20_000 == r.ledger.totals.sites[0].island_after_ns
    assert [line.number for line in brk.context] == list(range(site.line - 2, site.line + 3))
    assert [line.text for line in brk.context if line.is_site] == [f"line {site.line}"]


def test_unreadable_source_says_so():
    ctx, note = read_context("nowhere/model.py", 3, "/nonexistent")
    assert ctx == [] and "not readable" in note
    ctx, note = read_context("<string>", 3, "/")
    assert ctx == [] and note == "source not available"


@pytest.mark.torch
def test_an_installed_librarys_source_is_read_from_where_it_is_installed():
    """Receipts name an installed package's file ``site-packages/...`` (the same on every
    machine); the report reads it from this interpreter's own site-packages."""
    import importlib.util

    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        pytest.skip("torch is not installed")
    real = os.path.join(os.path.dirname(spec.origin), "_dynamo", "external_utils.py")
    with open(real, encoding="utf-8") as f:
        text = f.read().splitlines()
    line = next(n for n, t in enumerate(text, 1) if t.lstrip().startswith("def "))
    ctx, note = read_context("site-packages/torch/_dynamo/external_utils.py", line, "/nonexistent")
    assert note == "" and [c.text for c in ctx if c.is_site] == [text[line - 1]]
    ctx, note = read_context("site-packages/torch/no_such_file.py", 3, "/nonexistent")
    assert ctx == [] and "not readable" in note


def test_missing_optional_sections_are_marked_absent_and_present_ones_tabulated():
    r = fake_receipt()
    v = build_view(r, source_root="/nonexistent")
    assert {s.key: s.present for s in v.sections} == {
        "findings": False, "probe": False, "shapes": False, "comparison": False, "memory": False,
    }
    probe = fake_probe()
    v2 = build_view(msgspec.structs.replace(r, probe=probe), source_root="/nonexistent")
    sec = next(s for s in v2.sections if s.key == "probe")
    assert sec.present
    assert ("answer", "compiled matches eager") in sec.facts
    table = next(t for t in sec.tables if t.title == "evidence")
    assert table.rows[0][table.columns.index("configuration")] == "eager"


def test_comparison_reports_phase_medians_and_a_verdict():
    before = fake_receipt()
    after = fake_receipt(slow_steady=100_000)
    c = build_comparison(before, after)
    steady = next(d for d in c.phases if d.phase == "steady")
    assert steady.before_median_ns == 170_000 and steady.after_median_ns == 270_000
    assert steady.change_pct == round(100 * 100_000 / 170_000, 1)
    assert c.verdict and all(isinstance(line, str) for line in c.verdict)


def test_view_is_deterministic():
    r = fake_receipt()
    assert build_view(r, source_root="/x") == build_view(r, source_root="/x")


def test_receipt_findings_section_is_shown_in_its_own_order_with_context(tmp_path):
    # GIVEN a findings section as the findings analysis writes it (the Receipt field may not exist yet)
    from types import SimpleNamespace

    from seamscope.analyze.report_view import top_findings
    from seamscope.model.findings import (
        BreakCost,
        Cause,
        ChurnAxis,
        ChurnEvidence,
        Finding,
        FindingsSection,
        FragmentationAxis,
        Remedy,
        Where,
    )

    (tmp_path / "m.py").write_text("a\nb\nprint(x)\nd\ne\n")
    brk = Finding(
        finding_id="FB00000001", axis="fragmentation", rank=1, sentence="break at m.py:3 (print) costs 6%",
        remedies=[Remedy(action="move_out_of_hot_path", text="move the print out")],
        where=Where(file="m.py", line=3, function="f", package=None, user_frame=None),
        cause=Cause(break_class="host_side_effect", label="print", host_read=False, gb_code="GB0059",
                    gb_type=None, explanation="", matched_by="gb_code"),
        cost=BreakCost(basis="steady", calls=4, calls_crossing=4, crossings=4, crossings_per_call=1.0,
                       crossings_min=1, crossings_max=1, stable=True, island_median_ns=5, island_p90_ns=5,
                       island_ns=20, estimated_ns=20, share=0.06),
    )
    churn = Finding(
        finding_id="FR00000001", axis="churn", rank=1, sentence="shape churn on f", remedies=[],
        churn=ChurnEvidence(pattern="shape", frame_name="f", file="m.py", line=1, compile_ids=["0/1"], recompiles=1,
                            variants=2, compile_ns=900, calls=[3], subjects=["x"], guards=[], values_seen=[],
                            fallback=False),
    )
    section = FindingsSection(
        fragmentation=FragmentationAxis(basis="steady", calls=4, break_sites=1, regions_per_call_median=2.0,
                                        regions_per_call_max=2, island_per_call_median_ns=5, island_share=0.06,
                                        crossings_per_call=1.0),
        churn=ChurnAxis(frames=1, compiles=2, recompiles=1, variants_max=2, fallbacks=0, compile_ns=900,
                        compiling_calls=2, compile_share=0.5),
        findings=[brk, churn], ranked_by="measured cost",
    )
    rows = top_findings(SimpleNamespace(findings=section), str(tmp_path))  # type: ignore[arg-type]
    # THEN the analysis' order, sentences, costs, remedies and source context are kept
    assert [(r.rank, r.kind, r.headline, r.cost_ns) for r in rows] == [
        (1, "print", "break at m.py:3 (print) costs 6%", 20),
        (2, "shape", "shape churn on f", 900),
    ]
    assert rows[0].detail == "move the print out"
    assert [line.text for line in rows[0].context if line.is_site] == ["print(x)"]
    assert rows[1].where == "m.py:1"
