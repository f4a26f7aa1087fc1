"""Exact marginals and pairwise joints of the tokens on a causal tree.

Model (CLAIMS.md conventions): each root draws ``x_r ~ nu`` (the root law) and each
non-root draws ``x_h ~ pi(x_pa(h), .)``. For a node at depth ``k`` the marginal is
``nu pi^k``. For two nodes with lowest common ancestor ``c`` at distances ``a`` and
``b`` below it,

    P(x_i = s, x_j = t) = sum_u m_c(u) pi^a(u, s) pi^b(u, t),  i.e.  P = (pi^a)^T diag(m_c) pi^b,

computed from matrix powers along the path through ``c`` (never by enumerating the
``d^n`` sequences). Nodes in different components of a forest are independent.
"""
from __future__ import annotations

import numpy as np

from .errors import TheoryError
from .markov import matrix_powers, stationary, validate_prob_vector, validate_stochastic
from .structures import CausalTree

__all__ = [
    "as_tree",
    "root_law",
    "marginal",
    "marginals",
    "pairwise_joint",
    "all_pairwise_joints",
    "channel",
    "sequence_pmf",
    "MAX_ENUMERATION",
]

#: Largest number of sequences ``d**n`` that :func:`sequence_pmf` will enumerate.
MAX_ENUMERATION = 5_000_000


def as_tree(tree) -> CausalTree:
    """Accept a :class:`~theory.CausalTree` or a parent array; anything else is a ``TheoryError``."""
    if isinstance(tree, CausalTree):
        return tree
    try:
        return CausalTree(tree)
    except TheoryError:
        raise
    except Exception as exc:  # e.g. an object that is not iterable
        raise TheoryError(f"tree must be a CausalTree or a parent array, got {type(tree).__name__}: {exc}") from None


def root_law(pi: np.ndarray, root) -> np.ndarray:
    """The law of every root: ``stationary(pi)`` when ``root is None``, else ``root`` validated."""
    if root is None:
        return stationary(pi)
    return validate_prob_vector(root, d=pi.shape[0], name="root")


def _setup(pi, tree, root):
    pi = validate_stochastic(pi)
    tree = as_tree(tree)
    nu = root_law(pi, root)
    return pi, tree, nu


def marginals(pi, tree, root=None) -> np.ndarray:
    """All marginals ``m[h, s] = P(x_h = s)``, shape ``(n, d)``.

    ``root=None`` uses the stationary law of ``pi`` (then every marginal equals it).
    """
    pi, tree, nu = _setup(pi, tree, root)
    powers = matrix_powers(pi, int(tree.depths.max()))
    return np.einsum("a,nab->nb", nu, powers[tree.depths])


def marginal(pi, tree, h: int, root=None) -> np.ndarray:
    """``P(x_h = s)`` for ``s = 0..d-1``: ``nu pi^depth(h)``, shape ``(d,)``."""
    pi, tree, nu = _setup(pi, tree, root)
    k = tree.depth(h)
    return nu @ np.linalg.matrix_power(pi, k)


def pairwise_joint(pi, tree, i: int, j: int, root=None) -> np.ndarray:
    """``P[a, b] = P(x_i = a, x_j = b)``, shape ``(d, d)``.

    Computed as ``(pi^a)^T diag(m_c) pi^b`` through the lowest common ancestor ``c``
    (``a``, ``b`` the distances of ``i``, ``j`` below ``c``); ``outer(m_i, m_j)`` across
    components of a forest; ``diag(m_i)`` when ``i == j``.
    """
    pi, tree, nu = _setup(pi, tree, root)
    c = tree.lca(i, j)
    mpow = np.linalg.matrix_power
    if c is None:
        return np.outer(nu @ mpow(pi, tree.depth(i)), nu @ mpow(pi, tree.depth(j)))
    m_c = nu @ mpow(pi, tree.depth(c))
    a, b = tree.depth(i) - tree.depth(c), tree.depth(j) - tree.depth(c)
    return mpow(pi, a).T @ (m_c[:, None] * mpow(pi, b))


def all_pairwise_joints(pi, tree, root=None) -> np.ndarray:
    """Every pairwise joint at once, shape ``(n, n, d, d)``; ``out[i, j] = pairwise_joint(pi, tree, i, j)``.

    One set of matrix powers shared by all pairs, and one batched matrix product for
    the pairs ``i <= j`` in the same component; the rest by symmetry.
    """
    pi, tree, nu = _setup(pi, tree, root)
    n, d = tree.n, pi.shape[0]
    depths = tree.depths
    powers = matrix_powers(pi, int(depths.max()))  # (K+1, d, d)
    m = np.einsum("a,nab->nb", nu, powers[depths])  # (n, d)
    out = np.empty((n, n, d, d))
    iu, ju = np.triu_indices(n)
    lca = np.array([-1 if (c := tree.lca(i, j)) is None else c for i, j in zip(iu.tolist(), ju.tolist())])
    same = lca >= 0
    # Different components: independent.
    ii, jj = iu[~same], ju[~same]
    out[ii, jj] = m[ii][:, :, None] * m[jj][:, None, :]
    # Same component: (pi^a)^T diag(m_c) pi^b.
    ii, jj, cc = iu[same], ju[same], lca[same]
    a, b = depths[ii] - depths[cc], depths[jj] - depths[cc]
    left = np.swapaxes(powers[a], 1, 2) * m[cc][:, None, :]  # (p, d, d): (pi^a)^T diag(m_c)
    out[ii, jj] = left @ powers[b]
    # Lower triangle by symmetry: P(x_j, x_i) = P(x_i, x_j)^T.
    il, jl = np.tril_indices(n, -1)
    out[il, jl] = np.swapaxes(out[jl, il], 1, 2)
    return out


def channel(pi, tree, src: int, dst: int, root=None) -> tuple[np.ndarray, np.ndarray]:
    """The channel ``x_src -> x_dst`` on the tree and its input law.

    Returns ``(K, p)`` with ``K[a, b] = P(x_dst = b | x_src = a)`` (shape ``(d, d)``) and
    ``p = P(x_src = .)``. Rows with ``p[a] == 0`` are undefined by Bayes' rule; they are
    filled with the marginal of ``x_dst`` (any law would do: they carry no mass).
    """
    joint = pairwise_joint(pi, tree, src, dst, root=root)
    p = joint.sum(axis=1)
    q = joint.sum(axis=0)
    K = np.empty_like(joint)
    pos = p > 0
    K[pos] = joint[pos] / p[pos, None]
    K[~pos] = q
    return K, p


def sequence_pmf(pi, tree, root=None) -> np.ndarray:
    """The full joint law of ``(x_0, ..., x_{n-1})`` by enumeration, shape ``(d,) * n``.

    Only for small trees (``d**n <= MAX_ENUMERATION``): this is the brute-force oracle
    the path formulas are tested against.
    """
    pi, tree, nu = _setup(pi, tree, root)
    d, n = pi.shape[0], tree.n
    if d ** n > MAX_ENUMERATION:
        raise TheoryError(f"enumerating d**n = {d}**{n} sequences exceeds the limit {MAX_ENUMERATION}")
    pmf = np.ones((1,) * n)
    for h, p in enumerate(tree.parents.tolist()):
        shape = [1] * n
        if p < 0:
            shape[h] = d
            pmf = pmf * nu.reshape(shape)
        else:
            shape[p], shape[h] = d, d
            pmf = pmf * pi.reshape(shape)
    return pmf
