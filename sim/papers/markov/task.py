"""In-context learning of Markov chains: the K-chain task, the strategies a model is placed
against, and one training run (claims G.1, G.2 of Gibson, Cui & Reddy; E.1 of Edelman et al.).

Task
----
``K`` transition matrices ``P_1..P_K`` on ``C`` states (rows i.i.d. symmetric
``Dirichlet(alpha)``, or a user's prior) are drawn **once**, from their own seed
(``chain_seed``), and fixed; chain ``k`` is drawn from the stream
``sim.seeds.stream(chain_seed, k)``, so the first ``K`` chains do not depend on
``K`` (the chain sets of a K-grid are nested). A training sequence picks ``k`` uniformly,
draws ``x_0`` from the **stationary law** ``mu_k`` of ``P_k`` and ``x_{s+1} ~ P_k(x_s, .)``.
``K = "inf"`` draws a fresh chain for every sequence (Edelman et al.'s task). Sequences
have ``N + 1`` tokens; the model reads ``x_0..x_{N-1}`` and predicts ``x_{t+1}`` at every
position ``t``.

Edelman et al.'s published code (github.com/EzraEdelman/Evolution-of-Statistical-Induction-Heads,
``datasets.py`` / ``utils.py``) means to draw ``x_0`` from the stationary law too, but its
``stationary_distribution`` helper, for fewer than 5 states, returns ``(P^16).mean(axis=-1)``:
the mean of each *row* of ``P^16``, which is ``1/C`` for every state. So its first token is
uniform for ``C < 5`` (the mean over axis ``-2``, the rows, would be the stationary law).
Here ``x_0 ~ mu_k`` for every ``C``.

Strategies (predictions of ``x_{t+1}`` given ``x_0..x_t``; shape ``(n, T, C)``)
-------------------------------------------------------------------------------
- ``G1`` in-context unigram, add-alpha: ``(c_t(b) + alpha) / (t + 1 + C alpha)`` with
  ``c_t(b) = #{s <= t : x_s = b}`` (the Bayes predictive of an i.i.d. sequence with a
  ``Dirichlet(alpha)`` prior on its law).
- ``G2`` in-context bigram, add-alpha: ``(n_t(x_t, b) + alpha) / (n_t(x_t) + C alpha)`` with
  ``n_t(a, b) = #{s < t : x_s = a, x_{s+1} = b}`` (the Bayes predictive for a chain with
  i.i.d. ``Dirichlet(alpha)`` rows, the first token treated as uninformative).
- ``M1`` unigram memorisation: ``sum_k w_k(t) mu_k(b)``, ``w_k(t) ∝ prod_{s <= t} mu_k(x_s)``.
- ``M2`` bigram memorisation: ``sum_k w_k(t) P_k(x_t, b)``,
  ``w_k(t) ∝ mu_k(x_0) prod_{s < t} P_k(x_s, x_{s+1})`` (uniform prior over the K training
  chains): the Bayes predictor of the training distribution.
- Edelman et al.'s baselines: ``uniform`` (``1/C``), ``unigram`` and ``bigram``: G1 and G2 with
  ``alpha = 1`` (their code's add-one counts), whatever the task's alpha.

A model's distance to a strategy ``s`` is ``KL(p_s || p_model)`` averaged over positions and
sequences (nats; as in Edelman et al.'s code, which reports ``CE(p_model; p_s) =
H(p_s) + KL(p_s || p_model)``), measured in distribution (sequences from the K training
chains) and out of distribution (fresh chains from the same prior).
"""
from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import numpy as np

from sim.papers.markov.placement import absolute_placement, judge_end, kl_per_sequence, separations
from sim.seeds import derive_seed, stream
from sim.verdict import Outcome
from theory.markov import stationary_batch

__all__ = [
    "GIBSON_STRATEGIES",
    "EDELMAN_STRATEGIES",
    "ALL_STRATEGIES",
    "draw_chains",
    "stationary_laws",
    "fresh_sequences",
    "batch_sampler",
    "sample_sequences",
    "predict",
    "predict_uniform",
    "predict_g1",
    "predict_g2",
    "predict_m1",
    "predict_m2",
    "reference_predictive",
    "audit_strategies",
    "kl_per_sequence",
    "MarkovRunSpec",
    "train_markov",
    "run_markov",
    "eval_schedule",
    "evaluation_sets",
    "score_predictions",
    "run_chains",
    "nearest",
    "crossing_step",
]

#: G's four strategies (the module docstring defines each).
GIBSON_STRATEGIES = ("G1", "G2", "M1", "M2")
#: Edelman et al.'s three baselines, in the order training passes them.
EDELMAN_STRATEGIES = ("uniform", "unigram", "bigram")
#: Every strategy :func:`predict` knows.
ALL_STRATEGIES = GIBSON_STRATEGIES + EDELMAN_STRATEGIES


# ------------------------------------------------------------------------------ the task ---
def stationary_laws(P: np.ndarray) -> np.ndarray:
    """Stationary laws ``(K, C)`` of chains ``(K, C, C)``; where a chain has several closed
    classes (no unique stationary law, e.g. a user's prior with zeros) its first token is
    drawn uniformly instead."""
    from theory import TheoryError

    try:
        return stationary_batch(P)
    except TheoryError:
        out = np.empty(P.shape[:2])
        for k in range(len(P)):
            try:
                out[k] = stationary_batch(P[k:k + 1])[0]
            except TheoryError:
                out[k] = 1.0 / P.shape[1]
        return out


def _chain_rng(chain_seed: int, k: int) -> np.random.Generator:
    return stream(chain_seed, k)


def draw_chains(C: int, K: int, *, alpha: float = 1.0, chain_seed: int = 0, prior=None,
                first: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Chains ``first .. first + K - 1`` of the stream of ``chain_seed``.

    Returns ``P`` ``(K, C, C)`` (row-stochastic, ``P[k, a, b] = P_k(b | a)``) and their
    stationary laws ``mu`` ``(K, C)``. Rows are ``Dirichlet(alpha 1_C)`` unless ``prior``
    (a :class:`sim.priors.Prior`) is given. Chain ``k`` depends on ``(chain_seed, k)`` only.
    """
    if C < 2 or K < 1:
        raise ValueError(f"need C >= 2 states and K >= 1 chains, got C={C}, K={K}")
    if prior is not None:
        bound = prior if prior.d is not None else prior.bind(C)
        if bound.d != C:
            raise ValueError(f"the prior is bound to d={bound.d} states but the task has C={C}")
        P = np.stack([bound.sample(_chain_rng(chain_seed, k), 1)[0] for k in range(first, first + K)])
    else:
        if not alpha > 0:
            raise ValueError(f"Dirichlet concentration alpha must be positive, got {alpha}")
        P = np.empty((K, C, C))
        for i, k in enumerate(range(first, first + K)):
            rng = _chain_rng(chain_seed, k)
            g = rng.standard_gamma(alpha, size=(C, C))
            # alpha << 1 can underflow a whole row: give it its a.s. limit, a uniformly placed unit vector
            dead = np.flatnonzero(g.sum(axis=1) <= 0)
            g[dead, rng.integers(0, C, size=dead.size)] = 1.0
            P[i] = g / g.sum(axis=1, keepdims=True)
    return P, stationary_laws(P)


def sample_sequences(rng: np.random.Generator, P: np.ndarray, mu: np.ndarray, n: int, length: int,
                     chain_index: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``n`` sequences of ``length`` tokens: chain ``k ~ Unif{0..K-1}`` (or ``chain_index``),
    ``x_0 ~ mu_k``, ``x_{s+1} ~ P_k(x_s, .)``. Returns ``(tokens (n, length) int64, k (n,))``."""
    K, C, _ = P.shape
    k = rng.integers(0, K, size=n) if chain_index is None else np.asarray(chain_index)
    u = rng.random((n, length))
    cdf_mu = np.cumsum(mu, axis=1)[k]  # (n, C)
    cdf_P = np.cumsum(P, axis=2)[:, :, :-1].reshape(K * C, C - 1)  # row k C + a: CDF of P_k(a, .) but its last entry
    x = np.empty((n, length), dtype=np.int64)
    x[:, 0] = np.minimum((u[:, :1] >= cdf_mu[:, :-1]).sum(axis=1), C - 1)
    base = k * C
    for s in range(1, length):
        rows = np.take(cdf_P, base + x[:, s - 1], axis=0)  # (n, C-1)
        x[:, s] = np.minimum((u[:, s:s + 1] >= rows).sum(axis=1), C - 1)
    return x, k


def fresh_sequences(rng_chains: np.random.Generator, rng_seq: np.random.Generator, C: int, n: int, length: int,
                    *, alpha: float = 1.0, prior=None) -> tuple[np.ndarray, np.ndarray]:
    """One fresh chain per sequence (``K = inf``; out-of-distribution evaluation). Returns
    ``(tokens (n, length), P (n, C, C))``."""
    if prior is not None:
        bound = prior if prior.d is not None else prior.bind(C)
        P = bound.sample(rng_chains, n)
    else:
        g = rng_chains.standard_gamma(alpha, size=(n, C, C))
        dead = np.argwhere(g.sum(axis=2) <= 0)  # underflowed rows (alpha << 1): a unit vector
        g[dead[:, 0], dead[:, 1], rng_chains.integers(0, C, size=len(dead))] = 1.0
        P = g / g.sum(axis=2, keepdims=True)
    mu = stationary_laws(P)
    x, _ = sample_sequences(rng_seq, P, mu, n, length, chain_index=np.arange(n))
    return x, P


# ---------------------------------------------------------------------------- strategies ---
def _onehot(x: np.ndarray, C: int) -> np.ndarray:
    return np.eye(C)[x]  # (n, T, C)


def predict_uniform(x: np.ndarray, C: int) -> np.ndarray:
    """``1/C`` everywhere, shape ``(n, T, C)``."""
    return np.full(x.shape + (C,), 1.0 / C)


def predict_g1(x: np.ndarray, C: int, alpha: float = 1.0) -> np.ndarray:
    """G1, in-context unigram: ``(c_t(b) + alpha) / (t + 1 + C alpha)``, ``c_t`` counting ``x_0..x_t``."""
    counts = np.cumsum(_onehot(x, C), axis=1)  # (n, T, C)
    t = np.arange(1, x.shape[1] + 1)[None, :, None]
    return (counts + alpha) / (t + C * alpha)


def predict_g2(x: np.ndarray, C: int, alpha: float = 1.0) -> np.ndarray:
    """G2, in-context bigram: ``(n_t(x_t, b) + alpha) / (n_t(x_t) + C alpha)``, transitions
    ``x_s -> x_{s+1}`` with ``s + 1 <= t``."""
    n, T = x.shape
    pair = np.zeros((n, T, C * C))  # (n, T, C*C): transition into position t
    pair[np.arange(n)[:, None], np.arange(1, T)[None, :], x[:, :-1] * C + x[:, 1:]] = 1.0
    cum = np.cumsum(pair, axis=1).reshape(n, T, C, C)  # n_t(a, b)
    rows = np.take_along_axis(cum, x[:, :, None, None].repeat(C, axis=3), axis=2)[:, :, 0]  # (n, T, C)
    return (rows + alpha) / (rows.sum(axis=2, keepdims=True) + C * alpha)


def _mixture(loglik_fn, pred_fn, K: int, shape, chunk: int) -> np.ndarray:
    """Posterior-weighted mixture over chains, streamed over chunks of chains (log-sum-exp)."""
    n, T, C = shape
    m = np.full((n, T), -np.inf)
    num = np.zeros((n, T, C))
    den = np.zeros((n, T))
    for lo in range(0, K, chunk):
        hi = min(K, lo + chunk)
        ll = loglik_fn(lo, hi)  # (n, T, k)
        m_new = np.maximum(m, ll.max(axis=2))
        with np.errstate(invalid="ignore"):
            scale = np.where(np.isfinite(m), np.exp(m - m_new), 0.0)
        w = np.exp(ll - m_new[..., None])  # (n, T, k)
        num = num * scale[..., None] + pred_fn(w, lo, hi)
        den = den * scale + w.sum(axis=2)
        m = m_new
    return num / den[..., None]


def predict_m1(x: np.ndarray, P: np.ndarray, mu: np.ndarray, chunk: int = 256) -> np.ndarray:
    """M1: ``sum_k w_k mu_k``, ``w_k ∝ prod_{s <= t} mu_k(x_s)`` (uniform prior over the K chains)."""
    K, C = mu.shape
    with np.errstate(divide="ignore"):
        logmu = np.log(mu)  # (K, C)

    def loglik(lo, hi):
        return np.cumsum(logmu[lo:hi].T[x], axis=1)  # (n, T, k)

    return _mixture(loglik, lambda w, lo, hi: w @ mu[lo:hi], K, x.shape + (C,), chunk)


def predict_m2(x: np.ndarray, P: np.ndarray, mu: np.ndarray, chunk: int = 256) -> np.ndarray:
    """M2: ``sum_k w_k P_k(x_t, .)``, ``w_k ∝ mu_k(x_0) prod_{s < t} P_k(x_s, x_{s+1})``."""
    K, C, _ = P.shape
    n, T = x.shape
    with np.errstate(divide="ignore"):
        logP, logmu = np.log(P), np.log(mu)

    def loglik(lo, hi):
        steps = logP[lo:hi][:, x[:, :-1], x[:, 1:]]  # (k, n, T-1)
        ll = np.concatenate([logmu[lo:hi][:, x[:, 0]][..., None], steps], axis=2)  # (k, n, T)
        return np.cumsum(ll, axis=2).transpose(1, 2, 0)  # (n, T, k)

    def pred(w, lo, hi):
        out = np.empty((n, T, C))
        for a in range(C):  # group positions by the current state: w @ P_k(a, .)
            sel = x == a
            out[sel] = w[sel] @ P[lo:hi, a, :]
        return out

    return _mixture(loglik, pred, K, (n, T, C), chunk)


def predict(name: str, x: np.ndarray, *, C: int, alpha: float = 1.0, P: np.ndarray | None = None,
            mu: np.ndarray | None = None) -> np.ndarray:
    """The predictions of strategy ``name`` (one of :data:`ALL_STRATEGIES`) on tokens ``x`` ``(n, T)``."""
    if name == "uniform":
        return predict_uniform(x, C)
    if name == "G1":
        return predict_g1(x, C, alpha)
    if name == "G2":
        return predict_g2(x, C, alpha)
    if name == "unigram":
        return predict_g1(x, C, 1.0)
    if name == "bigram":
        return predict_g2(x, C, 1.0)
    if name in ("M1", "M2"):
        if P is None or mu is None:
            raise ValueError(f"strategy {name} needs the training chains P and their stationary laws mu")
        return (predict_m1 if name == "M1" else predict_m2)(x, P, mu)
    raise ValueError(f"unknown strategy {name!r}; known: {', '.join(ALL_STRATEGIES)}")


# ------------------------------------------------------------ brute-force references ---
def reference_predictive(name: str, seq, *, C: int, alpha: float = 1.0, P=None, mu=None) -> np.ndarray:
    """The prediction of ``x_{t+1}`` after ``seq = (x_0..x_t)`` straight from each strategy's
    definition, with plain loops and explicit products (no cumulative sums): the oracle the
    vectorised predictors and :func:`audit_strategies` are checked against. Returns ``(C,)``."""
    seq = [int(s) for s in seq]
    t = len(seq) - 1
    if name == "uniform":
        return np.full(C, 1.0 / C)
    if name in ("G1", "unigram"):
        a = alpha if name == "G1" else 1.0
        return np.array([(sum(1 for s in seq if s == b) + a) / (len(seq) + C * a) for b in range(C)])
    if name in ("G2", "bigram"):
        a = alpha if name == "G2" else 1.0
        cnt = [sum(1 for s in range(t) if seq[s] == seq[t] and seq[s + 1] == b) for b in range(C)]
        return np.array([(cnt[b] + a) / (sum(cnt) + C * a) for b in range(C)])
    if name in ("M1", "M2"):
        K = len(P)
        post = np.empty(K)
        for k in range(K):  # likelihood of the observed prefix under chain k, as a product
            like = 1.0
            if name == "M1":
                for s in seq:
                    like *= mu[k][s]
            else:
                like = mu[k][seq[0]]
                for s in range(t):
                    like *= P[k][seq[s]][seq[s + 1]]
            post[k] = like
        post = post / post.sum()
        nxt = [mu[k] if name == "M1" else P[k][seq[t]] for k in range(K)]
        return sum(post[k] * np.asarray(nxt[k], dtype=float) for k in range(K))
    raise ValueError(f"unknown strategy {name!r}")


def audit_strategies(table: Mapping[str, Callable[..., np.ndarray]], *, C: int = 3, K: int = 3, T: int = 7,
                     alpha: float = 0.5, seed: int = 0, atol: float = 1e-10) -> dict[str, float]:
    """Check a ``name -> predictor`` table against :func:`reference_predictive` on a small
    random instance (every prefix of a few sequences). Each predictor is called as
    ``fn(x, C=, alpha=, P=, mu=)``. Returns ``{name: max abs deviation}`` for the names
    that disagree (empty when every label computes its own definition), so a table with
    two labels swapped (e.g. G2 and M2) is caught."""
    rng = np.random.default_rng(seed)
    P, mu = draw_chains(C, K, alpha=1.0, chain_seed=seed)
    x, _ = sample_sequences(rng, P, mu, 4, T)
    bad = {}
    for name, fn in table.items():
        got = fn(x, C=C, alpha=alpha, P=P, mu=mu)
        ref = np.array([[reference_predictive(name, x[i, :t + 1], C=C, alpha=alpha, P=P, mu=mu) for t in range(T)]
                        for i in range(len(x))])
        dev = float(np.max(np.abs(got - ref)))
        if not dev <= atol:
            bad[name] = dev
    return bad


# --------------------------------------------------------------------------- one run ---
@dataclass(frozen=True)
class MarkovRunSpec:
    """Everything one training run depends on (hashed into its sweep run id).

    Task: ``C`` states, ``K`` training chains (``"inf"``: a fresh chain per sequence),
    context ``N``, rows ``Dirichlet(alpha)`` (or ``prior``, a spec string of
    :mod:`sim.priors`), chains from ``chain_seed`` (default: ``seed``).
    Model: :class:`sim.papers.markov.model.MarkovLMConfig` fields. Training: AdamW
    (``betas``, decoupled ``weight_decay`` on matrices), constant ``lr``, ``batch``
    sequences per step, ``steps`` steps. Evaluation: ``n_eval`` sequences in and out of
    distribution, at the steps of :func:`eval_schedule`; ``strategies`` to measure.

    Interventions on training (G.5), each the identity at its default: ``lr_factors``
    ``((prefix, factor), ...)`` trains the parameters whose names start with ``prefix`` at
    ``factor * lr`` (:class:`sim.train.Stage`; G's slowed first attention layer: the prefixes
    of layer 1's query, key and relative-position parameters); ``inject_p`` adds a learned
    vector per training chain, ``e_k``, to the embeddings (hook point ``resid0``) of each
    training sequence of chain ``k`` with probability ``inject_p``
    (:class:`sim.papers.markov.model.TaskInjection`; evaluations never inject).
    """

    C: int = 10
    K: Any = 16  # int >= 1 or "inf"
    N: int = 64
    alpha: float = 1.0
    prior: str | None = None
    seed: int = 0
    chain_seed: int | None = None
    # model
    width: int = 64
    layers: int = 2
    heads: int = 1
    mlp: bool = True
    positions: str = "relative"
    dropout: float = 0.0
    # optimisation
    steps: int = 1000
    lr: float = 1e-3
    batch: int = 64
    betas: tuple = (0.9, 0.999)
    weight_decay: float = 0.0
    grad_clip: float | None = None
    # evaluation
    n_eval: int = 128
    eval_every: int = 50
    eval_log_points: int = 12
    strategies: tuple = GIBSON_STRATEGIES
    ood: bool = True
    # stop early once ``stop_when_nearest`` is the nearest strategy (among ``strategies``) on the
    # first evaluation set for ``stop_patience`` evaluations in a row (the benchmark's rule), and
    # nearer than the runner-up by more than ``stop_margin_z`` paired standard errors (0: nearest
    # is enough), so that a check that decides on that margin is not stopped short of it
    stop_when_nearest: str | None = None
    stop_patience: int = 1
    stop_margin_z: float = 0.0
    # or stop once the model is *placed* at one of these strategies on ``stop_set`` (default: the
    # first set) for ``stop_patience`` evaluations in a row: G.1's own reading at its margin
    # ``stop_margin_z`` (:func:`sim.papers.markov.placement.judge_end`), so that the check
    # reading the run's last evaluation finds the judgement that stopped it
    stop_when_placed: tuple = ()
    stop_set: str | None = None
    # more placement rules ``((set, (strategies...)), ...)``: the run stops once any rule (this or
    # the one above) holds at ``stop_patience`` evaluations in a row (G.5: memorised in
    # distribution or generalised out of distribution, whichever comes first)
    stop_rules: tuple = ()
    threads: int | None = None  # torch threads inside the run (sweeps set 1)
    # interventions (G.5; the identity at their defaults)
    lr_factors: tuple = ()
    inject_p: float = 0.0

    def __post_init__(self):
        object.__setattr__(self, "betas", tuple(float(b) for b in self.betas))
        object.__setattr__(self, "lr_factors", tuple((str(p), float(f)) for p, f in self.lr_factors))
        object.__setattr__(self, "strategies", tuple(self.strategies))
        object.__setattr__(self, "stop_when_placed", tuple(self.stop_when_placed))
        object.__setattr__(self, "stop_rules", tuple((str(w), tuple(ph)) for w, ph in self.stop_rules))
        if self.K != "inf" and (isinstance(self.K, bool) or not isinstance(self.K, int) or self.K < 1):
            raise ValueError(f"K must be a positive integer or 'inf', got {self.K!r}")
        for name in ("C", "N", "steps", "batch", "n_eval", "eval_every", "width", "layers", "heads", "stop_patience"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < (0 if name == "steps" else 1):
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
        if self.C < 2:
            raise ValueError(f"C must be >= 2 states, got {self.C}")
        if not self.lr > 0 or not self.alpha > 0:
            raise ValueError(f"lr and alpha must be positive, got lr={self.lr}, alpha={self.alpha}")
        unknown = set(self.strategies) - set(ALL_STRATEGIES)
        if unknown:
            raise ValueError(f"unknown strategies {sorted(unknown)}; known: {', '.join(ALL_STRATEGIES)}")
        if self.K == "inf" and {"M1", "M2"} & set(self.strategies):
            raise ValueError("M1/M2 need a finite set of training chains (K = 'inf' has none)")
        if not (isinstance(self.stop_margin_z, (int, float)) and 0 <= self.stop_margin_z < float("inf")):
            raise ValueError(f"stop_margin_z must be a finite number >= 0, got {self.stop_margin_z!r}")
        if self.stop_when_nearest is not None and self.stop_when_nearest not in self.strategies:
            raise ValueError(f"stop_when_nearest={self.stop_when_nearest!r} is not among the strategies "
                             f"{list(self.strategies)}")
        if self.stop_when_placed and self.stop_when_nearest is not None:
            raise ValueError("stop_when_nearest and stop_when_placed are two stopping rules; give one")
        if not set(self.stop_when_placed) <= set(self.strategies):
            raise ValueError(f"stop_when_placed={list(self.stop_when_placed)!r} names strategies outside "
                             f"{list(self.strategies)}")
        sets = (("id",) if self.K != "inf" else ()) + (("ood",) if self.ood or self.K == "inf" else ())
        if self.stop_set is not None and self.stop_set not in sets:
            raise ValueError(f"stop_set={self.stop_set!r} is not an evaluation set of this run ({', '.join(sets)})")
        for which, phases in self.stop_rules:
            if which not in sets or not phases or not set(phases) <= set(self.strategies):
                raise ValueError(f"stop rule ({which!r}, {list(phases)}) needs an evaluation set of this run "
                                 f"({', '.join(sets)}) and strategies among {list(self.strategies)}")
        if self.stop_rules and self.stop_when_nearest is not None:
            raise ValueError("stop_when_nearest and stop_rules are two stopping rules; give one")
        if self.positions not in ("relative", "absolute"):
            raise ValueError(f"positions must be 'relative' or 'absolute', got {self.positions!r}")
        if not (isinstance(self.inject_p, (int, float)) and 0.0 <= self.inject_p <= 1.0):
            raise ValueError(f"inject_p must be a probability in [0, 1], got {self.inject_p!r}")
        if self.inject_p > 0 and self.K == "inf":
            raise ValueError("task injection (inject_p > 0) needs a finite set of training chains to name")

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "MarkovRunSpec":
        """The spec from :meth:`as_dict`'s form; a key that is not a field is a ``ValueError`` naming it."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"unknown run settings {sorted(unknown)}; known: {', '.join(sorted(known))}")
        return cls(**dict(d))

    def as_dict(self) -> dict:
        """Every field as plain data (``betas`` and ``strategies`` as lists): a run's record stores it."""
        d = dataclasses.asdict(self)
        d["betas"], d["strategies"] = list(self.betas), list(self.strategies)
        d["stop_when_placed"] = list(self.stop_when_placed)
        d["stop_rules"] = [[w, list(ph)] for w, ph in self.stop_rules]
        d["lr_factors"] = [list(pf) for pf in self.lr_factors]
        return d

    @property
    def chains(self) -> int:
        return self.seed if self.chain_seed is None else self.chain_seed

    def model_config(self):
        """The :class:`~sim.papers.markov.model.MarkovLMConfig` of this run's model (``C`` states, context ``N``)."""
        from sim.papers.markov.model import MarkovLMConfig

        return MarkovLMConfig(vocab=self.C, max_len=self.N, width=self.width, layers=self.layers, heads=self.heads,
                              mlp=self.mlp, positions=self.positions, dropout=self.dropout)


def eval_schedule(steps: int, every: int, log_points: int) -> list[int]:
    """Evaluation steps: 0, ``log_points`` geometrically spaced steps, every ``every``-th step, the last."""
    pts = {0, steps}
    pts.update(range(every, steps + 1, every))
    if log_points > 0 and steps > 1:
        pts.update(int(round(v)) for v in np.geomspace(1, steps, log_points))
    return sorted(p for p in pts if 0 <= p <= steps)


def _prior(spec: MarkovRunSpec):
    if spec.prior is None:
        return None
    from sim.priors import parse_prior

    return parse_prior(spec.prior)


def _se(v: np.ndarray) -> float:
    return float(np.std(v, ddof=1) / math.sqrt(len(v))) if len(v) > 1 else 0.0


def evaluation_sets(spec: MarkovRunSpec, P: np.ndarray | None = None,
                    mu: np.ndarray | None = None) -> dict[str, tuple[np.ndarray, dict[str, np.ndarray], np.ndarray]]:
    """A run's fixed evaluation sets, ``{which: (inputs (n, N), {strategy: predictions}, targets)}``:
    ``id`` from the training chains ``P, mu`` (finite ``K``), ``ood`` from fresh chains. They
    depend on ``spec`` only (its ``seed`` and task), so a hand-built control model can be
    scored afterwards on exactly the sequences the trained model was scored on."""
    prior = _prior(spec)
    n, L = spec.n_eval, spec.N + 1
    rng = np.random.default_rng(derive_seed(spec.seed, "eval"))
    names = list(spec.strategies)
    sets = {}

    def add(which, x):
        inp = x[:, :-1]
        sets[which] = (inp, {s: predict(s, inp, C=spec.C, alpha=spec.alpha, P=P, mu=mu) for s in names}, x[:, 1:])

    if spec.K != "inf":
        add("id", sample_sequences(rng, P, mu, n, L)[0])
    if spec.ood or spec.K == "inf":
        add("ood", fresh_sequences(np.random.default_rng(derive_seed(spec.seed, "ood_chains")),
                                   np.random.default_rng(derive_seed(spec.seed, "ood_sequences")), spec.C, n, L,
                                   alpha=spec.alpha, prior=prior)[0])
    return sets


def score_predictions(preds: Mapping[str, np.ndarray], logq: np.ndarray, targets: np.ndarray) -> dict[str, Any]:
    """One evaluation row: per strategy ``(mean KL(p_s || q), its standard error)`` over the
    sequences, ``pair_se`` (standard errors of the paired differences ``KL(a) - KL(b)``, in the
    order of ``preds``) and the model's ``loss`` on ``targets``; ``logq`` ``(n, T, C)``."""
    kls = {s: kl_per_sequence(p, logq) for s, p in preds.items()}  # (n,) each
    row: dict[str, Any] = {s: (float(kl.mean()), _se(kl)) for s, kl in kls.items()}
    names = list(kls)
    row["pair_se"] = ([[_se(kls[a] - kls[b]) for b in names] for a in names], None)
    nll = -np.take_along_axis(logq, targets[..., None], axis=2)[..., 0].mean(axis=1)
    row["loss"] = (float(nll.mean()), _se(nll))
    return row


def run_chains(spec: MarkovRunSpec) -> tuple[np.ndarray | None, np.ndarray | None]:
    """The run's training chains ``(P, mu)`` (``(None, None)`` for ``K = "inf"``)."""
    if spec.K == "inf":
        return None, None
    return draw_chains(spec.C, spec.K, alpha=spec.alpha, chain_seed=spec.chains, prior=_prior(spec))


class _Evaluator:
    """Fixed evaluation sets and their strategy predictions, computed once per run."""

    def __init__(self, spec: MarkovRunSpec, P: np.ndarray | None, mu: np.ndarray | None, device: str):
        import torch

        self.sets = {which: (torch.as_tensor(inp, device=device), preds, targets)
                     for which, (inp, preds, targets) in evaluation_sets(spec, P, mu).items()}
        self.torch = torch

    def __call__(self, model) -> dict[str, Any]:
        from sim.papers.markov.fast import eval_logits

        torch = self.torch
        out: dict[str, Any] = {}
        was_training = model.training
        model.eval()
        with torch.no_grad():
            for which, (inp, preds, targets) in self.sets.items():
                logq = torch.log_softmax(eval_logits(model, inp).double(), dim=-1).cpu().numpy()  # (n, T, C)
                out[which] = score_predictions(preds, logq, targets)
        model.train(was_training)
        return out

    def strategy_losses(self) -> dict[str, dict[str, Any]]:
        """Cross-entropy of each strategy on the realised next tokens (the baselines), with the
        standard errors of the paired differences between strategies (over sequences)."""
        out = {}
        for which, (_, preds, targets) in self.sets.items():
            per = {s: -np.log(np.take_along_axis(p, targets[..., None], axis=2)[..., 0]).mean(axis=1)
                   for s, p in preds.items()}
            out[which] = {s: float(v.mean()) for s, v in per.items()}
            out[which]["pair_se"] = {f"{a}-{b}": _se(per[a] - per[b]) for a in per for b in per if a < b}
        return out


#: Training batches are drawn this many at a time (one vectorised draw; fixed, so runs reproduce).
PREFETCH = 16


def batch_sampler(spec: MarkovRunSpec, P=None, mu=None, *, chains: bool = False) -> Callable[[], Any]:
    """``sample() -> (batch, N + 1)`` training sequences of ``spec`` (drawn ``PREFETCH`` batches at
    a time from the seed's ``data`` stream): from the chains ``P`` with stationary laws ``mu``, or
    from a fresh chain per sequence when ``spec.K == "inf"`` (then ``P, mu`` are unused). With
    ``chains`` (finite ``K``): ``(sequences, chain index (batch,))``, the same sequences."""
    rng = np.random.default_rng(derive_seed(spec.seed, "data"))
    n = spec.batch * PREFETCH
    if chains and spec.K == "inf":
        raise ValueError("chains=True needs a finite set of training chains (K = 'inf' names none)")
    if spec.K == "inf":
        prior = _prior(spec)
        rng_chains = np.random.default_rng(derive_seed(spec.seed, "data_chains"))

        def draw():
            return fresh_sequences(rng_chains, rng, spec.C, n, spec.N + 1, alpha=spec.alpha, prior=prior)[0]
    else:
        def draw():
            x, k = sample_sequences(rng, P, mu, n, spec.N + 1)
            return (x, k) if chains else x

    buf, pos = [None], [PREFETCH]

    def sample():
        if pos[0] == PREFETCH:
            got = draw()
            if chains:
                buf[0] = (got[0].reshape(PREFETCH, spec.batch, spec.N + 1), got[1].reshape(PREFETCH, spec.batch))
            else:
                buf[0] = got.reshape(PREFETCH, spec.batch, spec.N + 1)
            pos[0] = 0
        pos[0] += 1
        return (buf[0][0][pos[0] - 1], buf[0][1][pos[0] - 1]) if chains else buf[0][pos[0] - 1]

    return sample


def train_markov(spec: MarkovRunSpec, *, device: str = "cpu",
                 stop: Callable[[dict[str, Any]], bool] | None = None,
                 progress: Callable[[str], None] | None = None,
                 snapshots: list | None = None) -> dict[str, Any]:
    """Train a :class:`sim.papers.markov.model.MarkovLM` on the K-chain task and return its record.

    One AdamW stage of :func:`sim.train.train` (decoupled weight decay on the linear maps'
    matrices, :meth:`~sim.papers.markov.model.MarkovLM.decay_groups`; ``grad_clip``; loss
    :func:`sim.papers.markov.fast.training_loss`), batches from :func:`batch_sampler`, dropout
    seeded through torch's global generator (restored afterwards), and train's evaluation
    hook at the steps of :func:`eval_schedule` (step 0 included): each evaluation records the
    KL curves and the mean training loss since the previous one, and applies the stopping rules.
    ``stop(evaluation) -> bool`` ends training at the first evaluation where it is true
    (the benchmark's stopping rule). The record (JSON-able) holds the spec, the evaluation
    steps, per strategy and set (``id``, ``ood``) the KL curves and their standard errors
    over the evaluation sequences, the model's loss, the strategies' own losses, wall
    seconds and the seeds used. ``snapshots``, a list, receives ``(step, {name: array})``, the
    model's parameters (float32 numpy copies) at every evaluation.

    The interventions of ``spec`` act here: ``lr_factors`` on the stage, ``inject_p`` through a
    :class:`~sim.papers.markov.model.TaskInjection` on the model (a training sequence is
    injected with probability ``inject_p``, drawn from the seed's own ``inject`` stream, so
    the batches are those of the run without injection).
    """
    import torch

    from sim.papers.markov.fast import training_loss
    from sim.papers.markov.model import MarkovLM, TaskInjection
    from sim.train import Stage, TrainConfig, train

    old_threads = torch.get_num_threads()
    if spec.threads is not None:
        torch.set_num_threads(spec.threads)
    try:
        t_start = time.perf_counter()
        P, mu = run_chains(spec)
        evaluator = _Evaluator(spec, P, mu, device)
        inject = spec.inject_p > 0
        draw = batch_sampler(spec, P, mu, chains=inject)
        gen = torch.Generator().manual_seed(derive_seed(spec.seed, "init"))
        model = MarkovLM(spec.model_config(), generator=gen).to(device)
        decayed, _ = model.decay_groups()
        # the decayed group by its full parameter names (train's decay_params are name prefixes)
        decayed_names = tuple(n for n, p in model.named_parameters() if any(p is q for q in decayed))
        injection = None
        if inject:  # registered after the decay groups are read: the injected vectors are not decayed
            injection = TaskInjection(spec.K, spec.width, generator=torch.Generator().manual_seed(
                derive_seed(spec.seed, "inject-init"))).to(device)
            model.add_module("injection", injection)
            rng_inject = np.random.default_rng(derive_seed(spec.seed, "inject"))
        stage = Stage(spec.steps, spec.lr, optimizer="adamw", betas=spec.betas, weight_decay=spec.weight_decay,
                      decay_params=decayed_names, lr_factors=spec.lr_factors)
        rng_state = torch.random.get_rng_state()  # dropout draws from torch's global generator: restore it after
        torch.manual_seed(derive_seed(spec.seed, "dropout"))
        schedule = set(eval_schedule(spec.steps, spec.eval_every, spec.eval_log_points))
        rec: dict[str, Any] = {"steps": [], "train_loss": [], "eval": {}, "pair_order": list(spec.strategies)}
        eval_seconds = []
        setup_s = time.perf_counter() - t_start
        t0 = time.perf_counter()
        stopped, streak = None, 0
        first_set = "id" if spec.K != "inf" else "ood"
        stop_set = spec.stop_set or first_set
        rules = ([(stop_set, spec.stop_when_placed)] if spec.stop_when_placed else []) + list(spec.stop_rules)
        if rules:
            seps = separations({w: evaluator.sets[w] for w, _ in rules})

            def placed() -> bool:
                return any(judge_end(absolute_placement(rec, w, seps, z=spec.stop_margin_z), phases,
                                     spec.stop_margin_z) is Outcome.HELD for w, phases in rules)

        def evaluate(model, step: int, losses: list[float]) -> bool:
            """Record one evaluation (``train_loss``: the mean training loss since the previous
            one) and apply the stopping rules."""
            nonlocal stopped, streak
            ev = evaluator(model)
            if snapshots is not None:
                snapshots.append((step, {n: p.detach().float().cpu().numpy().copy()
                                         for n, p in model.state_dict().items()}))
            rec["steps"].append(step)
            eval_seconds.append(time.perf_counter() - t0)
            rec["train_loss"].append(float(np.mean(losses)) if losses else None)
            for which, row in ev.items():
                for s, (v, se) in row.items():
                    rec["eval"].setdefault(which, {}).setdefault(s, []).append(v)
                    if s != "pair_se":
                        rec["eval"][which].setdefault(s + "_se", []).append(se)
            if progress is not None:
                progress(f"step {step}/{spec.steps}")
            if spec.stop_when_nearest is not None:
                row = ev[first_set]
                best, second = sorted(spec.strategies, key=lambda s: row[s][0])[:2]
                clear = best == spec.stop_when_nearest
                if clear and spec.stop_margin_z > 0:
                    pair_se = row["pair_se"][0][spec.strategies.index(second)][spec.strategies.index(best)]
                    clear = row[second][0] - row[best][0] > spec.stop_margin_z * pair_se
                streak = streak + 1 if clear else 0
            elif rules:
                streak = streak + 1 if placed() else 0
            if streak >= spec.stop_patience:
                stopped = step
            if stop is not None and stop(ev):
                stopped = step
            return stopped is not None

        model.train()
        if injection is None:
            def sample(_gen, _step):
                return torch.as_tensor(draw(), device=device)

            def loss_fn(m, x):
                return training_loss(m, x[:, :-1], x[:, 1:])
        else:
            def sample(_gen, _step):
                x, k = draw()
                k = np.where(rng_inject.random(len(k)) < spec.inject_p, k, -1)  # -1: this sequence is not injected
                return torch.as_tensor(x, device=device), torch.as_tensor(k, device=device)

            def loss_fn(m, batch):
                x, k = batch
                with injection.injecting(m, k):
                    return training_loss(m, x[:, :-1], x[:, 1:])
        # the batches come from the spec's own numpy stream (train's torch generator is unused)
        train(model, sample, TrainConfig(stages=(stage,), log_every=max(1, spec.steps), grad_clip=spec.grad_clip),
              device=device, loss_fn=loss_fn, evaluate=evaluate, eval_at=schedule.__contains__)
        rec.update({
            "spec": spec.as_dict(),
            "pair_order": list(spec.strategies),
            "strategy_loss": evaluator.strategy_losses(),
            "stopped_at": stopped,
            "seeds": {p: derive_seed(spec.seed, p) for p in ("eval", "ood_chains", "ood_sequences", "data", "init")},
            "chain_seed": spec.chains,
            "timing": {"train_seconds": time.perf_counter() - t0, "setup_seconds": setup_s,
                       "eval_seconds": eval_seconds, "torch_threads": torch.get_num_threads(), "device": device},
        })
        torch.random.set_rng_state(rng_state)
        return rec
    finally:
        torch.set_num_threads(old_threads)


def run_markov(params: Mapping[str, Any]) -> Any:
    """Sweep entry point: ``params`` (a :class:`MarkovRunSpec` as a dict, plus an optional
    ``device``, ``keep_models`` and, where it runs in the claim's own process, ``progress``) -> the
    JSON-able record of :func:`train_markov`.

    With ``keep_models`` true: :class:`sim.sweep.Kept` ``(record, models)``, ``models`` the
    parameters (float32 numpy arrays by name) ``"final"`` at the last evaluation and
    ``"plateau"`` in the middle of the run's 1-point plateau (:func:`sim.papers.markov.placement.plateau_index`,
    ``None`` without one), with ``"plateau_step"``, for the claims that probe the models (G.3, G.4;
    :func:`sim.papers.markov.runs.kept_runs`)."""
    params = dict(params)
    device = params.pop("device", "cpu")
    progress = params.pop("progress", None)
    keep = bool(params.pop("keep_models", False))
    spec = MarkovRunSpec.from_dict(params)
    if not keep:
        return train_markov(spec, device=device, progress=progress)
    from sim.papers.markov.placement import plateau_index
    from sim.sweep import Kept

    snaps: list = []
    rec = train_markov(spec, device=device, snapshots=snaps, progress=progress)
    i = plateau_index(rec, "ood" if "ood" in rec["eval"] else "id")
    return Kept(rec, {"final": snaps[-1][1], "final_step": snaps[-1][0], "plateau": None if i is None else snaps[i][1],
                      "plateau_step": None if i is None else snaps[i][0]})


# ------------------------------------------------------------------------ read-outs ---
def nearest(rec: Mapping[str, Any], which: str, strategies=GIBSON_STRATEGIES, index: int = -1) -> tuple[str, float]:
    """The strategy nearest to the model (smallest KL) at evaluation ``index`` of set
    ``which``, and its margin: the gap to the runner-up (nats, > 0)."""
    row = sorted((rec["eval"][which][s][index], s) for s in strategies)
    return row[0][1], row[1][0] - row[0][0]


def crossing_step(rec: Mapping[str, Any], which: str, later: str, earlier: str) -> float | None:
    """First step at which ``KL(later) < KL(earlier)`` and stays so to the end of the record,
    linearly interpolated between evaluations; ``None`` if it never holds at the end."""
    steps = rec["steps"]
    d = np.asarray(rec["eval"][which][earlier]) - np.asarray(rec["eval"][which][later])  # > 0: later is nearer
    if len(d) == 0 or d[-1] <= 0:
        return None
    i = len(d) - 1
    while i > 0 and d[i - 1] > 0:
        i -= 1
    if i == 0:
        return float(steps[0])
    s0, s1, d0, d1 = steps[i - 1], steps[i], d[i - 1], d[i]
    return float(s0 + (s1 - s0) * (-d0) / (d1 - d0))
