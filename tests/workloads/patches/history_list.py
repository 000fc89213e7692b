"""A module that keeps the norm of every output it made in its own list
(``self.history.append(y.norm().item())`` in ``forward``): Dynamo guards the list's length, so every
call recompiles. The outputs and the history are saved beside the script, for a test to compare."""
import os

import torch
from torch import nn


class Tracked(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.history = []

    def forward(self, x):
        y = torch.relu(self.lin(x))
        self.history.append(y.norm().item())
        return y


torch.manual_seed(0)
model = Tracked()
f = torch.compile(model, backend="eager")
outs = [f(torch.randn(4, 8, generator=torch.Generator().manual_seed(i))) for i in range(5)]
here = os.path.dirname(os.path.abspath(__file__))
torch.save({"outputs": torch.stack(outs), "losses": torch.tensor(model.history)}, os.path.join(here, "outputs.pt"))
