"""Leaf priors and mixtures: Dirichlet rows, a point mass, Birkhoff mixtures, mixtures of priors,
and finite priors given by their atoms."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from sim.priors.base import MAX_ATOMS, MAX_PERMUTATIONS, Prior, PriorError, _check_d, _matrix_text, _num
from theory import TheoryError, validate_stochastic


#: The most random sort keys a Birkhoff draw holds at once (8 bytes each: 128 MiB).
_CHUNK_ENTRIES = 2**24


class _SymmetricNoFloor:
    """Closed forms shared by laws that are permutation-symmetric with ``E[pi] = 11^T / d``
    and whose entries come arbitrarily close to (or reach) 0 for ``d >= 2``: Dirichlet rows
    (the density is positive near every face) and Birkhoff mixtures (an entry is 0 when no
    chosen permutation maps ``s -> t``)."""

    d: int | None

    def entry_floor(self):
        return None if self.d is None else (0.0 if self.d > 1 else 1.0)

    def entry_infima(self):
        return None if self.d is None else np.full((self.d, self.d), 0.0 if self.d > 1 else 1.0)

    def mean_matrix(self):
        return None if self.d is None else np.full((self.d, self.d), 1.0 / self.d)

    def symmetric(self):
        return True


@dataclass(frozen=True, repr=False)
class Dirichlet(_SymmetricNoFloor, Prior):
    """Rows i.i.d. ``Dirichlet(alpha * 1_d)`` (N's prior: alpha = 0.1 at d = S = 10)."""

    alpha: float
    d: int | None = None

    def __post_init__(self):
        if isinstance(self.alpha, bool) or not (isinstance(self.alpha, (int, float)) and np.isfinite(self.alpha)
                                                and self.alpha > 0):
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
        return f"dirichlet(alpha={_num(self.alpha)}" + ("" if self.d is None else f", d={self.d}") + ")"

    def bind(self, d):
        return Dirichlet(self.alpha, _check_d(d))



class Point(Prior):
    """A point mass at one transition matrix."""

    def __init__(self, matrix):
        try:
            with np.errstate(over="ignore", invalid="ignore"):  # entries near the float maximum overflow a row sum
                self.matrix = validate_stochastic(matrix, name="point(...) matrix")
        except TheoryError as exc:
            raise PriorError(str(exc)) from None
        _check_d(self.matrix.shape[0])
        self.d = self.matrix.shape[0]

    def _sample(self, rng, n):
        return np.broadcast_to(self.matrix, (n, self.d, self.d)).copy()

    def spec(self):
        return f"point({_matrix_text(self.matrix)})"

    def bind(self, d):
        if _check_d(d) != self.d:
            raise PriorError(f"point prior is fixed at d = {self.d}, cannot use it with d = {d}")
        return self

    def atoms(self):
        return np.ones(1), self.matrix[None].copy()

    def strategy(self):
        from hypothesis import strategies as st

        return st.just(self.matrix.copy())

    def __eq__(self, other):
        return isinstance(other, Point) and np.array_equal(self.matrix, other.matrix)

    def __hash__(self):
        return hash(self.matrix.tobytes())


@dataclass(frozen=True, repr=False)
class DoublyStochastic(_SymmetricNoFloor, Prior):
    """Birkhoff mixtures: ``pi = sum_{j<k} w_j P_{sigma_j}`` with ``k`` i.i.d. uniformly random
    permutation matrices ``P_sigma`` and weights ``w ~ Dirichlet(alpha 1_k)``.

    Every draw is doubly stochastic (rows and columns sum to 1, so the uniform law is
    stationary), the law is permutation-symmetric (a conjugated uniform permutation is
    uniform) and ``E[pi] = 11^T / d``. Entries are 0 wherever no chosen permutation
    maps ``s -> t``, so there is no entrywise lower bound (exact zeros for ``k < d``).
    """

    k: int = 3
    alpha: float = 1.0
    d: int | None = None

    def __post_init__(self):
        if isinstance(self.k, bool) or not isinstance(self.k, (int, np.integer)) or self.k < 1:
            raise PriorError(f"doubly_stochastic: k (number of permutations) must be a positive integer, got {self.k!r}")
        if self.k > MAX_PERMUTATIONS:
            raise PriorError(f"doubly_stochastic: k = {self.k} permutations is more than {MAX_PERMUTATIONS}; a sum of "
                             "that many is indistinguishable from the uniform matrix at any d this tool handles")
        if isinstance(self.alpha, bool) or not (isinstance(self.alpha, (int, float)) and np.isfinite(self.alpha)
                                                and self.alpha > 0):
            raise PriorError(f"doubly_stochastic: alpha must be a positive number, got {self.alpha!r}")
        if self.d is not None:
            _check_d(self.d)

    def _sample(self, rng, n):
        d, k = self.d, int(self.k)
        chunk = max(1, _CHUNK_ENTRIES // (k * d))  # draws at a time: k = 10^4 at d = 256 is 2.6e6 keys a draw
        return np.concatenate([self._draws(rng, m, d, k) for m in [chunk] * (n // chunk) + [n % chunk] if m])

    def _draws(self, rng, n, d, k):
        perms = np.argsort(rng.random((n, k, d)), axis=-1)  # (n, k, d): k uniform permutations per draw
        w = rng.dirichlet(np.full(k, float(self.alpha)), size=n) if k > 1 else np.ones((n, 1))  # (n, k)
        out = np.zeros((n, d, d))
        rows = np.arange(d)
        for j in range(k):
            out[np.arange(n)[:, None], rows[None, :], perms[:, j, :]] += w[:, j, None]
        return out / out.sum(axis=-1, keepdims=True)

    def spec(self):
        return (f"doubly_stochastic(k={int(self.k)}, alpha={_num(self.alpha)}"
                + ("" if self.d is None else f", d={self.d}") + ")")

    def bind(self, d):
        return DoublyStochastic(self.k, self.alpha, _check_d(d))



class Mixture(Prior):
    """A finite mixture ``sum_k w_k P_k`` of priors on the same ``d``."""

    def __init__(self, components: Sequence[tuple[float, Prior]]):
        if not components:
            raise PriorError("mixture needs at least one (weight, prior) component")
        try:
            w = np.array([float(c[0]) for c in components])
        except (TypeError, ValueError):
            raise PriorError("mixture weights must be numbers") from None
        if np.any(~np.isfinite(w)) or np.any(w < 0) or w.max() <= 0:
            raise PriorError(f"mixture weights must be finite and non-negative with a positive sum, got {w.tolist()}")
        for c in components:
            if not isinstance(c[1], Prior):
                raise PriorError(f"mixture components must be priors, got {type(c[1]).__name__}")
        self.raw_weights = w
        scaled = w / w.max()  # weights near the float maximum would overflow their sum
        self.weights = scaled / scaled.sum()
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
        inner = ", ".join(p.spec() for p in self.components)
        return f"mixture({inner}, weights=[{', '.join(_num(w) for w in self.raw_weights)}])"

    def bind(self, d):
        return Mixture([(w, p.bind(d)) for w, p in zip(self.raw_weights, self.components)])

    def _live(self):
        return [(w, p) for w, p in zip(self.weights, self.components) if w > 0]

    def entry_floor(self):
        floors = [p.entry_floor() for _, p in self._live()]
        return None if any(f is None for f in floors) else min(floors)

    def entry_infima(self):
        parts = [p.entry_infima() for _, p in self._live()]
        full = [np.full((self.d, self.d), np.nan) if e is None else e for e in parts]
        if all(e is None for e in parts):
            return None
        zero = np.any([e == 0 for e in full], axis=0)
        return np.where(zero, 0.0, np.minimum.reduce(full))

    def mean_matrix(self):
        ms = [(w, p.mean_matrix()) for w, p in self._live()]
        return None if any(m is None for _, m in ms) else sum(w * m for w, m in ms)

    def symmetric(self):
        if self.atoms() is not None:
            return super().symmetric()
        syms = [p.symmetric() for _, p in self._live()]
        return True if all(s is True for s in syms) else None

    def atoms(self):
        parts = [(w, p.atoms()) for w, p in self._live()]
        if any(a is None for _, a in parts):
            return None
        weights = np.concatenate([w * a[0] for w, a in parts])
        mats = np.concatenate([a[1] for _, a in parts])
        return (weights, mats) if len(weights) <= MAX_ATOMS else None


def doubly_stochastic(k: int = 3, alpha: float = 1.0, d: int | None = None) -> DoublyStochastic:
    """``DoublyStochastic(k, alpha, d)``, the spec language's ``doubly_stochastic``."""
    return DoublyStochastic(k, alpha, d)


class Finite(Prior):
    """A finite prior ``sum_k w_k delta(M_k)``, given by its atoms ``mats`` ``(K, d, d)`` and weights
    (equal when omitted). Its spec is the equal mixture of point masses, which parses back to the
    same law. Atoms of weight 0 are kept (a construction may say so) but never drawn."""

    def __init__(self, mats, weights=None, *, label: str = ""):
        mats = np.asarray(mats, dtype=np.float64)
        if mats.ndim != 3 or mats.shape[1] != mats.shape[2] or mats.shape[0] < 1:
            raise PriorError(f"a finite prior needs atoms of shape (K, d, d), got {mats.shape}")
        with np.errstate(over="ignore", invalid="ignore"):  # entries or weights near the float maximum
            off = np.abs(mats.sum(axis=2) - 1).max(axis=1) > 1e-8
            if np.any(~np.isfinite(mats)) or np.any(mats < 0) or off.any():
                k = int(np.argmax(np.any(~np.isfinite(mats) | (mats < 0), axis=(1, 2)) | off))
                raise PriorError(f"atom {k} of a finite prior is not row-stochastic")
            w = np.full(len(mats), 1.0 / len(mats)) if weights is None else np.asarray(weights, dtype=np.float64)
            if w.shape != (len(mats),) or np.any(~np.isfinite(w)) or np.any(w < 0) or not abs(w.sum() - 1) <= 1e-9:
                raise PriorError(f"a finite prior needs {len(mats)} non-negative weights summing to 1, got "
                                 f"{w.tolist()}")
        self.mats, self.weights, self.label = mats, w, label
        self.d = _check_d(mats.shape[1])

    def live(self) -> tuple[np.ndarray, np.ndarray]:
        """``(atoms, weights)`` of positive weight."""
        keep = self.weights > 0
        return self.mats[keep], self.weights[keep]

    def atoms(self):
        mats, w = self.live()
        return w, mats

    def _sample(self, rng, n):
        mats, w = self.live()
        return mats[rng.choice(len(w), size=n, p=w / w.sum())]

    def spec(self):
        mats, w = self.live()
        if len(w) == 1:
            return f"point({_matrix_text(mats[0])})"
        return (f"mixture({', '.join(f'point({_matrix_text(m)})' for m in mats)}, "
                f"weights=[{', '.join(_num(x) for x in w)}])")

    def bind(self, d):
        if _check_d(d) != self.d:
            raise PriorError(f"a finite prior on {self.d} states cannot be used with d = {d}")
        return self
