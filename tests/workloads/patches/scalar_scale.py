"""A Python float that changes every call: each new value fails the guard on it."""
import torch


def step(x, scale):
    return torch.tanh(x * scale + 1).sum(0)


f = torch.compile(step, backend="eager")
x = torch.randn(32, 32)
for i in range(8):
    f(x, 0.5 + 0.25 * i)
