"""The inputs claims are checked on: transition matrices from a prior, trees, root laws.

Every claim draws its matrices from ``ctx.prior`` when the user gave one (``icl-verify
prior SPEC``) and from its own default prior otherwise, with separate random streams for
matrices (``"pi"``), trees (``"tree"``) and positions (``"positions"``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterator, Sequence

import numpy as np

from theory import CausalTree, stationary
from theory.markov import closed_classes

from sim.priors import Dirichlet, Floor, Prior
from sim.sampling import random_recursive_parents

__all__ = ["Instance", "default_root", "default_root_name", "chain_structure", "batch_chain_structure", "prior_for", "draw_matrices", "w_instances",
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


def _bool_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.matmul(a.astype(np.int64), b.astype(np.int64)) > 0


def batch_chain_structure(pis: np.ndarray) -> dict[str, np.ndarray]:
    """N Knowl 2's conditions on a batch ``pis`` ``(n, d, d)``, each a boolean array ``(n,)``:

    - ``"unique stationary law"``: one closed class (transient states allowed);
    - ``"irreducible"``: one communicating class holding every state (``mu_pi`` unique, positive);
    - ``"aperiodic"``: every closed class has period 1.

    Vectorised on the zero pattern: reachability ``R`` by repeated squaring of ``(pi > 0) | I``;
    state ``i`` is recurrent iff everything it reaches reaches it back; a closed class is
    aperiodic iff its block of ``A^m`` is positive for Wielandt's ``m = (d - 1)^2 + 1``.
    """
    pis = np.asarray(pis, dtype=float)
    n, d, _ = pis.shape
    adj = pis > 0
    R = adj | np.eye(d, dtype=bool)[None]
    for _ in range(max(1, math.ceil(math.log2(max(d, 2))))):
        R = _bool_matmul(R, R)
    recurrent = np.all(~R | np.swapaxes(R, 1, 2), axis=2)  # (n, d): i -> j implies j -> i
    both = recurrent[:, :, None] & recurrent[:, None, :]
    unique = np.all(~both | R, axis=(1, 2))  # recurrent states all communicate
    irreducible = R.all(axis=(1, 2))
    power, base, m = np.broadcast_to(np.eye(d, dtype=bool), (n, d, d)).copy(), adj.copy(), (d - 1) ** 2 + 1
    while m:
        if m & 1:
            power = _bool_matmul(power, base)
        base = _bool_matmul(base, base)
        m >>= 1
    same_class = both & R & np.swapaxes(R, 1, 2)
    aperiodic = np.all(~same_class | power, axis=(1, 2))
    return {"unique stationary law": unique, "irreducible": irreducible, "aperiodic": aperiodic}


def chain_structure(pi: np.ndarray) -> dict[str, bool]:
    """:func:`batch_chain_structure` for one ``pi`` ``(d, d)``."""
    return {k: bool(v[0]) for k, v in batch_chain_structure(np.asarray(pi, dtype=float)[None]).items()}


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
    pi: np.ndarray
    tree: CausalTree
    root_name: str
    root: np.ndarray | None

    def marginal_root(self) -> np.ndarray:
        return stationary(self.pi) if self.root is None else self.root

    def record(self) -> dict:
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
