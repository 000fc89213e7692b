"""A training step compiled the way PyTorch Lightning's ``from_compiled`` compiles one: the
compiled module's own Dynamo context applied to another method (``c.dynamo_ctx(step)``)."""

import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(x).relu()

    def training_step(self, x):
        return self(x).sum()


net = Net()
compiled = torch.compile(net, backend="eager")
step = compiled.dynamo_ctx(net.training_step)
opt = torch.optim.SGD(net.parameters(), lr=0.01)
for _ in range(5):
    loss = step(torch.ones(2, 4))
    loss.backward()
    opt.step()
    opt.zero_grad()
print("steps done")
