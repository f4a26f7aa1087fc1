"""Users' graphs from files, and graphs drawn: every format reads to the same graph, and a
malformed file names its line, node, edge or cycle."""
import json

import networkx as nx
import numpy as np
import pytest

from sim.audit import parse_graph
from sim.cli import EXIT_USAGE, main
from sim.graphs import GraphFileError, draw_graph, graph_layout, read_graph
from theory.graphs import from_parents, k_parent_dag, n_parents, n_random, to_parents

PARENTS = [-1, 0, 0, 1, -1, 4, -1]


def _plain(g):  # GraphML keeps only what networkx can write: no graph attributes of ours
    h = nx.DiGraph()
    h.add_nodes_from(g.nodes)
    h.add_edges_from(g.edges)
    return h


@pytest.fixture
def files(tmp_path):
    g = _plain(from_parents(PARENTS))
    nx.write_graphml(g, tmp_path / "g.graphml")
    (tmp_path / "list.json").write_text(json.dumps(PARENTS))
    (tmp_path / "obj.json").write_text(json.dumps({"parents": PARENTS}))
    (tmp_path / "nodelink.json").write_text(json.dumps(nx.node_link_data(g, edges="edges")))
    (tmp_path / "adj.json").write_text(json.dumps(nx.adjacency_data(g)))
    (tmp_path / "map.json").write_text(json.dumps({str(i): ([p] if p >= 0 else []) for i, p in enumerate(PARENTS)}))
    (tmp_path / "edges.txt").write_text("# parent child\n0 1\n0,2\n1\t3\n\n4 5  # a comment\n6\n")
    return tmp_path


@pytest.mark.parametrize("name", ["g.graphml", "list.json", "obj.json", "nodelink.json", "adj.json", "map.json",
                                  "edges.txt"])
def test_every_format_reads_to_the_same_graph(files, name):
    g = read_graph(files / name)
    assert to_parents(g).tolist() == PARENTS
    assert g.nodes[4]["root"] and not g.nodes[5]["root"]


@pytest.mark.parametrize("content, suffix, match", [
    ("0 1\n1 two\n", ".txt", r"line 2: '1 two': a position must be an integer"),
    ("0 1 2\n", ".txt", r"line 1: '0 1 2' is not 'parent child'"),
    ("0 1\n1 2\n2 0\n", ".txt", r"cycle: 0 -> 1 -> 2 -> 0"),
    ("1 0\n", ".txt", r"edge 1 -> 0 points forwards"),
    ("", ".txt", r"no edges or nodes"),
    ('{"parents": [-1, 0,', ".json", r"line 1, column \d+: not JSON"),
    ("[-1, 0, 7]", ".json", r"parents\[2\] = 7 is not a position"),
    ('{"nodes": [{"id": 0}], "edges": [{"source": 0}]}', ".json", r"not networkx node-link"),
    ("<graphml><graph", ".graphml", r"line 1, column \d+: not well-formed XML"),
])
def test_a_malformed_file_names_the_place(tmp_path, content, suffix, match):
    path = tmp_path / f"bad{suffix}"
    path.write_text(content)
    with pytest.raises(GraphFileError, match=match):
        read_graph(path)


def test_two_parents_are_refused_where_a_tree_is_needed(tmp_path):
    path = tmp_path / "two.txt"
    path.write_text("0 2\n1 2\n")
    assert read_graph(path).in_degree(2) == 2  # a k-parent DAG is a graph too
    with pytest.raises(GraphFileError, match="node 2 has 2 parents"):
        read_graph(path, max_parents=1)


def test_prior_reads_a_graphml_file_written_by_networkx(tmp_path):
    g = _plain(n_random(12, np.random.default_rng(1)))
    path = tmp_path / "mygraph.graphml"
    nx.write_graphml(g, path)
    info = parse_graph(str(path))
    assert info.parents == to_parents(g).tolist() and info.T == 12 and "mygraph.graphml" in info.name


@pytest.mark.parametrize("edges, match", [([(0, 1), (1, 2), (2, 0)], "cycle: 0 -> 1 -> 2 -> 0"),
                                          ([(0, 2), (1, 2)], "node 2 has 2 parents")])
def test_prior_refuses_a_bad_graph_file_with_exit_2(tmp_path, capsys, edges, match):
    path = tmp_path / "bad.graphml"
    nx.write_graphml(nx.DiGraph(edges), path)
    code = main(["prior", "dirichlet(alpha=1)", "--graph", str(path), "--claims", "N.K3", "--out",
                 str(tmp_path / "out"), "--no-progress"])
    err = capsys.readouterr().err
    assert code == EXIT_USAGE and match in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_families_parse_as_before():
    assert parse_graph("chain:6").parents == n_parents("chain", 6).tolist() == [-1, 0, 1, 2, 3, -1]
    assert parse_graph("icf:5").parents == [-1, 0, -1, 2, -1]


def test_drawing_marks_roots_and_the_query():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    g = k_parent_dag("ngram", 5, 2)
    pos = graph_layout(g)
    assert pos[0] == (0.0, 0.0) and pos[2] == (2.0, -1.0) and pos[5] == (5.0, -4.0)
    fig, ax = plt.subplots()
    draw_graph(ax, g)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["root", "child", "query"]
    plt.close(fig)


def test_a_failing_tier_and_a_failing_finding_get_their_counterexample_graph_drawn(tmp_path):
    from sim.claims.base import Claim, Source
    from sim.runner import RunConfig, run
    from sim.verdict import Finding, Outcome, TierResult, Verdict

    cex = {"pi": [[0, 1], [1, 0]], "parents": [-1, 0, 1, 0], "h": 3, "h_prime": 2}

    def check(ctx):
        return TierResult("exact", Verdict.FAIL, Outcome.VIOLATED, "violated", counterexample=cex,
                          findings=[Finding("literal statement", "r", "FAIL", "d", counterexample={"parents": [-1, 0]}),
                                    Finding("literal statement", "r2", "PASS", "d2", counterexample=cex)])
    claim = Claim(id="T.DRAW", title="drawn", source=Source("T", "Lemma"), statement="s", assumptions=(),
                  checks={"exact": check}, settings={"quick": {"tiers": ("exact",)}})
    run(RunConfig(profile="quick"), [claim], out_dir=tmp_path, show_progress=False)
    doc = json.loads((tmp_path / "results.json").read_text())
    figs = doc["claims"][0]["tiers"][0]["figures"]
    assert figs == ["figures/T.DRAW-exact-counterexample-graph.png", "figures/T.DRAW-exact-finding1-graph.png"]
    assert all((tmp_path / f).stat().st_size > 1000 for f in figs)
    assert "T.DRAW-exact-counterexample-graph.png" in (tmp_path / "report.md").read_text()
