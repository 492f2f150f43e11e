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


def matmul_shapes(d: ModelDims) -> list[tuple[int, int]]:
    """The (input, output) widths of one block's matmuls in forward order: gpt fuses Q, K
    and V (trials/model.py, Megatron-LM); llama runs q, k, v, o, then gate, up and down
    (the order torchtitan's selective op recompute counts them in)."""
    h, f = d.hidden, d.ffn
    kv = d.kv_heads * d.head_dim
    if d.gpt:
        return [(h, h + 2 * kv), (h, h), (h, f), (f, h)]
    return [(h, h), (h, kv), (h, kv), (h, h), (h, f), (h, f), (f, h)]


def recomputed_matmul_params(d: ModelDims) -> int:
    """Selective op recompute: every second matmul is recomputed (torchtitan's policy
    saves the output of all compute ops except every second mm)."""
    return sum(i * o for i, o in matmul_shapes(d)[1::2])


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


#: Keys a FlashAttention tile spans (FlashAttention-2's blocks are 64 or 128 wide, Dao
#: 2023, arXiv:2307.08691): the granularity at which a causal kernel skips masked work.
FLASH_TILE = 128


def attended_keys(d: ModelDims, flash_attention: bool) -> float:
    """Keys each query's scores are computed against, on average. Every model here is a
    causal decoder. Where the scores are materialised and then masked (Megatron-LM's fused
    softmax) the product is the whole s x s; a FlashAttention kernel on a causal mask skips
    the tiles wholly above the diagonal ("approximately half of the blocks for large
    sequence length", Dao 2023, FlashAttention-2, "Causal masking"; Ascend's
    FlashAttentionScore does the same for a causal next_tokens = 0): T (T + 1) / 2 of T^2
    tiles, T = s / tile. Context parallel splits the causal work evenly (Megatron-LM places
    chunks i and 2 cp - 1 - i on rank i), so this holds per rank too."""
    if not flash_attention:
        return float(d.seq)
    tiles = -(-d.seq // FLASH_TILE)
    return d.seq * (tiles + 1) / (2 * tiles)


def layer_flops_per_token(d: ModelDims, *, recompute: str = "none",
                          flash_attention: bool = False) -> float:
    """What one block computes per token, forward and backward: the forward is 2 FLOPs per
    matmul parameter (with grouped-query attention K and V are kv_heads x head_dim wide,
    and SwiGLU's gate, up and down are three h x f matrices: layer_params counts both) plus
    4 k h for the attention core (QK^T and the scores times V for every query head against
    k = attended_keys: the full s where the scores are materialised, as Megatron-LM counts
    it, about half under a causal FlashAttention; GQA shares K and V, it does not shrink
    this); the backward is twice the forward. Full recompute adds one forward of the block
    (Narayanan et al. 2021, eq. 3), selective one forward of the attention core (Korthikanti
    et al. 2022, eq. 8), selective op the matmuls it did not keep; FlashAttention's backward
    recomputes the scores QK^T (Dao et al. 2022, algorithm 4): half the attention core's
    forward."""
    attention_core = 4.0 * attended_keys(d, flash_attention) * d.hidden
    forward = 2.0 * layer_params(d) + attention_core
    extra = {"none": 0.0, "selective": attention_core, "full": forward,
             "selective_op": 2.0 * recomputed_matmul_params(d)}[recompute]
    if flash_attention and recompute in ("none", "selective_op"):
        extra += attention_core / 2
    return 3.0 * forward + extra


def hardware_flops_per_token(d: ModelDims, *, recompute: str = "none") -> float:
    """What the devices compute per token: every block (layer_flops_per_token) and the
    logits, 2 V h in the forward, twice that in the backward."""
    logits_forward = 2.0 * d.vocab * d.hidden
    return d.layers * layer_flops_per_token(d, recompute=recompute) + 3.0 * logits_forward
