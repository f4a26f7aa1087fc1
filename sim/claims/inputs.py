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
from theory.markov import chain_structure_batch, closed_classes

from sim.priors import Dirichlet, Floor, Prior
from sim.sampling import random_recursive_parents

__all__ = ["Instance", "default_root", "default_root_name", "chain_structure", "prior_for", "draw_matrices", "w_instances",
           "root_laws", "record_matrix", "DEFAULT_W_PRIOR", "UNIFORM_FALLBACK"]

#: The name a record gives the uniform root law used because the stationary law is not unique.
UNIFORM_FALLBACK = "uniform (stationary law not unique)"

#: W's default input: Dirichlet(1) rows floored at gamma/d (meets W Lemma 3's minorisation).
DEFAULT_W_PRIOR = Floor(Dirichlet(1.0), gamma=0.2)


def prior_for(ctx, d: int, default: Prior = DEFAULT_W_PRIOR) -> Prior:
    """The user's prior if given (bound to ``d`` when it has no size), else ``default`` on ``d`` states."""
    prior = ctx.prior if ctx.prior is not None else default
    return prior if prior.d is not None else prior.bind(d)


def draw_matrices(ctx, n: int, d: int, default: Prior = DEFAULT_W_PRIOR) -> np.ndarray:
    """``n`` matrices ``(n, d, d)`` from :func:`prior_for`, on the claim's stream ``"pi/d=<d>"``."""
    return prior_for(ctx, d, default).sample(ctx.rng(f"pi/d={d}"), n)


def record_matrix(pi: np.ndarray) -> list[list[float]]:
    """Full-precision nested lists (JSON floats round-trip exactly) for counterexamples."""
    return [[float(v) for v in row] for row in np.asarray(pi)]


def default_root(pi: np.ndarray) -> np.ndarray | None:
    """The stationary law (``None``) when it is unique, else the uniform law (said in records)."""
    return None if len(closed_classes(pi)) == 1 else np.full(pi.shape[0], 1.0 / pi.shape[0])


def default_root_name(pi: np.ndarray) -> str:
    """How a record names :func:`default_root`'s choice."""
    return "stationary" if len(closed_classes(pi)) == 1 else UNIFORM_FALLBACK


def chain_structure(pi: np.ndarray) -> dict[str, bool]:
    """:func:`theory.markov.chain_structure_batch` for one ``pi`` ``(d, d)``."""
    return {k: bool(v[0]) for k, v in chain_structure_batch(np.asarray(pi, dtype=float)[None]).items()}


def root_laws(pi: np.ndarray, which: Sequence[str]) -> list[tuple[str, np.ndarray | None]]:
    """``("stationary", None)`` (when unique) and ``("uniform", 1/d)`` as requested.

    When the stationary law is asked for but is not unique and the uniform law is not also
    asked for, the uniform law stands in, named :data:`UNIFORM_FALLBACK` (so every draw gives
    an instance, and a check that needs a stationary root sees that it does not have one).
    """
    out = []
    for name in which:
        if name == "stationary":
            if len(closed_classes(pi)) == 1:
                out.append(("stationary", None))
            elif "uniform" not in which:
                out.append((UNIFORM_FALLBACK, np.full(pi.shape[0], 1.0 / pi.shape[0])))
        elif name == "uniform":
            out.append(("uniform", np.full(pi.shape[0], 1.0 / pi.shape[0])))
        else:
            raise ValueError(f"unknown root law {name!r}")
    return out


@dataclass
class Instance:
    """One input of W's claims: a transition matrix ``pi`` ``(d, d)`` on a causal tree, with its root
    law: ``root`` ``(d,)``, or ``None`` for the stationary law of ``pi``; ``root_name`` is how records
    name it (``"stationary"``, ``"uniform"``, :data:`UNIFORM_FALLBACK`)."""

    pi: np.ndarray
    tree: CausalTree
    root_name: str
    root: np.ndarray | None

    def marginal_root(self) -> np.ndarray:
        """The root law as a vector: ``root``, or the stationary law of ``pi`` when ``root`` is ``None``."""
        return stationary(self.pi) if self.root is None else self.root

    def record(self) -> dict:
        """The instance as a counterexample record: ``{"pi", "parents", "root_law"}`` (full-precision
        floats), plus ``"root_law_name"`` when an explicit root law is not the uniform one."""
        rec = {"pi": record_matrix(self.pi), "parents": self.tree.parents.tolist(),
               "root_law": self.root_name if self.root is None else [float(v) for v in self.root]}
        if self.root is not None and self.root_name != "uniform":
            rec["root_law_name"] = self.root_name
        return rec


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
