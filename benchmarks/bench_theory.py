"""Benchmarks of the exact core against the obvious baselines, measured in the same run.

1. ``pairwise``: every pairwise joint and every chi-square mutual information of a
   50-node random recursive tree with d = 50. Ours: :func:`theory.all_pairwise_joints`
   (shared matrix powers, one batched product) and a vectorised ``I_chi2`` over all pairs.
   Baseline: per ordered pair, walk up to the LCA in Python, ``np.linalg.matrix_power``
   from scratch, and :func:`theory.mutual_information` on each joint.
2. ``bma``: W Lemma 1 posteriors ``P(pa(h) = h' | context)`` for every position
   ``h = 1..H-1`` of 4096 contexts (L = 10, H = 50, d = 20). Ours:
   :func:`theory.bma.bma_posterior` per ``h`` on the whole batch, and
   :func:`theory.bma.bma_posterior_matrix` (all ``h`` at once). Baseline: plain Python loops
   per context, timed on a subset and scaled to the full batch.

The functions that compute are importable (the tests check that the fast and the
straightforward paths agree on small sizes); :func:`run` times them and returns rows for
``python -m benchmarks``. Inputs come from ``np.random.default_rng(seed)``.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

import theory

__all__ = [
    "BenchRow",
    "random_recursive_tree",
    "random_transition_matrix",
    "chi2_mutual_informations",
    "pairwise_chi2_vectorised",
    "pairwise_chi2_baseline",
    "bma_posteriors_per_h",
    "bma_posteriors_matrix",
    "bma_posteriors_baseline",
    "bench_pairwise",
    "bench_bma",
    "run",
]


@dataclass(frozen=True)
class BenchRow:
    """One line of the benchmark table; times are the best of the repeats, in seconds."""

    name: str
    ours_s: float
    baseline_s: float
    max_abs_diff: float
    tolerance: float
    note: str = ""

    @property
    def ratio(self) -> float:
        """Speed-up: baseline time over ours."""
        return self.baseline_s / self.ours_s if self.ours_s > 0 else math.inf

    @property
    def agree(self) -> bool:
        return self.max_abs_diff <= self.tolerance


def _best_of(fn, repeats: int):
    """``(best wall time over repeats, last result)`` with ``time.perf_counter``."""
    best, out = math.inf, None
    for _ in range(max(1, repeats)):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


# -- inputs ----------------------------------------------------------------------------------------
def random_recursive_tree(n: int, rng: np.random.Generator) -> theory.CausalTree:
    """W's random recursive tree: ``parents[h] ~ Unif{0..h-1}`` for ``h >= 1``."""
    return theory.CausalTree([-1] + [int(rng.integers(0, h)) for h in range(1, n)])


def random_transition_matrix(d: int, rng: np.random.Generator, alpha: float = 1.0) -> np.ndarray:
    """Rows i.i.d. Dirichlet(alpha), shape ``(d, d)``."""
    return rng.dirichlet(np.full(d, alpha), size=d)


# -- 1. pairwise joints and chi-square informations ------------------------------------------
def chi2_mutual_informations(joints: np.ndarray) -> np.ndarray:
    """``I_chi2[i, j] = sum_ab (P - Px Py)^2 / (Px Py)`` for joints of shape ``(n, n, d, d)``.

    Same formula and same marginals as :func:`theory.mutual_information` (``kind="chi2"``),
    over the pairs ``i <= j`` at once; the lower triangle by symmetry of ``I``.
    """
    n = joints.shape[0]
    iu, ju = np.triu_indices(n)
    P = joints[iu, ju]  # (p, d, d)
    prod = P.sum(axis=2)[:, :, None] * P.sum(axis=1)[:, None, :]  # (p, d, d): Px Py
    terms = np.divide((P - prod) ** 2, prod, out=np.zeros_like(P), where=prod > 0)
    out = np.empty((n, n))
    out[iu, ju] = terms.sum(axis=(1, 2))
    out[ju, iu] = out[iu, ju]
    return out


def pairwise_chi2_vectorised(pi, tree, root=None) -> tuple[np.ndarray, np.ndarray]:
    """``(joints (n, n, d, d), I_chi2 (n, n))`` from :func:`theory.all_pairwise_joints`."""
    joints = theory.all_pairwise_joints(pi, tree, root=root)
    return joints, chi2_mutual_informations(joints)


def pairwise_chi2_baseline(pi, tree, root=None) -> tuple[np.ndarray, np.ndarray]:
    """The straightforward path: per ordered pair, LCA by walking up, powers from scratch."""
    pi = np.asarray(pi, dtype=np.float64)
    tree = theory.CausalTree(tree) if not isinstance(tree, theory.CausalTree) else tree
    parents = tree.parents.tolist()
    nu = theory.stationary(pi) if root is None else np.asarray(root, dtype=np.float64)
    n, d = len(parents), pi.shape[0]
    mpow = np.linalg.matrix_power

    def depth(h):
        k = 0
        while parents[h] >= 0:
            h, k = parents[h], k + 1
        return k

    joints = np.empty((n, n, d, d))
    mi = np.empty((n, n))
    for i in range(n):
        for j in range(n):
            up_i, h, k = {}, i, 0  # ancestors of i with their distance from i
            while True:
                up_i[h] = k
                if parents[h] < 0:
                    break
                h, k = parents[h], k + 1
            c, b = j, 0
            while c not in up_i and parents[c] >= 0:
                c, b = parents[c], b + 1
            if c in up_i:
                m_c = nu @ mpow(pi, depth(c))
                J = mpow(pi, up_i[c]).T @ (m_c[:, None] * mpow(pi, b))
            else:  # different components of a forest
                J = np.outer(nu @ mpow(pi, depth(i)), nu @ mpow(pi, depth(j)))
            joints[i, j] = J
            mi[i, j] = theory.mutual_information(J, kind="chi2")
    return joints, mi


def bench_pairwise(*, n: int = 50, d: int = 50, seed: int = 0, repeats: int = 3) -> BenchRow:
    rng = np.random.default_rng(seed)
    tree = random_recursive_tree(n, rng)
    pi = random_transition_matrix(d, rng)
    t_ours, (J, I) = _best_of(lambda: pairwise_chi2_vectorised(pi, tree), repeats)
    t_base, (Jb, Ib) = _best_of(lambda: pairwise_chi2_baseline(pi, tree), min(repeats, 2))
    diff = max(float(np.abs(J - Jb).max()), float(np.abs(I - Ib).max()))
    return BenchRow(f"pairwise joints + I_chi2 (n={n}, d={d})", t_ours, t_base, diff, 1e-12,
                    note=f"depth {int(tree.depths.max())}, {n * n} pairs")


# -- 2. BMA posteriors ----------------------------------------------------------------------------
def bma_posteriors_per_h(contexts, pi) -> np.ndarray:
    """``M[b, h, h'] = P(pa(h) = h' | contexts[b])`` from one batched ``bma_posterior`` call per ``h``."""
    B, _, H = contexts.shape
    out = np.zeros((B, H, H))
    for h in range(1, H):
        out[:, h, :h] = theory.bma.bma_posterior(contexts, pi, h)
    return out


def bma_posteriors_matrix(contexts, pi) -> np.ndarray:
    """The same ``(B, H, H)`` array from one ``bma_posterior_matrix`` call."""
    return theory.bma.bma_posterior_matrix(contexts, pi)


def bma_posteriors_baseline(contexts, pi) -> np.ndarray:
    """Plain Python: per context, per ``h``, per candidate ``h'``, sum the log-likelihood over examples."""
    logpi = [[math.log(v) if v > 0 else -math.inf for v in row] for row in np.asarray(pi).tolist()]
    ctx = np.asarray(contexts).tolist()
    B, L, H = len(ctx), len(ctx[0]), len(ctx[0][0])
    out = np.zeros((B, H, H))
    for b in range(B):
        x = ctx[b]
        for h in range(1, H):
            scores = [sum(logpi[x[l][hp]][x[l][h]] for l in range(L)) for hp in range(h)]
            top = max(scores)
            weights = [math.exp(s - top) for s in scores]
            total = sum(weights)
            for hp in range(h):
                out[b, h, hp] = weights[hp] / total
    return out


def bench_bma(*, B: int = 4096, L: int = 10, H: int = 50, d: int = 20, baseline_B: int = 128,
              seed: int = 1, repeats: int = 3) -> list[BenchRow]:
    """Two rows (per-h calls, matrix call) against one baseline timed on ``baseline_B`` contexts."""
    rng = np.random.default_rng(seed)
    pi = random_transition_matrix(d, rng)
    # Tokens from the model itself: a fresh random recursive tree per context, uniform roots.
    parents = np.zeros((B, H), dtype=np.int64)  # (B, H)
    for h in range(1, H):
        parents[:, h] = rng.integers(0, h, size=B)
    contexts = np.empty((B, L, H), dtype=np.int64)  # (B, L, H)
    contexts[:, :, 0] = rng.integers(0, d, size=(B, L))
    cdf = np.cumsum(pi, axis=1)  # (d, d)
    for h in range(1, H):
        parent_tokens = np.take_along_axis(contexts, parents[:, None, h:h + 1].repeat(L, axis=1), axis=2)[..., 0]
        u = rng.random((B, L, 1))
        contexts[:, :, h] = np.minimum((u > cdf[parent_tokens]).sum(axis=2), d - 1)  # inverse-cdf draw
    sub = contexts[:baseline_B]
    t_base_sub, M_base = _best_of(lambda: bma_posteriors_baseline(sub, pi), min(repeats, 2))
    t_base = t_base_sub * B / baseline_B
    note = f"baseline timed on {baseline_B} contexts, scaled x{B / baseline_B:g}"
    rows = []
    for label, fn in (("bma_posterior per h", bma_posteriors_per_h), ("bma_posterior_matrix", bma_posteriors_matrix)):
        t_ours, M = _best_of(lambda: fn(contexts, pi), repeats)
        diff = float(np.abs(M[:baseline_B] - M_base).max())
        rows.append(BenchRow(f"{label} (B={B}, L={L}, H={H}, d={d})", t_ours, t_base, diff, 1e-12, note=note))
    return rows


def run(*, quick: bool = False, repeats: int = 3) -> list[BenchRow]:
    """All benchmarks of this module; ``quick`` shrinks the sizes for a smoke run."""
    if quick:
        return [bench_pairwise(n=12, d=8, repeats=1),
                *bench_bma(B=64, L=4, H=12, d=5, baseline_B=16, repeats=1)]
    return [bench_pairwise(repeats=repeats), *bench_bma(repeats=repeats)]
