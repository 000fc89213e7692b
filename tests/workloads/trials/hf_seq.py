"""A transformers GPT-2 from a tiny config (no download) called on three sequence lengths with
dynamic=False: it compiles once per length."""
import torch
from transformers import GPT2Config, GPT2LMHeadModel

torch.manual_seed(0)
cfg = GPT2Config(vocab_size=64, n_positions=128, n_embd=32, n_layer=1, n_head=2, use_cache=False,
                 attn_implementation="eager")
model = GPT2LMHeadModel(cfg).eval()


def logits(input_ids):
    return model(input_ids=input_ids, use_cache=False).logits


f = torch.compile(logits, backend="eager", dynamic=False)
with torch.no_grad():
    for n in (8, 12, 16):
        ids = torch.randint(1, 64, (1, n), generator=torch.Generator().manual_seed(n))
        for _ in range(4):
            f(ids)
