"""A hand-written decoder with a preallocated KV cache whose fill position is a Python int on each
attention module (``self.pos``), as many small decoders are written, compiled whole and generating
token by token: a prompt of 8, then one token per call.

An int attribute of an nn.Module is a constant to Dynamo, so each new position recompiles the
whole model until the recompile limit (8) sends it to eager; with
``torch._dynamo.config.allow_unspec_int_on_nn_module = True`` the position is symbolic after one
recompile (two graphs). The guard names block 0's position below its parent's ``_modules`` dict.
"""

import torch
import torch.nn.functional as F
from torch import nn


class Attn(nn.Module):
    def __init__(self, d, heads, max_len):
        super().__init__()
        self.qkv = nn.Linear(d, 3 * d)
        self.heads = heads
        self.register_buffer("k", torch.zeros(1, heads, max_len, d // heads), persistent=False)
        self.register_buffer("v", torch.zeros(1, heads, max_len, d // heads), persistent=False)
        self.pos = 0

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        self.k[:, :, self.pos:self.pos + t] = k
        self.v[:, :, self.pos:self.pos + t] = v
        self.pos += t
        y = F.scaled_dot_product_attention(q, self.k[:, :, :self.pos], self.v[:, :, :self.pos])
        return y.transpose(1, 2).reshape(b, t, d)


class Decoder(nn.Module):
    def __init__(self, vocab=32, d=16, heads=2, layers=2, max_len=32):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(Attn(d, heads, max_len) for _ in range(layers))
        self.head = nn.Linear(d, vocab)

    def forward(self, ids):
        x = self.emb(ids)
        for blk in self.blocks:
            x = x + blk(x)
        return self.head(x)


torch.manual_seed(0)
model = Decoder().eval()
step = torch.compile(model, backend="eager")
with torch.no_grad():
    logits = step(torch.randint(0, 32, (1, 8), generator=torch.Generator().manual_seed(0)))
    for _ in range(10):
        logits = step(logits[:, -1:].argmax(-1))
