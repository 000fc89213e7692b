"""A tiny mixture of experts routing tokens by boolean masks (``x[mask]``: an output shape that
depends on the data). Dynamo gives up on its only frame and compiles no graph at all."""
import torch
from torch import nn


class MoE(nn.Module):
    def __init__(self, d=16, n=3):
        super().__init__()
        self.router = nn.Linear(d, n)
        self.experts = nn.ModuleList(nn.Linear(d, d) for _ in range(n))

    def forward(self, x):
        choice = self.router(x).argmax(-1)
        out = torch.zeros_like(x)
        for i, e in enumerate(self.experts):
            mask = choice == i
            out[mask] = e(x[mask])
        return out


torch.manual_seed(0)
model = MoE()
compiled = torch.compile(model, backend="eager")
with torch.no_grad():
    for i in range(4):
        compiled(torch.randn(16, 16, generator=torch.Generator().manual_seed(i)))
