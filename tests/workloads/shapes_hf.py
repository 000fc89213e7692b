"""A transformers model from a tiny config (no downloads) for the shape study's acceptance test:
GPT-2 (causal, so end padding leaves the real positions' logits alone)."""

from __future__ import annotations

import torch
import transformers  # noqa: F401  (imported here so the study's zygote preloads it)

from seamscope.experiments.workload import Workload

N_POSITIONS = 1024


def _tokens(length: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(1000 + length)
    return torch.randint(1, 64, (1, length), generator=g)


def gpt2() -> Workload:
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    cfg = GPT2Config(vocab_size=64, n_positions=N_POSITIONS, n_embd=32, n_layer=1, n_head=2,
                     use_cache=False, attn_implementation="eager")
    model = GPT2LMHeadModel(cfg).eval()

    def logits(input_ids: torch.Tensor) -> torch.Tensor:
        return model(input_ids=input_ids, use_cache=False).logits

    return Workload(logits, inputs={"steady": [_tokens(8)]}, backend="eager", make_input=_tokens,
                    length_dim=1, max_length=N_POSITIONS, name="gpt2-tiny")
