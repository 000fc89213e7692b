"""An optional additive mask passed on odd calls only: each kind of call has its own graph."""
import torch


def step(x, mask=None):
    y = torch.tanh(x @ x.T)
    if mask is not None:
        y = y + mask
    return torch.softmax(y, dim=-1).sum(0)


f = torch.compile(step, backend="eager")
x = torch.randn(32, 32)
m = torch.randn(32, 32)
for i in range(16):
    f(x, m if i % 2 else None)
