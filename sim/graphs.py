"""Causal graphs as users meet them: read from files, and drawn in the reports.

The families and their laws live in :mod:`theory.graphs`; this module adds the two things
``theory`` may not do (I/O and figures).

Files (:func:`read_graph`), chosen by suffix:

- ``.graphml`` -- GraphML as ``networkx.write_graphml`` writes it; node ids are positions.
- ``.json`` -- a parent list ``[-1, 0, 1, -1]``; ``{"parents": [...]}``; networkx's
  node-link (``{"nodes": [...], "edges": [...]}``) or adjacency (``{"adjacency": [...]}``) JSON;
  or ``{"<child>": [<parents>], ...}``.
- anything else -- an edge list: one ``parent child`` pair of positions per line (spaces,
  tabs or a comma between them), ``#`` starts a comment, a line with one position adds a
  node without edges.

Every graph is checked by :func:`theory.graphs.validate`: nodes ``0..n-1``, no cycle, every
edge pointing backwards. A malformed file is a :class:`GraphFileError` naming the file and the
line, node, edge or cycle. Each format has one parser, which a ``--graph`` parent list shares
with a ``.json`` file; a file is read only when it is a regular file of at most
``MAX_GRAPH_FILE_BYTES`` (32 MiB), JSON at most ``MAX_GRAPH_JSON_DEPTH`` (16) levels deep, and at
most ``MAX_FILE_NODES`` (100,000) nodes.

A ``--graph`` value (:func:`graph_from_spec`) is such a file, a family ``name[:T]`` or a parent
list; a run records its graph as :func:`graph_record` (name, node count, edges), from which
:func:`graph_from_record` rebuilds it.
"""
from __future__ import annotations

import json
from pathlib import Path

import networkx as nx

from sim.files import parse_json, read_text
from theory.errors import TheoryError
from theory.graphs import validate

__all__ = ["random_recursive_parents_torch", "GraphSpecError", "GraphFileError", "GRAPH_FILE_FORMATS", "GRAPH_SPECS",
           "read_graph", "graph_from_spec", "graph_record", "graph_from_record", "draw_graph", "graph_layout",
           "counterexample_graph", "draw_counterexample"]

#: What ``--graph FILE`` accepts, for ``--help`` and the docs.
GRAPH_FILE_FORMATS = ("a graph file: .graphml (networkx GraphML), .json (a parent list, networkx node-link or "
                      "adjacency JSON, or {child: [parents]}) or an edge list (one 'parent child' pair of positions "
                      "per line, # comments)")

#: The ``--graph`` values that are not files, for ``--help`` and the docs.
GRAPH_SPECS = ("a family chain[:T], icf[:T], star[:T], roots[:T] (N's one-parent graphs, the query T-1 a root) or "
               "ngram[:T] (2 parents each, node T-1 the target), T = 20 when left out; a parent list such as "
               "'[-1,0,1,-1]'")

#: More nodes than this in a file is refused before validation walks them (and before any claim sees them).
MAX_FILE_NODES = 100_000
#: The largest graph file read (a GraphML file of MAX_FILE_NODES nodes and edges is about 13 MB).
MAX_GRAPH_FILE_BYTES = 32 * 2**20
#: The deepest nesting of a graph's JSON (node-link JSON nests 3 levels, with attributes a few more).
MAX_GRAPH_JSON_DEPTH = 16
#: What a file name ends with when ``--graph`` should read it even before it exists (so a typo says 'cannot read').
_GRAPH_FILE_SUFFIXES = (".graphml", ".json", ".txt", ".edgelist", ".edges", ".csv", ".tsv")


def random_recursive_parents_torch(gen, B: int, H: int):
    """W's random recursive trees drawn in torch on ``gen.device`` (the samplers of the training
    loops draw them there): ``(B, H)`` int64, ``parents[:, 0] = -1``, ``parents[:, h] ~ Unif{0..h-1}``,
    the law of :func:`theory.graphs.random_recursive_parents`."""
    import torch

    h = torch.arange(H, device=gen.device)
    par = torch.floor(torch.rand((B, H), generator=gen, device=gen.device) * h).long()  # uniform on 0..h-1
    par[:, 0] = -1
    return par


class GraphSpecError(ValueError):
    """A ``--graph`` value that names no causal graph; the message says which part is wrong."""


class GraphFileError(GraphSpecError):
    """A graph file that cannot be read as a causal graph; the message names the file and the place."""


def graph_from_spec(text: str, *, default_T: int = 20, max_parents: int | None = None) -> nx.DiGraph:
    """The causal graph a ``--graph`` value names (validated, at most ``max_parents`` parents each):

    - a file (:func:`read_graph`): anything that exists or ends in a graph file's suffix;
    - a JSON parent list ``[-1, 0, 1, -1]`` (``-1`` a root);
    - a family ``name[:T]`` of :data:`theory.graphs.FAMILIES` on ``T`` positions (default
      ``default_T``); the random laws are refused (a run needs one fixed graph: draw it to a file).

    ``g.graph["name"]`` is the label reports print: the file's name, the family's, or ``custom``.
    """
    from theory.graphs import FAMILIES, family

    text = str(text).strip()
    if text.startswith("["):
        where = f"graph {_clip(text)}"
        try:
            doc = parse_json(text, "it", max_depth=MAX_GRAPH_JSON_DEPTH, strict=False)
        except ValueError as exc:
            raise GraphSpecError(f"{where} is not a JSON list of parents such as [-1, 0, 1, -1] ({exc})") from None
        if not isinstance(doc, list):
            raise GraphSpecError(f"{where} is not a JSON list of parents such as [-1, 0, 1, -1]")
        g = _from_parent_list(where, doc, GraphSpecError)
        g.graph["name"] = "custom"
    elif Path(text).suffix.lower() in _GRAPH_FILE_SUFFIXES or _is_file(text):
        g = read_graph(text, max_parents=max_parents)
        g.graph["name"] = _label(Path(text).name)
        return g
    else:
        kind, _, t = text.partition(":")
        kind = kind.strip().lower()
        try:
            T = int(t) if t.strip() else default_T
        except ValueError:
            raise GraphSpecError(f"graph {text!r}: T must be an integer, got {t!r}") from None
        if T < 2:
            raise GraphSpecError(f"graph {text!r}: T must be at least 2 (one position and the query)")
        if T > MAX_FILE_NODES:
            raise GraphSpecError(f"graph {text!r}: T = {T} positions is more than {MAX_FILE_NODES}")
        fixed = [name for name, (_, random) in FAMILIES.items() if not random]
        if kind in FAMILIES and FAMILIES[kind][1]:
            raise GraphSpecError(f"graph {text!r}: {kind} is a random law, not one graph; draw one (theory.graphs) "
                                 f"and pass it as a file, or use {', '.join(f'{n}[:T]' for n in fixed)}")
        try:
            g = family(kind, T)
        except TheoryError:
            raise GraphSpecError(f"unknown graph {kind!r}; expected {', '.join(f'{n}[:T]' for n in fixed)}, a parent "
                                 "list such as [-1, 0, 1, -1], or a graph file (.graphml, .json, an edge list)") from None
        g.graph["name"] = kind
    try:
        validate(g, max_parents=max_parents)
    except TheoryError as exc:
        raise GraphSpecError(f"graph {_clip(text)}: {exc}") from None
    for v in g.nodes:
        g.nodes[v]["root"] = g.in_degree(v) == 0
    g.graph.setdefault("query", None)
    return g


def _label(name: str) -> str:
    """A file's name as reports and figures print it: bytes that are not UTF-8 written as escapes."""
    return name.encode("utf-8", "backslashreplace").decode("utf-8")


def _is_file(text: str) -> bool:
    try:
        return Path(text).is_file()
    except (OSError, ValueError):  # a name too long to be a path
        return False


def _clip(text: str, n: int = 60) -> str:
    return repr(text if len(text) <= n else text[: n - 3] + "...")


def graph_record(g) -> dict:
    """What a run keeps of its graph, enough to rebuild it: ``{"name", "nodes", "edges"}``
    (``edges`` the sorted ``[parent, child]`` pairs; nodes are ``0..nodes-1``)."""
    return {"name": str(g.graph.get("name") or "graph"), "nodes": int(g.number_of_nodes()),
            "edges": sorted([int(p), int(c)] for p, c in g.edges)}


def graph_from_record(record: dict) -> nx.DiGraph:
    """The graph of a :func:`graph_record` (validated; ``query`` the last node)."""
    try:
        n, edges = int(record["nodes"]), [(int(p), int(c)) for p, c in record["edges"]]
        g = nx.DiGraph(name=str(record["name"]), query=n - 1)
    except (KeyError, TypeError, ValueError) as exc:
        raise GraphSpecError(f"not a graph record (name, nodes, edges): {exc!r}") from None
    g.add_nodes_from(range(n))
    g.add_edges_from(edges)
    try:
        validate(g)
    except TheoryError as exc:
        raise GraphSpecError(f"graph record {record['name']!r}: {exc}") from None
    for v in g.nodes:
        g.nodes[v]["root"] = g.in_degree(v) == 0
    return g


def read_graph(path: str | Path, *, max_parents: int | None = None) -> nx.DiGraph:
    """The causal graph in ``path`` (format by suffix, see the module docstring), validated."""
    path = Path(path)
    try:
        text = read_text(path, max_bytes=MAX_GRAPH_FILE_BYTES, what="graph file")
    except FileNotFoundError:
        raise GraphFileError(f"{path}: cannot read it (No such file or directory)") from None
    except ValueError as exc:
        raise GraphFileError(str(exc)) from None
    suffix = path.suffix.lower()
    if suffix == ".graphml":
        g = _graphml(path, text)
    elif suffix == ".json":
        g = _json_graph(path, text)
    else:
        g = _edge_list(path, text)
    if g.number_of_nodes() > MAX_FILE_NODES:
        raise GraphFileError(f"{path}: {g.number_of_nodes()} nodes is more than {MAX_FILE_NODES}")
    try:
        validate(g, max_parents=max_parents)
    except TheoryError as exc:
        raise GraphFileError(f"{path}: {exc}") from None
    for v in g.nodes:
        g.nodes[v]["root"] = g.in_degree(v) == 0
    g.graph.setdefault("name", _label(path.name))
    g.graph.setdefault("query", None)
    return g


#: What networkx raises on data that is not the graph it expects (its parsers index and iterate freely).
_NX_DATA_ERRORS = (KeyError, TypeError, ValueError, AttributeError, IndexError, nx.NetworkXError)


def _graphml(path: Path, text: str) -> nx.DiGraph:
    import xml.etree.ElementTree as ET

    try:
        ET.fromstring(text)
    except ET.ParseError as exc:  # networkx's own message loses the place
        line, col = exc.position
        raise GraphFileError(f"{path}: line {line}, column {col}: not well-formed XML ({exc.msg})") from None
    try:
        g = nx.read_graphml(path, node_type=int)
    except (*_NX_DATA_ERRORS, ET.ParseError) as exc:
        raise GraphFileError(f"{path}: not a GraphML graph with integer node ids ({type(exc).__name__}: "
                             f"{' '.join(str(exc).split())[:200]})") from None
    if not g.is_directed():
        raise GraphFileError(f"{path}: the graph is undirected; a causal graph needs edgedefault=\"directed\"")
    return nx.DiGraph(g)


def _json_graph(path: Path, text: str) -> nx.DiGraph:
    try:
        doc = parse_json(text, str(path), max_depth=MAX_GRAPH_JSON_DEPTH, strict=False)
    except ValueError as exc:
        raise GraphFileError(str(exc)) from None
    if isinstance(doc, dict) and "parents" in doc:
        doc = doc["parents"]
    if isinstance(doc, list):
        return _from_parent_list(str(path), doc, GraphFileError)
    if not isinstance(doc, dict):
        raise GraphFileError(f"{path}: expected a parent list or an object, got {type(doc).__name__}")
    listed = doc.get("nodes", doc.get("adjacency", doc))  # node-link, adjacency, or {child: [parents]}
    if isinstance(listed, (list, dict)) and len(listed) > MAX_FILE_NODES:  # before networkx builds them
        raise GraphFileError(f"{path}: {len(listed)} nodes is more than {MAX_FILE_NODES}")
    try:
        if "adjacency" in doc:
            return nx.DiGraph(nx.adjacency_graph(doc, directed=True))
        if "nodes" in doc:
            edges = "links" if "links" in doc else "edges"
            return nx.DiGraph(nx.node_link_graph(doc, directed=True, edges=edges))
    except _NX_DATA_ERRORS as exc:
        raise GraphFileError(f"{path}: not networkx node-link or adjacency JSON (missing or bad "
                             f"{' '.join(str(exc).split())[:200]})") from None
    g = nx.DiGraph()
    for child, parents in doc.items():
        v = _position(path, child, f"key {child!r}")
        g.add_node(v)
        if not isinstance(parents, list):
            raise GraphFileError(f"{path}: node {child}: expected a list of parents, got {_clip(json.dumps(parents))}")
        g.add_edges_from((_position(path, p, f"node {child}'s parent {p!r}"), v) for p in parents)
    return g


def _from_parent_list(where: str, parents: list, error: type[GraphSpecError]) -> nx.DiGraph:
    """The graph of a JSON parent list (``parents[i]`` the parent of position ``i``, ``-1`` a root),
    from a ``.json`` file or a ``--graph`` value: the one parser of this format."""
    if len(parents) > MAX_FILE_NODES:
        raise error(f"{where}: {len(parents)} positions is more than {MAX_FILE_NODES}")
    g = nx.DiGraph()
    g.add_nodes_from(range(len(parents)))
    for i, p in enumerate(parents):
        p = _position(where, p, f"parents[{i}] = {_clip(json.dumps(p), 20)}", allow_root=True, error=error)
        if p >= len(parents):
            raise error(f"{where}: parents[{i}] = {p} is not a position of this {len(parents)}-node graph")
        if p >= 0:
            g.add_edge(p, i)
    return g


def _edge_list(path: Path, text: str) -> nx.DiGraph:
    g = nx.DiGraph()
    for n, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].replace(",", " ").split()
        if not line:
            continue
        if len(line) > 2:
            raise GraphFileError(f"{path}: line {n}: {raw.strip()!r} is not 'parent child' (two positions)")
        where = f"line {n}: {raw.strip()!r}"
        nodes = [_position(path, tok, where) for tok in line]
        g.add_node(nodes[-1])
        if len(nodes) == 2:
            g.add_edge(nodes[0], nodes[1])
    if g.number_of_nodes() == 0:
        raise GraphFileError(f"{path}: no edges or nodes (an edge list has one 'parent child' pair per line)")
    return g


def _position(path, value, where: str, *, allow_root: bool = False,
              error: type[GraphSpecError] = GraphFileError) -> int:
    try:
        v = int(value) if isinstance(value, (int, str)) and not isinstance(value, bool) else None
    except (TypeError, ValueError):
        v = None
    if v is None or v < (-1 if allow_root else 0):
        raise error(f"{path}: {where}: a position must be an integer "
                    f"{'>= -1 (-1 for a root)' if allow_root else '>= 0'}")
    if v > MAX_FILE_NODES:
        raise error(f"{path}: {where}: {v} is not a position (a graph has at most {MAX_FILE_NODES} nodes)")
    return v


# ---------------------------------------------------------------------------- figures --
def graph_layout(g) -> dict[int, tuple[float, float]]:
    """Hierarchical layout: x is the position, y minus the depth (longest path from a root)."""
    depth = {}
    for v in nx.topological_sort(g):
        depth[v] = max((depth[p] + 1 for p in g.predecessors(v)), default=0)
    return {v: (float(v), -float(depth[v])) for v in g.nodes}


def draw_graph(ax, g, *, title: str | None = None, highlight: dict[int, str] | None = None) -> None:
    """Draw the causal graph ``g`` on ``ax``: positions left to right, depth downwards.

    Roots are squares, other nodes circles; the query (``g.graph["query"]``) is a red star.
    ``highlight`` maps nodes to a colour (e.g. the positions a counterexample is about).
    Edges point parent -> child; long edges are drawn as arcs so that they do not hide nodes.
    """
    pos = graph_layout(g)
    query = g.graph.get("query")
    highlight = highlight or {}
    for p, c in g.edges:
        (x0, y0), (x1, y1) = pos[p], pos[c]
        rad = 0.0 if c - p <= 1 or y0 != y1 else -0.3
        ax.annotate("", xy=(x1, y1), xytext=(x0, y0),
                    arrowprops=dict(arrowstyle="-|>", color="0.35", lw=0.9, shrinkA=6, shrinkB=6,
                                    connectionstyle=f"arc3,rad={rad}"))
    for v in g.nodes:
        x, y = pos[v]
        is_root = g.in_degree(v) == 0
        marker = "*" if v == query else ("s" if is_root else "o")
        color = highlight.get(v, "tab:red" if v == query else ("0.85" if is_root else "tab:blue"))
        ax.scatter([x], [y], marker=marker, s=160 if v == query else 90, c=color, edgecolors="k", linewidths=0.6,
                   zorder=3)
        if g.number_of_nodes() <= 40:
            ax.annotate(str(v), (x, y), textcoords="offset points", xytext=(0, 8), ha="center", fontsize=6)
    from matplotlib.lines import Line2D
    from matplotlib.ticker import MaxNLocator

    depth_max = int(round(-min(y for _, y in pos.values())))
    levels = list(range(0, depth_max + 1, max(1, -(-(depth_max + 1) // 8))))  # at most 8 depth ticks
    ax.set_xlabel("position")
    ax.set_ylabel("depth")
    ax.xaxis.set_major_locator(MaxNLocator(nbins=8, integer=True))
    ax.set_yticks([-d for d in levels], [str(d) for d in levels])
    # room below the deepest level for the legend, so that it never hides a node
    ax.set_ylim(-depth_max - 1.2, 0.6)
    ax.margins(x=0.06)
    ax.set_title(title or g.graph.get("name") or "causal graph", fontsize=8)
    handles = [Line2D([], [], marker="s", ls="", mfc="0.85", mec="k", label="root"),
               Line2D([], [], marker="o", ls="", mfc="tab:blue", mec="k", label="child")]
    if query is not None:
        handles.append(Line2D([], [], marker="*", ls="", mfc="tab:red", mec="k", ms=10, label="query"))
    ax.legend(handles=handles, fontsize=6, loc="lower center", ncol=len(handles), frameon=False)


def counterexample_graph(cex) -> nx.DiGraph | None:
    """The causal graph a counterexample record is about, or None when it names none.

    Records keep the graph as ``parents`` (one parent per node, ``-1`` for roots) or
    ``parent_sets``; ``h`` (the query) and ``h_prime`` (a competitor), when present, are marked."""
    if not isinstance(cex, dict):
        return None
    from theory.errors import TheoryError
    from theory.graphs import from_parent_sets, from_parents

    try:
        if isinstance(cex.get("parents"), list) and cex["parents"] and all(isinstance(p, int) for p in cex["parents"]):
            g = from_parents(cex["parents"])
        elif isinstance(cex.get("parent_sets"), list) and cex["parent_sets"]:
            g = from_parent_sets([tuple(p) for p in cex["parent_sets"]])
        else:
            return None
    except (TheoryError, TypeError, ValueError):
        return None  # a record whose graph is not a valid one is shown as text only
    h = cex.get("h")
    g.graph["query"] = h if isinstance(h, int) and h in g else None
    g.graph["name"] = f"{cex.get('graph') or 'graph'} of the counterexample"
    return g


def draw_counterexample(ctx, cex, name: str, title: str) -> str | None:
    """Draw the counterexample's graph to ``figures/<claim>-<name>.png``; None when it has none."""
    g = counterexample_graph(cex)
    if g is None:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    hp = cex.get("h_prime")
    fig, ax = plt.subplots(figsize=(max(4.0, 0.35 * g.number_of_nodes() + 2), 3.2))
    draw_graph(ax, g, title=title, highlight={hp: "tab:orange"} if isinstance(hp, int) and hp in g else None)
    return ctx.save_figure(fig, name)
