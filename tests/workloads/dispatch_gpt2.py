"""A 2-layer GPT-2 (64 wide) from a config, compiled whole with the eager backend, called with two
sequence lengths in turn (two cache entries of one frame; ``dynamic=False``). Writes what PyTorch's
own compilation metrics say (compile id, ``guard_count``, ``guard_latency_us``) to the JSON file
named by its first argument: the tests' source of truth for the dispatch figures."""

import json
import sys

import torch
from transformers import GPT2Config, GPT2Model
from transformers.utils import logging

logging.set_verbosity_error()
torch.manual_seed(0)
model = GPT2Model(GPT2Config(n_layer=2, n_embd=64, n_head=2, vocab_size=100, n_positions=64)).eval()
compiled = torch.compile(model, backend="eager", dynamic=False)
with torch.no_grad():
    for i in range(8):
        compiled(torch.randint(0, 100, (1, 16 if i % 2 else 8)))
from torch._dynamo.utils import get_compilation_metrics  # noqa: E402

metrics = [{"compile_id": str(m.compile_id), "guard_count": m.guard_count, "guard_latency_us": m.guard_latency_us}
           for m in get_compilation_metrics()]
with open(sys.argv[1], "w") as f:
    json.dump(metrics, f)
