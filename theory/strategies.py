"""Public hypothesis strategies for the objects of the theory (DESIGN.md principle 9).

Every strategy builds its values *by construction*, never by filtering, so each draw is
valid and the search spends its budget on the interesting region:

- probability vectors and row-stochastic matrices, with an optional entry floor
  ``min_entry`` (N's lower bound ``pi(s'|s) >= gamma / S`` with ``min_entry = gamma / S``);
- causal trees (W's random recursive trees) and forests (N's DAGs with at most one parent);
- contexts of ``L`` token sequences of length ``H``;
- finite priors over transition matrices, and their permutation-symmetric versions
  (N Knowl 10, assumption 3).

Degenerate values are reachable on purpose: exact zeros, entries of order ``1e-12``,
one-hot rows, reducible chains, chains and stars. Draws shrink towards the simplest
values: uniform rows, the chain ``0 -> 1 -> ... -> n-1``.

This is the only ``theory`` module that imports ``hypothesis``; nothing else in ``theory``
imports it, so the exact core stays usable without it. Import it as
``theory.strategies`` (it is not re-exported by ``theory``).

Examples
--------
>>> from hypothesis import given
>>> from theory.strategies import stochastic_matrices, causal_trees
>>> @given(stochastic_matrices(3, min_entry=0.05), causal_trees(6))
... def test_my_assumption(pi, tree):
...     assert pi.min() >= 0.05 and tree.n == 6
>>> test_my_assumption()
"""
from __future__ import annotations

import itertools
import math
from numbers import Integral, Real

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from .errors import TheoryError, as_real_array
from .markov import validate_prob_vector, validate_stochastic
from .structures import CausalTree

__all__ = [
    "prob_vectors",
    "stochastic_matrices",
    "causal_trees",
    "contexts",
    "finite_priors",
    "permutation_symmetrized",
    "symmetric_priors",
    "MAX_SYMMETRIZED_D",
]

#: Largest number of states for which the ``d!`` permutation orbit is built.
MAX_SYMMETRIZED_D = 6

# Raw weights before normalisation. Zero comes first because hypothesis shrinks a one_of
# towards its first branch: weights shrink to 0 (then the vector is uniform). A branch of
# its own makes exact zeros common enough that one-hot rows and reducible chains turn up;
# small integers shrink well; the tiny branch gives near-degenerate rows.
_WEIGHTS = st.one_of(
    st.just(0.0),
    st.integers(min_value=1, max_value=10).map(float),
    st.floats(min_value=0.0, max_value=1.0),
    st.floats(min_value=1e-12, max_value=1e-9),
)


# -- argument checking ---------------------------------------------------------------
def _is_int(v) -> bool:
    return isinstance(v, Integral) and not isinstance(v, bool)


def _size_strategy(value, name: str, minimum: int = 1) -> st.SearchStrategy:
    """An int (checked now) or a strategy of ints (checked at draw time)."""
    if isinstance(value, st.SearchStrategy):
        return value.map(lambda v: _check_size(v, name, minimum))
    return st.just(_check_size(value, name, minimum))


def _check_size(value, name: str, minimum: int) -> int:
    if not _is_int(value):
        raise TheoryError(f"{name} must be an integer or a hypothesis strategy of integers, got {value!r}")
    if value < minimum:
        raise TheoryError(f"{name} = {value} must be >= {minimum}")
    return int(value)


def _check_min_entry(min_entry) -> float:
    if isinstance(min_entry, bool) or not isinstance(min_entry, Real) or not math.isfinite(min_entry):
        raise TheoryError(f"min_entry must be a finite number in [0, 1/d], got {min_entry!r}")
    if min_entry < 0:
        raise TheoryError(f"min_entry = {min_entry} is negative; it is a lower bound on probabilities")
    if min_entry > 1:
        raise TheoryError(f"min_entry = {min_entry} exceeds 1, so no probability vector meets it")
    return float(min_entry)


def _check_floor_for(d: int, min_entry: float) -> None:
    if min_entry > 1.0 / d:
        raise TheoryError(
            f"min_entry = {min_entry} exceeds 1/d = {1.0 / d:.6g} for d = {d}: d entries of at least "
            f"min_entry would sum to {d * min_entry:.6g} > 1")


# -- construction ----------------------------------------------------------------------
def _floored_vector(weights: np.ndarray, min_entry: float) -> np.ndarray:
    """``min_entry + (1 - d min_entry) w / sum(w)`` (uniform for all-zero ``w``), summing to 1."""
    d = weights.size
    slack = max(0.0, 1.0 - d * min_entry)
    total = weights.sum()
    shape = weights / total if total > 0 else np.full(d, 1.0 / d)
    p = min_entry + slack * shape
    # Put the round-off of the sum on the largest entry: it is >= 1/d >= min_entry, so
    # the floor still holds and the sum is 1 to within an ulp or two.
    p[np.argmax(p)] += 1.0 - p.sum()
    return p


@st.composite
def _vector_of_length(draw, d: int, min_entry: float) -> np.ndarray:
    weights = np.array(draw(st.lists(_WEIGHTS, min_size=d, max_size=d)), dtype=np.float64)
    return _floored_vector(weights, min_entry)


@st.composite
def _prob_vectors(draw, sizes, min_entry):
    d = draw(sizes)
    _check_floor_for(d, min_entry)
    return draw(_vector_of_length(d, min_entry))


@st.composite
def _matrix_of_size(draw, d: int, min_entry: float) -> np.ndarray:
    return np.stack([draw(_vector_of_length(d, min_entry)) for _ in range(d)])


@st.composite
def _stochastic_matrices(draw, sizes, min_entry):
    d = draw(sizes)
    _check_floor_for(d, min_entry)
    return draw(_matrix_of_size(d, min_entry))


@st.composite
def _causal_trees(draw, sizes, forest: bool):
    n = draw(sizes)
    parents = [-1]
    for h in range(1, n):
        # parent = h - 1 - offset: offset 0 (the chain edge) is what shrinking aims at;
        # for a forest offset h gives -1, a new root.
        offset = draw(st.integers(min_value=0, max_value=h if forest else h - 1))
        parents.append(h - 1 - offset)
    return CausalTree(parents)


@st.composite
def _finite_priors(draw, sizes, components, min_entry):
    d, k = draw(sizes), draw(components)
    _check_floor_for(d, min_entry)
    pis = np.stack([draw(_matrix_of_size(d, min_entry)) for _ in range(k)])
    weights = draw(_vector_of_length(k, 0.0))
    return pis, weights


# -- public strategies -------------------------------------------------------------------
def prob_vectors(d, *, min_entry: float = 0.0) -> st.SearchStrategy[np.ndarray]:
    """Probability vectors ``p`` of length ``d`` with every entry ``>= min_entry``.

    Built as ``p = min_entry + (1 - d min_entry) w / sum(w)`` from drawn non-negative
    weights ``w`` (exact zeros, integers 1..10, floats in ``[0, 1]`` and tiny floats in
    ``[1e-12, 1e-9]``, so zero and near-zero entries occur); all-zero weights give
    the uniform vector, which is also where draws shrink to. The round-off of the sum is
    put on the largest entry, so ``validate_prob_vector`` accepts every draw.

    Parameters
    ----------
    d : int >= 1, or a strategy of ints
        Number of states.
    min_entry : float in ``[0, 1/d]``
        Floor on every entry (N Knowl 10's ``gamma / S``). ``min_entry = 1/d`` forces the
        uniform vector.

    Returns
    -------
    SearchStrategy of ndarray, shape (d,), float64.

    Raises
    ------
    TheoryError
        For a ``d`` that is not a positive integer or a ``min_entry`` outside ``[0, 1/d]``
        (when ``d`` is a strategy, the floor is checked against each drawn ``d``).

    Examples
    --------
    >>> from hypothesis import given
    >>> @given(prob_vectors(4, min_entry=0.01))
    ... def test_floor(p):
    ...     assert p.min() >= 0.01 and abs(p.sum() - 1) < 1e-12
    >>> test_floor()
    """
    min_entry = _check_min_entry(min_entry)
    sizes = _size_strategy(d, "d")
    if _is_int(d):
        _check_floor_for(int(d), min_entry)
    return _prob_vectors(sizes, min_entry)


def stochastic_matrices(d, *, min_entry: float = 0.0) -> st.SearchStrategy[np.ndarray]:
    """Row-stochastic matrices ``pi[s, t] = P(child = t | parent = s)``, shape ``(d, d)``.

    Each row is an independent draw of :func:`prob_vectors` ``(d, min_entry=min_entry)``,
    so with ``min_entry = 0`` one-hot rows, the identity (a reducible chain), permutation
    matrices (periodic chains) and entries of order ``1e-12`` are all reachable; with
    ``min_entry > 0`` the chain is irreducible and aperiodic with ``min pi >= min_entry``
    (N Knowl 10, assumption 1, with ``min_entry = gamma / S``). Draws shrink towards the
    uniform matrix ``11^T / d``.

    Parameters
    ----------
    d : int >= 1, or a strategy of ints
    min_entry : float in ``[0, 1/d]``

    Returns
    -------
    SearchStrategy of ndarray, shape (d, d), float64, accepted by ``validate_stochastic``.

    Examples
    --------
    >>> from hypothesis import given, strategies as st
    >>> @given(stochastic_matrices(st.integers(2, 4), min_entry=0.01))
    ... def test_rows(pi):
    ...     assert np.allclose(pi.sum(axis=1), 1) and pi.min() >= 0.01
    >>> test_rows()
    """
    min_entry = _check_min_entry(min_entry)
    sizes = _size_strategy(d, "d")
    if _is_int(d):
        _check_floor_for(int(d), min_entry)
    return _stochastic_matrices(sizes, min_entry)


def causal_trees(n, *, forest: bool = False) -> st.SearchStrategy[CausalTree]:
    """Causal trees (``forest=False``) or forests (``forest=True``) on ``n`` positions.

    ``forest=False``: W's trees, one root at 0 and ``parents[h] in {0..h-1}`` for
    ``h >= 1`` (every random recursive tree is reachable). ``forest=True``: N's DAGs with at
    most one parent, ``parents[h] in {-1, 0..h-1}`` (roots anywhere). Node 0 is always a
    root. Each parent is drawn as ``h - 1 - offset``, so draws shrink towards the chain
    ``parents = [-1, 0, 1, ..., n-2]``; the star (all parents 0) is the other extreme.

    Parameters
    ----------
    n : int >= 1, or a strategy of ints
    forest : bool

    Returns
    -------
    SearchStrategy of :class:`~theory.structures.CausalTree`.

    Examples
    --------
    >>> from hypothesis import given
    >>> @given(causal_trees(5, forest=True))
    ... def test_root(tree):
    ...     assert tree.parents[0] == -1
    >>> test_root()
    """
    if not isinstance(forest, bool):
        raise TheoryError(f"forest must be True or False, got {forest!r}")
    return _causal_trees(_size_strategy(n, "n"), forest)


def contexts(L, H, d) -> st.SearchStrategy[np.ndarray]:
    """Contexts of ``L`` token sequences of length ``H``: int64 arrays, shape ``(L, H)``.

    ``x[l, h]`` is the token at position ``h`` of example ``l``, in ``0..d-1`` (W's
    context of L sequences). Tokens are independent draws, so a context is *not* a sample
    of any particular chain: it is the input space of functions such as the BMA posterior
    (W Lemma 1), which must be valid for every context. Draws shrink to all zeros.

    Parameters
    ----------
    L, H, d : int >= 1, or strategies of ints

    Examples
    --------
    >>> from hypothesis import given
    >>> @given(contexts(3, 5, 2))
    ... def test_tokens(x):
    ...     assert x.shape == (3, 5) and set(x.ravel()) <= {0, 1}
    >>> test_tokens()
    """
    Ls, Hs, ds = _size_strategy(L, "L"), _size_strategy(H, "H"), _size_strategy(d, "d")

    @st.composite
    def _contexts(draw):
        n_ex, n_pos, n_states = draw(Ls), draw(Hs), draw(ds)
        return draw(hnp.arrays(np.int64, (n_ex, n_pos), elements=st.integers(0, n_states - 1)))

    return _contexts()


def finite_priors(d, k, *, min_entry: float = 0.0) -> st.SearchStrategy[tuple[np.ndarray, np.ndarray]]:
    """Finite priors ``sum_j weights[j] delta(pis[j])`` over ``d x d`` transition matrices.

    ``pis[j]`` are independent draws of :func:`stochastic_matrices` ``(d, min_entry=...)``
    and ``weights`` a draw of :func:`prob_vectors` ``(k)`` (weights may be 0 or tiny:
    atoms that carry no mass are valid priors too). Expectations under the prior are
    ``E[f(pi)] = sum_j weights[j] f(pis[j])``, e.g. N's ``g_{i,j} = E_pi[...]`` (N Knowl 3).

    Parameters
    ----------
    d : int >= 1, or a strategy of ints
        Number of states.
    k : int >= 1, or a strategy of ints
        Number of atoms.
    min_entry : float in ``[0, 1/d]``
        Floor on every entry of every atom (N Knowl 10, assumption 1).

    Returns
    -------
    SearchStrategy of ``(pis, weights)``: ndarray shape ``(k, d, d)`` and ndarray shape ``(k,)``.

    Examples
    --------
    >>> from hypothesis import given
    >>> @given(finite_priors(3, 2, min_entry=0.1))
    ... def test_mean_is_stochastic(prior):
    ...     pis, weights = prior
    ...     mean = np.einsum("k,kij->ij", weights, pis)
    ...     assert np.allclose(mean.sum(axis=1), 1)
    >>> test_mean_is_stochastic()
    """
    min_entry = _check_min_entry(min_entry)
    sizes = _size_strategy(d, "d")
    if _is_int(d):
        _check_floor_for(int(d), min_entry)
    return _finite_priors(sizes, _size_strategy(k, "k"), min_entry)


def _validate_prior(pis, weights) -> tuple[np.ndarray, np.ndarray]:
    arr = as_real_array(pis, "pis")
    if arr.ndim != 3 or arr.shape[0] == 0 or arr.shape[1] != arr.shape[2]:
        raise TheoryError(f"pis must have shape (k, d, d) with k >= 1, got {arr.shape}")
    for j in range(arr.shape[0]):
        validate_stochastic(arr[j], name=f"pis[{j}]")
    w = validate_prob_vector(weights, d=arr.shape[0], name="weights")
    return arr, w


def permutation_symmetrized(pis, weights) -> tuple[np.ndarray, np.ndarray]:
    """The orbit of a finite prior under simultaneous relabelling of the states.

    Returns the prior ``sum_j sum_sigma (weights[j] / d!) delta(sigma^{-1} pis[j] sigma)``
    over all ``d!`` permutations ``sigma`` of ``0..d-1``, where
    ``(sigma^{-1} pi sigma)[a, b] = pi[sigma(a), sigma(b)]``. It satisfies the permutation
    symmetry half of N Knowl 10 assumption 3 (``sigma^{-1} pi sigma`` has the law of
    ``pi`` for every ``sigma``), and keeps the floor and every other property of the atoms
    that relabelling preserves.

    Its mean commutes with every permutation, so it is ``a I + b 11^T``: with
    ``tau = sum_j weights[j] trace(pis[j])`` the diagonal is ``tau / d`` and the
    off-diagonal ``(d - tau) / (d (d - 1))``. The *uniform mean* half of assumption 3,
    ``E[pi] = 11^T / d``, therefore holds exactly when ``tau = 1``; use
    :func:`symmetric_priors` for priors that meet both halves by construction.

    Parameters
    ----------
    pis : array_like, shape (k, d, d), each row-stochastic
    weights : array_like, shape (k,), a probability vector

    Returns
    -------
    (pis_sym, weights_sym) : ndarray shape ``(k d!, d, d)``, ndarray shape ``(k d!,)``
        Atom ``j d! + r`` is ``pis[j]`` relabelled by the ``r``-th permutation in
        ``itertools.permutations`` order (the identity first); equal atoms are not merged.

    Raises
    ------
    TheoryError
        For invalid atoms or weights (naming the atom and row), or ``d > 6``
        (``d!`` atoms per atom would be more than 720).

    Examples
    --------
    >>> pis = np.array([[[0.9, 0.1], [0.3, 0.7]]])
    >>> sym, w = permutation_symmetrized(pis, [1.0])
    >>> sym[1], w
    (array([[0.7, 0.3],
           [0.1, 0.9]]), array([0.5, 0.5]))
    """
    arr, w = _validate_prior(pis, weights)
    k, d = arr.shape[0], arr.shape[1]
    if d > MAX_SYMMETRIZED_D:
        raise TheoryError(
            f"d = {d} states would give {math.factorial(d)} permutations per atom; "
            f"permutation_symmetrized supports d <= {MAX_SYMMETRIZED_D}")
    perms = np.array(list(itertools.permutations(range(d))), dtype=np.int64)  # (d!, d)
    # out[j, r, a, b] = pis[j, perm_r[a], perm_r[b]]
    out = arr[:, perms[:, :, None], perms[:, None, :]]  # (k, d!, d, d)
    out_w = np.repeat(w / len(perms), len(perms))
    return out.reshape(k * len(perms), d, d), out_w


def _balancing_atom(d: int, min_entry: float, high_trace: bool) -> np.ndarray:
    """The permutation-invariant stochastic matrix with the largest/smallest trace under the floor."""
    if high_trace:
        off = min_entry
        diag = 1.0 - (d - 1) * min_entry
    else:
        diag = min_entry
        off = (1.0 - min_entry) / (d - 1)
    # Every row is the same multiset of values, so the atom is exactly invariant under
    # relabelling; its row sums are 1 up to an ulp or two (no per-row correction, which
    # would break the exact symmetry).
    out = np.full((d, d), off)
    np.fill_diagonal(out, diag)
    return out


@st.composite
def _symmetric_priors(draw, sizes, components, min_entry, uniform_mean):
    d = draw(sizes)
    if d > MAX_SYMMETRIZED_D:
        raise TheoryError(f"symmetric_priors supports d <= {MAX_SYMMETRIZED_D}, drew d = {d}")
    _check_floor_for(d, min_entry)
    pis, weights = draw(_finite_priors(st.just(d), components, min_entry))
    sym, sym_w = permutation_symmetrized(pis, weights)
    if not uniform_mean or d == 1:
        return sym, sym_w
    tau = float(np.einsum("k,kii->", weights, pis))
    if tau == 1.0:
        return sym, sym_w
    # Mix in one permutation-invariant atom on the other side of trace 1 so the mixture's
    # mean trace is 1, i.e. E[pi] = 11^T / d. Its trace is d*min_entry < 1 or
    # d*(1 - (d-1)*min_entry) > 1; min_entry = 1/d would force tau = 1 up to round-off.
    atom = _balancing_atom(d, min_entry, high_trace=tau < 1.0)
    tau_atom = float(np.trace(atom))
    if (tau - 1.0) * (tau_atom - 1.0) >= 0:  # only when min_entry == 1/d (round-off in tau)
        return sym, sym_w
    lam = (tau - 1.0) / (tau - tau_atom)
    return (np.concatenate([sym, atom[None]]),
            np.concatenate([(1.0 - lam) * sym_w, [lam]]))


def symmetric_priors(d, k, *, min_entry: float = 0.0,
                     uniform_mean: bool = True) -> st.SearchStrategy[tuple[np.ndarray, np.ndarray]]:
    """Finite priors meeting N Knowl 10 assumption 3: permutation symmetry and uniform mean.

    Draws a :func:`finite_priors` ``(d, k, min_entry=...)``, takes its orbit with
    :func:`permutation_symmetrized`, and (``uniform_mean=True``) mixes in one
    permutation-invariant atom ``B`` with weight ``lam`` chosen so that the mean trace
    ``tau`` becomes 1, which makes ``E[pi] = 11^T / d``. ``B`` has ``min_entry`` on the
    diagonal (trace below 1) when ``tau > 1``, and ``min_entry`` off the diagonal (trace
    above 1) when ``tau < 1``, so the floor holds for every atom.

    Parameters
    ----------
    d : int in ``1..6``, or a strategy of such ints
    k : int >= 1, or a strategy of ints
        Atoms before symmetrisation; the result has ``k d!`` or ``k d! + 1`` atoms.
    min_entry : float in ``[0, 1/d]``
    uniform_mean : bool
        ``False`` gives the plain orbit (mean ``a I + b 11^T``, see
        :func:`permutation_symmetrized`).

    Returns
    -------
    SearchStrategy of ``(pis, weights)``: ndarray shape ``(m, d, d)``, ndarray shape ``(m,)``.

    Examples
    --------
    >>> from hypothesis import given
    >>> @given(symmetric_priors(3, 2, min_entry=0.05))
    ... def test_uniform_mean(prior):
    ...     pis, weights = prior
    ...     assert np.allclose(np.einsum("k,kij->ij", weights, pis), 1 / 3)
    >>> test_uniform_mean()
    """
    min_entry = _check_min_entry(min_entry)
    if not isinstance(uniform_mean, bool):
        raise TheoryError(f"uniform_mean must be True or False, got {uniform_mean!r}")
    if _is_int(d):
        if d > MAX_SYMMETRIZED_D:
            raise TheoryError(f"symmetric_priors supports d <= {MAX_SYMMETRIZED_D} (d! atoms), got d = {d}")
        _check_floor_for(int(d), min_entry)
    return _symmetric_priors(_size_strategy(d, "d"), _size_strategy(k, "k"), min_entry, uniform_mean)
