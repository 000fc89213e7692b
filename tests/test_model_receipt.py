"""Receipts: schema, strict reading, one-line errors, and the torch-free core."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from seamscope.analyze.receipt import make_receipt
from seamscope.errors import UnusableInput
from seamscope.ingest.receipt import load_receipt
from seamscope.model.canonical import pretty_bytes
from seamscope.model.fake import FakeCall, FakeProgram, FakeStep, play
from seamscope.model.schema import schema_text
from seamscope.render.receipt_json import write_receipt_files

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _receipt():
    prog = FakeProgram(
        breaks={"0/0": "print"},
        calls=[FakeCall([FakeStep("compile", 50, "0/0"), FakeStep("region", 5, "0/0"), FakeStep("island", 2)])]
        + [FakeCall([FakeStep("region", 5, "0/0"), FakeStep("island", 2)])] * 3,
    )
    return make_receipt(play(prog).build())


def test_committed_schema_matches_the_model():
    with open(os.path.join(ROOT, "docs", "receipt.schema.json"), encoding="utf-8") as f:
        assert f.read() == schema_text(), "regenerate: python -m seamscope.model.schema"


def test_schema_validates_written_receipts(tmp_path):
    jsonschema = pytest.importorskip(
        "jsonschema", reason="jsonschema (a dev extra) is not installed: schema validation not checked"
    )
    path = write_receipt_files(_receipt(), tmp_path)
    with open(path) as f:
        doc = json.load(f)
    jsonschema.validate(doc, json.loads(schema_text()))
    doc["summary"]["call_count"] = "four"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, json.loads(schema_text()))


def test_write_is_atomic_and_reads_back(tmp_path):
    r = _receipt()
    path = write_receipt_files(r, tmp_path)
    assert load_receipt(path) == r
    assert load_receipt(tmp_path) == r  # a folder means its receipt.json
    assert sorted(os.listdir(tmp_path)) == ["calls.csv", "receipt.json"]  # no temp files left
    with open(tmp_path / "calls.csv") as f:
        rows = f.read().splitlines()
    assert len(rows) == 1 + 4 and rows[0].startswith("index,phase,outcome")


@pytest.mark.parametrize(
    "mangle, message",
    [
        (lambda b: b[: len(b) // 2], "not valid JSON"),
        (lambda b: b.replace(b'"kind"', b'"kind" oops', 1), "not valid JSON"),
        (lambda b: b.replace(b'"schema_version": 1', b'"schema_version": 99', 1), "schema version 99"),
        (lambda b: b.replace(b'"call_count": 4', b'"call_count": "x"', 1), "does not match the receipt schema"),
        (lambda b: b"[]", "not a seamscope receipt"),
        # a field this reader does not know: a newer seamscope wrote it, and the line says so
        (lambda b: b.replace(b'"call_count": 4', b'"call_count": 4, "added_later": 1', 1),
         r"unknown field .*written by seamscope \S+; this is seamscope \S+: upgrade to read it"),
    ],
)
def test_bad_receipts_give_one_line_and_exit_2(tmp_path, mangle, message):
    data = pretty_bytes(_receipt())
    bad = tmp_path / "receipt.json"
    bad.write_bytes(mangle(data))
    with pytest.raises(UnusableInput, match=message):
        load_receipt(bad)
    proc = subprocess.run(
        [sys.executable, "-m", "seamscope", "summary", str(bad)], capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and str(bad) in proc.stderr and "Traceback" not in proc.stderr


def test_missing_receipt_exit_2(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "seamscope", "summary", str(tmp_path / "nope.json")], capture_output=True, text=True
    )
    assert proc.returncode == 2 and "no such file" in proc.stderr


TORCH_FREE = r"""
import sys
class NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ImportError("torch is not installed here")
sys.meta_path.insert(0, NoTorch())
try:
    import torch
except ImportError:
    pass
else:
    raise SystemExit("torch imported")
import seamscope
from seamscope.model.fake import FakeCall, FakeProgram, FakeStep, play
from seamscope.analyze.receipt import make_receipt
from seamscope.render.receipt_json import write_receipt_files
from seamscope.ingest.receipt import load_receipt
from seamscope.ingest import compile_events
from seamscope.render.terminal import TerminalRenderer
r = make_receipt(play(FakeProgram(calls=[FakeCall([FakeStep("region", 5)])])).build())
p = write_receipt_files(r, sys.argv[1])
assert load_receipt(p) == r
TerminalRenderer().print(r)
assert not any(m == "torch" or m.startswith("torch.") for m in sys.modules), "torch got imported"
print("TORCH-FREE-OK")
"""


def test_core_works_without_torch(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-c", TORCH_FREE, str(tmp_path)], capture_output=True, text=True, cwd=tmp_path
    )
    assert "TORCH-FREE-OK" in proc.stdout, proc.stderr
