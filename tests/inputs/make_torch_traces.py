"""Writes the ``TORCH_TRACE`` logs under ``torch_trace/`` that the golden-receipt tests import.

Run from the repository root: ``.venv/bin/python tests/inputs/make_torch_traces.py`` (torch 2.13.0,
CPU). Each workload runs in its own process with ``TORCH_TRACE`` pointing at ``torch_trace/NAME``.
The logs are committed, so the golden tests need no torch; regenerate them only on purpose (a new
torch release), then regenerate the golden receipts (``SEAMSCOPE_REGEN_GOLDEN=1``) in the same commit.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

WORKLOADS = {
    # A print break, a .item() branch, a break inside an inlined helper, and shape recompiles.
    "breaks": r'''
import torch

def helper(x):
    print("inner")
    return x * 2

def f(x):
    y = x.sin()
    print("hi")
    y = y + 1
    if y.sum().item() > -1e9:
        y = y * 3
    y = helper(y)
    return y.cos()

g = torch.compile(f, backend="eager")
for n in (4, 4, 8, 8, 16):
    g(torch.ones(n))
''',
    # A frame that hits the recompile limit (2) on sizes A, B, C, A, and a break Dynamo cannot
    # resume from (inside a loop over a tensor), with aot_eager.
    "limit": r'''
import torch
import torch._dynamo

torch._dynamo.config.recompile_limit = 2

def h(x):
    return x.relu() * 2

def loop(x):
    acc = x
    for i in range(2):
        print("step", i)
        acc = acc + i
    return acc

gh = torch.compile(h, backend="aot_eager", dynamic=False)
for n in (3, 5, 7, 3):
    gh(torch.ones(n))
gl = torch.compile(loop, backend="eager")
gl(torch.ones(4))
gl(torch.ones(4))
''',
}


def main() -> None:
    for name, code in WORKLOADS.items():
        out = os.path.join(HERE, "torch_trace", name)
        shutil.rmtree(out, ignore_errors=True)
        os.makedirs(out)
        env = dict(os.environ, TORCH_TRACE=out, PYTHONHASHSEED="0")
        subprocess.run([sys.executable, "-c", code], env=env, check=True, stdout=subprocess.DEVNULL)
        for f in os.listdir(out):
            print(name, f, os.path.getsize(os.path.join(out, f)))


if __name__ == "__main__":
    main()
