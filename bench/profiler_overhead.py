"""What profiling costs: the profiler's step-time overhead and its fixed cost per run.

Each round runs, back to back, a plain trial and the same trial with
``run.profile_steps`` profiled steps after its measured ones (both with fixed step
counts and no compile cache, so that they do the same work up to the profiled
steps). Reported per workload, as medians and ranges over the rounds:

- in-run overhead: the profiled steps' mean time over the same process's
  unprofiled median (what the ``profile`` event calls ``overhead``);
- the extra wall time of a profiled run over the plain one: the profiled steps
  themselves plus the profiler's start, stop and parsing.

    .venv/bin/python -m bench.profiler_overhead
    .venv/bin/python -m bench.profiler_overhead --rounds 3 --workloads gpt_tiny
"""

from __future__ import annotations

import argparse

from bench._common import cli, log, median, print_table, run_trial, write_result

NAME = "profiler_overhead"
FIXED = ["run.adaptive=false", "run.warmup_steps=4", "run.measure_steps=12",
         "run.compile_cache=false"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--profile-steps", type=int, default=10)
    parser.add_argument("--workloads", nargs="+", default=["gpt_small", "gpt_tiny"])
    args = parser.parse_args()
    rows, raw = [], {}
    for workload in args.workloads:
        samples = []
        for r in range(args.rounds):
            base = [f"workload={workload}", *FIXED]
            plain = run_trial(base, quiet_wait_s=30).check()
            prof = run_trial([*base, f"run.profile_steps={args.profile_steps}"],
                             quiet_wait_s=30).check()
            p = prof.profile
            sample = {"in_run_overhead": p["overhead"],
                      "vs_plain_run": p["step_s"] / plain.step_time_median_s,
                      "extra_wall_s": prof.wall_s - plain.wall_s,
                      "profiled_steps_s": p["step_s"] * p["steps"],
                      "plain_wall_s": plain.wall_s, "profiled_wall_s": prof.wall_s,
                      "shares_sum": sum(p["shares"].values()),
                      "foreign_cores": max(plain.load.get("foreign_cores", 0),
                                           prof.load.get("foreign_cores", 0))}
            samples.append(sample)
            log(f"{workload} round {r + 1}: overhead x{sample['in_run_overhead']:.3f}, "
                f"extra wall {sample['extra_wall_s']:.1f} s")
        raw[workload] = samples

        def stat(key, fmt="{:.3f}"):
            values = [s[key] for s in samples]
            return (f"{fmt.format(median(values))} ({fmt.format(min(values))}.."
                    f"{fmt.format(max(values))})")

        rows.append([workload, args.rounds, stat("in_run_overhead"), stat("vs_plain_run"),
                     stat("extra_wall_s", "{:.1f}"), stat("profiled_steps_s", "{:.2f}"),
                     stat("plain_wall_s", "{:.1f}")])
    headers = ["workload", "rounds", "profiled/unprofiled step (same run)",
               "profiled step / plain run's", "extra wall s", "of which profiled steps s",
               "plain run wall s"]
    print_table(headers, rows)
    path = write_result(NAME, {"profile_steps": args.profile_steps, "fixed": FIXED,
                               "headers": headers, "rows": rows, "raw": raw})
    log(f"wrote {path}")


if __name__ == "__main__":
    cli(main)
