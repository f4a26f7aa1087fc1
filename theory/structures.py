"""Causal trees and forests as validated parent arrays.

Convention (``shared/CLAIMS.md``): positions are 0-indexed, ``parents[h] < h`` and
``parents[h] == -1`` marks a root. W's trees are random recursive trees with a single
root at 0 (every ``h >= 1`` has ``parents[h] ~ Unif{0..h-1}``); N's graphs are fixed
DAGs with at most one parent per node and roots anywhere. Both are forests.
"""
from __future__ import annotations

from functools import cached_property
from typing import Iterable

import numpy as np

from .errors import TheoryError

__all__ = ["CausalTree"]


class CausalTree:
    """A causal forest given by its parent array.

    Parameters
    ----------
    parents : sequence of int, length n
        ``parents[h]`` is the parent of position ``h`` (``-1`` for a root). Every
        non-root must point backwards: ``0 <= parents[h] < h``. This ordering makes
        cycles impossible; a cycle, a self-loop or a forward edge is rejected with a
        message naming the node.

    Examples
    --------
    >>> t = CausalTree([-1, 0, 0, 1])
    >>> t.depth(3), t.lca(2, 3), t.roots
    (2, 0, (0,))
    """

    __slots__ = ("_parents", "__dict__")

    def __init__(self, parents: Iterable[int]):
        if not isinstance(parents, np.ndarray):
            parents = list(parents)
            for h, v in enumerate(parents):  # before numpy coerces a mixed list to strings
                if not _is_int(v) and not isinstance(v, (list, tuple, np.ndarray)):
                    raise TheoryError(f"parents[{h}] = {v!r} is not an integer")
        arr = np.asarray(parents)
        if arr.ndim != 1:
            raise TheoryError(f"parents must be a 1-d array, got shape {arr.shape}")
        if arr.size == 0:
            raise TheoryError("parents is empty: a causal tree needs at least one node")
        if not np.issubdtype(arr.dtype, np.integer):
            if np.issubdtype(arr.dtype, np.floating) and np.all(np.isfinite(arr)) and np.all(arr == np.round(arr)):
                arr = arr.astype(np.int64)
            else:
                bad = next(i for i, v in enumerate(arr.tolist()) if not _is_int(v))
                raise TheoryError(f"parents[{bad}] = {arr.tolist()[bad]!r} is not an integer")
        arr = arr.astype(np.int64)
        for h, p in enumerate(arr.tolist()):
            if p == -1:
                continue
            if p < -1:
                raise TheoryError(f"node {h}: parent {p} is invalid (use -1 for a root)")
            if p == h:
                raise TheoryError(f"node {h}: parent {p} is itself (a self-loop is a cycle)")
            if p > h:
                raise TheoryError(
                    f"node {h}: parent {p} comes after it; parents must satisfy parents[h] < h "
                    "(this also rules out cycles)")
        arr.setflags(write=False)
        self._parents = arr

    # -- basic accessors -------------------------------------------------------------
    @property
    def parents(self) -> np.ndarray:
        """Read-only int64 parent array, shape ``(n,)``, ``-1`` for roots."""
        return self._parents

    @property
    def n(self) -> int:
        """Number of nodes (positions)."""
        return int(self._parents.size)

    def __len__(self) -> int:
        return self.n

    @cached_property
    def roots(self) -> tuple[int, ...]:
        """Positions with no parent, in increasing order."""
        return tuple(int(h) for h in np.flatnonzero(self._parents == -1))

    @cached_property
    def depths(self) -> np.ndarray:
        """Depth of every node (roots have depth 0), shape ``(n,)``."""
        out = np.zeros(self.n, dtype=np.int64)
        for h, p in enumerate(self._parents.tolist()):
            if p >= 0:
                out[h] = out[p] + 1
        out.setflags(write=False)
        return out

    @cached_property
    def root_of(self) -> np.ndarray:
        """The root of each node's component, shape ``(n,)``."""
        out = np.arange(self.n, dtype=np.int64)
        for h, p in enumerate(self._parents.tolist()):
            if p >= 0:
                out[h] = out[p]
        out.setflags(write=False)
        return out

    def _check_node(self, h, name="node") -> int:
        if isinstance(h, (bool, np.bool_)) or not _is_int(h):
            raise TheoryError(f"{name} {h!r} is not an integer position")
        h = int(h)
        if not 0 <= h < self.n:
            raise TheoryError(f"{name} {h} is out of range for a tree with {self.n} nodes (0..{self.n - 1})")
        return h

    def parent(self, h: int) -> int | None:
        """Parent of ``h``, or ``None`` for a root."""
        p = int(self._parents[self._check_node(h)])
        return None if p < 0 else p

    def depth(self, h: int) -> int:
        """Number of edges from ``h`` up to the root of its component."""
        return int(self.depths[self._check_node(h)])

    def ancestors(self, h: int) -> list[int]:
        """``[h, parent(h), ..., root]``: the path from ``h`` up to its root."""
        h = self._check_node(h)
        path = [h]
        while self._parents[path[-1]] >= 0:
            path.append(int(self._parents[path[-1]]))
        return path

    def lca(self, i: int, j: int) -> int | None:
        """Lowest common ancestor of ``i`` and ``j`` (a node is its own ancestor).

        ``None`` when ``i`` and ``j`` lie in different components of a forest.
        """
        i, j = self._check_node(i, "i"), self._check_node(j, "j")
        if self.root_of[i] != self.root_of[j]:
            return None
        d = self.depths
        while d[i] > d[j]:
            i = int(self._parents[i])
        while d[j] > d[i]:
            j = int(self._parents[j])
        while i != j:
            i, j = int(self._parents[i]), int(self._parents[j])
        return i

    def children(self, h: int) -> list[int]:
        """The positions whose parent is ``h``, in increasing order."""
        h = self._check_node(h)
        return [int(c) for c in np.flatnonzero(self._parents == h)]

    @cached_property
    def leaves(self) -> tuple[int, ...]:
        has_child = np.zeros(self.n, dtype=bool)
        has_child[self._parents[self._parents >= 0]] = True
        return tuple(int(h) for h in np.flatnonzero(~has_child))

    # -- conversions -----------------------------------------------------------------
    def to_networkx(self):
        """A ``networkx.DiGraph`` with edges ``parent -> child`` and nodes ``0..n-1``."""
        import networkx as nx

        g = nx.DiGraph()
        g.add_nodes_from(range(self.n))
        g.add_edges_from((int(p), h) for h, p in enumerate(self._parents.tolist()) if p >= 0)
        return g

    @classmethod
    def from_networkx(cls, g) -> "CausalTree":
        """Build from a ``networkx.DiGraph`` whose nodes are ``0..n-1`` and edges point parent -> child.

        Rejects graphs with a node of in-degree above one (naming it), edges that point
        forwards in position order, cycles, and node labels that are not ``0..n-1``.
        """
        import networkx as nx

        if not isinstance(g, nx.DiGraph):
            raise TheoryError(f"from_networkx expects a networkx.DiGraph, got {type(g).__name__}")
        nodes = list(g.nodes)
        if not all(_is_int(v) for v in nodes) or sorted(int(v) for v in nodes) != list(range(len(nodes))):
            raise TheoryError(f"graph nodes must be the integers 0..n-1, got {sorted(nodes, key=str)[:10]}")
        parents = [-1] * len(nodes)
        for v in range(len(nodes)):
            preds = list(g.predecessors(v))
            if len(preds) > 1:
                raise TheoryError(f"node {v} has {len(preds)} parents {sorted(preds)}; a causal tree allows at most one")
            if preds:
                parents[v] = int(preds[0])
        if not nx.is_directed_acyclic_graph(g):
            cycle = nx.find_cycle(g)
            raise TheoryError(f"graph has a cycle through node {cycle[0][0]}: {cycle}")
        return cls(parents)

    # -- dunder ----------------------------------------------------------------------
    def __eq__(self, other) -> bool:
        return isinstance(other, CausalTree) and np.array_equal(self._parents, other._parents)

    def __hash__(self) -> int:
        return hash(self._parents.tobytes())

    def __repr__(self) -> str:
        return f"CausalTree({self._parents.tolist()})"


def _is_int(v) -> bool:
    if isinstance(v, (bool, np.bool_)):
        return False
    if isinstance(v, (int, np.integer)):
        return True
    if isinstance(v, (float, np.floating)):
        return bool(np.isfinite(v) and float(v).is_integer())
    return False
