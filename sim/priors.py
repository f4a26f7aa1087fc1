"""Priors over transition matrices, and the one-line spec language that names them.

A prior draws row-stochastic ``(d, d)`` matrices ``pi[s, t] = P(t | s)``. Every prior
knows its one-line spec (``dirichlet(alpha=0.1)``), the dimension it is bound to (``d``;
a prior such as a Dirichlet is unbound until a claim or the user fixes ``d``), and what
it can say about itself in closed form, for the assumption audit (:mod:`sim.audit`):

- :meth:`Prior.entry_floor`: a guaranteed lower bound on every entry of every draw;
- :meth:`Prior.entry_infimum`: the essential infimum of the smallest entry (tight, when known);
- :meth:`Prior.mean_matrix`: ``E[pi]`` exactly;
- :meth:`Prior.symmetric`: whether ``sigma^{-1} pi sigma`` has the law of ``pi`` for every
  relabelling ``sigma`` (N Knowl 10, assumption 3);
- :meth:`Prior.atoms`: the finite support with its weights, for priors that have one (then
  every assumption is decided exactly, over all atoms, instead of estimated).

``None`` means "not known in closed form": the audit estimates it from draws instead.

The property tier gets :meth:`Prior.strategy` (by default: seeds mapped through
:meth:`Prior.sample`, so hypothesis shrinks the seed).

The spec language (:func:`parse_prior`) is parsed with :mod:`ast` and never evaluated::

    spec   := CALL | SAMPLER
    CALL   := NAME "(" [ARG ("," ARG)*] ")"
    ARG    := VALUE | KEYWORD "=" VALUE          positional args in the documented order
    VALUE  := CALL | NUMBER | "string" | True | False | "[" VALUE ("," VALUE)* "]"
    NUMBER := a literal such as 0.1, -2, 1e-3, or + - * / of literals (1/3)
    SAMPLER:= module:function | path/to/file.py:function    (a user's sampler, whole spec only)

The known names and their arguments are in :data:`PRIORS` (``icl-verify prior --help`` lists them).
"""
from __future__ import annotations

import abc
import ast
import difflib
import importlib
import importlib.util
import itertools
import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from theory import TheoryError, validate_stochastic

__all__ = [
    "Prior",
    "PriorError",
    "PriorSpecError",
    "Dirichlet",
    "Floor",
    "Point",
    "Mixture",
    "Symmetrize",
    "Sparse",
    "Sticky",
    "Banded",
    "DoublyStochastic",
    "Sinkhorn",
    "UserSampler",
    "parse_prior",
    "lazy",
    "sticky",
    "banded",
    "doubly_stochastic",
    "PRIORS",
    "spec_help",
]

#: Largest d for which a finite prior's relabelling orbit / exact symmetry check is built.
MAX_ORBIT_D = 6
#: Largest number of atoms an exact (finite-support) prior keeps before it is treated as continuous.
MAX_ATOMS = 50_000


class PriorError(ValueError):
    """A prior was specified wrongly or produced something that is not a transition matrix."""


class PriorSpecError(PriorError):
    """A one-line prior spec could not be parsed; the message says what was expected and where."""


def _num(x) -> str:
    """A number as the spec writes it: integers bare, other floats by their shortest exact repr."""
    x = float(x)
    if x.is_integer() and abs(x) < 1e15:
        return str(int(x))
    return repr(x)


def _matrix_text(m: np.ndarray) -> str:
    return "[" + ", ".join("[" + ", ".join(_num(v) for v in row) + "]" for row in np.asarray(m)) + "]"


#: Largest number of states a prior may have: the audit holds thousands of d x d draws at once,
#: and the papers' tasks use d <= 20 (N's S = 10; W's d = 5 and 20).
MAX_STATES = 256
#: Largest number of permutations in doubly_stochastic (each draw sums k permutation matrices).
MAX_PERMUTATIONS = 10_000
#: Longest prior spec accepted, in characters, and its deepest nesting of priors.
MAX_SPEC_CHARS, MAX_SPEC_DEPTH = 5_000, 32


def _check_d(d) -> int:
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 1:
        raise PriorError(f"d must be a positive integer number of states, got {d!r}")
    if d > MAX_STATES:
        raise PriorError(f"d = {d} states is more than this tool handles (at most {MAX_STATES}: the audit holds "
                         "thousands of d x d matrices at once)")
    return int(d)


def _relabel_generators(d: int) -> list[np.ndarray]:
    """A transposition and a d-cycle: they generate every permutation of ``0..d-1``."""
    if d < 2:
        return []
    swap = np.arange(d)
    swap[[0, 1]] = [1, 0]
    return [swap, np.roll(np.arange(d), 1)]


def _law_is_symmetric(weights: np.ndarray, mats: np.ndarray, decimals: int = 12) -> bool:
    """Whether a finite law ``sum_k w_k delta(M_k)`` is invariant under every relabelling.

    Invariance under the two generators of the symmetric group is invariance under all of
    it. Atoms are compared after rounding to ``decimals`` (equal atoms are merged).
    """
    def law(ms):
        out: dict[bytes, float] = {}
        for w, m in zip(weights, ms):
            key = np.round(m, decimals).tobytes()
            out[key] = out.get(key, 0.0) + float(w)
        return out

    base = law(mats)
    for p in _relabel_generators(mats.shape[1]):
        moved = law(mats[:, p][:, :, p])
        if base.keys() != moved.keys() or any(abs(base[k] - moved[k]) > 1e-12 for k in base):
            return False
    return True


class Prior(abc.ABC):
    """Base class: subclasses implement :meth:`_sample`, :meth:`spec` and :meth:`bind`."""

    d: int | None = None

    @abc.abstractmethod
    def _sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` draws, shape ``(n, d, d)``; ``self.d`` is set."""

    @abc.abstractmethod
    def spec(self) -> str:
        """The one-line spec this prior parses back from (:func:`parse_prior`)."""

    @abc.abstractmethod
    def bind(self, d: int) -> "Prior":
        """The same prior on ``d`` states (PriorError if it has a different fixed size)."""

    # -- what the prior knows about itself in closed form (None = unknown) ----------------
    def entry_floor(self) -> float | None:
        """A guaranteed lower bound on every entry of every draw, if known in closed form."""
        a = self.atoms()
        return None if a is None else float(a[1].min())

    def entry_infima(self) -> np.ndarray | None:
        """Entrywise essential infima ``ess inf pi[s, t]``, shape ``(d, d)``, NaN where unknown
        (``None`` when nothing is known). Exact: a tight bound, not just a valid one."""
        a = self.atoms()
        return None if a is None else a[1].min(axis=0)

    def entry_infimum(self) -> float | None:
        """The essential infimum of ``min_{s,t} pi[s, t]`` (a tight bound), if known.

        ``0`` means draws have, or come arbitrarily close to, a zero entry: no ``gamma > 0``
        bounds every draw (N Knowl 10, assumption 1).
        """
        e = self.entry_infima()
        if e is None:
            return None
        if np.any(e == 0):
            return 0.0
        return None if np.isnan(e).any() else float(e.min())

    def mean_matrix(self) -> np.ndarray | None:
        """``E[pi]``, shape ``(d, d)``, if known exactly."""
        a = self.atoms()
        return None if a is None else np.einsum("k,kst->st", a[0], a[1])

    def symmetric(self) -> bool | None:
        """``True`` if ``sigma^{-1} pi sigma =_d pi`` for every relabelling ``sigma``, ``False`` if
        provably not, ``None`` if unknown (then the audit tests it statistically)."""
        a = self.atoms()
        return None if a is None else _law_is_symmetric(*a)

    def atoms(self) -> tuple[np.ndarray, np.ndarray] | None:
        """The finite support: ``(weights (k,), matrices (k, d, d))`` with positive weights summing
        to 1, or ``None`` for a prior without a (small) finite support."""
        return None

    # -- drawing ---------------------------------------------------------------------------
    def sample(self, rng: np.random.Generator, n: int = 1) -> np.ndarray:
        """``n`` transition matrices, shape ``(n, d, d)``, each validated.

        Raises PriorError naming the draw and row if the sampler returned something that
        is not row-stochastic (a user sampler, or numerical trouble).
        """
        if self.d is None:
            raise PriorError(f"prior {self.spec()} has no dimension yet: bind it to d states first")
        try:
            out = np.asarray(self._sample(rng, n), dtype=np.float64)
        except (TypeError, ValueError) as exc:
            if isinstance(exc, PriorError):
                raise
            raise PriorError(f"prior {self.spec()} returned something that is not an array of numbers: {exc}") from None
        if out.shape != (n, self.d, self.d):
            raise PriorError(f"prior {self.spec()} returned shape {out.shape}, expected {(n, self.d, self.d)} "
                             f"(n = {n} draws of {self.d} x {self.d} matrices)")
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


# ------------------------------------------------------------------------------ leaf priors --
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
            self.matrix = validate_stochastic(matrix, name="point(...) matrix")
        except TheoryError as exc:
            raise PriorError(str(exc)) from None
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



# --------------------------------------------------------------------- transforms of a base --
class _Transform(Prior):
    """A prior that maps each draw of ``base`` through :meth:`_apply` (vectorised over draws)."""

    base: Prior

    @property
    def d(self):
        return self.base.d

    def _apply(self, pis: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def _sample(self, rng, n):
        return self._apply(self.base.sample(rng, n))

    def atoms(self):
        a = self.base.atoms()
        return None if a is None else (a[0], self._apply(a[1].copy()))


@dataclass(frozen=True, repr=False)
class Floor(_Transform):
    """``gamma / d + (1 - gamma) * base``: every entry at least ``gamma / d`` (W Lemma 3, N's gamma)."""

    base: Prior
    gamma: float

    def __post_init__(self):
        if isinstance(self.gamma, bool) or not (isinstance(self.gamma, (int, float)) and 0 <= self.gamma <= 1):
            raise PriorError(f"floor: gamma must be a number in [0, 1], got {self.gamma!r}")

    def _apply(self, pis):
        return self.gamma / self.d + (1 - self.gamma) * pis

    def _sample(self, rng, n):
        return self.gamma / self.d + (1 - self.gamma) * self.base.sample(rng, n)

    def spec(self):
        return f"floor({self.base.spec()}, gamma={_num(self.gamma)})"

    def bind(self, d):
        return Floor(self.base.bind(d), self.gamma)

    def entry_floor(self):
        inner = self.base.entry_floor() or 0.0
        return self.gamma / self.d + (1 - self.gamma) * inner

    def entry_infima(self):
        inner = self.base.entry_infima()
        return None if inner is None else self.gamma / self.d + (1 - self.gamma) * inner

    def mean_matrix(self):
        m = self.base.mean_matrix()
        return None if m is None else self.gamma / self.d + (1 - self.gamma) * m

    def symmetric(self):
        return self.base.symmetric()  # an invertible map that commutes with relabelling


@dataclass(frozen=True, repr=False)
class Sticky(_Transform):
    """Lazy / sticky chains: ``stay * I + (1 - stay) * base`` (stay put with probability at
    least ``stay``). ``lazy(base)`` is ``sticky(base, stay=0.5)``."""

    base: Prior
    stay: float = 0.7

    def __post_init__(self):
        if isinstance(self.stay, bool) or not (isinstance(self.stay, (int, float)) and 0 <= self.stay <= 1):
            raise PriorError(f"sticky: stay must be a number in [0, 1], got {self.stay!r}")

    def _apply(self, pis):
        return self.stay * np.eye(self.d) + (1 - self.stay) * pis

    def spec(self):
        return f"sticky({self.base.spec()}, stay={_num(self.stay)})"

    def bind(self, d):
        return Sticky(self.base.bind(d), self.stay)

    def entry_floor(self):
        inner = self.base.entry_floor()
        return None if inner is None else (1 - self.stay) * inner

    def entry_infima(self):
        inner = self.base.entry_infima()
        return None if inner is None else self.stay * np.eye(self.d) + (1 - self.stay) * inner

    def mean_matrix(self):
        m = self.base.mean_matrix()
        return None if m is None else self.stay * np.eye(self.d) + (1 - self.stay) * m

    def symmetric(self):
        return self.base.symmetric() if self.stay < 1 else True


@dataclass(frozen=True, repr=False)
class Sparse(_Transform):
    """Entries of a base draw below ``threshold`` set to 0, rows renormalised: exact zeros
    (reducible or periodic chains are possible). A row whose entries all fall below the
    threshold (possible only when ``threshold >= 1/d``) keeps its largest entry, so it becomes
    a one-hot row instead of an empty one."""

    base: Prior
    threshold: float

    def __post_init__(self):
        if isinstance(self.threshold, bool) or not (isinstance(self.threshold, (int, float))
                                                    and 0 <= self.threshold < 1):
            raise PriorError(f"sparse: threshold must be a number in [0, 1), got {self.threshold!r}")

    def _apply(self, pis):
        small = pis < self.threshold
        if self.threshold >= 1.0 / self.d:  # rows could empty: keep each row's largest entry
            top = pis.argmax(axis=-1)[..., None]
            np.put_along_axis(small, top, False, axis=-1)
        pis[small] = 0.0
        return pis / pis.sum(axis=-1, keepdims=True)

    def spec(self):
        return f"sparse({self.base.spec()}, threshold={_num(self.threshold)})"

    def bind(self, d):
        return Sparse(self.base.bind(d), self.threshold)

    def entry_floor(self):
        if self.base.atoms() is not None:
            return super().entry_floor()
        inner = self.base.entry_floor()
        # Renormalising after zeroing only raises the surviving entries.
        return None if inner is None else (inner if inner >= self.threshold else 0.0)

    def entry_infima(self):
        if self.base.atoms() is not None:
            return super().entry_infima()
        inner = self.base.entry_infima()
        if inner is None:
            return None
        # An entry whose infimum is below the threshold is below it with positive probability,
        # and then it is 0; the others are renormalised upwards (their infimum is not known).
        return np.where(inner < self.threshold, 0.0, np.nan)

    def symmetric(self):
        return True if self.base.symmetric() else None


@dataclass(frozen=True, repr=False)
class Banded(_Transform):
    """Entries with ``|s - t| > width`` set to 0, rows renormalised. ``cyclic=True`` measures the
    distance around the cycle, ``min(|s - t|, d - |s - t|)`` (states on a ring). A row left
    with no mass is an error naming the draw and row."""

    base: Prior
    width: int = 1
    cyclic: bool = False

    def __post_init__(self):
        if isinstance(self.width, bool) or not isinstance(self.width, (int, np.integer)) or self.width < 0:
            raise PriorError(f"banded: width must be a non-negative integer, got {self.width!r}")
        if not isinstance(self.cyclic, bool):
            raise PriorError(f"banded: cyclic must be True or False, got {self.cyclic!r}")

    def _mask(self) -> np.ndarray:
        s = np.arange(self.d)
        dist = np.abs(s[:, None] - s[None, :])
        if self.cyclic:
            dist = np.minimum(dist, self.d - dist)
        return dist <= self.width

    def _covers_all(self) -> bool:
        return bool(self._mask().all())

    def _apply(self, pis):
        pis = pis * self._mask()[None]
        sums = pis.sum(axis=-1, keepdims=True)
        bad = np.argwhere(sums[..., 0] <= 0)
        if bad.size:
            k, r = bad[0]
            raise PriorError(f"banded: draw {k} row {r} has no mass within width {self.width} of the diagonal "
                             f"(base {self.base.spec()} put all of it outside the band)")
        return pis / sums

    def spec(self):
        return (f"banded({self.base.spec()}, width={int(self.width)}" + (", cyclic=True" if self.cyclic else "") + ")")

    def bind(self, d):
        return Banded(self.base.bind(d), self.width, self.cyclic)

    def entry_floor(self):
        if self._covers_all():
            return self.base.entry_floor()
        return 0.0 if self.base.atoms() is None else super().entry_floor()

    def entry_infima(self):
        if self._covers_all() or self.base.atoms() is not None:
            return self.base.entry_infima() if self._covers_all() else super().entry_infima()
        return np.where(self._mask(), np.nan, 0.0)  # outside the band: exactly 0

    def mean_matrix(self):
        return self.base.mean_matrix() if self._covers_all() else super().mean_matrix()

    def symmetric(self):
        return self.base.symmetric() if self._covers_all() else super().symmetric()


@dataclass(frozen=True, repr=False)
class Sinkhorn(_Transform):
    """Sinkhorn-Knopp scaling of each base draw to a doubly stochastic matrix (rows and columns
    summing to 1; uniform stationary law). Scaling keeps zeros and commutes with relabelling.
    A draw whose zero pattern has no doubly stochastic scaling is an error naming it."""

    base: Prior

    max_iter: int = 5000
    tol: float = 1e-13

    def _apply(self, pis):
        x = np.array(pis, dtype=np.float64)
        for _ in range(self.max_iter):
            x = x / x.sum(axis=-1, keepdims=True)
            col = x.sum(axis=-2, keepdims=True)
            if np.abs(col - 1.0).max() <= self.tol:
                break
            x = x / np.where(col > 0, col, 1.0)
        col_err = np.abs(x.sum(axis=-2) - 1.0).max(axis=-1)
        bad = np.flatnonzero(col_err > 1e-9)
        if bad.size:
            raise PriorError(f"sinkhorn: draw {bad[0]} of {self.base.spec()} has no doubly stochastic scaling "
                             f"(column sums still off by {col_err[bad[0]]:.3g} after {self.max_iter} iterations; "
                             "its zero pattern lacks total support)")
        return x / x.sum(axis=-1, keepdims=True)

    def spec(self):
        return f"sinkhorn({self.base.spec()})"

    def bind(self, d):
        return Sinkhorn(self.base.bind(d))

    def entry_floor(self):
        return 0.0 if self.base.atoms() is None else super().entry_floor()

    def entry_infima(self):
        if self.base.atoms() is not None:
            return super().entry_infima()
        inner = self.base.entry_infima()
        # An entry tending to 0 with the others bounded away from 0 still tends to 0 after scaling.
        return None if inner is None else np.where(inner == 0, 0.0, np.nan)

    def symmetric(self):
        return True if self.base.symmetric() else super().symmetric()


# ------------------------------------------------------------------- combinations of priors --
class Mixture(Prior):
    """A finite mixture ``sum_k w_k P_k`` of priors on the same ``d``."""

    def __init__(self, components: Sequence[tuple[float, Prior]]):
        if not components:
            raise PriorError("mixture needs at least one (weight, prior) component")
        try:
            w = np.array([float(c[0]) for c in components])
        except (TypeError, ValueError):
            raise PriorError("mixture weights must be numbers") from None
        if np.any(~np.isfinite(w)) or np.any(w < 0) or w.sum() <= 0:
            raise PriorError(f"mixture weights must be non-negative with a positive sum, got {w.tolist()}")
        for c in components:
            if not isinstance(c[1], Prior):
                raise PriorError(f"mixture components must be priors, got {type(c[1]).__name__}")
        self.raw_weights = w
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


@dataclass(frozen=True, repr=False)
class Symmetrize(Prior):
    """Permutation-symmetrisation: draw ``pi ~ base`` and a uniform permutation ``sigma``,
    return ``sigma^{-1} pi sigma`` (``pi[sigma][:, sigma]``). Satisfies the symmetry half of
    N's assumption 3; its mean is ``a I + b (11^T - I)``, uniform exactly when ``E[trace pi] = 1``."""

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

    def entry_infima(self):
        e = self.base.entry_infima()
        if e is None or self.d == 1:
            return e
        # Relabelling maps diagonal entries to diagonal ones and off-diagonal to off-diagonal.
        diag = np.diag(e)
        off = e[~np.eye(self.d, dtype=bool)]
        diag_inf = 0.0 if (diag == 0).any() else diag.min()
        off_inf = 0.0 if (off == 0).any() else off.min()
        out = np.full((self.d, self.d), off_inf)
        np.fill_diagonal(out, diag_inf)
        return out

    def mean_matrix(self):
        m = self.base.mean_matrix()
        if m is None:
            return None
        d = self.d
        if d == 1:
            return m
        tau = float(np.trace(m))
        out = np.full((d, d), (d - tau) / (d * (d - 1)))
        np.fill_diagonal(out, tau / d)
        return out

    def symmetric(self):
        return True

    def atoms(self):
        a = self.base.atoms()
        if a is None or self.d > MAX_ORBIT_D or len(a[0]) * math.factorial(self.d) > MAX_ATOMS:
            return None
        perms = np.array(list(itertools.permutations(range(self.d))))  # (d!, d)
        orbit = a[1][:, perms[:, :, None], perms[:, None, :]]  # (k, d!, d, d)
        return np.repeat(a[0] / len(perms), len(perms)), orbit.reshape(-1, self.d, self.d)

    def orbit(self, pi: np.ndarray) -> np.ndarray:
        """All ``d!`` relabellings of ``pi`` (for exact expectations at small d)."""
        if self.d > 7:
            raise PriorError(f"orbit of a {self.d}-state matrix has {self.d}! members; too many")
        return np.stack([pi[np.ix_(p, p)] for p in itertools.permutations(range(self.d))])


# ------------------------------------------------------------------------ a user's sampler --
#: Seconds a user's sampler may take for one call before it is stopped (``ICL_VERIFY_SAMPLER_TIMEOUT``).
DEFAULT_SAMPLER_TIMEOUT = 120.0


def sampler_timeout() -> float:
    """The time limit for one call of a user's sampler: ``$ICL_VERIFY_SAMPLER_TIMEOUT`` seconds
    (default 120; 0 turns the limit off)."""
    import os

    text = os.environ.get("ICL_VERIFY_SAMPLER_TIMEOUT", "")
    try:
        value = float(text) if text.strip() else DEFAULT_SAMPLER_TIMEOUT
    except ValueError:
        raise PriorError(f"ICL_VERIFY_SAMPLER_TIMEOUT must be a number of seconds, got {text!r}") from None
    if not np.isfinite(value) or value < 0:
        raise PriorError(f"ICL_VERIFY_SAMPLER_TIMEOUT must be a non-negative number of seconds, got {text!r}")
    return value


class _time_limit:
    """Stop the code inside after ``seconds`` with a PriorError (SIGALRM: main thread on Unix;
    elsewhere, and with ``seconds == 0``, no limit)."""

    def __init__(self, seconds: float, what: str):
        self.seconds, self.what, self.armed = seconds, what, False

    def __enter__(self):
        import signal
        import threading

        if self.seconds > 0 and hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread():
            def expire(signum, frame):
                raise PriorError(f"{self.what} did not return within {self.seconds:g} s; make it faster or raise the "
                                 "limit with ICL_VERIFY_SAMPLER_TIMEOUT=<seconds>")
            self.previous = signal.signal(signal.SIGALRM, expire)
            signal.setitimer(signal.ITIMER_REAL, self.seconds)
            self.armed = True
        return self

    def __exit__(self, *exc):
        if self.armed:
            import signal

            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self.previous)
        return False

class UserSampler(Prior):
    """A user's own sampler, ``module:function`` or ``path/to/file.py:function``.

    The function is called as ``function(rng, n)`` with a ``numpy.random.Generator`` and must
    return an array of shape ``(n, d, d)`` of row-stochastic matrices; ``d`` is read off a
    first probe draw (``n = 1``, seed 0) when the sampler is loaded, so a sampler that
    raises or returns something wrong is reported before anything runs.
    """

    def __init__(self, target: str, *, _fn: Callable | None = None):
        if not isinstance(target, str) or ":" not in target:
            raise PriorError(f"sampler: expected 'module:function' or 'path/to/file.py:function', got {target!r}")
        self.target = target.strip()
        self.fn = _fn if _fn is not None else _load_function(self.target)
        self.d = None
        probe = self._call(np.random.default_rng(0), 1)
        if probe.ndim != 3 or probe.shape[0] != 1 or probe.shape[1] != probe.shape[2] or probe.shape[1] < 1:
            raise PriorError(f"sampler {self.target} returned shape {probe.shape} when asked for n = 1 draw; expected "
                             "(n, d, d): n square transition matrices")
        self.d = int(probe.shape[1])
        for k in range(probe.shape[0]):
            try:
                validate_stochastic(probe[k], name=f"draw {k} of sampler {self.target}")
            except TheoryError as exc:
                raise PriorError(str(exc)) from None

    def _call(self, rng, n) -> np.ndarray:
        try:
            with _time_limit(sampler_timeout(), f"sampler {self.target} (asked for n = {n} draws)"):
                out = self.fn(rng, n)
        except PriorError:
            raise
        except Exception as exc:  # the user's code: report what it raised, never a traceback
            raise PriorError(f"sampler {self.target} raised {type(exc).__name__}: {exc} "
                             f"(when asked for n = {n} draws)") from None
        try:
            return np.asarray(out, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise PriorError(f"sampler {self.target} returned {type(out).__name__}, not an array of numbers "
                             f"of shape (n, d, d): {exc}") from None

    def _sample(self, rng, n):
        return self._call(rng, n)

    def spec(self):
        return f"sampler({self.target!r})"

    def bind(self, d):
        if _check_d(d) != self.d:
            raise PriorError(f"sampler {self.target} draws {self.d} x {self.d} matrices; cannot use it with d = {d}")
        return self


def _load_function(target: str) -> Callable:
    where, _, fname = target.rpartition(":")
    if not where or not re.fullmatch(r"[A-Za-z_]\w*", fname or ""):
        raise PriorError(f"sampler: expected 'module:function' or 'path/to/file.py:function', got {target!r}")
    if where.endswith(".py") or "/" in where or "\\" in where:
        path = Path(where).expanduser()
        if not path.is_file():
            raise PriorError(f"sampler file {where} does not exist (expected path/to/file.py:function)")
        name = f"icl_verify_sampler_{abs(hash(str(path.resolve())))}"
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise PriorError(f"sampler file {where} cannot be loaded as Python")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except Exception as exc:
            sys.modules.pop(name, None)
            raise PriorError(f"sampler file {where} failed to load: {type(exc).__name__}: {exc}") from None
    else:
        try:
            module = importlib.import_module(where)
        except Exception as exc:
            raise PriorError(f"sampler module {where!r} cannot be imported: {type(exc).__name__}: {exc}") from None
    fn = getattr(module, fname, None)
    if fn is None:
        names = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_"))
        close = difflib.get_close_matches(fname, names, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        shown = ", ".join(names[:12]) + (f", ... ({len(names)} in all)" if len(names) > 12 else "")
        raise PriorError(f"sampler {where} has no function {fname!r}{hint} (its functions: {shown or 'none'})")
    if not callable(fn):
        raise PriorError(f"sampler {target}: {fname} is a {type(fn).__name__}, not a function")
    return fn


# --------------------------------------------------------------------------- constructors --
def sticky(base: Prior, stay: float = 0.7) -> Sticky:
    """``stay * I + (1 - stay) * base``."""
    return Sticky(base, stay)


def lazy(base: Prior) -> Sticky:
    """The lazy chain ``(I + base) / 2``."""
    return Sticky(base, 0.5)


def banded(base: Prior, width: int = 1, cyclic: bool = False) -> Banded:
    return Banded(base, width, cyclic)


def doubly_stochastic(k: int = 3, alpha: float = 1.0, d: int | None = None) -> DoublyStochastic:
    return DoublyStochastic(k, alpha, d)


# ------------------------------------------------------------------------- the spec language --
@dataclass(frozen=True)
class Param:
    name: str
    kind: str  # prior | number | unit | positive | size | count | bool | str | numbers | matrix
    required: bool = True
    default: Any = None
    help: str = ""


_KIND_WORDS = {
    "prior": "a prior such as dirichlet(alpha=1)",
    "positive": "a positive number",
    "unit": "a number in [0, 1]",
    "number": "a number",
    "size": "a positive integer",
    "count": "a non-negative integer",
    "bool": "True or False",
    "str": "a quoted string",
    "numbers": "a list of numbers such as [0.5, 0.5]",
    "matrix": "a matrix as a list of rows such as [[0.9, 0.1], [0.2, 0.8]]",
}


@dataclass(frozen=True)
class PriorSpec:
    """One name of the spec language: its parameters (positional order) and its builder."""

    name: str
    params: tuple[Param, ...]
    build: Callable[..., Prior]
    doc: str
    example: str
    variadic_priors: bool = False  # mixture(p1, p2, ..., weights=[...])

    def usage(self) -> str:
        parts = ["PRIOR, PRIOR, ..."] if self.variadic_priors else []
        for p in self.params:
            if p.required and p.kind in ("prior", "matrix"):
                parts.append(p.name.upper())
            elif p.required and p.kind == "str":
                parts.append("'module:function'")
            else:
                parts.append(f"{p.name}={'...' if p.required else _default_text(p.default)}")
        return f"{self.name}({', '.join(parts)})"


def _default_text(v) -> str:
    if v is None:
        return "None"
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, (int, float)):
        return _num(v)
    return repr(v)


def _build_mixture(*priors, weights=None):
    if weights is None:
        weights = [1.0] * len(priors)
    if len(weights) != len(priors):
        raise PriorError(f"mixture: {len(priors)} priors but {len(weights)} weights; give one weight per prior")
    return Mixture(list(zip(weights, priors)))


def _build_sampler(target):
    return UserSampler(target)


def _bound(prior: Prior, d) -> Prior:
    return prior if d is None else prior.bind(d)


PRIORS: dict[str, PriorSpec] = {s.name: s for s in [
    PriorSpec("dirichlet", (Param("alpha", "positive"), Param("d", "size", False)),
              lambda alpha, d=None: Dirichlet(alpha, d),
              "rows i.i.d. Dirichlet(alpha 1_d)", "dirichlet(alpha=0.1)"),
    PriorSpec("floor", (Param("base", "prior"), Param("gamma", "unit")),
              lambda base, gamma: Floor(base, gamma),
              "gamma/d + (1 - gamma) * base: every entry >= gamma/d", "floor(dirichlet(alpha=1), gamma=0.3)"),
    PriorSpec("point", (Param("matrix", "matrix"),), lambda matrix: Point(matrix),
              "a point mass at one matrix", "point([[0.9, 0.1], [0.2, 0.8]])"),
    PriorSpec("symmetrize", (Param("base", "prior"),), lambda base: Symmetrize(base),
              "relabel each draw by a uniform random permutation", "symmetrize(point([[0.9, 0.1], [0.2, 0.8]]))"),
    PriorSpec("mixture", (Param("weights", "numbers", False),), _build_mixture,
              "draw from one of the priors, chosen with the given weights (default equal)",
              "mixture(dirichlet(alpha=1), point([[0.9, 0.1], [0.2, 0.8]]), weights=[0.5, 0.5])",
              variadic_priors=True),
    PriorSpec("sticky", (Param("base", "prior"), Param("stay", "unit", False, 0.7)),
              lambda base, stay=0.7: Sticky(base, stay),
              "stay * I + (1 - stay) * base", "sticky(dirichlet(alpha=1), stay=0.8)"),
    PriorSpec("lazy", (Param("base", "prior"),), lambda base: lazy(base),
              "the lazy chain (I + base) / 2, i.e. sticky(base, stay=0.5)", "lazy(dirichlet(alpha=1))"),
    PriorSpec("sparse", (Param("base", "prior"), Param("threshold", "unit")),
              lambda base, threshold: Sparse(base, threshold),
              "entries below threshold set to 0, rows renormalised", "sparse(dirichlet(alpha=0.5), threshold=0.1)"),
    PriorSpec("banded", (Param("base", "prior"), Param("width", "count", False, 1), Param("cyclic", "bool", False, False)),
              lambda base, width=1, cyclic=False: Banded(base, width, cyclic),
              "entries with |s - t| > width (around the ring if cyclic) set to 0, rows renormalised",
              "banded(dirichlet(alpha=1), width=1)"),
    PriorSpec("doubly_stochastic", (Param("k", "size", False, 3), Param("alpha", "positive", False, 1.0),
                                    Param("d", "size", False)),
              lambda k=3, alpha=1.0, d=None: DoublyStochastic(k, alpha, d),
              "Birkhoff: a Dirichlet(alpha)-weighted mix of k uniform random permutation matrices",
              "doubly_stochastic(k=3, d=4)"),
    PriorSpec("sinkhorn", (Param("base", "prior"),), lambda base: Sinkhorn(base),
              "Sinkhorn-Knopp scaling of each draw to a doubly stochastic matrix", "sinkhorn(dirichlet(alpha=1))"),
    PriorSpec("sampler", (Param("target", "str"),), _build_sampler,
              "your own function(rng, n) -> (n, d, d) array", "sampler('my_priors.py:draw')"),
]}


def spec_help() -> str:
    """The spec language in a few lines (for ``--help`` and error messages)."""
    lines = [f"  {s.usage():<58} {s.doc}" for s in PRIORS.values()]
    lines.append("  module:function | path/to/file.py:function".ljust(60) + " your own sampler (the whole spec)")
    return "\n".join(lines)


def _caret(text: str, col: int | None) -> str:
    if col is None:
        return ""
    return f"\n  {text}\n  {' ' * max(col - 1, 0)}^"


class _Parser:
    def __init__(self, text: str):
        self.text = text

    def fail(self, msg: str, node: ast.AST | None = None, col: int | None = None):
        if node is not None and hasattr(node, "col_offset"):
            col = node.col_offset + 1
        where = f" at column {col}" if col is not None else ""
        raise PriorSpecError(f"prior spec {self.text!r}{where}: {msg}{_caret(self.text, col)}")

    # -- values ----------------------------------------------------------------------------
    def number(self, node, what: str) -> float:
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
            return float(node.value)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            v = self.number(node.operand, what)
            return -v if isinstance(node.op, ast.USub) else v
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.Div)):
            a, b = self.number(node.left, what), self.number(node.right, what)
            if isinstance(node.op, ast.Div):
                if b == 0:
                    self.fail(f"{what}: division by zero", node)
                return a / b
            return a + b if isinstance(node.op, ast.Add) else a - b if isinstance(node.op, ast.Sub) else a * b
        self.fail(f"{what} must be a number, got {self.describe(node)}", node)

    def describe(self, node) -> str:
        if isinstance(node, ast.Constant):
            return f"the {type(node.value).__name__} {node.value!r}"
        if isinstance(node, (ast.List, ast.Tuple)):
            return "a list"
        if isinstance(node, ast.Call):
            return "a prior (a call)"
        if isinstance(node, ast.Name):
            hint = f" (a prior needs parentheses: {node.id}(...))" if node.id in PRIORS else ""
            return f"the bare name {node.id!r}{hint}"
        return f"an expression ({type(node).__name__})"

    def value(self, node, param: Param, fname: str):
        what = f"{fname}(): {param.name}"
        k = param.kind
        if k == "prior":
            if not isinstance(node, ast.Call):
                self.fail(f"{what} must be {_KIND_WORDS['prior']}, got {self.describe(node)}", node)
            return self.prior(node)
        if k in ("number", "positive", "unit"):
            v = self.number(node, what)
            if k == "positive" and not v > 0:
                self.fail(f"{what} must be a positive number, got {_num(v)}", node)
            if k == "unit" and not 0 <= v <= 1:
                self.fail(f"{what} must be a number in [0, 1], got {_num(v)}", node)
            return v
        if k in ("size", "count"):
            v = self.number(node, what)
            if not float(v).is_integer() or v < (1 if k == "size" else 0):
                self.fail(f"{what} must be {_KIND_WORDS[k]}, got {_num(v)}", node)
            return int(v)
        if k == "bool":
            if isinstance(node, ast.Constant) and isinstance(node.value, bool):
                return node.value
            if isinstance(node, ast.Name) and node.id.lower() in ("true", "false"):
                return node.id.lower() == "true"
            self.fail(f"{what} must be True or False, got {self.describe(node)}", node)
        if k == "str":
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                return node.value
            self.fail(f"{what} must be a quoted string such as 'my_priors.py:draw', got {self.describe(node)}", node)
        if k == "numbers":
            if not isinstance(node, (ast.List, ast.Tuple)):
                self.fail(f"{what} must be {_KIND_WORDS['numbers']}, got {self.describe(node)}", node)
            return [self.number(e, what) for e in node.elts]
        if k == "matrix":
            if not isinstance(node, (ast.List, ast.Tuple)) or not node.elts or \
                    not all(isinstance(r, (ast.List, ast.Tuple)) for r in node.elts):
                self.fail(f"{what} must be {_KIND_WORDS['matrix']}, got {self.describe(node)}", node)
            rows = [[self.number(e, what) for e in r.elts] for r in node.elts]
            if len({len(r) for r in rows}) != 1 or len(rows[0]) != len(rows):
                self.fail(f"{what} must be square: got rows of lengths {[len(r) for r in rows]}", node)
            return rows
        raise AssertionError(k)  # pragma: no cover

    # -- calls -----------------------------------------------------------------------------
    def prior(self, node) -> Prior:
        if not isinstance(node, ast.Call):
            self.fail(f"expected a prior such as dirichlet(alpha=0.1), got {self.describe(node)}", node)
        if not isinstance(node.func, ast.Name):
            self.fail("expected a prior name such as dirichlet(...) before the parenthesis", node)
        name = node.func.id
        sig = PRIORS.get(name)
        if sig is None:
            close = difflib.get_close_matches(name, list(PRIORS), n=1, cutoff=0.5)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            self.fail(f"unknown prior {name!r}{hint}; known priors: {', '.join(sorted(PRIORS))} "
                      "(or module:function / path/to/file.py:function for your own sampler)", node)
        usage = f" (usage: {sig.usage()})"
        args = list(node.args)
        for a in args:
            if isinstance(a, ast.Starred):
                self.fail(f"{name}(): *arguments are not part of the spec language{usage}", a)
        kwargs = {}
        for kw in node.keywords:
            if kw.arg is None:
                self.fail(f"{name}(): **arguments are not part of the spec language{usage}", kw.value)
            kwargs[kw.arg] = kw
        values: dict[str, Any] = {}
        priors: list[Prior] = []
        if sig.variadic_priors:
            while args and isinstance(args[0], ast.Call):
                priors.append(self.prior(args.pop(0)))
            if not priors:
                self.fail(f"{name}() needs at least one prior{usage}", node)
        params = list(sig.params)
        if len(args) > len(params):
            self.fail(f"{name}() takes at most {len(params)} positional argument(s) after its priors, got "
                      f"{len(args)}{usage}", args[len(params)])
        for p, a in zip(params, args):
            values[p.name] = self.value(a, p, name)
        known = {p.name: p for p in params}
        for key, kw in kwargs.items():
            if key not in known:
                close = difflib.get_close_matches(key, list(known), n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                takes = ", ".join(known) or "no keywords"
                self.fail(f"{name}() got an unknown keyword {key!r}{hint} ({name} takes: {takes}){usage}", kw.value)
            if key in values:
                self.fail(f"{name}() got {key!r} twice (positionally and by keyword){usage}", kw.value)
            values[key] = self.value(kw.value, known[key], name)
        for p in params:
            if p.required and p.name not in values:
                self.fail(f"{name}() is missing {p.name} ({_KIND_WORDS[p.kind]}){usage}", node)
        try:
            return sig.build(*priors, **values)
        except PriorSpecError:
            raise
        except PriorError as exc:
            self.fail(str(exc), node)


def parse_prior(spec: str) -> Prior:
    """Parse a one-line prior spec (see the module docstring for the grammar) into a :class:`Prior`.

    ``module:function`` or ``path/to/file.py:function`` (the whole spec) loads a user's
    sampler. Never evaluates the text: it is parsed with :mod:`ast` and only the names in
    :data:`PRIORS` are built. Raises :class:`PriorSpecError` saying what was expected and
    at which column.

    >>> parse_prior("floor(dirichlet(alpha=1), gamma=0.3)").spec()
    'floor(dirichlet(alpha=1), gamma=0.3)'
    """
    if not isinstance(spec, str):
        raise PriorSpecError(f"a prior spec must be a string, got {type(spec).__name__}")
    text = spec.strip()
    if not text:
        raise PriorSpecError("empty prior spec; expected e.g. dirichlet(alpha=0.1). Known priors:\n" + spec_help())
    if len(text) > MAX_SPEC_CHARS:
        raise PriorSpecError(f"prior spec of {len(text)} characters is longer than {MAX_SPEC_CHARS}; write a sampler "
                             "(path/to/file.py:function) for a prior that large")
    depth = max(np.cumsum([1 if c == "(" else -1 if c == ")" else 0 for c in text]), default=0)
    if depth > MAX_SPEC_DEPTH:
        raise PriorSpecError(f"prior spec nests {depth} levels of parentheses, more than {MAX_SPEC_DEPTH}")
    if "(" not in text and ":" in text:
        return UserSampler(text)
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        col = exc.offset if exc.offset is not None else None
        raise PriorSpecError(f"malformed prior spec {text!r}" + (f" at column {col}" if col else "")
                             + f": {exc.msg}; expected e.g. floor(dirichlet(alpha=1), gamma=0.3)"
                             + _caret(text, col)) from None
    return _Parser(text).prior(tree.body)
