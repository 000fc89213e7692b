"""A training-loop counter kept in a module global and read by the compiled function: Dynamo keeps
a global int a constant (each value its own graph), ``dynamic=True`` too (``--dynamic``); passed as
an argument it would be symbolic after one recompile."""

import sys

import torch

step = 0


def scaled(x):
    return x * 2 + step


f = torch.compile(scaled, backend="eager", dynamic=True if "--dynamic" in sys.argv else None)
for i in range(12):
    step = i
    f(torch.ones(4))
