"""A Python if on a tensor's value (.item()) inside the compiled function: a break on every call."""
import torch


def step(x):
    y = torch.sin(x) * 3
    if y.sum().item() > 0:
        z = y * 2
    else:
        z = y - 1
    return z.cos().sum()


f = torch.compile(step, backend="eager")
for i in range(12):
    f(torch.randn(16) + (1 if i % 2 else -1))
