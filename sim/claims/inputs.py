"""The inputs claims are checked on: transition matrices from a prior, trees, root laws.

Every claim draws its matrices from ``ctx.prior`` when the user gave one (``icl-verify
prior SPEC``) and from its own default prior otherwise, with separate random streams for
matrices (``"pi"``), trees (``"tree"``) and positions (``"positions"``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Sequence

import numpy as np

from theory import CausalTree, stationary
from theory.markov import closed_classes

from ..priors import Dirichlet, Floor, Prior
from ..sampling import random_recursive_parents

__all__ = ["Instance", "default_root", "prior_for", "draw_matrices", "w_instances", "root_laws", "record_matrix", "DEFAULT_W_PRIOR"]

#: W's default input: Dirichlet(1) rows floored at gamma/d (meets W Lemma 3's minorisation).
DEFAULT_W_PRIOR = Floor(Dirichlet(1.0), gamma=0.2)


def prior_for(ctx, d: int, default: Prior = DEFAULT_W_PRIOR) -> Prior:
    """The user's prior if given (bound to ``d`` when it has no size), else ``default`` on ``d`` states."""
    prior = ctx.prior if ctx.prior is not None else default
    return prior if prior.d is not None else prior.bind(d)


def draw_matrices(ctx, n: int, d: int, default: Prior = DEFAULT_W_PRIOR) -> np.ndarray:
    return prior_for(ctx, d, default).sample(ctx.rng(f"pi/d={d}"), n)


def record_matrix(pi: np.ndarray) -> list[list[float]]:
    """Full-precision nested lists (JSON floats round-trip exactly) for counterexamples."""
    return [[float(v) for v in row] for row in np.asarray(pi)]


def default_root(pi: np.ndarray) -> np.ndarray | None:
    """The stationary law (``None``) when it is unique, else the uniform law (said in records)."""
    return None if len(closed_classes(pi)) == 1 else np.full(pi.shape[0], 1.0 / pi.shape[0])


def root_laws(pi: np.ndarray, which: Sequence[str]) -> list[tuple[str, np.ndarray | None]]:
    """``("stationary", None)`` (when unique) and ``("uniform", 1/d)`` as requested."""
    out = []
    for name in which:
        if name == "stationary":
            if len(closed_classes(pi)) == 1:
                out.append(("stationary", None))
        elif name == "uniform":
            out.append(("uniform", np.full(pi.shape[0], 1.0 / pi.shape[0])))
        else:
            raise ValueError(f"unknown root law {name!r}")
    return out


@dataclass
class Instance:
    pi: np.ndarray
    tree: CausalTree
    root_name: str
    root: np.ndarray | None

    def marginal_root(self) -> np.ndarray:
        return stationary(self.pi) if self.root is None else self.root

    def record(self) -> dict:
        return {"pi": record_matrix(self.pi), "parents": self.tree.parents.tolist(),
                "root_law": self.root_name if self.root is None else [float(v) for v in self.root]}


def w_instances(ctx, *, n_matrices: int, dims: Sequence[int], H: int, trees_per_matrix: int = 1,
                roots: Sequence[str] = ("stationary", "uniform"), default: Prior = DEFAULT_W_PRIOR) -> Iterator[Instance]:
    """Matrices from the prior x random recursive trees on ``H`` nodes x root laws."""
    if ctx.prior is not None and ctx.prior.d is not None:
        dims = [ctx.prior.d]
    rng_tree = ctx.rng("tree")
    for d in dims:
        for pi in draw_matrices(ctx, n_matrices, d, default):
            for _ in range(trees_per_matrix):
                tree = CausalTree(random_recursive_parents(rng_tree, H))
                for name, root in root_laws(pi, roots):
                    yield Instance(pi=pi, tree=tree, root_name=name, root=root)
