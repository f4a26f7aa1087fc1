"""Many models trained as one: the per-model cost of a training step with ``M`` independent
models batched by ``torch.func`` (stacked parameters, ``functional_call`` under ``vmap``),
against one model alone on the same code, measured in the same run.

Ours: :func:`sim.train.train_batched` on ``M`` models of one family (stacked parameters,
one ``vmap``-ed loss, one backward, one Adam step; Adam is elementwise, so model ``k`` gets
exactly its own update). Baseline: :func:`sim.train.train` on model 0 alone, the same
batches, the same optimiser. The time reported for
ours is the batched step divided by ``M`` (seconds per model-step); ``ratio`` > 1 means
batching pays. Agreement: after the timed steps, the largest parameter difference between
model ``k`` of the batch and model ``k`` trained alone (float32 round-off).

Families: W's two-layer transformer (W.E1's sizes), N's reduced model (N.K1's sizes at
T = 40) and the Markov-chain LM (E.1's sizes, its plain modules on both sides). One thread (``torch.set_num_threads(1)``), as the trained claims' workers run.
"""
from __future__ import annotations

import copy
import itertools
import time

import numpy as np
import torch

from benchmarks.bench_theory import BenchRow

__all__ = ["FAMILIES", "bench_family", "run"]

#: The model families the trained claims use: W's transformer (W.E1, W.E2, W.P2), N's reduced model
#: (N.K1, N.K4) and the Markov-chain LM (G.1, E.1).
FAMILIES = ("W", "N reduced", "Markov LM")


def _family(name: str, M: int):
    """``(models, draw(k, step) -> batch, loss_fn)`` for ``M`` independently seeded models."""
    from sim.train import make_generator

    if name == "W":
        from sim.papers.wei.recipes import WRecipe
        from sim.papers.wei.training import WTask, init_wei_model

        d, L, H, B = 5, 10, 10, 256
        pi = np.random.default_rng(0).dirichlet(np.ones(d), d)
        task = WTask(pi, L, H)
        models = [init_wei_model(d, L, H, WRecipe(), generator=make_generator(k)) for k in range(M)]
        gens = [make_generator(100 + k) for k in range(M)]
        return models, lambda k: task.draw(gens[k], B)[0], lambda m, x: m.loss(x)
    if name == "N reduced":
        from sim.papers.nichani.task import n_graph
        from sim.papers.nichani.training import Batch, NTask, reduced_loss, task_sampler
        from sim.papers.nichani.model import ReducedModel

        S, T = 10, 40
        task = NTask(S, T, tuple(n_graph("chain", T).tolist()))
        models = []
        for k in range(M):
            m = ReducedModel.init(S, T, T ** -1.5)
            with torch.no_grad():  # a distinct start per model (N's init is deterministic)
                m.A1.normal_(0, 0.1, generator=make_generator(k))
            models.append(m)
        samplers = [task_sampler(task, 256, seed=100 + k) for k in range(M)]
        gens = [make_generator(200 + k) for k in range(M)]
        steps = [itertools.count() for _ in range(M)]  # N's sampler draws by (seed, step)
        # the loss reads tokens and the target law only (the batch's numpy pis stay out of vmap)
        return (models, lambda k: samplers[k](gens[k], next(steps[k]))[:2],
                lambda m, b: reduced_loss(m, Batch(b[0], b[1], None)))
    if name == "Markov LM":
        from sim.papers.markov.model import MarkovLM, MarkovLMConfig

        # E.1's model and batch (C = 2 states, N = 100, width 16, two attention-only layers). The fused
        # the plain model (its forward and loss; sim.papers.markov.fast's fused nodes are custom autograd
        # Functions without a vmap rule): the comparison is on one code path, as for the other families.
        cfg = MarkovLMConfig(vocab=2, max_len=100, width=16, layers=2, heads=1, mlp=False)
        models = [MarkovLM(cfg, generator=make_generator(k)) for k in range(M)]
        gens = [make_generator(100 + k) for k in range(M)]
        return (models, lambda k: torch.randint(0, 2, (64, 101), generator=gens[k]),
                lambda m, x: m.loss(x[:, :-1], x[:, 1:]))
    raise ValueError(f"unknown family {name!r}")


def bench_family(name: str, *, M: int = 8, steps: int = 10, repeats: int = 3) -> BenchRow:
    """Ours: :func:`sim.train.train_batched` on the ``M`` models; baseline: :func:`sim.train.train`
    on model 0 alone, from the same init on the same batches (replayed from a list)."""
    from sim.train import Stage, TrainConfig, train, train_batched

    torch.set_num_threads(1)
    models, draw, loss_fn = _family(name, M)
    batches = [[draw(k) for _ in range(steps)] for k in range(M)]  # the same data for both paths
    replay = [lambda gen, step, k=k: batches[k][step] for k in range(M)]
    config = TrainConfig(stages=(Stage(steps, 1e-2),), log_every=steps)
    t_batched = t_alone = float("inf")
    for _ in range(repeats):  # fresh copies each repeat: both paths train from the same init
        batched, alone = copy.deepcopy(models), copy.deepcopy(models[0])
        t0 = time.perf_counter()
        train_batched(batched, replay, config, list(range(M)), loss_fn=loss_fn)
        t_batched = min(t_batched, (time.perf_counter() - t0) / (steps * M))
        t0 = time.perf_counter()
        train(alone, replay[0], config, loss_fn=loss_fn)
        t_alone = min(t_alone, (time.perf_counter() - t0) / steps)
    diff = max(float((pb - pa).detach().abs().max())
               for pb, pa in zip(batched[0].parameters(), alone.parameters()))
    return BenchRow(f"{name}: per-model training step, {M} models batched (torch.func) vs one alone",
                    t_batched, t_alone, diff, 1e-4,
                    note=f"{steps} Adam steps x {repeats} repeats, one thread; diff: model 0 of the batch vs alone")


def run(*, quick: bool = False, repeats: int = 3) -> list[BenchRow]:
    if quick:
        return [bench_family(n, M=2, steps=2, repeats=1) for n in FAMILIES]
    return [bench_family(n, repeats=repeats) for n in FAMILIES]
