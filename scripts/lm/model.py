"""The transformer fabricd serves, as PyTorch trains it in floating point.

A decoder-only transformer of the llama family, small enough to stream from
a Zynq's DDR: RMSNorm with gains, rotary positions on interleaved pairs,
multi-head causal attention, a plain MLP with GELU, no biases, the token
embedding tied to the output. docs/transformer.md gives the integer
definition the fabric runs; this file is only what training needs.
"""

import math
from dataclasses import dataclass, asdict

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class Shape:
    vocab: int
    dim: int = 256
    layers: int = 4
    heads: int = 4
    hidden: int = 1024
    context: int = 256
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5

    def as_dict(self):
        return asdict(self)


def rope_tables(shape: Shape):
    """cos and sin for every position and pair of a head: [context, head_dim/2]."""
    hd = shape.dim // shape.heads
    inv = shape.rope_theta ** (-torch.arange(0, hd, 2, dtype=torch.float64) / hd)
    ang = torch.arange(shape.context, dtype=torch.float64)[:, None] * inv[None, :]
    return torch.cos(ang).float(), torch.sin(ang).float()


def rotate(x, cos, sin):
    """Rotates interleaved pairs (x[2i], x[2i+1]) of the last axis."""
    a, b = x[..., 0::2], x[..., 1::2]
    out = torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1)
    return out.flatten(-2)


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.gain = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.gain


class Block(nn.Module):
    def __init__(self, s: Shape, dropout: float):
        super().__init__()
        self.s = s
        self.norm1 = RMSNorm(s.dim, s.norm_eps)
        self.wq = nn.Linear(s.dim, s.dim, bias=False)
        self.wk = nn.Linear(s.dim, s.dim, bias=False)
        self.wv = nn.Linear(s.dim, s.dim, bias=False)
        self.wo = nn.Linear(s.dim, s.dim, bias=False)
        self.norm2 = RMSNorm(s.dim, s.norm_eps)
        self.w1 = nn.Linear(s.dim, s.hidden, bias=False)
        self.w2 = nn.Linear(s.hidden, s.dim, bias=False)
        self.drop = nn.Dropout(dropout)

    def forward(self, x, cos, sin):
        b, t, d = x.shape
        h, hd = self.s.heads, d // self.s.heads
        n = self.norm1(x)
        q = self.wq(n).view(b, t, h, hd).transpose(1, 2)
        k = self.wk(n).view(b, t, h, hd).transpose(1, 2)
        v = self.wv(n).view(b, t, h, hd).transpose(1, 2)
        q, k = rotate(q, cos[:t], sin[:t]), rotate(k, cos[:t], sin[:t])
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.drop(self.wo(a.transpose(1, 2).reshape(b, t, d)))
        x = x + self.drop(self.w2(F.gelu(self.w1(self.norm2(x)))))
        return x


class Transformer(nn.Module):
    def __init__(self, s: Shape, dropout: float = 0.0):
        super().__init__()
        self.s = s
        self.embed = nn.Embedding(s.vocab, s.dim)
        self.blocks = nn.ModuleList(Block(s, dropout) for _ in range(s.layers))
        self.norm = RMSNorm(s.dim, s.norm_eps)
        cos, sin = rope_tables(s)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        for name, p in self.named_parameters():
            if p.dim() == 2:
                std = 0.02
                # Residual outputs scaled down by depth (GPT-2's rule).
                if name.endswith("wo.weight") or name.endswith("w2.weight"):
                    std /= math.sqrt(2 * s.layers)
                nn.init.normal_(p, mean=0.0, std=std)

    def forward(self, ids):
        x = self.embed(ids)
        for blk in self.blocks:
            x = blk(x, self.cos, self.sin)
        return self.norm(x) @ self.embed.weight.T
