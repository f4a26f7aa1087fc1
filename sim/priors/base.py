"""The base of every prior: :class:`Prior` (what a prior draws and what it knows about itself in
closed form), the errors, the size limits, and the exact relabelling check of a finite law."""
from __future__ import annotations

import abc

import numpy as np

from theory import TheoryError, validate_stochastic

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


def _check_d(d) -> int:
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 1:
        raise PriorError(f"d must be a positive integer number of states, got {d!r}")
    if d > MAX_STATES:
        raise PriorError(f"d = {d} states is more than this tool handles (at most {MAX_STATES}: the audit holds "
                         "thousands of d x d matrices at once)")
    return int(d)


def validate_draws(out, n: int, d: int | None, who: str) -> np.ndarray:
    """The one check every draw of every prior passes, built-in or a user's sampler: ``out`` as a
    float64 array of shape ``(n, d, d)`` (``d`` read off the array when None, at most
    :data:`MAX_STATES`), each matrix row-stochastic (entries finite and ``>= 0``, rows summing to 1
    within :data:`theory.markov.ROW_SUM_ATOL`).

    Raises :class:`PriorError` starting with ``who``, naming the first bad draw and row; no numpy
    warning escapes (a row of ``1e308`` entries overflows its sum)."""
    try:
        arr = np.asarray(out)
    except (TypeError, ValueError, OverflowError, RecursionError) as exc:  # ragged lists, huge integers
        raise PriorError(f"{who} returned {type(out).__name__}, not an array of numbers: {exc}") from None
    if arr.dtype.kind not in "iuf":
        what = {"b": "booleans", "c": "complex numbers", "O": "Python objects", "U": "strings", "S": "bytes"}
        raise PriorError(f"{who} returned {type(out).__name__}, not an array of numbers (an array of "
                         f"{what.get(arr.dtype.kind, arr.dtype.name)})")
    if arr.ndim != 3 or arr.shape[0] != n or arr.shape[1] != arr.shape[2] or arr.shape[1] < 1:
        raise PriorError(f"{who} returned shape {arr.shape} when asked for n = {n} draw{'' if n == 1 else 's'}; "
                         "expected (n, d, d): n square transition matrices" + ("" if d is None else f" with d = {d}"))
    if d is None:
        if arr.shape[1] > MAX_STATES:
            raise PriorError(f"{who} draws {arr.shape[1]} x {arr.shape[1]} matrices: d = {arr.shape[1]} states is "
                             f"more than this tool handles (at most {MAX_STATES}: the audit holds thousands of d x d "
                             "matrices at once)")
    elif arr.shape[1] != d:
        raise PriorError(f"{who} returned shape {arr.shape}, expected {(n, d, d)} (n = {n} draws of {d} x {d} "
                         "matrices)")
    arr = arr.astype(np.float64)
    from theory.markov import ROW_SUM_ATOL

    with np.errstate(over="ignore", invalid="ignore"):
        bad = ~np.isfinite(arr).all(axis=(1, 2)) | (arr < 0).any(axis=(1, 2))  # (n,)
        bad |= (arr > 1 + ROW_SUM_ATOL).any(axis=(1, 2)) | (np.abs(arr.sum(axis=2) - 1.0) > ROW_SUM_ATOL).any(axis=1)
        for k in np.flatnonzero(bad)[:1]:  # the first bad draw, named with its row
            big = np.argwhere(np.isfinite(arr[k]) & (arr[k] > 1 + ROW_SUM_ATOL))
            if big.size and not (~np.isfinite(arr[k])).any() and not (arr[k] < 0).any():
                r, c = big[0]
                raise PriorError(f"draw {k} of {who}[{r}, {c}] = {arr[k, r, c]:.6g} is more than 1 (row {r} cannot "
                                 "sum to 1)")
            try:
                validate_stochastic(arr[k], name=f"draw {k} of {who}")
            except TheoryError as exc:
                raise PriorError(str(exc)) from None
    return arr


def relabel_generators(d: int) -> list[tuple[np.ndarray, str]]:
    """A transposition and a d-cycle, with their names: they generate every permutation of ``0..d-1``."""
    if d < 2:
        return []
    swap = np.arange(d)
    swap[[0, 1]] = [1, 0]
    return [(swap, "the transposition of states 0 and 1"),
            (np.roll(np.arange(d), 1), f"the cycle 0 -> 1 -> ... -> {d - 1} -> 0")]


def asymmetric_relabelling(weights: np.ndarray, mats: np.ndarray, decimals: int = 12) -> str | None:
    """``None`` if the finite law ``sum_k w_k delta(M_k)`` is invariant under every relabelling of
    the states, else the name of a generator that changes it.

    Invariance under the two generators of the symmetric group is invariance under all of it.
    Atoms are compared after rounding to ``decimals`` (equal atoms are merged), weights to 1e-12.
    """
    def law(ms):
        out: dict[bytes, float] = {}
        for w, m in zip(weights, ms):
            key = np.round(m, decimals).tobytes()
            out[key] = out.get(key, 0.0) + float(w)
        return out

    base = law(mats)
    for p, name in relabel_generators(mats.shape[1]):
        moved = law(mats[:, p][:, :, p])
        if base.keys() != moved.keys() or any(abs(base[k] - moved[k]) > 1e-12 for k in base):
            return name
    return None


class Prior(abc.ABC):
    """Base class: subclasses implement ``_sample``, :meth:`spec` and :meth:`bind`."""

    d: int | None = None

    @abc.abstractmethod
    def _sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` draws, shape ``(n, d, d)``; ``self.d`` is set."""

    @abc.abstractmethod
    def spec(self) -> str:
        """The one-line spec this prior parses back from (:func:`~sim.priors.parse_prior`)."""

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
        return None if a is None else asymmetric_relabelling(*a) is None

    def atoms(self) -> tuple[np.ndarray, np.ndarray] | None:
        """The finite support: ``(weights (k,), matrices (k, d, d))`` with positive weights summing
        to 1, or ``None`` for a prior without a (small) finite support."""
        return None

    # -- drawing ---------------------------------------------------------------------------
    def sample(self, rng: np.random.Generator, n: int = 1) -> np.ndarray:
        """``n`` transition matrices, shape ``(n, d, d)``, each validated (``validate_draws``, the check
        every prior's draws pass, a user's sampler's too).

        Raises PriorError naming the draw and row if the sampler returned something that
        is not row-stochastic (a user sampler, or numerical trouble).
        """
        if self.d is None:
            raise PriorError(f"prior {self.spec()} has no dimension yet: bind it to d states first")
        return validate_draws(self._sample(rng, n), n, self.d, self.spec())

    def strategy(self):
        """A hypothesis strategy over draws of this prior (shrinks on the seed)."""
        from hypothesis import strategies as st

        return st.integers(0, 2**32 - 1).map(lambda s: self.sample(np.random.default_rng(s), 1)[0])

    def __repr__(self) -> str:
        return self.spec() + ("" if self.d is None else f" [d={self.d}]")
