"""The HTML report: one self-contained ``index.html`` (inline CSS and SVG, no script, no network).

It formats :class:`~seamscope.analyze.report_view.ReportView` with Jinja2, autoescape on: every
string from a trace or user code (reasons, file names, guard texts, source lines) is escaped. A
Content-Security-Policy that allows no script and no fetch is defence in depth, not the guard.
"""

from __future__ import annotations

import functools
import os

import jinja2
import markupsafe

from ..analyze.display import visible
from ..analyze.report_view import COMPILE_COLOUR, ReportView, build_view
from ..analyze.units import counted, fmt_pct
from ..model.receipt import Receipt
from . import write_rendered
from .terminal import fmt_ns

_TEMPLATES = os.path.join(os.path.dirname(__file__), "templates")


def _num(x: float | None) -> str:
    return "–" if x is None else f"{x:g}"


def _visible_text(value: object) -> object:
    """Every string the templates print, before it is escaped: control characters (NUL, ESC, C1)
    and bidi overrides as visible ``\\x1b`` / ``\\u202e`` text, as in the terminal
    (``analyze.display``). Escaping alone keeps them: NUL makes the file invalid HTML, U+202E
    reorders a name in the browser, ESC drives a terminal that ``cat``s the file. Markup the
    renderers built (already escaped) is left as it is."""
    if isinstance(value, str) and not isinstance(value, markupsafe.Markup):
        return visible(value)
    return value


@functools.cache
def environment() -> jinja2.Environment:
    """One per process: Jinja keeps each template it compiled (about 0.3 s for the report's) and
    compiles it again only when its file changed."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(_TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        finalize=_visible_text,
    )
    env.filters["ns"] = fmt_ns
    env.filters["counted"] = counted
    env.filters["num"] = _num
    env.filters["pct"] = fmt_pct
    return env


class HtmlRenderer:
    extension = ".html"

    def __init__(self, source_root: str | None = None, before: tuple[str, ...] = ()) -> None:
        """``before``: sections rendered elsewhere (already escaped HTML), shown above the overview:
        ``seamscope try`` puts its trials table there, in the report of the chosen run."""
        self.source_root = source_root
        self.before = before

    def render(self, receipt: Receipt) -> str:
        return self.render_view(build_view(receipt, self.source_root))

    def render_view(self, view: ReportView) -> str:
        tpl = environment().get_template("report.html.j2")
        return tpl.render(v=view, compile_colour=COMPILE_COLOUR, before=self.before)


def write_html_report(
    receipt: Receipt, out_dir: str | os.PathLike[str], source_root: str | None = None,
    before: tuple[str, ...] = (),
) -> str:
    """Write ``index.html`` into ``out_dir`` (beside ``receipt.json``); return its path."""
    return write_rendered(HtmlRenderer(source_root, before), receipt, out_dir, "index")
