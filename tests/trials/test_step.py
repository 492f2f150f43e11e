"""trials.step: one update per step, gated on a finite loss under the limit; accumulation
averages micro-batch gradients; the loss scaler the precision asks for."""

from __future__ import annotations

import mindspore as ms
import numpy as np
import pytest
from mindspore import amp, nn

from trials.contract.schema import LossScale, PrecisionConfig
from trials.step import AccumulatingTrainStep, TrainStep, make_scaler


def test_make_scaler_follows_the_precisions_loss_scale():
    # Rule: none -> no scaler; static -> a static scaler; dynamic -> a dynamic one with
    # the configured initial scale.
    assert make_scaler(PrecisionConfig()) is None
    assert isinstance(make_scaler(PrecisionConfig(loss_scale=LossScale.static)),
                      amp.StaticLossScaler)
    dynamic = make_scaler(PrecisionConfig(loss_scale=LossScale.dynamic, init_scale=128.0))
    assert isinstance(dynamic, amp.DynamicLossScaler)
    assert float(dynamic.scale_value.asnumpy()) == 128.0


def net_and_optimizer():
    class Loss(nn.Cell):
        def __init__(self):
            super().__init__()
            self.dense = nn.Dense(2, 1, weight_init="ones", bias_init="zeros")

        def construct(self, x, y):
            return ((self.dense(x) - y) ** 2).mean()

    loss = Loss()
    return loss, nn.SGD(loss.trainable_params(), learning_rate=0.1), ms


def batch(ms):
    x = ms.Tensor(np.array([[1.0, 2.0], [3.0, -1.0]], np.float32))
    y = ms.Tensor(np.array([[0.0], [1.0]], np.float32))
    return x, y


@pytest.mark.slow
def test_a_step_updates_only_under_the_loss_limit():
    loss_net, opt, ms = net_and_optimizer()
    step = TrainStep(loss_net, opt, clip_norm=100.0, scaler=None)
    w0 = loss_net.dense.weight.asnumpy().copy()
    loss, norm, overflow, updated, _ = step(ms.Tensor(1e-3, ms.float32), *batch(ms))
    # Rule: a loss at or above loss_limit stops the step before it touches the weights.
    assert not bool(updated) and not bool(overflow) and float(loss) > 1e-3
    assert np.array_equal(loss_net.dense.weight.asnumpy(), w0)
    loss, norm, overflow, updated, _ = step(ms.Tensor(1e6, ms.float32), *batch(ms))
    # Rule: a finite loss under the limit updates; the grad norm is reported.
    assert bool(updated) and float(norm) > 0
    assert not np.array_equal(loss_net.dense.weight.asnumpy(), w0)


@pytest.mark.slow
def test_accumulating_two_micro_batches_equals_one_step_on_their_mean():
    loss_a, opt_a, ms = net_and_optimizer()
    loss_b, opt_b, _ = net_and_optimizer()
    x, y = batch(ms)
    limit = ms.Tensor(1e6, ms.float32)
    TrainStep(loss_b, opt_b, clip_norm=100.0, scaler=None)(limit, x, y)
    acc = AccumulatingTrainStep(loss_a, opt_a, clip_norm=100.0, scaler=None, steps=2)
    acc(limit, [(x[:1], y[:1]), (x[1:], y[1:])])
    # Rule: K micro-batches give the mean of their gradients (not K times it), so the
    # update equals one step on the whole batch; the accumulators are zeroed after.
    assert np.allclose(loss_a.dense.weight.asnumpy(), loss_b.dense.weight.asnumpy(), atol=1e-5)
    assert all(not a.asnumpy().any() for a in acc.accumulators)
