"""G.3 and G.4 (sim.papers.markov.claims.circuits): how the claims read G.1's models.

G.1's trained models are replaced by hand-built two-layer models with the Markov LM's hook points,
whose circuits are known by construction: a G2 model (layer 1 on the previous state, layer 2 an
induction head reading the next state: the in-context bigram), a 1-point model (layer 1 pooling
uniformly), an M2 model (MLP1 the one-hot pair, Att2 its average phi, MLP2 the posterior over the
training chains given phi) and an M2 model that identifies the chain from 1-point statistics in
layer 1 instead. The checks run in milliseconds: PASS where the circuit is the claim's, the
controls FAIL, a wrong reading FAILs. tests/papers/markov/test_markov_probes.py tests the probes
on the real model, tests/papers/markov/test_markov_task.py the kept models of a real run.
"""
import numpy as np
import pytest
import torch
from torch import nn

from sim.models.hooks import HookPoint
from sim.papers.markov import runs as mr
from sim.papers.markov.claims import circuits as ci
from sim.papers.markov.claims.circuits import G_3, G_4
from sim.papers.markov.task import MarkovRunSpec, draw_chains
from sim.verdict import Verdict

from ..conftest import tier
from .test_markov_claims import fake_record

C, N = 4, 24
SMALL = {"C": C, "N": N, "alpha": 0.5, "K": (8, 64), "seeds": (0, 1), "n_probe": 64, "n_pairs": 48, "n_eval": 16}


class _Config:
    vocab, layers = C, 2


class HandModel(nn.Module):
    """Two attention layers over one-hot tokens, with MarkovLM's hook point names.

    ``kind``: ``"g2"`` (layer 1 on the previous state, layer 2 scores beta <x_t, prev_j>, reads
    x_j: the in-context bigram), ``"pool"`` (layer 1 uniform, layer 2 uniform: the in-context
    unigram), ``"m2"`` (MLP1 the one-hot pair, phi = Att2's uniform average of it, MLP2 the chains'
    posterior given the pair counts t phi, the prediction sum_k w_k P_k(x_t, .)), ``"m2-unigram"``
    (the same posterior from the unigram counts pooled by layer 1), ``"noise"`` (phi and MLP1 random
    features of the tokens: an untrained model)."""

    def __init__(self, kind, P=None, mu=None, beta=8.0, seed=0):
        super().__init__()
        self.kind, self.config, self.beta = kind, _Config(), beta
        self.P = None if P is None else torch.as_tensor(P)
        self.mu = None if mu is None else torch.as_tensor(mu)
        self.w = nn.Parameter(torch.zeros(1, dtype=torch.float64))
        g = torch.Generator().manual_seed(seed)
        self.feat = torch.randn(C * C, 8, generator=g, dtype=torch.float64)
        names = {f"layer{l}": {k: HookPoint() for k in ("pattern", "attn_out", "mlp_out")} for l in (1, 2)}
        for l, pts in names.items():
            self.add_module(l, nn.ModuleDict(pts))

    def _causal(self, S):
        T = S.shape[-1]
        return torch.softmax(S.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf")), -1)

    def forward(self, x):
        B, T = x.shape
        e = torch.nn.functional.one_hot(x, C).double()  # (B, T, C)
        eye = torch.eye(T, dtype=torch.float64)
        if self.kind == "g2":
            A1 = torch.cat([eye[:1], eye[:-1]])[None].expand(B, T, T).clone()  # previous state (row 0: itself)
        else:
            A1 = self._causal(torch.zeros(B, T, T, dtype=torch.float64))
        A1 = self.layer1["pattern"](A1[:, None])[:, 0]
        pooled = self.layer1["attn_out"](A1 @ e)  # (B, T, C): previous state, or the unigram frequencies
        pair = torch.nn.functional.one_hot(torch.cat([x[:, :1], x[:, :-1]], 1) * C + x, C * C).double()
        mlp1 = pair if self.kind != "noise" else pair @ self.feat
        mlp1 = self.layer1["mlp_out"](mlp1)
        if self.kind == "g2":
            S = self.beta * (e @ pooled.transpose(1, 2))  # [t, j] = beta <x_t, prev_j>
        else:
            S = torch.zeros(B, T, T, dtype=torch.float64)
        A2 = self.layer2["pattern"](self._causal(S)[:, None])[:, 0]
        if self.kind in ("g2", "pool"):
            probs = self.layer2["attn_out"](A2 @ e)
        else:
            phi = self.layer2["attn_out"](A2 @ mlp1)  # (B, T, C*C or 8)
            t = torch.arange(1, T + 1, dtype=torch.float64)[None, :, None]
            if self.kind == "m2":
                counts = (phi * t).view(B, T, C, C)
                ll = torch.einsum("btij,kij->btk", counts, torch.log(self.P))
            elif self.kind == "m2-unigram":
                ll = torch.einsum("bta,ka->btk", pooled * t, torch.log(self.mu))
            else:
                ll = phi.sum(-1, keepdim=True) * torch.zeros(len(self.P), dtype=torch.float64)
            w = torch.softmax(ll, -1)  # (B, T, K)
            probs = torch.einsum("btk,btkc->btc", w, self.P[:, x].permute(1, 2, 0, 3))  # sum_k w_k P_k(x_t, .)
        probs = 0.98 * probs + 0.02 / C
        return torch.log(probs)


class FakeModels:
    """Stands for :class:`sim.papers.markov.claims.circuits.Models`: the runs of G.1 at one K,
    each with hand-built models."""

    kinds = {}  # (K is the few-chain end, which) -> kind

    def __init__(self, ctx, K):
        self.K = K
        params = ci.g1_run_params(ci.g1_context(ctx))
        self.keys = [g for g in params if g[0] == K]
        self.params = [params[g] for g in self.keys]
        few = K == min(ctx.settings["K"])
        self.records = [fake_record(["uniform"] + ["M2" if few else "G2"] * 3,
                                    ["uniform"] + ["M2" if few else "G2"] * 3, strategies=mr.PHASES)
                        for _ in self.keys]
        self.few = few

    def spec(self, i):
        return MarkovRunSpec.from_dict({k: v for k, v in self.params[i].items() if k != "keep_models"})

    def model(self, i, which):
        kind = self.kinds.get(("few" if self.few else "many", which))
        if kind is None:
            return None
        P, mu = draw_chains(C, self.K, alpha=0.5, chain_seed=self.spec(i).chains)
        return HandModel(kind, P, mu, seed=i)

    init_seed = ci.Models.init_seed

    def step(self, i, which):
        return {"final": 300, "plateau": 150, "untrained": 0}[which]


@pytest.fixture
def hand(monkeypatch):
    """``hand(**kinds)``: G.1's models are hand-built, ``kinds[(end, which)] = kind``."""
    def install(**kinds):
        FakeModels.kinds = {tuple(k.split("_", 1)): v for k, v in kinds.items()}
        monkeypatch.setattr(ci, "Models", FakeModels)
    return install


RIGHT = {"many_final": "g2", "many_plateau": "pool", "many_untrained": "noise-pool", "few_final": "m2",
         "few_untrained": "noise"}


def _with_noise_pool(kinds):
    # an "untrained" model at the many-chain end: uniform heads whose output ignores the context
    return {k: ("pool" if v == "noise-pool" else v) for k, v in kinds.items()}


# ---------------------------------------------------------------------------- G.3 --
def test_g3_passes_on_the_circuits_the_seed_names_and_its_controls_fail(run_claim, hand):
    hand(**_with_noise_pool(RIGHT))
    res = run_claim(G_3, **SMALL)
    t = tier(res, "trained")
    assert res.verdict is Verdict.PASS, (t.summary, [(c.name, c.verdict, c.deciding) for c in t.controls])
    assert [c.verdict for c in t.controls] == [Verdict.FAIL] * 3
    assert t.figures == ["figures/G.3-attention-vs-patterns.png"]
    assert any(n.name.endswith("layer 1 on previous_state") and n.value > 0.9 and n.seed == 1 for n in t.numbers)


def test_g3_a_wrong_pattern_fails(run_claim, hand):
    hand(**_with_noise_pool(RIGHT))
    res = run_claim(G_3.variant(layer1_pattern="self"), **SMALL)
    assert res.verdict is Verdict.FAIL


def test_g3_a_model_without_the_induction_circuit_fails(run_claim, hand):
    """The "G2" models pool uniformly in both layers (an in-context unigram): no previous-state head."""
    hand(**_with_noise_pool({**RIGHT, "many_final": "pool"}))
    res = run_claim(G_3, **SMALL)
    t = tier(res, "trained")
    assert res.verdict is Verdict.FAIL
    assert "layer 1 on previous_state" in t.readings[0]["detail"]
    assert t.counterexample["parts"]["layer 1 on previous_state"]["outcome"] == "violated"


def test_g3_reads_g1s_runs(run_claim, hand, monkeypatch):
    """The runs G.3 reads are G.1's at the same master seed: G.1's seeds (its claim id's streams)."""
    from sim.claims.base import Context
    from sim.papers.markov.claims.gibson import G_1, g1_run_params

    hand(**_with_noise_pool(RIGHT))
    seen = []
    orig = FakeModels.__init__

    def spy(self, ctx, K):
        orig(self, ctx, K)
        seen.extend(self.params)
    monkeypatch.setattr(FakeModels, "__init__", spy)
    run_claim(G_3, seed=5, **SMALL)
    g1 = g1_run_params(Context(claim=G_1, profile="quick", seed=5, out_dir=None, overrides=SMALL))
    assert seen and all(p in g1.values() for p in seen) and all(p["keep_models"] for p in seen)


# ---------------------------------------------------------------------------- G.4 --
def test_g4_passes_on_an_encoder_pool_decoder_and_its_controls_fail(run_claim, hand):
    hand(**_with_noise_pool(RIGHT))
    res = run_claim(G_4, **SMALL)
    t = tier(res, "trained")
    assert res.verdict is Verdict.PASS, (t.summary, t.readings, [(c.name, c.verdict, c.deciding) for c in t.controls])
    assert [c.verdict for c in t.controls] == [Verdict.FAIL] * 3, [(c.name, c.deciding) for c in t.controls]
    assert t.figures == ["figures/G.4-patched-predictions.png"]


def test_g4_fails_on_a_model_that_names_the_chain_from_1_point_statistics(run_claim, hand):
    """The chain identified in layer 1 from the unigram counts: phi (Att2) patched from B switches
    nothing, and the finding that patches layer 1's output does switch."""
    hand(**_with_noise_pool({**RIGHT, "few_final": "m2-unigram"}))
    res = run_claim(G_4, **SMALL)
    t = tier(res, "trained")
    assert res.verdict is Verdict.FAIL
    assert t.findings[0].verdict is Verdict.PASS
    cex = t.counterexample
    assert cex["K"] == 8 and cex["parts"]["switch to B"]["outcome"] == "violated" and cex["settings"]["K"] == 8


def test_g4_a_wrong_patch_point_fails(run_claim, hand):
    hand(**_with_noise_pool(RIGHT))
    assert run_claim(G_4.variant(phi="layer1.attn_out"), **SMALL).verdict is Verdict.FAIL


def test_patch_pairs_name_two_different_chains():
    P, mu = draw_chains(3, 5, alpha=1.0, chain_seed=1)
    pairs = ci.patch_pairs(P, mu, 200, 7, np.random.default_rng(0))
    assert np.all(pairs["a"] != pairs["b"]) and set(pairs["b"]) == set(range(5))
    assert pairs["A"].shape == pairs["B"].shape == pairs["A2"].shape == (200, 7)
    with pytest.raises(ValueError, match="at least 2 training chains"):
        ci.patch_pairs(P[:1], mu[:1], 3, 7, np.random.default_rng(0))
