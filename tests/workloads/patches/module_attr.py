"""A module whose ``forward`` reads a Python float attribute the script changes between calls
(``model.scale = v``): Dynamo guards ``forward`` on the attribute's value, so the second value
recompiles. The outputs are saved beside the script, for a test to compare."""
import os

import torch
from torch import nn


class Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.scale = 0.5

    def forward(self, x):
        return self.lin(x) * self.scale + 1


torch.manual_seed(0)
model = Scaled()
cmodel = torch.compile(model, backend="eager")
x = torch.randn(4, 8)
outs = []
for v in (0.5, 0.7, 0.9, 1.1):
    model.scale = v
    outs.append(cmodel(x))
torch.save(torch.stack(outs), os.path.join(os.path.dirname(os.path.abspath(__file__)), "outputs.pt"))
