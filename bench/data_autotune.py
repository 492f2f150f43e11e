"""autotune's data knobs against MindSpore's own dataset AutoTune, on the data-bound presets.

    python -m bench.data_autotune                       # both presets, 2 repeats (~25 min)
    python -m bench.data_autotune --workloads image_cnn_io --repeats 1

For each preset (``workload=image_cnn_io``: slow storage, ``workload=image_cnn``: Python
augmentation that takes the cores), side by side in one run:

1. **the bare truth table**: every point of ``search=data`` (``data.num_workers`` x
   ``data.multiprocessing`` x ``data.prefetch``), each measured ``--repeats`` times by a
   bare MindSpore loop of the same job (the preset's own model and pipeline,
   ``trials/image_cnn.py``, a Cell train step, nothing of autotune's), repeats
   interleaved;
2. **the sweep's pick**: ``python -m autotune sweep workload=<preset> search=data``, the
   trial it picks, and where that point stands in the truth table;
3. **dataset AutoTune**: the preset's own settings (one worker, threads, prefetch 16)
   with ``mindspore.dataset.config.set_enable_autotune(True)``, trained through
   ``Model.train(dataset_sink_mode=True)`` (AutoTune reads the device queue: it needs
   sink mode; on CPU MindSpore runs the steps without a device queue), for
   ``--autotune-steps`` steps with ``set_autotune_interval(--interval)``, its rate over
   the last ``--measure`` steps; and what its JSON says it changed. A control run of the
   same ``Model.train`` without AutoTune tells its effect from that of the loop;
4. **the probe's cost**: each sweep trial's ``probe_s`` against its wall time.

Every run records the load other processes put on the machine (bench/_common.py).
Results: bench/results/data_autotune.json.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import tempfile
import time
from pathlib import Path

from autotune.study.layout import study_url
from bench._common import (
    REPO,
    add_quiet_argument,
    cli,
    load_note,
    log,
    median,
    print_table,
    run_module,
    write_result,
)

PRESETS = ("image_cnn_io", "image_cnn")
#: search=data (conf/search/data.yaml): the points of the truth table.
SPACE = REPO / "conf" / "search" / "data.yaml"
#: The presets' own data settings (DataConfig's defaults): where AutoTune starts.
BASELINE = {"data.num_workers": 1, "data.multiprocessing": False, "data.prefetch": 16}


def grid() -> list[dict]:
    from omegaconf import OmegaConf

    knobs = OmegaConf.to_container(OmegaConf.load(SPACE).knobs)
    paths = list(BASELINE)
    return [dict(zip(paths, values)) for values in itertools.product(*(knobs[p] for p in paths))]


def key(point: dict) -> str:
    return (f"workers={point['data.num_workers']} mp={str(point['data.multiprocessing']).lower()}"
            f" prefetch={point['data.prefetch']}")


# -- one bare run (in its own process) ------------------------------------------------------
def bare(args: argparse.Namespace) -> dict:
    """The preset's model and pipeline under plain MindSpore: samples/s of the measured steps."""
    import mindspore as ms
    import mindspore.dataset as ds
    from mindspore import nn
    from omegaconf import OmegaConf

    from trials.contract.schema import DataConfig, TrainConfig, WorkloadConfig
    from trials.image_cnn import make_workload

    ms.set_device("CPU")
    ms.set_context(mode=ms.GRAPH_MODE)
    ms.set_seed(0)
    ds.config.set_seed(0)
    ds.config.set_prefetch_size(args.prefetch)
    prefix = Path.cwd() / "autotune"
    if args.autotune:
        ds.config.set_enable_autotune(True, str(prefix))
        ds.config.set_autotune_interval(args.interval)
    preset = OmegaConf.load(REPO / "conf" / "workload" / f"{args.workload}.yaml")
    if args.io_wait_ms is not None:
        preset.options.io_wait_ms = args.io_wait_ms
    workload = make_workload(OmegaConf.to_object(OmegaConf.merge(
        OmegaConf.structured(WorkloadConfig), preset)))
    batch = TrainConfig().global_batch
    dataset = workload.build_dataset(
        DataConfig(num_workers=args.workers, multiprocessing=args.mp, prefetch=args.prefetch),
        batch_size=batch, num_shards=1, shard_id=0, seed=0, cache_dir=Path.cwd())
    loss = workload.build_loss(workload.build_model())
    step = nn.TrainOneStepCell(loss, nn.AdamWeightDecay(loss.trainable_params(), 1e-3))
    step.set_jit_config(ms.JitConfig(jit_level="O0"))
    total = args.warmup + args.measure
    ends: list[float] = []
    if args.model_train:  # Model.train's loop, stopped after `total` steps
        class Stop(ms.train.Callback):
            def on_train_step_end(self, run_context):
                ends.append(time.perf_counter())
                if len(ends) >= total:
                    run_context.request_stop()

        # On CPU the steps run without a device queue and an endless dataset is one epoch.
        ms.Model(step).train(1, dataset, callbacks=[Stop()], dataset_sink_mode=True)
    else:
        iterator = dataset.create_tuple_iterator(num_epochs=-1)
        for _ in range(total):
            step(*next(iterator))
            ends.append(time.perf_counter())
    measured = ends[-args.measure - 1:]
    out = {"samples_per_s": args.measure * batch / (measured[-1] - measured[0]),
           "steps": len(ends), "batch": batch}
    found = sorted(Path.cwd().glob("autotune*.json"))
    if found:
        tuned = json.loads(found[0].read_text())
        out["autotune"] = {"remark": tuned.get("remark"), "summary": tuned.get("summary")}
    return out


def bare_run(workload: str, point: dict, args: argparse.Namespace, *, autotune: bool = False,
             model_train: bool = False, steps: int | None = None) -> dict:
    argv = ["--bare", "--workload", workload, "--workers", str(point["data.num_workers"]),
            "--prefetch", str(point["data.prefetch"]), "--warmup",
            str((steps or args.warmup + args.measure) - args.measure),
            "--measure", str(args.measure), "--interval", str(args.interval)]
    argv += ["--mp"] * point["data.multiprocessing"] + ["--autotune"] * autotune
    argv += ["--model-train"] * model_train
    return run_module("bench.data_autotune", argv, timeout_s=600, quiet_wait_s=args.max_wait)


# -- the sweep -------------------------------------------------------------------------------
def sweep(workload: str, runs: Path, args: argparse.Namespace) -> dict:
    import subprocess

    import optuna

    from autotune.settings import SweepConfig
    from autotune.study.choice import study_verdict
    from autotune.study.records import load_records
    from trials.contract.compose import compose
    from trials.contract.hostload import LoadMeter

    overrides = [f"workload={workload}", "search=data", f"sweep.study={workload}",
                 f"sweep.runs_dir={runs}", "sweep.progress=false", "profile.after_sweep=false"]
    log(f"sweep: python -m autotune sweep {' '.join(overrides)}")
    meter = LoadMeter()
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "autotune", "sweep", *overrides], cwd=REPO,
                          capture_output=True, text=True, timeout=3600)
    wall = time.perf_counter() - start
    load = meter.stop()
    if proc.returncode != 0:
        raise RuntimeError(f"the sweep failed (rc {proc.returncode}):\n{proc.stderr[-2000:]}")
    composed = compose("sweep", overrides, with_choices=True, schema=SweepConfig)
    study = optuna.load_study(study_name=workload,
                              storage=study_url(runs, workload))
    records = load_records(study)
    pick = study_verdict(records, composed).pick
    trials = [{"trial": r.number, "params": r.params, "outcome": r.reason_text,
               "samples_per_s": r.tokens_per_s, "wall_s": r.wall_s,
               "probe_s": r.perf.probe_s} for r in records if r.launched]
    return {"command": f"python -m autotune sweep {' '.join(overrides)}", "wall_s": wall,
            "load": load, "trials": trials,
            "pick": {"trial": pick.number, "params": pick.params,
                     "samples_per_s": pick.tokens_per_s} if pick else None}


# -- one preset, side by side ------------------------------------------------------------------
def preset(workload: str, args: argparse.Namespace, runs: Path) -> dict:
    points = grid()
    table: dict[str, list[dict]] = {key(p): [] for p in points}
    for r in range(args.repeats):
        for point in points if r % 2 == 0 else points[::-1]:  # interleaved, both orders
            run = bare_run(workload, point, args)
            table[key(point)].append(run)
            log(f"{workload} bare {key(point)} (repeat {r + 1}): {run['samples_per_s']:.1f} "
                f"samples/s, foreign load {run['load'].get('foreign_cores', 0):.2f} cores")
    truth = {k: median([run["samples_per_s"] for run in runs_]) for k, runs_ in table.items()}
    best = max(truth, key=truth.get)
    swept = sweep(workload, runs, args)
    pick = swept["pick"]
    pick_key = key(pick["params"]) if pick else None
    tuned = [bare_run(workload, BASELINE, args, autotune=True, model_train=True,
                      steps=args.autotune_steps) for _ in range(args.repeats)]
    control = [bare_run(workload, BASELINE, args, model_train=True, steps=args.autotune_steps)
               for _ in range(args.repeats)]
    for name, runs_ in (("AutoTune", tuned), ("Model.train control", control)):
        log(f"{workload} {name}: " + ", ".join(f"{r['samples_per_s']:.1f}" for r in runs_)
            + " samples/s")
    probes = [t for t in swept["trials"] if t["probe_s"] and t["wall_s"]]
    return {
        "truth": {k: {"median_samples_per_s": truth[k],
                      "runs": [r["samples_per_s"] for r in table[k]],
                      "foreign_cores": [r["load"].get("foreign_cores") for r in table[k]]}
                  for k in table},
        "truth_best": best, "baseline": key(BASELINE),
        "sweep": swept, "sweep_pick": pick_key,
        "sweep_pick_truth_ratio": truth[pick_key] / truth[best] if pick_key else None,
        "autotune": {"median_samples_per_s": median([r["samples_per_s"] for r in tuned]),
                     "runs": [r["samples_per_s"] for r in tuned],
                     "what_it_did": [r.get("autotune") for r in tuned],
                     "foreign_cores": [r["load"].get("foreign_cores") for r in tuned]},
        "model_train_control": {
            "median_samples_per_s": median([r["samples_per_s"] for r in control]),
            "runs": [r["samples_per_s"] for r in control],
            "foreign_cores": [r["load"].get("foreign_cores") for r in control]},
        "probe": {"trials": len(probes),
                  "probe_s_median": median([t["probe_s"] for t in probes]) if probes else None,
                  "share_of_wall_median": median([t["probe_s"] / t["wall_s"] for t in probes])
                  if probes else None,
                  "share_of_wall_max": max((t["probe_s"] / t["wall_s"] for t in probes),
                                           default=None)},
        "loads": [r["load"] for rs in (*table.values(), tuned, control) for r in rs],
    }


def show(workload: str, result: dict) -> None:
    truth = result["truth"]
    base = truth[result["baseline"]]["median_samples_per_s"]
    print(f"\n{workload}: bare truth table (samples/s, median of repeats)")
    print_table(["configuration", "samples/s", "x baseline", "runs", "note"],
                [[k, v["median_samples_per_s"], v["median_samples_per_s"] / base,
                  " ".join(f"{x:.0f}" for x in v["runs"]),
                  ("best " if k == result["truth_best"] else "")
                  + ("sweep's pick " if k == result["sweep_pick"] else "")
                  + ("baseline" if k == result["baseline"] else "")]
                 for k, v in truth.items()])
    pick = result["sweep"]["pick"]
    at, ctl = result["autotune"], result["model_train_control"]
    print_table(["who", "configuration", "samples/s", "x baseline (bare)"], [
        ["bare truth's best", result["truth_best"],
         truth[result["truth_best"]]["median_samples_per_s"],
         truth[result["truth_best"]]["median_samples_per_s"] / base],
        ["sweep's pick (bare)", result["sweep_pick"] or "-",
         truth[result["sweep_pick"]]["median_samples_per_s"] if pick else None,
         truth[result["sweep_pick"]]["median_samples_per_s"] / base if pick else None],
        ["sweep's pick (its trial)", result["sweep_pick"] or "-",
         pick["samples_per_s"] if pick else None, None],
        ["dataset AutoTune", "from " + result["baseline"], at["median_samples_per_s"],
         at["median_samples_per_s"] / base],
        ["Model.train, no AutoTune", result["baseline"], ctl["median_samples_per_s"],
         ctl["median_samples_per_s"] / base]])
    for did in at["what_it_did"]:
        if did:
            print(f"AutoTune: {did['remark']}\n  " + "\n  ".join(did["summary"] or []))
    p = result["probe"]
    if p["trials"]:
        print(f"probe: {p['trials']} trials, median {p['probe_s_median']:.2f} s, "
              f"{100 * p['share_of_wall_median']:.1f} % of a trial's wall time (max "
              f"{100 * p['share_of_wall_max']:.1f} %)")
    print(load_note(result["loads"]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bare", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    parser.add_argument("--workload", default="image_cnn_io", help=argparse.SUPPRESS)
    parser.add_argument("--workers", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--mp", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--prefetch", type=int, default=16, help=argparse.SUPPRESS)
    parser.add_argument("--autotune", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--model-train", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--io-wait-ms", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--workloads", nargs="+", default=list(PRESETS), choices=PRESETS)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=20, help="bare steps before measuring")
    parser.add_argument("--measure", type=int, default=100, help="bare steps measured")
    parser.add_argument("--autotune-steps", type=int, default=600,
                        help="steps of each AutoTune run (its rate: the last --measure)")
    parser.add_argument("--interval", type=int, default=20,
                        help="AutoTune's set_autotune_interval, in steps")
    add_quiet_argument(parser)
    args = parser.parse_args(argv)
    if args.bare:
        Path(args.out).write_text(json.dumps(bare(args)))
        return 0
    settings = {k: getattr(args, k) for k in ("repeats", "warmup", "measure",
                                              "autotune_steps", "interval")}
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="bench-data-autotune-") as runs:
        for w in args.workloads:  # written after each preset: a long run keeps what it has
            results[w] = preset(w, args, Path(runs))
            show(w, results[w])
            path = write_result("data_autotune", {"settings": settings, "presets": results},
                                directory=REPO / "bench" / "results")
            print(f"\nwritten: {path}")
    return 0


if __name__ == "__main__":
    cli(main)
