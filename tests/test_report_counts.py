"""Counted nouns read right in every renderer: 0 calls, 1 call, 2 calls (snapshots)."""

from __future__ import annotations

import io
import re

import msgspec
import pytest
from fakes import fake_receipt
from rich.console import Console

from seamscope.analyze.report_view import build_view
from seamscope.analyze.units import counted, noun
from seamscope.render.html import HtmlRenderer
from seamscope.render.markdown import MarkdownRenderer
from seamscope.render.terminal import TerminalRenderer

COUNTS = ("call_count", "compile_count", "recompile_count", "graph_count", "break_site_count", "fallback_count")


def receipt_with(n: int):
    r = fake_receipt()
    return msgspec.structs.replace(r, summary=msgspec.structs.replace(r.summary, **dict.fromkeys(COUNTS, n)))


TERMINAL = {
    0: "seamscope · 0 calls · 0 compiles (0 recompiles) · 0 graphs · 0 break sites · 0 fallbacks",
    1: "seamscope · 1 call · 1 compile (1 recompile) · 1 graph · 1 break site · 1 fallback",
    2: "seamscope · 2 calls · 2 compiles (2 recompiles) · 2 graphs · 2 break sites · 2 fallbacks",
}
MARKDOWN = {
    0: "0 calls · 0 compiles · 0 recompiles · 0 graphs · 0 break sites · 0 fallbacks",
    1: "1 call · 1 compile · 1 recompile · 1 graph · 1 break site · 1 fallback",
    2: "2 calls · 2 compiles · 2 recompiles · 2 graphs · 2 break sites · 2 fallbacks",
}
HTML = {
    0: [("0", "calls"), ("0", "compiles"), ("0", "recompiles"), ("0", "graphs"), ("0", "break sites"),
        ("0", "fallbacks")],
    1: [("1", "call"), ("1", "compile"), ("1", "recompile"), ("1", "graph"), ("1", "break site"),
        ("1", "fallback")],
    2: [("2", "calls"), ("2", "compiles"), ("2", "recompiles"), ("2", "graphs"), ("2", "break sites"),
        ("2", "fallbacks")],
}


@pytest.mark.parametrize("n", [0, 1, 2])
def test_terminal_counts(n):
    buf = io.StringIO()
    TerminalRenderer(console=Console(file=buf, width=200, color_system=None)).print(receipt_with(n))
    assert buf.getvalue().splitlines()[0] == TERMINAL[n]


@pytest.mark.parametrize("n", [0, 1, 2])
def test_markdown_counts(n):
    md = MarkdownRenderer().render_view(build_view(receipt_with(n), source_root="/nonexistent"))
    assert md.splitlines()[2] == MARKDOWN[n]


@pytest.mark.parametrize("n", [0, 1, 2])
def test_html_counts(n):
    html = HtmlRenderer(source_root="/nonexistent").render(receipt_with(n))
    cards = re.findall(r'<div class="card"><div class="num">(\d+)</div><div class="lbl">([^<]*)</div></div>', html)
    assert cards == HTML[n]


def test_counted_nouns():
    assert [counted(n, "break site") for n in (0, 1, 2)] == ["0 break sites", "1 break site", "2 break sites"]
    assert counted(1, "policy", "policies") == "1 policy" and counted(3, "policy", "policies") == "3 policies"
    assert noun(-1, "call") == "calls"
