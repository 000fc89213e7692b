"""A compiled module whose forward reads a plain attribute, ``self.scale``, that the script sets
from 1.0 to 2.0 halfway: PyTorch guards on it and recompiles once. A guard filter that drops the
module guards (``skip_guard_on_all_nn_modules_unsafe``) keeps the first graph: the second half runs
stale, and so would any later change of ``scale``. Enough steady calls that the guard evaluation
is a measurable share of the run (a candidate is tried only then); the output check fingerprints
the first 256 calls, all before the change, so only the check run can see the stale graph."""

import torch


class Scaled(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = torch.nn.Linear(8, 8)
        self.out = torch.nn.Linear(8, 8)
        self.scale = 1.0

    def forward(self, x):
        return self.out(torch.relu(self.inp(x))) * self.scale


torch.manual_seed(0)
net = Scaled()
model = torch.compile(net, backend="eager")
x = torch.randn(4, 8)
for i in range(2000):
    if i == 1000:
        net.scale = 2.0
    out = model(x)
print(float(out.detach().sum()))
