"""A tiny BERT from a config (no download) behind the user's own compiled wrapper: the attention
mask is passed on some calls and left ``None`` on others (a recompile on ``mask is None``), and a
logger call in the compiled frame breaks the graph on every call."""
import logging

import torch
from transformers import BertConfig, BertModel

log = logging.getLogger(__name__)
torch.manual_seed(0)
cfg = BertConfig(vocab_size=64, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
                 max_position_embeddings=64, attn_implementation="eager")
model = BertModel(cfg).eval()


def encode(ids, mask=None):
    out = model(ids, attention_mask=mask).last_hidden_state
    log.info("encoded %s", tuple(out.shape))
    return out


compiled = torch.compile(encode, backend="eager")
ids = torch.randint(1, 64, (2, 16), generator=torch.Generator().manual_seed(1))
with torch.no_grad():
    for i in range(6):
        out = compiled(ids, torch.ones_like(ids) if i % 2 else None)
