"""G's symmetric-constrained attention-only transformer (SA-transformer), the minimal model on
which seed 004 (Gibson, Cui & Reddy, §C) derives the G1 -> G2 transition time
``tau_2Gen ~ N / log N`` (claim G.2) and the flow along ``beta > 0, delta > 0`` (claim G.7).

The seed names the model and the two statistical biases that drive the transition: a
*previous-state attention bias* ``delta`` ("由于马尔可夫链的混合特性，前一个状态与当前状态存在微弱
相关性") and an *induction-head bias* ``beta`` (the current state over-represented where it
recurs in the context); the optimisation flows along ``beta > 0, delta > 0`` across the G1
plateau into the G2 basin. Everything else is left open; the choices below are this
project's and every report states them.

Model
-----
Tokens ``x_0 .. x_{T-1}`` in ``{0..C-1}``, one-hot embedded (``x_n`` stands for the one-hot
vector ``e_{x_n}``; no learned embedding: under the symmetry below a learned one reduces to
a scale that the other parameters absorb). Layer 1's residual update ``x_n + Att1(x_<=n)``
is replaced by the concatenation (the attention output written to its own subspace)::

    h_n = x_n ⊕ p_n,                                         (2C,)
    learned:  p_n = sum_{m <= n} a1[n, m] x_m,
              a1[n, .] = softmax_{m <= n}( delta 1[m = n - 1] )  (the previous-position bias)
    hard:     p_n = x_{n - k}  (k = ``offset`` = 1: a hard-wired previous-token head),
              p_n = 0 when n - k < 0 (position 0 has no previous token)

``hard`` is the ``delta -> inf`` limit of ``learned`` at every ``n >= 1``; at ``n = 0``
``learned`` attends to itself (``p_0 = x_0``) and ``hard`` gives ``p_0 = 0``. At
``delta = 0`` the learned head pools uniformly, ``p_n`` = the unigram frequencies of
``x_0..x_n`` with weight ``1 / (n + 1)`` on the previous token: this ``1/n`` is the source of
the ``N / log N`` (the mean of ``1/(m + 1)`` over the keys ``m < N`` is ``~ log N / N``).

Layer 2 (one head, causal, no positional information) and the readout::

    s[n, m] = beta <x_n, p_m>,    a2[n, .] = softmax_{m <= n} s[n, .]
    logits_n = v sum_{m <= n} a2[n, m] x_m                         (C,)

The symmetry constraint. The task is invariant under relabelling the ``C`` states, so each
``C x C`` block of every weight is constrained to the permutation-commuting form
``a I + b 1 1^T``. For one-hot inputs ``<1, x_m> = <1, p_m> = 1`` (``hard``: except
``p_0 = 0``), so every ``b`` term adds the same constant to all keys' scores or to all
logits and drops out of the softmaxes; the model is a handful of scalars. Of the ``I``
terms this minimal model keeps the ones the seed names: ``delta`` (layer 1), ``beta`` (layer
2's query current-token block against the key's layer-1 block: the induction match
``x_n = x_{m-1}`` at ``delta = inf``) and the readout ``v`` of the attended current-token
block; the other blocks (current-current and previous-previous matches, the direct paths
``x_n``, ``p_n`` to the logits) are zero. G1 is ``beta = 0`` (uniform layer-2 attention: the
in-context unigram frequencies), G2 is ``beta, delta -> inf`` (attention on the positions
that follow an occurrence of ``x_n``: the in-context bigram frequencies of row ``x_n``).

A leading seed axis ``S`` (``SAConfig.seeds``): each parameter has shape ``(S,)``; inputs
``(S, B, T)`` (or ``(B, T)``, shared by the seeds) give logits ``(S, B, T, C)``. The seeds do
not interact (their losses are summed, so each receives its own gradient), and ``S``
independent runs cost one vectorised run.

Hook points (``sim.models.hooks``): ``layer1.pattern`` ``(S, B, T, T)`` (``learned`` only),
``layer1.out`` ``(S, B, T, 2C)`` (``h_n``), ``layer2.scores`` and ``layer2.pattern``
``(S, B, T, T)`` (masked scores are ``-inf``).

Training (:func:`train_tau`; the settings the seed leaves open, chosen here)
----------------------------------------------------------------------------
- Data: K = inf (a fresh chain per sequence, rows i.i.d. ``Dirichlet(alpha)``, ``x_0`` from
  its stationary law; :func:`sim.papers.markov.task.fresh_sequences`), ``N + 1`` tokens per sequence.
- Loss: the cross-entropy of the prediction of ``x_N`` from the context ``x_0..x_{N-1}``
  (the query at the last position: ``N`` is the context length the prediction is made
  from, the quantity the law is stated in). The loss at every position is another setting
  (it mixes context lengths ``1..N``); G.2 reports it as a finding.
- Optimiser: plain SGD (gradient descent, the dynamics the derivation is about; an adaptive
  optimiser rescales the ``1/N`` gradients and so the time), constant ``lr``, ``batch``
  fresh sequences per seed per step; the loop is :func:`sim.train.train` (one SGD stage, the
  objective the sum of the seeds' losses, its evaluation hook every ``eval_every`` steps).
  Initialisation ``N(0, init_std^2)`` per scalar.
- ``tau_2Gen``: on ``n_eval`` fixed fresh sequences, at the last position, the step at
  which ``KL(G2 || model)`` falls below ``KL(G1 || model)`` for good (linear interpolation
  between evaluations, :func:`sim.papers.markov.task.crossing_step`); G1 and G2 the add-alpha
  in-context unigram and bigram of :mod:`sim.papers.markov.task`. Each evaluation also records
  the scalars ``delta, beta, v`` and the last position's loss (G.7 reads the trajectory), and a
  finished record is kept in a per-process cache, so G.7, evaluated after G.2, reads G.2's runs.

The loss near the unigram solution (claim G.7)
----------------------------------------------
At ``beta = 0`` layer 2 pools uniformly and the model predicts ``softmax(v p_bar)`` whatever
``delta`` is (:func:`unigram_solution` finds the best ``v*``). Around ``(beta, delta, v) = (0, 0, v*)``
the expected last-position loss expands as ``L = L_1Gen - c_beta beta - c_delta delta -
c_beta_delta beta delta + ...``; :func:`unigram_expansion` returns each coefficient's per-sequence
derivative (autograd, the mixed one by double backward), whose mean over fresh sequences estimates
it. ``c_delta = 0`` exactly here: delta enters only through beta's scores. :func:`loss_surface`
evaluates ``L(beta, delta)`` on a grid (G.7's landscape).

Written for this project from the seed's description; no code was copied.
"""
from __future__ import annotations

import copy
import dataclasses
import time
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from sim.models.hooks import HookPoint

__all__ = ["SAConfig", "SATransformer", "fresh_batch", "last_position_strategies", "train_tau", "clear_cache",
           "TASKS", "unigram_solution", "unigram_expansion", "loss_surface", "tau_job", "tau_key", "tau_cost", "timing_run"]

LAYER1 = ("learned", "hard")


@dataclass(frozen=True)
class SAConfig:
    """Settings of :class:`SATransformer` (see the module docstring)."""

    vocab: int = 10  # C
    layer1: str = "learned"  # learned: x_n ⊕ Att1(x_<=n), previous-position bias delta; hard: x_n ⊕ x_{n-offset}
    offset: int = 1  # hard-wired head's offset: 1 is the previous token (0 and 2 are wrong variants, for tests)
    seeds: int = 1  # leading seed axis S
    init_std: float = 0.01

    def __post_init__(self):
        if self.layer1 not in LAYER1:
            raise ValueError(f"SAConfig.layer1 must be one of {LAYER1}, got {self.layer1!r}")
        for name in ("vocab", "seeds"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < (2 if name == "vocab" else 1):
                raise ValueError(f"SAConfig.{name} must be an integer >= {2 if name == 'vocab' else 1}, got {v!r}")
        if isinstance(self.offset, bool) or not isinstance(self.offset, int) or self.offset < 0:
            raise ValueError(f"SAConfig.offset must be an integer >= 0, got {self.offset!r}")
        if self.layer1 == "learned" and self.offset != 1:
            raise ValueError("SAConfig.offset applies to the hard-wired head only (layer1='hard')")
        if not self.init_std >= 0:
            raise ValueError(f"SAConfig.init_std must be >= 0, got {self.init_std}")

    def as_dict(self) -> dict:
        """Every field as plain data."""
        return dataclasses.asdict(self)


class SATransformer(nn.Module):
    """The SA-transformer of the module docstring.

    ``forward(x) -> logits (S, B, T, C)`` for tokens ``x`` ``(S, B, T)`` or ``(B, T)``;
    :meth:`last_logits` computes the last position alone in ``O(T)`` (the training path).

    Parameters
    ----------
    config : SAConfig
    generator : torch.Generator, optional
        Draws the initial scalars ``N(0, init_std^2)``, seed by seed in a fixed order.
    dtype : torch.dtype
        float64 by default (the model is a few scalars; exactness is free).
    """

    def __init__(self, config: SAConfig = SAConfig(), generator: torch.Generator | None = None,
                 dtype: torch.dtype = torch.float64):
        super().__init__()
        self.config = cfg = config
        S = cfg.seeds

        def scalar():
            w = torch.randn(S, generator=generator, dtype=dtype) if generator is not None else \
                torch.randn(S, dtype=dtype)
            return nn.Parameter(cfg.init_std * w)

        self.delta = scalar() if cfg.layer1 == "learned" else None
        self.beta = scalar()
        self.v = scalar()
        self.layer1 = nn.ModuleDict({"pattern": HookPoint(), "out": HookPoint()})
        self.layer2 = nn.ModuleDict({"scores": HookPoint(), "pattern": HookPoint()})

    # ------------------------------------------------------------------------------ helpers
    def _tokens(self, x: Tensor) -> Tensor:
        S = self.config.seeds
        if x.dim() == 2:
            x = x.unsqueeze(0).expand(S, *x.shape)
        if x.dim() != 3 or x.shape[0] != S:
            raise ValueError(f"tokens must be (B, T) or (S={S}, B, T), got {tuple(x.shape)}")
        return x

    def _p(self, s: Tensor) -> Tensor:
        """A per-seed scalar shaped to broadcast against ``(S, ...)``: ``(S, 1, 1, 1)``."""
        return s.view(-1, 1, 1, 1)

    # ------------------------------------------------------------------------------ forward
    def forward(self, x: Tensor) -> Tensor:
        """Logits ``(S, B, T, C)``: ``logits_n = v sum_{m<=n} a2[n,m] x_m``, ``a2`` the softmax of
        ``beta <x_n, p_m>`` over ``m <= n``, ``p`` layer 1's output (module docstring)."""
        cfg = self.config
        x = self._tokens(x)
        S, B, T = x.shape
        dt = self.beta.dtype
        X = F.one_hot(x, cfg.vocab).to(dt)  # (S, B, T, C)
        n = torch.arange(T, device=x.device)
        causal = n[None, :] <= n[:, None]  # (T, T): key m <= query n
        if cfg.layer1 == "learned":
            prev = (n[None, :] == n[:, None] - 1).to(dt)  # 1[m = n - 1]
            s1 = (self._p(self.delta) * prev).masked_fill(~causal, float("-inf"))  # (S, 1, T, T)
            a1 = self.layer1["pattern"](torch.softmax(s1, dim=-1).expand(S, B, T, T))
            P = a1 @ X  # (S, B, T, C)
        else:
            k = cfg.offset
            P = torch.zeros_like(X)
            if k < T:
                P[:, :, k:] = X[:, :, :T - k]
        H = self.layer1["out"](torch.cat([X, P], dim=-1))  # (S, B, T, 2C): x_n ⊕ p_n
        X, P = H[..., :cfg.vocab], H[..., cfg.vocab:]
        s2 = self._p(self.beta) * (X @ P.transpose(-1, -2))  # (S, B, T, T): beta <x_n, p_m>
        s2 = self.layer2["scores"](s2.masked_fill(~causal, float("-inf")))
        a2 = self.layer2["pattern"](torch.softmax(s2, dim=-1))
        return self._p(self.v) * (a2 @ X)

    def layer1_output(self, x: Tensor) -> Tensor:
        """``h_n = x_n ⊕ p_n`` ``(S, B, T, 2C)``, read at the ``layer1.out`` hook point."""
        from sim.models.hooks import run_with_cache

        _, cache = run_with_cache(self, x, names=["layer1.out"])
        return cache["layer1.out"]

    def key_match(self, x: Tensor) -> Tensor:
        """The layer-2 match ``<x_q, p_m>`` ``(S, B, T)`` of the last position's token with every key, in ``O(T)``.

        ``q = x_{T-1}``; these are the numbers of ``forward``'s layer-2 scores divided by ``beta``::

            learned: <x_q, p_m> = (c_m + (w_m - 1) 1[x_{m-1} = q]) / (m + w_m),
                     c_m = #{j <= m : x_j = q}, w_m = e^delta (m >= 1), w_0 = 1
            hard:    <x_q, p_m> = 1[x_{m-k} = q]   (0 for m < k)
        """
        cfg = self.config
        x = self._tokens(x)
        S, B, T = x.shape
        dt = self.beta.dtype
        q = x[..., -1:]  # (S, B, 1)
        same = (x == q).to(dt)  # 1[x_m = q]
        if cfg.layer1 == "hard":
            k = cfg.offset
            out = torch.zeros_like(same)
            if k < T:
                out[..., k:] = same[..., :T - k]
            return out
        c = same.cumsum(-1)
        r = torch.zeros_like(same)
        r[..., 1:] = same[..., :-1]  # 1[x_{m-1} = q]
        m = torch.arange(T, device=x.device, dtype=dt)
        w = torch.exp(self.delta).view(S, 1, 1).expand(S, 1, T).clone()
        w[..., 0] = 1.0
        return (c + (w - 1.0) * r) / (m + w)

    def last_logits(self, x: Tensor) -> Tensor:
        """The last position's logits ``(S, B, C)`` in ``O(T)``; equal to ``forward(x)[:, :, -1]``."""
        cfg = self.config
        x = self._tokens(x)
        a2 = torch.softmax(self.beta.view(-1, 1, 1) * self.key_match(x), dim=-1)  # (S, B, T)
        pooled = torch.zeros(*a2.shape[:2], cfg.vocab, dtype=a2.dtype, device=a2.device).scatter_add(-1, x, a2)
        return self.v.view(-1, 1, 1) * pooled

    def last_loss(self, x: Tensor, y: Tensor) -> Tensor:
        """Mean cross-entropy ``(S,)`` of the last position's prediction of ``y`` ``(S, B)``."""
        logits = self.last_logits(x)
        return -torch.log_softmax(logits, dim=-1).gather(-1, y.unsqueeze(-1))[..., 0].mean(-1)


# ------------------------------------------------------------------- the loss near G1 (G.7)
def unigram_solution(x: Tensor, y: Tensor, *, C: int = 10, iters: int = 50) -> float:
    """The readout ``v*`` of the unigram solution: at ``beta = 0`` the model predicts
    ``softmax(v p_bar)``, ``p_bar`` the context's unigram frequencies (whatever ``delta``), and
    ``v*`` minimises the mean last-position cross-entropy over contexts ``x`` ``(n, N)`` with targets
    ``y`` ``(n,)``. Newton's method on that convex function of one variable, from ``v = 0``; float64."""
    pbar = F.one_hot(x, C).to(torch.float64).mean(1)  # (n, C)
    onehot_y = F.one_hot(y, C).to(torch.float64)  # (n, C)
    v = 0.0
    for _ in range(iters):
        q = torch.softmax(v * pbar, dim=-1)  # (n, C)
        mean = (q * pbar).sum(-1)  # E_q[p_bar]
        grad = float(((mean - (onehot_y * pbar).sum(-1))).mean())  # d/dv of the mean cross-entropy
        hess = float(((q * pbar * pbar).sum(-1) - mean ** 2).mean())  # Var_q[p_bar] >= 0
        if hess <= 0:
            break
        step = grad / hess
        v -= step
        if abs(step) < 1e-13 * max(1.0, abs(v)):
            break
    return v


def unigram_expansion(x: Tensor, y: Tensor, *, C: int = 10, v: float | None = None) -> dict[str, Any]:
    """The loss's first-order coefficients around the unigram solution, per sequence (claim G.7).

    At ``beta = delta = 0``, ``v = v*`` (:func:`unigram_solution` of the same sequences unless ``v`` is
    given), for each context ``x[i]`` ``(N,)`` with target ``y[i]`` and its last-position
    cross-entropy ``l_i(delta, beta, v)``::

        c_beta[i]       = -d l_i / d beta
        c_delta[i]      = -d l_i / d delta                      (0 here: delta acts only through beta's scores)
        c_beta_delta[i] = -d^2 l_i / d beta d delta

    so that the expected loss reads ``L = L_1Gen - c_beta beta - c_delta delta - c_beta_delta beta delta + ...``
    with ``c = E[c_i]``. By autograd (the second derivative by double backward) on a model whose
    seed axis holds one sequence per seed, so each entry is one sequence's own derivative; their
    mean and standard error over the sequences estimate the expectation. Returns ``{"v_star",
    "c_beta", "c_delta", "c_beta_delta", "loss"}`` (arrays ``(n,)``, float64)."""
    n = x.shape[0]
    vstar = unigram_solution(x, y, C=C) if v is None else float(v)
    model = SATransformer(SAConfig(vocab=C, layer1="learned", seeds=n, init_std=0.0))
    with torch.no_grad():
        model.v.fill_(vstar)
    loss = model.last_loss(x.unsqueeze(1), y.unsqueeze(1))  # (n,): seed i reads sequence i
    g_beta, g_delta = torch.autograd.grad(loss.sum(), [model.beta, model.delta], create_graph=True)
    g_beta_delta, = torch.autograd.grad(g_beta.sum(), model.delta)
    return {"v_star": vstar, "c_beta": -g_beta.detach().numpy(), "c_delta": -g_delta.detach().numpy(),
            "c_beta_delta": -g_beta_delta.detach().numpy(), "loss": loss.detach().numpy()}


def loss_surface(x: Tensor, y: Tensor, betas: Sequence[float], deltas: Sequence[float], v: float, *,
                 C: int = 10, chunk: int = 64) -> np.ndarray:
    """The mean last-position cross-entropy ``L(beta, delta)`` at readout ``v`` over contexts ``x``
    ``(n, N)`` with targets ``y``, on the grid ``betas x deltas``: shape ``(len(betas), len(deltas))``.
    The grid points ride on the seed axis, ``chunk`` at a time (G.7's landscape figure)."""
    B, D = np.meshgrid(np.asarray(betas, float), np.asarray(deltas, float), indexing="ij")
    pts = np.stack([B.ravel(), D.ravel()], axis=1)  # (P, 2)
    out = np.empty(len(pts))
    with torch.no_grad():
        for lo in range(0, len(pts), chunk):
            part = pts[lo:lo + chunk]
            m = SATransformer(SAConfig(vocab=C, layer1="learned", seeds=len(part), init_std=0.0))
            m.beta.copy_(torch.as_tensor(part[:, 0]))
            m.delta.copy_(torch.as_tensor(part[:, 1]))
            m.v.fill_(float(v))
            out[lo:lo + len(part)] = m.last_loss(x, y.unsqueeze(0).expand(len(part), -1)).numpy()
    return out.reshape(B.shape)


# --------------------------------------------------------------------------------- training
def fresh_batch(rng: np.random.Generator, C: int, n: int, length: int, alpha: float) -> Tensor:
    """``n`` sequences of ``length`` tokens, each from a fresh chain (rows i.i.d.
    ``Dirichlet(alpha)``, ``x_0`` from its stationary law): the same draws, in the same order,
    as :func:`sim.papers.markov.task.fresh_sequences` ``(rng, rng, C, n, length, alpha=alpha)`` and so
    the same tokens (tested), with the sequential loop run time-major in torch (faster for
    the long contexts of G.2). Returns ``(n, length)`` int64."""
    from sim.papers.markov.task import stationary_laws

    g = rng.standard_gamma(alpha, size=(n, C, C))
    dead = np.argwhere(g.sum(axis=2) <= 0)  # underflowed rows: a unit vector (as fresh_sequences)
    g[dead[:, 0], dead[:, 1], rng.integers(0, C, size=len(dead))] = 1.0
    P = g / g.sum(axis=2, keepdims=True)
    mu = stationary_laws(P)
    u = torch.as_tensor(rng.random((n, length))).t().unsqueeze(-1)  # (length, n, 1): a view, u[t] strided
    cdf = torch.as_tensor(np.cumsum(P, axis=2)[:, :, :-1].reshape(n * C, C - 1))  # row i C + a: CDF of P_i(a, .)
    x = torch.empty(length, n, dtype=torch.int64)
    x[0] = (u[0] >= torch.as_tensor(np.cumsum(mu, axis=1)[:, :-1])).sum(1).clamp_max(C - 1)
    base = torch.arange(n) * C
    for t in range(1, length):
        x[t] = (u[t] >= cdf.index_select(0, base + x[t - 1])).sum(1).clamp_max(C - 1)
    return x.t().contiguous()


def last_position_strategies(x: np.ndarray, C: int, alpha: float) -> dict[str, np.ndarray]:
    """G1 and G2 (add-``alpha`` in-context unigram and bigram, :mod:`sim.papers.markov.task`) at the
    last position of contexts ``x`` ``(n, T)``: ``{"G1": (n, C), "G2": (n, C)}``."""
    n, T = x.shape
    rows = np.arange(n)
    uni = np.zeros((n, C))
    np.add.at(uni, (np.repeat(rows, T), x.ravel()), 1.0)
    q = x[:, -1]
    follow = x[:, :-1] == q[:, None]  # positions s < T-1 with x_s = q: the transition x_s -> x_{s+1}
    big = np.zeros((n, C))
    r, s = np.nonzero(follow)
    np.add.at(big, (r, x[r, s + 1]), 1.0)
    return {"G1": (uni + alpha) / (T + C * alpha),
            "G2": (big + alpha) / (big.sum(1, keepdims=True) + C * alpha)}


def _kl_rows(p: np.ndarray, logq: np.ndarray) -> np.ndarray:
    """``KL(p || q)`` per row, ``(S, n)`` for ``p (n, C)``, ``logq (S, n, C)`` (``0 log 0 = 0``)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        lp = np.where(p > 0, np.log(p), 0.0)
    return (p * (lp[None] - logq)).sum(-1)


#: Training batches are drawn this many steps at a time (one vectorised draw; fixed, so runs
#: reproduce), fewer when the draw would exceed :data:`PREFETCH_TOKENS` tokens.
PREFETCH = 16
PREFETCH_TOKENS = 4_000_000
#: Tasks :func:`train_tau` trains on: ``markov`` (fresh chains, the claim's task) and ``shuffled``
#: (the same sequences with each one's tokens permuted in time: the unigram statistics kept, the
#: bigram structure gone; G.7's control).
TASKS = ("markov", "shuffled")
_CACHE: dict[tuple, dict] = {}
_CACHE_MAX = 64


def clear_cache() -> None:
    """Forget the records :func:`train_tau` keeps for reuse in this process (G.7 reuses G.2's runs)."""
    _CACHE.clear()


def train_tau(*, N: int, seeds: Sequence[int] | int, C: int = 10, alpha: float = 0.1, layer1: str = "learned",
              offset: int = 1, lr: float = 1.0, batch: int = 128, max_steps: int = 3000, eval_every: int = 10,
              n_eval: int = 1024, init_std: float = 0.01, patience: int = 3, data_seed: int = 0,
              eval_seed: int = 1, loss: str = "last", prior=None, task: str = "markov",
              cache: bool = True) -> dict[str, Any]:
    """Train ``len(seeds)`` SA-transformers at context length ``N`` at once (a leading seed axis)
    and record ``KL(G1 || model)`` and ``KL(G2 || model)`` at the last position over training.

    ``prior`` (a :class:`sim.priors.Prior`) replaces the rows' ``Dirichlet(alpha)`` (then the
    sequences come from :func:`sim.papers.markov.task.fresh_sequences`; ``alpha`` stays the
    strategies' pseudo-count). ``loss="last"`` (the default, see the module docstring) trains
    on the prediction of ``x_N`` alone; ``loss="all"`` on the mean cross-entropy over every
    position ``0..N-1`` (``O(N^2)`` per sequence: a finding's setting, not the decisive one).

    Seed ``seeds[i]`` draws model ``i``'s initial scalars; ``data_seed`` the training
    sequences of all (fresh chains per sequence, ``batch`` per model per step, independent
    across models); ``eval_seed`` the ``n_eval`` evaluation sequences shared by all.
    Training (:func:`sim.train.train`, SGD on the sum of the seeds' losses) evaluates at step 0,
    every ``eval_every`` steps and at the end, and stops once every model has had G2 nearer
    than G1 for ``patience`` evaluations in a row (or at ``max_steps``). Returns a JSON-able record: ``steps``, per
    seed the KL curves ``kl_G1``, ``kl_G2`` and ``tau`` (:func:`sim.papers.markov.task.crossing_step`;
    ``None`` if G2 is not nearer at the end), the trajectory of the scalars (``trajectory``:
    ``delta``, ``beta``, ``v`` and the last position's cross-entropy ``loss`` on the evaluation
    sequences, per seed, at every evaluation), the final scalars, and the timing.

    ``task="shuffled"`` permutes each training sequence's tokens in time (:data:`TASKS`); the
    evaluation sequences stay the chains'. The record is kept in a per-process cache under
    every argument (``cache=False``: train anew), so a claim that reuses another's runs (G.7
    reads G.2's) finds them there.
    """
    if loss not in ("last", "all"):
        raise ValueError(f"loss must be 'last' or 'all', got {loss!r}")
    if task not in TASKS:
        raise ValueError(f"task must be one of {TASKS}, got {task!r}")
    seeds = list(range(seeds)) if isinstance(seeds, int) else [int(s) for s in seeds]
    args = dict(N=int(N), seeds=tuple(seeds), C=int(C), alpha=float(alpha), layer1=layer1, offset=int(offset),
                lr=float(lr), batch=int(batch), max_steps=int(max_steps), eval_every=int(eval_every),
                n_eval=int(n_eval), init_std=float(init_std), patience=int(patience), data_seed=int(data_seed),
                eval_seed=int(eval_seed), loss=loss, prior=None if prior is None else prior.spec(), task=task)
    key = tuple(sorted(args.items()))
    if cache and key in _CACHE:
        return copy.deepcopy(_CACHE[key])
    rec = _train_tau(seeds=seeds, prior=prior, **{k: v for k, v in args.items() if k not in ("seeds", "prior")})
    if cache:
        if len(_CACHE) >= _CACHE_MAX:
            _CACHE.pop(next(iter(_CACHE)))
        _CACHE[key] = copy.deepcopy(rec)
    return rec


def _train_tau(*, N, seeds, C, alpha, layer1, offset, lr, batch, max_steps, eval_every, n_eval, init_std, patience,
               data_seed, eval_seed, loss, prior, task) -> dict[str, Any]:
    """:func:`train_tau` without the cache."""
    from sim.papers.markov.task import crossing_step, fresh_sequences
    from sim.train import Stage, TrainConfig, train

    S = len(seeds)
    t0 = time.perf_counter()
    gen = torch.Generator()
    inits = []
    for sd in seeds:  # each seed's initial scalars depend on that seed alone
        gen.manual_seed(sd)
        inits.append(torch.randn(3, generator=gen, dtype=torch.float64) * init_std)
    model = SATransformer(SAConfig(vocab=C, layer1=layer1, offset=offset, seeds=S, init_std=init_std))
    with torch.no_grad():
        init = torch.stack(inits)  # (S, 3): delta, beta, v
        if model.delta is not None:
            model.delta.copy_(init[:, 0])
        model.beta.copy_(init[:, 1])
        model.v.copy_(init[:, 2])
    rng = np.random.default_rng(int(data_seed))  # one stream for every seed's batches (one vectorised draw)
    er = np.random.default_rng(eval_seed)
    xe, _ = fresh_sequences(er, er, C, n_eval, N + 1, alpha=alpha, prior=prior)
    ctx_e = torch.as_tensor(xe[:, :-1])
    y_e = torch.as_tensor(xe[:, -1])
    strat = last_position_strategies(xe[:, :-1], C, alpha)
    rec: dict[str, Any] = {"steps": [], "kl_G1": [[] for _ in seeds], "kl_G2": [[] for _ in seeds],
                           "trajectory": {k: [[] for _ in seeds] for k in ("delta", "beta", "v", "loss")}}
    streak = np.zeros(S, int)
    ahead = max(1, min(PREFETCH, PREFETCH_TOKENS // (S * batch * (N + 1))))
    buf: list[Tensor] = []

    def draw() -> Tensor:  # ``ahead`` steps' batches at once: (ahead, S, batch, N + 1)
        n = ahead * S * batch
        if prior is None:
            xs = fresh_batch(rng, C, n, N + 1, alpha)
        else:
            xs = torch.as_tensor(fresh_sequences(rng, rng, C, n, N + 1, alpha=alpha, prior=prior)[0])
        if task == "shuffled":  # each sequence's tokens in a random order of its own
            xs = torch.gather(xs, 1, torch.as_tensor(rng.random(xs.shape)).argsort(dim=1))
        return xs.view(ahead, S, batch, N + 1)

    def sample(_gen, _step) -> Tensor:  # the batches come from data_seed's numpy stream
        if not buf:
            buf.extend(draw().unbind(0))
        return buf.pop(0)

    def objective(model: SATransformer, xs: Tensor) -> Tensor:
        if loss == "last":
            per_seed = model.last_loss(xs[..., :-1], xs[..., -1])
        else:
            logp = torch.log_softmax(model(xs[..., :-1]), dim=-1)  # (S, B, N, C)
            per_seed = -logp.gather(-1, xs[..., 1:].unsqueeze(-1))[..., 0].mean((1, 2))
        return per_seed.sum()  # seeds independent: each gets its own gradient

    def evaluate(model: SATransformer, step: int, _losses) -> bool:
        """Record KL(G1 || model), KL(G2 || model) at the last position; stop once every seed
        has had G2 nearer for ``patience`` evaluations in a row."""
        nonlocal streak
        with torch.no_grad():
            logq_t = torch.log_softmax(model.last_logits(ctx_e), dim=-1)  # (S, n_eval, C)
            ce = -logq_t.gather(-1, y_e.view(1, -1, 1).expand(S, -1, 1))[..., 0].mean(-1)  # (S,)
            logq = logq_t.numpy()
        k1, k2 = _kl_rows(strat["G1"], logq).mean(1), _kl_rows(strat["G2"], logq).mean(1)
        rec["steps"].append(step)
        scalars = {"beta": model.beta, "v": model.v, "loss": ce}
        if model.delta is not None:
            scalars["delta"] = model.delta
        for i in range(S):
            rec["kl_G1"][i].append(float(k1[i]))
            rec["kl_G2"][i].append(float(k2[i]))
            for name, val in scalars.items():
                rec["trajectory"][name][i].append(float(val[i].detach()))
        streak = np.where(k2 < k1, streak + 1, 0)
        return bool((streak >= patience).all())

    train(model, sample, TrainConfig(stages=(Stage(max_steps, lr, optimizer="sgd"),), log_every=max(1, max_steps)),
          loss_fn=objective, evaluate=evaluate, eval_at=lambda step: step % eval_every == 0)
    taus = []
    for i in range(S):
        r = {"steps": rec["steps"], "eval": {"ood": {"G1": rec["kl_G1"][i], "G2": rec["kl_G2"][i]}}}
        t = crossing_step(r, "ood", "G2", "G1")
        taus.append(None if t is None else float(t))
    final = {"beta": model.beta.detach().tolist(), "v": model.v.detach().tolist()}
    if model.delta is not None:
        final["delta"] = model.delta.detach().tolist()
    rec.update({"tau": taus, "seeds": seeds, "final": final, "stopped_at": rec["steps"][-1],
                "settings": {"N": N, "C": C, "alpha": alpha, "layer1": layer1, "offset": offset, "lr": lr,
                             "batch": batch, "max_steps": max_steps, "eval_every": eval_every, "n_eval": n_eval,
                             "init_std": init_std, "patience": patience, "eval_seed": eval_seed,
                             "data_seed": data_seed, "optimiser": "SGD", "loss": loss, "task": task,
                             "prior": None if prior is None else prior.spec()},
                "seconds": time.perf_counter() - t0})
    return rec


def tau_job(job: dict[str, Any]) -> dict[str, Any]:
    """:func:`train_tau` from plain arguments (the prior as its spec): one job of the grid runner
    (:func:`sim.claims.jobs.run_jobs`; module level, so a worker process imports it)."""
    from sim.priors import parse_prior

    args = {k: v for k, v in job.items() if k not in ("prior", "progress")}
    return train_tau(**args, prior=None if job.get("prior") is None else parse_prior(job["prior"]))


def tau_key(job: dict[str, Any]) -> tuple:
    """Every input of :func:`tau_job` (its memo key; not ``progress``)."""
    return ("markov.sa.train_tau",) + tuple(sorted((k, tuple(v) if isinstance(v, list) else v)
                                                   for k, v in job.items() if k != "progress"))


def tau_cost(job: dict[str, Any]):
    """What one :func:`tau_job` trains: its seeds as one model, ``max_steps`` SGD steps (fewer once
    every seed has crossed) in blocks of ``eval_every`` steps, each followed by an evaluation."""
    from sim.claims.jobs import Cost

    shape = {k: job[k] for k in ("N", "C", "layer1", "loss", "batch", "eval_every", "n_eval")}
    shape["models"] = len(job["seeds"])
    every = int(job["eval_every"])
    blocks = -(-int(job["max_steps"]) // every)  # ceil: the last block may be short
    return Cost.of("markov-sa", "sim.papers.markov.sa_transformer:timing_run", blocks=[(shape, blocks)],
                   block_steps=every, models=len(job["seeds"]), early_stop=True)


def timing_run(unit: str, shape: dict[str, Any], count: int, device: str = "cpu") -> None:
    """The cost plan's timing run (:mod:`sim.plan`): ``count`` blocks of ``eval_every`` steps, each with
    its evaluation, of :func:`train_tau` at ``shape`` (the fields of :func:`tau_cost`), never stopping early."""
    every = int(shape["eval_every"])
    train_tau(N=int(shape["N"]), seeds=int(shape["models"]), C=int(shape["C"]), layer1=shape["layer1"],
              loss=shape["loss"], batch=int(shape["batch"]), max_steps=every * int(count), eval_every=every,
              n_eval=int(shape["n_eval"]), patience=10 ** 9, cache=False)

