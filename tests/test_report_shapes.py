"""The shape study in the HTML report : the shape study's plot drawn as inline SVG.

GIVEN a hand-built ``ShapeStudy`` section, WHEN the report is rendered, THEN each chart has one
polyline per policy with one point per call (one per first-seen length for memory), latency dots
are coloured cold/warm, the recommendation and per-policy table show, and policy names stay text.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

import msgspec
from fakes import SHAPE_TRACE, XSS_IMG, XSS_SCRIPT, fake_ledger, shape_policy, shape_study

from seamscope.analyze.receipt import make_receipt
from seamscope.analyze.report_view import (
    MAX_SHAPE_POINTS,
    PLOT_X0,
    PLOT_X1,
    PLOT_Y0,
    PLOT_Y1,
    SHAPE_PHASES,
    build_view,
)
from seamscope.model.shapes import (
    PolicyResult,
    ShapeCall,
    ShapeSpec,
    ShapeStudy,
)
from seamscope.render.html import HtmlRenderer


def receipt_with(s: ShapeStudy):
    return make_receipt(fake_ledger(), shapes=s)


class Charts(HTMLParser):
    """Per chart: per policy line, its polyline points and its dots' classes."""

    def __init__(self) -> None:
        super().__init__()
        self.charts: dict[str, dict[str, dict[str, list[str]]]] = {}
        self.tags: list[str] = []
        self._chart: str | None = None
        self._policy: str | None = None

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        a = dict(attrs)
        if tag == "svg" and "data-chart" in a:
            self._chart = a["data-chart"]
            self.charts[self._chart] = {}
        elif tag == "g" and self._chart and "data-policy" in a:
            self._policy = a["data-policy"]
            self.charts[self._chart][self._policy] = {"points": [], "dots": []}
        elif tag == "polyline" and self._chart and self._policy is not None:
            line = self.charts[self._chart][self._policy]
            line["points"] = (a.get("points") or "").split()
            line["n"] = [a.get("data-points") or ""]
        elif tag == "circle" and self._chart and self._policy is not None:
            self.charts[self._chart][self._policy]["dots"].append(a.get("class") or "")

    def handle_endtag(self, tag):
        if tag == "svg":
            self._chart = None
        elif tag == "g":
            self._policy = None


def charts(html: str) -> Charts:
    c = Charts()
    c.feed(html)
    return c


def test_one_polyline_per_policy_with_one_point_per_call():
    pols = [shape_policy("auto", "auto"), shape_policy("pow2", "pow2", pad=True), shape_policy("static", "static")]
    r = receipt_with(shape_study(*pols))
    c = charts(HtmlRenderer(source_root="/nonexistent").render(r))
    assert sorted(c.charts) == ["latency", "memory", "variants"]
    def xs(line):  # variants and memory are steps: one x per figure, a corner where it changes
        return sorted({float(pt.split(",")[0]) for pt in line["points"]})

    for key in ("variants", "latency"):
        assert list(c.charts[key]) == ["auto", "pow2", "static"]
        for p in pols:
            line = c.charts[key][p.policy]
            assert len(xs(line)) == len(p.calls) == len(SHAPE_TRACE) and line["n"] == [str(len(SHAPE_TRACE))]
    for p in pols:
        line = c.charts["latency"][p.policy]
        assert len(line["points"]) == len(p.calls)
        # latency dots: one per call, coloured by its phase
        assert [d.split()[1] for d in line["dots"]] == [x.phase for x in p.calls]
        mem = c.charts["memory"][p.policy]
        assert len(xs(mem)) == len(p.memory) == len(mem["dots"]) and mem["n"] == [str(len(p.memory))]
    assert c.charts["variants"]["auto"]["dots"] == []
    # a step line: auto's variants go 1, 2, 2, 3, 3, 3 -> a corner before each of the two rises
    assert len(c.charts["variants"]["auto"]["points"]) == len(SHAPE_TRACE) + 2
    assert len(c.charts["variants"]["pow2"]["points"]) == len(SHAPE_TRACE)


def test_coordinates_follow_the_figures():
    auto, pow2 = shape_policy("auto", "auto"), shape_policy("pow2", "pow2", pad=True)
    v = build_view(receipt_with(shape_study(auto, pow2)), source_root="/nonexistent").shapes
    by = {ch.key: {ln.policy: ln for ln in ch.lines} for ch in v.charts}

    def xy(points):
        return [tuple(map(float, p.split(","))) for p in points.split()]

    # variants: auto reaches 3 (the top of the box), pow2 stays at 1 (a third of the way up)
    a, p = xy(by["variants"]["auto"].points), xy(by["variants"]["pow2"].points)
    assert [x for x, _ in a] == sorted(x for x, _ in a) and a[0][0] == PLOT_X0 and a[-1][0] == PLOT_X1
    assert a[-1][1] == PLOT_Y0
    assert p[-1][1] == round(PLOT_Y1 - (PLOT_Y1 - PLOT_Y0) / 3, 2)
    # latency, log scale: the slowest call at the top, the fastest at the bottom; cold dots are red
    lat = [y for ln in by["latency"].values() for _, y in xy(ln.points)]
    assert min(lat) == PLOT_Y0 and max(lat) == PLOT_Y1
    cold = dict((k, c) for k, c, _ in SHAPE_PHASES)["cold"]
    dots = by["latency"]["auto"].dots
    assert [d.colour == cold for d in dots] == [c.phase == "cold" for c in auto.calls]
    assert "length 8 (padded to 16)" in by["latency"]["pow2"].dots[1].tip
    # memory: RSS rises with the variants
    m = xy(by["memory"]["auto"].points)
    assert [y for _, y in m] == sorted((y for _, y in m), reverse=True)
    # the table carries the totals and marks the recommended policy
    assert [(row.policy, row.recommended, row.padding_pct) for row in v.policies] == [
        ("auto", True, 0.0),
        ("pow2", False, 25.0),
    ]
    assert v.policies[0].total_ns == auto.total_ns


def test_recommendation_table_and_policy_names_are_escaped():
    evil = shape_policy("buckets:" + XSS_SCRIPT, "buckets")
    s = shape_study(shape_policy("auto", "auto"), evil, text="auto wins; " + XSS_IMG)
    s = msgspec.structs.replace(s, warnings=[XSS_SCRIPT])
    html = HtmlRenderer(source_root="/nonexistent").render(receipt_with(s))
    c = charts(html)
    assert "script" not in c.tags and "img" not in c.tags
    assert "buckets:" + XSS_SCRIPT in c.charts["variants"]  # the attribute, parsed back, is the name as text
    assert "&lt;script&gt;window.__seamscope_pwned = 1&lt;/script&gt;" in html
    section = html[html.index('id="section-shapes"'):]
    section = section[: section.index("</section>")]
    assert "<strong>Recommendation:</strong> auto wins; &#34;&gt;&lt;img" in section
    assert "never recommended: pow2: outputs differ from unpadded eager" in section
    assert len(re.findall(r'<tr class="policy', section)) == 2
    assert "Not in this receipt." not in section


def test_long_traces_are_thinned_but_keep_every_cold_call():
    n = 3 * MAX_SHAPE_POINTS
    calls = [
        ShapeCall(
            index=i,
            length=4,
            padded_length=4,
            phase="cold" if i % 100 == 0 else "steady",
            outcome="compile" if i % 100 == 0 else "hit",
            latency_ns=1000 + i,
            compiled_variants=1 + i // 100,
        )
        for i in range(n)
    ]
    p = PolicyResult(policy="auto", kind="auto", compile_options={}, status="ok", calls=calls)
    spec = ShapeSpec(workload="w.py:f", backend="eager", dim=1, trace=[4] * n, repeat=1, policies=["auto"])
    v = build_view(receipt_with(ShapeStudy(spec=spec, policies=[p], recommendation=None, wall_ns=1)),
                   source_root="/nonexistent").shapes
    lat = next(ch for ch in v.charts if ch.key == "latency").lines[0]
    assert lat.n_points == MAX_SHAPE_POINTS == len(lat.points.split()) == len(lat.dots)
    assert sum(d.phase == "cold" for d in lat.dots) == n // 100
    assert "drawn" in next(ch for ch in v.charts if ch.key == "variants").note
    assert v.recommendation == "no recommendation recorded"
    mem = next(ch for ch in v.charts if ch.key == "memory")
    assert mem.lines == [] and mem.note == "no memory measured"


def test_absent_study_keeps_the_section_absent():
    v = build_view(make_receipt(fake_ledger()), source_root="/nonexistent")
    assert not v.shapes.present
    html = HtmlRenderer(source_root="/nonexistent").render(make_receipt(fake_ledger()))
    section = html[html.index('id="section-shapes"'):]
    assert "Not in this receipt." in section[: section.index("</section>")]
    assert 'data-chart="' not in html
