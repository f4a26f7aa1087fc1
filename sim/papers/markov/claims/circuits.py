"""Claims of Gibson, Cui & Reddy (seed 004) on the circuits that implement each phase: G.3
(the circuit of each phase) and G.4 (M2's task vector and the patching experiment).

Both read G.1's trained models (``Claim.reuses``): G.1's runs keep their end-of-training model
and the model in the middle of their 1-point plateau in the memory of the process that swept
them (:func:`sim.papers.markov.claims.gibson.g1_run_params`, :func:`sim.papers.markov.runs.kept_runs`),
and these claims, evaluated after G.1 in the same process, probe them there; run alone, they
train the same runs again (a run depends on its parameters only). The runs are G.1's: G.1's
seeds (its claim id's streams) and G.1's settings in the profile, which these claims' settings
copy; a user's override of them makes these claims train their own runs.

Probes and interventions: :mod:`sim.papers.markov.probes` (detection patterns against the
uniform head, ablations and patching through the model's hook points, the pairs probe).
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Mapping, Sequence

import numpy as np

from sim.claims.base import Claim, PrimaryReading, Source
from sim.claims.jobs import planned_jobs
from sim.models.hooks import run_with_cache
from sim.papers.markov import probes as pr
from sim.papers.markov import runs as mr
from sim.papers.markov.claims.gibson import G_1, _model_assumption, _prior_assumption, g1_run_params
from sim.papers.markov.placement import placement
from sim.papers.markov.task import MarkovRunSpec, fresh_sequences, predict_g1, run_chains, sample_sequences
from sim.verdict import (Control, Finding, FindingKind, Number, Outcome, TierResult, Verdict, compare,
                         tier_verdict)

__all__ = ["G_3", "G_4", "CLAIMS", "Readout", "PatchBench", "decide_g2_circuit", "decide_pooling", "decide_patch",
           "decide_pairs", "combine", "patch_pairs"]

_VERDICT_OF = {Outcome.HELD: Verdict.PASS, Outcome.VIOLATED: Verdict.FAIL, Outcome.UNDECIDED: Verdict.INCONCLUSIVE}
#: Detection patterns by name (the formula G.3 tests; a variant names another).
PATTERNS = ("previous_state", "self", "induction")


def combine(outcomes: Sequence[Outcome]) -> Outcome:
    """Every part held -> HELD; any violated -> VIOLATED; else (or nothing to judge) UNDECIDED."""
    outs = list(outcomes)
    if not outs:
        return Outcome.UNDECIDED
    if Outcome.VIOLATED in outs:
        return Outcome.VIOLATED
    return Outcome.HELD if all(o is Outcome.HELD for o in outs) else Outcome.UNDECIDED


def _mean_se(v) -> tuple[float, float]:
    v = np.asarray(v, dtype=float)
    v = v[np.isfinite(v)]
    return float(v.mean()), float(v.std(ddof=1) / math.sqrt(len(v))) if len(v) > 1 else 0.0


# ------------------------------------------------------------------------ G.1's models --
def g1_context(ctx):
    """G.1's context with this claim's settings: G.1's seeds (its claim id's streams) and its
    params, so :func:`g1_run_params` names the runs G.1 trains in the same profile."""
    return dataclasses.replace(ctx, claim=G_1, overrides=dict(ctx.settings))


def _kept_jobs(ctx, Ks: Sequence[int]) -> list:
    """G.1's runs at ``Ks`` as the cost plan sees them (:class:`Models` reads them; reused where G.1
    trains them in the same run)."""
    params = g1_run_params(g1_context(ctx))
    return planned_jobs(**mr.markov_jobs(ctx, "G.1's models", [p for (K, _), p in params.items() if K in Ks]))


def _g3_jobs(ctx) -> list:
    return _kept_jobs(ctx, [max(ctx.settings["K"])])


def _g4_jobs(ctx) -> list:
    s = ctx.settings
    return _kept_jobs(ctx, [int(s["m2_K"]) if s.get("m2_K") else min(s["K"]), max(s["K"])])


class Models:
    """G.1's runs at one K: their records, and a builder of each run's model (``final``,
    ``plateau`` or ``untrained``) on the claim's device."""

    def __init__(self, ctx, K: int):
        params = g1_run_params(g1_context(ctx))
        self.keys = [g for g in params if g[0] == K]
        self.params = [params[g] for g in self.keys]
        runs = mr.kept_runs(ctx, f"G.1's models at K={K}", self.params)
        self.records = [r for r, _ in runs]
        self.kept = [m for _, m in runs]
        self.device = ctx.device

    def spec(self, i: int) -> MarkovRunSpec:
        return MarkovRunSpec.from_dict({k: v for k, v in self.params[i].items() if k not in ("keep_models", "device")})

    def model(self, i: int, which: str):
        """Run ``i``'s model: ``final`` (end of training), ``plateau`` (the middle of its 1-point
        plateau; ``None`` without one) or ``untrained`` (its initialisation)."""
        import torch

        from sim.papers.markov.model import MarkovLM

        spec = self.spec(i)
        if which == "untrained":  # the run's own initialisation, from the init seed its record names
            gen = torch.Generator().manual_seed(self.records[i]["seeds"]["init"])
            m = MarkovLM(spec.model_config(), generator=gen)
        else:
            state = self.kept[i][which]
            if state is None:
                return None
            m = MarkovLM(spec.model_config())
            m.load_state_dict({n: torch.from_numpy(np.asarray(v)) for n, v in state.items()})
        return m.to(self.device).eval()

    def init_seed(self, label: str) -> int | None:
        """The init seed of the run a row's ``label`` ("K=... seed ...") names."""
        return next((rec["seeds"].get("init") for (K, sd), rec in zip(self.keys, self.records)
                     if label.startswith(f"K={K} seed {sd}")), None)

    def step(self, i: int, which: str) -> int | None:
        return {"final": self.kept[i]["final_step"], "plateau": self.kept[i]["plateau_step"], "untrained": 0}[which]


def _probe_sequences(ctx, n: int) -> np.ndarray:
    """``n`` sequences of length N + 1 from fresh chains (out of distribution), the claim's own streams."""
    s = ctx.settings
    x, _ = fresh_sequences(ctx.rng("probe-chains"), ctx.rng("probe-sequences"), s["C"], n, s["N"] + 1,
                           alpha=s["alpha"], prior=ctx.prior)
    return x


# --------------------------------------------------------------------------------- G.3 --
def _pattern(name: str, x: np.ndarray) -> np.ndarray:
    T = x.shape[1]
    if name == "previous_state":
        return pr.previous_state_pattern(T)
    if name == "self":
        return pr.self_pattern(T)
    if name == "induction":
        return pr.induction_pattern(x)
    raise ValueError(f"unknown detection pattern {name!r}; known: {', '.join(PATTERNS)}")


def _detect(maps: Mapping[int, np.ndarray], layer: int, pattern: np.ndarray, z: float, what: str) -> dict[str, Any]:
    """``score >= 1/2`` (:mod:`sim.papers.markov.probes`) with z standard errors over the sequences."""
    sc = pr.detection_scores(maps[layer], pattern)
    m, se = _mean_se(sc["score"])
    mass, _ = _mean_se(sc["mass"])
    uni, _ = _mean_se(sc["uniform"])
    out = compare(m, 0.5, stderr=se, z=z)
    return {"name": what, "outcome": out, "value": m, "se": se, "threshold": 0.5,
            "line": f"{what}: score {m:.3f} ± {se:.3f} (mass {mass:.3f}, uniform head {uni:.3f}; needs >= 1/2)"}


class Readout:
    """What the G.3 checks read from one model on tokens ``x`` ``(n, N + 1)``, each computed once:
    the attention maps of every layer and the per-sequence loss (one forward pass), and the loss
    with layer 1's head ablated (a second one, on first use)."""

    def __init__(self, model, x: np.ndarray, ablation: str):
        import torch

        self.model, self.x, self.ablation = model, x, ablation
        dev = next(model.parameters()).device
        self.tokens = torch.as_tensor(x[:, :-1], device=dev)
        self.targets = torch.as_tensor(x[:, 1:], device=dev)
        names = [f"layer{l}.pattern" for l in range(1, model.config.layers + 1)]
        with torch.no_grad():
            logits, cache = run_with_cache(model, self.tokens, names=names)
        self.maps = {l: cache[n][:, 0].double().cpu().numpy() for l, n in enumerate(names, start=1)}
        self.loss = self._nll(logits)
        self._ablated = None

    def _nll(self, logits) -> np.ndarray:
        import torch

        logq = torch.log_softmax(logits.double(), dim=-1)
        return (-logq.gather(-1, self.targets[..., None])[..., 0]).mean(dim=1).cpu().numpy()  # (n,)

    @property
    def ablated(self) -> np.ndarray:
        if self._ablated is None:
            self._ablated = pr.sequence_losses(self.model, self.tokens, self.targets,
                                               pr.ablate_head(1, self.ablation))
        return self._ablated


def decide_g2_circuit(r: Readout, params: Mapping[str, Any], z: float, alpha: float
                      ) -> tuple[Outcome, list[dict[str, Any]]]:
    """The deciding check of G2's circuit on one model's :class:`Readout`, the same for every
    control. On its tokens (fresh chains): the first layer's detection score on
    ``params["layer1_pattern"]`` and the second layer's on ``params["layer2_pattern"]``, each
    ``>= 1/2``; and the first layer's head ablated (:func:`sim.papers.markov.probes.ablate_head`)
    raises the model's loss at least half way back to the in-context unigram's (G1's), paired
    per sequence: ``L_ablated - (L_model + L_G1) / 2 > 0``. All with z standard errors over
    the sequences. Returns the combined outcome and each part."""
    inp, tgt = r.x[:, :-1], r.x[:, 1:]
    C = r.model.config.vocab
    parts = [_detect(r.maps, 1, _pattern(params["layer1_pattern"], inp), z, f"layer 1 on {params['layer1_pattern']}"),
             _detect(r.maps, 2, _pattern(params["layer2_pattern"], inp), z, f"layer 2 on {params['layer2_pattern']}")]
    loss, abl = r.loss, r.ablated
    g1 = -np.log(np.take_along_axis(predict_g1(inp, C, alpha), tgt[..., None], axis=2)[..., 0]).mean(axis=1)
    d, dse = _mean_se(abl - 0.5 * (loss + g1))
    lm, g1m, am = loss.mean(), g1.mean(), abl.mean()
    parts.append({"name": "layer 1 ablated", "outcome": compare(d, 0.0, stderr=dse, z=z), "value": d, "se": dse,
                  "threshold": 0.0, "loss": float(lm), "ablated": float(am), "g1": float(g1m),
                  "beyond_g1": _mean_se(abl - g1),
                  "line": f"layer 1 ablated ({r.ablation}): loss {lm:.3f} -> {am:.3f} (G1's {g1m:.3f}); above the "
                          f"midpoint by {d:.3f} ± {dse:.3f}"})
    return combine([p["outcome"] for p in parts]), parts


def decide_pooling(r: Readout, layer: int, z: float) -> tuple[Outcome, list[dict[str, Any]]]:
    """The 1-point circuit's check on one model's :class:`Readout`: layer ``layer`` pools the
    sequence uniformly, mean TV distance to the uniform causal head below half the uniform head's
    distance to the nearest competing pattern (previous state, the state itself, the induction
    set: :func:`sim.papers.markov.probes.uniformity`), paired per sequence, z standard errors."""
    inp = r.x[:, :-1]
    T = inp.shape[1]
    u = pr.uniformity(r.maps[layer], [pr.previous_state_pattern(T), pr.self_pattern(T), pr.induction_pattern(inp)])
    d, se = _mean_se(u["tv"] - u["radius"])
    tv, rad = float(u["tv"].mean()), float(u["radius"].mean())
    part = {"name": f"layer {layer} pools uniformly", "outcome": compare(d, 0.0, stderr=se, z=z, direction="<="),
            "value": tv, "se": se, "threshold": rad,
            "line": f"layer {layer}: TV to uniform {tv:.3f} against the radius {rad:.3f} (difference {d:.3f} ± "
                    f"{se:.3f})"}
    return part["outcome"], [part]


def _judge_models(models, which, fn) -> tuple[Outcome, list[dict[str, Any]]]:
    """``fn(readout) -> (outcome, parts)`` over ``models`` (``(label, readout or None)``, ``None``
    skipped); the outcomes combined (:func:`combine`)."""
    rows = []
    for label, m in models:
        if m is None:
            continue
        out, parts = fn(m)  # a model's Readout
        rows.append({"model": label, "which": which, "outcome": out, "parts": parts})
    return combine([r["outcome"] for r in rows]), rows


def _rows_line(rows) -> str:
    if not rows:
        return "no model to judge"
    worst = next((r for r in rows if r["outcome"] is Outcome.VIOLATED), None) or \
        next((r for r in rows if r["outcome"] is not Outcome.HELD), rows[0])
    held = sum(r["outcome"] is Outcome.HELD for r in rows)
    return (f"{held}/{len(rows)} models held; {worst['model']}: "
            + "; ".join(p["line"] for p in worst["parts"]))


def _counterexample(rows, models: "Models", K: int) -> dict[str, Any] | None:
    """The first model whose check is violated: its run, the parts with their numbers, and the
    run's settings (to retrain it)."""
    bad = next((r for r in rows if r["outcome"] is Outcome.VIOLATED), None)
    if bad is None:
        return None
    i = next(j for j, (k, sd) in enumerate(models.keys) if f"K={k} seed {sd}" in bad["model"])
    return {"model": bad["model"], "K": K, "seed_index": models.keys[i][1],
            "parts": {p["name"]: {"outcome": p["outcome"].value, "value": p["value"], "se": p["se"], "line": p["line"]}
                      for p in bad["parts"]},
            "settings": {k: v for k, v in models.params[i].items() if k != "keep_models"}}


def _is_g2(rec, z: float) -> bool:
    """G.1's end-of-training reading of a run at the many-chain end: nearest G2 out of
    distribution with a margin of z paired standard errors."""
    pl = placement(rec, "ood", mr.PHASES)
    return pl["phase"] == "G2" and compare(pl["margin"], 0.0, stderr=pl["se"], z=z) is Outcome.HELD


def _check_g3(ctx) -> TierResult:
    s, z, params = ctx.settings, ctx.z, ctx.params
    k_many = max(s["K"])
    many = Models(ctx, k_many)
    x = _probe_sequences(ctx, int(s["n_probe"]))
    ablation = s["ablation"]
    labels = [f"K={k_many} seed {sd}" for _, sd in many.keys]
    in_g2 = [i for i, rec in enumerate(many.records) if _is_g2(rec, z)]

    reads: dict[tuple[int, str], Readout] = {}

    def read(i: int, which: str) -> tuple[str, Readout | None]:
        label = labels[i] + (f" at step {many.step(i, which)}" if which == "plateau" else "")
        if (i, which) not in reads:
            m = many.model(i, which)
            reads[i, which] = None if m is None else Readout(m, x, ablation)
        return label, reads[i, which]

    def g2_check(r):
        return decide_g2_circuit(r, params, z, s["alpha"])

    def pooling(r):
        return decide_pooling(r, int(params["pooling_layer"]), z)

    g2_out, g2_rows = _judge_models([read(i, "final") for i in in_g2], "final", g2_check)
    plateau = [read(i, "plateau") for i in range(len(labels))]
    pool_out, pool_rows = _judge_models(plateau, "plateau", pooling)
    conclusion = combine([g2_out, pool_out])
    readings = [
        {"name": f"decisive: G2's circuit in every model placed at G2 (K = {k_many}, {len(in_g2)} of "
                 f"{len(labels)} runs): previous-state head in layer 1, induction head in layer 2, layer 1's "
                 "ablation undoing at least half of the model's gain over G1", "verdict": g2_out.value,
         "detail": _rows_line(g2_rows)},
        {"name": "decisive: uniform pooling in layer 1 of every model at its 1-point plateau (G1/M1)",
         "verdict": pool_out.value, "detail": _rows_line(pool_rows)},
    ]
    numbers = []
    for r in g2_rows:
        for p in r["parts"]:
            numbers.append(Number(f"{r['model']}: {p['name']}", p["value"], stderr=p["se"], n=len(x),
                                  seed=many.init_seed(r["model"]), kind="trained",
                                  tolerance=p["threshold"], note=p["outcome"].value))
    for r in pool_rows:
        p = r["parts"][0]
        numbers.append(Number(f"{r['model']}: TV(layer {params['pooling_layer']}, uniform)", p["value"],
                              seed=many.init_seed(r["model"]),
                              stderr=p["se"], n=len(x), kind="trained", tolerance=p["threshold"],
                              note=f"radius {p['threshold']:.3f}; {p['outcome'].value}"))
    # controls: the same checks on models built on the wrong mechanism
    controls = []
    out, rows = _judge_models(plateau, "plateau", g2_check)
    controls.append(Control("G2's circuit check on each run's 1-point-plateau model (G1/M1 phase)",
                            "a model still at the 1-point phase: no previous-state or induction head yet",
                            _VERDICT_OF[out], _rows_line(rows)))
    out, rows = _judge_models([read(i, "untrained") for i in range(len(labels))], "untrained", g2_check)
    controls.append(Control("G2's circuit check on the untrained models", "random initialisation: no circuit",
                            _VERDICT_OF[out], _rows_line(rows)))
    out, rows = _judge_models([read(i, "final") for i in in_g2], "final", pooling)
    controls.append(Control("uniform-pooling check on the G2 models", "a previous-state head does not pool",
                            _VERDICT_OF[out], _rows_line(rows)))
    findings = []
    if g2_rows:
        beyond = [(r["model"], next(p for p in r["parts"] if p["name"] == "layer 1 ablated")["beyond_g1"])
                  for r in g2_rows]
        outs = [compare(m, 0.0, stderr=se, z=z) for _, (m, se) in beyond]
        findings.append(Finding(FindingKind.LITERAL, "ablating layer 1 sends the loss to G1's or above (the words "
                                "'back to at least G1's' taken literally, not within half the gain)",
                                _VERDICT_OF[combine(outs)],
                                "ablated loss minus G1's: " + ", ".join(f"{m:+.3f} ± {se:.3f}"
                                                                        for _, (m, se) in beyond)))
    assumptions = [_prior_assumption(ctx), _model_assumption(s)]
    verdict = tier_verdict(assumptions, conclusion)
    figures = [_attention_figure(ctx, read, in_g2, x, params)]
    summary = (f"G2 circuit: {g2_out.value} ({sum(r['outcome'] is Outcome.HELD for r in g2_rows)}/{len(g2_rows)} "
               f"models); 1-point pooling: {pool_out.value} ({sum(r['outcome'] is Outcome.HELD for r in pool_rows)}/"
               f"{len(pool_rows)} plateau models)")
    budget = ""
    if conclusion is Outcome.UNDECIDED:
        budget = (f"a model within its error of a threshold, or no model to judge (runs placed at G2: {len(in_g2)}, "
                  f"with a 1-point plateau: {len(pool_rows)}); rerun with n_probe={2 * int(s['n_probe'])}")
    cex = _counterexample(g2_rows, many, k_many) or _counterexample(pool_rows, many, k_many)
    return TierResult("trained", verdict, conclusion, summary, assumptions=assumptions, numbers=numbers,
                      figures=[f for f in figures if f], budget=budget, readings=readings, findings=findings,
                      controls=controls, counterexample=cex if conclusion is Outcome.VIOLATED else None,
                      conclusion_without_assumptions=None if verdict is not Verdict.ASSUMPTION_UNMET else
                      f"{conclusion.value} on these inputs")


def _attention_figure(ctx, read, in_g2: Sequence[int], x: np.ndarray, params) -> str | None:
    """Attention maps of the first run's G2 model and plateau model on one probe sequence, each
    beside the detection pattern it is read against (first 24 positions)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    i = in_g2[0] if in_g2 else 0
    inp = x[:1, :-1]
    n = min(24, inp.shape[1])
    rows = []
    label, g2 = read(i, "final")
    if g2 is not None and in_g2:
        for layer, key in ((1, "layer1_pattern"), (2, "layer2_pattern")):
            P = _pattern(params[key], inp)
            rows.append((f"G2 model ({label}), layer {layer}", g2.maps[layer][0], f"pattern: {params[key]}",
                         P[0] if P.ndim == 3 else P))
    label, plat = read(i, "plateau")
    if plat is not None:
        layer = int(params["pooling_layer"])
        rows.append((f"1-point model ({label}), layer {layer}", plat.maps[layer][0], "uniform pooling",
                     pr.uniform_pattern(inp.shape[1])))
    if not rows:
        return None
    fig, axes = plt.subplots(len(rows), 2, figsize=(6.4, 3.0 * len(rows)), dpi=110, squeeze=False)
    for ax_row, (title, A, ptitle, P) in zip(axes, rows):
        for ax, M, t in ((ax_row[0], A, title), (ax_row[1], P, ptitle)):
            M = np.asarray(M)[:n, :n]
            ax.imshow(M, cmap="viridis", vmin=0, vmax=max(1e-9, float(M.max())))
            ax.set_title(t, fontsize=8)
            ax.set_xlabel("key position j", fontsize=7)
            ax.set_ylabel("query position t", fontsize=7)
            ax.tick_params(labelsize=6)
    fig.suptitle("G.3: attention (left) beside the detection pattern (right), one fresh-chain sequence", fontsize=9)
    return ctx.save_figure(fig, "attention-vs-patterns")


# --------------------------------------------------------------------------------- G.4 --
def patch_pairs(P: np.ndarray, mu: np.ndarray, n: int, length: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """``n`` patching pairs on chains ``P`` ``(K, C, C)``: chain ``a_i`` uniform, ``b_i != a_i``
    uniform; a sequence ``A`` of chain ``a``, a donor ``B`` of chain ``b`` and a second sequence
    ``A2`` of chain ``a`` (the same-chain donor), each ``(n, length)``."""
    K = len(P)
    if K < 2:
        raise ValueError("patching between chains needs at least 2 training chains")
    a = rng.integers(0, K, size=n)
    b = (a + rng.integers(1, K, size=n)) % K
    A, _ = sample_sequences(rng, P, mu, n, length, chain_index=a)
    B, _ = sample_sequences(rng, P, mu, n, length, chain_index=b)
    A2, _ = sample_sequences(rng, P, mu, n, length, chain_index=a)
    return {"a": a, "b": b, "A": A, "B": B, "A2": A2}


def _kl_rows(pi: np.ndarray, logq: np.ndarray, read_from: int) -> np.ndarray:
    """``mean_{t >= read_from} KL(pi[i, t] || q[i, t])`` per sequence ``(n,)``; ``pi`` ``(n, T, C)``."""
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(pi > 0, pi * (np.log(np.where(pi > 0, pi, 1.0)) - logq), 0.0)
    return terms.sum(axis=2)[:, read_from:].mean(axis=1)


class PatchBench:
    """One model's patching experiment on ``pairs`` (:func:`patch_pairs`) of its chains ``P``, each
    forward pass done once: the model unpatched on ``A`` and on the donors ``B`` and ``A2``, caching
    the tensors at ``points`` (the hook points a patch may replace, and ``layer1.mlp_out`` for the
    pairs probe); then one forward pass per patch."""

    def __init__(self, model, pairs: Mapping[str, np.ndarray], P: np.ndarray, points: Sequence[str]):
        import torch

        self.model, self.pairs, self.P = model, pairs, P
        self.dev = next(model.parameters()).device
        names = sorted(set(points) | {"layer1.mlp_out"})
        self.logq, self.cache = {}, {}
        for key in ("A", "B", "A2"):
            with torch.no_grad():
                logits, cache = run_with_cache(model, torch.as_tensor(pairs[key][:, :-1], device=self.dev), names=names)
            self.logq[key] = torch.log_softmax(logits.double(), dim=-1).cpu().numpy()  # (n, T, C)
            self.cache[key] = cache

    def patched(self, point: str, value) -> np.ndarray:
        """log q of the model on ``A`` with the tensor at ``point`` replaced by ``value``."""
        import torch

        tA = torch.as_tensor(self.pairs["A"][:, :-1], device=self.dev)
        return torch.log_softmax(pr.patched_logits(self.model, tA, point=point, value=value).double(), -1).cpu().numpy()


def decide_patch(bench: PatchBench, *, point: str = "layer2.attn_out", donor: str = "B", value=None,
                 read_from: int, z: float) -> tuple[Outcome, list[dict[str, Any]]]:
    """The deciding check of the task vector on one model (its :class:`PatchBench`), the same for
    every control.

    phi (the tensor at ``point``) is patched at every position of sequence ``A`` (chain ``a``)
    from the donor ``donor`` (``"B"``: chain ``b``; ``"A2"``: another sequence of chain ``a``),
    or replaced by ``value``. With ``pi_c(t) = P_c(x^A_t, .)`` and ``D_c = mean_{t >= read_from}
    KL(pi_c(t) || model)`` per pair:

    - *switch*: the patch brings ``D_b`` at least half way from its unpatched value on ``A`` to
      the model's own value on ``B`` (``D_b`` of the unpatched model on ``B``, at ``B``'s
      states): ``(D_b^unpatched + D_b^own) / 2 - D_b^patched > 0``;
    - *rise*: ``D_a`` rises, ``D_a^patched - D_a^unpatched > 0``;

    each with z standard errors over the pairs (the seed: "predicts with B's matrix: KL(pi_B ||
    model) falls to near its unpatched value on B while KL(pi_A || model) rises")."""
    pairs, P = bench.pairs, bench.P
    A, B, a, b = pairs["A"][:, :-1], pairs["B"][:, :-1], pairs["a"], pairs["b"]
    q_pat = bench.patched(point, bench.cache[donor][point] if value is None else value)
    piA, piB_at_A, piB_own = P[a[:, None], A], P[b[:, None], A], P[b[:, None], B]  # (n, T, C)
    d_b = {"unpatched": _kl_rows(piB_at_A, bench.logq["A"], read_from),
           "own": _kl_rows(piB_own, bench.logq["B"], read_from), "patched": _kl_rows(piB_at_A, q_pat, read_from)}
    d_a = {"unpatched": _kl_rows(piA, bench.logq["A"], read_from), "patched": _kl_rows(piA, q_pat, read_from)}
    sw, sw_se = _mean_se(0.5 * (d_b["unpatched"] + d_b["own"]) - d_b["patched"])
    gap = d_b["unpatched"].mean() - d_b["own"].mean()
    frac = (d_b["unpatched"].mean() - d_b["patched"].mean()) / gap if gap > 0 else float("nan")
    rise, rise_se = _mean_se(d_a["patched"] - d_a["unpatched"])
    parts = [
        {"name": "switch to B", "outcome": compare(sw, 0.0, stderr=sw_se, z=z), "value": sw, "se": sw_se,
         "threshold": 0.0, "fraction": frac, "d_b": {k: float(v.mean()) for k, v in d_b.items()},
         "line": f"KL(pi_B || model) {d_b['unpatched'].mean():.3f} -> {d_b['patched'].mean():.3f} patched (its own "
                 f"value on B {d_b['own'].mean():.3f}: {frac:.0%} of the way); below the midpoint by {sw:.3f} ± "
                 f"{sw_se:.3f}"},
        {"name": "KL(pi_A || model) rises", "outcome": compare(rise, 0.0, stderr=rise_se, z=z), "value": rise,
         "se": rise_se, "threshold": 0.0,
         "line": f"KL(pi_A || model) {d_a['unpatched'].mean():.3f} -> {d_a['patched'].mean():.3f} (+{rise:.3f} ± "
                 f"{rise_se:.3f})"},
    ]
    return combine([p["outcome"] for p in parts]), parts


def decide_pairs(features: np.ndarray, baseline: np.ndarray, x: np.ndarray, C: int, z: float
                 ) -> tuple[Outcome, dict[str, Any]]:
    """MLP1 encodes the adjacent pairs: the pairs probe's held-out accuracy on ``features``
    ``(n, T - 1, d)`` (``layer1.mlp_out`` at positions ``t >= 1`` of tokens ``x`` ``(n, T)``) above
    the same probe on ``baseline`` (the untrained model's), with the two standard errors in
    quadrature and z of them."""
    labels = pr.pair_labels(x, C)
    got, base = pr.pair_probe(features, labels, C * C), pr.pair_probe(baseline, labels, C * C)
    d, se = got["accuracy"] - base["accuracy"], math.hypot(got["se"], base["se"])
    return compare(d, 0.0, stderr=se, z=z), {
        "name": "pairs probe of MLP1", "value": got["accuracy"], "se": got["se"], "baseline": base["accuracy"],
        "baseline_se": base["se"], "chance": got["chance"], "diff": d, "diff_se": se,
        "line": f"pairs probe {got['accuracy']:.3f} ± {got['se']:.3f} against the untrained model's "
                f"{base['accuracy']:.3f} ± {base['se']:.3f} (most frequent pair {got['chance']:.3f})"}


def _mlp1(model, x: np.ndarray) -> np.ndarray:
    import torch

    tokens = torch.as_tensor(x, device=next(model.parameters()).device)
    return pr.hooked_tensor(model, tokens, "layer1.mlp_out")[:, 1:].double().cpu().numpy()  # (n, T - 1, w)


def _features(bench: PatchBench) -> np.ndarray:
    return bench.cache["A"]["layer1.mlp_out"][:, 1:].double().cpu().numpy()  # (n, T - 1, w)


def _is_m2(rec, z: float) -> bool:
    """G.1's reading of a run at the few-chain end: nearest M1/M2 in distribution with a margin
    of z paired standard errors (or M1 and M2 the two nearest)."""
    pl = placement(rec, "id", mr.PHASES)
    return pl["phase"] in ("M1", "M2") and (pl["runner_up"] in ("M1", "M2") or
                                            compare(pl["margin"], 0.0, stderr=pl["se"], z=z) is Outcome.HELD)


def _check_g4(ctx) -> TierResult:
    s, z, params = ctx.settings, ctx.z, ctx.params
    K_m2 = int(s["m2_K"]) if s.get("m2_K") else min(s["K"])
    if K_m2 not in s["K"]:
        raise ValueError(f"m2_K={K_m2} is not on G.1's K grid {list(s['K'])}")
    few, many = Models(ctx, K_m2), Models(ctx, max(s["K"]))
    point, read_from, n = params["phi"], int(s["N"] * s["read_from"]), int(s["n_pairs"])
    in_m2 = [i for i, rec in enumerate(few.records) if _is_m2(rec, z)]
    rows, pair_rows, alt_rows, ctrl = [], [], [], {"same": [], "random": [], "g2": []}
    points = [point] + ([params["alt_phi"]] if params.get("alt_phi") else [])
    for i in in_m2:
        seed = few.keys[i][1]
        P, mu = run_chains(few.spec(i))
        pairs = patch_pairs(P, mu, n, s["N"] + 1, ctx.rng(f"pairs-K{K_m2}-{seed}"))
        bench = PatchBench(few.model(i, "final"), pairs, P, points)
        label = f"K={K_m2} seed {seed}"
        out, parts = decide_patch(bench, point=point, read_from=read_from, z=z)
        rows.append({"model": label, "outcome": out, "parts": parts})
        if params.get("alt_phi"):
            o, ps = decide_patch(bench, point=params["alt_phi"], read_from=read_from, z=z)
            alt_rows.append({"model": label, "outcome": o, "parts": ps})
        inp = pairs["A"][:, :-1]
        out, part = decide_pairs(_features(bench), _mlp1(few.model(i, "untrained"), inp), inp, s["C"], z)
        pair_rows.append({"model": label, "outcome": out, "parts": [part]})
        o, ps = decide_patch(bench, donor="A2", point=point, read_from=read_from, z=z)
        ctrl["same"].append({"model": label, "outcome": o, "parts": ps})
        o, ps = decide_patch(bench, value=pr.random_phi(bench.cache["A"][point], ctx.rng(f"random-phi-{seed}")),
                             point=point, read_from=read_from, z=z)
        ctrl["random"].append({"model": label, "outcome": o, "parts": ps})
    for i, rec in enumerate(many.records):
        if not _is_g2(rec, z):
            continue
        seed = many.keys[i][1]
        P, mu = run_chains(many.spec(i))
        pairs = patch_pairs(P, mu, n, s["N"] + 1, ctx.rng(f"pairs-K{max(s['K'])}-{seed}"))
        o, ps = decide_patch(PatchBench(many.model(i, "final"), pairs, P, [point]), point=point, read_from=read_from,
                             z=z)
        ctrl["g2"].append({"model": f"K={max(s['K'])} seed {seed}", "outcome": o, "parts": ps})
    patch_out = combine([r["outcome"] for r in rows])
    pairs_out = combine([r["outcome"] for r in pair_rows])
    conclusion = combine([patch_out, pairs_out])
    readings = [
        {"name": f"decisive: patching phi ({point}) from a sequence of chain B makes every M2 model (K = {K_m2}, "
                 f"{len(in_m2)} of {len(few.keys)} runs) predict with B's matrix", "verdict": patch_out.value,
         "detail": _rows_line(rows)},
        {"name": "decisive: MLP1 encodes the adjacent pairs (linear probe above the untrained model's)",
         "verdict": pairs_out.value, "detail": _rows_line(pair_rows)},
    ]
    numbers = []
    for r in rows + pair_rows:
        for p in r["parts"]:
            numbers.append(Number(f"{r['model']}: {p['name']}", p["value"], stderr=p["se"], n=n, kind="trained",
                                  seed=few.init_seed(r["model"]), note=p["line"]))
    controls = [
        Control("phi patched from another sequence of the same chain A", "the donor names chain A: nothing may "
                "switch to B", _VERDICT_OF[combine([r["outcome"] for r in ctrl["same"]])], _rows_line(ctrl["same"])),
        Control("a random phi (normals with phi's mean and spread per position and coordinate)", "names no chain",
                _VERDICT_OF[combine([r["outcome"] for r in ctrl["random"]])], _rows_line(ctrl["random"])),
        Control(f"G2-phase models (K = {max(s['K'])}), two of their training chains", "an induction head: phi "
                "carries no chain identity", _VERDICT_OF[combine([r["outcome"] for r in ctrl["g2"]])],
                _rows_line(ctrl["g2"])),
    ]
    findings = []
    if alt_rows:
        findings.append(Finding(
            FindingKind.OUTSIDE, f"the task vector read where these models form it: {params['alt_phi']} (the first "
            "layer's pooled output, 1-point statistics of the sequence) patched from chain B instead of the seed's "
            "phi", _VERDICT_OF[combine([r["outcome"] for r in alt_rows])], _rows_line(alt_rows)))
    assumptions = [_prior_assumption(ctx), _model_assumption(s)]
    verdict = tier_verdict(assumptions, conclusion)
    figures = [_patch_figure(ctx, few, in_m2, point, read_from, K_m2)] if in_m2 else []
    summary = (f"patching phi: {patch_out.value} ({sum(r['outcome'] is Outcome.HELD for r in rows)}/{len(rows)} M2 "
               f"models); pairs probe: {pairs_out.value}")
    budget = "" if conclusion is not Outcome.UNDECIDED else (
        f"a model within its error (or no run placed at M1/M2: {len(in_m2)}); rerun with n_pairs={2 * n}")
    cex = _counterexample(rows, few, K_m2) or _counterexample(pair_rows, few, K_m2)
    return TierResult("trained", verdict, conclusion, summary, assumptions=assumptions, numbers=numbers,
                      figures=[f for f in figures if f], budget=budget, readings=readings, findings=findings,
                      controls=controls, counterexample=cex if conclusion is Outcome.VIOLATED else None,
                      conclusion_without_assumptions=None if verdict is not Verdict.ASSUMPTION_UNMET else
                      f"{conclusion.value} on these inputs")


def _patch_figure(ctx, few: Models, in_m2: Sequence[int], point: str, read_from: int, K: int) -> str | None:
    """One pair of the first M2 run: at each position of sequence A, the model's prediction of
    the next state unpatched and patched from B, beside pi_A and pi_B (the rows of chains a and
    b at the current state), as images over (position, next state)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import torch

    i = in_m2[0]
    P, mu = run_chains(few.spec(i))
    pairs = patch_pairs(P, mu, 1, few.spec(i).N + 1, ctx.rng("figure-pair"))
    m = few.model(i, "final")
    A = pairs["A"][:, :-1]
    tA = torch.as_tensor(A, device=ctx.device)
    with torch.no_grad():
        unp = torch.softmax(m(tA).double(), -1)[0].cpu().numpy()
    donor = torch.as_tensor(pairs["B"][:, :-1], device=ctx.device)
    pat = torch.softmax(pr.patched_logits(m, tA, point=point, donor=donor).double(), -1)[0].cpu().numpy()
    piA, piB = P[pairs["a"][0]][A[0]], P[pairs["b"][0]][A[0]]
    n = min(32, A.shape[1])
    panels = (("pi_A (chain a's row at x_t)", piA), ("model, unpatched", unp), ("model, phi patched from B", pat),
              ("pi_B (chain b's row at x_t)", piB))
    fig, axes = plt.subplots(1, 4, figsize=(10.5, 3.6), dpi=110, sharey=True)
    for ax, (title, M) in zip(axes, panels):
        ax.imshow(np.asarray(M)[-n:].T, aspect="auto", cmap="magma", vmin=0, vmax=1,
                  extent=(A.shape[1] - n - 0.5, A.shape[1] - 0.5, M.shape[1] - 0.5, -0.5))
        ax.set_title(title, fontsize=8)
        ax.set_xlabel("position t (the last ones)", fontsize=7)
        ax.tick_params(labelsize=6)
    axes[0].set_ylabel("next state", fontsize=7)
    fig.suptitle(f"G.4: phi = {point} patched from a sequence of chain {pairs['b'][0]} into one of chain "
                 f"{pairs['a'][0]} (K = {K}, seed index {few.keys[i][1]}); deciding positions t >= {read_from}",
                 fontsize=8)
    return ctx.save_figure(fig, "patched-predictions")


def _g1_settings(profile: str) -> dict[str, Any]:
    """G.1's settings in ``profile`` (the runs G.3 and G.4 read), its tiers left out."""
    return {k: v for k, v in G_1.settings[profile].items() if k != "tiers"}


_G_OPEN = ("Settings the paper leaves open are G.1's (Dirichlet concentration alpha = 0.1, N = 64, width 64, AdamW "
           "lr 1e-3, batch 32, steps, relative positions) and the probes' own: the probe sequences (fresh chains), "
           "the ablation (the head's pattern made uniform, or zeroed: setting 'ablation').")

G_3 = Claim(
    id="G.3",
    title="Each phase has its circuit: uniform pooling for G1/M1; a previous-state head and an induction head for G2",
    source=Source("G", "§A (the sub-circuits of the phases; path patching and ablations)",
                  "G1/M1: layer 1 pools uniformly; G2: layer 1 attends to the previous state, layer 2 matches the "
                  "current state and reads the state that follows (statistical induction head)"),
    statement=(
        "Primary reading (decides): the circuits the seed names for the 1-point and the 2-point generalising phases, "
        "read on G.1's trained models (the same runs, seeds and settings: 2 layers of attention + MLP, width 64, "
        "C = 10, Dirichlet(0.1) rows, N = 64). A head's detection score on a pattern (the key positions S_t it "
        "should attend to from query t) is s = (m - u) / (1 - u), m its mean attention mass on S_t and u the "
        "uniform causal head's; s >= 1/2 puts the head nearer the pattern than the uniform head in total "
        "variation (the triangle inequality; the factor is that argument's). G2: in every run at the largest K "
        "that G.1 places at G2 (nearest out of distribution with a margin of z paired standard errors), on fresh-"
        "chain sequences: layer 1's score on the previous state (S_t = {t-1}) >= 1/2, layer 2's on the induction "
        "set (S_t = {j <= t : x_{j-1} = x_t}, the positions after an earlier occurrence of the current state) >= 1/2, "
        "and layer 1's head ablated (its pattern made uniform, the 1-point circuit; setting 'ablation': 'zero' "
        "removes it instead) raises the loss on fresh chains above the midpoint between the model's loss and the "
        "in-context unigram's (G1's): 'back to at least G1's' read within half the gain. 1-point phase: in every "
        "run's model in the middle of its 1-point plateau (the longest stretch of evaluations nearest G1 or M1), "
        "layer 1's mean total-variation distance to the uniform causal head is below half the uniform head's "
        "distance to the nearest competing pattern (previous state, the state itself, the induction set). All "
        "with z standard errors over the probe sequences. Negative controls through the same checks, each must "
        "FAIL: the G2 check on the 1-point-plateau models and on the untrained models, and the pooling check on "
        "the G2 models. Reported as a finding, never deciding: the ablated loss at or above G1's (the words taken "
        "literally). "
        + _G_OPEN),
    assumptions=("rows i.i.d. symmetric Dirichlet", "2-layer transformer, attention + MLP in each layer"),
    checks={"trained": _check_g3},
    jobs={"trained": _g3_jobs},
    settings={
        "quick": {"tiers": ("trained",), **_g1_settings("quick"), "n_probe": 256, "ablation": "uniform"},
        "standard": {"tiers": ("trained",), **_g1_settings("standard"), "n_probe": 512, "ablation": "uniform"},
        "paper": {"tiers": ("trained",), **_g1_settings("paper"), "n_probe": 1024, "ablation": "uniform"},
    },
    decided_by="quick",
    params={"layer1_pattern": "previous_state", "layer2_pattern": "induction", "pooling_layer": 1},
    reuses=("G.1",),
    primary=PrimaryReading(
        statement=("Each algorithmic phase is implemented by a sparse sub-circuit. G1 & M1 (1-point statistics): the "
                   "first attention layer pools the sequence uniformly, extracting single-point frequencies. G2 "
                   "(statistical induction head): the first attention layer attends to the previous state and writes "
                   "it into the residual stream; the second attention layer matches, finding where the current state "
                   "occurred in the context and reading the state that follows."),
        seed="004", lines="125-131",
        setting=("the 2-layer transformer with an attention and an MLP block per layer (line 107) trained on K "
                 "Markov chains with C = 10 states (line 106); circuits found by path patching and ablations "
                 "(lines 115-116)"),
        review=("Decided on G.1's own models, each phase's circuit read as a detection pattern against the uniform "
                "head with the triangle-inequality factor 1/2, and the ablation within half the G1 -> G2 gain; the "
                "literal 'back to at least G1's loss' is a finding. The wrong mechanisms (a model at the 1-point "
                "plateau, the untrained model, a G2 model for the pooling) must FAIL the same checks.")),
)

G_4 = Claim(
    id="G.4",
    title="M2's task vector: MLP1 encodes pairs, Att2 pools them into phi, and patching phi switches the chain",
    source=Source("G", "§A (M2: the encoder-pool-decoder task-recognition head; the patching experiment)",
                  "MLP1 encodes adjacent pairs; Att2 averages them into the task vector phi; MLP2 decodes the "
                  "transition matrix from phi and the current state; patching phi from sequence B into A makes the "
                  "model predict with B's matrix"),
    statement=(
        "Primary reading (decides): the seed's task vector and its patching experiment, on G.1's trained models at the "
        "few-chain end of its K grid (setting 'm2_K', default the smallest K) that G.1 places at M1/M2 in "
        "distribution (nearest with a margin of z paired standard errors). phi is the second attention layer's "
        "output, what Att2 adds to the residual stream at each position (hook point layer2.attn_out; the seed: "
        "'Att2 averages these embeddings over the sequence, forming the task vector phi'). For pairs of two of the "
        "model's training chains a != b (both uniform; 'n_pairs' pairs per model): a sequence A of chain a, a "
        "donor B of chain b, and phi patched at every position of A from B (position t's from B's prefix up to "
        "t). With pi_c(t) = P_c(x^A_t, .) and D_c the mean over positions t >= N * read_from (the chain is "
        "identifiable there; read_from = 1/2) of KL(pi_c(t) || model): the patch must bring D_b at least half way "
        "from its unpatched value to the model's own value on B (the seed: 'falls to near its unpatched value on "
        "B', read within half the way), and D_a must rise; and a linear probe of MLP1's output (least squares onto "
        "the one-hot pair (x_{t-1}, x_t), fitted on half the sequences, scored on the other half) must read the "
        "pairs better than the same probe on the untrained model. All with z standard errors over the pairs "
        "(probe: over held-out sequences). Negative controls through the same patching check, each must FAIL: "
        "phi from another sequence of the same chain a, a random phi (normals with phi's mean and spread), and "
        "G.1's G2-phase models (largest K) patched between two of their chains; the probe's control is the "
        "untrained model. Reported as a finding, never deciding: the same patch at the first attention layer's "
        "output (where a model identifying the chain from 1-point statistics carries it). " + _G_OPEN),
    assumptions=("rows i.i.d. symmetric Dirichlet", "2-layer transformer, attention + MLP in each layer"),
    checks={"trained": _check_g4},
    jobs={"trained": _g4_jobs},
    settings={
        "quick": {"tiers": ("trained",), **_g1_settings("quick"), "n_pairs": 128, "read_from": 0.5, "m2_K": None},
        "standard": {"tiers": ("trained",), **_g1_settings("standard"), "n_pairs": 256, "read_from": 0.5,
                     "m2_K": None},
        "paper": {"tiers": ("trained",), **_g1_settings("paper"), "n_pairs": 512, "read_from": 0.5, "m2_K": None},
    },
    decided_by="quick",
    params={"phi": "layer2.attn_out", "alt_phi": "layer1.attn_out"},
    reuses=("G.1",),
    primary=PrimaryReading(
        statement=("M2 (2-point memorisation) is implemented by an encoder-pool-decoder sub-circuit: MLP1 encodes "
                   "adjacent state pairs as nonlinear embeddings; Att2 averages these embeddings over the whole "
                   "sequence, forming a compact task vector phi that represents the chain that generated it; MLP2 "
                   "combines the current state and phi to retrieve and output that chain's transition matrix. "
                   "Verification: patching, replacing sequence A's task vector by sequence B's, makes the model "
                   "immediately predict with B's transition matrix."),
        seed="004", lines="132-138",
        setting=("the 2-layer transformer with an attention and an MLP block per layer (line 107), trained on few "
                 "Markov chains (C = 10, line 106) into the M2 phase"),
        review=("Decided as the seed states it: phi is Att2's output, patched from a sequence of another training "
                "chain, and the switch read on the chain's own rows; the pairs encoding by the probe the issue names. "
                "The seed does not give the rows' Dirichlet concentration; G.1's alpha = 0.1 is this project's "
                "choice, and where chains differ this much in their 1-point statistics a model may identify the "
                "chain from those (the first layer's pooling) instead: the report gives that patch as a finding, "
                "never deciding.")),
)

CLAIMS = [G_3, G_4]
