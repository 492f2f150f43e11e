"""The training loop of a trial or a production run, read top to bottom.

build (context -> workload -> precision -> step cells) -> loop (data -> step ->
guards -> log -> checkpoint) -> scorecard. Guards raise; ``trials.train`` turns
what they raise into an outcome.
"""

from __future__ import annotations

import itertools
import logging
import math
import os
import time
from dataclasses import replace
from pathlib import Path
from typing import NamedTuple

import mindspore as ms
import mindspore.dataset as ds
import numpy as np
from mindspore import Tensor, nn

from trials import checkpoint
from trials.cache import cache_dir
from trials.calibrate import peak_for
from trials.contract.events import CheckpointRecord, Phase, StartRecord, StepRecord
from trials.contract.health import unhealthy_updates
from trials.contract.knob_reach import config_problem
from trials.contract.metrics import MetricsLog
from trials.contract.performance import Performance, spike_limit
from trials.contract.schema import (
    ConfigError,
    RunMode,
    TrialConfig,
    accumulation_steps,
    memory_budget_gib,
    micro_batch_size,
)
from trials.contract.scorecard import scorecard
from trials.contract.stats import step_time
from trials.contract.vocabulary import Recompute, precision_name
from trials.measurement import Measurement
from trials.memory import PeakMemory
from trials.runtime.applied import applied_settings
from trials.runtime.context import apply_jit_level
from trials.runtime.precision import apply_precision
from trials.step import AccumulatingTrainStep, TrainStep, make_scaler
from trials.workload import load_workload, reach_of

log = logging.getLogger(__name__)


#: Timed runs of the gradient all-reduce alone (their median is reported).
COMM_PROBES = 5


class StepOut(NamedTuple):
    """One step of the loop: what it returned, and its times (perf_counter seconds)."""

    loss: float
    norm: float
    overflow: bool
    updated: bool
    scale: float
    #: The loop's period: from the previous step's end (or this one's start) to its end.
    step_s: float
    #: Fetching its micro-batches.
    wait_s: float
    #: From its fetch to its end: the step itself, without the loop between steps.
    busy_s: float
    done: float


class Diverged(RuntimeError):
    """Non-finite loss for too long, or a loss spike (raised before the update lands), or
    most measured updates skipped (trials/contract/health.py)."""


class OverBudget(MemoryError):
    """Measured peak memory above the budget."""


class Trainer:
    def __init__(self, cfg: TrialConfig, metrics: MetricsLog, rank: int, world: int, *,
                 applied: dict | None = None) -> None:
        """``applied``: more of what took effect, for the start event (the compile cache)."""
        self.cfg, self.metrics, self.rank, self.world = cfg, metrics, rank, world
        self.extra_applied = applied or {}
        self.memory = PeakMemory()
        self.budget_gib = memory_budget_gib(cfg)
        self.steps: list[StepRecord] = []
        self._spikes_in_a_row = 0
        self._leaked: list[np.ndarray] = []
        self.communication: dict = {}
        self.pipeline: dict = {}
        self.profile: dict | None = None
        self.last_checkpoint: Path | None = None
        self._build()

    # -- build ----------------------------------------------------------------------------
    def _build(self) -> None:
        cfg = self.cfg
        self.workload = load_workload(cfg.workload)
        casts_itself = self.workload.takes_precision(cfg.precision.dtype.value)
        model = self.workload.build_model()
        blocks = self.workload.blocks(model)
        # A knob this workload cannot apply would be measured as if it had (the
        # orchestrator refuses it before launch; this is the trial run by hand).
        reach = replace(reach_of(self.workload, cfg.workload.name), recompute=bool(blocks))
        problem = config_problem(cfg, reach, cores=os.cpu_count() or 1)
        if problem:
            raise ConfigError(problem)
        if cfg.train.recompute is Recompute.full:
            for block in blocks:
                block.recompute()
        if cfg.parallel.mp > 1:
            self.workload.shard(model, dp=cfg.parallel.dp, mp=cfg.parallel.mp)
        self.flops_per_token = self.workload.flops_per_token(model)
        if not casts_itself:
            model = apply_precision(model, cfg)
        loss_net = self.workload.build_loss(model)
        if cfg.parallel.pp > 1:  # Ascend/GPU only: refused earlier on CPU
            loss_net = nn.PipelineCell(loss_net, cfg.train.micro_batches)
        optimizer = nn.AdamWeightDecay(loss_net.trainable_params(), learning_rate=cfg.train.lr,
                                       weight_decay=cfg.train.weight_decay)
        self.scaler = make_scaler(cfg.precision)
        self.accumulation = accumulation_steps(cfg)
        if self.accumulation == 1:
            self.step_fn = TrainStep(loss_net, optimizer, cfg.train.clip_norm, self.scaler)
            cells = [self.step_fn]
        else:
            self.step_fn = AccumulatingTrainStep(loss_net, optimizer, cfg.train.clip_norm,
                                                 self.scaler, self.accumulation)
            cells = self.step_fn.cells()
        apply_jit_level(cells, cfg)
        self.state_cells = cells
        # Every workload's pipeline gets the prefetch knob (a global of mindspore.dataset,
        # read when the pipeline is built); ``applied`` reads it back. And the run's seed,
        # so that its shuffle is the same when a run resumes (a workload's own pipeline
        # otherwise shuffled anew, and its resumed steps were not the killed run's).
        ds.config.set_prefetch_size(cfg.data.prefetch)
        ds.config.set_seed(cfg.train.seed)
        self.dataset = self.workload.build_dataset(
            cfg.data, batch_size=micro_batch_size(cfg), num_shards=cfg.parallel.dp,
            shard_id=self.rank, seed=cfg.train.seed, cache_dir=cache_dir(cfg))
        self.tokens_per_step = cfg.train.global_batch * self.workload.tokens_per_sample
        self.applied = applied_settings(cfg, step_cells=cells, dataset=self.dataset)
        if casts_itself:  # no auto_mixed_precision flags to read: the model casts itself
            self.applied["dense_compute_dtype"] = precision_name(cfg.precision.dtype)
        self.applied.update(
            loss_scaler=type(self.scaler).__name__ if self.scaler else None,
            accumulation_steps=self.accumulation, **self.extra_applied)

    # -- loop -----------------------------------------------------------------------------
    def _phase(self, step: int) -> Phase:
        if step == 0:
            return Phase.COMPILE
        if self.cfg.run.mode is RunMode.production:
            return Phase.TRAIN
        return self.measurement.phase

    def _agree(self, vote: bool) -> bool:
        """Every rank's vote (a collective under msrun): True only when all say True."""
        return vote if self.world == 1 else all(v > 0 for v in gather_floats(float(vote),
                                                                              self.world))

    def _loss_limit(self) -> float:
        """The spike rule's limit for the next step (the scorecard counts by the same)."""
        g = self.cfg.guard
        return spike_limit([s.loss for s in self.steps], g.spike_factor,
                           min_history=g.spike_after_steps)

    def _one_step(self, iterator, limit: float, since: float | None = None) -> StepOut:
        """Fetch the micro-batches (data wait), run the compiled step, sync on the loss.

        Its time (``step_s``) is the loop's period from ``since``, the previous step's end,
        when given: what the loop does between two steps (the loss guard, the memory
        sample, the metrics line, and any wait for the GIL while dataset threads hold it)
        is part of the wall time a run takes, and a figure that left it out ranked
        configurations by a time no run takes (image_cnn: 18-37 ms a step outside the
        fetch and the step, 1.1-1.6x the step)."""
        start = time.perf_counter()
        batches = [next(iterator) for _ in range(self.accumulation)]
        fetched = time.perf_counter()
        limit_t = Tensor(limit, ms.float32)
        if self.accumulation == 1:
            out = self.step_fn(limit_t, *batches[0])
        else:
            out = self.step_fn(limit_t, batches)
        loss, norm, overflow, updated, scale = (x.asnumpy() for x in out)
        done = time.perf_counter()
        return StepOut(float(loss), float(norm), bool(overflow), bool(updated), float(scale),
                       step_s=done - (start if since is None else since),
                       wait_s=fetched - start, busy_s=done - start, done=done)

    def _guard(self, loss: float, limit: float) -> None:
        g = self.cfg.guard
        if not math.isfinite(loss):
            recent = self.steps[-g.nonfinite_patience:]
            if len(recent) >= g.nonfinite_patience and all(
                    not math.isfinite(s.loss) for s in recent):
                raise Diverged(f"loss non-finite for {g.nonfinite_patience} consecutive steps")
        elif loss >= limit:
            self._spikes_in_a_row += 1
            spike = (f"loss spike {loss:.4g} >= {g.spike_factor:g} x running median "
                     f"({limit / g.spike_factor:.4g}); update skipped")
            # A trial ends at its first spike: its few steps cannot tell a spike from a
            # divergence and must not be spent finding out. A production run has skipped
            # the update and goes on until nonfinite_patience spikes in a row: on a loss
            # near its floor (a regression's squared error) one batch reads 8x the median
            # as noise, and a job that stops there never finishes, however often resumed.
            if self.cfg.run.mode is not RunMode.production:
                raise Diverged(spike)
            if self._spikes_in_a_row >= g.nonfinite_patience:
                raise Diverged(f"{spike}, {self._spikes_in_a_row} in a row")
            log.warning("step %d: %s (%d in a row; %d end the run)", self.steps[-1].step + 1,
                        spike, self._spikes_in_a_row, g.nonfinite_patience)
        else:
            self._spikes_in_a_row = 0
        peak = self.memory.peak_gib
        if peak > self.budget_gib:
            raise OverBudget(f"peak memory {peak:.2f} GiB (proportional set size of the trial's "
                             f"processes) over the memory budget {self.budget_gib:.2f} GiB")

    def run(self) -> dict:
        cfg = self.cfg
        production = cfg.run.mode is RunMode.production
        ckpt_dir = Path(cfg.run.checkpoint_dir)
        start_step = 0
        if production and cfg.run.resume:
            start_step = checkpoint.restore_latest(ckpt_dir, self._state_params())
            if start_step:
                log.info("resumed from step %d", start_step)
        self.measurement = Measurement(cfg.run, self._agree)
        total = cfg.run.steps if production else self.measurement.total_steps
        self.metrics.emit(StartRecord(
            world_size=self.world, start_step=start_step, total_steps=total,
            accumulation=self.accumulation, micro_batch_size=micro_batch_size(cfg),
            tokens_per_step=self.tokens_per_step, flops_per_token=self.flops_per_token,
            budget_gib=self.budget_gib, applied=self.applied))
        if not production:
            # Before the trial's own pipeline exists: nothing else fills a queue meanwhile.
            self.pipeline = self._time_pipeline_alone()
        # Skip the batches a resumed run has consumed so the data order continues.
        iterator = self.dataset.skip(start_step * self.accumulation).create_tuple_iterator(
            num_epochs=-1, output_numpy=False)
        # Kept as long as the trainer (trials.train keeps that until the process exits):
        # dropping it shuts the dataset's worker processes down, 4.5 s with
        # data.num_workers=2, before the summary and end events.
        self.iterator = iterator
        step, ended = start_step - 1, None
        for step in range(start_step, total):
            phase = self._phase(step - start_step)
            limit = self._loss_limit()
            out = self._one_step(iterator, limit, since=ended)
            ended = out.done
            record = self._record(step, phase, out)
            self._guard(record.loss, limit)
            if production:
                self._log_progress(record)
                if (step + 1) % cfg.run.checkpoint_every == 0 or step + 1 == total:
                    self._save(ckpt_dir, step + 1)
            elif self.measurement.after_step(record.step_s):
                break
        if not production:
            # A finite loss is not enough: most updates skipped is a run that did not train.
            unhealthy = unhealthy_updates(self.steps)
            if unhealthy:
                raise Diverged(unhealthy)
            self.communication = self._time_gradient_allreduce()
            if cfg.run.profile_steps:
                self.profile = self._profile(iterator, step + 1)
            # Last: it stops the trial's own pipeline, so that no worker refilling its
            # queue runs beside the step timed alone.
            self.pipeline |= self._time_step_alone(iterator)
        return self._summary()

    def _record(self, step: int, phase: Phase, out: StepOut) -> StepRecord:
        """The step's record, emitted and kept (after the memory samples it reports)."""
        self.memory.sample()
        if self.cfg.run.inject_leak_mib:  # fault injection (tests of the soak's leak detector)
            self._leaked.append(np.ones(int(self.cfg.run.inject_leak_mib * 2**20) // 8))
        record = StepRecord(step=step, phase=phase, loss=out.loss, grad_norm=out.norm,
                            step_s=out.step_s, data_wait_s=out.wait_s,
                            tokens=self.tokens_per_step, peak_rss_gib=self.memory.peak_gib,
                            clipped=bool(out.norm > self.cfg.train.clip_norm),
                            overflow=out.overflow, updated=out.updated, loss_scale=out.scale,
                            rss_gib=self.memory.anon_gib)
        self.steps.append(record)
        self.metrics.emit(record)
        return record

    # -- where the time goes (after measuring: in no measured number) -----------------------
    def _profile(self, iterator, first: int) -> dict:
        """``run.profile_steps`` more steps under mindspore.profiler; the analysis."""
        from trials.contract.breakdown import StepWindow
        from trials.profiling import StepProfiler

        cfg = self.cfg
        out_dir = Path(cfg.run.profile_dir)
        if self.rank:
            out_dir = out_dir / f"rank{self.rank}"
        profiler = StepProfiler(out_dir, cfg.run.profile_steps, self.rank,
                                ms.get_context("device_target"))
        with profiler:
            ended = None
            for step in range(first, first + cfg.run.profile_steps):
                limit = self._loss_limit()
                started_us = time.time_ns() / 1e3
                out = self._one_step(iterator, limit, since=ended)
                ended = out.done
                profiler.step_done(StepWindow(started_us, started_us + out.busy_s * 1e6,
                                              out.wait_s * 1e6, out.step_s * 1e6))
                self._guard(self._record(step, Phase.PROFILE, out).loss, limit)
        analysis = profiler.analyse()
        measured = [s.step_s for s in self.steps if s.phase is Phase.MEASURE]
        profiled = [s.step_s for s in self.steps if s.phase is Phase.PROFILE]
        unprofiled = step_time(measured) if measured else 0.0
        # The run's step time on both sides, of loop periods (the profiler's step_s is the
        # mean of the same periods, which its parts split).
        return {**analysis, "unprofiled_step_s": unprofiled,
                "overhead": step_time(profiled) / unprofiled if unprofiled else 0.0}

    def _time_pipeline_alone(self) -> dict:
        """The input pipeline alone: samples/s of a copy of it with the same knobs, timed
        before the trial's own pipeline starts (which would otherwise be refilling its
        prefetch queue on the same cores: issue 32 measured half the rate that way), then
        stopped, so that none of its workers runs beside the measured steps. Its first
        batch, which pays the start-up, is not timed. Summed over ranks."""
        n = self.cfg.run.probe_batches
        if not n:
            return {}
        started = time.perf_counter()
        cfg = self.cfg
        probe = self.workload.build_dataset(
            cfg.data, batch_size=micro_batch_size(cfg), num_shards=cfg.parallel.dp,
            shard_id=self.rank, seed=cfg.train.seed + 1, cache_dir=cache_dir(cfg))
        batches = probe.create_tuple_iterator(num_epochs=-1, output_numpy=False)
        next(batches)
        fetch_start = time.perf_counter()
        for _ in range(n * self.accumulation):
            next(batches)
        pipeline_s = (time.perf_counter() - fetch_start) / n
        batches.stop()  # its workers end here, not beside the measured steps
        samples = micro_batch_size(cfg) * self.accumulation * self.world
        return {"pipeline_samples_per_s": samples / pipeline_s if pipeline_s > 0 else None,
                "probe_s": time.perf_counter() - started}

    def _time_step_alone(self, iterator) -> dict:
        """The step alone, after measuring (and profiling): fed one batch again and again
        (no fetch), on the same process after compile, with the trial's own pipeline
        stopped. Summed over ranks."""
        n = self.cfg.run.probe_batches
        if not n:
            return {}
        started = time.perf_counter()
        samples = micro_batch_size(self.cfg) * self.accumulation * self.world
        same = itertools.repeat(next(iterator))
        iterator.stop()  # the pipeline idle: nothing but the step on the cores
        compute_s = float(np.median([self._one_step(same, math.inf).busy_s for _ in range(n)]))
        return {"compute_samples_per_s": samples / compute_s if compute_s > 0 else None,
                "probe_s": self.pipeline.get("probe_s", 0.0) + time.perf_counter() - started}

    def _time_gradient_allreduce(self) -> dict:
        """dp > 1: the gradient all-reduce of one step, timed alone after measuring.

        The same reducer (and so the same collective library and fusion) as the step's,
        on gradient-shaped zeros: what the step pays for communication when none of it
        overlaps compute (none does on the CPU). Every rank runs it (a collective).
        """
        # The cell that holds the reducer and the optimizer: the step, or its update half.
        tail = self.step_fn.update if isinstance(self.step_fn, AccumulatingTrainStep) \
            else self.step_fn
        reducer = tail.grad_reducer
        if self.world == 1 or isinstance(reducer, nn.Identity):
            return {}
        params = tail.optimizer.parameters
        grads = tuple(ms.ops.zeros(p.shape, p.dtype) for p in params)
        nbytes = sum(g.nbytes for g in grads)
        reducer(grads)[0].asnumpy()  # compile, and the first use of the communicator
        times = []
        for _ in range(COMM_PROBES):
            start = time.perf_counter()
            reducer(grads)[0].asnumpy()
            times.append(time.perf_counter() - start)
        comm_s = float(np.median(times))
        return {"comm_s": comm_s, "allreduce_bytes": int(nbytes),
                "comm_algbw_gbs": nbytes / comm_s / 1e9 if comm_s else 0.0}

    # -- production -----------------------------------------------------------------------
    def _state_params(self) -> dict:
        params = {}
        for cell in self.state_cells:
            for p in cell.get_parameters():
                if not p.name.startswith("accum."):
                    params[p.name] = p  # the loss scaler's too: the step cells hold them
        return params

    def _save(self, ckpt_dir: Path, step: int) -> None:
        if self.rank != 0:
            return
        path = checkpoint.save(ckpt_dir, step, self._state_params(), self.cfg.run.keep_checkpoints)
        self.last_checkpoint = path.resolve()
        self.metrics.emit(CheckpointRecord(step=step, path=str(path)))
        log.info("checkpoint %s", path)

    def _log_progress(self, record: StepRecord) -> None:
        # Counted as steps done (1-based), as the checkpoints' names and the job's last line.
        every, done = max(1, self.cfg.run.steps // 20), record.step + 1
        if done == 1 or done % every == 0 or done == self.cfg.run.steps:
            log.info("step %d/%d | loss %.4f | grad norm %.3f | %.0f %s/s | %.2f GiB",
                     done, self.cfg.run.steps, record.loss, record.grad_norm,
                     self.tokens_per_step / record.step_s, self.workload.unit,
                     record.peak_rss_gib)

    # -- summary --------------------------------------------------------------------------
    def job_line(self) -> str:
        """A production run's last line: steps, throughput, peak memory, last checkpoint."""
        from trials.job_summary import summary_line

        found = checkpoint.checkpoints(Path(self.cfg.run.checkpoint_dir))
        last = self.last_checkpoint or (found[-1][1].resolve() if found else None)
        return summary_line(self.steps, total_steps=self.cfg.run.steps,
                            unit=self.workload.unit, checkpoint=str(last) if last else None)

    def _summary(self) -> dict:
        # The peak the guard held against the budget, as it stood after the last guarded
        # step: the pipeline probe's second dataset (its own workers) after measuring is
        # the measurement's, not the workload's, and no job runs it.
        peaks = gather_floats(self.memory.peak_gib, self.world)
        peak = peak_for(self.cfg)
        card = scorecard(self.steps, flops_per_token=self.flops_per_token, peak_flops=peak.flops,
                         recompute=self.cfg.train.recompute is Recompute.full,
                         peak_rss_gib=peaks,
                         budget_gib=self.budget_gib, spike_factor=self.cfg.guard.spike_factor,
                         spike_after_steps=self.cfg.guard.spike_after_steps,
                         peak_source=peak.source, peak_missing=peak.missing)
        if self.cfg.run.mode is not RunMode.production:
            perf = Performance.from_dict(card["performance"])
            samples_per_step = self.cfg.train.global_batch
            samples_s = (samples_per_step / perf.step_time_s if perf.step_time_s else None)
            card["performance"] = perf.replace(warmup_end=self.measurement.warmup_end,
                                               measure_stop=self.measurement.stop_reason,
                                               samples_per_s=samples_s, **self.pipeline,
                                               unit=self.workload.unit,
                                               **self._per_rank(perf)).to_dict()
        return card

    def _per_rank(self, perf: Performance) -> dict:
        """dp > 1: every rank's step time, their spread, and the communication
        share of the step (from the all-reduce timed alone)."""
        if self.world == 1:
            return {}
        measured = [s.step_s for s in self.steps if s.phase is Phase.MEASURE]
        mine = step_time(measured) if measured else float("nan")
        ranks = gather_floats(mine, self.world)
        mean = float(np.mean(ranks))
        out = {"rank_step_s": tuple(ranks),
               "rank_spread": (max(ranks) - min(ranks)) / mean if mean > 0 else 0.0}
        if self.communication:
            step_s = perf.step_time_s or mine
            out.update(self.communication, comm_share=self.communication["comm_s"] / step_s
                       if step_s else 0.0)
        return out




def gather_floats(value: float, world: int) -> list[float]:
    """One float from every rank, in rank order (a real collective under msrun)."""
    if world == 1:
        return [value]
    from mindspore.mint.distributed import all_gather_object

    out: list = [None] * world
    all_gather_object(out, value)
    return [float(v) for v in out]
