"""A compiler that cannot lower one operation (``erf``), as a backend missing a lowering fails: the
script fails compiled, and runs eagerly."""

import torch


def picky(gm, example_inputs):
    if any(node.target is torch.erf for node in gm.graph.nodes):
        raise RuntimeError("picky: no lowering for erf")
    return gm.forward


def squash(x):
    return torch.erf(x) * 0.5


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x):
        h = torch.relu(self.lin(x))
        return self.lin(squash(h))


torch.manual_seed(0)
model = torch.compile(Net(), backend=picky)
for _ in range(3):
    out = model(torch.randn(4, 8))
print(float(out.sum()))
