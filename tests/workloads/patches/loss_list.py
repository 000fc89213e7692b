"""A training-style step that logs its loss into a module-level list (``losses.append(loss.item())``)
inside the compiled function: Dynamo guards the list's length, so every call recompiles. The
outputs and the logged losses are saved beside the script, for a test to compare."""
import os

import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(8, 8)
losses = []


def step(x):
    y = model(x)
    loss = (y ** 2).mean()
    losses.append(loss.item())
    return y


f = torch.compile(step, backend="eager")
outs = [f(torch.randn(4, 8, generator=torch.Generator().manual_seed(i))) for i in range(5)]
here = os.path.dirname(os.path.abspath(__file__))
torch.save({"outputs": torch.stack(outs), "losses": torch.tensor(losses)}, os.path.join(here, "outputs.pt"))
