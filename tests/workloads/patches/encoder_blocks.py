"""Four identical layers below an encoder (``model.encoder.layer[i]``), the whole model compiled; a
break in the encoder's forward makes Dynamo compile the encoder's frame on its own, where the
layers are traced, one after another, as ``L['self'].layer.N``."""
import torch
from torch import nn


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(16, 16)

    def forward(self, x):
        return torch.relu(self.lin(x)) + x


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.ModuleList([Layer() for _ in range(4)])

    def forward(self, x):
        torch._dynamo.graph_break()
        for layer in self.layer:
            x = layer(x)
        return x


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(8, 16)
        self.encoder = Encoder()

    def forward(self, x):
        return self.encoder(self.embed(x)).sum()


torch.manual_seed(0)
model = Model().eval()
compiled = torch.compile(model, backend="eager")
with torch.no_grad():
    for _ in range(3):
        compiled(torch.randn(2, 8))
