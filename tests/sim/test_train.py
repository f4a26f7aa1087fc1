"""Tests of sim.train: stages and freezing, weight decay on named parameters, the cosine
schedule, probes and time to mechanism, checkpoints that resume to the uninterrupted run,
and the CPU device path (no tensor created anywhere else)."""
import math
import shutil

import pytest
import torch
from torch import nn

from sim.device import resolve_device
from sim.train import Stage, TrainConfig, _lr_at, train


class Quad(nn.Module):
    """Two parameter vectors pulled towards the batch: loss = |a - x|^2 + |b - 2x|^2."""

    def __init__(self):
        super().__init__()
        self.a = nn.Parameter(torch.zeros(3))
        self.b = nn.Parameter(torch.zeros(3))

    def loss(self, x):
        return ((self.a - x) ** 2).sum() + ((self.b - 2 * x) ** 2).sum()


class Linear(nn.Module):
    """Constant gradient 1 in every coordinate of ``a`` (loss = sum a); ``b`` gets a zero gradient."""

    def __init__(self):
        super().__init__()
        self.a = nn.Parameter(torch.zeros(2))
        self.b = nn.Parameter(torch.ones(2))

    def loss(self, x):
        return self.a.sum() + 0 * self.b.sum() + 0 * x.sum()  # b: a zero gradient, not None


def normal_batch(gen, step):
    return torch.randn(3, generator=gen, device=gen.device)


def test_stage_freezes_other_parameters_and_restores_grad():
    model = Quad()
    cfg = TrainConfig(stages=(Stage(20, 0.05, params=("a",)), Stage(0, 0.05, params=("b",))), seed=1, log_every=5)
    train(model, normal_batch, cfg)
    assert model.a.abs().sum() > 0.1  # trained
    assert torch.equal(model.b, torch.zeros(3))  # frozen in stage 1, no steps in stage 2
    assert model.a.requires_grad and model.b.requires_grad  # restored afterwards


def test_two_stages_train_in_turn():
    model = Quad()
    seen = []

    def sample(gen, step):
        seen.append((step, model.a.detach().clone(), model.b.detach().clone()))
        return normal_batch(gen, step)

    cfg = TrainConfig(stages=(Stage(5, 0.1, params=("a",)), Stage(5, 0.1, params=("b",))), seed=0, log_every=5)
    log = train(model, sample, cfg)
    a_end1, b_end1 = seen[5][1], seen[5][2]  # parameters when step 5 (stage 2) starts
    assert torch.equal(b_end1, torch.zeros(3)) and a_end1.abs().sum() > 0
    assert torch.equal(model.a, a_end1)  # a frozen in stage 2
    assert model.b.abs().sum() > 0
    assert [r["stage"] for r in log.rows] == [0, 1] and log.steps == 10


def test_unknown_stage_params_are_an_error():
    with pytest.raises(ValueError, match="model's parameters are"):
        train(Quad(), normal_batch, TrainConfig(stages=(Stage(2, 0.1, params=("W_KQ",)),)))
    with pytest.raises(ValueError, match="decay_params"):
        train(Quad(), normal_batch, TrainConfig(stages=(Stage(2, 0.1, weight_decay=0.1, decay_params=("c",)),)))


def test_weight_decay_applies_only_to_decay_params():
    """SGD, no loss gradient on b: b shrinks by (1 - lr wd) per step only when it is decayed."""
    for decay, expect_b in ((("b",), (1 - 0.1 * 0.5) ** 4), (("a",), 1.0)):
        model = Linear()
        cfg = TrainConfig(stages=(Stage(4, 0.1, optimizer="sgd", weight_decay=0.5, decay_params=decay),), log_every=4)
        train(model, normal_batch, cfg)
        assert torch.allclose(model.b, torch.full((2,), expect_b)), (decay, model.b)


def test_cosine_schedule_values_and_effect():
    st = Stage(8, 0.4, schedule="cosine")
    assert _lr_at(st, 0) == pytest.approx(0.4)
    assert _lr_at(st, 4) == pytest.approx(0.2)
    assert _lr_at(st, 8) == pytest.approx(0.0, abs=1e-12)
    assert _lr_at(Stage(8, 0.4), 5) == 0.4
    # With a constant gradient 1 and SGD, a moves by -sum_k lr_k exactly.
    model = Linear()
    train(model, normal_batch, TrainConfig(stages=(Stage(8, 0.4, optimizer="sgd", schedule="cosine"),), log_every=8))
    expected = -sum(0.4 * 0.5 * (1 + math.cos(math.pi * k / 8)) for k in range(8))
    assert torch.allclose(model.a, torch.full((2,), expected), atol=1e-6)
    # A wrong schedule (constant) would move it by -8 * 0.4: the check can fail.
    assert abs(expected + 3.2) > 0.5


def test_probes_thresholds_and_stop_when_crossed():
    model = Linear()  # a decreases by lr per step: probe -a crosses 0.35 at step 4 (logged every 2)
    cfg = TrainConfig(stages=(Stage(20, 0.1, optimizer="sgd"),), log_every=2)
    lines = []
    log = train(model, normal_batch, cfg, probes={"minus_a": lambda m: float(-m.a[0])},
                thresholds={"minus_a": 0.35}, bayes_loss=lambda x: -1.0, progress=lines.append)
    assert log.crossed["minus_a"]["step"] == 4 and log.crossed["minus_a"]["seconds"] >= 0
    assert log.column("minus_a")[:3] == pytest.approx([0.2, 0.4, 0.6])
    assert all(r["bayes_loss"] == -1.0 for r in log.rows) and len(lines) == len(log.rows) == 10
    stopped = train(Linear(), normal_batch, cfg, probes={"minus_a": lambda m: float(-m.a[0])},
                    thresholds={"minus_a": 0.35}, stop_when_crossed=True)
    assert stopped.steps == 4 and stopped.rows[-1]["step"] == 4


def _config():
    return TrainConfig(stages=(Stage(7, 0.05, params=("a",)), Stage(6, 0.03, optimizer="sgd", schedule="cosine")),
                       seed=5, log_every=2, checkpoint_every=3)


@pytest.mark.parametrize("k", [3, 9])  # a checkpoint inside stage 1 (Adam state) and one inside stage 2
def test_resume_from_checkpoint_equals_uninterrupted(tmp_path, k):
    torch.manual_seed(0)
    ckpt, copy = tmp_path / "run.pt", tmp_path / f"at{k}.pt"

    def sample(gen, step):
        if step == k:  # the checkpoint of step k was written after step k-1 finished
            shutil.copy(ckpt, copy)
        return normal_batch(gen, step)

    full = Quad()
    log_full = train(full, sample, _config(), checkpoint=ckpt)
    assert copy.exists() and torch.load(copy, weights_only=False)["step"] == k
    resumed = Quad()  # fresh model with the initial parameters; everything else comes from the checkpoint
    log_res = train(resumed, normal_batch, _config(), checkpoint=copy)
    assert torch.equal(resumed.a, full.a) and torch.equal(resumed.b, full.b)
    assert [r["loss"] for r in log_res.rows] == [r["loss"] for r in log_full.rows]
    assert log_res.steps == log_full.steps == 13
    # A run without the checkpoint's RNG state (fresh data) ends elsewhere: the comparison can fail.
    other = Quad()
    train(other, normal_batch, TrainConfig(stages=_config().stages, seed=6, log_every=2))
    assert not torch.equal(other.a, full.a)


def test_checkpoint_with_another_config_is_refused(tmp_path):
    ckpt = tmp_path / "c.pt"
    train(Quad(), normal_batch, _config(), checkpoint=ckpt)
    with pytest.raises(ValueError, match="different training config"):
        train(Quad(), normal_batch, TrainConfig(stages=_config().stages, seed=99), checkpoint=ckpt)


def test_cpu_device_path_creates_no_tensor_elsewhere(device_log):
    """device='cpu' explicitly (CUDA is absent here; 'auto' resolves to cpu): every tensor the
    training loop creates, the model's and the data's, lives on the CPU."""
    assert resolve_device("auto") == ("cuda" if torch.cuda.is_available() else "cpu")
    model = Quad()
    with device_log() as mode:
        log = train(model, normal_batch, TrainConfig(stages=(Stage(4, 0.1),), log_every=2), device="cpu",
                    bayes_loss=lambda x: float(x.sum()), probes={"a0": lambda m: float(m.a[0])})
    assert mode.devices == {"cpu"}, mode.devices
    assert {p.device.type for p in model.parameters()} == {"cpu"} and log.steps == 4
