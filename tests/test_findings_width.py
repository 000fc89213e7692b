"""Reports at 80 columns (a pipe, a CI log) keep the location of every site, frame and
compilation in full: a real run of the bundled demo and of a small ``transformers`` model."""

from __future__ import annotations

import contextlib
import io
import os

import pytest
from rich.console import Console

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from seamscope.capture.session import session  # noqa: E402
from seamscope.model.ledger import shown_frame  # noqa: E402
from seamscope.model.normalize import short_path  # noqa: E402
from seamscope.render.terminal import TerminalRenderer  # noqa: E402

pytestmark = [pytest.mark.torch]


def _observe(run) -> object:  # type: ignore[no-untyped-def]
    torch._dynamo.reset()
    with contextlib.redirect_stdout(open(os.devnull, "w")), session() as s:  # noqa: SIM115
        run()
    torch._dynamo.reset()
    return s.receipt()


def _bert_with_a_print() -> None:
    """The print in the embeddings' hook breaks the graph early: under half the Dynamo work of a
    print after the encoder layer, with the same kinds of locations (a break site in
    ``transformers/utils/output_capturing.py``, recompiled frames in ``modeling_bert.py``)."""
    cfg = transformers.BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                  intermediate_size=64)
    torch.manual_seed(0)
    model = transformers.BertModel(cfg).eval()
    model.embeddings.register_forward_hook(lambda m, a, out: print("embeddings done"))
    cm = torch.compile(model, backend="eager")
    with torch.no_grad():
        for n in (8, 12):
            cm(input_ids=torch.randint(0, 100, (1, n)))


@pytest.fixture(scope="module")
def receipts():
    from seamscope.examples.decoder import main

    return {"demo": _observe(main), "bert": _observe(_bert_with_a_print)}


def _at(receipt, width: int) -> str:  # type: ignore[no-untyped-def]
    buf = io.StringIO()
    TerminalRenderer(Console(file=buf, width=width, color_system=None, highlight=False, emoji=False)).print(receipt)
    return buf.getvalue()


@pytest.mark.parametrize("name", ["demo", "bert"])
@pytest.mark.parametrize("width", [80, 60])
def test_every_location_is_printed_in_full_at_a_narrow_width(receipts, name, width):
    r = receipts[name]
    s = r.summary
    assert s.break_sites and s.recompiles  # the run has what this test reads
    assert name == "demo" or any("transformers/" in b.file for b in s.break_sites)  # a long path among them
    text = _at(r, width)
    lines = text.splitlines()
    sites = [f"{b.file}:{b.line}" for b in s.break_sites]
    frames = ["{1}:{2}".format(*shown_frame(x)) for x in s.recompiles[:12]]
    for loc in sites + frames:
        assert any(loc in ln for ln in lines), f"{loc} is cut at {width} columns"
    # the compile-time table names each frame by its location, in full
    section = text.split("compile time by stage", 1)[1].split("findings ranked", 1)[0]
    for f in r.findings.compile_time.frames[:12]:
        u = f.user_frame
        file, line = (u.file, u.line) if u is not None else (f.file, f.line)
        assert f"{short_path(file)}:{line}" in section
    assert "chars)" not in text or "(+" in text  # a cut marker is never itself cut
    assert "…" not in "".join(ln for ln in lines if any(loc.split(":")[0][-20:] in ln for loc in sites))


def test_a_wide_console_keeps_the_table_with_locations_in_it(receipts):
    text = _at(receipts["demo"], 200)
    b = receipts["demo"].summary.break_sites[0]
    row = next(ln for ln in text.splitlines() if f"{b.file}:{b.line}" in ln)
    assert b.site_id in row and "│" in row  # one table row: the site, its location, its cells


def test_piped_output_without_columns_is_as_wide_as_the_locations_need(receipts, monkeypatch, capsys):
    monkeypatch.delenv("COLUMNS", raising=False)
    r = receipts["bert"]
    TerminalRenderer().print(r)  # stdout is captured: no terminal
    text = capsys.readouterr().out
    b = r.summary.break_sites[0]
    row = next(ln for ln in text.splitlines() if f"{b.file}:{b.line}" in ln)
    assert b.site_id in row and "│" in row  # a table row, wide enough for the location
    monkeypatch.setenv("COLUMNS", "80")
    TerminalRenderer().print(r)
    assert max(len(ln) for ln in capsys.readouterr().out.splitlines() if "│" in ln) <= 80


def test_frames_recompiling_from_one_input_change_are_one_finding_with_the_remedy_once(receipts):
    # GIVEN the demo: one change of the tokens' length recompiles six frames
    r = receipts["demo"]
    (cause,) = r.findings.causes
    assert len(cause.churn_finding_ids) >= 5
    text = _at(r, 100)
    section = text.split("recompiles by cause", 1)[1]
    # THEN the per-axis list holds the cause once, its remedy once, its frames beneath it
    remedies = [ln for ln in section.splitlines() if ln.startswith("     → ")]
    assert len(remedies) == 1 and section.count(cause.cause_id) == 1
    frames = {f.finding_id for f in r.findings.findings if f.axis == "churn"}
    assert all(fid in section for fid in frames)
    # and Dynamo's stack names are never the input to act on
    assert "on ___stack0" not in text and "of ___stack0" not in text
    from seamscope.analyze.report_view.findings import top_findings

    rows = [row for row in top_findings(r, ".") if row.kind == "recompiles"]
    assert len(rows) == 1 and rows[0].item_id == cause.cause_id
    assert len(rows[0].beneath) == len(cause.churn_finding_ids)
    assert rows[0].detail == cause.remedy.text
