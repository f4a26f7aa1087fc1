"""Causal graphs: every graph family the papers use, as ``networkx.DiGraph`` generators, and
the conversions to the exact core's forms.

Convention (``shared/CLAIMS.md``): nodes are the positions ``0..n-1``, edges point parent ->
child, and every edge points backwards in position order (``parent < child``), which rules out
cycles. A graph whose nodes have at most one parent converts to a :class:`~theory.CausalTree`
(:func:`to_tree`); a graph with up to ``k`` parents per node converts to parent sets
(:func:`to_parent_sets`, N Knowl 9).

The families, each with its law:

- :func:`chain` -- N's chain: ``p(i) = i-1`` for ``1 <= i <= T-2``; the query ``T-1`` is a root.
- :func:`in_context_function` -- N's in-context function graph: pairs ``(x_k, f(x_k))``,
  ``p(i) = i-1`` for odd ``i <= T-2``, other positions roots; the query is a root.
- :func:`star` -- every context position ``1..T-2`` a child of ``0``; the query is a root.
- :func:`roots` -- no edges.
- :func:`n_random` -- N's random graph law: ``p(i) ~ Unif{-1, 0, .., i-1}`` for ``i <= T-2``
  (``-1``: a root), as N's reference code draws it; the query is a root.
- :func:`n_many_graphs` -- the law of N's ``many_graphs.ipynb``: each context position ``i >= 1``
  is a root with probability 1/2, else ``p(i) ~ Unif{0..i-1}``; ``0`` and the query are roots.
- :func:`random_recursive_tree` -- W's trees: ``p(0) = -1``, ``p(h) ~ Unif{0..h-1}``.
- :func:`markov_chain` -- G's and E's Markov chain as a graph: ``p(i) = i-1`` for every ``i >= 1``
  (no query root: the next token's parent is the last one).
- :func:`k_parent_dag` -- N Knowl 9's k-parent DAGs on ``T + 1`` nodes (node ``T`` the target):
  ``ngram`` ``p(i) = (i-k, .., i-1)``, ``notebook`` ``p(i) = ((i-1)//2, i-1)`` (k = 2, N's
  ``multi_parent.ipynb``), ``random`` a uniform ``k``-subset of ``0..i-1``; nodes ``< k`` are roots.

networkx is where graphs are built, read, checked and drawn; the exact inner loops keep
parent arrays (``*_parents`` functions here return them directly, batched where the samplers
need thousands of graphs).
"""
from __future__ import annotations

from typing import Iterable, Sequence

import networkx as nx
import numpy as np

from .errors import TheoryError
from .structures import CausalTree

__all__ = [
    "FAMILIES",
    "GivenGraph",
    "chain",
    "in_context_function",
    "star",
    "roots",
    "n_random",
    "n_many_graphs",
    "random_recursive_tree",
    "markov_chain",
    "k_parent_dag",
    "n_parents",
    "random_recursive_parents",
    "k_parent_sets",
    "from_parents",
    "from_parent_sets",
    "to_parents",
    "to_tree",
    "to_parent_sets",
    "validate",
    "family",
]


class GivenGraph(str):
    """One fixed graph standing where a claim's settings name a graph family (a user's graph).

    The string is its label, what records, figures and reports print; ``parent_sets[i]`` are
    the sorted parents of node ``i``. :func:`n_parents` and :func:`k_parent_sets` return it
    as it is, so every check that resolves its settings' graph names through them takes a
    user's graph unchanged; asked for another size than its own, they raise."""

    parent_sets: tuple[tuple[int, ...], ...]

    def __new__(cls, label: str, parent_sets: Sequence[Sequence[int]]):
        self = super().__new__(cls, label)
        self.parent_sets = tuple(tuple(sorted(int(p) for p in ps)) for ps in parent_sets)
        return self

    def __getnewargs__(self):  # copies and pickles keep the graph, not only the label
        return str(self), self.parent_sets

    @classmethod
    def from_graph(cls, label: str, g) -> "GivenGraph":
        """The graph ``g`` (validated) under ``label``."""
        return cls(label, to_parent_sets(g))

    def parents(self, T: int) -> np.ndarray:
        """The parent array (``-1`` for a root) of a graph on ``T`` positions with at most one parent each."""
        self._check_size(T, "positions")
        for i, ps in enumerate(self.parent_sets):
            if len(ps) > 1:
                raise TheoryError(f"graph {self}: node {i} has {len(ps)} parents {list(ps)}; at most one here")
        return np.array([ps[0] if ps else -1 for ps in self.parent_sets], dtype=np.int64)

    def _check_size(self, want: int, what: str) -> None:
        if len(self.parent_sets) != want:
            raise TheoryError(f"graph {self} has {len(self.parent_sets)} {what}, not the {want} asked for")


# ------------------------------------------------------------------ parent arrays (fast) --
def n_parents(name: str, T: int, rng: np.random.Generator | None = None) -> np.ndarray:
    """N's graphs as a parent array of length ``T`` (``-1`` for a root); the query ``T-1`` is a root.

    ``name``: ``chain``, ``icl`` (the in-context function graph; ``icf``/``function`` are
    aliases), ``star``, ``roots``, ``random`` (``p(i) ~ Unif{-1..i-1}``, needs ``rng``) or
    ``many`` (N's many-graphs law, needs ``rng``), or a :class:`GivenGraph` on ``T`` positions.
    Laws: see the module docstring.
    """
    if T < 2:
        raise TheoryError(f"T must be >= 2 (context and query), got {T}")
    if isinstance(name, GivenGraph):
        return name.parents(T)
    par = np.full(T, -1, dtype=np.int64)
    ctx = np.arange(T - 1)  # context positions 0..T-2
    if name == "chain":
        par[1:T - 1] = ctx[1:] - 1
    elif name in ("icl", "icf", "function"):
        odd = ctx[ctx % 2 == 1]
        par[odd] = odd - 1
    elif name == "star":
        par[1:T - 1] = 0
    elif name in ("roots", "empty"):
        pass
    elif name in ("random", "many"):
        if rng is None:
            raise TheoryError(f"the {name} graph law needs a seeded generator (rng)")
        if name == "random":
            par[:T - 1] = np.floor(rng.random(T - 1) * (ctx + 1)).astype(np.int64) - 1
        else:
            child = rng.random(T - 1) < 0.5
            child[0] = False
            par[:T - 1] = np.where(child, np.floor(rng.random(T - 1) * np.maximum(ctx, 1)).astype(np.int64), -1)
    else:
        raise TheoryError(f"unknown graph {name!r}; expected chain, icl, star, roots, random or many")
    return par


def random_recursive_parents(rng: np.random.Generator, H: int, size: int | None = None) -> np.ndarray:
    """W's random recursive trees: ``parents[0] = -1``, ``parents[h] ~ Unif{0..h-1}``.

    Returns shape ``(H,)`` (``size=None``) or ``(size, H)``: the samplers draw thousands at once.
    """
    if H < 1:
        raise TheoryError(f"H must be >= 1, got {H}")
    shape = (1 if size is None else size, H)
    h = np.arange(H)
    par = np.floor(rng.random(shape) * h).astype(np.int64)  # uniform on 0..h-1
    par[:, 0] = -1
    return par[0] if size is None else par


def k_parent_sets(name: str, T: int, k: int = 2, rng: np.random.Generator | None = None) -> list[tuple[int, ...]]:
    """N Knowl 9's parent sets on ``T + 1`` nodes (node ``T`` is the target); nodes ``< k`` are roots.

    ``ngram``: ``p(i) = (i-k, .., i-1)``; ``notebook`` (k = 2, N's ``multi_parent.ipynb``):
    ``p(i) = ((i-1)//2, i-1)``; ``random``: a sorted uniform ``k``-subset of ``0..i-1`` (needs ``rng``);
    or a :class:`GivenGraph` on ``T + 1`` nodes with at most ``k`` parents each.
    """
    if isinstance(name, GivenGraph):
        name._check_size(T + 1, "nodes (T prompt positions and the target)")
        for i, ps in enumerate(name.parent_sets):
            if len(ps) > k:
                raise TheoryError(f"graph {name}: node {i} has {len(ps)} parents {list(ps)}; at most k = {k} here")
        return list(name.parent_sets)
    if k < 1 or T < k:
        raise TheoryError(f"a k-parent DAG needs 1 <= k <= T, got k={k}, T={T}")
    if name == "notebook" and k != 2:
        raise TheoryError("N's notebook graph has k = 2 parents")
    if name == "random" and rng is None:
        raise TheoryError("the random k-parent law needs a seeded generator (rng)")
    if name not in ("ngram", "notebook", "random"):
        raise TheoryError(f"unknown k-parent graph {name!r}; expected ngram, notebook or random")
    sets: list[tuple[int, ...]] = []
    for i in range(T + 1):
        if i < k:
            sets.append(())
        elif name == "ngram":
            sets.append(tuple(range(i - k, i)))
        elif name == "notebook":
            sets.append(((i - 1) // 2, i - 1))
        else:
            sets.append(tuple(sorted(int(v) for v in rng.choice(i, size=k, replace=False))))
    return sets


# ------------------------------------------------------------------------ conversions --
def from_parents(parents: Iterable[int], *, name: str = "", query: int | None = None) -> nx.DiGraph:
    """A DiGraph from a parent array (``-1`` for a root), validated by :class:`~theory.CausalTree`.

    Node attribute ``root`` marks roots; graph attributes ``name`` and ``query`` (the
    position being predicted, if any) travel with the graph to the figures."""
    tree = parents if isinstance(parents, CausalTree) else CausalTree(parents)
    g = tree.to_networkx()
    for h, p in enumerate(tree.parents.tolist()):
        g.nodes[h]["root"] = p < 0
    g.graph.update(name=name, query=query)
    return g


def from_parent_sets(sets: Sequence[Sequence[int]], *, name: str = "", query: int | None = None) -> nx.DiGraph:
    """A DiGraph from parent sets (``sets[i]`` the parents of node ``i``), validated."""
    g = nx.DiGraph()
    g.add_nodes_from(range(len(sets)))
    for i, ps in enumerate(sets):
        g.add_edges_from((int(p), i) for p in ps)
    validate(g)
    for i in g.nodes:
        g.nodes[i]["root"] = g.in_degree(i) == 0
    g.graph.update(name=name, query=query)
    return g


def validate(g, *, max_parents: int | None = None) -> None:
    """Check that ``g`` is a causal graph in position order, naming what is wrong.

    A ``networkx.DiGraph``; nodes exactly the integers ``0..n-1``; no cycle (the message
    gives it); every edge ``p -> i`` with ``p < i`` (positions are a topological order); at
    most ``max_parents`` parents per node (the message names the node)."""
    if not isinstance(g, nx.DiGraph) or g.is_multigraph():
        raise TheoryError(f"a causal graph is a networkx.DiGraph, got {type(g).__name__}")
    if g.number_of_nodes() == 0:
        raise TheoryError("the graph has no nodes")
    nodes = list(g.nodes)
    bad = [v for v in nodes if isinstance(v, bool) or not isinstance(v, (int, np.integer))]
    if bad:
        raise TheoryError(f"node {bad[0]!r} is not an integer position; nodes must be 0..n-1")
    missing = sorted(set(range(len(nodes))) - set(int(v) for v in nodes))
    if missing:
        # n distinct integers with one of 0..n-1 missing: at least one lies outside
        extra = sorted(int(v) for v in nodes if not 0 <= int(v) < len(nodes))
        raise TheoryError(f"nodes must be the positions 0..{len(nodes) - 1}: position {missing[0]} is missing"
                          f" and node {extra[0]} is out of range")
    if not nx.is_directed_acyclic_graph(g):
        cycle = [u for u, _ in nx.find_cycle(g)]
        k = cycle.index(min(cycle))  # start at the smallest node: the same message whatever the file's order
        cycle = cycle[k:] + cycle[:k]
        raise TheoryError("the graph has a cycle: " + " -> ".join(map(str, cycle + cycle[:1])))
    for p, i in g.edges:
        if int(p) >= int(i):
            raise TheoryError(f"edge {p} -> {i} points forwards: a parent must come before its child (p < i)")
    if max_parents is not None:
        for v in nodes:
            if g.in_degree(v) > max_parents:
                raise TheoryError(f"node {v} has {g.in_degree(v)} parents {sorted(g.predecessors(v))}; "
                                  f"at most {max_parents} allowed here")


def to_parents(g) -> np.ndarray:
    """The parent array of a graph with at most one parent per node (validated)."""
    validate(g, max_parents=1)
    par = np.full(g.number_of_nodes(), -1, dtype=np.int64)
    for p, i in g.edges:
        par[int(i)] = int(p)
    return par


def to_tree(g) -> CausalTree:
    """The exact core's form of a graph with at most one parent per node."""
    return CausalTree(to_parents(g))


def to_parent_sets(g, k: int | None = None) -> list[tuple[int, ...]]:
    """Sorted parent sets of a DAG with at most ``k`` parents per node (validated)."""
    validate(g, max_parents=k)
    return [tuple(sorted(int(p) for p in g.predecessors(i))) for i in range(g.number_of_nodes())]


# -------------------------------------------------------------------------- families --
def chain(T: int) -> nx.DiGraph:
    """N's chain on ``T`` positions (the query ``T-1`` a root)."""
    return from_parents(n_parents("chain", T), name=f"chain (T={T})", query=T - 1)


def in_context_function(T: int) -> nx.DiGraph:
    """N's in-context function graph on ``T`` positions (the query a root)."""
    return from_parents(n_parents("icl", T), name=f"in-context function (T={T})", query=T - 1)


def star(T: int) -> nx.DiGraph:
    """Every context position a child of position 0 (the query a root)."""
    return from_parents(n_parents("star", T), name=f"star (T={T})", query=T - 1)


def roots(T: int) -> nx.DiGraph:
    """``T`` positions and no edges."""
    return from_parents(n_parents("roots", T), name=f"roots (T={T})", query=T - 1)


def n_random(T: int, rng: np.random.Generator) -> nx.DiGraph:
    """One draw of N's random graph law, ``p(i) ~ Unif{-1..i-1}`` (the query a root)."""
    return from_parents(n_parents("random", T, rng), name=f"N random graph (T={T})", query=T - 1)


def n_many_graphs(T: int, rng: np.random.Generator) -> nx.DiGraph:
    """One draw of N's many-graphs law (each position a root w.p. 1/2, else a uniform earlier parent)."""
    return from_parents(n_parents("many", T, rng), name=f"N many-graphs draw (T={T})", query=T - 1)


def random_recursive_tree(H: int, rng: np.random.Generator) -> nx.DiGraph:
    """One of W's random recursive trees on ``H`` positions."""
    return from_parents(random_recursive_parents(rng, H), name=f"W random recursive tree (H={H})")


def markov_chain(T: int) -> nx.DiGraph:
    """G's and E's Markov chain as a graph: ``p(i) = i-1`` for every ``i >= 1``."""
    if T < 1:
        raise TheoryError(f"T must be >= 1, got {T}")
    return from_parents([-1] + list(range(T - 1)), name=f"Markov chain (T={T})", query=T - 1)


def k_parent_dag(name: str, T: int, k: int = 2, rng: np.random.Generator | None = None) -> nx.DiGraph:
    """N Knowl 9's k-parent DAG on ``T + 1`` nodes; node ``T`` is the target."""
    return from_parent_sets(k_parent_sets(name, T, k, rng), name=f"{name} {k}-parent DAG (T={T})", query=T)


#: name -> (builder of a DiGraph on T positions from (T, rng), whether the law is random)
FAMILIES = {
    "chain": (lambda T, rng: chain(T), False),
    "icf": (lambda T, rng: in_context_function(T), False),
    "star": (lambda T, rng: star(T), False),
    "roots": (lambda T, rng: roots(T), False),
    "random": (n_random, True),
    "many": (n_many_graphs, True),
    "tree": (lambda T, rng: random_recursive_tree(T, rng), True),
    "markov": (lambda T, rng: markov_chain(T), False),
    "ngram": (lambda T, rng: k_parent_dag("ngram", T - 1, 2), False),
}
_ALIASES = {"icl": "icf", "function": "icf", "empty": "roots"}


def family(name: str, T: int, rng: np.random.Generator | None = None) -> nx.DiGraph:
    """A graph of family ``name`` (a key of :data:`FAMILIES` or an alias) on ``T`` positions."""
    key = _ALIASES.get(name.strip().lower(), name.strip().lower())
    if key not in FAMILIES:
        raise TheoryError(f"unknown graph family {name!r}; expected one of {', '.join(FAMILIES)}")
    build, random = FAMILIES[key]
    if random and rng is None:
        raise TheoryError(f"the {key} graph law is random and needs a seeded generator (rng)")
    return build(T, rng)
