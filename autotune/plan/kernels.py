"""The seconds one device's GEMMs take at the roofline: each GEMM of a step, its output
tiles spread over the device's compute units in waves.

A GEMM of M x K by K x N runs as ceil(M / T) x ceil(N / T) output tiles of T x T, one
tile per compute unit at a time; a GEMM whose tiles do not fill its last wave leaves units
idle for that wave (wave quantisation, NVIDIA's "Matrix Multiplication Background" user
guide, section "Wave quantization"). The library picks the tile that finishes first
(cuBLAS's heuristics choose among CUTLASS-style 64, 128 and 256 tiles), so

    seconds = min over T of  waves(T) x units x 2 T^2 K / peak,
    waves(T) = ceil(ceil(M / T) ceil(N / T) / units)

which is 2 M N K / peak for a GEMM of many full waves, and more for a small one. The
fitted compute efficiency scales it (achieved / this): one constant that holds from the
smallest GEMM to the largest, where an efficiency per GEMM shape measured held only for
the shapes a fit had seen (fitted on hidden size 1,024, it predicted hidden size 2,048
32.6 % off; this term and the memory-bound one, 9.9 %, and with the floor below 7.1 %:
BENCHMARKS.md, "Calibrate small, plan big").

A GEMM also takes at least a floor: the host issues kernels one after another while the
device runs them, so a kernel shorter than the host's time to issue the next leaves the
device idle (NVIDIA's "CUDA Graph Best Practice for PyTorch", docs.nvidia.com/dl-cuda-graph,
"CUDA Graph basics": launch overhead matters "when the CPU cannot keep up with feeding work
to the GPU", for "many small operations"). Each GEMM costs
max(floor, its roofline time / efficiency) (steptime.compute_parts): the floor hides under
large GEMMs and sets the pace of small ones. No profile states it (its prior is 0); a fit of
many runs chooses it (calibration.KERNEL_FLOORS_S). Fitted on vTrain's 1,440 single-node
runs it is 75 us, about what a framework that dispatches each op from Python spends per op
with the ops around it; it took the multi-node protocol from 11.9 to 11.3 % (BENCHMARKS.md,
"Calibrate small, plan big"): with a per-layer constant alone, the small models' host time
was charged in full to large GEMMs, which hide it.

Memory-bound work is not in this term: the element-wise kernels' and the attention
scores' traffic is steptime.memory_bound_s, at the roofline of the memory bandwidth.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from autotune.plan.layout import Job, Recompute
from autotune.plan.memory import local_seq
from autotune.plan.model_dims import ModelDims, attended_keys, matmul_shapes

#: The output tiles a GEMM library chooses among.
TILES = (64, 128, 256)


@dataclass(frozen=True)
class Gemm:
    """M x K times K x N, ``count`` times (heads of a batched GEMM)."""

    m: int
    n: int
    k: int
    count: float = 1.0

    @property
    def flops(self) -> float:
        return 2.0 * self.m * self.n * self.k * self.count


def roofline_flops(g: Gemm, units: int | None) -> float:
    """The FLOPs a GEMM costs on ``units`` compute units: its own where it fills its
    waves, the waves' where its last wave is partly idle; its own without a unit count."""
    if not units:
        return g.flops
    waves = (math.ceil(math.ceil(g.m / t) * math.ceil(g.n / t) / units) * t * t
             for t in TILES)
    return min(waves) * units * 2.0 * g.k * g.count


def block_matmuls(d: ModelDims, mp: int) -> list[tuple[int, int]]:
    """(K, N) of one block's weight GEMMs on one of ``mp`` tensor-parallel ranks: the
    matmuls that open a sub-block (QKV, the MLP's up and gate) split their outputs
    (column parallel), the ones that close it (the attention's output, the MLP's down)
    split their inputs (row parallel; Shoeybi et al. 2019, section 3)."""
    shapes = matmul_shapes(d)
    closing = {1, len(shapes) - 1} if d.gpt else {3, len(shapes) - 1}
    return [(i // mp, o) if j in closing else (i, o // mp) for j, (i, o) in enumerate(shapes)]


def forward_gemms(d: ModelDims, job: Job, *, matmuls: bool = True,
                  attention: bool = True, every_second: bool = False) -> list[Gemm]:
    """One block's forward GEMMs for one micro-batch on one device: the weight matmuls
    (M = the micro-batch's local tokens) and the attention core, batched over the local
    heads (QK^T: s_local x k x head dim; scores x V: s_local x head dim x k, k the keys
    each query attends, model_dims.attended_keys)."""
    tokens = int(job.micro_batch_size * local_seq(d, job))
    out: list[Gemm] = []
    if matmuls:
        shapes = block_matmuls(d, job.mp)
        out += [Gemm(tokens, n, k) for k, n in (shapes[1::2] if every_second else shapes)]
    if attention:
        heads = job.micro_batch_size * d.heads / job.mp
        rows = int(local_seq(d, job))
        keys = round(attended_keys(d, job.flash_attention))
        out += [Gemm(rows, keys, d.head_dim, heads), Gemm(rows, d.head_dim, keys, heads)]
    return out


def backward_of(g: Gemm) -> list[Gemm]:
    """A forward GEMM's backward: the input's gradient (M x K, reducing over N) and the
    weight's (K x N, reducing over M)."""
    return [Gemm(g.m, g.k, g.n, g.count), Gemm(g.k, g.n, g.m, g.count)]


def block_gemms(d: ModelDims, job: Job) -> tuple[list[Gemm], list[Gemm]]:
    """(every GEMM of one block for one micro-batch: forward, backward and the recompute
    forward; the recompute forward's alone). What each recompute mode runs again is
    model_dims.layer_flops_per_token's: the block, the attention core, every second
    matmul; FlashAttention's backward recomputes QK^T (counted in the backward)."""
    forward = forward_gemms(d, job)
    backward = [b for g in forward for b in backward_of(g)]
    again = {Recompute.none: [], Recompute.full: forward,
             Recompute.selective: forward_gemms(d, job, matmuls=False),
             Recompute.selective_op: forward_gemms(d, job, attention=False,
                                                   every_second=True)}[job.recompute]
    if job.flash_attention and job.recompute in (Recompute.none, Recompute.selective_op):
        backward = backward + forward_gemms(d, job, matmuls=False)[:1]  # part of the backward
    return forward + backward + again, again


def logits_gemms(d: ModelDims, job: Job) -> list[Gemm]:
    """The output projection of the last stage (vocabulary split over mp), and its
    backward."""
    g = Gemm(int(job.micro_batch_size * local_seq(d, job)), d.vocab // job.mp, d.hidden)
    return [g, *backward_of(g)]
