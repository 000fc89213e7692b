"""The report as a reader meets it: no raw dump of a receipt's fields in the visible page, a snippet
of a decorated frame at its ``def``.

GIVEN a receipt with findings, WHEN its HTML report is rendered, THEN the findings' raw fields
(``cost_ns``, ``remedy.try_with``, JSON in cells) are only inside a collapsed ``<details>``; GIVEN a
frame recorded at its first decorator, THEN its snippet highlights the ``def``.
"""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

import msgspec
from fakes import fake_ledger

from seamscope.analyze.receipt import make_receipt
from seamscope.analyze.report_view.findings import read_context
from seamscope.analyze.watch_view import watch_timeline
from seamscope.ingest.torch_trace import import_torch_trace
from seamscope.render.html import HtmlRenderer
from seamscope.render.markdown import MarkdownRenderer
from seamscope.render.terminal import TerminalRenderer


class _Visible(HTMLParser):
    """The table headers outside any closed ``<details>``."""

    def __init__(self) -> None:
        super().__init__()
        self.closed = 0  # depth inside <details> elements without `open`
        self.in_th = False
        self.headers: list[str] = []
        self.hidden_headers: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "details" and (self.closed or "open" not in dict(attrs)):
            self.closed += 1
        self.in_th = tag == "th"

    def handle_endtag(self, tag: str) -> None:
        if tag == "details" and self.closed:
            self.closed -= 1
        if tag == "th":
            self.in_th = False

    def handle_data(self, data: str) -> None:
        if self.in_th and data.strip():
            (self.hidden_headers if self.closed else self.headers).append(data.strip())


def test_the_findings_raw_fields_are_only_in_a_collapsed_block() -> None:
    r = make_receipt(fake_ledger())
    assert r.findings is not None and r.findings.findings
    page = _Visible()
    page.feed(HtmlRenderer().render(r))
    raw = [h for h in page.headers if "_" in h or "." in h]  # field names: cost_ns, remedy.try_with
    assert raw == [], raw
    assert "cost_ns" in page.hidden_headers  # still there for whoever opens it


def test_a_decorated_frames_snippet_highlights_its_def(tmp_path: Path) -> None:
    src = tmp_path / "m.py"
    src.write_text("import functools\n\n\ndef deco(f):\n    @functools.wraps(f)\n    @staticmethod\n"
                   "    def wrapper(*a):\n        return f(*a)\n    return wrapper\n")
    lines, note = read_context("m.py", 5, str(tmp_path), frame=True)  # Python's co_firstlineno: the decorator
    assert note == "" and [ln.number for ln in lines if ln.is_site] == [7]
    lines, _ = read_context("m.py", 5, str(tmp_path))  # a break site stays where it was recorded
    assert [ln.number for ln in lines if ln.is_site] == [5]


def test_an_imported_logs_recompile_causes_say_nothing_of_calls_it_does_not_record() -> None:
    log = next((Path(__file__).parent / "inputs" / "torch_trace" / "breaks").glob("*.log"))
    r = make_receipt(import_torch_trace(str(log)).ledger)
    assert r.findings is not None and r.findings.causes
    for c in r.findings.causes:
        assert " call" not in c.sentence.split(" recompiled ")[0], c.sentence  # "in call outside calls"
        assert c.sentence.startswith(f"recompile cause {c.cause_id}: {c.change} ")


def test_a_watched_runs_timeline_says_its_time_is_when_the_compilation_began() -> None:
    led = fake_ledger()
    comps = [msgspec.structs.replace(c, start_ns=(c.call_index or 0) * 1_000_000) for c in led.compilations]
    r = make_receipt(msgspec.structs.replace(led, compilations=comps))
    r = msgspec.structs.replace(r, decision=msgspec.structs.replace(
        r.decision, warmup_policy="watch: warm-up = the first 1 calls"))
    timeline = watch_timeline(r)
    assert timeline is not None and timeline.rows
    text = TerminalRenderer().render(r)
    header = next(ln for ln in text.splitlines() if " call " in ln and " kind " in ln)
    assert header.strip("┃ ").split()[0] == "began", header
    assert "| began | call |" in MarkdownRenderer().render(r)
    assert "<th>began</th>" in HtmlRenderer().render(r)
