"""A character-level decoder-only transformer (GPT), written after nanoGPT.

The reference setup: 6 layers, 6 heads, 256-dim embeddings, context 64, learned position
embeddings, tied input/output embeddings, default vocabulary of 96 printable characters.

256 is not divisible by 6, so the heads cannot split the residual width evenly as in GPT-2.
Rather than silently changing the head count or the embedding width, each head gets
head_dim = 48 (the multiple of 8 nearest 256/6 ≈ 42.7): q, k and v project 256 -> 6·48 = 288,
and the output projection maps 288 -> 256 back to the residual stream.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from wattcap.models.registry import ModelSpec, register_model

N_LAYER = 6
N_HEAD = 6
N_EMBD = 256
HEAD_DIM = 48
BLOCK_SIZE = 64
VOCAB_SIZE = 96


class CausalSelfAttention(nn.Module):
    """Multi-head masked self-attention with an inner width of n_head·head_dim."""

    def __init__(self, n_embd: int, n_head: int, head_dim: int, block_size: int,
                 dropout: float) -> None:
        super().__init__()
        self.n_head, self.head_dim = n_head, head_dim
        inner = n_head * head_dim
        self.qkv = nn.Linear(n_embd, 3 * inner)
        self.proj = nn.Linear(inner, n_embd)
        self.attn_drop = nn.Dropout(dropout)
        self.resid_drop = nn.Dropout(dropout)
        mask = torch.tril(torch.ones(block_size, block_size, dtype=torch.bool))
        self.mask: torch.Tensor
        self.register_buffer("mask", mask.view(1, 1, block_size, block_size), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        q, k, v = self.qkv(x).split(self.n_head * self.head_dim, dim=2)
        q, k, v = (z.view(b, t, self.n_head, self.head_dim).transpose(1, 2) for z in (q, k, v))
        # Explicit attention rather than F.scaled_dot_product_attention: on CPU torch's
        # FlopCounterMode counts zero FLOPs for the fused kernel, and wattcap's workload model
        # measures FLOPs with it. At context 64 the explicit form costs little.
        att = (q @ k.transpose(-2, -1)) / math.sqrt(self.head_dim)
        att = att.masked_fill(~self.mask[:, :, :t, :t], float("-inf"))
        att = self.attn_drop(F.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).reshape(b, t, self.n_head * self.head_dim)
        return self.resid_drop(self.proj(y))


class Block(nn.Module):
    """Pre-norm transformer block: x + attn(ln(x)), then x + mlp(ln(x))."""

    def __init__(self, n_embd: int, n_head: int, head_dim: int, block_size: int,
                 dropout: float) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head, head_dim, block_size, dropout)
        self.ln2 = nn.LayerNorm(n_embd)
        self.mlp = nn.Sequential(
            nn.Linear(n_embd, 4 * n_embd), nn.GELU(), nn.Linear(4 * n_embd, n_embd),
            nn.Dropout(dropout),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class CharTransformer(nn.Module):
    """GPT over characters: (B, T) int64 token ids, T <= block_size -> (B, T, vocab) logits."""

    def __init__(self, vocab_size: int = VOCAB_SIZE, n_layer: int = N_LAYER,
                 n_head: int = N_HEAD, n_embd: int = N_EMBD, head_dim: int = HEAD_DIM,
                 block_size: int = BLOCK_SIZE, dropout: float = 0.0) -> None:
        super().__init__()
        self.block_size = block_size
        self.tok_emb = nn.Embedding(vocab_size, n_embd)
        self.pos_emb = nn.Embedding(block_size, n_embd)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.Sequential(
            *(Block(n_embd, n_head, head_dim, block_size, dropout) for _ in range(n_layer))
        )
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        self.lm_head.weight = self.tok_emb.weight  # weight tying, as GPT-2 and nanoGPT
        self.apply(self._init_weights)
        # GPT-2's scaled init of the projections into the residual stream keeps its variance
        # from growing with depth
        for name, p in self.named_parameters():
            if name.endswith("attn.proj.weight") or name.endswith("mlp.2.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * n_layer))

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        _, t = idx.shape
        if t > self.block_size:
            raise ValueError(f"sequence length {t} exceeds the context length {self.block_size}")
        pos = torch.arange(t, device=idx.device)
        x = self.drop(self.tok_emb(idx) + self.pos_emb(pos))
        return self.lm_head(self.ln_f(self.blocks(x)))


CHAR_TRANSFORMER = register_model(
    ModelSpec(
        name="char-transformer",
        input_shape=(BLOCK_SIZE,),
        input_dtype="int64",
        task="char-lm",
        default_num_classes=VOCAB_SIZE,
        reference=False,
        description="char-level GPT: 6 layers, 6 heads x 48, 256-dim embeddings, context 64",
        factory=lambda n: CharTransformer(vocab_size=n),
    )
)
