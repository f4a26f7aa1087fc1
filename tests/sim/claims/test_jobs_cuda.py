"""The training jobs of every model family on a CUDA device, against the CPU (marked ``cuda``: skipped
without one). Families whose data and init come from numpy or a CPU generator (N's reduced and
disentangled models, the Markov LM) train to the CPU's parameters within float32 round-off; W's models
draw their prompts and init with a generator on the device, so on CUDA they train other models: their
job must run there and learn, and the CPU-trained model must compute the same on both devices. G.2's
SA-transformer trains on the CPU only (:func:`sim.papers.markov.sa_transformer.train_tau` has no device)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]


def close(a, b, tol=2e-4):
    a, b = a.detach().double().cpu(), b.detach().double().cpu()
    assert torch.allclose(a, b, rtol=tol, atol=tol), float((a - b).abs().max())


def test_n_reduced_models_batched_on_cuda_match_the_cpu():
    from sim.papers.nichani.training import reduced_group

    T = 12
    job = {"S": 5, "T": T, "parents": tuple([-1] + list(range(T - 2)) + [-1]), "prior": None, "wrong": None,
           "beta0": T ** -1.5, "lr1": 20.0, "steps1": 30, "lr2": 5.0, "steps2": 30, "batch": 128, "t_eff": None}
    jobs = lambda dev: [{**job, "seed": s, "device": dev} for s in (1, 2)]  # noqa: E731
    cpu, gpu = reduced_group({"jobs": jobs("cpu")}), reduced_group({"jobs": jobs("cuda")})
    for (mc, _), (mg, _) in zip(cpu, gpu):
        assert mg.A1.device.type == "cuda"
        close(mc.A1, mg.A1)
        close(mc.A2, mg.A2)


def test_n_disentangled_model_on_cuda_matches_the_cpu():
    from sim.papers.nichani.claims.constructions_trained import k9_train_job
    from sim.papers.nichani.recipes import Recipe

    recipe = Recipe("cuda test", "adam", lr=0.02, steps=20, batch=64, init_scale=0.0)
    job = {"S": 3, "T": 6, "parent_sets": ((), (), (0, 1), (1, 2), (2, 3), (3, 4), (4, 5)), "alpha": 0.1,
           "recipe": recipe, "seed": 3, "heads": (2, 1), "multi": True, "wrong": None, "log_every": 10}
    (mc, lc), (mg, lg) = k9_train_job({**job, "device": "cpu"}), k9_train_job({**job, "device": "cuda"})
    for (name, pc), (_, pg) in zip(mc.named_parameters(), mg.named_parameters()):
        assert pg.device.type == "cuda", name
        close(pc, pg, 1e-3)
    assert abs(lc.rows[-1]["loss"] - lg.rows[-1]["loss"]) < 1e-4


def test_markov_lm_run_on_cuda_matches_the_cpu():
    from sim.papers.markov.task import run_markov

    params = {"C": 3, "K": 4, "N": 16, "width": 16, "layers": 2, "heads": 1, "steps": 20, "batch": 16,
              "n_eval": 16, "eval_every": 10, "eval_log_points": 0, "seed": 5, "strategies": ["uniform", "G1", "G2"]}
    cpu, gpu = run_markov(dict(params)), run_markov({**params, "device": "cuda"})
    assert gpu["timing"]["device"] == "cuda" and cpu["steps"] == gpu["steps"]
    for which in cpu["eval"]:
        np.testing.assert_allclose(cpu["eval"][which]["G2"], gpu["eval"][which]["G2"], rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("family", ["wei", "wei-continuous"])
def test_w_models_train_on_cuda_and_compute_the_same_on_both_devices(family):
    from sim.papers.wei.recipes import WRecipe
    from sim.train import make_generator

    recipe = WRecipe(steps1=40, batch1=64, steps2=20, batch2=64)
    if family == "wei":
        from sim.papers.wei.probes import prompt_losses
        from sim.papers.wei.training import WTask, train_job

        pi = np.array([[0.7, 0.2, 0.1], [0.1, 0.7, 0.2], [0.2, 0.1, 0.7]])
        job = {"pi": pi, "L": 3, "H": 4, "kind": "w", "fixed_seed": 1, "recipe": recipe, "init_seed": 2,
               "data_seed": 3}
        cpu, gpu = train_job({**job, "device": "cpu"}), train_job({**job, "device": "cuda"})
        assert gpu.model.W_OV.device.type == "cuda"
        assert gpu.log.rows[-1]["loss"] < gpu.log.rows[0]["loss"]
        tokens, _ = WTask(pi, 3, 4).draw(make_generator(7), 256)
        on_cpu = prompt_losses(cpu.model, tokens, pi)["model"]
        on_gpu = prompt_losses(cpu.model.to("cuda"), tokens.to("cuda"), pi)["model"]
        np.testing.assert_allclose(np.asarray(on_cpu), np.asarray(on_gpu), rtol=1e-4, atol=1e-5)
    else:
        from sim.papers.wei.claims.continuous_trained import ContinuousTask, train_continuous_job
        from sim.papers.wei.task import orthogonal_matrix

        A = orthogonal_matrix(np.random.default_rng(4), 3)
        job = {"A": A, "rho": 0.8, "L": 4, "H": 5, "recipe": recipe, "init_seed": 2, "data_seed": 3}
        (mc, _), (mg, lg) = (train_continuous_job({**job, "device": "cpu"}),
                             train_continuous_job({**job, "device": "cuda"}))
        assert mg.W_KQ.device.type == "cuda" and lg.rows[-1]["loss"] < lg.rows[0]["loss"]
        x, _ = ContinuousTask(A, 0.8, 4, 5).draw(make_generator(7), 128)
        with torch.no_grad():
            close(mc(x), mc.to("cuda")(x.to("cuda")), 1e-4)
