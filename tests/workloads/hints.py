"""A script whose compiled function breaks in every way a finding has a configuration hint for:
print, a Logger method, Tensor.item() and an operator with a data-dependent output shape."""

import logging

import torch

log = logging.getLogger("hints")


def step(x):
    print("step")
    if x.sum().item() > 0:
        x = x * 2
    log.warning("halfway")
    idx = torch.nonzero(x)
    return x + idx.shape[0]


compiled = torch.compile(step, backend="eager")
for n in (4, 4):
    compiled(torch.ones(n))
