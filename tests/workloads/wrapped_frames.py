"""Frames Dynamo compiles as a decorator's ``wrapper`` (the shape of transformers' decorators on a
model's ``forward``): a module whose decorated ``forward`` calls a helper method, so that its nodes
sit in two functions, and a decorated function. Compiled with the eager backend, each called twice."""

import functools

import torch


def returns_tuple(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)

    return wrapper


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    @returns_tuple
    def forward(self, x):
        return self.mix(torch.relu(self.lin(x)))

    def mix(self, h):
        return h * 2 + 1


@returns_tuple
def step(x):
    return torch.sin(x) + 1


block = torch.compile(Block(), backend="eager")
fn = torch.compile(step, backend="eager")
x = torch.randn(4, 8)
with torch.no_grad():
    for _ in range(2):
        block(x)
        fn(x)
