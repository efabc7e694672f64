"""Benchmark workloads: the seed notebook's transformer ``Block`` and small helpers.

Copied from the seed notebook (07_gpu_07_nsight_profiling) so the benchmarks do not
import from ``tests/``.
"""

from __future__ import annotations

import torch
from torch import nn

#: The statement every "Block" benchmark profiles (the seed runs it in inference mode).
BLOCK_STMT = "with torch.inference_mode():\n    block(x)"


class Block(nn.Module):
    """One transformer block: pre-LayerNorm self-attention and an MLP."""

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
    """The seed's block (eval mode) and its input ``torch.randn(4, 256, 512)``."""
    torch.manual_seed(0)
    return Block(d=d).eval(), torch.randn(batch, seq, d)


#: 10,000 tiny ops per run: the "many events" cell.
MANY_EVENTS_STMT = "a = t\nfor _ in range(LOOPS):\n    a = a.add(1).mul(0.5)"
