"""Callables compiled at import time, as most code compiles them: imported by the capture tests
before any seamscope session exists."""

import torch


@torch.compile(backend="eager")
def decorated(x):
    y = x.sin()
    print("", end="")  # a graph break: two regions per call
    return y.cos()


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(x).relu()


def scale(x):
    return x * 3 + 1


scaled = torch.compile(scale, backend="eager")
"""A compiled function another module imports by name."""
