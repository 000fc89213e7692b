"""``seamscope check`` against a baseline from real ``seamscope run`` runs (backend eager).

The script stays byte-identical (same input trace); the model it imports changes, as in CI.
Three runs (baseline, unchanged, planted break) go in parallel to pay the torch import once in
wall time.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from seamscope.cli import main
from seamscope.ingest.receipt import load_receipt

SCRIPT = """\
import torch
from mymodel import forward

f = torch.compile(forward, backend="eager")
for _ in range(4):
    f(torch.ones(8))
"""

MODEL = """\
import torch


def log(x):
    print("shape", tuple(x.shape))


def forward(x):
    y = x.sin() * 2
    log(y)
    y = y.cos() + 1
    return y - 3
"""

PLANTED = MODEL.replace("    y = y.cos() + 1\n", "    y = y.cos() + 1\n    print('debug')\n")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("check_run")
    procs = {}
    for name, model in (("baseline", MODEL), ("same", MODEL), ("planted", PLANTED)):
        d = root / name
        d.mkdir()
        (d / "run_model.py").write_text(SCRIPT)
        (d / "mymodel.py").write_text(model)
        procs[name] = subprocess.Popen(
            [sys.executable, "-m", "seamscope", "run", "--out", "out", "--quiet", "run_model.py"],
            cwd=d, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
    out = {}
    for name, p in procs.items():
        log, _ = p.communicate(timeout=240)
        assert p.returncode == 0, log
        out[name] = os.path.join(root, name, "out", "receipt.json")
    return out


def _check(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    with pytest.raises(SystemExit) as e:
        main(["check", *args])
    c = capsys.readouterr()
    return int(e.value.code or 0), c.out + c.err


@pytest.mark.torch
def test_unchanged_code_passes_against_the_baseline(runs, capsys) -> None:
    code, out = _check(capsys, runs["same"], "--baseline", runs["baseline"], "--max-fallbacks", "0")
    assert code == 0, out
    assert "within budget" in out
    assert load_receipt(runs["baseline"]).summary.break_site_count == 1  # the baseline's own break


@pytest.mark.torch
def test_a_planted_break_fails_with_exit_1_naming_its_site(runs, capsys) -> None:
    code, out = _check(capsys, runs["planted"], "--baseline", runs["baseline"])
    assert code == 1, out
    planted = load_receipt(runs["planted"])
    base_ids = {s.site_id for s in load_receipt(runs["baseline"]).summary.break_sites}
    (new,) = [s for s in planted.summary.break_sites if s.site_id not in base_ids]
    line = PLANTED.splitlines().index("    print('debug')") + 1
    assert (new.file, new.line, new.function) == ("mymodel.py", line, "forward")
    assert f"+ {new.site_id}  mymodel.py:{line} in forward [GB0059]" in out
    assert "1 new break site(s), not in the baseline" in out
