"""Priors over transition matrices.

A prior draws row-stochastic ``(d, d)`` matrices ``pi[s, t] = P(t | s)``. Every prior
knows its one-line spec (``dirichlet(alpha=0.1)``), the dimension it is bound to (``d``;
a prior such as a Dirichlet is unbound until a claim or the user fixes ``d``), whatever
guaranteed entrywise floor it has in closed form, and a hypothesis strategy for the
property tier (by default: seeds mapped through :meth:`Prior.sample`, so shrinking acts
on the seed; priors with more structure override it).
"""
from __future__ import annotations

import abc
import itertools
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from theory import TheoryError, validate_stochastic

__all__ = ["Prior", "PriorError", "Dirichlet", "Floor", "Point", "Mixture", "Symmetrize", "Sparse"]


class PriorError(ValueError):
    """A prior was specified wrongly or produced something that is not a transition matrix."""


class Prior(abc.ABC):
    """Base class: subclasses implement :meth:`_sample`, :meth:`spec` and :meth:`bind`."""

    d: int | None = None

    @abc.abstractmethod
    def _sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` draws, shape ``(n, d, d)``; ``self.d`` is set."""

    @abc.abstractmethod
    def spec(self) -> str:
        """The one-line spec this prior parses back from."""

    @abc.abstractmethod
    def bind(self, d: int) -> "Prior":
        """The same prior on ``d`` states (PriorError if it has a different fixed size)."""

    def entry_floor(self) -> float | None:
        """A guaranteed lower bound on every entry of every draw, if known in closed form."""
        return None

    def sample(self, rng: np.random.Generator, n: int = 1) -> np.ndarray:
        """``n`` transition matrices, shape ``(n, d, d)``, each validated.

        Raises PriorError naming the draw and row if the sampler returned something that
        is not row-stochastic (a user sampler, or numerical trouble).
        """
        if self.d is None:
            raise PriorError(f"prior {self.spec()} has no dimension yet: bind it to d states first")
        out = np.asarray(self._sample(rng, n), dtype=np.float64)
        if out.shape != (n, self.d, self.d):
            raise PriorError(f"prior {self.spec()} returned shape {out.shape}, expected {(n, self.d, self.d)}")
        for k in range(n):
            try:
                validate_stochastic(out[k], name=f"draw {k} of {self.spec()}")
            except TheoryError as exc:
                raise PriorError(str(exc)) from None
        return out

    def strategy(self):
        """A hypothesis strategy over draws of this prior (shrinks on the seed)."""
        from hypothesis import strategies as st

        return st.integers(0, 2**32 - 1).map(lambda s: self.sample(np.random.default_rng(s), 1)[0])

    def __repr__(self) -> str:
        return self.spec() + ("" if self.d is None else f" [d={self.d}]")


def _check_d(d) -> int:
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 1:
        raise PriorError(f"d must be a positive integer number of states, got {d!r}")
    return int(d)


@dataclass(frozen=True, repr=False)
class Dirichlet(Prior):
    """Rows i.i.d. ``Dirichlet(alpha * 1_d)`` (N's prior: alpha = 0.1 at d = S = 10)."""

    alpha: float
    d: int | None = None

    def __post_init__(self):
        if not (isinstance(self.alpha, (int, float)) and np.isfinite(self.alpha) and self.alpha > 0):
            raise PriorError(f"dirichlet: alpha must be a positive number, got {self.alpha!r}")
        if self.d is not None:
            _check_d(self.d)

    def _sample(self, rng, n):
        rows = rng.dirichlet(np.full(self.d, float(self.alpha)), size=(n, self.d))
        # Tiny alpha can underflow a whole row to zeros; numpy then returns NaN or 0-rows.
        bad = ~np.isfinite(rows).all(axis=-1) | (rows.sum(axis=-1) <= 0)
        if bad.any():
            idx = rng.integers(0, self.d, size=int(bad.sum()))
            rows[bad] = np.eye(self.d)[idx]  # the a.s. limit of an underflowed Dirichlet row
        return rows / rows.sum(axis=-1, keepdims=True)

    def spec(self):
        return f"dirichlet(alpha={self.alpha:g})"

    def bind(self, d):
        return Dirichlet(self.alpha, _check_d(d))


@dataclass(frozen=True, repr=False)
class Floor(Prior):
    """``gamma / d + (1 - gamma) * base``: every entry at least ``gamma / d`` (W Lemma 3, N's gamma)."""

    base: Prior
    gamma: float

    def __post_init__(self):
        if not (isinstance(self.gamma, (int, float)) and 0 <= self.gamma <= 1):
            raise PriorError(f"floor: gamma must be in [0, 1], got {self.gamma!r}")

    @property
    def d(self):
        return self.base.d

    def _sample(self, rng, n):
        return self.gamma / self.d + (1 - self.gamma) * self.base.sample(rng, n)

    def spec(self):
        return f"floor({self.base.spec()}, gamma={self.gamma:g})"

    def bind(self, d):
        return Floor(self.base.bind(d), self.gamma)

    def entry_floor(self):
        inner = self.base.entry_floor() or 0.0
        return self.gamma / self.d + (1 - self.gamma) * inner


class Point(Prior):
    """A point mass at one transition matrix."""

    def __init__(self, matrix):
        try:
            self.matrix = validate_stochastic(matrix, name="point(...) matrix")
        except TheoryError as exc:
            raise PriorError(str(exc)) from None
        self.d = self.matrix.shape[0]

    def _sample(self, rng, n):
        return np.broadcast_to(self.matrix, (n, self.d, self.d)).copy()

    def spec(self):
        return f"point({np.array2string(self.matrix, separator=', ', max_line_width=10**6, precision=17)})".replace("\n", "")

    def bind(self, d):
        if _check_d(d) != self.d:
            raise PriorError(f"point prior is fixed at d = {self.d}, cannot use it with d = {d}")
        return self

    def entry_floor(self):
        return float(self.matrix.min())

    def __eq__(self, other):
        return isinstance(other, Point) and np.array_equal(self.matrix, other.matrix)

    def __hash__(self):
        return hash(self.matrix.tobytes())


class Mixture(Prior):
    """A finite mixture ``sum_k w_k P_k`` of priors on the same ``d``."""

    def __init__(self, components: Sequence[tuple[float, Prior]]):
        if not components:
            raise PriorError("mixture needs at least one (weight, prior) component")
        w = np.array([float(c[0]) for c in components])
        if np.any(~np.isfinite(w)) or np.any(w < 0) or w.sum() <= 0:
            raise PriorError(f"mixture weights must be non-negative with a positive sum, got {w.tolist()}")
        self.weights = w / w.sum()
        self.components = [c[1] for c in components]
        ds = {p.d for p in self.components if p.d is not None}
        if len(ds) > 1:
            raise PriorError(f"mixture components have different sizes d = {sorted(ds)}")
        self.d = ds.pop() if ds else None
        if self.d is not None:
            self.components = [p.bind(self.d) for p in self.components]

    def _sample(self, rng, n):
        which = rng.choice(len(self.components), size=n, p=self.weights)
        out = np.empty((n, self.d, self.d))
        for k, prior in enumerate(self.components):
            idx = np.flatnonzero(which == k)
            if idx.size:
                out[idx] = prior.sample(rng, idx.size)
        return out

    def spec(self):
        inner = ", ".join(f"{w:g}: {p.spec()}" for w, p in zip(self.weights, self.components))
        return f"mixture({inner})"

    def bind(self, d):
        return Mixture([(w, p.bind(d)) for w, p in zip(self.weights, self.components)])

    def entry_floor(self):
        floors = [p.entry_floor() for p in self.components]
        return None if any(f is None for f in floors) else min(floors)


@dataclass(frozen=True, repr=False)
class Symmetrize(Prior):
    """Permutation-symmetrisation: draw ``pi ~ base`` and a uniform permutation ``sigma``,
    return ``sigma^{-1} pi sigma`` (``pi[sigma][:, sigma]``). Satisfies N's assumption 3
    (permutation symmetry, hence uniform mean ``E[pi] = 11^T / d``)."""

    base: Prior

    @property
    def d(self):
        return self.base.d

    def _sample(self, rng, n):
        pis = self.base.sample(rng, n)
        out = np.empty_like(pis)
        for k in range(n):
            perm = rng.permutation(self.d)
            out[k] = pis[k][np.ix_(perm, perm)]
        return out

    def spec(self):
        return f"symmetrize({self.base.spec()})"

    def bind(self, d):
        return Symmetrize(self.base.bind(d))

    def entry_floor(self):
        return self.base.entry_floor()

    def orbit(self, pi: np.ndarray) -> np.ndarray:
        """All ``d!`` relabellings of ``pi`` (for exact expectations at small d)."""
        if self.d > 7:
            raise PriorError(f"orbit of a {self.d}-state matrix has {self.d}! members; too many")
        return np.stack([pi[np.ix_(p, p)] for p in itertools.permutations(range(self.d))])


@dataclass(frozen=True, repr=False)
class Sparse(Prior):
    """Entries of a base draw below ``threshold`` set to 0, rows renormalised: exact zeros
    (reducible or periodic chains are possible). ``threshold < 1/d`` keeps every row non-empty."""

    base: Prior
    threshold: float

    def __post_init__(self):
        if not (isinstance(self.threshold, (int, float)) and 0 <= self.threshold < 1):
            raise PriorError(f"sparse: threshold must be in [0, 1), got {self.threshold!r}")

    @property
    def d(self):
        return self.base.d

    def _sample(self, rng, n):
        if self.threshold >= 1.0 / self.d:
            raise PriorError(f"sparse: threshold {self.threshold} >= 1/d = {1 / self.d:.4g} could empty a row")
        pis = self.base.sample(rng, n)
        pis[pis < self.threshold] = 0.0
        return pis / pis.sum(axis=-1, keepdims=True)

    def spec(self):
        return f"sparse({self.base.spec()}, threshold={self.threshold:g})"

    def bind(self, d):
        return Sparse(self.base.bind(d), self.threshold)
