"""A Python if on a tensor's value inside the compiled function, two statements a branch: a break
on every call, and calls that take each branch."""
import torch


def step(x):
    y = torch.sin(x) * 3
    if x.sum() > 0:
        t = y * 2 + x
        y = torch.relu(t) + 1
    else:
        t = torch.cos(y)
        y = t - y
    return y.sum() + t.mean()


f = torch.compile(step, backend="eager")
for i in range(6):
    f(torch.randn(16) + (1 if i % 2 else -1))
