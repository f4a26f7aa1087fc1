"""Mechanism probes for N's models (Nichani et al.; claims N.K1, N.K4, N.E, N.K9).

A mechanism is a detection pattern (DESIGN principle 5): a DAG gives the 0/1 matrix
``P[i, p(i)] = 1`` over (query position, key position), and a probe scores the attention
mass a layer puts on it. Positions are 0-based; the query ``T-1`` is a root (its parent
entry is ignored, as everywhere in :mod:`sim.papers.nichani.model`).

Two readings of "the first layer's attention", both reported by the claims:

- ``"prompts"``: the attention pattern the model actually computes (hook point
  ``layer1.head{h}.pattern``), averaged over a batch of prompts. In the disentangled
  transformer it depends on the tokens through the token blocks of ``A^(1)``.
- ``"positions"``: N's own readout, ``softmax(MASK(A^(1)_pos,pos))``: the position-position
  block of the first layer's matrix alone (what N's reference code plots and averages,
  ``many_graphs.ipynb``). For the reduced model both readings coincide (``S(A1)``).

Multi-parent tasks (Knowl 9): ``parent_sets`` of length ``T+1``, node ``T`` the target;
head ``l`` should copy parent ``l`` of each non-root prompt position, and the query
position ``T-1`` should copy the *target's* parents.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import torch
from torch import Tensor

from sim.models.hooks import run_with_cache
from sim.papers.nichani.model import DisentangledTransformer, ReducedModel

__all__ = [
    "adjacency_pattern",
    "multiparent_patterns",
    "pattern_mass",
    "detection_score",
    "position_attention",
    "mean_attention",
    "ParentAttention",
    "parent_attention",
    "root_uniformity",
    "parent_probe",
    "head_attention",
    "HeadSplit",
    "head_parent_masses",
    "head_split",
]

READINGS = ("prompts", "positions")


# ---------------------------------------------------------------------------- patterns --
def _parents(parents) -> np.ndarray:
    par = np.asarray(parents, dtype=np.int64).copy()
    if par.ndim != 1 or par.size < 2:
        raise ValueError(f"parents must be a parent array of length T >= 2, got shape {par.shape}")
    if np.any(par >= np.arange(par.size)) or np.any(par < -1):
        raise ValueError(f"parents must satisfy -1 <= p(i) < i, got {par.tolist()}")
    par[-1] = -1  # the query is a root
    return par


def adjacency_pattern(parents) -> np.ndarray:
    """Detection pattern of a single-parent DAG: ``P[i, p(i)] = 1`` for non-root ``i``, shape ``(T, T)``.

    Root rows (and the query's row ``T-1``) are all zero: the pattern says nothing there.
    """
    par = _parents(parents)
    T = par.size
    P = np.zeros((T, T))
    nonroot = np.flatnonzero(par >= 0)
    P[nonroot, par[nonroot]] = 1.0
    return P


def multiparent_patterns(parent_sets: Sequence[Sequence[int]]) -> np.ndarray:
    """Knowl 9's per-head patterns ``(k, T, T)``: ``P_l[i, p(i)_l] = 1`` for non-root prompt
    positions ``i < T-1``, and ``P_l[T-1, p(T)_l] = 1`` (the query copies the target's parents)."""
    sets = [tuple(int(p) for p in ps) for ps in parent_sets]
    T = len(sets) - 1
    k = len(sets[-1])
    if T < 2 or k == 0:
        raise ValueError("parent_sets needs T >= 2 prompt nodes and a target node with parents")
    P = np.zeros((k, T, T))
    for i in range(T - 1):
        if sets[i]:
            if len(sets[i]) != k:
                raise ValueError(f"node {i} has {len(sets[i])} parents, the target has k = {k}")
            for l, p in enumerate(sets[i]):
                P[l, i, p] = 1.0
    for l, p in enumerate(sets[T]):
        P[l, T - 1, p] = 1.0
    return P


def pattern_mass(attn, pattern) -> tuple[np.ndarray, np.ndarray]:
    """Attention mass on the pattern, row by row: ``(rows, mass)`` with ``rows`` the rows of
    ``pattern`` that have an entry and ``mass[..., r] = sum_j attn[..., rows[r], j] P[rows[r], j]``.

    ``attn``: ``(..., T, T)`` row-stochastic; ``pattern``: ``(T, T)`` 0/1.
    """
    A = np.asarray(attn, dtype=np.float64)
    P = np.asarray(pattern, dtype=np.float64)
    if A.shape[-2:] != P.shape:
        raise ValueError(f"attention {A.shape} and pattern {P.shape} disagree on (T, T)")
    rows = np.flatnonzero(P.sum(axis=1) > 0)
    return rows, (A[..., rows, :] * P[rows]).sum(axis=-1)


def detection_score(attn, pattern) -> float:
    """Mean over the pattern's rows of the attention mass on it (1 = a perfect detector).

    For a batch ``(B, T, T)`` the mass is averaged over prompts too.
    """
    rows, mass = pattern_mass(attn, pattern)
    if rows.size == 0:
        raise ValueError("the pattern has no entries (a graph with no edges)")
    return float(mass.mean())


# ------------------------------------------------------------------------- attention --
def _causal_softmax(M: Tensor) -> Tensor:
    T = M.shape[-1]
    mask = torch.ones(T, T, dtype=torch.bool, device=M.device).tril()
    return torch.softmax(M.masked_fill(~mask, float("-inf")), dim=-1)


def position_attention(model, *, head: int = 0) -> np.ndarray:
    """N's readout of the first layer, ``softmax(MASK(A_pos,pos))``, shape ``(T, T)``.

    Disentangled transformer: the position-position block ``A^(1)_head[S:, S:]``; reduced
    model: ``S(A1)`` (its whole first layer, token independent).
    """
    with torch.no_grad():
        if isinstance(model, ReducedModel):
            return _causal_softmax(model.A1.detach()).double().cpu().numpy()
        if isinstance(model, DisentangledTransformer):
            S, T = model.S, model.T
            return _causal_softmax(model.A[0][head, S:S + T, S:S + T].detach()).double().cpu().numpy()
    raise TypeError(f"no first-layer readout for {type(model).__name__}")


def mean_attention(model, tokens: Tensor, *, layer: int = 1, head: int = 0) -> np.ndarray:
    """The attention pattern the model computes on ``tokens`` ``(B, T)``, averaged over the
    batch, shape ``(T, T)`` (hook ``layer{layer}.head{head}.pattern``; the reduced model's
    token-independent ``layer1.pattern``)."""
    name = "layer1.pattern" if isinstance(model, ReducedModel) else f"layer{layer}.head{head}.pattern"
    if isinstance(model, ReducedModel) and layer != 1:
        raise ValueError("the reduced model's only position pattern is layer 1")
    with torch.no_grad():
        _, cache = run_with_cache(model, tokens, names=[name])
    A = cache[name]
    return (A if A.ndim == 2 else A.mean(0)).double().cpu().numpy()


def head_attention(model: DisentangledTransformer, tokens: Tensor | None = None, *, reading: str = "prompts",
                   layer: int = 1) -> np.ndarray:
    """Every head of a layer, ``(m, T, T)``: batch-mean patterns (``reading="prompts"``) or N's
    position readout (``"positions"``, layer 1 only)."""
    if reading not in READINGS:
        raise ValueError(f"reading must be one of {READINGS}, got {reading!r}")
    m = model.heads[layer - 1]
    if reading == "positions":
        if layer != 1:
            raise ValueError("the position readout is defined for layer 1")
        return np.stack([position_attention(model, head=h) for h in range(m)])
    if tokens is None:
        raise ValueError("reading='prompts' needs a batch of tokens")
    names = [f"layer{layer}.head{h}.pattern" for h in range(m)]
    with torch.no_grad():
        _, cache = run_with_cache(model, tokens, names=names)
    return np.stack([cache[n].mean(0).double().cpu().numpy() for n in names])


@dataclass(frozen=True)
class ParentAttention:
    """The first layer's attention read against a DAG.

    ``positions`` the non-root positions ``i``, ``parents`` their ``p(i)``, ``mass`` the
    attention ``A[i, p(i)]``, ``argmax`` the key each row attends to most; ``reading``
    which attention was read (see the module docstring).
    """

    positions: np.ndarray
    parents: np.ndarray
    mass: np.ndarray
    argmax: np.ndarray
    reading: str

    @property
    def min(self) -> float:
        return float(self.mass.min())

    @property
    def mean(self) -> float:
        return float(self.mass.mean())

    @property
    def worst_position(self) -> int:
        return int(self.positions[np.argmin(self.mass)])

    @property
    def argmax_on_parent(self) -> np.ndarray:
        return self.argmax == self.parents

    @property
    def all_argmax_on_parent(self) -> bool:
        return bool(self.argmax_on_parent.all())

    def record(self) -> dict:
        """The readout as records print it (masses rounded to 6 digits)."""
        return {"reading": self.reading, "positions": self.positions.tolist(), "parents": self.parents.tolist(),
                "attention on parent": np.round(self.mass, 6).tolist(), "argmax key": self.argmax.tolist(),
                "min": self.min, "mean": self.mean, "worst position": self.worst_position}


def parent_attention(attn, parents, *, reading: str = "prompts") -> ParentAttention:
    """Read a ``(T, T)`` attention map against ``parents`` (non-root rows only)."""
    par = _parents(parents)
    A = np.asarray(attn, dtype=np.float64)
    if A.shape != (par.size, par.size):
        raise ValueError(f"attention must be (T, T) = ({par.size}, {par.size}), got {A.shape}")
    rows = np.flatnonzero(par >= 0)
    if rows.size == 0:
        raise ValueError("the DAG has no edges: nothing to read")
    return ParentAttention(rows, par[rows], A[rows, par[rows]], A[rows].argmax(axis=1), reading)


def root_uniformity(attn, parents) -> float:
    """Largest total-variation distance from uniform (over ``j <= i``) among the root rows
    ``i < T-1`` (N Knowl 3: roots keep ``S(A1)_{i,j} ~ 1/i``); ``0.0`` when no such row."""
    par = _parents(parents)
    A = np.asarray(attn, dtype=np.float64)
    worst = 0.0
    for i in np.flatnonzero(par[:-1] < 0):
        u = np.full(i + 1, 1.0 / (i + 1))
        worst = max(worst, 0.5 * float(np.abs(A[i, : i + 1] - u).sum()))
    return worst


def parent_probe(parents, *, reading: str = "prompts", tokens: Tensor | None = None, stat: str = "min",
                 head: int = 0) -> Callable[[torch.nn.Module], float]:
    """A probe for :func:`sim.train.train`: ``model -> min`` (or ``mean``) over non-root
    positions of the first layer's attention on the parent, in the given reading."""
    if reading not in READINGS:
        raise ValueError(f"reading must be one of {READINGS}, got {reading!r}")
    if stat not in ("min", "mean"):
        raise ValueError(f"stat must be 'min' or 'mean', got {stat!r}")
    if reading == "prompts" and tokens is None:
        raise ValueError("reading='prompts' needs a probe batch of tokens")
    par = _parents(parents)

    def probe(model) -> float:
        attn = (position_attention(model, head=head) if reading == "positions"
                else mean_attention(model, tokens, head=head))
        pa = parent_attention(attn, par, reading=reading)
        return pa.min if stat == "min" else pa.mean

    return probe


# ------------------------------------------------------------------- multi-parent heads --
def head_parent_masses(heads_attn, parent_sets) -> np.ndarray:
    """``M[h, l]`` = head ``h``'s attention mass on parent ``l`` averaged over the pattern rows
    (non-root prompt positions and the query, see :func:`multiparent_patterns`), ``(m, k)``."""
    A = np.asarray(heads_attn, dtype=np.float64)
    P = multiparent_patterns(parent_sets)  # (k, T, T)
    if A.ndim != 3 or A.shape[1:] != P.shape[1:]:
        raise ValueError(f"heads_attn must be (m, T, T) with T = {P.shape[1]}, got {A.shape}")
    return np.array([[pattern_mass(A[h], P[l])[1].mean() for l in range(P.shape[0])] for h in range(A.shape[0])])


@dataclass(frozen=True)
class HeadSplit:
    """Which parent each head takes: ``assignment[h] = argmax_l M[h, l]``; ``split`` when the
    heads take distinct parents and each puts at least ``threshold`` on its own."""

    masses: np.ndarray  # (m, k)
    assignment: np.ndarray  # (m,)
    own_mass: np.ndarray  # (m,): M[h, assignment[h]]
    threshold: float

    @property
    def distinct(self) -> bool:
        return len(set(self.assignment.tolist())) == self.assignment.size

    @property
    def split(self) -> bool:
        return self.distinct and bool((self.own_mass >= self.threshold).all())

    @property
    def committed_together(self) -> bool:
        """Two heads hold at least ``threshold`` on the same parent: they settled on not splitting."""
        a = self.assignment[self.own_mass >= self.threshold]
        return len(set(a.tolist())) < a.size

    def record(self) -> dict:
        """The split as records print it (masses rounded to 6 digits)."""
        return {"mass of head h on parent l": np.round(self.masses, 6).tolist(),
                "parent taken by each head": self.assignment.tolist(),
                "own mass": np.round(self.own_mass, 6).tolist(), "threshold": self.threshold,
                "distinct": self.distinct, "split": self.split, "committed together": self.committed_together}


def head_split(masses, threshold: float = 0.5) -> HeadSplit:
    """Assign each head its parent (N Knowl 9: head ``l`` copies parent ``l`` up to relabelling)."""
    M = np.asarray(masses, dtype=np.float64)
    if M.ndim != 2:
        raise ValueError(f"masses must be (m, k), got {M.shape}")
    a = M.argmax(axis=1)
    return HeadSplit(M, a, M[np.arange(M.shape[0]), a], float(threshold))
