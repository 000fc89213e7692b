"""A compiled function given a transformers ModelOutput (a dict subclass) whose item it reads by
position, as BART's forward reads ``encoder_outputs[0]`` under ``generate``: Dynamo builds the
tensor from ``dict.__getitem__(kwargs['enc'], list(dict.keys(kwargs['enc']))[0])``, and its
length recompiles the function."""
import torch
from transformers.modeling_outputs import BaseModelOutput


def step(x, **kwargs):
    return x.sum() + kwargs["enc"][0].mean(1).sum()


f = torch.compile(step, backend="eager")
g = torch.Generator().manual_seed(0)
for n in (4, 6, 8, 4):
    f(torch.randn(3, generator=g), enc=BaseModelOutput(last_hidden_state=torch.randn(1, n, 5, generator=g)))
