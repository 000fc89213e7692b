"""A function defined in the script breaks the graph (a print of a tensor's value)."""
import torch


class Logger:
    def noisy(self, x):
        print("norm", float(x.norm()))
        return x * 2


def noisy(x):
    print("norm", float(x.norm()))
    return x * 2


def step(x):
    y = torch.sin(x)
    y = noisy(y)
    y = Logger().noisy(y)
    return torch.cos(y)


f = torch.compile(step, backend="eager")
for _ in range(5):
    f(torch.ones(8))
