"""A print and a logger call inside the compiled function: two breaks on every call."""
import logging

import torch

log = logging.getLogger(__name__)


def step(x):
    y = torch.sin(x) * 2
    print("step", tuple(y.shape))
    y = torch.cos(y) + 1
    log.info("done %s", tuple(y.shape))
    return (y * y).sum()


f = torch.compile(step, backend="eager")
x = torch.randn(32)
for _ in range(12):
    f(x)
