"""All-reduce bandwidth at several message sizes: the program msrun runs on every rank.

    msrun --worker_num=2 --local_worker_num=2 ... trials/commbench.py \\
        --sizes-kib 4 64 1024 --repeats 10 --warmup 2 --out result.json

Every rank joins the collective (``mindspore.communication.init``; mccl on the CPU),
then, per size, all-reduces a float32 tensor ``warmup`` times untimed and ``repeats``
times timed, each behind a barrier. A repeat's time is the slowest rank's (an
all-reduce is done when every rank has its result). Rank 0 writes the JSON result;
``python -m autotune commbench`` starts this program and reads it.

The bandwidths follow the NCCL-tests convention
(https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md): algorithm
bandwidth = bytes / time; bus bandwidth = algbw x 2(n-1)/n, the share of the bytes each
rank must send and receive in a ring all-reduce, so that it compares with the link's
own bandwidth whatever the number of ranks.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # started as a script (msrun): make `trials` importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np

#: The collective under test (MindSpore 2.10's torch-like, in-place API; PyNative only).
API = "mindspore.mint.distributed.all_reduce"
FLOAT32_BYTES = 4
#: Prefix of the progress lines on rank 0's stdout (msrun's worker_0.log), which the
#: orchestrator follows.
PROGRESS = "commbench:"


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes-kib", type=float, nargs="+", required=True,
                        help="message sizes in KiB (float32 tensors)")
    parser.add_argument("--repeats", type=int, default=10, help="timed all-reduces per size")
    parser.add_argument("--warmup", type=int, default=2, help="untimed all-reduces per size")
    parser.add_argument("--backend", default="CPU", choices=("CPU", "GPU", "Ascend"))
    parser.add_argument("--out", type=Path, required=True, help="JSON result (rank 0 writes)")
    return parser.parse_args(argv)


def bus_factor(world: int) -> float:
    """busbw / algbw of an all-reduce on ``world`` ranks: 2(n-1)/n (NCCL-tests,
    doc/PERFORMANCE.md)."""
    return 2 * (world - 1) / world


def row(size_kib: float, times: list[float], world: int) -> dict:
    """One size's result; ``times`` are the slowest rank's, one per timed repeat."""
    arr = np.asarray(times, dtype=float)
    elements = elements_of(size_kib)
    nbytes = elements * FLOAT32_BYTES
    median = float(np.median(arr))
    algbw = nbytes / median / 1e9  # GB/s, 1e9 bytes as the link figures of the profiles
    return {"size_kib": size_kib, "bytes": nbytes, "elements": elements,
            "median_s": median, "p10_s": float(np.percentile(arr, 10)),
            "p90_s": float(np.percentile(arr, 90)), "min_s": float(arr.min()),
            "times_s": [float(t) for t in arr], "algbw_gbs": algbw,
            "busbw_gbs": algbw * bus_factor(world)}


def elements_of(size_kib: float) -> int:
    return max(1, round(size_kib * 1024 / FLOAT32_BYTES))


def time_size(size_kib: float, repeats: int, warmup: int, world: int, backend: str
              ) -> list[float]:
    """This rank's time of each timed all-reduce of one size."""
    import mindspore as ms
    from mindspore import mint
    from mindspore.mint.distributed import all_reduce, barrier

    n = elements_of(size_kib)
    # One checked all-reduce first: ones summed over the ranks are the world size.
    check = mint.ones((n,), dtype=ms.float32)
    all_reduce(check)
    if not np.all(check.asnumpy() == world):
        raise RuntimeError(f"all-reduce of {size_kib:g} KiB returned a wrong sum")
    # Zeros stay zeros under a repeated sum (ones would double until inf).
    x = mint.zeros((n,), dtype=ms.float32)
    for _ in range(warmup):
        all_reduce(x)
    wait(x, backend)
    times = []
    for _ in range(repeats):
        # Blocks until every rank is here (measured: a late rank holds it). On the CPU it
        # logs "CPU device is not supported" once: its own runtime.synchronize(); harmless.
        barrier()
        start = time.perf_counter()
        all_reduce(x)
        wait(x, backend)
        times.append(time.perf_counter() - start)
    return times


def wait(x, backend: str) -> None:
    """Until the all-reduce into ``x`` is done: the call returns before it ran (PyNative
    queues it; measured on the CPU, 0.1 ms for a 600 ms all-reduce)."""
    if backend == "CPU":
        # runtime.synchronize() logs "CPU device is not supported" there; asnumpy()
        # waits for the tensor's pending ops and shares its memory (no copy).
        x.asnumpy()
    else:
        import mindspore as ms

        ms.runtime.synchronize()  # asnumpy() would add a device-to-host copy


def slowest(times: list[float], world: int) -> list[float]:
    """Each repeat's time on the slowest rank (every rank's list, gathered)."""
    from mindspore.mint.distributed import all_gather_object

    every: list = [None] * world
    all_gather_object(every, times)
    return [max(ranks) for ranks in zip(*every)]


def write_json(path: Path, data: dict) -> None:
    """Whole or not at all: the orchestrator takes a present file as a finished run."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    os.environ.setdefault("GLOG_v", "3")  # before MindSpore is imported: quiet logs
    import mindspore as ms
    from mindspore.communication import get_group_size, get_rank, init

    ms.set_device(args.backend)
    init()  # msrun's scheduler process runs this file too: it serves the cluster here
    rank, world = get_rank(), get_group_size()
    rows = []
    for size in args.sizes_kib:
        times = slowest(time_size(size, args.repeats, args.warmup, world, args.backend),
                        world)
        rows.append(row(size, times, world))
        if rank == 0:
            r = rows[-1]
            print(f"{PROGRESS} {size:g} KiB: median {1e3 * r['median_s']:.3f} ms, "
                  f"busbw {r['busbw_gbs']:.4g} GB/s", flush=True)
    if rank == 0:
        write_json(args.out, {"api": API, "backend": args.backend, "world": world,
                              "mindspore": ms.__version__, "repeats": args.repeats,
                              "warmup": args.warmup, "rows": rows})
    sys.stdout.flush()
    # Return normally: msrun's scheduler waits for every worker to leave the cluster.
    return 0


if __name__ == "__main__":
    sys.exit(main())
