"""Tiny workloads for the shape study's tests: fast to compile (one frame, no breaks)."""

from __future__ import annotations

import torch
from torch import nn

from seamscope.experiments.workload import Workload


class Tiny(nn.Module):
    """Causal mixing over the sequence (so padding at the end leaves earlier positions alone)."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(32, 8)
        self.lin = nn.Linear(8, 8)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.emb(tokens)
        return torch.relu(self.lin(x)).cumsum(1)


class Leaky(Tiny):
    """Not causal: every position sees the mean over the whole sequence, padding included."""

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.lin(self.emb(tokens))
        return x + x.mean(1, keepdim=True)


def _tokens(length: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(length)
    return torch.randint(1, 32, (2, length), generator=g)


def tiny() -> Workload:
    torch.manual_seed(0)
    return Workload(Tiny().eval(), inputs={"steady": [_tokens(8)]}, backend="eager", make_input=_tokens,
                    max_length=64)


def leaky() -> Workload:
    torch.manual_seed(0)
    return Workload(Leaky().eval(), inputs={"steady": [_tokens(8)]}, backend="eager", make_input=_tokens)


def default_inputs() -> Workload:
    """No make_input: the study tiles the steady entry's tokens along dim 1."""
    torch.manual_seed(0)
    return Workload(Tiny().eval(), inputs={"steady": [_tokens(8)]}, backend="eager")


def broken() -> Workload:
    def f(tokens: torch.Tensor) -> torch.Tensor:
        raise RuntimeError("broken model")

    return Workload(f, inputs={"steady": [_tokens(8)]}, backend="eager")
