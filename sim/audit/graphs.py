"""N's graphs as the audit reads them (items 4 and 5 of N Knowl 10): roots, leaves, T_eff."""
from __future__ import annotations

import numpy as np

from sim.audit.records import GraphInfo
from sim.priors import PriorError
from theory import CausalTree

__all__ = ["MAX_GRAPH_T", "parse_graph"]

#: Longest graph the audit accepts (N's tasks use T = 20; its items are computed per position).
MAX_GRAPH_T = 100_000


def parse_graph(text: str, default_T: int = 20) -> GraphInfo:
    """A graph for N's items 4 and 5: ``chain[:T]``, ``icf[:T]`` (in-context function),
    ``star[:T]``, ``roots[:T]`` (no edges), a parent list such as ``[-1, 0, 1, -1]``, or a
    graph file (:func:`sim.graphs.read_graph`: GraphML, JSON or an edge list), as
    :func:`sim.graphs.graph_from_spec` reads them.

    Positions are 0-based; the last position is N's query, always a root. The families are
    :func:`theory.graphs.n_parents`.
    """
    from theory.graphs import to_parents

    from sim.graphs import GraphFileError, GraphSpecError, graph_from_spec

    text = str(text).strip()
    try:
        g = graph_from_spec(text, default_T=default_T, max_parents=1)
    except GraphFileError as exc:
        raise PriorError(f"--graph {exc}") from None
    except GraphSpecError as exc:
        raise PriorError(str(exc)) from None
    if g.number_of_nodes() > MAX_GRAPH_T:
        raise PriorError(f"graph {text}: {g.number_of_nodes()} positions is more than {MAX_GRAPH_T}")
    tree, name = CausalTree(to_parents(g)), g.graph["name"]
    if tree.parents[-1] != -1:
        raise PriorError(f"graph {text!r}: the last position is N's query and must be a root (-1), got parent "
                         f"{int(tree.parents[-1])}")
    par = tree.parents
    T = tree.n
    root_of = np.arange(T)
    for h in range(T):
        if par[h] >= 0:
            root_of[h] = root_of[par[h]]
    has_child = np.zeros(T, dtype=bool)
    has_child[par[par >= 0]] = True
    leaves = np.bincount(root_of[~has_child], minlength=T)
    n_roots = int((par < 0).sum())
    max_leaves = int(leaves.max())
    return GraphInfo(name=f"{name} (T={T})", parents=[int(p) for p in par], T=T, n_roots=n_roots,
                     root_fraction=n_roots / T, max_leaves=max_leaves, T_eff=T / max_leaves)
