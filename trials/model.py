"""The built-in workload's model: a GPT-style decoder LM (nanoGPT's shape, in MindSpore).

Byte-level tokens in, next-token logits out. The token embedding is tied to the
output projection, so every parameter outside ``wte``/``wpe`` is a
"non-embedding" parameter in the PaLM FLOPs formula.
"""

from __future__ import annotations

import math

import mindspore as ms
import numpy as np
from mindspore import Tensor, nn, ops


class CausalSelfAttention(nn.Cell):
    def __init__(self, d_model: int, n_heads: int, seq_len: int) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.head_dim = d_model // n_heads
        self.qkv = nn.Dense(d_model, 3 * d_model)
        self.proj = nn.Dense(d_model, d_model)
        self.scale = 1.0 / math.sqrt(self.head_dim)
        # -1e4 instead of -inf keeps the mask finite in fp16.
        mask = np.triu(np.full((seq_len, seq_len), -1e4, dtype=np.float32), k=1)
        self.mask = Tensor(mask)

    def construct(self, x):
        b, t, c = x.shape
        qkv = self.qkv(x).reshape(b, t, 3, self.n_heads, self.head_dim)
        qkv = qkv.transpose(2, 0, 3, 1, 4)  # (3, B, nh, T, hs)
        q, k, v = qkv[0], qkv[1], qkv[2]
        att = ops.matmul(q, k.swapaxes(-1, -2)) * self.scale  # (B, nh, T, T)
        att = att + self.mask[:t, :t].astype(att.dtype)
        att = ops.softmax(att, -1)
        y = ops.matmul(att, v)  # (B, nh, T, hs)
        y = y.transpose(0, 2, 1, 3).reshape(b, t, c)
        return self.proj(y)


class Block(nn.Cell):
    def __init__(self, d_model: int, n_heads: int, seq_len: int) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm((d_model,))
        self.attn = CausalSelfAttention(d_model, n_heads, seq_len)
        self.ln2 = nn.LayerNorm((d_model,))
        self.fc = nn.Dense(d_model, 4 * d_model)
        self.act = nn.GELU()
        self.out = nn.Dense(4 * d_model, d_model)

    def construct(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.out(self.act(self.fc(self.ln2(x))))


class GPT(nn.Cell):
    """tokens (B, T) int32 -> logits (B, T, vocab)."""

    def __init__(self, *, vocab_size: int, seq_len: int, n_layers: int, d_model: int,
                 n_heads: int) -> None:
        super().__init__()
        self.wte = nn.Embedding(vocab_size, d_model)
        self.wpe = nn.Embedding(seq_len, d_model)
        self.blocks = nn.CellList([Block(d_model, n_heads, seq_len) for _ in range(n_layers)])
        self.ln_f = nn.LayerNorm((d_model,))
        self.positions = Tensor(np.arange(seq_len, dtype=np.int32))

    def construct(self, tokens):
        t = tokens.shape[1]
        x = self.wte(tokens) + self.wpe(self.positions[:t])
        for block in self.blocks:
            x = block(x)
        x = self.ln_f(x)
        table = self.wte.embedding_table.astype(x.dtype)
        return ops.matmul(x, table.T)  # (B, T, vocab), tied to the embedding

    def non_embedding_params(self) -> int:
        return sum(int(np.prod(p.shape)) for p in self.get_parameters()
                   if not p.name.startswith(("wte.", "wpe.")))


class LanguageModelLoss(nn.Cell):
    """(tokens, labels) -> mean next-token cross-entropy, computed in fp32."""

    def __init__(self, model: nn.Cell) -> None:
        super().__init__()
        self.model = model
        self.loss = nn.CrossEntropyLoss()

    def construct(self, tokens, labels):
        logits = self.model(tokens).astype(ms.float32)
        vocab = logits.shape[-1]
        return self.loss(logits.reshape(-1, vocab), labels.reshape(-1))


def palm_flops_per_token(*, non_embedding_params: int, n_layers: int, n_heads: int,
                         head_dim: int, seq_len: int) -> float:
    """Model FLOPs per token (PaLM appendix B): 6N + 12 L H Q T. Recompute not counted."""
    return 6.0 * non_embedding_params + 12.0 * n_layers * n_heads * head_dim * seq_len


def shard_tensor_parallel(model: GPT, *, dp: int, mp: int) -> None:
    """Megatron-style tensor parallel strategies (Ascend/GPU): column-parallel qkv/fc,
    row-parallel proj/out, data parallel on the batch."""
    for block in model.blocks:
        block.attn.qkv.matmul.shard(((dp, 1), (mp, 1)))
        block.attn.proj.matmul.shard(((dp, mp), (1, mp)))
        block.fc.matmul.shard(((dp, 1), (mp, 1)))
        block.out.matmul.shard(((dp, mp), (1, mp)))
