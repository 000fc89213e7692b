"""Calls an imported helper that breaks the graph (print of a tensor's value)."""
import torch
import trials_helper


def step(x):
    y = torch.sin(x)
    y = trials_helper.noisy(y)
    return torch.cos(y)


f = torch.compile(step, backend="eager")
for _ in range(5):
    f(torch.ones(8))
