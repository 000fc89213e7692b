"""The Markdown summary for a pull-request comment."""

from __future__ import annotations

from fakes import XSS_IMG, XSS_SCRIPT, fake_ledger, fake_receipt, plant

from seamscope.analyze.receipt import make_receipt
from seamscope.analyze.report_view import build_comparison, build_view
from seamscope.render.markdown import MarkdownRenderer, esc


def test_summary_has_counts_phase_table_findings_and_recompiles():
    md = MarkdownRenderer().render_view(build_view(fake_receipt(), source_root="/nonexistent"))
    assert "8 calls · 3 compiles · 1 recompile · " in md
    assert "| steady | 6 | 170 µs | 170 µs | 2 |" in md
    assert "1. **recompile** `model.py:1`" in md
    assert "2. **break** `model.py:15`" in md
    assert "| 0/1 | forward model.py:1 | 3 | not recorded |" in md
    assert "**Verdict**" not in md
    assert len(md.splitlines()) < 40


def test_user_text_is_inert_in_github_markdown():
    r = make_receipt(plant(fake_ledger(), XSS_SCRIPT + "| __init__ |", "a`b" + XSS_IMG))
    md = MarkdownRenderer().render_view(build_view(r, source_root="/nonexistent"))
    assert "<script" not in md and "<img" not in md
    assert "&lt;script&gt;" in md
    assert "\\_\\_init\\_\\_" in md and "\\|" in md
    assert esc("a\nb   c") == "a b c"


def test_verdict_of_two_receipts():
    before, after = fake_receipt(), fake_receipt(slow_steady=100_000)
    md = MarkdownRenderer().render_view(build_view(after, source_root="/nonexistent"), build_comparison(before, after))
    assert "**Verdict**" in md
    assert "| steady | 6 | 6 | 170 µs | 270 µs | +58.8% |" in md
