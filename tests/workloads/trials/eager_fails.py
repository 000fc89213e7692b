"""A program whose own code fails, compiled or not (a stack of an empty list): under
``torch.compile`` it raises from fake-tensor propagation, which reads like a compiler crash."""

import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)
        self.heads = []

    def forward(self, x):
        h = self.lin(x)
        return torch.stack([head(h) for head in self.heads]).sum(0)


model = torch.compile(Net(), backend="eager")
model(torch.randn(4, 8))
