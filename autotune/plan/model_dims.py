"""Model dimensions and parameter counts, per architecture, checkable by hand.

Symbols follow Korthikanti et al. 2022 / Narayanan et al. 2021: L layers, h hidden
size, a attention heads, s sequence length, V vocabulary, f feed-forward width.
"""

from __future__ import annotations

from dataclasses import dataclass

from trials.contract.schema import Arch, WorkloadConfig


@dataclass(frozen=True)
class ModelDims:
    arch: Arch
    layers: int  # L
    hidden: int  # h
    heads: int  # a
    kv_heads: int
    ffn: int  # f
    seq: int  # s
    vocab: int  # V

    @classmethod
    def of(cls, w: WorkloadConfig) -> ModelDims:
        return cls(arch=w.arch, layers=w.n_layers, hidden=w.d_model, heads=w.n_heads,
                   kv_heads=w.n_kv_heads, ffn=w.ffn, seq=w.seq_len, vocab=w.vocab_size)

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def gpt(self) -> bool:
        return self.arch is Arch.gpt


def layer_params(d: ModelDims) -> int:
    """Parameters of one transformer block.

    gpt (trials/model.py): qkv h x 3h + proj h x h, fc h x f + out f x h, all with biases,
    two LayerNorms (scale + bias). llama: q h x h, k and v h x (kv heads x head dim),
    o h x h, gate/up h x f and down f x h, no biases, two RMSNorms (scale).
    """
    h, f = d.hidden, d.ffn
    kv = d.kv_heads * d.head_dim
    attention = h * (h + 2 * kv) + h * h
    if d.gpt:
        mlp = 2 * h * f
        biases = (h + 2 * kv) + h + f + h
        norms = 2 * 2 * h
        return attention + mlp + biases + norms
    return attention + 3 * h * f + 2 * h


def embedding_params(d: ModelDims) -> int:
    """Token embedding, plus learned positions for gpt."""
    return d.vocab * d.hidden + (d.seq * d.hidden if d.gpt else 0)


def head_params(d: ModelDims) -> int:
    """Final norm plus the output projection (tied to the embedding for gpt: none extra)."""
    norm = 2 * d.hidden if d.gpt else d.hidden
    return norm + (0 if d.gpt else d.vocab * d.hidden)


def total_params(d: ModelDims) -> int:
    return d.layers * layer_params(d) + embedding_params(d) + head_params(d)


def non_embedding_params(d: ModelDims) -> int:
    """N of the PaLM MFU formula: everything but the embedding tables."""
    return total_params(d) - embedding_params(d)


def model_flops_per_token(d: ModelDims) -> float:
    """PaLM appendix B: 6N + 12 L H Q T (N non-embedding parameters). MFU uses this."""
    return 6.0 * non_embedding_params(d) + 12.0 * d.layers * d.heads * d.head_dim * d.seq


def hardware_flops_per_token(d: ModelDims, *, recompute: str = "none") -> float:
    """What the devices compute per token: forward 2 x matmul params + 4 L s h attention
    (full s^2, as Megatron-LM counts it) + 2 V h logits; backward twice the forward.
    Full recompute adds one forward of the blocks (Narayanan et al. 2021, eq. 3);
    selective recompute one forward of the attention core (Korthikanti et al. 2022, eq. 8)."""
    attention_core = 4.0 * d.layers * d.seq * d.hidden
    blocks_forward = 2.0 * d.layers * layer_params(d) + attention_core
    logits_forward = 2.0 * d.vocab * d.hidden
    extra = {"none": 0.0, "selective": attention_core, "full": blocks_forward}[recompute]
    return 3.0 * (blocks_forward + logits_forward) + extra
