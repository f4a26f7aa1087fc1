"""Many models trained as one (sim.train.train_batched): model k of the batch is model k trained
alone by sim.train.train, to float round-off, for N's reduced model (two SGD stages on different
parameters) and W's transformer (Adam, cosine, weight decay on one block)."""
import copy
import dataclasses

import numpy as np
import pytest
import torch

from sim.train import Stage, TrainConfig, make_generator, train, train_batched


def _assert_same(batched, alone, atol):
    for mb, ma in zip(batched, alone):
        for (n, pb), (_, pa) in zip(mb.named_parameters(), ma.named_parameters()):
            assert torch.allclose(pb, pa, atol=atol, rtol=0), (n, float((pb - pa).abs().max()))


def test_n_reduced_models_batched_equal_each_alone():
    from sim.papers.nichani.task import n_graph
    from sim.papers.nichani.training import NTask, reduced_loss, task_sampler
    from sim.papers.nichani.model import ReducedModel

    S, T, M = 4, 6, 3
    task = NTask(S, T, tuple(n_graph("chain", T).tolist()))
    models = [ReducedModel.init(S, T, T ** -1.5) for _ in range(M)]
    for k, m in enumerate(models):
        with torch.no_grad():
            m.A1.normal_(0, 0.3, generator=make_generator(k))
    alone = copy.deepcopy(models)
    samples = [task_sampler(task, 32, seed=50 + k) for k in range(M)]
    cfg = TrainConfig(stages=(Stage(7, 5.0, params=("A1",), optimizer="sgd"),
                              Stage(5, 2.0, params=("A2",), optimizer="sgd")), log_every=4)
    seeds = [11, 12, 13]
    logs = train_batched(models, samples, cfg, seeds, loss_fn=reduced_loss)
    for k in range(M):
        log = train(alone[k], samples[k], dataclasses.replace(cfg, seed=seeds[k]), loss_fn=reduced_loss)
        assert [r["step"] for r in logs[k].rows] == [r["step"] for r in log.rows]
        np.testing.assert_allclose(logs[k].column("loss"), log.column("loss"), rtol=1e-5)
    _assert_same(models, alone, atol=1e-5)
    assert not torch.equal(models[0].A1, models[1].A1)  # independent models stayed independent


def test_w_models_batched_equal_each_alone_under_adam_with_weight_decay():
    from sim.papers.wei.recipes import WRecipe
    from sim.papers.wei.training import WTask, init_wei_model

    d, L, H, M = 3, 2, 5, 2
    pis = [np.random.default_rng(k).dirichlet(np.ones(d), d) for k in range(M)]
    tasks = [WTask(pi, L, H) for pi in pis]
    recipe = WRecipe(steps1=6, batch1=16, steps2=4, batch2=16, log_every=5)
    models = [init_wei_model(d, L, H, recipe, generator=make_generator(k)) for k in range(M)]
    alone = copy.deepcopy(models)
    samples = [t.sampler(recipe) for t in tasks]
    cfg = recipe.config(0)
    logs = train_batched(models, samples, cfg, [21, 22])
    for k in range(M):
        train(alone[k], samples[k], dataclasses.replace(cfg, seed=[21, 22][k]))
    _assert_same(models, alone, atol=1e-5)
    assert len(logs) == M and logs[0].steps == recipe.steps1 + recipe.steps2


def test_train_batched_refuses_what_it_cannot_do():
    from sim.papers.nichani.model import ReducedModel

    m = [ReducedModel.init(3, 4, 0.1)]
    cfg = TrainConfig(stages=(Stage(1, 1.0, optimizer="sgd"),))
    with pytest.raises(ValueError, match="one sampler and one seed per model"):
        train_batched(m, [], cfg, [0])
    with pytest.raises(ValueError, match="does not clip"):
        train_batched(m, [lambda g, s: None], dataclasses.replace(cfg, grad_clip=1.0), [0])
    with pytest.raises(ValueError, match="stage trains"):
        train_batched(m, [lambda g, s: None], TrainConfig(stages=(Stage(1, 1.0, params=("B9",)),)), [0])


def test_train_reduced_many_gives_train_reduceds_models():
    from sim.papers.nichani.task import n_graph
    from sim.papers.nichani.training import NTask, clear_cache, train_reduced, train_reduced_many

    task = NTask(4, 6, tuple(n_graph("chain", 6).tolist()))
    hp = dict(beta0=6 ** -1.5, lr1=40.0, steps1=6, lr2=3.0, steps2=4, batch=32)
    clear_cache()
    many = train_reduced_many(task, [3, 4], **hp)
    clear_cache()
    for sd, (model, log) in zip([3, 4], many):
        ref, ref_log = train_reduced(task, seed=sd, cache=False, **hp)
        _assert_same([model], [ref], atol=1e-5)
        np.testing.assert_allclose(log.column("loss"), ref_log.column("loss"), rtol=1e-5)
    assert train_reduced_many(task, [3], **hp)[0][0] is not many[0][0]  # cleared: trained again
    assert train_reduced_many(task, [3], **hp)[0][0] is train_reduced_many(task, [3], **hp)[0][0]  # cached
