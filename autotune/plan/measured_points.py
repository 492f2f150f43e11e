"""Measured training runs from a CSV, as the cost model sees them (``python -m autotune
calibrate``): the user's own runs or a published table, on the hardware profile given.

One row per run. Required columns (names as the trial config spells its knobs):

    n_layers, d_model, n_heads, seq_len, vocab_size     the model
    dp, mp, pp, global_batch, micro_batches             the split and the batch
    precision (fp32 / fp16 / bf16), recompute (none / selective / full)
    step_s                                              measured seconds per optimizer step

Optional: ``arch`` (gpt / llama, default gpt), ``kv_heads`` and ``ffn_dim`` (0 = the
defaults of the trial config: all heads, 4 x d_model), ``sequence_parallel`` and
``optimizer_shard`` (true / false, default false), ``shard_level`` (0 none, 1 optimizer
states, 2 and gradients, 3 and parameters: ZeRO-1/2/3, FSDP = 3; default 1 when
``optimizer_shard`` is true, else 0), ``virtual_stages`` (interleaved pipeline chunks,
default 1), ``context_parallel`` (default 1), ``flash_attention`` and
``overlap_grad_reduce`` (true / false, default false), ``reduce_in_fp32`` (true / false,
default true: the data-parallel gradients reduced in fp32, else in the 16-bit dtype, as
MindSpore does for 16-bit parameters), the memory of the framework
(true / false, default false, ``autotune.plan.layout.Job`` says what each keeps):
``fp32_main_grads`` (Megatron-LM's fp32 gradients beside 16-bit parameters),
``keeps_16bit_grads`` (and the 16-bit ones kept too: DeepSpeed's BF16_Optimizer) and
``unfused_cross_entropy`` (PyTorch's cross_entropy on fp32 logits: torchtitan),
``peak_gib`` (the most loaded device's peak memory), ``nodes`` (default: as few as the
profile's ``devices`` per node allow).
A bad row is one line naming the row and the column (ConfigError); so is a column named
twice, and a CSV of more than MAX_ROWS runs.
"""

from __future__ import annotations

import csv
import math
from dataclasses import fields
from pathlib import Path

from autotune.plan.calibration import Measurement
from autotune.plan.layout import Cluster, Job
from autotune.plan.model_dims import ModelDims
from trials.contract.schema import Arch, ConfigError, DType, HardwareConfig, WorkloadConfig
from trials.contract.vocabulary import dtype_of, recompute_mode

REQUIRED = ("n_layers", "d_model", "n_heads", "seq_len", "vocab_size", "dp", "mp", "pp",
            "global_batch", "micro_batches", "precision", "recompute", "step_s")
FLAGS = ("sequence_parallel", "optimizer_shard", "flash_attention", "overlap_grad_reduce",
         "reduce_in_fp32", "fp32_main_grads", "keeps_16bit_grads", "unfused_cross_entropy")
#: An empty flag is the Job's default for it (optimizer_shard, which the Job spells as
#: shard_level, is false).
FLAG_DEFAULTS = {f.name: f.default for f in fields(Job) if f.name in FLAGS}
OPTIONAL = ("arch", "kv_heads", "ffn_dim", *FLAGS, "shard_level", "virtual_stages",
            "context_parallel", "peak_gib", "nodes")
POSITIVE_INTS = ("n_layers", "d_model", "n_heads", "seq_len", "vocab_size", "dp", "mp", "pp",
                 "global_batch", "micro_batches", "nodes", "virtual_stages",
                 "context_parallel")
DEFAULT_ONE = ("nodes", "virtual_stages", "context_parallel")  # empty = 1 (nodes: fewest)
#: Rows a CSV may have: leave-one-out fits once per row, each fit over every other row (200
#: rows took 15 s, 800 took 196 s on one core; 1,000 take about 5 minutes).
MAX_ROWS = 1000
BOOLEANS = {"true": True, "false": False, "1": True, "0": False}


def read_points(path: Path, hardware: HardwareConfig, peak_flops) -> list[Measurement]:
    """Every row of ``path`` as a :class:`Measurement`; ``peak_flops(job)`` is
    the profile's peak FLOP/s per device (the cost model's)."""
    try:
        with path.open(encoding="utf-8-sig", newline="") as handle:  # a BOM is no column
            reader = csv.DictReader(handle)
            header = [h.strip() for h in reader.fieldnames or []]
            # csv.DictReader keeps the last of two same-named columns and drops the first.
            twice = sorted({c for c in header if header.count(c) > 1})
            if twice:
                raise ConfigError(f"{path}: column(s) {', '.join(twice)} appear more than "
                                  "once; keep one column of each name")
            missing = [c for c in REQUIRED if c not in header]
            if missing:
                # A spreadsheet's export with another separator reads as one wide column.
                other = next((f" (the header is separated by {sep!r}: separate the columns "
                              "by commas)" for sep in (";", "\t") if len(header) == 1
                              and sep in header[0]), "")
                raise ConfigError(f"{path}: missing column(s) {', '.join(missing)}{other}; "
                                  f"the columns are {', '.join(REQUIRED)} (optional: "
                                  f"{', '.join(OPTIONAL)})")
            unknown = [c for c in header if c not in REQUIRED + OPTIONAL]
            if unknown:
                raise ConfigError(f"{path}: unknown column(s) {', '.join(unknown)}; the "
                                  f"columns are {', '.join(REQUIRED + OPTIONAL)}")
            rows = [{k.strip(): (v or "").strip() for k, v in row.items()} for row in reader]
    except OSError as exc:
        raise ConfigError(f"cannot read calibrate.csv={path} ({exc.strerror or exc}): give "
                          "the path of a CSV of measured runs") from exc
    except (csv.Error, UnicodeDecodeError) as exc:
        raise ConfigError(f"calibrate.csv={path} is not a CSV file ({exc})") from exc
    if not rows:
        raise ConfigError(f"{path} has no rows: one measured run per row")
    if len(rows) > MAX_ROWS:
        raise ConfigError(f"{path} has {len(rows)} runs; calibrate takes at most {MAX_ROWS} "
                          "(its leave-one-out error refits once per run, so time grows with "
                          "the square of the rows: 800 take about 3 minutes): keep a sample "
                          "of the runs, e.g. every k-th row")
    # Row numbers as a spreadsheet shows them: the header is row 1.
    return [point(row, n, path, hardware, peak_flops) for n, row in enumerate(rows, start=2)]


def _non_finite(text: str) -> bool:
    try:
        return not math.isfinite(float(text))
    except ValueError:
        return False


def point(row: dict, n: int, path: Path, hardware: HardwareConfig, peak_flops) -> Measurement:
    def bad(column: str, why: str) -> ConfigError:
        return ConfigError(f"{path} row {n}, column {column}: {row.get(column)!r} {why}")

    def number(column: str, kind: type, *, optional: bool = False):
        """The column as ``kind`` (positive), or None where an optional one is empty."""
        text = row.get(column, "")
        if optional and not text:
            return None
        what = "a whole number" if kind is int else "a number"
        if _non_finite(text):  # nan, inf, -Infinity: the value was not measured
            raise bad(column, "is not a finite number: write the measured value")
        try:
            value = kind(text)
        except ValueError:
            raise bad(column, f"is not {what}") from None
        if value <= 0:
            raise bad(column, "must be >= 1" if kind is int else
                      "must be a positive number (seconds or GiB)")
        return value

    ints = {c: number(c, int, optional=c in DEFAULT_ONE) for c in POSITIVE_INTS}
    # 0 (or empty) = the trial config's default: all heads, 4 x d_model.
    optional_ints = {c: 0 if row.get(c, "") in ("", "0") else number(c, int)
                     for c in ("kv_heads", "ffn_dim")}
    floats = {c: number(c, float, optional=c == "peak_gib") for c in ("step_s", "peak_gib")}
    flags = {}
    for column in FLAGS:
        text = row.get(column, "").lower()
        if text and text not in BOOLEANS:
            raise bad(column, "must be true or false")
        flags[column] = BOOLEANS[text] if text else FLAG_DEFAULTS.get(column, False)
    try:
        arch = Arch(row.get("arch") or "gpt")
    except ValueError:
        raise bad("arch", f"is not one of {', '.join(a.value for a in Arch)}") from None
    shard_text = row.get("shard_level", "")
    if shard_text not in ("", "0", "1", "2", "3"):
        raise bad("shard_level", "must be 0, 1, 2 or 3 (ZeRO stage; FSDP = 3)")
    shard_level = int(shard_text) if shard_text else int(flags["optimizer_shard"])
    dtype = dtype_of(row["precision"], f"{path} row {n}, column precision")
    recompute = recompute_mode(row["recompute"], f"{path} row {n}, column recompute")
    workload = WorkloadConfig(arch=arch, n_layers=ints["n_layers"], d_model=ints["d_model"],
                              n_heads=ints["n_heads"], kv_heads=optional_ints["kv_heads"],
                              ffn_dim=optional_ints["ffn_dim"], seq_len=ints["seq_len"],
                              vocab_size=ints["vocab_size"])
    job = Job(dp=ints["dp"], mp=ints["mp"], pp=ints["pp"], global_batch=ints["global_batch"],
              micro_batches=ints["micro_batches"], dtype=dtype, recompute=recompute,
              shard_level=shard_level,
              virtual_stages=ints["virtual_stages"] or 1,
              context_parallel=ints["context_parallel"] or 1,
              **{k: v for k, v in flags.items() if k in FLAG_DEFAULTS})
    if job.keeps_16bit_grads and not (job.fp32_main_grads and job.dtype is not DType.float32):
        raise bad("keeps_16bit_grads", "keeps 16-bit gradients beside fp32 main grads: it "
                                       "needs fp32_main_grads true and fp16 or bf16")
    if job.virtual_stages > 1 and job.pp == 1:
        raise bad("virtual_stages", "interleaves pipeline stages: it needs pp > 1")
    if job.global_batch % (job.dp * job.micro_batches):
        raise bad("global_batch", f"is not divisible by dp {job.dp} x micro_batches "
                                  f"{job.micro_batches}")
    nodes = ints.get("nodes") or max(1, math.ceil(job.devices / hardware.devices))
    cluster = Cluster(hardware, nodes)
    if job.devices > cluster.devices:
        raise bad("nodes", f"gives {cluster.devices} devices of {hardware.name}, fewer than "
                           f"dp x mp x pp x context_parallel = {job.devices}")
    return Measurement(dims=ModelDims.of(workload), job=job, cluster=cluster,
                       peak_flops_per_device=peak_flops(job),
                       peak_gib=floats["peak_gib"], step_s=floats["step_s"])
