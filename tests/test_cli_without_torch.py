"""The commands that run PyTorch, where it is not installed: one line, exit 2, what works instead."""

from __future__ import annotations

import subprocess
import sys

import pytest

WITHOUT_TORCH = r"""
import sys
class NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, NoTorch())
from seamscope.cli import main
main(sys.argv[1:])
"""


@pytest.mark.parametrize(
    "argv",
    [["run", "train.py"], ["run", "-m", "mypkg.train"], ["demo"], ["probe", "model.py:workload"],
     ["shapes", "model.py:workload", "--lengths", "8,9"], ["try", "train.py"], ["try", "model.py:workload"]],
)
def test_a_torch_command_says_what_it_needs_in_one_line_and_exits_2(tmp_path, argv):
    proc = subprocess.run(
        [sys.executable, "-c", WITHOUT_TORCH, *argv], capture_output=True, text=True, cwd=tmp_path, timeout=120
    )
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    line = lines[0]
    assert line.startswith(f"seamscope: `seamscope {argv[0]}` needs PyTorch")
    assert "pip install 'seamscope[torch]'" in line
    assert "summary" in line and "import" in line and "report" in line and "run" not in line.split("without it")[1]
    assert not list(tmp_path.iterdir())  # nothing left behind


def test_help_still_works_without_torch(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-c", WITHOUT_TORCH, "run", "--help"], capture_output=True, text=True, cwd=tmp_path,
        timeout=120,
    )
    assert proc.returncode == 0 and "--out" in proc.stdout, proc.stderr
