"""Small real workloads for the tests and benchmarks: the seed notebook's transformer Block,
the memory issue's training step, and a tiny causal decoder that generates tokens (#32)."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
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


class DecoderBlock(nn.Module):
    """Causal self-attention with an optional KV cache (a dict it fills), and an MLP."""

    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)
        self.ff = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)

    def forward(self, x: torch.Tensor, cache: dict | None = None) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        if cache is not None:
            if "k" in cache:
                k, v = torch.cat([cache["k"], k], 2), torch.cat([cache["v"], v], 2)
            cache["k"], cache["v"] = k, v
        y = F.scaled_dot_product_attention(q, k, v, is_causal=t > 1)
        x = x + self.out(y.transpose(1, 2).reshape(b, t, d))
        return x + self.ff(self.norm2(x))


class Decoder(nn.Module):
    """A two-layer causal decoder with random weights."""

    def __init__(self, d: int = 64, heads: int = 4, vocab: int = 128) -> None:
        super().__init__()
        self.embed, self.pos = nn.Embedding(vocab, d), nn.Embedding(256, d)
        self.blocks = nn.ModuleList(DecoderBlock(d, heads) for _ in range(2))
        self.head = nn.Linear(d, vocab)

    def forward(self, idx: torch.Tensor, caches: list | None = None,
                start: int = 0) -> torch.Tensor:
        x = self.embed(idx) + self.pos(torch.arange(start, start + idx.shape[1]))
        for i, block in enumerate(self.blocks):
            x = block(x, caches[i] if caches is not None else None)
        return self.head(x)


@torch.no_grad()
def generate(model: Decoder, prompt: torch.Tensor, tokens: int = 16,
             cache: bool = True) -> torch.Tensor:
    """``tokens`` new tokens: one forward over the prompt, then one per token."""
    idx = prompt
    caches = [{} for _ in model.blocks] if cache else None
    logits = model(idx, caches)
    for _ in range(tokens - 1):
        nxt = logits[:, -1].argmax(-1, keepdim=True)
        if cache:
            logits = model(nxt, caches, start=idx.shape[1])
            idx = torch.cat([idx, nxt], 1)
        else:
            idx = torch.cat([idx, nxt], 1)
            logits = model(idx)
    return idx
