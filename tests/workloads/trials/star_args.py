"""A compiled function taking ``*args``, dynamic=False on four lengths: the guard names
``args[0]``, which ``dynamic_sources`` spells ``L['args'][0]``."""
import torch


def step(*args):
    return torch.relu(args[0] * 2).sum(0)


f = torch.compile(step, backend="eager", dynamic=False)
for n in (3, 4, 5, 6):
    for _ in range(3):
        f(torch.randn(n, 8))
