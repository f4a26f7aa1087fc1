"""Tests of sim.train: stages and freezing, weight decay on named parameters, the cosine
schedule, AdamW (decoupled decay, betas), probes and time to mechanism, the evaluation hook
(its steps, the losses it sees, stopping), checkpoints that resume to the uninterrupted run,
and the CPU device path (no tensor created anywhere else)."""
import dataclasses
import math
import shutil

import pytest
import torch
from torch import nn

from sim.device import resolve_device
from sim.train import Stage, TrainConfig, _lr_at, make_generator, train


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


def test_adamw_stage_equals_torch_adamw_applied_by_hand():
    """Same init, same batches: train's AdamW stage (betas, decay on ``a`` only, grad clip) is
    ``torch.optim.AdamW`` stepped by hand, bit for bit; Adam's coupled decay, the default betas
    or decay on every parameter end elsewhere (the comparison can fail)."""
    def by_hand(optimizer_cls, betas, decay_b):
        model = Quad()
        with torch.no_grad():
            model.b.fill_(1.0)
        opt = optimizer_cls([{"params": [model.a], "weight_decay": 0.3},
                             {"params": [model.b], "weight_decay": 0.3 if decay_b else 0.0}], lr=0.05, betas=betas)
        gen = make_generator(4)
        for s in range(6):
            x = normal_batch(gen, s)
            loss = model.loss(x)
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_([model.a, model.b], 2.0)
            opt.step()
        return model

    model = Quad()
    with torch.no_grad():
        model.b.fill_(1.0)
    stage = Stage(6, 0.05, optimizer="adamw", betas=(0.8, 0.95), weight_decay=0.3, decay_params=("a",))
    train(model, normal_batch, TrainConfig(stages=(stage,), seed=4, log_every=3, grad_clip=2.0))
    want = by_hand(torch.optim.AdamW, (0.8, 0.95), False)
    assert torch.equal(model.a, want.a) and torch.equal(model.b, want.b)
    for wrong in (by_hand(torch.optim.Adam, (0.8, 0.95), False), by_hand(torch.optim.AdamW, (0.9, 0.999), False),
                  by_hand(torch.optim.AdamW, (0.8, 0.95), True)):
        assert not (torch.equal(model.a, wrong.a) and torch.equal(model.b, wrong.b))


def test_adamw_decay_is_decoupled():
    """No loss gradient on b: AdamW shrinks it by (1 - lr wd) per step exactly; Adam's L2 term
    would instead move it by about lr per step (a normalised gradient)."""
    model = Linear()
    stage = Stage(5, 0.1, optimizer="adamw", weight_decay=0.5, decay_params=("b",))
    train(model, normal_batch, TrainConfig(stages=(stage,), log_every=5))
    assert torch.allclose(model.b, torch.full((2,), (1 - 0.1 * 0.5) ** 5), rtol=0, atol=1e-6), model.b
    coupled = Linear()
    train(coupled, normal_batch, TrainConfig(stages=(dataclasses.replace(stage, optimizer="adam"),), log_every=5))
    assert not torch.allclose(coupled.b, model.b, atol=1e-3)


def test_bad_optimizer_or_betas_are_errors():
    with pytest.raises(ValueError, match="optimizer must be one of adam, adamw, sgd"):
        Stage(1, 0.1, optimizer="rmsprop")
    for betas in ((0.9,), (0.9, 1.0), (-0.1, 0.9)):
        with pytest.raises(ValueError, match="betas must be two numbers"):
            Stage(1, 0.1, optimizer="adamw", betas=betas)
    assert Stage(1, 0.1, betas=[0.5, 0.6]).betas == (0.5, 0.6)  # a JSON list is stored as a tuple


def test_lr_factors_scale_each_prefix_and_factor_one_changes_nothing():
    """SGD on ``Linear`` (gradient 1 on ``a``): a factor f moves ``a`` by exactly f lr per step
    while ``b`` keeps the stage's rate; factors 1 give AdamW's run bit for bit (the
    intervention at its identity), whatever groups the decay splits the parameters into."""
    model = Linear()
    train(model, normal_batch, TrainConfig(stages=(Stage(4, 0.5, optimizer="sgd", lr_factors=(("a", 0.25),)),),
                                           log_every=4))
    assert torch.equal(model.a, torch.full((2,), -4 * 0.5 * 0.25))
    runs = []
    for factors in ((), (("a", 1.0), ("b", 1.0))):
        m = Quad()
        stage = Stage(7, 0.05, optimizer="adamw", weight_decay=0.3, decay_params=("a",), lr_factors=factors)
        train(m, normal_batch, TrainConfig(stages=(stage,), seed=3, log_every=7))
        runs.append(m)
    assert torch.equal(runs[0].a, runs[1].a) and torch.equal(runs[0].b, runs[1].b)
    slow = Quad()  # a factor below 1 on a decayed prefix: a moves less than at the stage's rate
    train(slow, normal_batch, TrainConfig(stages=(dataclasses.replace(stage, lr_factors=(("a", 0.1),)),), seed=3,
                                          log_every=7))
    assert slow.a.abs().sum() < 0.5 * runs[0].a.abs().sum() and torch.equal(slow.b, runs[0].b)
    assert Stage(1, 0.1, lr_factors=[["a", 2]]).lr_factors == (("a", 2.0),)  # JSON pairs are stored as tuples
    for bad in ((("a", 0.0),), (("a", -1.0),), (("a", math.inf),)):
        with pytest.raises(ValueError, match="lr_factors must be finite and positive"):
            Stage(1, 0.1, lr_factors=bad)


def test_evaluate_hook_runs_at_step_0_the_chosen_steps_and_the_last_with_the_losses_since():
    """SGD on ``Linear``: a = -lr * step exactly, so the hook sees the model after ``step``
    updates (not before the last one); its ``losses`` are the logged per-step losses (log
    every step) of the steps since the previous call, across the stage boundary."""
    calls = []

    def evaluate(model, step, losses):
        calls.append((step, float(model.a[0].detach()), list(losses)))
        return False

    cfg = TrainConfig(stages=(Stage(6, 0.1, optimizer="sgd"), Stage(4, 0.1, optimizer="sgd")), log_every=1)
    log = train(Linear(), normal_batch, cfg, evaluate=evaluate, eval_at=lambda s: s % 4 == 0)
    assert [c[0] for c in calls] == [0, 4, 8, 10]  # step 0, the chosen steps, the last
    for step, a0, _ in calls:
        assert a0 == pytest.approx(-0.1 * step, abs=1e-6)
    per_step = [r["loss"] for r in log.rows]  # losses of steps 1..10
    assert [c[2] for c in calls] == [[], per_step[0:4], per_step[4:8], per_step[8:10]]
    assert log.steps == 10
    only_ends = []
    train(Linear(), normal_batch, cfg, evaluate=lambda m, s, l: only_ends.append((s, len(l))) or False)
    assert only_ends == [(0, 0), (10, 10)]  # without eval_at: step 0 and the last


def test_evaluate_hook_stops_training():
    drawn = []

    def sample(gen, step):
        drawn.append(step)
        return normal_batch(gen, step)

    cfg = TrainConfig(stages=(Stage(8, 0.1, params=("a",), optimizer="sgd"), Stage(5, 0.1, params=("b",))))
    seen = []
    model = Linear()
    log = train(model, sample, cfg, evaluate=lambda m, step, losses: seen.append(step) or step >= 6,
                eval_at=lambda s: s % 3 == 0)
    assert seen == [0, 3, 6] and log.steps == 6 and drawn == list(range(6))
    assert torch.allclose(model.a, torch.full((2,), -0.6)) and torch.equal(model.b, torch.ones(2))  # no stage 2
    assert model.a.requires_grad and model.b.requires_grad
    drawn.clear()
    untouched = Linear()
    log0 = train(untouched, sample, cfg, evaluate=lambda m, step, losses: True)
    assert log0.steps == 0 and drawn == [] and torch.equal(untouched.a, torch.zeros(2))


def test_evaluate_hook_misuse_is_an_error(tmp_path):
    cfg = TrainConfig(stages=(Stage(2, 0.1),))
    with pytest.raises(ValueError, match="checkpoint"):
        train(Quad(), normal_batch, cfg, evaluate=lambda m, s, l: False, checkpoint=tmp_path / "c.pt")
    with pytest.raises(ValueError, match="eval_at"):
        train(Quad(), normal_batch, cfg, eval_at=lambda s: True)
