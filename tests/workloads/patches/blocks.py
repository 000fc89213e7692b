"""Four identical blocks in a ModuleList, the whole model compiled: the block is traced four times."""
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(16, 16)

    def forward(self, x):
        return torch.relu(self.lin(x)) + x


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([Block() for _ in range(4)])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x.sum()


torch.manual_seed(0)
model = Net().eval()
compiled = torch.compile(model, backend="eager")
with torch.no_grad():
    for _ in range(3):
        compiled(torch.randn(2, 16))
