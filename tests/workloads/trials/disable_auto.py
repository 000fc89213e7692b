"""A helper with two host reads, each a graph break: --disable makes them one boundary."""
import torch


def helper(x):
    a = float(x.sum())
    y = x * a
    b = float(y.max())
    return y + b


def step(x):
    return torch.cos(helper(torch.sin(x)))


f = torch.compile(step, backend="eager")
for _ in range(20):
    f(torch.full((64,), 0.01))
