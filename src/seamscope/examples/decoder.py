"""The bundled example workload: a small decoder block that breaks the way real models do.

It has a ``print`` (host side effect), a ``.item()`` data-dependent branch, a break inside an
inlined helper, and it is called over a family of sequence lengths (recompiles). ``demo``, the
probe and the shape study all use it.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

VOCAB = 256
DIM = 64
HEADS = 4
LENGTHS = (16, 16, 16, 24, 24, 32, 32, 32)


def _log_shape(x: torch.Tensor) -> torch.Tensor:
    # A helper Dynamo inlines; its print breaks the caller's graph at the call site and the
    # helper's own frame again at this line.
    print(f"attention input {tuple(x.shape)}")
    return x


class Attention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.qkv = nn.Linear(DIM, 3 * DIM)
        self.out = nn.Linear(DIM, DIM)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        x = _log_shape(x)
        q, k, v = self.qkv(x).split(DIM, dim=-1)
        q = q.view(b, t, HEADS, DIM // HEADS).transpose(1, 2)
        k = k.view(b, t, HEADS, DIM // HEADS).transpose(1, 2)
        v = v.view(b, t, HEADS, DIM // HEADS).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(DIM // HEADS)
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        att = att.masked_fill(~mask, float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, DIM)
        return self.out(y)


class DecoderBlock(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, DIM)
        self.ln1 = nn.LayerNorm(DIM)
        self.attn = Attention()
        self.ln2 = nn.LayerNorm(DIM)
        self.mlp = nn.Sequential(nn.Linear(DIM, 4 * DIM), nn.GELU(), nn.Linear(4 * DIM, DIM))
        self.head = nn.Linear(DIM, VOCAB)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)
        x = x + self.attn(self.ln1(x))
        # Data-dependent branch: a host read of a tensor value (a device sync on GPU).
        if x.abs().mean().item() > 10.0:
            x = x / 10.0
        x = x + self.mlp(self.ln2(x))
        return self.head(x)


def make_model(seed: int = 0) -> DecoderBlock:
    torch.manual_seed(seed)
    return DecoderBlock().eval()


def make_tokens(length: int, batch: int = 2, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed + length)
    return torch.randint(0, VOCAB, (batch, length), generator=g)


def main(backend: str = "eager", lengths: tuple[int, ...] = LENGTHS) -> None:
    """What ``seamscope demo`` runs: an ordinary script, nothing seamscope-specific in it."""
    model = make_model()
    compiled = torch.compile(model, backend=backend)
    with torch.no_grad():
        for n in lengths:
            compiled(make_tokens(n))


def workload(backend: str = "eager") -> Any:
    """What ``seamscope probe src/seamscope/examples/decoder.py:workload`` runs: the decoder on
    length 16 (steady) and lengths 24 and 32 (changed: each recompiles)."""
    from seamscope.experiments.workload import Workload

    return Workload(
        make_model(),
        inputs={"steady": [make_tokens(16)], "changed": [make_tokens(24), make_tokens(32)]},
        backend=backend,
        warm_calls=10,
        ladder=("eager", "aot_eager"),
        name="seamscope.examples.decoder:workload",
        make_input=make_tokens,  # the shape study: tokens (batch, length), length on dim 1
        length_dim=1,
    )


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--backend", default="eager")
    main(backend=ap.parse_args().backend)
