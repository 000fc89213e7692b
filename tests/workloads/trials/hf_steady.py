"""A transformers GPT-2 from a tiny config (no download), one layer (two in
``benchmarks/try_decides.py``: ``TRIAL_STEADY_LAYERS``), one sequence length, 30 calls: it compiles
once and every later call is steady (what an A/A trial and a planted slowdown run on)."""
import os

import torch
from transformers import GPT2Config, GPT2LMHeadModel

torch.manual_seed(0)
cfg = GPT2Config(vocab_size=64, n_positions=64, n_embd=64, n_layer=int(os.environ.get("TRIAL_STEADY_LAYERS", "1")),
                 n_head=2, use_cache=False, attn_implementation="eager")
model = GPT2LMHeadModel(cfg).eval()


def logits(input_ids):
    return model(input_ids=input_ids, use_cache=False).logits


f = torch.compile(logits, backend="eager")
ids = torch.randint(1, 64, (2, 32), generator=torch.Generator().manual_seed(1))
with torch.no_grad():
    for _ in range(30):
        f(ids)
