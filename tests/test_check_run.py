"""``seamscope check`` against a baseline from real ``seamscope run`` runs (backend eager).

The script stays byte-identical (same input trace); the model it imports changes, as in CI.
Three runs (baseline, unchanged, planted break), each in a fresh process forked from the test
run's one server (``fresh_server``: torch imported once).
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from fakes import seamscope_forked

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
def runs(tmp_path_factory: pytest.TempPathFactory, fresh_server: Any) -> dict[str, str]:
    root = tmp_path_factory.mktemp("check_run")
    out = {}
    for name, model in (("baseline", MODEL), ("same", MODEL), ("planted", PLANTED)):
        d = root / name
        d.mkdir()
        (d / "run_model.py").write_text(SCRIPT)
        (d / "mymodel.py").write_text(model)
        p = seamscope_forked(fresh_server, ["run", "--out", "out", "--quiet", "run_model.py"], d)
        assert p.returncode == 0, p.stderr
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
