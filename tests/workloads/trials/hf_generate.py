"""A transformers GPT-2 from a tiny config (no download) under ``generate`` with its KV cache
(DynamicCache), forward compiled with dynamic=False: every new token lengthens each layer's
cached keys and values, and the forward recompiles on the cache length (three tokens: the prompt's
compilation, then two recompiles, the second on the cache's length; six in ``benchmarks/try_decides.py``:
``TRIAL_TOKENS``)."""
import os

import torch
from transformers import GPT2Config, GPT2LMHeadModel

torch.manual_seed(0)
cfg = GPT2Config(vocab_size=64, n_positions=64, n_embd=32, n_layer=2, n_head=2, attn_implementation="eager")
model = GPT2LMHeadModel(cfg).eval()
model.forward = torch.compile(model.forward, backend="eager", dynamic=False)
TOKENS = int(os.environ.get("TRIAL_TOKENS", "3"))
ids = torch.randint(1, 64, (1, 6), generator=torch.Generator().manual_seed(1))
with torch.no_grad():
    model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=TOKENS, min_new_tokens=TOKENS,
                   do_sample=False, pad_token_id=0)
