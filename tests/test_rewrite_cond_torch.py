"""``tensor-cond`` on a script written for it (real torch, backend "eager"): an ``if x.sum() > 0:``
with two statements a branch breaks the graph on every call; ``try`` proposes ``torch.cond``, the
patch applies, the patched run has no break at that line and its outputs equal the baseline's and
eager's; run directly, PyTorch's own counters see no break with "eager" or "aot_eager"."""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess

import pytest
from fakes import seamscope_here

pytest.importorskip("torch")
pytestmark = [pytest.mark.torch]

SCRIPT = "cond_branch.py"
W = os.path.join(os.path.dirname(os.path.abspath(__file__)), "workloads", "patches")
GIT = shutil.which("git")


def load(path):
    with open(path) as f:
        return json.load(f)


@pytest.fixture(scope="module")
def cond_trial(tmp_path_factory, fresh_server):
    d = tmp_path_factory.mktemp("cond")
    shutil.copy(os.path.join(W, SCRIPT), d / SCRIPT)
    p = seamscope_here(["try", "--quiet", "--out", "o", "--repeat", "1", "--max-repeat", "1", "--only", "tensor-cond",
                        SCRIPT], d)
    assert p.returncode == 0, p.stderr
    return d, load(d / "o" / "trials.json")


def _sites(receipt):
    """The break sites of the script (named relative to its folder, or in full)."""
    return {s["line"] for s in load(receipt)["ledger"]["break_sites"] if os.path.basename(s["file"]) == SCRIPT}


@pytest.mark.timeout(1200)
@pytest.mark.skipif(GIT is None, reason="git is not installed")
def test_an_if_with_two_statements_a_branch_becomes_torch_cond_and_its_break_is_gone(cond_trial, tmp_path):
    d, t = cond_trial
    (c,) = t["candidates"]
    assert c["name"] == "tensor-cond" and c["origin"][:1] == "B" and c["review"] and c["flags"] == []  # its break
    assert f"--patch {c['patch']}" in c["command"]  # its runs applied the diff
    assert "+    def _then_8(y):\n" in c["diff"] and "+    def _else_8(y):\n" in c["diff"]
    assert "+    t, y = torch.cond(x.sum() > 0, _then_8, _else_8, (y,))\n" in c["diff"]
    assert _sites(d / "o" / "trials" / "baseline" / "rep-1" / "receipt.json") == {8}  # the baseline broke there
    for rep in c["runs"]:
        assert _sites(d / "o" / "trials" / "tensor-cond" / rep["label"] / "receipt.json") == set()
    assert c["outputs"]["status"] == "equal" and c["outputs"]["vs_eager"] == "equal"
    shutil.copy(d / SCRIPT, tmp_path / SCRIPT)
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run(["git", "apply", "--check", str(d / c["patch"])], cwd=tmp_path, check=True)
    subprocess.run(["git", "apply", str(d / c["patch"])], cwd=tmp_path, check=True)
    ast.parse((tmp_path / SCRIPT).read_text())


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_the_patched_script_runs_without_a_break_by_pytorchs_counters(cond_trial, backend, dynamo_reset):
    import torch

    d, t = cond_trial
    from seamscope.experiments.unified_diff import apply, parse

    text = (d / SCRIPT).read_text()
    patched = apply(text, parse(t["candidates"][0]["diff"])[0])
    counters = torch._dynamo.utils.counters
    found = {}
    for label, src in (("original", text), ("patched", patched)):
        torch._dynamo.reset()
        counters.clear()
        ns: dict = {"__name__": "cond_branch_" + label}
        exec(compile(src.replace('backend="eager"', f'backend="{backend}"'), SCRIPT, "exec"), ns)
        # 2.13 counts a data-dependent branch under "unimplemented", not "graph_break"
        breaks = sum(counters["graph_break"].values()) + sum(counters["unimplemented"].values())
        found[label] = (breaks, dict(counters["resumes"]), counters["stats"]["unique_graphs"], ns)
    assert found["original"][0] >= 1 and found["original"][1] and found["original"][2] > 1
    assert found["patched"][:3] == (0, {}, 1)
    compiled, plain = found["patched"][3]["f"], found["original"][3]["step"]
    torch.manual_seed(0)
    taken = set()
    for i in range(4):
        x = torch.randn(16) + (1 if i % 2 else -1)
        taken.add(bool(x.sum() > 0))
        assert torch.allclose(compiled(x), plain(x))
    assert taken == {True, False}
