"""``icl-verify run --graph``: a user's causal graph in place of the graphs of the claims that take
one (``Claim.graph_input``), checked to fit before anything runs, recorded, drawn, and kept by
``--resume``."""
import contextlib
import io
import itertools
import json
import re
import shutil

import networkx as nx
import pytest

from sim.claims.base import GraphFitError, GraphInput
from sim.cli import EXIT_OK, EXIT_USAGE, main
from sim.graphs import GRAPH_FILE_FORMATS, graph_from_spec, graph_record
from sim.runner import RunConfig
from theory.errors import TheoryError
from theory.graphs import GivenGraph, chain, k_parent_dag, k_parent_sets, n_parents, star

T = 8  # N.K8's exact tier enumerates all S^T prompts: 8 is the longest it takes


def _write(path, g) -> str:
    """``g``'s nodes and edges as networkx writes GraphML (no attributes of ours)."""
    plain = nx.DiGraph()
    plain.add_nodes_from(g.nodes)
    plain.add_edges_from(g.edges)
    nx.write_graphml(plain, path)
    return str(path)


def _run(*args) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(["run", *args, "--no-progress"])
    return code, err.getvalue()


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """N.K8 (quick) run on a chain and on a star, each from a GraphML file written by networkx."""
    root = tmp_path_factory.mktemp("run-graph")
    out = {}
    for name, g in (("chain", chain(T)), ("star", star(T))):
        path = _write(root / f"{name}{T}.graphml", g)
        code, err = _run("--graph", path, "--claims", "N.K8", "--out", str(root / name))
        out[name] = {"code": code, "err": err, "dir": root / name, "file": path, "graph": g,
                     "results": json.loads((root / name / "results.json").read_text())}
    return out


def test_a_graphml_file_written_by_networkx_is_what_N_K8_runs_on(runs):
    r = runs["chain"]
    assert r["code"] == EXIT_OK, r["err"]
    edges = sorted([p, c] for p, c in r["graph"].edges)
    assert r["results"]["config"]["graph"] == {"name": f"chain{T}.graphml", "nodes": T, "edges": edges}
    assert json.loads((r["dir"] / "run.json").read_text())["config"]["graph"]["edges"] == edges
    claim = r["results"]["claims"][0]
    assert claim["graph"]["edges"] == edges and claim["graph"]["nodes"] == T
    # the exact tier's graph names became the file's graph, at each S of its sizes, with T = its positions
    assert claim["graph"]["settings"] == {"graphs": [f"chain{T}.graphml"], "sizes": [[2, T], [3, T]]}
    assert (r["dir"] / claim["graph"]["figure"]).stat().st_size > 1000
    assert f"graph=chain{T}.graphml ({T} nodes, {len(edges)} edges) on N.K8" in r["err"]
    md = (r["dir"] / "report.md").read_text()
    assert f"*Causal graph:* ran on the user's graph chain{T}.graphml" in md and "0->1, 1->2" in md
    assert f"![N.K8 user graph]({claim['graph']['figure']})" in md
    assert "Causal graph" in (r["dir"] / "report.html").read_text()


def _defined_prompts(g, sizes) -> int:
    """Prompts (every S^T of each size) on which the empirical transition estimator is defined:
    some edge's parent carries the query's token (the last position's)."""
    parents = sorted({p for p, _ in g.edges})
    return sum(any(x[p] == x[-1] for p in parents)
               for S in sizes for x in itertools.product(range(S), repeat=g.number_of_nodes()))


def test_the_result_depends_on_the_graph_given(runs):
    found = {}
    for name, r in runs.items():
        exact = next(t for t in r["results"]["claims"][0]["tiers"] if t["tier"] == "exact")
        repair = next(f for f in exact["findings"] if "repaired" in f["reading"])
        found[name] = int(re.search(r"(\d+) defined prompts", repair["detail"]).group(1))
        # counted on the given graph, plus N's hand example, always one of the exact tier's instances
        assert found[name] == _defined_prompts(r["graph"], (2, 3)) + 1
    assert found["chain"] != found["star"]
    assert runs["chain"]["results"]["run_id"] != runs["star"]["results"]["run_id"]


def test_resume_keeps_the_graph_and_refuses_another(runs, tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(runs["chain"]["dir"], run_dir)
    code, err = _run("--resume", "--out", str(run_dir), "--graph", runs["star"]["file"])
    assert code == EXIT_USAGE and f"made with --graph chain{T}.graphml" in err and "Traceback" not in err
    code, err = _run("--resume", "--out", str(run_dir))
    assert code == EXIT_OK, err
    assert json.loads((run_dir / "results.json").read_text())["config"]["graph"] == \
        runs["chain"]["results"]["config"]["graph"]


def test_a_run_made_without_a_graph_does_not_resume_with_one(tmp_path):
    config = RunConfig(claims="N.K8")
    (tmp_path / "run.json").write_text(json.dumps({"schema": "icl-verify/run/v1", "run_id": config.run_id,
                                                   "config": config.as_dict(), "config_hash": config.digest()}))
    code, err = _run("--resume", "--out", str(tmp_path), "--graph", "chain:8")
    assert code == EXIT_USAGE and "made without --graph" in err


def test_a_cyclic_file_exits_2_naming_the_cycle(tmp_path):
    path = _write(tmp_path / "cycle.graphml", nx.DiGraph([(0, 1), (1, 2), (2, 0)]))
    code, err = _run("--graph", path, "--claims", "N.K8", "--out", str(tmp_path / "out"))
    assert code == EXIT_USAGE and "cycle: 0 -> 1 -> 2 -> 0" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("edges, nodes, claims, match", [
    ([(0, 2), (1, 2)], 4, "N.K8", "N.K8 does not take this graph: node 2 has 2 parents [0, 1]"),
    ([(0, 1), (1, 2), (2, 3)], 4, "N.K3", "N.K3 does not take this graph: node 3, the last, is the query"),
    ([(0, 1), (0, 2)], 3, "N.K9", "N.K9 does not take this graph: node 1 has 1 parent [0], not 2"),
    ([(0, 1)], 12, "N.K8", "N.K8 does not take this graph: 12 nodes is too many"),
    ([(0, 1)], 8, "N.E", "N.E does not take this graph: 8 nodes, but it runs at T = 20"),
    ([(0, 2), (1, 2)], 4, "N.K3,N.K8", "(or leave N.K3 out of --claims)"),
])
def test_a_graph_that_does_not_fit_exits_2_naming_the_claim_and_node(tmp_path, edges, nodes, claims, match):
    g = nx.DiGraph(edges)
    g.add_nodes_from(range(nodes))
    code, err = _run("--graph", _write(tmp_path / "g.graphml", g), "--claims", claims, "--out", str(tmp_path / "o"))
    assert code == EXIT_USAGE and match in err, err
    assert not (tmp_path / "o").exists()


def test_no_selected_claim_takes_a_graph(tmp_path):
    code, err = _run("--graph", "chain:8", "--claims", "W.*", "--out", str(tmp_path / "o"))
    assert code == EXIT_USAGE and "no claim matching 'W.*' takes a graph" in err
    assert all(c in err for c in ("N.T", "N.K3", "N.K8", "N.K9", "N.E"))
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("args, match", [
    (["--graph", "chain:8", "--graph", "star:8"], "a run takes one graph"),
    (["--graph", "random:8"], "random is a random law, not one graph"),
    (["--graph", "ring:8"], "unknown graph 'ring'"),
])
def test_bad_graph_options_exit_2(tmp_path, args, match):
    code, err = _run(*args, "--claims", "N.K8", "--out", str(tmp_path / "o"))
    assert code == EXIT_USAGE and match in err


def test_help_names_the_file_formats(capsys):
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--graph GRAPH" in text and " ".join(GRAPH_FILE_FORMATS.split()) in text


# -- the pieces --------------------------------------------------------------------------------
def test_a_given_graph_stands_for_itself_where_families_are_resolved():
    tree = GivenGraph.from_graph("mine", star(6))
    assert n_parents(tree, 6).tolist() == [-1, 0, 0, 0, 0, -1] and tree == "mine"
    with pytest.raises(TheoryError, match="has 6 positions, not the 7"):
        n_parents(tree, 7)
    dag = GivenGraph.from_graph("tri", k_parent_dag("ngram", 5, 2))
    assert k_parent_sets(dag, 5, 2) == k_parent_sets("ngram", 5, 2)
    with pytest.raises(TheoryError, match="node 2 has 2 parents"):
        n_parents(dag, 6)
    import copy
    import pickle

    assert copy.deepcopy(dag).parent_sets == pickle.loads(pickle.dumps(dag)).parent_sets == dag.parent_sets


def test_graph_input_puts_the_graph_and_its_length_in_the_settings():
    given = GivenGraph.from_graph("g", chain(5))
    tree = GraphInput(settings={"graphs": "T", "graph": "T"})
    assert tree.overrides(given, {"graphs": ("chain", "icl"), "graph": "chain", "T": 20}) == \
        {"graphs": (given,), "graph": given, "T": 5}
    sizes = GraphInput(settings={"graphs": "sizes"})
    assert sizes.overrides(given, {"graphs": ("chain",), "sizes": ((2, 6), (3, 5), (2, 8))}) == \
        {"graphs": (given,), "sizes": ((2, 5), (3, 5))}
    kpar = GraphInput(settings={"graphs": "sizes"}, form="k-parent", k=2)
    assert kpar.overrides(given, {"graphs": ("ngram",), "sizes": ((2, 6),)})["sizes"] == ((2, 4),)  # T = nodes - 1
    fixed = GraphInput(settings={"graphs": "T"}, fixed_length=True)
    assert fixed.overrides(given, {"graphs": ("chain",), "T": 5}) == {"graphs": (given,)}


def test_graph_input_checks_name_the_node():
    g = graph_from_spec("ngram:6")
    with pytest.raises(GraphFitError, match=r"X does not take this graph: node 2 has 2 parents \[0, 1\]"):
        GraphInput(settings={"graphs": "T"}).check("X", g, {})
    GraphInput(settings={"graphs": "sizes"}, form="k-parent", k=2).check("X", g, {})
    target_root = nx.DiGraph([(0, 2), (1, 2)])
    target_root.add_node(3)
    with pytest.raises(GraphFitError, match="node 3, the last, is the target and needs 2 parents"):
        GraphInput(settings={"graphs": "sizes"}, form="k-parent", k=2).check("X", target_root, {})
    with pytest.raises(GraphFitError, match="6 nodes, but it runs at T = 20"):
        GraphInput(settings={"graphs": "T"}, fixed_length=True, form="k-parent", k=2).check("X", g, {"T": 20})
    with pytest.raises(ValueError, match="does not go with form"):
        GraphInput(settings={"graphs": "T"}, k=2)


def test_the_run_id_follows_the_graph():
    a, b = (RunConfig(graph=graph_record(graph_from_spec(s))) for s in ("chain:8", "star:8"))
    assert len({a.run_id, b.run_id, RunConfig().run_id}) == 3
