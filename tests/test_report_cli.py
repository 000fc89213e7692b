"""``seamscope report``: outputs, bad input, and nothing half-written."""

from __future__ import annotations

import json
import os

import pytest
from fakes import fake_receipt

from seamscope.cli import main
from seamscope.render.receipt_json import write_receipt_files


def run(argv: list[str]) -> int:
    with pytest.raises(SystemExit) as e:
        main(argv)
    return int(e.value.code)


@pytest.fixture
def receipt_dir(tmp_path):
    d = tmp_path / "run"
    write_receipt_files(fake_receipt(), d)
    return d


def test_report_writes_html_perfetto_and_markdown(receipt_dir, tmp_path, capsys):
    assert run(["report", str(receipt_dir), "--perfetto", str(tmp_path / "t.json"),
                "--markdown", str(tmp_path / "s.md")]) == 0
    assert (receipt_dir / "index.html").read_text().startswith("<!DOCTYPE html>")
    assert json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    assert "8 calls" in (tmp_path / "s.md").read_text()
    assert "wrote" in capsys.readouterr().out


def test_report_out_dir_and_baseline(receipt_dir, tmp_path):
    out = tmp_path / "html"
    assert run(["report", str(receipt_dir / "receipt.json"), "--out", str(out),
                "--markdown", str(out / "s.md"), "--baseline", str(receipt_dir)]) == 0
    assert (out / "index.html").exists()
    assert "**Verdict**" in (out / "s.md").read_text()


def test_other_schema_version_exits_2(receipt_dir, capsys):
    p = receipt_dir / "receipt.json"
    data = json.loads(p.read_text())
    data["schema_version"] = 999
    p.write_text(json.dumps(data))
    assert run(["report", str(receipt_dir)]) == 2
    assert "schema version 999" in capsys.readouterr().err
    assert not (receipt_dir / "index.html").exists()


def test_unwritable_output_exits_2_and_writes_nothing(receipt_dir, tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    # --out under a regular file cannot be created; the Perfetto file must not appear either
    assert run(["report", str(receipt_dir), "--out", str(blocker / "sub"),
                "--perfetto", str(tmp_path / "t.json")]) == 2
    err = capsys.readouterr().err
    assert "cannot write" in err and "Traceback" not in err
    assert not (tmp_path / "t.json").exists()
    # a markdown path that is a folder: refused before anything is written
    assert run(["report", str(receipt_dir), "--markdown", str(tmp_path)]) == 2
    assert not (receipt_dir / "index.html").exists()
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".tmp-")]


def test_missing_receipt_exits_2(tmp_path, capsys):
    assert run(["report", str(tmp_path / "nope")]) == 2
    assert "no such file" in capsys.readouterr().err
