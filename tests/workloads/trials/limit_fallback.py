"""dynamic=False on twelve lengths: the recompile limit is hit and the frame falls back to eager."""
import torch


def step(x):
    return torch.tanh(x @ x.T).sum()


f = torch.compile(step, backend="eager", dynamic=False)
for n in range(2, 14):
    x = torch.randn(n, 4)
    for _ in range(4):
        f(x)
