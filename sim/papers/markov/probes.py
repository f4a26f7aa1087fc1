"""Probes and interventions for the Markov LM (claims G.3 and G.4: seed 004's circuits of each
phase and the task vector), all through the model's hook points
(:mod:`sim.papers.markov.model`), never a second forward pass written for the purpose.

Detection patterns
------------------
A circuit is read as a detection pattern (DESIGN principle 5): for each query position ``t``
the set of key positions ``S_t`` the circuit attends to. With ``m_t`` the attention mass a head
puts on ``S_t`` and ``u_t = |S_t| / (t + 1)`` the mass a uniform causal head puts there, the
head's *detection score* on one sequence is::

    s = (mean_t m_t - mean_t u_t) / (1 - mean_t u_t)        (rows with S_t empty left out)

0 for the uniform head, 1 for a head on the pattern alone. ``1 - m_t`` is the total-variation
distance from the row to the nearest distribution supported on ``S_t``, so ``s >= 1/2`` says the
head is at most half as far from the pattern as the uniform head is, hence nearer the pattern
than the uniform head (the triangle inequality; the factor is that argument's, as in
:func:`sim.papers.markov.placement.absolute_placement`). Patterns:

- :func:`previous_state_pattern`: ``S_t = {t - 1}`` (G2's first-layer head);
- :func:`induction_pattern`: ``S_t = {1 <= j <= t : x_{j-1} = x_t}``, the positions whose previous
  state is the current state (G2's statistical induction head reads the state at ``j``).

Uniform pooling (G1 and M1's first layer, M2's second) is read as the mean total-variation
distance from the row to the uniform causal row, against half the distance from the uniform
row to the nearest competing pattern (previous state, the state itself, the induction set):
:func:`uniformity`.

Interventions (each the identity at its neutral setting; tests hold them to float round-off)
---------------------------------------------------------------------------------------------
- :func:`ablate_head`: layer ``l``'s attention pattern replaced by the uniform causal pattern
  (``mode="uniform"``: the head pools, as a 1-point circuit does) or by zeros (``"zero"``: it
  adds nothing), through hook point ``layer{l}.pattern``.
- :func:`patched_logits`: the tensor at a hook point (G's task vector phi: ``layer2.attn_out``,
  what the second attention layer adds to the residual stream at each position) replaced, at
  every position, by the same tensor from a donor forward pass (patching from the same
  sequence changes nothing), or by :func:`random_phi`.
- task injection and the slowed first layer act on training: :class:`sim.papers.markov.model.TaskInjection`
  and ``MarkovRunSpec.lr_factors``.

The pairs probe (:func:`pair_probe`) reads ``layer1.mlp_out`` with a linear map (least squares
onto the one-hot label) fitted on half the sequences and scored on the other half.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
import torch
from torch import Tensor

from sim.models.hooks import run_with_cache, run_with_hooks

__all__ = [
    "uniform_pattern",
    "previous_state_pattern",
    "self_pattern",
    "induction_pattern",
    "attention_maps",
    "detection_scores",
    "uniformity",
    "ablate_head",
    "sequence_losses",
    "hooked_tensor",
    "patched_logits",
    "random_phi",
    "pair_labels",
    "pair_probe",
    "ABLATIONS",
]

#: How :func:`ablate_head` removes a head.
ABLATIONS = ("uniform", "zero")


# ---------------------------------------------------------------------------- patterns --
def uniform_pattern(T: int) -> np.ndarray:
    """The uniform causal head: ``U[t, j] = 1 / (t + 1)`` for ``j <= t``, shape ``(T, T)``."""
    return np.tril(np.ones((T, T))) / np.arange(1, T + 1)[:, None]


def previous_state_pattern(T: int) -> np.ndarray:
    """``P[t, t - 1] = 1`` for ``t >= 1`` (row 0 empty), shape ``(T, T)``."""
    return np.eye(T, k=-1)


def self_pattern(T: int) -> np.ndarray:
    """``P[t, t] = 1``: a head on the current state, shape ``(T, T)``."""
    return np.eye(T)


def induction_pattern(x: np.ndarray) -> np.ndarray:
    """The statistical induction head's keys on tokens ``x`` ``(n, T)``: ``P[b, t, j] = 1`` for
    ``1 <= j <= t`` with ``x[b, j-1] = x[b, t]``, shape ``(n, T, T)`` (rows with no earlier
    occurrence of ``x_t`` empty)."""
    x = np.asarray(x)
    n, T = x.shape
    P = np.zeros((n, T, T))
    P[:, :, 1:] = x[:, None, :-1] == x[:, :, None]  # [b, t, j]: x_{j-1} = x_t
    return P * np.tril(np.ones((T, T)))[None]


def _batched(pattern: np.ndarray, n: int) -> np.ndarray:
    P = np.asarray(pattern, dtype=np.float64)
    return np.broadcast_to(P, (n,) + P.shape[-2:]) if P.ndim == 2 else P


# ---------------------------------------------------------------------------- readouts --
def attention_maps(model, tokens: Tensor) -> dict[int, np.ndarray]:
    """``{l: pattern (n, T, T)}`` of every layer's first head on ``tokens`` ``(n, T)`` (hook
    points ``layer{l}.pattern``), float64."""
    names = [f"layer{l}.pattern" for l in range(1, model.config.layers + 1)]
    with torch.no_grad():
        _, cache = run_with_cache(model, tokens, names=names)
    return {l: cache[n][:, 0].double().cpu().numpy() for l, n in enumerate(names, start=1)}


def detection_scores(attn: np.ndarray, pattern: np.ndarray) -> dict[str, np.ndarray]:
    """Per sequence: ``mass`` (mean over the pattern's rows of the attention on it), ``uniform``
    (the same for the uniform causal head) and ``score`` ``(mass - uniform) / (1 - uniform)``
    (the module docstring). ``attn`` ``(n, T, T)``; ``pattern`` ``(T, T)`` or ``(n, T, T)``
    0/1. Sequences whose pattern has no entries get ``nan``."""
    A = np.asarray(attn, dtype=np.float64)
    n, T, _ = A.shape
    P = _batched(pattern, n)
    rows = P.sum(axis=2) > 0  # (n, T)
    cnt = rows.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mass = np.where(rows, (A * P).sum(axis=2), 0.0).sum(axis=1) / cnt
        uni = np.where(rows, P.sum(axis=2) / np.arange(1, T + 1)[None], 0.0).sum(axis=1) / cnt
        score = (mass - uni) / (1.0 - uni)
    return {"mass": mass, "uniform": uni, "score": score}


def uniformity(attn: np.ndarray, competitors: Sequence[np.ndarray]) -> dict[str, np.ndarray]:
    """Per sequence: ``tv``, the mean over rows ``t >= 1`` of the total-variation distance from the
    attention row to the uniform causal row, and ``radius``, half the smallest mean distance
    from the uniform row to a competing pattern (``1 - u_t`` over that pattern's rows: the
    distance to the nearest row supported on it). ``tv < radius`` places the head at uniform
    pooling, nearer it than any competitor (the module docstring)."""
    A = np.asarray(attn, dtype=np.float64)
    n, T, _ = A.shape
    tv = 0.5 * np.abs(A - uniform_pattern(T)[None]).sum(axis=2)[:, 1:].mean(axis=1)
    dists = []
    for pat in competitors:
        P = _batched(pat, n)
        rows = P.sum(axis=2) > 0
        d = np.where(rows, 1.0 - P.sum(axis=2) / np.arange(1, T + 1)[None], 0.0).sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            dists.append(np.where(rows.any(axis=1), d / rows.sum(axis=1), np.inf))
    return {"tv": tv, "radius": 0.5 * np.min(np.stack(dists), axis=0)}


# ------------------------------------------------------------------------ interventions --
def ablate_head(layer: int, mode: str = "uniform") -> dict[str, Callable]:
    """Forward hooks that remove layer ``layer``'s attention (all heads): its pattern replaced by
    the uniform causal pattern (``"uniform"``) or by zeros (``"zero"``). For
    :func:`sim.models.hooks.run_with_hooks` or :func:`sequence_losses`."""
    if mode not in ABLATIONS:
        raise ValueError(f"ablation mode must be one of {ABLATIONS}, got {mode!r}")

    def hook(a: Tensor, _hp) -> Tensor:  # (B, nh, T, T)
        if mode == "zero":
            return torch.zeros_like(a)
        T = a.shape[-1]
        return torch.as_tensor(uniform_pattern(T), dtype=a.dtype, device=a.device).expand_as(a)

    return {f"layer{layer}.pattern": hook}


def sequence_losses(model, tokens: Tensor, targets: Tensor, hooks: dict[str, Callable] | None = None) -> np.ndarray:
    """Mean next-token cross-entropy per sequence ``(n,)`` (nats), with ``hooks`` installed."""
    with torch.no_grad():
        logits = run_with_hooks(model, tokens, fwd_hooks=hooks or {})  # (n, T, C)
        logq = torch.log_softmax(logits.double(), dim=-1)
        nll = -logq.gather(-1, targets[..., None])[..., 0]  # (n, T)
    return nll.mean(dim=1).cpu().numpy()


def hooked_tensor(model, tokens: Tensor, point: str) -> Tensor:
    """The tensor at hook point ``point`` on a forward pass over ``tokens``."""
    with torch.no_grad():
        _, cache = run_with_cache(model, tokens, names=[point])
    return cache[point]


def patched_logits(model, tokens: Tensor, *, point: str = "layer2.attn_out", donor: Tensor | None = None,
                   value: Tensor | None = None) -> Tensor:
    """Logits ``(n, T, C)`` on ``tokens`` with the tensor at ``point`` replaced at every position by
    its value on ``donor`` tokens (the same shape; sequence ``b`` takes donor ``b``'s), or by
    ``value`` itself. ``donor = tokens`` changes nothing."""
    if (donor is None) == (value is None):
        raise ValueError("give either donor tokens or the value to patch in")
    patch = hooked_tensor(model, donor, point) if value is None else value
    with torch.no_grad():
        return run_with_hooks(model, tokens, fwd_hooks={point: lambda t, _hp: patch.to(t.dtype)})


def random_phi(phi: Tensor, rng: np.random.Generator) -> Tensor:
    """A task vector that names no chain: at each position, independent normals with the mean
    and standard deviation of ``phi`` ``(n, T, width)`` over the sequences, per coordinate."""
    mean, sd = phi.mean(dim=0, keepdim=True), phi.std(dim=0, keepdim=True)  # (1, T, w)
    z = torch.as_tensor(rng.standard_normal(tuple(phi.shape)), dtype=phi.dtype, device=phi.device)
    return mean + sd * z  # (n, T, w)


# ------------------------------------------------------------------------- pairs probe --
def pair_labels(x: np.ndarray, C: int) -> np.ndarray:
    """The adjacent pair at each position ``t >= 1`` as one class, ``x_{t-1} C + x_t``, shape ``(n, T - 1)``."""
    x = np.asarray(x)
    return x[:, :-1] * C + x[:, 1:]


def pair_probe(features: np.ndarray, labels: np.ndarray, n_classes: int) -> dict[str, float]:
    """Held-out accuracy of a linear probe: least squares from ``features`` ``(n, T', d)`` (plus a
    constant) onto the one-hot ``labels`` ``(n, T')``, fitted on the first half of the sequences
    and scored on the second (prediction: the largest output). Returns ``accuracy``, its
    standard error over the held-out sequences (each sequence's accuracy one sample: positions
    in a sequence are not independent), ``n_test`` and ``chance`` (the most frequent training
    label's share of the test labels)."""
    F_ = np.asarray(features, dtype=np.float64)
    y = np.asarray(labels)
    n = F_.shape[0]
    if n < 4:
        raise ValueError(f"the pairs probe needs at least 4 sequences, got {n}")
    half = n // 2
    X = np.concatenate([F_, np.ones(F_.shape[:2] + (1,))], axis=2)  # (n, T', d + 1)
    Xtr, ytr = X[:half].reshape(-1, X.shape[2]), y[:half].reshape(-1)
    W, *_ = np.linalg.lstsq(Xtr, np.eye(n_classes)[ytr], rcond=None)  # (d + 1, classes)
    pred = (X[half:] @ W).argmax(axis=2)  # (n - half, T')
    per_seq = (pred == y[half:]).mean(axis=1)
    top = np.bincount(ytr, minlength=n_classes).argmax()
    return {"accuracy": float(per_seq.mean()), "se": float(per_seq.std(ddof=1) / np.sqrt(len(per_seq))),
            "n_test": int(n - half), "chance": float((y[half:] == top).mean())}
