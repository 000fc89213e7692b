"""The HTML report: self-contained, escaped, bounded in size."""

from __future__ import annotations

import functools
import re
from html.parser import HTMLParser

from fakes import XSS_IMG, XSS_SCRIPT, fake_ledger, fake_receipt, plant
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from seamscope.analyze.receipt import make_receipt
from seamscope.render.html import HtmlRenderer, write_html_report


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.attrs: list[str] = []
        self.calls: dict[str, int] = {}
        self._call: str | None = None

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs += [k for k, _ in attrs]
        a = dict(attrs)
        if tag == "svg" and "data-call" in a:
            self._call = a["data-call"]
            self.calls[self._call] = 0
        if tag == "rect" and self._call is not None and "region" in (a.get("class") or "").split():
            self.calls[self._call] += 1

    def handle_endtag(self, tag):
        if tag == "svg":
            self._call = None


def parse(html: str) -> _Tags:
    p = _Tags()
    p.feed(html)
    return p


def test_the_report_template_is_compiled_once_per_process(monkeypatch):
    """Each report renders from the template compiled for the first (``try`` writes several; a
    notebook renders one per cell)."""
    import jinja2

    from seamscope.render import html

    compiled = []
    real = jinja2.Environment.compile

    def counting(self, *a, **k):
        compiled.append(a[1] if len(a) > 1 else k.get("name"))
        return real(self, *a, **k)

    getattr(html.environment, "cache_clear", lambda: None)()  # start from none compiled
    monkeypatch.setattr(jinja2.Environment, "compile", counting)
    r = fake_receipt()
    first = HtmlRenderer().render(r)
    assert HtmlRenderer().render(r) == first and compiled.count("report.html.j2") == 1, compiled


def test_report_is_self_contained_and_has_every_section():
    html = HtmlRenderer(source_root="/nonexistent").render(fake_receipt())
    tags = parse(html)
    assert "script" not in tags.tags
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html)
    assert "@import" not in html and "url(" not in html
    for sid in ("overview", "top-findings", "timeline", "calls-chart", "variants", "recompiles",
                "break-sites", "section-findings", "section-probe", "section-shapes", "section-memory",
                "environment"):
        assert f'id="{sid}"' in html
    assert html.count("Not in this receipt.") == 5
    assert "Content-Security-Policy" in html


def test_region_bars_per_call_match_the_ledger():
    r = fake_receipt()
    tags = parse(HtmlRenderer(source_root="/nonexistent").render(r))
    expected = {str(c.index): sum(1 for e in c.events if type(e).__name__ == "RegionEvent") for c in r.ledger.calls}
    assert tags.calls == expected


def test_planted_markup_in_reason_file_and_guard_is_escaped():
    r = make_receipt(plant(fake_ledger(), XSS_SCRIPT + XSS_IMG, "evil" + XSS_IMG + ".py"))
    html = HtmlRenderer(source_root="/nonexistent").render(r)
    tags = parse(html)
    assert "script" not in tags.tags and "img" not in tags.tags
    assert "onerror" not in tags.attrs
    assert "<script>window" not in html and "<img src=x" not in html
    assert "&lt;script&gt;window.__seamscope_pwned = 1&lt;/script&gt;" in html
    assert "&lt;img src=x onerror=" in html


@functools.lru_cache(maxsize=1)
def _benign_structure() -> tuple[list[str], list[str]]:
    t = parse(HtmlRenderer(source_root="/nonexistent").render(make_receipt(plant(fake_ledger(4), "plain", "f.py"))))
    return t.tags, sorted(set(t.attrs))


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.text(
        alphabet=st.one_of(st.sampled_from(list("<>\"'&/=! \nabimgsvtl")), st.characters(blacklist_categories=("Cs",))),
        max_size=40,
    )
)
@example("<a")
@example(XSS_SCRIPT)
@example(XSS_IMG)
@example("]]><!--")
@example("\x00")
def test_any_text_in_a_reason_leaves_the_document_structure_unchanged(text):
    hostile = "x" + text  # non-empty, like every real reason (an empty one drops its detail line)
    got = parse(
        HtmlRenderer(source_root="/nonexistent").render(make_receipt(plant(fake_ledger(4), hostile, hostile + ".py")))
    )
    assert (got.tags, sorted(set(got.attrs))) == _benign_structure()


def test_ten_thousand_calls_stay_under_five_megabytes_with_exact_totals():
    r = make_receipt(fake_ledger(10_000, first_calls=10_000, call_cap=10_000))
    assert len(r.ledger.calls) == 10_000
    html = HtmlRenderer(source_root="/nonexistent").render(r)
    assert len(html.encode()) < 5_000_000
    tags = parse(html)
    assert len(tags.calls) == 200
    steady = r.summary.phases[1]
    assert steady.phase == "steady" and steady.calls == 9_998
    row = re.search(r'<td class="phase-steady">steady</td><td>(\d+)</td>', html)
    assert row is not None and row.group(1) == "9998"


def test_write_html_report_writes_index_beside_the_receipt(tmp_path):
    path = write_html_report(fake_receipt(), tmp_path)
    assert path == str(tmp_path / "index.html")
    assert (tmp_path / "index.html").read_text().startswith("<!DOCTYPE html>")
    assert [p.name for p in tmp_path.iterdir()] == ["index.html"]
