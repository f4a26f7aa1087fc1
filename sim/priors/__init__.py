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

The known names and their arguments are in :data:`~sim.priors.spec.PRIORS` (``icl-verify prior --help`` lists them).

The package: :mod:`~sim.priors.base` (the :class:`Prior` interface, errors, limits),
:mod:`~sim.priors.families` (leaf priors, mixtures and finite priors),
:mod:`~sim.priors.transforms` (maps of a base prior), :mod:`~sim.priors.user` (a user's sampler),
:mod:`~sim.priors.spec` (the spec language) and :mod:`~sim.priors.facts` (the one place that
decides, from closed forms, atoms or draws, the facts the audit and the claims read).
"""
from __future__ import annotations

from sim.priors.base import Prior, PriorError, PriorSpecError
from sim.priors.families import Dirichlet, DoublyStochastic, Finite, Mixture, Point, doubly_stochastic
from sim.priors.spec import PRIORS, parse_prior, spec_help
from sim.priors.transforms import Banded, Floor, Sinkhorn, Sparse, Sticky, Symmetrize, banded, lazy, sticky
from sim.priors.user import UserSampler

__all__ = [
    "Prior",
    "PriorError",
    "PriorSpecError",
    "Dirichlet",
    "Floor",
    "Point",
    "Mixture",
    "Finite",
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