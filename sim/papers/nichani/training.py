"""Training N's models on N's task (claims N.K1, N.K4, N.E and N.K9's trained part).

What is here, and why
---------------------
- :class:`NTask` and :func:`task_sampler`: N's task (Knowl 2) as fresh batches for
  :func:`sim.train.train`. Each batch is a function of ``(seed, step)`` only, so a resumed
  run sees the same data, and one batch costs a few milliseconds (matrices in log space,
  the stationary laws batched, tokens by inverse CDF over all prompts at once). The
  target is N's population form: the row ``pi(s_T, .)`` the target is drawn from, as
  N's reference code trains (``y = pi[test_token]``), not a sampled token.
- :func:`last_position_logits`: the disentangled transformer's readout computed the cheap
  way. The readout looks at the last position only, so the last layer needs the query
  row of its attention only (``1/T`` of the work); earlier layers run in full. Same
  parameters, same function as ``DisentangledTransformer.forward`` (tested to float
  round-off), without the hook points; probes use the model's own forward.
- the recipes a full model trains with (N's, and this project's faster one) are data in
  :mod:`sim.papers.nichani.recipes`;
- :func:`train_disentangled` / :func:`train_reduced`: one training run, returning the model
  and its :class:`sim.train.TrainLog`; trained models are cached per process by their full
  configuration, so N.K4 reuses N.K1's models within one run. :func:`train_reduced_many`
  trains several seeds of the reduced model as one batch (:func:`sim.train.train_batched`).

Wrong tasks (for the tests that a model trained on the wrong task fails the checks):
``wrong="shuffled"`` pairs each prompt with another prompt's target row (nothing about
the prompt predicts it), ``wrong="other-graph"`` trains on the DAG ``p(i) = i - 2``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, NamedTuple, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from sim.seeds import derive_seeds
from theory.markov import stationary_batch
from sim.threads import torch_threads
from sim.papers.nichani.model import DisentangledTransformer, ReducedModel
from sim.papers.nichani.recipes import Recipe
from sim.priors import Dirichlet, Floor, Prior
from sim.sampling import dirichlet_rows
from sim.train import Stage, TrainConfig, TrainLog, train

__all__ = [
    "NTask",
    "MultiParentTask",
    "Batch",
    "draw_matrices",
    "sample_task",
    "task_sampler",
    "sample_multiparent",
    "multiparent_sampler",
    "last_position_logits",
    "disentangled_loss",
    "reduced_loss",
    "train_disentangled",
    "train_reduced",
    "train_reduced_many",
    "WRONG_TASKS",
    "clear_cache",
    "reduced_job",
    "reduced_group",
    "reduced_key",
    "reduced_group_key",
    "reduced_cost",
    "reduced_timing_run",
    "disentangled_cost",
    "disentangled_timing_run",
]

WRONG_TASKS = (None, "shuffled", "other-graph")


# ------------------------------------------------------------------------------ the task --
@dataclass(frozen=True)
class NTask:
    """N's task (Knowl 2): alphabet ``S``, prompt length ``T``, a fixed DAG ``parents``
    (length ``T``, ``-1`` for roots; the query ``T-1`` is a root drawn uniformly), transition
    matrices from ``prior`` (``None``: i.i.d. ``Dirichlet(alpha)`` rows, N's code), non-query
    roots from ``mu_pi``."""

    S: int
    T: int
    parents: tuple[int, ...]
    alpha: float = 0.1
    prior: Prior | None = None

    def __post_init__(self):
        if len(self.parents) != self.T:
            raise ValueError(f"parents has length {len(self.parents)}, expected T = {self.T}")
        if any(not (-1 <= p < i) for i, p in enumerate(self.parents)):
            raise ValueError(f"parents must satisfy -1 <= p(i) < i, got {list(self.parents)}")
        if self.parents[-1] != -1:
            object.__setattr__(self, "parents", tuple(self.parents[:-1]) + (-1,))

    @property
    def nonroot(self) -> np.ndarray:
        """Non-root context positions ``i`` (those with a parent), ascending."""
        par = np.asarray(self.parents)
        return np.flatnonzero(par >= 0)

    def key(self) -> tuple:
        """What identifies the task in the model cache: ``S``, ``T``, the parents, ``alpha`` and the prior's spec."""
        return (self.S, self.T, self.parents, self.alpha, None if self.prior is None else self.prior.spec())

    def sampler(self, batch: int, *, seed: int, device: str = "cpu", wrong: str | None = None):
        """The task's :func:`task_sampler`."""
        return task_sampler(self, batch, seed=seed, device=device, wrong=wrong)


@dataclass(frozen=True)
class MultiParentTask:
    """N's multi-parent task (Knowl 9) with ``k = 2``: ``parent_sets`` of length ``T + 1``
    (node ``T`` is the target), ``Dirichlet(alpha)`` rows, roots uniform (N's code)."""

    S: int
    parent_sets: tuple[tuple[int, ...], ...]
    alpha: float = 0.1

    @property
    def T(self) -> int:
        return len(self.parent_sets) - 1

    def key(self) -> tuple:
        """What identifies the task in the model cache: ``S``, the parent sets and ``alpha``."""
        return ("multi", self.S, self.parent_sets, self.alpha)

    def sampler(self, batch: int, *, seed: int, device: str = "cpu", wrong: str | None = None):
        """The task's :func:`multiparent_sampler`."""
        return multiparent_sampler(self.S, self.parent_sets, self.alpha, batch, seed=seed, device=device, wrong=wrong)


class Batch(NamedTuple):
    """One batch of N's task: the prompts, the target law of each prompt's next token, and the
    matrices that drew them (shapes on the fields; ``B`` prompts of length ``T`` over ``S`` states)."""

    tokens: Tensor  # (B, T) int64
    probs: Tensor  # (B, S): the target law pi(s_T, .) (N's population form)
    pis: np.ndarray  # (B, S, S) float64, each prompt's matrix


def draw_matrices(task: NTask, rng: np.random.Generator, n: int) -> np.ndarray:
    """``n`` matrices ``(n, S, S)`` from the task's prior; Dirichlet rows (also under a floor)
    take the vectorised log-space sampler, so ``alpha = 0.1`` never underflows."""
    prior = task.prior
    if prior is None:
        return dirichlet_rows(rng, task.alpha, n, task.S)
    if prior.d is None:
        prior = prior.bind(task.S)
    if isinstance(prior, Dirichlet):
        return dirichlet_rows(rng, float(prior.alpha), n, task.S)
    if isinstance(prior, Floor) and isinstance(prior.base, Dirichlet):
        g = float(prior.gamma)
        return g / task.S + (1 - g) * dirichlet_rows(rng, float(prior.base.alpha), n, task.S)
    return np.asarray(prior.sample(rng, n), dtype=np.float64)


def _categorical(u: np.ndarray, probs: np.ndarray) -> np.ndarray:
    """Inverse-CDF draws: ``u`` ``(B,)``, ``probs`` ``(B, S)`` -> ``(B,)``."""
    return (u[:, None] >= np.cumsum(probs, axis=1)[:, :-1]).sum(axis=1)


def sample_task(task: NTask, rng: np.random.Generator, n: int, *, pis: np.ndarray | None = None,
                parents: Sequence[int] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``n`` prompts of N's task: ``(tokens (n, T) int64, pis (n, S, S))``.

    ``pis`` fixes the matrices (e.g. one out-of-distribution matrix repeated, N.K4);
    ``parents`` overrides the DAG (a wrong task). Non-query roots ``~ mu_pi``, the query
    ``~ Unif[S]``.
    """
    S, T = task.S, task.T
    par = list(task.parents if parents is None else parents)
    if pis is None:
        pis = draw_matrices(task, rng, n)
    mu = stationary_batch(pis)
    cdf = np.cumsum(pis, axis=2)[..., :-1]  # (n, S, S-1): inverse-CDF tables, one per row
    mu_cdf = np.cumsum(mu, axis=1)[:, :-1]  # (n, S-1)
    x = np.empty((n, T), dtype=np.int64)
    u = rng.random((n, T))
    b = np.arange(n)
    for i in range(T - 1):
        p = par[i]
        table = mu_cdf if p < 0 else cdf[b, x[:, p]]  # (n, S-1)
        x[:, i] = (u[:, i, None] >= table).sum(axis=1)
    x[:, T - 1] = np.minimum((u[:, T - 1] * S).astype(np.int64), S - 1)
    return x, pis


def _other_graph(T: int) -> list[int]:
    """A wrong DAG for the tests: ``p(i) = i - 2`` (positions 0, 1 and the query are roots)."""
    return [i - 2 if 2 <= i < T - 1 else -1 for i in range(T)]


def task_sampler(task: NTask, batch: int, *, seed: int, device: str = "cpu",
                 wrong: str | None = None) -> Callable[[torch.Generator, int], Batch]:
    """``sample(gen, step) -> Batch`` for :func:`sim.train.train`.

    The batch depends on ``(seed, step)`` only (``gen`` is not used), so a resumed run
    draws the same data. ``wrong`` trains on a wrong task (see the module docstring).
    """
    if wrong not in WRONG_TASKS:
        raise ValueError(f"wrong must be one of {WRONG_TASKS}, got {wrong!r}")
    parents = _other_graph(task.T) if wrong == "other-graph" else None

    def sample(gen: torch.Generator, step: int) -> Batch:
        rng = np.random.default_rng([int(seed), int(step)])
        x, pis = sample_task(task, rng, batch, parents=parents)
        rows = pis[np.arange(batch), x[:, -1]]  # (B, S): pi(s_T, .)
        if wrong == "shuffled":
            rows = rows[rng.permutation(batch)]
        return Batch(torch.as_tensor(x, device=device), torch.as_tensor(rows, dtype=torch.float32, device=device),
                     pis)

    return sample


def sample_multiparent(rng: np.random.Generator, S: int, parent_sets, alpha: float, n: int,
                       *, wrong: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """N's multi-parent task (Knowl 9; reference ``problems.InContextDAG``) for ``k = 2`` parents:
    ``(tokens (n, T), target rows (n, S))``.

    Per prompt a tensor ``pi(. | a, b)`` with i.i.d. ``Dirichlet(alpha)`` rows; roots
    ``~ Unif[S]`` (as N's code); node ``i`` ``~ pi(. | s_{p(i)_1}, s_{p(i)_2})``; the target
    row is ``pi(. | parents of node T)``. ``wrong="shuffled"`` pairs prompts with other
    prompts' target rows; ``wrong="one-parent"`` makes every node depend on its second parent
    only (``pi(. | a, b) = pi(. | 0, b)``), a 1-parent task in 2-parent clothing.
    """
    if wrong not in (None, "shuffled", "one-parent"):
        raise ValueError(f"multi-parent wrong task must be None, 'shuffled' or 'one-parent', got {wrong!r}")
    sets = [tuple(int(p) for p in ps) for ps in parent_sets]
    T = len(sets) - 1
    if any(len(ps) not in (0, 2) for ps in sets) or len(sets[-1]) != 2:
        raise ValueError("sample_multiparent draws 2-parent tasks (every non-root node and the target have 2 parents)")
    pis = dirichlet_rows(rng, alpha, n * S, S).reshape(n, S, S, S)  # (n, a, b, next)
    if wrong == "one-parent":
        pis = np.broadcast_to(pis[:, :1], pis.shape)
    x = np.empty((n, T), dtype=np.int64)
    u = rng.random((n, T))
    b = np.arange(n)
    for i in range(T):
        if not sets[i]:
            x[:, i] = np.minimum((u[:, i] * S).astype(np.int64), S - 1)
        else:
            p1, p2 = sets[i]
            x[:, i] = _categorical(u[:, i], pis[b, x[:, p1], x[:, p2]])
    p1, p2 = sets[T]
    rows = pis[b, x[:, p1], x[:, p2]]  # (n, S)
    if wrong == "shuffled":
        rows = rows[rng.permutation(n)]
    return x, rows


def multiparent_sampler(S: int, parent_sets, alpha: float, batch: int, *, seed: int, device: str = "cpu",
                        wrong: str | None = None) -> Callable[[torch.Generator, int], Batch]:
    """``sample(gen, step) -> Batch`` for the multi-parent task (``pis`` is not kept: ``None``)."""

    def sample(gen: torch.Generator, step: int) -> Batch:
        x, rows = sample_multiparent(np.random.default_rng([int(seed), int(step)]), S, parent_sets, alpha, batch,
                                     wrong=wrong)
        return Batch(torch.as_tensor(x, device=device), torch.as_tensor(rows, dtype=torch.float32, device=device),
                     None)

    return sample


# ---------------------------------------------------------------------- fast forward --
def _first_layer(A_1: Tensor, tokens: Tensor, S: int, T_embed: int) -> Tensor:
    """Layer 1 on the one-hot input ``h_0 = [e_{s_t}, e_t]`` by gathers instead of products.

    ``(h_0 A)[i] = A[s_i] + A[S + i]`` and ``score[i, j] = (h_0 A)[i, s_j] + (h_0 A)[i, S + j]``;
    the head's output ``sum_j attn[i, j] h_0[j]`` is ``[sum_j attn[i, j] e_{s_j}, attn[i]]``.
    Returns the heads' outputs ``(B, T, m d_0)`` in head order.
    """
    B, T = tokens.shape
    causal = torch.ones(T, T, dtype=torch.bool, device=tokens.device).tril()  # (T, T)
    idx = tokens.unsqueeze(1).expand(B, T, T)  # (B, T, T): [b, i, j] = s_j
    outs = []
    for A in A_1:  # (d_0, d_0) per head
        hA = A[tokens] + A[S:S + T].unsqueeze(0)  # (B, T, d_0): row i of h_0 A
        scores = hA[..., :S].gather(2, idx) + hA[..., S:S + T]  # (B, T, T)
        attn = torch.softmax(scores.masked_fill(~causal, float("-inf")), dim=-1)  # (B, T, T)
        tok = torch.zeros(B, T, S, dtype=attn.dtype, device=attn.device).scatter_add_(2, idx, attn)  # (B, T, S)
        pos = F.pad(attn, (0, T_embed - T))  # (B, T, T_embed)
        outs += [tok, pos]
    return torch.cat(outs, dim=-1)  # (B, T, m d_0)


def last_position_logits(model: DisentangledTransformer, tokens: Tensor) -> Tensor:
    """``model(tokens)`` (the readout ``W_O h_L[T-1]``, ``(B, d_out)``) computed cheaply.

    Layer 1 works on the one-hot input by gathers (``_first_layer``); middle layers
    run in full with all heads batched; the last layer computes only the query row ``T-1``
    of its attention, the only row the readout sees. No hook points.
    """
    B, T = tokens.shape
    h = model.embed(tokens)  # (B, T, d_0)
    layers = list(model.A)
    for l, A_l in enumerate(layers[:-1]):
        if l == 0:
            out = _first_layer(A_l, tokens, model.S, model.T)  # (B, T, m d_0)
        else:
            m, d = A_l.shape[0], h.shape[-1]
            causal = torch.ones(T, T, dtype=torch.bool, device=tokens.device).tril()
            scores = (h.unsqueeze(1) @ A_l) @ h.transpose(1, 2).unsqueeze(1)  # (B, m, T, T)
            attn = torch.softmax(scores.masked_fill(~causal, float("-inf")), dim=-1)  # (B, m, T, T)
            out = (attn @ h.unsqueeze(1)).transpose(1, 2).reshape(B, T, m * d)  # (B, T, m d)
        h = torch.cat([h, out], dim=-1)  # (B, T, (1+m) d)
    A_L = layers[-1]
    q = h[:, -1]  # (B, d)
    qA = torch.einsum("bd,mde->bme", q, A_L)  # (B, m, d)
    scores = qA @ h.transpose(1, 2)  # (B, m, T): the query row only
    out = torch.softmax(scores, dim=-1) @ h  # (B, m, d)
    z = torch.cat([q, out.reshape(B, -1)], dim=-1)  # (B, d_L): h_L[T-1]
    return z @ model.W_O.T  # (B, d_out)


def disentangled_loss(model: DisentangledTransformer, batch: Batch) -> Tensor:
    """Cross-entropy of ``softmax(readout)`` against ``pi(s_T, .)`` (N's ``criterion``), batch mean."""
    logp = torch.log_softmax(last_position_logits(model, batch.tokens), dim=-1)  # (B, S)
    return -(batch.probs * logp).sum(-1).mean()


def reduced_loss(model: ReducedModel, batch: Batch, eps: float | None = None) -> Tensor:
    """N's perturbed population loss (Knowl 6): ``-sum_s' pi(s'|s_T) log(f_s' + eps)``, batch mean;
    ``eps`` defaults to ``T_eff^{-1/2}`` (the model's ``t_eff``)."""
    eps = model.t_eff ** -0.5 if eps is None else float(eps)
    f = model(batch.tokens)  # (B, S)
    return -(batch.probs * torch.log(f + eps)).sum(-1).mean()


# -------------------------------------------------------------------------- training --
_CACHE: dict[tuple, tuple] = {}
_CACHE_MAX = 512  # reduced models are small; N.K4 reuses every model N.K1 trains


def _cached(key, build):
    if key in _CACHE:
        return _CACHE[key]
    out = build()
    if len(_CACHE) >= _CACHE_MAX:
        _CACHE.pop(next(iter(_CACHE)))
    _CACHE[key] = out
    return out


def clear_cache() -> None:
    """Forget the trained models kept for reuse in this process (N.K4 reuses N.K1's)."""
    _CACHE.clear()


def train_disentangled(task, recipe: Recipe, *, seed: int, heads: Sequence[int] = (1, 1), device: str = "cpu",
                       wrong: str | None = None, probes: dict | None = None,
                       thresholds: dict | None = None, stop_when_crossed: bool = False, log_every: int = 100,
                       bayes_loss=None, progress=None, cache: bool = True) -> tuple[DisentangledTransformer, TrainLog]:
    """Train N's disentangled transformer (``heads`` per layer) on ``task`` (:class:`NTask` or
    :class:`MultiParentTask`) with ``recipe``, all blocks jointly.

    ``seed`` feeds two independent streams: model init and data (``derive_seeds(seed, n=2)``).
    With ``thresholds`` and ``stop_when_crossed`` training ends once every thresholded probe
    has crossed (time to mechanism; the schedule still spans ``recipe.steps``). Returns
    ``(model on device, log)``; cached per process by configuration unless probes or early
    stopping are asked for.
    """
    key = ("dis", task.key(), recipe, int(seed), tuple(heads), device, wrong, log_every)
    use_cache = cache and not probes and not stop_when_crossed

    def build():
        init_seed, data_seed = derive_seeds(seed, n=2)
        gen = torch.Generator(device=device).manual_seed(init_seed) if recipe.init_scale else None
        model = DisentangledTransformer.init(task.S, task.T, list(heads), generator=gen, scale=recipe.init_scale,
                                             device=device)
        sample = task.sampler(recipe.batch, seed=data_seed, device=device, wrong=wrong)
        cfg = TrainConfig(stages=(recipe.stage(),), seed=data_seed, log_every=log_every)
        with torch_threads(1):
            log = train(model, sample, cfg, device=device, loss_fn=disentangled_loss,
                        probes=probes, thresholds=thresholds, stop_when_crossed=stop_when_crossed,
                        bayes_loss=bayes_loss, progress=progress if progress is not None else False)
        return model, log

    return _cached(key, build) if use_cache else build()


def train_reduced(task: NTask, *, seed: int, beta0: float, lr1: float, steps1: int, lr2: float, steps2: int,
                  batch: int = 1024, t_eff: float | None = None, device: str = "cpu", wrong: str | None = None,
                  log_every: int = 50, progress=None, cache: bool = True) -> tuple[ReducedModel, TrainLog]:
    """N's two-stage gradient descent (Knowl 5) on the reduced model (Knowl 6).

    ``A1(0) = 0``, ``A2(0) = beta0 I``; stage 1: plain gradient descent on ``A1`` (``A2``
    frozen), ``steps1`` steps at ``lr1``; stage 2: on ``A2`` (``A1`` frozen), ``steps2`` at
    ``lr2``; constant step sizes, as in Knowl 5. The loss is N's perturbed population loss
    with ``eps = t_eff^{-1/2}`` on fresh batches (a stochastic estimate of the population
    gradient). Returns ``(model, log)``; the log's rows carry ``stage`` (0 or 1).
    """
    key = ("red", task.key(), int(seed), beta0, lr1, steps1, lr2, steps2, batch, t_eff, device, wrong)

    def build():
        data_seed = derive_seeds(seed, n=2)[1]
        model = ReducedModel.init(task.S, task.T, beta0, t_eff=t_eff, device=device)
        sample = task_sampler(task, batch, seed=data_seed, device=device, wrong=wrong)
        cfg = TrainConfig(stages=(Stage(steps1, lr1, params=("A1",), optimizer="sgd"),
                                  Stage(steps2, lr2, params=("A2",), optimizer="sgd")),
                          seed=data_seed, log_every=log_every)
        with torch_threads(1):
            log = train(model, sample, cfg, device=device, loss_fn=reduced_loss,
                        progress=progress if progress is not None else False)
        return model, log

    return _cached(key, build) if cache else build()


def train_reduced_many(task: NTask, seeds: Sequence[int], *, beta0: float, lr1: float, steps1: int, lr2: float,
                       steps2: int, batch: int = 1024, t_eff: float | None = None, device: str = "cpu",
                       wrong: str | None = None, log_every: int = 50,
                       progress=None) -> list[tuple[ReducedModel, TrainLog]]:
    """:func:`train_reduced` for several seeds at once: the models not in the cache are trained
    as one (:func:`sim.train.train_batched`; each is the model :func:`train_reduced` gives for
    its seed), and every model is cached under :func:`train_reduced`'s key."""
    from sim.train import train_batched

    keys = [("red", task.key(), int(sd), beta0, lr1, steps1, lr2, steps2, batch, t_eff, device, wrong)
            for sd in seeds]
    todo = [k for k, key in enumerate(keys) if key not in _CACHE]
    if todo:
        data_seeds = [derive_seeds(seeds[k], n=2)[1] for k in todo]
        models = [ReducedModel.init(task.S, task.T, beta0, t_eff=t_eff, device=device) for _ in todo]
        samples = [task_sampler(task, batch, seed=ds, device=device, wrong=wrong) for ds in data_seeds]
        cfg = TrainConfig(stages=(Stage(steps1, lr1, params=("A1",), optimizer="sgd"),
                                  Stage(steps2, lr2, params=("A2",), optimizer="sgd")), log_every=log_every)
        with torch_threads(1):
            logs = train_batched(models, samples, cfg, data_seeds, device=device, loss_fn=reduced_loss,
                                 progress=progress)
        for k, model, log in zip(todo, models, logs):
            _cached(keys[k], lambda model=model, log=log: (model, log))
    return [_CACHE[key] for key in keys]


# ------------------------------------------------------------------- jobs of the grid runner --
# One reduced model per job (N.K1, N.K4): plain arguments, the prior as its spec (a spec travels where
# an object may not). The seeds of one T train as one batched model (reduced_group) on every device.
_REDUCED_HP = ("beta0", "lr1", "steps1", "lr2", "steps2", "batch", "t_eff")


def _reduced_task(job) -> NTask:
    from sim.priors import parse_prior

    return NTask(int(job["S"]), int(job["T"]), tuple(job["parents"]),
                 prior=None if job["prior"] is None else parse_prior(job["prior"]))


def reduced_job(job) -> tuple[ReducedModel, TrainLog]:
    """:func:`train_reduced` from a job's plain arguments (``S``, ``T``, ``parents``, ``prior`` spec,
    ``seed``, the hyperparameters of :func:`train_reduced`, ``device``, ``wrong``)."""
    return reduced_group({"jobs": [job], "progress": job.get("progress")})[0]


def reduced_group(group) -> list[tuple[ReducedModel, TrainLog]]:
    """The jobs ``group["jobs"]`` (one task and hyperparameters, several seeds) trained as one
    (:func:`train_reduced_many`), in order."""
    jobs = group["jobs"]
    first = jobs[0]
    hp = {k: first[k] for k in _REDUCED_HP if k in first}
    return train_reduced_many(_reduced_task(first), [int(j["seed"]) for j in jobs], device=first["device"],
                              wrong=first["wrong"], progress=group.get("progress"), **hp)


def reduced_key(job) -> tuple:
    """Every input of :func:`reduced_job` (not ``progress``)."""
    return ("nichani.reduced",) + tuple(sorted((k, tuple(v) if isinstance(v, list) else v)
                                               for k, v in job.items() if k != "progress"))


def reduced_group_key(job) -> tuple:
    """Jobs that may train as one: all but the seed equal."""
    return tuple(kv for kv in reduced_key(job) if kv[0] != "seed")


def reduced_cost(job):
    """What :func:`reduced_job` trains: ``steps1 + steps2`` gradient steps of one reduced model at ``S, T, batch``."""
    from sim.claims.jobs import Cost

    shape = {"S": int(job["S"]), "T": int(job["T"]), "batch": int(job["batch"])}
    return Cost.of("nichani-reduced", "sim.papers.nichani.training:reduced_timing_run",
                   steps=[(shape, int(job["steps1"]) + int(job["steps2"]))])


#: The seed of the cost plan's timing runs: they time a step, no number of theirs is reported.
TIMING_SEED = 0


def reduced_timing_run(unit: str, shape, count: int, device: str = "cpu") -> None:
    """The cost plan's timing run (:mod:`sim.plan`): ``count`` stage-1 steps of the reduced model on
    the chain graph at ``shape`` (``S``, ``T``, ``batch``)."""
    T = int(shape["T"])
    task = NTask(int(shape["S"]), T, tuple([-1] + list(range(T - 2)) + [-1]))
    train_reduced(task, seed=TIMING_SEED, beta0=T ** -1.5, lr1=1.0, steps1=int(count), lr2=1.0, steps2=0,
                  batch=int(shape["batch"]), device=device, cache=False)


def disentangled_cost(job):
    """What one job training N's disentangled transformer costs: ``recipe.steps`` steps at ``S, T``, the
    ``heads`` per layer (default ``(1, 1)``) and the recipe's batch and optimiser (the evaluation after
    training is not counted)."""
    from sim.claims.jobs import Cost

    recipe = job["recipe"]
    shape = {"S": int(job["S"]), "T": int(job["T"]), "heads": list(job.get("heads", (1, 1))), "batch": recipe.batch,
             "optimizer": recipe.optimizer, "multi": bool(job.get("multi", False))}
    return Cost.of("nichani-disentangled", "sim.papers.nichani.training:disentangled_timing_run",
                   steps=[(shape, recipe.steps)])


def disentangled_timing_run(unit: str, shape, count: int, device: str = "cpu") -> None:
    """The cost plan's timing run (:mod:`sim.plan`): ``count`` steps of the disentangled transformer at
    ``shape`` (:func:`disentangled_cost`), on the chain graph (or the trigram DAG for ``multi``)."""
    S, T = int(shape["S"]), int(shape["T"])
    recipe = Recipe("timing", shape["optimizer"], lr=0.1, steps=int(count), batch=int(shape["batch"]))
    if shape.get("multi"):
        task = MultiParentTask(S, tuple(() if i < 2 else (i - 2, i - 1) for i in range(T)) + ((T - 2, T - 1),))
    else:
        task = NTask(S, T, tuple([-1] + list(range(T - 2)) + [-1]))
    train_disentangled(task, recipe, seed=TIMING_SEED, heads=tuple(shape["heads"]), device=device, cache=False,
                       log_every=10 ** 9)

