"""A Python number that changes every call, passed as a 0-d tensor (real torch, backend "eager").

``try`` on a script whose float argument takes a new value each call proposes ``tensor-scalar-scale``:
its patch applies with ``git apply``, the patched run recompiles less with outputs equal, and a copy
with the patch applied runs with the candidate's counts. An int, from a real receipt's guard, gets
the same rewrite, its patched source one graph by PyTorch's own counters.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess

import pytest
from fakes import seamscope_forked, seamscope_here
from trial_checks import metric_median, run_patched

pytest.importorskip("torch")
pytestmark = [pytest.mark.torch]

W = os.path.join(os.path.dirname(os.path.abspath(__file__)), "workloads", "patches")
GIT = shutil.which("git")


def load(path):
    with open(path) as f:
        return json.load(f)


@pytest.fixture(scope="module")
def scalar_trial(tmp_path_factory, fresh_server):
    d = tmp_path_factory.mktemp("scalar")
    shutil.copy(os.path.join(W, "scalar_scale.py"), d / "scalar_scale.py")
    p = seamscope_here(["try", "--quiet", "--out", "o", "--repeat", "1", "--max-repeat", "1", "--only",
                        "tensor-scalar", "scalar_scale.py"], d)
    assert p.returncode == 0, p.stderr
    return d, load(d / "o" / "trials.json")


@pytest.mark.timeout(1200)
@pytest.mark.skipif(GIT is None, reason="git is not installed")
def test_a_float_that_changes_every_call_is_passed_as_a_tensor_with_fewer_recompiles(scalar_trial, tmp_path,
                                                                                     fresh_server):
    d, t = scalar_trial
    (c,) = t["candidates"]
    assert c["name"] == "tensor-scalar-scale" and c["flags"] == [] and "0-d tensor" in c["review"]
    assert "+    scale = torch.as_tensor(scale, dtype=torch.result_type(x, scale), device=x.device)\n" \
           "+    return _step_compiled(x, scale)\n" in c["diff"]
    assert f"--patch {c['patch']}" in c["command"]  # its runs applied the diff
    assert metric_median(t["baseline"], "recompiles") >= 1 and metric_median(c, "recompiles") == 0
    assert c["outputs"]["status"] == "equal"
    copy = tmp_path / "copy"
    copy.mkdir()
    shutil.copy(d / "scalar_scale.py", copy / "scalar_scale.py")
    subprocess.run(["git", "init", "-q"], cwd=copy, check=True)
    subprocess.run(["git", "apply", "--check", str(d / c["patch"])], cwd=copy, check=True)
    subprocess.run(["git", "apply", str(d / c["patch"])], cwd=copy, check=True)
    ast.parse((copy / "scalar_scale.py").read_text())
    r = seamscope_forked(fresh_server, ["run", "--quiet", "--no-html", "--out", "r", "--seed", "0", "scalar_scale.py"],
                         copy)
    assert r.returncode == 0, r.stderr
    got = load(copy / "r" / "receipt.json")["summary"]
    run = c["runs"][0]
    assert (got["call_count"], got["recompile_count"], got["compile_count"]) == (run["calls"], run["recompiles"], 1)


def test_an_int_guarded_by_value_gets_the_rewrite_and_one_graph(tmp_path, monkeypatch, dynamo_reset):
    """The guard of a real run on an int (``n == 2``) names it; the patched script compiles one
    graph by PyTorch's own counters, where the script as it is compiled two."""
    from seamscope.experiments.trials.rewrites import rewrites
    from seamscope.experiments.unified_diff import apply, parse
    from seamscope.ingest.receipt import load_receipt

    text = ("import torch\n\n\ndef step(x, n):\n    y = x * n\n    return -(y ** 2) / n\n\n\n"
            "f = torch.compile(step, backend='eager', dynamic=False)\nx = torch.randn(4, 4)\nout = []\n"
            "for i in range(6):\n    out.append(f(x, i + 2))\n")
    (tmp_path / "ints.py").write_text(text)
    monkeypatch.chdir(tmp_path)
    base = run_patched("ints.py", [], tmp_path / "b")
    (d,) = [d for d in rewrites(load_receipt(str(tmp_path / "b" / "receipt.json")), "ints.py")
            if d.name.startswith("tensor-scalar")]
    assert d.name == "tensor-scalar-n" and "Python int" in (d.change or "")
    (tmp_path / "copy").mkdir()
    (tmp_path / "copy" / "ints.py").write_text(apply(text, parse(d.diff or "")[0]))
    patched = run_patched(str(tmp_path / "copy" / "ints.py"), [], tmp_path / "p")
    # (compilations, recompiles, break sites, PyTorch's unique graphs)
    assert base[1] == 5 and base[3] == 6 and patched == (1, 0, 0, 1)
