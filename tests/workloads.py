"""Small real workloads for the tests and benchmarks: the seed notebook's transformer Block,
and the memory issue's training step."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn


class Block(nn.Module):
    """The seed notebook's block: self-attention and an MLP, pre-LayerNorm."""

    def __init__(self, d: int = 512, n_head: int = 8, ff: int = 2048) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, n_head, batch_first=True)
        self.ln2 = nn.LayerNorm(d)
        self.ff = nn.Sequential(nn.Linear(d, ff), nn.GELU(), nn.Linear(ff, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.ln1(x)
        a, _ = self.attn(h, h, h, need_weights=False)
        x = x + a
        return x + self.ff(self.ln2(x))


def block_and_input(batch: int = 4, seq: int = 256, d: int = 512) -> tuple[Block, torch.Tensor]:
    torch.manual_seed(0)
    return Block(d=d).eval(), torch.randn(batch, seq, d)


def training_step() -> Callable[[], None]:
    """The memory issue's training step: Linear 512->2048->512, AdamW, batch 64, CPU; a
    zero-argument callable doing one step (forward, backward, optimizer step)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(512, 2048), nn.ReLU(), nn.Linear(2048, 512))
    opt = torch.optim.AdamW(model.parameters())
    x = torch.randn(64, 512)

    def step() -> None:
        opt.zero_grad()
        loss = model(x).square().mean()
        loss.backward()
        opt.step()

    return step
