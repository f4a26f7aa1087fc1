"""Gradient signals at initialisation: W Theorem 3 and N Lemma (Knowl 3).

**W Theorem 3** (claim W.T3). W's Theorem-1 transformer with an exact layer-1 copier:
the layer-2 attention of position ``h`` over its candidates ``h' = 0..h-1`` is
``A = softmax(p_hat)`` with scores ``p_hat_h' = sum_l x^l_h'^T W x^l_h``. At ``W = 0`` the
scores are 0 whatever the context, so ``A = 1/h`` uniformly and the context plays no
role; the gradient of the cross-entropy on the target sequence with respect to the
scores is an expectation over the target's tokens ``x_0..x_h`` only. Two readings of the
output (CLAIMS.md W.T1):

- ``"mixture"`` (``sigma(W_OV) = pi``; W Thm 1's prediction and the BMA predictive)::

      f(b) = sum_h' A_h' pi[x_h', b],   l = -log f(x_h),
      -dl/dp_hat_h' = A_h' (pi[x_h', x_h] / f(x_h) - 1).

- ``"logits"`` (``W_OV = log pi``, softmax of the attention-mixed logits)::

      z(b) = sum_h' A_h' log pi[x_h', b],   f = softmax(z),   l = -z(x_h) + logsumexp(z),
      dz(b)/dp_hat_h' = A_h' (log pi[x_h', b] - z(b)),
      -dl/dp_hat_h' = A_h' [ (log pi[x_h', x_h] - z(x_h)) - sum_b f(b) (log pi[x_h', b] - z(b)) ].

W Theorem 3 says the expected negative gradient is largest at ``h' = pa(h)``; its
entries are compared with the chi-square proxy ``E[pi(x_h|x_h') / m_h(x_h)] - 1``. Exact
enumeration finds that argmax false for some inputs: with a uniform root law (both
readings), and for the "logits" reading on nearly reducible chains even with the
stationary root (counterexamples in ``tests/theory/test_gradients.py``).

**N Knowl 3** (claim N.K3). For N's reduced model at initialisation the population
gradient of row ``i`` of ``A^(1)`` is ``-(beta0/(S T)) J(S(A1_i)) (g_i + O(T_eff^-1/2))`` with the
idealised signal::

    g[i, j] = E_pi[ sum_{s,s'} pi(s'|s) / mu_pi(s') P(s_j = s, s_i = s' | pi) ] - 1,   j <= i,

roots drawn from ``mu_pi``; ``g[i, p(i)] = E_pi[I_chi2(s_i; s_p(i) | pi)]``, ``g[i, j] = 0`` for
roots ``i`` and ``j < i``, and ``g[i, i] = E[trace pi] - 1``.
"""
from __future__ import annotations

import numpy as np

from .errors import TheoryError, as_real_array
from .joint import MAX_ENUMERATION, all_pairwise_joints, as_tree, root_law, sequence_pmf
from .markov import stationary, validate_prob_vector, validate_stochastic
from .structures import CausalTree

__all__ = [
    "wei_gradient_at_zero",
    "wei_chi2_signal",
    "nichani_gradient_signal",
    "nichani_parent_chi2",
    "READINGS",
]

#: Output readings of W's Theorem-1 model (see the module docstring).
READINGS = ("mixture", "logits")


def _check_h(tree: CausalTree, h) -> int:
    if isinstance(h, (bool, np.bool_)) or not isinstance(h, (int, np.integer)):
        raise TheoryError(f"h = {h!r} is not an integer position")
    h = int(h)
    if not 1 <= h < tree.n:
        raise TheoryError(
            f"h = {h} is out of range: it needs candidate parents 0..h-1, so 1 <= h <= {tree.n - 1} "
            f"for a tree with {tree.n} nodes")
    return h


def _broadcast(table: np.ndarray, n: int, ax_a: int, ax_b: int) -> np.ndarray:
    """View ``table[a, b]`` (shape (d, d)) on axes ``ax_a < ax_b`` of an ``n``-axis grid (a
    candidate ``h' < h`` and the position ``h``: the only order the callers use)."""
    shape = [1] * n
    shape[ax_a] = shape[ax_b] = table.shape[0]
    return table.reshape(shape)


def wei_gradient_at_zero(pi, tree, h: int, root=None, reading: str = "mixture", scores=None) -> np.ndarray:
    """Expected negative gradient ``-E[dl/dp_hat_h']`` of the cross-entropy at ``W = 0`` (W Theorem 3).

    Model (W Theorem 1 with an exact copier; see the module docstring): attention
    ``A = softmax(p_hat)`` over candidates ``h' = 0..h-1`` (``A = 1/h`` at ``W = 0``);

    - ``reading="mixture"``: ``f = sum_h' A_h' pi[x_h', .]``, ``-dl/dp_hat_h' = A_h' (pi[x_h', x_h]/f(x_h) - 1)``;
    - ``reading="logits"``: ``f = softmax(sum_h' A_h' log pi[x_h', .])``,
      ``-dl/dp_hat_h' = A_h' [(log pi[x_h', x_h] - z(x_h)) - E_{b~f}(log pi[x_h', b] - z(b))]``.

    The expectation is over the target sequence ``x_0..x_h`` on the tree (roots ``~ root``,
    stationary when ``None``), computed exactly by enumerating all ``d**(h+1)`` sequences
    (vectorised); sequences of probability 0 are skipped (on the support ``f(x_h) > 0``
    because the true parent is a candidate).

    Parameters
    ----------
    pi : array_like, shape (d, d), row-stochastic
    tree : CausalTree or parent array; only nodes ``0..h`` are used
    h : int, ``1 <= h < n``
    root : None or array_like, shape (d,)
    reading : {"mixture", "logits"}
    scores : None or array_like, shape (h,)
        Layer-2 scores ``p_hat`` at which to evaluate; ``None`` = zeros (``W = 0``).

    Returns
    -------
    ndarray, shape (h,); the entries sum to 0 (softmax Jacobian).

    Raises
    ------
    TheoryError
        For an unknown reading, ``pi`` with zero entries under ``"logits"`` (``log 0``),
        or ``d**(h+1) > MAX_ENUMERATION``.
    """
    pi = validate_stochastic(pi)
    tree = as_tree(tree)
    h = _check_h(tree, h)
    if reading not in READINGS:
        raise TheoryError(f"unknown reading {reading!r}; expected one of {', '.join(READINGS)}")
    if reading == "logits" and np.any(pi == 0):
        r, c = np.argwhere(pi == 0)[0]
        raise TheoryError(
            f"reading 'logits' uses W_OV = log pi, but pi[{r}, {c}] = 0 (row {r}) makes log pi = -inf; "
            "use reading='mixture' or a pi with full support")
    d = pi.shape[0]
    n = h + 1
    if d ** n > MAX_ENUMERATION:
        raise TheoryError(
            f"exact enumeration of d**(h+1) = {d}**{n} target sequences exceeds the limit {MAX_ENUMERATION}")
    if scores is None:
        att = np.full(h, 1.0 / h)
    else:
        sc = as_real_array(scores, "scores")
        if sc.shape != (h,) or not np.all(np.isfinite(sc)):
            raise TheoryError(f"scores must be a finite vector of shape ({h},), got {sc.shape}")
        att = np.exp(sc - sc.max())
        att /= att.sum()
    sub = CausalTree(tree.parents[:n])
    nu = root_law(pi, root)
    pmf = sequence_pmf(pi, sub, root=nu)  # (d,)*(h+1); last axis is x_h
    support = pmf > 0
    grad = np.empty(h)
    if reading == "mixture":
        # f(x) = sum_k A_k pi[x_k, x_h] on the full grid.
        f = sum(att[k] * _broadcast(pi, n, k, h) for k in range(h)) * np.ones(pmf.shape)
        inv_f = np.divide(1.0, f, out=np.zeros_like(f), where=support)
        for k in range(h):
            ratio = _broadcast(pi, n, k, h) * inv_f
            grad[k] = att[k] * (np.sum(pmf * ratio) - pmf.sum())
        return grad
    logpi = np.log(pi)
    # z(b) over the grid of (x_0..x_{h-1}, b): the last axis plays both x_h and b.
    z = sum(att[k] * _broadcast(logpi, n, k, h) for k in range(h)) * np.ones(pmf.shape)
    zmax = z.max(axis=-1, keepdims=True)
    f = np.exp(z - zmax)
    f /= f.sum(axis=-1, keepdims=True)
    for k in range(h):
        centred = _broadcast(logpi, n, k, h) - z  # log pi[x_k, b] - z(b)
        term = centred - np.sum(f * centred, axis=-1, keepdims=True)
        grad[k] = att[k] * np.sum(pmf * term)
    return grad


def wei_chi2_signal(pi, tree, h: int, root=None) -> np.ndarray:
    """Chi-square proxy ``g~_h' = E[pi(x_h | x_h') / m_h(x_h)] - 1`` for ``h' = 0..h-1`` (W Theorem 3).

    ``= sum_{a,b} P(x_h' = a, x_h = b) pi[a, b] / m_h(b) - 1`` with ``m_h`` the marginal of
    ``x_h`` (terms with ``m_h(b) = 0`` carry no mass and are skipped). At the parent under
    a stationary root this equals ``I_chi2(x_h; x_pa(h))``.

    Parameters
    ----------
    pi : array_like, shape (d, d), row-stochastic
    tree : CausalTree or parent array
    h : int, ``1 <= h < n``
    root : None or array_like, shape (d,); ``None`` = stationary law of ``pi``.

    Returns
    -------
    ndarray, shape (h,).
    """
    pi = validate_stochastic(pi)
    tree = as_tree(tree)
    h = _check_h(tree, h)
    sub = CausalTree(tree.parents[:h + 1])
    joints = all_pairwise_joints(pi, sub, root=root)[:h, h]  # (h, d, d): P(x_h' = a, x_h = b)
    m_h = joints[0].sum(axis=0)
    w = np.divide(pi, m_h[None, :], out=np.zeros_like(pi), where=m_h[None, :] > 0)
    return np.einsum("kab,ab->k", joints, w) - 1.0


def _validate_prior(pis, weights) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    """Validate prior samples ``(K, S, S)`` and weights ``(K,)``; return them with each ``mu_pi``."""
    arr = as_real_array(pis, "pis")
    if arr.ndim != 3 or arr.shape[0] == 0 or arr.shape[1] != arr.shape[2] or arr.shape[1] == 0:
        raise TheoryError(f"pis must be a non-empty stack of square matrices, shape (K, S, S), got {arr.shape}")
    K = arr.shape[0]
    mus = []
    for k in range(K):
        try:
            validate_stochastic(arr[k], name=f"pis[{k}]")
            mus.append(stationary(arr[k]))
        except TheoryError as exc:
            msg = str(exc)
            if not msg.startswith(f"pis[{k}]"):
                msg = f"pis[{k}] (prior sample {k}): {msg}"
            raise TheoryError(msg) from None
    if weights is None:
        w = np.full(K, 1.0 / K)
    else:
        w = validate_prob_vector(weights, d=K, name="weights")
    return arr, w, mus


def nichani_gradient_signal(pis, tree, weights=None) -> np.ndarray:
    """N's idealised gradient ``g[i, j] = E_pi[ sum_{s,s'} pi(s'|s)/mu_pi(s') P(s_j=s, s_i=s' | pi) ] - 1`` (N Knowl 3).

    Prior over ``pi``: the samples ``pis[k]`` with probabilities ``weights[k]`` (default
    uniform). Given ``pi``, tokens follow N's DAG ``tree`` (at most one parent, roots
    anywhere) with every root ``~ mu_pi``, so every marginal is ``mu_pi``; the pairwise
    joints are exact (:func:`theory.joint.all_pairwise_joints`). For ``j = i`` the joint is
    ``diag(mu_pi)``, so ``g[i, i] = E[trace pi] - 1``. Terms with ``mu_pi(s') = 0`` carry no
    mass and are skipped (N assumes ``pi`` irreducible with full support).

    Parameters
    ----------
    pis : array_like, shape (K, S, S)
        Prior samples, each row-stochastic with a unique stationary law.
    tree : CausalTree or parent array, length T
    weights : None or array_like, shape (K,), non-negative, summing to 1

    Returns
    -------
    ndarray, shape (T, T): ``g[i, j]`` for ``j <= i`` (diagonal included); entries above
    the diagonal (``j > i``, not candidates of a causal row) are 0.
    """
    arr, w, mus = _validate_prior(pis, weights)
    tree = as_tree(tree)
    T = tree.n
    g = np.zeros((T, T))
    for k in range(arr.shape[0]):
        pi, mu = arr[k], mus[k]
        joints = all_pairwise_joints(pi, tree, root=mu)  # (T, T, S, S): [j, i, s, s'] = P(s_j=s, s_i=s')
        ratio = np.divide(pi, mu[None, :], out=np.zeros_like(pi), where=mu[None, :] > 0)
        # g_k[i, j] = sum_{s,s'} P(s_j=s, s_i=s') pi(s,s')/mu(s') - 1
        g += w[k] * (np.einsum("jiab,ab->ij", joints, ratio) - 1.0)
    return np.tril(g)


def nichani_parent_chi2(pis, tree, weights=None) -> np.ndarray:
    """``E_pi[I_chi2(s_i; s_p(i) | pi)]`` for every position (0 for roots) (N Knowl 3, item 1).

    ``I_chi2(X; Y) = sum P(x, y)^2 / (P(x) P(y)) - 1`` with ``P(s_p(i) = s, s_i = s') =
    mu_pi(s) pi(s, s')`` (roots ``~ mu_pi``), averaged over the prior samples.

    Parameters
    ----------
    pis : array_like, shape (K, S, S)
    tree : CausalTree or parent array, length T
    weights : None or array_like, shape (K,)

    Returns
    -------
    ndarray, shape (T,).
    """
    arr, w, mus = _validate_prior(pis, weights)
    tree = as_tree(tree)
    val = 0.0
    for k in range(arr.shape[0]):
        pi, mu = arr[k], mus[k]
        joint = mu[:, None] * pi
        denom = mu[:, None] * mu[None, :]
        val += w[k] * (np.sum(np.divide(joint ** 2, denom, out=np.zeros_like(joint), where=joint > 0)) - 1.0)
    out = np.where(tree.parents >= 0, val, 0.0)
    return out
