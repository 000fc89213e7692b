"""A compiled step whose model breaks inside (a graph_break Dynamo cannot resume from, as a logging
call in a library can be): capture splits it into frames, and the last batch's size recompiles each."""
import torch


def log_once(h):
    torch._dynamo.graph_break()
    return h


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x):
        h = self.lin(x)
        with torch.no_grad():
            log_once(h)
        return torch.relu(h)


torch.manual_seed(0)
net = Net()


@torch.compile(backend="eager")
def step(batch):
    return net(batch * 2).sum()


data = torch.randn(11, 8)
for _ in range(2):
    for i in range(0, 11, 4):
        step(data[i:i + 4])
