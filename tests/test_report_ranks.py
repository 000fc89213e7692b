"""The report's rank × call view of a merged receipt, and ``check``/``diff`` on it.

GIVEN per-rank receipts built from fake ledgers and merged like ``seamscope merge``, WHEN the report
is rendered, THEN each rank's row has one cell per call it made, the cells where a divergence starts
are marked and name it, and text from the ranks stays text.
"""

from __future__ import annotations

import os
from html.parser import HTMLParser
from types import SimpleNamespace

import msgspec
from click.testing import CliRunner
from fakes import XSS_IMG, XSS_SCRIPT, fake_receipt

from seamscope.analyze.ranks import gather, merge
from seamscope.analyze.receipt import make_receipt
from seamscope.analyze.report_view import MAX_RANK_COLUMNS, build_view, pick_rank_columns
from seamscope.cli import cli
from seamscope.model.fake import FakeCall, FakeProgram, FakeStep, play
from seamscope.model.ledger import RunStatus
from seamscope.model.ranks import DdpSplit
from seamscope.render.html import HtmlRenderer
from seamscope.render.markdown import MarkdownRenderer
from seamscope.render.receipt_json import write_receipt_files

MS = 1_000_000


def rank_ledger(rank: int, n_calls: int = 7, *, recompile_at: int | None = None, world: int = 3):
    """Call 0 compiles 0/0 and crosses a break into 1/0; every later call runs the two regions with
    an island between; from ``recompile_at`` on the rank runs 0/1 instead of 0/0."""
    S = FakeStep
    calls = [FakeCall([S("compile", 5 * MS, "0/0"), S("region", MS, "0/0"), S("island", MS // 10),
                       S("compile", 3 * MS, "1/0"), S("region", MS // 2, "1/0")])]
    for i in range(1, n_calls):
        first = "0/1" if recompile_at is not None and i >= recompile_at else "0/0"
        steps = [S("compile", 4 * MS, "0/1")] if i == recompile_at else []
        steps += [S("region", MS, first), S("island", MS // 10), S("region", MS // 2, "1/0")]
        calls.append(FakeCall(steps))
    led = play(FakeProgram(breaks={"0/0": "print", "0/1": "print"}, calls=calls)).build()
    run = msgspec.structs.replace(led.run, source="live", rank=rank, world_size=world, input_trace_sha256="a" * 64,
                                  status=RunStatus(state="completed", exit_code=0))  # as every live rank records
    return msgspec.structs.replace(led, run=run)


def merged_receipt(root, ledgers):
    for led in ledgers:
        write_receipt_files(make_receipt(led), os.path.join(root, f"rank-{led.run.rank}"))
    return merge(gather(str(root)))


def three_ranks(root):
    """Rank 1 recompiles at call 3; rank 2 stops after 5 calls; rank 0 is the reference."""
    return merged_receipt(root, [rank_ledger(0), rank_ledger(1, recompile_at=3), rank_ledger(2, n_calls=5)])


class Grid(HTMLParser):
    """Cells of the rank grid by rank: (class list, data-call, data-regions, title)."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: dict[int, list[tuple[list[str], int, int, str]]] = {}
        self.tags: list[str] = []
        self._rank: int | None = None

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        a = dict(attrs)
        if tag == "tr" and "rank-row" in (a.get("class") or "").split():
            self._rank = int(a["data-rank"] or -1)
            self.rows[self._rank] = []
        elif tag == "td" and self._rank is not None:
            self.rows[self._rank].append(
                (
                    (a.get("class") or "").split(),
                    int(a["data-call"] or -1),
                    int(a["data-regions"] or 0),
                    a.get("title") or "",
                )
            )

    def handle_endtag(self, tag):
        if tag == "tr":
            self._rank = None


def grid(html: str) -> Grid:
    g = Grid()
    g.feed(html)
    return g


def test_each_rank_row_has_one_cell_per_call_with_its_regions(tmp_path):
    receipt = three_ranks(tmp_path)
    html = HtmlRenderer(source_root="/nonexistent").render(receipt)
    g = grid(html)
    entries = {e.rank: e for e in receipt.ranks.ranks}
    assert sorted(g.rows) == [0, 1, 2]
    for rank, cells in g.rows.items():
        calls = [c for c in cells if "call" in c[0]]
        assert [c[1] for c in calls] == [c.index for c in entries[rank].calls]
        assert [c[2] for c in calls] == [len(c.regions) for c in entries[rank].calls]
        # every row spans the same columns: the calls a rank did not make are gaps
        assert len(cells) == 7
    assert [c[1] for c in g.rows[2] if "gap" in c[0]] == [5, 6]
    # the cold call shows as such, and its tooltip names its regions and wall time
    first = g.rows[0][0]
    assert "phase-cold" in first[0] and "2 regions: 0/0, 1/0" in first[3]


def test_cells_where_a_divergence_starts_are_marked_and_name_it(tmp_path):
    receipt = three_ranks(tmp_path)
    kinds = {d.kind: d for d in receipt.ranks.divergences}
    assert kinds["recompile_call"].ranks == [1] and kinds["recompile_call"].first_call == 3
    assert kinds["call_count"].ranks == [2] and kinds["call_count"].first_call == 5
    g = grid(HtmlRenderer(source_root="/nonexistent").render(receipt))

    def marked(rank, how):
        return [c[1] for c in g.rows[rank] if f"div-{how}" in c[0]]

    assert marked(0, "start") == [] and marked(0, "after") == []
    assert marked(1, "start") == [3] and marked(1, "after") == [4, 5, 6]
    assert marked(2, "start") == [5] and marked(2, "after") == [6]
    start = next(c for c in g.rows[1] if c[1] == 3)
    assert "divergence starts here: recompile_call: rank 1 recompiled 0/1" in start[3]
    after = next(c for c in g.rows[1] if c[1] == 4)
    assert "diverged since call 3: recompile_call" in after[3]


def test_divergence_list_ddp_splits_and_view_figures(tmp_path):
    receipt = three_ranks(tmp_path)
    v = build_view(receipt, source_root="/nonexistent").ranks
    assert v.present and v.world_size == 3 and v.ranks_present == [0, 1, 2]
    assert [(d.kind, d.ranks, d.first_call) for d in v.divergences] == [
        (d.kind, d.ranks, d.first_call) for d in receipt.ranks.divergences
    ]
    assert [r.divergent for r in v.rows] == [False, True, True]
    assert [c.call_index for c in v.columns] == list(range(7))
    assert all(c.divergence_starts == (c.call_index in (3, 5)) for c in v.columns)
    # bar heights: the slowest shown call is full height, the rest scaled below it
    present = [c for r in v.rows for c in r.cells if c.present]
    assert max(c.h for c in present) == 100.0 and min(c.h for c in present) > 0
    slowest = max(present, key=lambda c: c.wall_ns)
    assert slowest.h == 100.0
    html = HtmlRenderer(source_root="/nonexistent").render(receipt)
    assert html.count('class="divergence"') == len(receipt.ranks.divergences)
    assert "No DDP splits." in html


def test_hostile_text_from_a_rank_is_escaped(tmp_path):
    receipt = three_ranks(tmp_path)
    sec = receipt.ranks
    divs = [msgspec.structs.replace(d, detail=XSS_SCRIPT + XSS_IMG) for d in sec.divergences]
    entries = [
        msgspec.structs.replace(
            e, source=XSS_IMG, ddp_splits=[DdpSplit(compile_id="0/0", frame_name=XSS_SCRIPT, submodules=3)]
        )
        for e in sec.ranks
    ]
    problems = [msgspec.structs.replace(p, message=XSS_SCRIPT) for p in sec.problems]
    hostile = msgspec.structs.replace(receipt, ranks=msgspec.structs.replace(
        sec, divergences=divs, ranks=entries, problems=problems, ledger_note=XSS_IMG))
    html = HtmlRenderer(source_root="/nonexistent").render(hostile)
    g = grid(html)
    assert "script" not in g.tags and "img" not in g.tags
    assert "&lt;script&gt;window.__seamscope_pwned = 1&lt;/script&gt;" in html
    # the tooltip of the start cell carries the text, inert
    start = next(c for c in g.rows[1] if c[1] == 3)
    assert XSS_SCRIPT in start[3]
    assert html.count('class="ddp-split"') == 3
    md = MarkdownRenderer().render_view(build_view(hostile, source_root="/nonexistent"))
    assert "<script" not in md and "<img" not in md and "&lt;script&gt;" in md


def test_markdown_lists_divergences_and_absent_ranks_say_so(tmp_path):
    md = MarkdownRenderer().render_view(build_view(three_ranks(tmp_path), source_root="/nonexistent"))
    assert "**Ranks**: 3 merged of world size 3; " in md
    assert "- **recompile\\_call**: rank 1 (against 0, 2) from call 3: rank 1 recompiled 0/1" in md
    assert "- **call\\_count**: rank 2 (against 0, 1) from call 5" in md
    one = fake_receipt()
    view = build_view(one, source_root="/nonexistent")
    assert not view.ranks.present
    assert "**Ranks**" not in MarkdownRenderer().render_view(view)
    html = HtmlRenderer(source_root="/nonexistent").render(one)
    section = html[html.index('<section id="ranks"'):]
    section = section[: section.index("</section>")]
    assert "Not in this receipt" in section and "rank-grid" not in section


def test_agreeing_ranks_render_without_marks(tmp_path):
    receipt = merged_receipt(tmp_path, [rank_ledger(0, world=2), rank_ledger(1, world=2)])
    assert receipt.ranks.divergences == []
    html = HtmlRenderer(source_root="/nonexistent").render(receipt)
    g = grid(html)
    assert all(not any(k.startswith("div-") for k in c[0]) for cells in g.rows.values() for c in cells)
    assert "The ranks do not diverge." in html
    assert "the ranks do not diverge." in MarkdownRenderer().render_view(
        build_view(receipt, source_root="/nonexistent")
    )


def test_columns_are_bounded_and_keep_every_call_where_a_divergence_starts(tmp_path):
    # GIVEN two long ranks, rank 1 recompiling late (call 457 is not on the even spacing of 3)
    receipt = merged_receipt(tmp_path, [rank_ledger(0, 600, world=2), rank_ledger(1, 600, recompile_at=457, world=2)])
    v = build_view(receipt, source_root="/nonexistent").ranks
    shown = [c.call_index for c in v.columns]
    assert len(shown) == MAX_RANK_COLUMNS and shown == sorted(set(shown))
    assert 457 in shown and 0 in shown
    assert all(len(r.cells) == len(shown) for r in v.rows)
    starts = [c.call_index for c in v.rows[1].cells if c.divergence == "start"]
    assert starts == [457]
    # the unit: divergence starts first, then calls that compiled, then evenly spaced
    calls = [SimpleNamespace(index=i, outcome="compile" if i % 50 == 0 else "hit") for i in range(1000)]
    picked = pick_rank_columns([calls], keep={999, 3, 5000}, limit=50)
    assert len(picked) == 50 and {3, 999} <= set(picked)
    assert set(range(0, 1000, 50)) <= set(picked)  # 20 compiling calls fit in half of the 48 left
    assert pick_rank_columns([calls[:10]], keep=set(), limit=40) == list(range(10))


def test_check_and_diff_work_on_a_merged_receipt(tmp_path):
    for led in (rank_ledger(0, world=2), rank_ledger(1, recompile_at=3, world=2)):
        write_receipt_files(make_receipt(led), tmp_path / f"rank-{led.run.rank}")
    runner = CliRunner()
    out = tmp_path / "merged"
    r = runner.invoke(cli, ["merge", str(tmp_path), "--out", str(out)])
    assert r.exit_code == 0, r.output
    # merge writes the report beside the merged receipt, with the grid in it
    g = grid((out / "index.html").read_text())
    assert sorted(g.rows) == [0, 1] and len([c for c in g.rows[1] if "div-start" in c[0]]) == 1
    merged = str(out / "receipt.json")
    r = runner.invoke(cli, ["check", merged, "--baseline", merged])
    assert r.exit_code == 0, r.output
    r = runner.invoke(cli, ["diff", merged, merged])
    assert r.exit_code == 0, r.output
    # the primary (rank 0) ledgers compared: equal figures, and one run a side is no verdict
    assert "steady ±0% (median), cold ±0% (total): one run each: not a verdict" in r.output
    r = runner.invoke(cli, ["diff", "--json", str(out), str(out)])
    assert r.exit_code == 0 and r.output.lstrip().startswith("{")
