"""Transforms of a base prior: a floor, stickiness, sparsity, a band, Sinkhorn scaling, and
relabelling symmetrisation."""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from sim.priors.base import MAX_ATOMS, MAX_ORBIT_D, Prior, PriorError, _num


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


# --------------------------------------------------------------------------- constructors --
def sticky(base: Prior, stay: float = 0.7) -> Sticky:
    """``stay * I + (1 - stay) * base``."""
    return Sticky(base, stay)


def lazy(base: Prior) -> Sticky:
    """The lazy chain ``(I + base) / 2``."""
    return Sticky(base, 0.5)


def banded(base: Prior, width: int = 1, cyclic: bool = False) -> Banded:
    """``Banded(base, width, cyclic)``, the spec language's ``banded``."""
    return Banded(base, width, cyclic)
