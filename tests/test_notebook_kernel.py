"""A real Jupyter kernel (nbclient, ipykernel): the ``%%seamscope`` output's ``text/plain`` part,
what jupyter console, nbconvert to text and notebook diffs show, is plain text. ipykernel sets
``FORCE_COLOR=1``; no escape sequence may reach the text anyway, and sentences are not hard-wrapped."""

from __future__ import annotations

import os

import pytest

nbclient = pytest.importorskip("nbclient")
nbformat = pytest.importorskip("nbformat")
pytest.importorskip("ipykernel")
pytest.importorskip("torch")

pytestmark = pytest.mark.torch

CELL = """%%seamscope --out nb-out
import torch
def f(x):
    print("side effect")
    return torch.sin(x) + 1
cf = torch.compile(f, backend="eager")
for n in (4, 4, 8):
    cf(torch.ones(n))
"""


@pytest.fixture(scope="module")
def output(tmp_path_factory):
    d = tmp_path_factory.mktemp("nb")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("%load_ext seamscope"), nbformat.v4.new_code_cell(CELL)]
    env_path = os.environ.get("PYTHONPATH", "")
    src = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
    os.environ["PYTHONPATH"] = src + (os.pathsep + env_path if env_path else "")  # the kernel imports this tree
    try:
        nbclient.NotebookClient(nb, timeout=240, kernel_name="python3", resources={"metadata": {"path": str(d)}}).execute()
    finally:
        os.environ["PYTHONPATH"] = env_path
    (bundle,) = [o for o in nb.cells[1].outputs if o.get("output_type") == "display_data"]
    return bundle["data"]


def test_the_cells_text_plain_has_no_escapes_and_no_hard_wraps(output):
    text = output["text/plain"]
    assert "seamscope" in text and "3 calls" in text
    assert "\x1b" not in text and not any(ord(ch) < 32 and ch not in "\n\t" for ch in text)
    lines = text.splitlines()
    assert all(ln == ln.rstrip() for ln in lines), "trailing spaces"
    # a finding's sentence is one line (the viewer wraps it), however long
    sentence = next(ln for ln in lines if "break B" in ln and "print" in ln)
    assert "is crossed" in sentence and len(sentence) > 100
    assert "text/html" in output
