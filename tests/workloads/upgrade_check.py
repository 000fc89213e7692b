"""The script of the upgrade check (docs/compatibility.md): one compiled function with a break in a
nested call and a size that changes, run the same way under two torch releases. The receipts in
tests/inputs/upgrade/ were made from it: `seamscope run --out tests/inputs/upgrade/torch-X
tests/workloads/upgrade_check.py` under torch 2.13.0 and (with `--python`) 2.14.1."""

import os

import torch

EXTRA_BREAK = bool(os.environ.get("SEAMSCOPE_TEST_EXTRA_BREAK"))
"""Set by a test: one more break site, as a torch release that breaks where the other did not."""


def helper(x):
    print("in helper")  # a graph break inside a nested call
    return x * 2


@torch.compile(backend="eager")
def f(x):
    y = x.sin()
    if EXTRA_BREAK:
        torch._dynamo.graph_break()
    y = helper(y)
    return y.cos() + 1


for n in (4, 4, 5, 6, 6, 6):
    f(torch.ones(n))
