"""Negative controls of N.E, N.K3, N.T, N.K8 and N.K9 (issue 20): a wrong mechanism run through
each claim's own deciding check must FAIL, appear in the tier's controls, and a wrong mechanism in
place of the paper's is caught by that check."""
import numpy as np
import torch

from sim.claims import get
from sim.papers.nichani.claims import experiments
from sim.papers.nichani.claims.experiments import N_E, wired, wrong_parents
from sim.papers.nichani.claims.gradient import A_NONDEG, _flags, nondegeneracy_roundoff, symmetric_finite_prior
from sim.papers.nichani.task import n_graph
from sim.verdict import Verdict

from ..conftest import tier

torch.set_num_threads(1)

# N.E at the quick profile's sizes and recipe, chain graph only (as test_nichani_trained's E_SMALL).
E_SMALL = {"tiers": ("trained",), "S": 10, "T": 20, "seeds": 1, "graphs": ("chain",), "n_eval": 2048, "n_probe": 512, "n_bayes": 128,
           "is_samples": 400, "adam_reading": False}
K3_SMALL = {"dims": (2, 3), "T": 5, "graphs": ("chain", "icl"), "prior_specs": ((0.5, 0.3, 1), (50.0, 0.5, 1)),
            "mc_T": (8, 32), "mc_graphs": ("chain",), "mc_chunks": 10, "mc_chunk": 1000, "max_examples": 25,
            "max_T": 5}


def _all_fail(t, n):
    assert len(t.controls) == n, [c.name for c in t.controls]
    assert all(c.verdict is Verdict.FAIL for c in t.controls), [(c.name, c.verdict, c.deciding) for c in t.controls]


# ------------------------------------------------------------------------------- N.E --
def test_e_controls_fail_the_primary_reading(run_claim, monkeypatch):
    """Untrained, wired to a wrong graph, and the true adjacency at its starting loss: each FAILs the
    primary reading, also once the recipe is taken as deciding, where the trained model PASSes."""
    monkeypatch.setattr(experiments, "is_n_recipe", lambda recipe: True)
    res = run_claim(N_E, **E_SMALL)
    t = tier(res, "trained")
    assert res.verdict is Verdict.PASS, t.summary
    _all_fail(t, 3)
    by = {c.name.split(" (")[0].split(":")[0]: c for c in t.controls}
    assert "m: chain" in by["untrained"].deciding and "(needs > 0.5)" in by["untrained"].deciding
    # the wrong graph fails the attention criterion; the starting loss fails only the loss criterion
    wrong = {n.name: n for n in by["trained model wired to a wrong graph"].numbers}
    assert wrong["attention criterion, chain"].value < 0.05
    start = {n.name: n for n in by["true adjacency at its starting loss"].numbers}
    assert start["attention criterion, chain"].value > 0.95
    assert abs(start["loss criterion, chain"].value) < 1e-6


def test_e_wrong_mechanism_is_caught_by_the_deciding_check(run_claim, monkeypatch):
    """The trained model re-wired to a wrong graph, in place of the trained one, FAILs N.E."""
    monkeypatch.setattr(experiments, "is_n_recipe", lambda recipe: True)
    real = experiments.run_jobs

    def rewired(run):
        run["model"] = wired(run["model"], wrong_parents(run["parents"]))
        x, rows, l_aa = run["eval"]
        from sim.papers.nichani.task import population_losses
        from sim.montecarlo import Estimate, mean_estimate
        f = experiments.model_probs(run["model"], x, "cpu")
        run["model_minus_aa"] = mean_estimate(population_losses(f, rows) - l_aa, run["eval_seed"])
        gap = run["bayes"]["add_alpha_minus_bayes"]
        run["model_minus_bayes"] = Estimate(run["model_minus_aa"].value + gap.value, 0.0, 1, 0)
        run["closed"], run["closed_se"] = experiments._closed(run, 10)
        from sim.papers.nichani.probes import parent_attention, position_attention
        run["pa_positions"] = parent_attention(position_attention(run["model"]), run["parents"], reading="positions")
        return run

    monkeypatch.setattr(experiments, "run_jobs", lambda *args, **kw: [rewired(run) for run in real(*args, **kw)])
    res = run_claim(N_E, **E_SMALL)
    assert res.verdict is Verdict.FAIL, tier(res, "trained").summary


def test_wrong_parents_never_keep_a_parent():
    for g in ("chain", "icl", "random"):
        par = n_graph(g, 20, np.random.default_rng(1))
        w = wrong_parents(par)
        nonroot = par >= 0
        assert ((w >= 0) == nonroot).all() and (w[nonroot] != par[nonroot]).all()
        assert (w[nonroot] <= np.flatnonzero(nonroot)).all()


# ------------------------------------------------------------------------------ N.K3 --
def test_a_rank_one_pi_within_round_off_is_degenerate():
    row = np.array([0.2, 0.3, 0.5])
    fp = symmetric_finite_prior(np.tile(row, (3, 1))[None], 0.1)
    flags, info = _flags(fp, None, n_graph("chain", 5))
    gamma_nd = info["parts"]["gamma (non-degeneracy) = sqrt(S min_pi sum_s ||pi(.|s) - mu||^2)"]
    assert gamma_nd <= nondegeneracy_roundoff(3) and flags[A_NONDEG] is False
    ok = symmetric_finite_prior(np.array([[[0.7, 0.2, 0.1], [0.3, 0.3, 0.4], [0.1, 0.1, 0.8]]]), 0.1)
    assert _flags(ok, None, n_graph("chain", 5))[0][A_NONDEG] is True


def test_k3_controls_fail_and_the_headroom_is_reported(run_claim):
    res = run_claim(get("N.K3"), **K3_SMALL)
    assert res.verdict is Verdict.PASS
    _all_fail(tier(res, "montecarlo"), 3)
    head = next(n for n in tier(res, "property").numbers if n.name.startswith("headroom"))
    assert head.value >= 1 and head.n > 0


def test_k3_a_gradient_on_the_wrong_key_is_caught(run_claim, monkeypatch):
    """The measured gradient with the parent's column swapped, in place of the real one, FAILs."""
    from sim.papers.nichani.claims import gradient

    real = gradient._autograd_chunks

    def swapped(model, rng, pis, w, par, chunk, G, device):
        real(model, rng, pis, w, par, chunk, G, device)
        T = G.shape[1]
        G[:] = gradient._swap_parent([(T, par, None, G)])[0][3]

    monkeypatch.setattr(gradient, "_autograd_chunks", swapped)
    res = run_claim(get("N.K3"), **{**K3_SMALL, "controls": False})
    assert tier(res, "montecarlo").verdict is Verdict.FAIL


# -------------------------------------------------------------------- N.T, N.K8, N.K9 --
def test_task_controls_fail(run_claim):
    res = run_claim(get("N.T"), n_sampler=20_000, n_loss=20_000, n_bayes=0, graphs=("chain",))
    t = tier(res, "montecarlo")
    assert t.verdict is Verdict.PASS
    _all_fail(t, 3)


def test_k8_controls_fail_and_the_wrong_parent_is_caught(run_claim):
    small = {"task_T": (20, 80, 320), "n_task": (6000, 2500, 1200), "model_T": (20,), "n_model": 8,
             "sizes": ((2, 5),)}
    res = run_claim(get("N.K8"), **small)
    t = tier(res, "montecarlo")
    assert t.verdict is Verdict.PASS
    _all_fail(t, 2)
    from sim.papers.nichani.claims.constructions import _grandparents
    from sim.papers.nichani.model import nichani_construction_limit
    wrong = get("N.K8").variant(limit=lambda x, par, S, **kw: nichani_construction_limit(x, _grandparents(par), S))
    assert tier(run_claim(wrong, **small, controls=False), "montecarlo").verdict is Verdict.FAIL


def test_k9_controls_fail(run_claim):
    res = run_claim(get("N.K9"), task_T=(32, 128), n_task=(4000, 1500), model_T=(), trained_finding=False,
                    sizes=((2, 5),))
    t = tier(res, "montecarlo")
    assert t.verdict is Verdict.PASS
    _all_fail(t, 2)
