"""A script whose compiled function breaks in every way a finding has a configuration hint for:
print, a Logger method, a Logger method a library adds on import (transformers adds
``Logger.warning_once`` so), Tensor.item() and an operator with a data-dependent output shape."""

import logging

import torch

log = logging.getLogger("hints")


def note_once(self, msg):
    self.info(msg)


logging.Logger.note_once = note_once  # as a library does on import: absent before the script runs


def step(x):
    print("step")
    if x.sum().item() > 0:
        x = x * 2
    log.warning("halfway")
    log.note_once("once")
    idx = torch.nonzero(x)
    return x + idx.shape[0]


compiled = torch.compile(step, backend="eager")
for n in (4, 4):
    compiled(torch.ones(n))
