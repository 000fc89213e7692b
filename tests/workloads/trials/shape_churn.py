"""dynamic=False on inputs of six lengths: each length compiles again."""
import torch


def step(x):
    return torch.relu(x * 2 + 1).sum(0)


f = torch.compile(step, backend="eager", dynamic=False)
for n in (3, 4, 5, 6, 7, 9):
    x = torch.randn(n, 8)
    for _ in range(6):
        f(x)
