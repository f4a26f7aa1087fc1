"""Training: Adam, AdamW or plain gradient descent, one or several stages, on CPU or CUDA.
The one training loop of every paper (W's and N's transformers, the Markov LM of G and E,
G's SA-transformer).

The loop is deliberately small: a model with a ``loss(batch) -> scalar`` method (or a
``loss_fn(model, batch)``), a ``sample(generator, step) -> batch`` function that draws fresh
data (the papers train on fresh samples every step), and a :class:`TrainConfig`. Each step
is: set the stage's learning rate, sample, forward, ``zero_grad``, backward, clip the
gradient norm (``grad_clip``), optimiser step. Stages train named parameter groups in turn
(N's two-stage gradient descent: stage 1 trains ``A1`` with ``A2`` frozen, stage 2 trains
``A2``), with weight decay on the named parameters ``decay_params`` (coupled L2 for Adam and
SGD, decoupled for AdamW) and, optionally, a learning-rate factor per parameter-name prefix
(``lr_factors``: G's slowed first attention layer). Every ``log_every`` steps the loss is
logged next to the Bayes-optimal loss when a baseline is given, and optional probes record mechanism
readouts (time to mechanism). An evaluation hook ``evaluate(model, step, losses)`` runs at
step 0 and after the steps ``eval_at`` chooses, sees the training losses since the previous
evaluation and may stop training (the papers' evaluation schedules and stopping rules live
with the caller). Checkpoints carry their config and every RNG state, so a killed run
resumes to the same parameters.

Randomness is split by purpose: ``init`` for parameters (used by the caller building the
model), ``data`` for the batches; both come from the claim's seeds.

:func:`train_batched` trains several independent models of one architecture as one
(``torch.func``: stacked parameters, ``functional_call`` under ``vmap``); model ``k`` is the
model :func:`train` would give from the same init, data and config (a test holds this).
"""
from __future__ import annotations

import copy
import dataclasses
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import torch

__all__ = ["Stage", "TrainConfig", "TrainLog", "train", "train_batched", "make_generator"]

OPTIMIZERS = ("adam", "adamw", "sgd")


@dataclass(frozen=True)
class Stage:
    """Train the parameters whose names start with any of ``params`` (all if empty).

    ``weight_decay`` applies to the trained parameters whose names start with any of
    ``decay_params`` (all trained parameters if empty); the other trained parameters form a
    second parameter group without decay. ``optimizer``: ``adam`` (``torch.optim.Adam``, weight
    decay as an L2 term in the gradient), ``adamw`` (``torch.optim.AdamW``, decoupled weight
    decay ``p <- p - lr wd p``) or ``sgd`` (plain gradient descent); ``betas`` are Adam's and
    AdamW's moment decay rates.

    ``lr_factors``: ``((prefix, factor), ...)``; a trained parameter whose name starts with
    ``prefix`` (the first match in order) trains at ``factor * lr`` (its weight decay, which
    AdamW scales by the rate, with it). Factors 1 train exactly as without them.
    """

    steps: int
    lr: float
    params: tuple[str, ...] = ()
    optimizer: str = "adam"  # adam | adamw | sgd (plain gradient descent)
    schedule: str = "constant"  # constant | cosine
    weight_decay: float = 0.0
    decay_params: tuple[str, ...] = ()
    betas: tuple[float, float] = (0.9, 0.999)
    lr_factors: tuple[tuple[str, float], ...] = ()

    def __post_init__(self):
        if self.steps < 0:
            raise ValueError(f"steps must be >= 0, got {self.steps}")
        if not self.lr > 0:
            raise ValueError(f"lr must be positive, got {self.lr}")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {', '.join(OPTIMIZERS)}, got {self.optimizer!r}")
        betas = tuple(self.betas)
        if len(betas) != 2 or not all(0 <= b < 1 for b in betas):
            raise ValueError(f"betas must be two numbers in [0, 1), got {self.betas!r}")
        object.__setattr__(self, "betas", tuple(float(b) for b in betas))
        factors = tuple((str(p), float(f)) for p, f in self.lr_factors)  # a JSON list of pairs is stored as tuples
        if any(not f > 0 or math.isinf(f) for _, f in factors):
            raise ValueError(f"lr_factors must be finite and positive, got {self.lr_factors!r}")
        object.__setattr__(self, "lr_factors", factors)
        if self.schedule not in ("constant", "cosine"):
            raise ValueError(f"schedule must be 'constant' or 'cosine', got {self.schedule!r}")


@dataclass(frozen=True)
class TrainConfig:
    """A whole training run: its stages (:class:`Stage`) in order, the ``seed`` of the data generator, the
    loss logged every ``log_every`` steps, a checkpoint every ``checkpoint_every`` steps (0: none)
    and the gradient-norm clip ``grad_clip`` (``None``: no clipping)."""

    stages: tuple[Stage, ...]
    seed: int = 0
    log_every: int = 50
    checkpoint_every: int = 0  # 0: no checkpoints
    grad_clip: float | None = None

    def __post_init__(self):
        if not self.stages:
            raise ValueError("a training config needs at least one stage")
        if self.log_every < 1:
            raise ValueError("log_every must be >= 1")

    @property
    def total_steps(self) -> int:
        """The steps of all stages together."""
        return sum(s.steps for s in self.stages)

    def as_dict(self) -> dict:
        """Every field as plain data (the stages as dicts), as a checkpoint stores it (resuming checks it matches)."""
        return dataclasses.asdict(self)


@dataclass
class TrainLog:
    """What a run recorded: one row per log point, plus wall time and where probes crossed."""

    rows: list[dict[str, float]] = field(default_factory=list)
    seconds: float = 0.0
    steps: int = 0
    crossed: dict[str, dict[str, float]] = field(default_factory=dict)  # probe name -> {step, seconds}

    def column(self, name: str) -> list[float]:
        """The logged values of ``name``, in step order (rows without it skipped)."""
        return [r[name] for r in self.rows if name in r]


def make_generator(seed: int, device: str | torch.device = "cpu") -> torch.Generator:
    """A ``torch.Generator`` on ``device`` seeded with ``seed mod 2**63`` (any Python int is accepted)."""
    g = torch.Generator(device=device)
    g.manual_seed(int(seed) % (2**63))
    return g


def _stage_named_params(model: torch.nn.Module, stage: Stage) -> list[tuple[str, torch.nn.Parameter]]:
    named = list(model.named_parameters())
    chosen = [(n, p) for n, p in named if not stage.params or any(n.startswith(k) for k in stage.params)]
    if not chosen:
        raise ValueError(f"stage trains {stage.params}, but the model's parameters are {[n for n, _ in named]}")
    return chosen


def _stage_params(model: torch.nn.Module, stage: Stage) -> list[torch.nn.Parameter]:
    return [p for _, p in _stage_named_params(model, stage)]


def _optimizer(stage: Stage, named):
    decayed = [(n, p) for n, p in named if not stage.decay_params or any(n.startswith(k) for k in stage.decay_params)]
    if not decayed:
        raise ValueError(f"decay_params {stage.decay_params} match none of the trained parameters "
                         f"{[n for n, _ in named]}")
    rest = [(n, p) for n, p in named if all(p is not q for _, q in decayed)]
    groups = []
    for members, wd in ((decayed, stage.weight_decay), (rest, 0.0)):
        by_factor: dict[float, list] = {}  # one group per rate factor (all factors 1: the two groups as ever)
        for n, p in members:
            by_factor.setdefault(_lr_factor(stage, n), []).append(p)
        groups += [{"params": ps, "weight_decay": wd, "lr_factor": f} for f, ps in by_factor.items()]
    if stage.optimizer == "adam":
        return torch.optim.Adam(groups, lr=stage.lr, betas=stage.betas)
    if stage.optimizer == "adamw":
        # foreach: one multi-tensor kernel per update step instead of one per parameter tensor
        return torch.optim.AdamW(groups, lr=stage.lr, betas=stage.betas, foreach=True)
    return torch.optim.SGD(groups, lr=stage.lr)


def _lr_factor(stage: Stage, name: str) -> float:
    """The rate factor of parameter ``name``: the first of ``stage.lr_factors`` whose prefix it starts with, else 1."""
    return next((f for prefix, f in stage.lr_factors if name.startswith(prefix)), 1.0)


def _lr_at(stage: Stage, k: int) -> float:
    if stage.schedule == "cosine" and stage.steps > 0:
        return stage.lr * 0.5 * (1 + math.cos(math.pi * k / stage.steps))
    return stage.lr


def train(model: torch.nn.Module, sample: Callable[[torch.Generator, int], Any], config: TrainConfig, *,
          device: str = "cpu", bayes_loss: Callable[[Any], float] | None = None,
          probes: Mapping[str, Callable[[torch.nn.Module], float]] | None = None,
          thresholds: Mapping[str, float] | None = None, stop_when_crossed: bool = False,
          checkpoint: str | os.PathLike | None = None, progress: bool | Callable[[str], None] = False,
          loss_fn: Callable[[torch.nn.Module, Any], torch.Tensor] | None = None,
          evaluate: Callable[[torch.nn.Module, int, list[float]], bool] | None = None,
          eval_at: Callable[[int], bool] | None = None) -> TrainLog:
    """Train ``model`` in place and return the log.

    Parameters
    ----------
    sample : (generator, step) -> batch
        Draws a fresh batch with the data generator (seeded from ``config.seed``).
    bayes_loss : batch -> float, optional
        The Bayes-optimal loss of the same batch, logged beside the model's loss.
    probes : name -> (model -> float), optional
        Mechanism readouts, evaluated at every log point (without gradients).
    thresholds : name -> float, optional
        The first log point at which ``probes[name] >= thresholds[name]`` is recorded in
        ``log.crossed`` (step and wall seconds): the time to mechanism.
    stop_when_crossed : bool
        End training once every thresholded probe has crossed (for benchmarks).
    checkpoint : path, optional
        Saved every ``config.checkpoint_every`` steps and at the end; if it exists when
        ``train`` starts and its config matches, training resumes from it.
    progress : bool or callable
        ``True`` shows a tqdm bar; a callable receives a status line at every log point.
    loss_fn : (model, batch) -> scalar tensor, optional
        The training loss in place of ``model.loss(batch)``.
    evaluate : (model, step, losses) -> bool, optional
        Called at step 0 (before any update), after every update ``step`` for which
        ``eval_at(step)`` is true, and after the last step; ``losses`` are the training
        losses (floats) of the steps since the previous call, oldest first (empty at step 0).
        Returning ``True`` ends training there (``log.steps`` is that step). It runs with
        gradients enabled and the model in whatever mode it is in: setting ``model.eval()``
        and ``torch.no_grad()`` is the hook's business. Not with ``checkpoint`` (the hook's own
        state, e.g. a stopping rule's streak, would not resume).
    eval_at : step -> bool, optional
        The steps after which ``evaluate`` runs besides step 0 and the last (none if omitted).
    """
    if evaluate is not None and checkpoint is not None:
        raise ValueError("train: an evaluate hook cannot be combined with a checkpoint "
                         "(the hook's own state would not resume)")
    if eval_at is not None and evaluate is None:
        raise ValueError("train: eval_at chooses the steps of an evaluate hook; none was given")
    model.to(device)
    gen = make_generator(config.seed, device)
    log = TrainLog()
    start_step = 0
    ckpt = Path(checkpoint) if checkpoint is not None else None
    opt_state = None
    if ckpt is not None and ckpt.exists():
        state = torch.load(ckpt, map_location=device, weights_only=False)
        if state["config"] != config.as_dict():
            raise ValueError(f"checkpoint {ckpt} was written with a different training config")
        model.load_state_dict(state["model"])
        gen.set_state(state["generator"].to(gen.get_state().device) if hasattr(state["generator"], "to")
                      else state["generator"])
        start_step, opt_state = state["step"], state["optimizer"]
        log = TrainLog(rows=state["log"]["rows"], seconds=state["log"]["seconds"], steps=state["step"],
                       crossed=state["log"]["crossed"])
    total = config.total_steps
    bar = None
    if progress is True:
        from tqdm.auto import tqdm

        bar = tqdm(total=total, initial=start_step, unit="step", leave=False, dynamic_ncols=True)
    t0 = time.perf_counter() - log.seconds
    step = 0
    pending: list[float] = []  # training losses since the previous evaluation
    stopped = evaluate is not None and bool(evaluate(model, 0, []))
    for stage_index, stage in enumerate(config.stages):
        if stopped:
            break
        stage_start = step
        step += stage.steps
        if step <= start_step:
            continue
        named = _stage_named_params(model, stage)
        params = [p for _, p in named]
        frozen = [p for p in model.parameters() if all(p is not q for q in params)]
        for p in frozen:
            p.requires_grad_(False)
        for p in params:
            p.requires_grad_(True)
        opt = _optimizer(stage, named)
        if opt_state is not None and opt_state.get("stage") == stage_index:
            opt.load_state_dict(opt_state["state"])
        opt_state = None
        for s in range(max(start_step, stage_start), step):
            k = s - stage_start
            for group in opt.param_groups:
                group["lr"] = _lr_at(stage, k) * group.get("lr_factor", 1.0)
            batch = sample(gen, s)
            loss = loss_fn(model, batch) if loss_fn is not None else model.loss(batch)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if config.grad_clip is not None:
                torch.nn.utils.clip_grad_norm_(params, config.grad_clip)
            opt.step()
            done = s + 1
            if evaluate is not None:
                pending.append(float(loss.detach()))
            if done % config.log_every == 0 or done == total:
                row = {"step": done, "loss": float(loss.detach()), "seconds": time.perf_counter() - t0,
                       "stage": stage_index}
                if bayes_loss is not None:
                    row["bayes_loss"] = float(bayes_loss(batch))
                if probes:
                    with torch.no_grad():
                        for name, fn in probes.items():
                            row[name] = float(fn(model))
                            thr = (thresholds or {}).get(name)
                            if thr is not None and name not in log.crossed and row[name] >= thr:
                                log.crossed[name] = {"step": done, "seconds": row["seconds"]}
                log.rows.append(row)
                if bar is not None:
                    bar.set_postfix_str(f"loss {row['loss']:.4f}", refresh=False)
                elif callable(progress):
                    progress(f"step {done}/{total} loss {row['loss']:.4f}")
            if bar is not None:
                bar.update(1)
            if ckpt is not None and config.checkpoint_every and done % config.checkpoint_every == 0:
                _save(ckpt, model, opt, stage_index, gen, done, config, log, t0)
            if evaluate is not None and (done == total or (eval_at is not None and eval_at(done))):
                stopped = bool(evaluate(model, done, pending))
                pending = []
            if stopped or (stop_when_crossed and thresholds and all(n in log.crossed for n in thresholds)):
                step = done
                break
        else:
            for p in frozen:
                p.requires_grad_(True)
            continue
        for p in frozen:
            p.requires_grad_(True)
        break
    if bar is not None:
        bar.close()
    log.seconds = time.perf_counter() - t0
    log.steps = step
    if ckpt is not None:
        _save(ckpt, model, None, len(config.stages), gen, step, config, log, t0)
    return log


def _save(path: Path, model, opt, stage_index, gen, step, config, log, t0) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    torch.save({"model": model.state_dict(), "config": config.as_dict(), "step": step, "generator": gen.get_state(),
                "optimizer": None if opt is None else {"stage": stage_index, "state": opt.state_dict()},
                "log": {"rows": log.rows, "seconds": time.perf_counter() - t0, "crossed": log.crossed}}, tmp)
    os.replace(tmp, path)


def train_batched(models, samples, config: TrainConfig, seeds, *, device: str = "cpu",
                  loss_fn: Callable[[torch.nn.Module, Any], torch.Tensor] | None = None,
                  progress: Callable[[str], None] | None = None) -> list[TrainLog]:
    """Train ``models`` (one architecture, independent inits) as one, in place; one log per model.

    Model ``k`` draws its batches with ``samples[k](gen_k, step)``, ``gen_k`` seeded with
    ``seeds[k]``, and is what :func:`train` gives for ``(models[k], samples[k],
    dataclasses.replace(config, seed=seeds[k]))``: the loss of the stack is the sum of the
    models' losses, so each model's gradient is its own, and SGD, Adam and AdamW update
    elementwise. Batches are pytrees of tensors; a leaf that is not a tensor (a numpy record
    beside the data) reaches the loss as ``None``. Checkpoints, probes, a Bayes baseline, the
    evaluation hook and gradient clipping (a norm over one model) are :func:`train`'s only.
    """
    from torch.func import functional_call, stack_module_state, vmap
    from torch.utils import _pytree as pytree

    M = len(models)
    if M == 0 or len(samples) != M or len(seeds) != M:
        raise ValueError(f"train_batched needs one sampler and one seed per model: {M} models, "
                         f"{len(samples)} samplers, {len(seeds)} seeds")
    if config.grad_clip is not None:
        raise ValueError("train_batched does not clip gradients (a norm over one model); use train")

    class _Loss(torch.nn.Module):  # forward(batch) = the model's loss, so functional_call can swap parameters
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, batch):
            return loss_fn(self.model, batch) if loss_fn is not None else self.model.loss(batch)

    wrapped = [_Loss(m.to(device)) for m in models]
    stacked, buffers = stack_module_state(wrapped)
    stacked = {n: p.detach().clone() for n, p in stacked.items()}
    base = copy.deepcopy(wrapped[0]).to("meta")  # the architecture; its parameters come from `stacked`
    gens = [make_generator(sd, device) for sd in seeds]
    logs = [TrainLog() for _ in range(M)]
    total, step, t0 = config.total_steps, 0, time.perf_counter()
    vmapped_dims, loss_of = object(), None

    def batch_of(s: int):
        parts = [samples[k](gens[k], s) for k in range(M)]
        batch = pytree.tree_map(lambda *xs: torch.stack(xs) if isinstance(xs[0], torch.Tensor) else None, *parts,
                                is_leaf=lambda x: x is None)
        dims = pytree.tree_map(lambda x: None if x is None else 0, batch, is_leaf=lambda x: x is None)
        return batch, dims

    for stage_index, stage in enumerate(config.stages):
        names = [n for n in stacked if not stage.params or any(n[len("model."):].startswith(k) for k in stage.params)]
        if not names:
            raise ValueError(f"stage trains {stage.params}, but the model's parameters are "
                             f"{[n[len('model.'):] for n in stacked]}")
        for n, p in stacked.items():
            p.requires_grad_(n in names)
        opt = _optimizer(stage, [(n[len("model."):], stacked[n]) for n in names])
        for k_step in range(stage.steps):
            for group in opt.param_groups:
                group["lr"] = _lr_at(stage, k_step) * group.get("lr_factor", 1.0)
            batch, dims = batch_of(step)
            if dims != vmapped_dims:  # one vmapped loss per batch structure, not one per step
                vmapped_dims = dims
                loss_of = vmap(lambda p, b, x: functional_call(base, (p, b), (x,)), in_dims=(0, 0, dims))
            losses = loss_of(stacked, buffers, batch)  # (M,)
            opt.zero_grad(set_to_none=True)
            losses.sum().backward()
            opt.step()
            step += 1
            if step % config.log_every == 0 or step == total:
                seconds = time.perf_counter() - t0
                for k in range(M):
                    logs[k].rows.append({"step": step, "loss": float(losses[k].detach()), "seconds": seconds,
                                         "stage": stage_index})
                if progress is not None:
                    progress(f"step {step}/{total}, {M} models, mean loss {float(losses.detach().mean()):.4f}")
    with torch.no_grad():
        for k, m in enumerate(wrapped):
            for n, p in m.named_parameters():
                p.copy_(stacked[n][k])
    seconds = time.perf_counter() - t0
    for log in logs:
        log.seconds, log.steps = seconds / M, step
    return logs
