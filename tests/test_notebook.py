"""Notebooks: a receipt, a ledger and a session show the report's overview and top findings
(IPython's HTML formatter, the same view model as the HTML report), and ``%load_ext seamscope`` gives the
``%%seamscope`` cell magic (run in a real IPython shell; skipped where IPython is not installed)."""

from __future__ import annotations

import re

import msgspec
import pytest
from fakes import XSS_SCRIPT, fake_ledger, fake_receipt, plant

from seamscope.analyze.receipt import make_receipt
from seamscope.render.html import HtmlRenderer
from seamscope.render.notebook import NOTEBOOK_FINDINGS, ledger_html, notebook_html

ID_PREFIX = re.compile(r'id="seamscope-[0-9a-f]{8}-\d+-')


def unprefixed(html: str) -> str:
    """A notebook view with its element ids as the HTML report has them."""
    return ID_PREFIX.sub('id="', html)


def section(html: str, sid: str) -> str:
    m = re.search(rf'<section id="{sid}">.*?</section>', unprefixed(html), re.S)
    assert m, sid
    return m.group(0)


def test_a_receipt_shows_the_reports_overview_and_top_findings() -> None:
    receipt = fake_receipt(12)
    nb = notebook_html(receipt)
    report = HtmlRenderer("/nonexistent").render(receipt)
    assert section(nb, "overview") == section(report, "overview")
    found = re.findall(r'<li class="finding', section(nb, "top-findings"))
    assert 1 <= len(found) <= NOTEBOOK_FINDINGS
    assert "<html" not in nb and "<body" not in nb and nb.lstrip().startswith('<div class="seamscope-nb">')
    assert "<script" not in nb


def test_a_ledger_shows_the_same_view_as_its_receipt() -> None:
    led = fake_ledger(6)
    assert unprefixed(ledger_html(led)) == unprefixed(notebook_html(make_receipt(led)))


def test_element_ids_are_unique_across_the_outputs_of_one_notebook() -> None:
    receipt = fake_receipt(6)
    pages = [notebook_html(receipt), notebook_html(receipt), notebook_html(fake_receipt(12))]
    ids = [i for page in pages for i in re.findall(r'\bid="([^"]+)"', page)]
    assert len(ids) >= 3 * 4 and len(ids) == len(set(ids))
    assert 'id="overview"' in HtmlRenderer("/nonexistent").render(receipt)  # the report keeps its own


def test_the_notebook_header_names_what_ran_once() -> None:
    led = fake_ledger(6)
    led = msgspec.structs.replace(led, run=msgspec.structs.replace(led.run, command=["%%seamscope", "--quiet"]))
    nb = notebook_html(make_receipt(led))
    assert "<strong>seamscope</strong> · %%seamscope" in nb and "seamscope report" not in nb


def test_planted_markup_is_escaped_in_the_notebook_view() -> None:
    receipt = make_receipt(plant(fake_ledger(6), XSS_SCRIPT, "evil.py"))
    nb = notebook_html(receipt)
    assert XSS_SCRIPT not in nb and "&lt;script&gt;" in nb


@pytest.mark.torch
def test_a_session_shows_itself_open_and_closed(dynamo_reset: None) -> None:
    torch = pytest.importorskip("torch")
    from seamscope.capture.session import session

    s = session()
    assert "not started" in s._repr_html_()
    with s:
        f = torch.compile(lambda x: x.sin() + 1, backend="eager")
        f(torch.ones(3))
        f(torch.ones(3))
        open_view = s._repr_html_()
    assert "open: so far" in open_view
    closed = s._repr_html_()
    assert "open: so far" not in closed
    assert section(closed, "overview") == section(notebook_html(make_receipt(s.ledger)), "overview")
    assert '<div class="num">2</div><div class="lbl">calls</div>' in closed


# --- the cell magic, in a real IPython shell ------------------------------------------------------


@pytest.fixture
def shell():
    pytest.importorskip("IPython", reason="IPython (a dev extra) is not installed: the magics need it")
    from IPython.core.interactiveshell import InteractiveShell

    sh = InteractiveShell.instance()
    sh.run_line_magic("load_ext", "seamscope")
    yield sh


@pytest.fixture
def displayed(monkeypatch):
    """What the magic displays below the cell (the mime bundle)."""
    import IPython.display

    seen: list[dict] = []

    def display(obj, raw=False, **kw):
        seen.append(obj)

    monkeypatch.setattr(IPython.display, "display", display)
    return seen


CELL = """
import torch
@torch.compile(backend="eager")
def g(x):
    y = x.cos()
    print("", end="")
    return y + 1
for _ in range(3):
    g(torch.ones(4))
"""


@pytest.mark.torch
def test_cell_magic_observes_the_cell_and_shows_the_summary(shell, displayed, tmp_path, dynamo_reset):
    pytest.importorskip("torch")
    out = tmp_path / "o"
    shell.run_cell_magic("seamscope", f"--out {out} --note 'a cell'", CELL)
    s = shell.user_ns["_seamscope"]
    assert s.ledger.totals.calls == 3 and not s.active
    assert (out / "receipt.json").exists()
    assert s.last_receipt.decision.note == "a cell"
    (bundle,) = displayed
    assert "3 calls" in bundle["text/plain"] and "wrote" in bundle["text/plain"]
    assert section(bundle["text/html"], "overview") == section(notebook_html(s.last_receipt), "overview")
    # a function compiled in an earlier cell is observed in the next one
    shell.run_cell_magic("seamscope", f"--out {out} --quiet", "g(torch.ones(4))\ng(torch.ones(4))")
    assert shell.user_ns["_seamscope"].ledger.totals.calls == 2
    assert shell.user_ns["_seamscope"].ledger.run.status.state == "completed"
    assert len(displayed) == 1  # --quiet: nothing shown


MODEL = """
import torch
net = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
step = torch.compile(net, backend=BACKEND)
x = torch.randn(4, 8)
"""
STEPS = """
for _ in range(3):
    out = step(x)
    out.sum().backward()
"""


def _regions(call) -> int:
    return sum(1 for e in call.events if type(e).__name__ == "RegionEvent")


@pytest.mark.torch
@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_a_cell_run_again_times_the_model_compiled_the_first_time(shell, displayed, tmp_path, dynamo_reset, backend):
    """Re-running a cell: the second ``%%seamscope`` over the model the first one compiled shows
    the same regions per call as the first's steady calls, and a split that is not all islands."""
    shell.run_cell(MODEL.replace("BACKEND", repr(backend)))
    ledgers, bundles = [], []
    for k in range(2):
        shell.run_cell_magic("seamscope", f"--out {tmp_path / str(k)}", STEPS)
        ledgers.append(shell.user_ns["_seamscope"].ledger)
        bundles.append(displayed[-1])
    first, second = ledgers
    steady = [_regions(c) for c in first.calls if c.phase == "steady"]
    assert steady == [1, 1] and [_regions(c) for c in second.calls] == [1, 1, 1]
    assert [c.phase for c in second.calls] == ["steady"] * 3
    receipt = shell.user_ns["_seamscope"].last_receipt
    split = receipt.findings.headline.split[0]
    assert 0 < split.region_ns and split.island_ns < split.wall_ns
    text = bundles[1]["text/plain"]
    assert "100% eager islands" not in text and "0 ns (0%) compiled regions" not in text
    assert "timed as regions" in text  # the graphs were compiled in the first cell: said once


@pytest.mark.torch
def test_in_a_jupyter_kernel_the_summary_is_shown_once(shell, displayed, tmp_path, dynamo_reset, monkeypatch):
    """rich, in a Jupyter kernel, displays what it prints itself (whatever file it was given):
    the terminal summary must stay in the text/plain part of the one output."""
    import rich.console

    monkeypatch.setattr(rich.console, "_is_jupyter", lambda: True)
    shell.run_cell_magic("seamscope", f"--out {tmp_path / 'o'}", CELL)
    assert len(displayed) == 1
    assert "3 calls" in displayed[0]["text/plain"]


@pytest.mark.torch
def test_cell_magic_bad_options_and_a_cell_that_raises(shell, displayed, tmp_path, dynamo_reset, capsys):
    pytest.importorskip("torch")
    from IPython.core.error import UsageError

    with pytest.raises(UsageError, match="No such option.*--bogus"):
        from seamscope.magics import run_cell

        run_cell(shell, "--bogus", "pass")
    shell.run_cell("%%seamscope --bogus\npass")  # in the shell: one line, no traceback
    err = capsys.readouterr()
    assert "--bogus" in err.err + err.out and "Traceback" not in err.err + err.out
    shell.run_cell_magic("seamscope", f"--out {tmp_path / 'o'}", CELL + "\nraise ValueError('cell failed')")
    s = shell.user_ns["_seamscope"]
    assert s.ledger.totals.calls == 3 and not s.active
    assert "the cell raised" in displayed[-1]["text/plain"]
    assert s.ledger.run.status.state == "raised" and s.ledger.run.status.detail == "ValueError: cell failed"
    assert "run raised ValueError: cell failed" in displayed[-1]["text/plain"]
    (tmp_path / "afile").write_text("x")
    with pytest.raises(UsageError, match="afile/sub: cannot write"):  # before the cell runs
        run_cell(shell, f"--out {tmp_path / 'afile' / 'sub'}", "ran = True")
    assert "ran" not in shell.user_ns


def test_a_shell_displays_receipts_and_ledgers_as_the_overview(shell) -> None:
    """IPython's own HTML formatter shows a receipt and a ledger (registered by name, so the data
    model holds no display code); a shell that started before ``import seamscope`` is covered by
    ``%load_ext seamscope``, one that started after by the import itself."""
    import seamscope

    receipt, led = fake_receipt(6), fake_ledger(6)
    html = shell.display_formatter.formatters["text/html"]
    html.type_printers.clear()
    html.deferred_printers.clear()
    assert html(receipt) is None  # nothing registered: IPython would show the text repr
    seamscope._show_in_notebooks()  # as ``import seamscope`` does in a running shell
    assert unprefixed(html(receipt)) == unprefixed(notebook_html(receipt))
    assert unprefixed(html(led)) == unprefixed(ledger_html(led))
