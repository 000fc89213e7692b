"""A function that reads .item() four times per call: four breaks, gone with capture_scalar_outputs."""
import torch


def step(x):
    x = torch.sin(x) * x.abs().max().item()
    x = torch.sin(x) * x.abs().max().item()
    x = torch.sin(x) * x.abs().max().item()
    x = torch.sin(x) * x.abs().max().item()
    return x


f = torch.compile(step, backend="eager")
x = torch.randn(64)
for _ in range(60):
    f(x)
