"""The programs and workloads beside the trial program, tested in this process without
launching anything: trials.commbench (its arguments, message sizes, result rows and the
result file, as the orchestrator reads them back), trials.image_cnn (the synthetic images,
their augmentation, the CNN's shapes and the options it reads) and trials.mindformers_workload
(the adapter's own rules around a MindFormers model).

MindFormers is not installed in the main environment (``make mindformers-setup`` builds its
own), so the adapter is imported here with a stand-in ``mindformers`` module: these tests
check what the adapter does with a MindFormers config and model; tests/mindformers/ check it
against MindFormers itself. Tests that import MindSpore are marked slow."""

from __future__ import annotations

import json
import math
import sys
import types
from pathlib import Path

import numpy as np
import pytest
import yaml

from autotune.running import commbench as orchestrator
from autotune.settings import CommbenchSettings
from tests.conftest import ROOT
from trials import commbench
from trials.contract.schema import (
    Arch,
    Backend,
    ConfigError,
    DataConfig,
    LinkConfig,
    WorkloadConfig,
)


# -- commbench: arguments --------------------------------------------------------------
def test_commbench_parses_sizes_as_floats_and_has_the_documented_defaults(tmp_path):
    args = commbench.parse_args(["--sizes-kib", "4", "0.5", "1024", "--out",
                                 str(tmp_path / "r.json")])
    # Rule: sizes are KiB as floats, in the order given; 10 timed and 2 untimed repeats on
    # the CPU unless told.
    assert args.sizes_kib == [4.0, 0.5, 1024.0]
    assert (args.repeats, args.warmup, args.backend) == (10, 2, "CPU")
    assert args.out == tmp_path / "r.json" and isinstance(args.out, Path)


@pytest.mark.parametrize("argv", [
    ["--out", "r.json"],                                        # no sizes
    ["--sizes-kib", "4"],                                       # no result file
    ["--sizes-kib", "--out", "r.json"],                         # sizes flag, no size
    ["--sizes-kib", "4", "--out", "r.json", "--backend", "TPU"],  # not a backend
    ["--sizes-kib", "four", "--out", "r.json"],                 # not a number
], ids=["no-sizes", "no-out", "empty-sizes", "bad-backend", "bad-size"])
def test_commbench_refuses_incomplete_or_bad_arguments(argv, capsys):
    # Rule: sizes and the result file are required; a size is a number; the backend is
    # one of CPU, GPU, Ascend (argparse's usage error, exit code 2).
    with pytest.raises(SystemExit) as exit_:
        commbench.parse_args(argv)
    assert exit_.value.code == 2
    assert "usage:" in capsys.readouterr().err


def test_commbench_parses_the_arguments_the_orchestrator_passes(tmp_path):
    settings = CommbenchSettings(ranks=2, sizes_kib=[4, 1536, 0.25], repeats=3, warmup=1)
    argv = orchestrator.bench_argv(settings, Backend.CPU, tmp_path)
    program = argv[argv.index(str(orchestrator.SCRIPT)) + 1:]
    # Rule: the orchestrator runs this very file and what it passes after it parses here.
    assert Path(orchestrator.SCRIPT).samefile(commbench.__file__)
    args = commbench.parse_args(program)
    assert args.sizes_kib == [4.0, 1536.0, 0.25]
    assert (args.repeats, args.warmup, args.backend) == (3, 1, "CPU")
    assert args.out == tmp_path / "rank0.json"
    # Rule: the progress lines rank 0 prints carry the prefix the orchestrator follows.
    assert commbench.PROGRESS == orchestrator.PROGRESS


# -- commbench: sizes and bandwidths -----------------------------------------------------
def test_a_size_in_kib_is_whole_float32_elements_and_at_least_one():
    # Rule: KiB -> float32 elements (4 bytes each), rounded to whole elements.
    assert commbench.elements_of(4) == 1024
    assert commbench.elements_of(1.5) == 384
    assert commbench.elements_of(0.0049) == 1  # 5.0 bytes: one element and a bit
    # Rule: never an empty tensor, however small the size.
    assert commbench.elements_of(0.0001) == 1
    assert commbench.elements_of(0) == 1


@pytest.mark.parametrize("world, factor", [(1, 0.0), (2, 1.0), (4, 1.5), (8, 1.75)])
def test_bus_bandwidth_factor_is_two_n_minus_one_over_n(world, factor):
    # Rule: busbw = algbw x 2(n-1)/n (NCCL-tests): the ring all-reduce's share per rank.
    assert commbench.bus_factor(world) == pytest.approx(factor)


def test_a_result_row_is_the_median_and_spread_of_the_slowest_ranks_times():
    times = [0.004, 0.001, 0.002, 0.003, 0.010]
    r = commbench.row(64, times, world=4)
    # Rule: bytes are the whole elements sent (64 KiB = 16384 float32).
    assert (r["size_kib"], r["elements"], r["bytes"]) == (64, 16384, 65536)
    # Rule: median, 10th and 90th percentile and minimum of the repeats; every time kept.
    assert r["median_s"] == pytest.approx(0.003)
    assert r["min_s"] == pytest.approx(0.001)
    assert r["p10_s"] <= r["median_s"] <= r["p90_s"] <= max(times)
    assert r["p10_s"] == pytest.approx(np.percentile(times, 10))
    assert r["times_s"] == times
    # Rule: algbw = bytes / median time in GB/s (1e9 bytes); busbw = algbw x 2(n-1)/n.
    assert r["algbw_gbs"] == pytest.approx(65536 / 0.003 / 1e9)
    assert r["busbw_gbs"] == pytest.approx(r["algbw_gbs"] * 1.5)
    # Rule: the row is plain JSON (no numpy scalars).
    assert json.loads(json.dumps(r)) == r


def test_a_tiny_sizes_bytes_are_its_whole_elements_not_its_kib():
    r = commbench.row(0.0001, [0.5], world=2)
    # Rule: the bandwidth counts the bytes actually sent (one float32), not size_kib x 1024.
    assert r["bytes"] == 4 and r["elements"] == 1
    assert r["algbw_gbs"] == pytest.approx(4 / 0.5 / 1e9)


def test_result_rows_are_what_the_orchestrator_reads_back():
    rows = [commbench.row(4, [0.001] * 3, 2), commbench.row(1024, [0.01] * 3, 2)]
    result = {"rows": rows, "ranks": 2}  # as assemble() stores it
    # Rule: the orchestrator finds a row's bus bandwidth by its bytes.
    assert orchestrator.bandwidth_at(result, 4 * 1024) == pytest.approx(rows[0]["busbw_gbs"])
    assert orchestrator.bandwidth_at(result, 1024 * 1024) \
        == pytest.approx(rows[1]["busbw_gbs"])

    class Hardware:
        name, intra_node = "cpu", LinkConfig(bandwidth_gbs=1.0)

    # Rule: and renders every row's size in its table.
    table = orchestrator.render(result, Hardware())
    assert "4 KiB" in table and "1 MiB" in table


# -- commbench: the result file ----------------------------------------------------------
def test_the_result_file_is_written_whole_into_a_new_directory(tmp_path):
    out = tmp_path / "new" / "deeper" / "rank0.json"
    commbench.write_json(out, {"rows": [1, 2]})
    # Rule: the directory is created; the file is the JSON, with no temporary left beside it.
    assert json.loads(out.read_text()) == {"rows": [1, 2]}
    assert out.read_text().endswith("\n")
    assert [p.name for p in out.parent.iterdir()] == ["rank0.json"]
    commbench.write_json(out, {"rows": [3]})
    # Rule: a second write replaces the first.
    assert json.loads(out.read_text()) == {"rows": [3]}


def test_an_interrupted_write_leaves_no_result_file(tmp_path, monkeypatch):
    out = tmp_path / "rank0.json"

    def interrupted(src, dst):
        raise OSError("interrupted")

    monkeypatch.setattr(commbench.os, "replace", interrupted)
    with pytest.raises(OSError):
        commbench.write_json(out, {"rows": [1]})
    # Rule: whole or not at all: the orchestrator takes a present file as a finished run,
    # so the file appears only once its whole text is written.
    assert not out.exists()


# -- image_cnn (MindSpore) ---------------------------------------------------------------
@pytest.fixture(scope="module")
def image_cnn():
    from trials import image_cnn

    return image_cnn


@pytest.mark.slow
def test_synthetic_images_are_deterministic_and_brighter_by_class(image_cnn, monkeypatch):
    source = image_cnn.SyntheticImages(count=8, size=12, n_classes=4, io_wait_s=0.0)
    assert len(source) == 8
    image, label = source[5]
    # Rule: image i is size x size x 3 uint8, its label i mod the class count (int32).
    assert image.shape == (12, 12, 3) and image.dtype == np.uint8
    assert label == 1 and label.dtype == np.int32
    # Rule: the same index gives the same image (the dataset is reproducible).
    assert np.array_equal(source[5][0], image)
    # Rule: the class is the brightness band, so the labels are learnable.
    means = [source[i][0].mean() for i in range(4)]
    assert means == sorted(means) and means[3] - means[0] > 100
    waits = []
    monkeypatch.setattr(image_cnn.time, "sleep", waits.append)
    slow = image_cnn.SyntheticImages(count=4, size=4, n_classes=2, io_wait_s=0.02)
    _ = slow[0], slow[1]
    source[0]
    # Rule: each read of a slow source waits io_wait_s; a source without a wait never sleeps.
    assert waits == [0.02, 0.02]


@pytest.mark.slow
def test_augment_crops_to_a_float_chw_image_in_the_unit_range(image_cnn):
    image = np.arange(10 * 10 * 3, dtype=np.uint8).reshape(10, 10, 3)
    plain = image_cnn.Augment(crop=8, passes=0)(image)
    # Rule: a crop x crop float32 CHW image, contiguous, in [0, 1].
    assert plain.shape == (3, 8, 8) and plain.dtype == np.float32
    assert plain.flags["C_CONTIGUOUS"]
    # Rule: without jitter passes it is a crop of the image (maybe mirrored), scaled by
    # 1/255: nothing else changes the pixels.
    hwc = plain.transpose(1, 2, 0)
    crops = [image[t:t + 8, left:left + 8].astype(np.float32) / 255.0
             for t in range(3) for left in range(3)]
    assert any(np.array_equal(hwc, c) or np.array_equal(hwc, c[:, ::-1]) for c in crops)
    jittered = image_cnn.Augment(crop=8, passes=5)(
        np.full((10, 10, 3), 250, dtype=np.uint8))
    # Rule: colour jitter stays clipped to [0, 1].
    assert jittered.shape == (3, 8, 8) and jittered.dtype == np.float32
    assert jittered.min() >= 0.0 and jittered.max() <= 1.0


@pytest.mark.slow
def test_image_cnn_reads_its_options_and_counts_samples(image_cnn):
    from trials.contract.units import SAMPLES

    default = image_cnn.make_workload(WorkloadConfig(name="image_cnn"))
    # Rule: unset options take their defaults; the source is 8 pixels larger than the crop.
    assert isinstance(default, image_cnn.ImageCNNWorkload)
    assert (default.image_size, default.source_size, default.width, default.n_classes,
            default.augment_passes, default.io_wait_s, default.count) \
        == (32, 40, 8, 10, 4, 0.0, 2048)
    w = image_cnn.make_workload(WorkloadConfig(name="image_cnn", options={
        "image_size": 16, "io_wait_ms": 5, "augment_passes": 0}))
    # Rule: io_wait_ms is milliseconds per sample; the source follows image_size.
    assert (w.image_size, w.source_size, w.io_wait_s, w.augment_passes) == (16, 24, 0.005, 0)
    # Rule: throughput is in samples, one per image.
    assert (w.unit, w.tokens_per_sample) == (SAMPLES, 1)


@pytest.mark.slow
def test_the_cnn_maps_a_batch_of_images_to_class_logits_and_a_scalar_loss(image_cnn):
    import mindspore as ms

    w = image_cnn.make_workload(WorkloadConfig(name="image_cnn", options={
        "image_size": 8, "width": 2, "n_classes": 5}))
    model = w.build_model()
    x = ms.Tensor(np.random.default_rng(0).random((3, 3, 8, 8), dtype=np.float32))
    # Rule: (B, 3, S, S) images -> (B, classes) logits.
    assert model(x).shape == (3, 5)
    loss = w.build_loss(model)
    head = model.head
    head.weight.set_data(ms.numpy.zeros(head.weight.shape, ms.float32))
    head.bias.set_data(ms.numpy.zeros(head.bias.shape, ms.float32))
    value = loss(x, ms.Tensor(np.array([0, 3, 4], np.int32))).asnumpy()
    # Rule: the loss is the mean cross-entropy over the batch: ln(classes) for equal logits.
    assert value.shape == () and math.isclose(float(value), math.log(5), rel_tol=1e-5)


@pytest.mark.slow
def test_the_image_dataset_yields_endless_batches_of_augmented_images(image_cnn, tmp_path):
    w = image_cnn.make_workload(WorkloadConfig(name="image_cnn", options={
        "image_size": 8, "count": 6, "augment_passes": 1, "n_classes": 3}))
    dataset = w.build_dataset(DataConfig(num_workers=1), batch_size=4, num_shards=1,
                              shard_id=0, seed=0, cache_dir=tmp_path)
    batches = []
    for images, labels in dataset.create_tuple_iterator(num_epochs=1, output_numpy=True):
        batches.append((images, labels))
        if len(batches) == 3:  # 12 samples from 6: the dataset repeats
            break
    # Rule: full batches only (drop_remainder) of float32 CHW crops and int32 labels, and
    # the dataset never runs out.
    assert len(batches) == 3
    for images, labels in batches:
        assert images.shape == (4, 3, 8, 8) and images.dtype == np.float32
        assert labels.shape == (4,) and labels.dtype == np.int32
        assert set(labels.tolist()) <= {0, 1, 2}


# -- mindformers_workload (MindSpore; MindFormers stood in for) ------------------------------
class FakeConfig(dict):
    """MindFormers' LlamaConfig stand-in: the keyword arguments it was built with."""

    def __init__(self, **kwargs):
        super().__init__(kwargs)


class FakeLlama:
    """MindFormers' LlamaForCausalLM stand-in: remembers its config."""

    def __init__(self, config):
        self.config = config


@pytest.fixture
def mfw(monkeypatch):
    """trials.mindformers_workload imported against a stand-in ``mindformers``."""
    fake = types.ModuleType("mindformers")
    fake.LlamaConfig, fake.LlamaForCausalLM = FakeConfig, FakeLlama
    monkeypatch.setitem(sys.modules, "mindformers", fake)
    sys.modules.pop("trials.mindformers_workload", None)
    import trials.mindformers_workload as module

    yield module
    sys.modules.pop("trials.mindformers_workload", None)  # not kept with the stand-in
    import trials

    vars(trials).pop("mindformers_workload", None)


def tiny_llama(**options) -> WorkloadConfig:
    """The workload=mindformers_llama_tiny preset, its config path made absolute."""
    preset = yaml.safe_load((ROOT / "conf" / "workload" / "mindformers_llama_tiny.yaml")
                            .read_text())
    opts = {**preset["options"], "config": str(ROOT / preset["options"]["config"]), **options}
    dims = {k: preset[k] for k in ("n_layers", "d_model", "n_heads", "seq_len", "vocab_size")}
    return WorkloadConfig(name=preset["name"], entry=preset["entry"],
                          arch=Arch(preset["arch"]), options=opts, **dims)


@pytest.mark.slow
def test_the_adapter_takes_the_model_config_with_the_workloads_dimensions(mfw):
    w = mfw.workload(tiny_llama())
    assert isinstance(w, mfw.MindFormersWorkload)
    c = w.model_config
    # Rule: the workload's dimensions replace the config's (dims_from_workload).
    assert (c["num_layers"], c["hidden_size"], c["num_heads"], c["seq_length"],
            c["vocab_size"]) == (2, 64, 4, 32, 256)
    # Rule: throughput counts tokens: a sample is seq_length of them.
    assert w.tokens_per_sample == 32
    # Rule: the dataset gives inputs and labels already shifted; the model class is named
    # by model.arch.type, not model_config.type (which is dropped).
    assert c["input_sliced_sig"] is True and "type" not in c
    assert w.arch == "LlamaForCausalLM"
    # Rule: the data knobs of autotune's text pipeline are honoured.
    from trials.contract.knob_reach import DATA_KNOBS

    assert w.data_knobs == frozenset(DATA_KNOBS)


@pytest.mark.slow
def test_the_adapter_refuses_a_workload_without_a_mindformers_config(mfw):
    # Rule: no options.config: a ConfigError naming the option and an example.
    with pytest.raises(ConfigError, match=r"workload\.options\.config must name a MindFormers"):
        mfw.workload(WorkloadConfig(name="mine", entry="trials.mindformers_workload:workload"))


@pytest.mark.slow
def test_the_precision_is_the_models_own_compute_dtype_per_workload(mfw):
    a, b = mfw.workload(tiny_llama()), mfw.workload(tiny_llama())
    # Rule: the model casts itself (autotune adds no auto_mixed_precision): True, and the
    # dtype becomes its compute_dtype...
    written = b.model_config["compute_dtype"]  # the config's own: float16
    assert written != "float32"
    assert a.takes_precision("float32") is True
    assert a.model_config["compute_dtype"] == "float32"
    # ...in this workload's copy only: another workload and the loaded config keep theirs.
    assert b.model_config["compute_dtype"] == written
    assert a.full_config["model"]["model_config"]["compute_dtype"] == written


@pytest.mark.slow
def test_the_model_gets_the_cpu_kernels_keys_on_the_cpu_only(mfw, monkeypatch):
    from trials.contract.mindformers import CPU_MODEL_KEYS

    w = mfw.workload(tiny_llama())
    monkeypatch.setattr(mfw, "get_context", lambda key: "CPU")
    model = w.build_model()
    # Rule: the config class of the arch builds the model class, from the model_config.
    assert isinstance(model, FakeLlama) and isinstance(model.config, FakeConfig)
    assert model.config["seq_length"] == 32 and model.config["input_sliced_sig"] is True
    # Rule: on the CPU the kernels it has (rope slice, no fused RmsNorm, no flash
    # attention)...
    assert {k: model.config[k] for k in CPU_MODEL_KEYS} == CPU_MODEL_KEYS
    # ...set on the built model only, not in the workload's config.
    assert not CPU_MODEL_KEYS.items() <= w.model_config.items()
    monkeypatch.setattr(mfw, "get_context", lambda key: "Ascend")
    # Rule: elsewhere the config is taken as written.
    ascend = w.build_model()
    assert {k: ascend.config.get(k) for k in CPU_MODEL_KEYS} \
        == {k: w.model_config.get(k) for k in CPU_MODEL_KEYS}


@pytest.mark.slow
def test_the_adapters_flops_leave_out_the_embedding_and_blocks_are_the_layers(mfw):
    w = mfw.workload(tiny_llama())
    layers = (object(), object())
    params = [types.SimpleNamespace(size=n) for n in (256 * 64, 10_000, 2_000)]
    model = types.SimpleNamespace(trainable_params=lambda: params,
                                  model=types.SimpleNamespace(layers=layers))
    # Rule: PaLM's 6N + 12 L H Q T with N the parameters less the embedding (vocab x hidden).
    assert w.flops_per_token(model) == 6.0 * 12_000 + 12.0 * 2 * 4 * (64 // 4) * 32
    # Rule: full recompute recomputes each decoder layer.
    assert w.blocks(model) == list(layers)


@pytest.mark.slow
def test_the_dataset_is_autotunes_text_windows_of_the_models_length(mfw, monkeypatch,
                                                                    tmp_path):
    import trials.data

    calls = []
    monkeypatch.setattr(trials.data, "build_dataset",
                        lambda data, **kw: calls.append((data, kw)) or "dataset")
    w = mfw.workload(tiny_llama())
    data = DataConfig()
    assert w.build_dataset(data, batch_size=2, num_shards=2, shard_id=1, seed=7,
                           cache_dir=tmp_path) == "dataset"
    # Rule: windows of the model's seq_length over its vocabulary, sharded as asked.
    assert calls == [(data, {"seq_len": 32, "vocab_size": 256, "batch_size": 2,
                             "num_shards": 2, "shard_id": 1, "seed": 7,
                             "cache_dir": tmp_path})]


@pytest.mark.slow
def test_the_loss_is_the_models_own_training_loss(mfw):
    class Model:
        training = False

        def set_train(self, mode):
            self.training = mode

        def __call__(self, inputs, labels):
            return ("loss of", inputs, labels)

    model = Model()
    loss = mfw.workload(tiny_llama()).build_loss(model)
    # Rule: the model is put in training mode (MindFormers' causal LMs then return the mean
    # cross-entropy) and the loss is what it returns for (inputs, labels).
    assert isinstance(loss, mfw.CausalLMLoss) and model.training is True
    assert loss.construct("x", "y") == ("loss of", "x", "y")


def test_the_image_augmentation_is_the_same_for_the_same_sample_and_seed():
    """A run resumed from a checkpoint must replay the killed run's batches: the image
    workload's random crop, flip and jitter are drawn from the run's seed and the sample
    (unseeded, soak's replayed steps differed by up to 61 %)."""
    from trials.image_cnn import Augment, SyntheticImages

    image, _ = SyntheticImages(count=4, size=40, n_classes=10, io_wait_s=0.0)[3]
    first = Augment(32, 2, seed=7)(image)
    assert np.array_equal(first, Augment(32, 2, seed=7)(image))
    assert not np.array_equal(first, Augment(32, 2, seed=8)(image))
