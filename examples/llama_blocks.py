"""A Llama-style decoder written by hand: RMSNorm, causal attention, SwiGLU feed-forward.

The blocks follow Llama's layout (pre-normalisation with RMSNorm, attention projections without
bias, ``down(silu(gate(x)) * up(x))``, an untied output head); rotary position embeddings are left
out, which changes no parameter count. ``LLAMA_7B`` is the 7B configuration (32 layers, width 4096,
feed-forward 11008, 32 heads, vocabulary 32000): 6,738,415,616 parameters, Llama-7B's count.

Build the 7B model on the meta device, or under ``FakeTensorMode`` as the training-step estimate
does, to analyse it without allocating its 25 GiB of fp32 parameters::

    with torch.device("meta"):
        model = LlamaBlocks(**LLAMA_7B)
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

#: Llama-7B's shape.
LLAMA_7B = {"vocab": 32000, "width": 4096, "layers": 32, "heads": 32, "hidden": 11008}


class RMSNorm(nn.Module):
    """``x / sqrt(mean(x^2) + eps) * weight`` over the last dimension (Zhang & Sennrich, 2019)."""

    def __init__(self, width: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class Attention(nn.Module):
    """Causal multi-head self-attention through ``F.scaled_dot_product_attention``."""

    def __init__(self, width: int, heads: int):
        super().__init__()
        self.heads = heads
        self.q_proj = nn.Linear(width, width, bias=False)
        self.k_proj = nn.Linear(width, width, bias=False)
        self.v_proj = nn.Linear(width, width, bias=False)
        self.o_proj = nn.Linear(width, width, bias=False)

    def forward(self, x):
        batch, length, width = x.shape
        q, k, v = (
            proj(x).view(batch, length, self.heads, width // self.heads).transpose(1, 2)
            for proj in (self.q_proj, self.k_proj, self.v_proj)
        )
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o_proj(y.transpose(1, 2).reshape(batch, length, width))


class FeedForward(nn.Module):
    """SwiGLU: ``down(silu(gate(x)) * up(x))`` (Shazeer, 2020)."""

    def __init__(self, width: int, hidden: int):
        super().__init__()
        self.gate_proj = nn.Linear(width, hidden, bias=False)
        self.up_proj = nn.Linear(width, hidden, bias=False)
        self.down_proj = nn.Linear(hidden, width, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Block(nn.Module):
    """``x + attn(norm(x))``, then ``x + mlp(norm(x))``."""

    def __init__(self, width: int, heads: int, hidden: int):
        super().__init__()
        self.input_norm = RMSNorm(width)
        self.attn = Attention(width, heads)
        self.post_norm = RMSNorm(width)
        self.mlp = FeedForward(width, hidden)

    def forward(self, x):
        x = x + self.attn(self.input_norm(x))
        return x + self.mlp(self.post_norm(x))


class LlamaBlocks(nn.Module):
    """Token embedding, ``layers`` blocks, a final RMSNorm and the output head; returns logits."""

    def __init__(self, vocab: int = 1000, width: int = 128, layers: int = 2, heads: int = 4, hidden: int = 344):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.layers = nn.ModuleList(Block(width, heads, hidden) for _ in range(layers))
        self.norm = RMSNorm(width)
        self.lm_head = nn.Linear(width, vocab, bias=False)

    def forward(self, ids):
        x = self.embed(ids)
        for layer in self.layers:
            x = layer(x)
        return self.lm_head(self.norm(x))


def parameter_count(vocab: int, width: int, layers: int, heads: int, hidden: int) -> int:
    """Parameters by hand: embedding and head ``2 V d``; per block four ``d x d`` projections, three
    ``d x f`` feed-forward matrices and two norm weights; the final norm ``d``."""
    return 2 * vocab * width + layers * (4 * width * width + 3 * width * hidden + 2 * width) + width
