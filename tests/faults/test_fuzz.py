"""The project's own fuzz suite (issue 49): hypothesis strategies for every input surface, run in
this process against :func:`sim.cli.main` (a few through the console script), each case held to
the contract of docs/inputs.md:

- exit 2 with one line on stderr that names the value, option or file; or a correct result
  (exit 0 or 1, or 3 where a user's check crashed, with a whole report);
- no traceback;
- nothing written outside --out;
- a run folder whole or absent.

Most cases end at the first refusal, in milliseconds; a valid input is made to end at a refusal
too where running it would be slow (``--out`` names a file: the run is refused after every
check of the input it follows), and the cheap claims (N.K7, W.P1 with ``--budget 0``) run for
real. Each test counts its cases and asserts its share; :data:`MINIMUM` adds up to at least 500.
"""
from __future__ import annotations

import json
import os
import shutil
import string
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from .conftest import run_cli, strict_json

pytestmark = pytest.mark.filterwarnings("ignore:Generating overly large repr")  # the long specs are the point

#: Cases each test must run: the suite's share of the 500 a CI run needs.
MINIMUM = {"prior_specs": 150, "samplers": 60, "graphs": 120, "plugins": 40, "run_folders": 90, "options": 100}


def _fuzz(name):
    """The settings of one fuzz test: the loaded profile's (derandomized in the test suite), with the
    test's share of cases and no health check (the cases are slow by design)."""
    return settings(max_examples=MINIMUM[name], deadline=None, suppress_health_check=list(HealthCheck))


def test_the_suite_makes_at_least_500_cases_a_run():
    assert sum(MINIMUM.values()) >= 500


class _Count:
    def __init__(self):
        self.n = 0


def _contract(res, names=(), *, run_dir=None, before=None):
    """Exit 2 with one line naming one of ``names``; or a finished run in ``run_dir`` (when given);
    never a traceback or a file outside the run folder; a run folder whole or absent (or, when the
    input was refused, as it was: ``before``)."""
    assert "Traceback" not in res.err and "Traceback" not in res.out, res
    assert not res.new_paths, res
    if res.code == 2:
        lines = res.err.splitlines()
        assert len(lines) == 1 and lines[0].startswith("icl-verify") and "error:" in lines[0], res
        assert not names or any(n in lines[0] for n in names), (names, res)
        if run_dir is not None:
            assert _snapshot(run_dir) == before, res
        return "refused"
    assert res.code in (0, 1, 3), res
    if run_dir is not None:
        from sim.report import load_results

        doc = load_results(run_dir)
        strict_json(run_dir / "run.json")
        if res.code == 3:
            assert any(c["verdict"] == "ERROR" for c in doc["claims"]), res
        for name in ("report.md", "report.html", "junit.xml"):
            assert (run_dir / name).is_file()
    return "ran"


def _snapshot(folder):
    folder = Path(folder)
    if not folder.exists():
        return None
    return {str(p.relative_to(folder)): (p.read_bytes() if p.is_file() else None) for p in sorted(folder.rglob("*"))}


def _workdir():
    """A fresh folder for one case, holding ``afile`` (a file as --out: the run is refused after its inputs)."""
    d = Path(tempfile.mkdtemp(prefix="icl-fuzz-"))
    (d / "afile").write_text("not a folder")
    return d


# ------------------------------------------------------------------------------------ prior specs --
from sim.priors import PRIORS  # noqa: E402

_NUMBER_TEXT = st.one_of(
    st.integers(-5, 5).map(str), st.integers(-10 ** 40, 10 ** 40).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["1/3", "1/0", "0.0", "-0", "1e308*10", "1e-400", "nan", "inf", "True", "'a'", "1_000", "0x10",
                     "1e999", "2**3", "(1)", "--1", "+.5", "1.", "٣", "1e-320", "0.5", "1", "0.3", "0.7"]))
_MATRIX_TEXT = st.sampled_from(["[[0.9, 0.1], [0.2, 0.8]]", "[[1]]", "[[0.5, 0.5], [0.5]]", "[[1e308, 1e308], [1, 0]]",
                                "[[-0.1, 1.1], [0.5, 0.5]]", "[]", "[[0.5, 0.5], [0.5, 0.5]]", "[[nan, 1], [1, 0]]",
                                "[[1/3, 2/3], [1/3, 2/3]]", "[[0.9, 0.1], [0.2, 0.8], [0.1, 0.9]]"])
_PARAM_NAMES = sorted({p.name for s in PRIORS.values() for p in s.params} | {"alpha", "beta", "x", "_", "d"})


def _call(name, args, kwargs):
    return f"{name}({', '.join([*args, *(f'{k}={v}' for k, v in kwargs)])})"


_SPEC = st.recursive(
    st.one_of(_NUMBER_TEXT, _MATRIX_TEXT, st.sampled_from(["'my.py:draw'", "True", "None", "[0.5, 0.5]", "x"])),
    lambda inner: st.builds(_call, st.sampled_from(list(PRIORS) * 3 + ["Dirichlet", "unknown", "eval", "__import__"]),
                            st.lists(inner, max_size=3),
                            st.lists(st.tuples(st.sampled_from(_PARAM_NAMES), inner), max_size=3)),
    max_leaves=8)
_DEEP = st.builds(lambda k, n: {0: "dirichlet(alpha=" + "+".join(["1"] * n) + ")",
                                1: "dirichlet(alpha=" + "-" * n + "1)",
                                2: "floor(" * n + "dirichlet(alpha=1)" + ", gamma=0.1)" * n,
                                3: "mixture(" + ", ".join(["dirichlet(alpha=1)"] * n) + ")",
                                4: "point(" + "[" * n + "1" + "]" * n + ")"}[k],
                  st.integers(0, 4), st.integers(1, 3000))


@st.composite
def _mutated(draw, base):
    text = draw(base)
    op = draw(st.integers(0, 4))
    if op == 1 and text:  # cut short
        text = text[:draw(st.integers(0, len(text) - 1))]
    elif op == 2:  # a character of any kind somewhere, or bytes that are not UTF-8 as argv keeps them
        k = draw(st.integers(0, len(text)))
        bad = draw(st.one_of(st.characters(), st.binary(min_size=1, max_size=3).map(os.fsdecode)))
        text = text[:k] + bad + text[k:]
    elif op == 3:
        text = draw(st.sampled_from([" ", "\t", "\n", "(", ")", ",", "=", "["])) + text
    return text


_SPEC_TEXT = st.one_of(_SPEC, _mutated(_SPEC), _DEEP, st.text(max_size=40),
                       st.sampled_from(["", " ", "x.py:draw", ":", "a:b:c", "os:system", "dirichlet"]))


def test_prior_specs():
    from sim.priors import PriorError, parse_prior

    count = _Count()

    @_fuzz("prior_specs")
    @given(spec=_SPEC_TEXT, d=st.one_of(st.none(), st.integers(-2, 300).map(str), st.sampled_from(["x", "3.0", ""])))
    def case(spec, d):
        count.n += 1
        work = _workdir()
        try:
            argv = ["prior", spec, "--claims", "W.L3", "--out", "afile", "--no-progress"] + (["--d", d] if d else [])
            res = run_cli(argv, work)
            assert res.code == 2, res  # a bad spec or --d; or a good one refused at --out, after the spec was read
            _contract(res, ("prior spec", "sampler", "--d", "d = ", "--out afile", "is a prior on 1 state"))
            if "--out afile is a file" in res.err:  # a spec that parses draws valid matrices and round-trips
                prior = parse_prior(spec)
                prior = prior if prior.d is not None else prior.bind(3)
                import numpy as np

                draws = prior.sample(np.random.default_rng(0), 4)
                assert draws.shape[1:] == (prior.d, prior.d)
                try:
                    again = parse_prior(prior.spec())
                except PriorError as exc:  # pragma: no cover - the failure is the finding
                    raise AssertionError(f"{spec!r} -> {prior.spec()!r} does not parse back: {exc}")
                assert again.spec() == prior.spec()
        finally:
            shutil.rmtree(work, ignore_errors=True)

    case()
    assert count.n >= MINIMUM["prior_specs"]


# --------------------------------------------------------------------------------------- samplers --
_RETURNS = ["np.full((n, d, d), 1.0 / d)", "np.full((n, d, d), 1.0 / d).tolist()", "np.full((n, d, d), np.nan)",
            "-np.full((n, d, d), 1.0 / d)", "np.full((n, d, d), 1e308)", "np.full((n, d, d), 1.0 / d).astype(complex)",
            "np.full((n, d + 1, d), 1.0 / d)", "np.full((d, d), 1.0 / d)", "None", "'abc'", "[[1]] * n",
            "[[[1.0]], [[1.0, 0.0]]]", "np.eye(d)[None].repeat(n, 0)", "np.full((n + 1, d, d), 1.0 / d)",
            "np.full((n, d, d), True)", "{'a': 1}", "np.empty((n, 0, 0))", "rng.dirichlet(np.ones(d), size=(n, d))",
            "object()", "np.full((n, d, d), 1.0 / d, dtype=object)", "np.full((n, d, d), 10 ** 400 if False else 1e300)",
            "iter([1, 2])", "[[[10 ** 400]]]", "np.full((n, d, d), 1.0 / d)[..., ::-1]"]
_RAISES = ["", "raise ValueError('bad row')", "raise SystemExit(0)", "raise SystemExit('my message')",
           "import sys; sys.exit(2)", "raise KeyError(1)", "raise RecursionError", "raise MemoryError",
           "raise Exception('line one\\nline two')", "raise StopIteration", "raise GeneratorExit",
           "raise type('Custom', (BaseException,), {})()", "raise ZeroDivisionError", "1 / 0", "raise OSError(5, 'io')"]
_AT_IMPORT = ["", "raise ImportError('nope')", "import sys; sys.exit(0)", "x = 1 / 0", "this is not python",
              "raise SystemExit('at import')", "draw = 5", "raise type('E', (BaseException,), {})()"]


def test_samplers():
    count = _Count()

    @_fuzz("samplers")
    @given(ret=st.sampled_from(_RETURNS), raises=st.sampled_from(_RAISES), at_import=st.sampled_from(_AT_IMPORT),
           d=st.one_of(st.integers(1, 5), st.sampled_from([256, 257, 300])),
           fn=st.sampled_from(["draw", "draw", "draw", "drow", "_private"]),
           path=st.sampled_from(["s.py", "sub/s.py", "missing.py", "s.txt", "sub"]))
    def case(ret, raises, at_import, d, fn, path):
        count.n += 1
        work = _workdir()
        try:
            (work / "sub").mkdir()
            body = f"import numpy as np\n{at_import}\n\ndef draw(rng, n, d={d}):\n    {raises or 'pass'}\n    return {ret}\n"
            for name in ("s.py", "sub/s.py", "s.txt"):
                (work / name).write_text(body)
            res = run_cli(["prior", f"{path}:{fn}", "--claims", "W.L3", "--out", "afile", "--no-progress"], work)
            _contract(res, (f"sampler {path}:{fn}", f"sampler file {path}", f"sampler {path} ", f"sampler('{path}:{fn}')",
                            f"sampler module '{path}'", "--out afile"))
            assert res.code == 2, res
        finally:
            shutil.rmtree(work, ignore_errors=True)

    case()
    assert count.n >= MINIMUM["samplers"]


# ----------------------------------------------------------------------------------------- graphs --
_JSON_SCALAR = st.one_of(st.none(), st.booleans(), st.integers(-3, 12), st.integers(-10 ** 30, 10 ** 30),
                         st.floats(allow_nan=False), st.text(max_size=5))
_JSON = st.recursive(_JSON_SCALAR, lambda inner: st.one_of(st.lists(inner, max_size=6),
                                                           st.dictionaries(st.text(max_size=6), inner, max_size=4)),
                     max_leaves=20)
_PARENTS = st.lists(st.one_of(st.integers(-2, 12), _JSON_SCALAR), max_size=14)
_EDGE_TOKEN = st.sampled_from(["0", "1", "2", "3", "-1", "x", "1.5", "#", ",", " ", "\t", "99999999999999999999",
                               "0 1", "1 2", "2 3", "٣"])


@st.composite
def _graph_case(draw):
    """(file name or None, file content or None, the --graph value)."""
    kind = draw(st.sampled_from(["parents", "json", "nodelink", "childmap", "edges", "graphml", "spec", "inline",
                                 "deep", "badfile"]))
    if kind == "parents":
        return "g.json", json.dumps(draw(st.one_of(_PARENTS, st.builds(lambda p: {"parents": p}, _PARENTS)))), "g.json"
    if kind == "json":
        return "g.json", json.dumps(draw(_JSON)), "g.json"
    if kind == "nodelink":
        nodes = draw(st.lists(st.one_of(st.builds(lambda i: {"id": i}, _JSON_SCALAR), _JSON), max_size=6))
        edges = draw(st.lists(st.one_of(st.builds(lambda s, t: {"source": s, "target": t}, _JSON_SCALAR, _JSON_SCALAR),
                                        _JSON), max_size=6))
        doc = draw(st.sampled_from([{"nodes": nodes, "edges": edges}, {"nodes": nodes, "links": edges},
                                    {"adjacency": edges, "nodes": nodes}, {"directed": True, "nodes": nodes}]))
        return "g.json", json.dumps(doc), "g.json"
    if kind == "childmap":
        doc = draw(st.dictionaries(st.one_of(st.integers(-1, 8).map(str), st.text(max_size=3)),
                                   st.one_of(st.lists(st.integers(-1, 8), max_size=3), _JSON_SCALAR), max_size=6))
        return "g.json", json.dumps(doc), "g.json"
    if kind == "edges":
        lines = draw(st.lists(st.lists(_EDGE_TOKEN, max_size=3).map(" ".join), max_size=8))
        return draw(st.sampled_from(["g.txt", "g.edges", "g.csv", "g"])), "\n".join(lines), None
    if kind == "graphml":
        import networkx as nx

        edges = draw(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6)), max_size=8))
        g = nx.DiGraph(edges) if draw(st.booleans()) else nx.Graph(edges)
        text = "\n".join(nx.generate_graphml(g))
        k = draw(st.integers(0, len(text)))
        text = draw(st.sampled_from([text, text[:k], text[:k] + draw(st.text(max_size=4)) + text[k:],
                                     text.replace('id="n', 'id="x'), "<graphml>" * 3000]))
        return "g.graphml", text, "g.graphml"
    if kind == "spec":
        name = draw(st.sampled_from(["chain", "icf", "star", "roots", "ngram", "random", "ring", "", "CHAIN"]))
        t = draw(st.one_of(st.integers(-3, 30).map(str), st.sampled_from(["", "x", "1e3", "99999999", "2.5", "٣"])))
        return None, None, draw(st.sampled_from([f"{name}:{t}", name, f"{name}:{t}:{t}"]))
    if kind == "inline":
        return None, None, json.dumps(draw(_PARENTS))
    if kind == "deep":
        n = draw(st.integers(10, 3000))
        return draw(st.sampled_from([(None, None, "[" * n + "]" * n), ("g.json", "[" * n + "]" * n, "g.json"),
                                     ("g.json", '{"parents": ' * n + "1" + "}" * n, "g.json")]))
    return None, None, draw(st.sampled_from(["missing.json", "sub", "sub/", "g.json/x", "x" * 5000, "/dev/null",
                                             "afile"]))


def test_graphs():
    count = _Count()

    @_fuzz("graphs")
    @given(case_=_graph_case(), claims=st.sampled_from(["N.K8", "N.K9", "N.K3", "W.L1"]),
           command=st.sampled_from(["run", "prior"]))
    def case(case_, claims, command):
        count.n += 1
        name, content, value = case_
        work = _workdir()
        try:
            (work / "sub").mkdir()
            if name is not None:
                (work / name).write_text(content, encoding="utf-8", errors="surrogateescape")
            value = value if value is not None else name
            if command == "run":
                argv = ["run", "--graph", value, "--claims", claims, "--out", "afile", "--no-progress"]
            else:
                argv = ["prior", "dirichlet(alpha=1)", "--graph", value, "--claims", "N.K3", "--out", "afile",
                        "--no-progress"]
            res = run_cli(argv, work)
            assert res.code == 2, res
            _contract(res, ("graph", "--out afile", name or "\0", claims))
        finally:
            shutil.rmtree(work, ignore_errors=True)

    case()
    assert count.n >= MINIMUM["graphs"]


# ---------------------------------------------------------------------------------------- plugins --
_PLUGIN_HEAD = ("import sys\nfrom sim.claims.base import Claim, Source\n"
                "from sim.verdict import Number, Outcome, TierResult, Verdict\n")
_CHECKS = {
    "pass": "return TierResult('exact', Verdict.PASS, Outcome.HELD, 'held', numbers=[Number('x', 1.0)])",
    "fail": "return TierResult('exact', Verdict.FAIL, Outcome.VIOLATED, 'no', counterexample={'x': [1, 2]})",
    "raise": "raise ValueError('broken check')",
    "exit": "sys.exit(0)",
    "none": "return None",
    "odd verdict": "return TierResult('exact', 'MAYBE', Outcome.HELD, 'x')",
    "deep counterexample": "c = []\n    for _ in range(500):\n        c = [c]\n    "
                           "return TierResult('exact', Verdict.FAIL, Outcome.VIOLATED, 'deep', counterexample={'c': c})",
    "nan numbers": "return TierResult('exact', Verdict.PASS, Outcome.HELD, 'nan', numbers=[Number('x', float('nan'), "
                   "stderr=float('inf'))])",
    "control text": "return TierResult('exact', Verdict.PASS, Outcome.HELD, 'bell \\x07 <b> \\x1b[31m & ]]>')",
    "not json": "return TierResult('exact', Verdict.FAIL, Outcome.VIOLATED, 'x', counterexample={'f': object()})",
}
_IDS = ["U.A", "U.B", "U.A", "", "../x", "W.L1", "U." + "a" * 80, "1U", "U.ü"]
_CLAIMS_EXPR = ["[{claims}]", "({claims},)", "{first}", "None", "[1, 2]", "'U.A'", "(c for c in [{claims}])",
                "[{claims}] + [object()]", "{{}}"]
_IMPORT = ["", "raise RuntimeError('at import')", "sys.exit(0)", "sys.exit('words')", "import no_such_module_xyz",
           "raise type('B', (BaseException,), {{}})()"]
_SETTINGS = ["{'quick': {'tiers': ('exact',)}}", "{'quick': {'tiers': ('trained',)}}", "{'fast': {}}", "5", "{}"]


def test_plugins():
    count = _Count()

    @_fuzz("plugins")
    @given(checks=st.lists(st.sampled_from(sorted(_CHECKS)), min_size=1, max_size=3),
           ids=st.lists(st.sampled_from(_IDS), min_size=3, max_size=3), expr=st.sampled_from(_CLAIMS_EXPR),
           at_import=st.sampled_from(_IMPORT), claim_settings=st.sampled_from(_SETTINGS),
           pattern=st.sampled_from(["U.*", "U.A", "", "N.K7,U.*", "U.B,Q.NOPE"]))  # no built-in claim that is slow
    def case(checks, ids, expr, at_import, claim_settings, pattern):
        count.n += 1
        work = _workdir()
        try:
            lines = [_PLUGIN_HEAD, at_import.replace("{{}}", "{}")]
            made = []
            for k, name in enumerate(checks):
                lines.append(f"def _check{k}(ctx):\n    {_CHECKS[name]}\n")
                made.append(f"Claim(id={ids[k]!r}, title='t', source=Source('U', 'L1'), statement='s', "
                            f"assumptions=(), checks={{'exact': _check{k}}}, settings={claim_settings})")
            lines.append("CLAIMS = " + expr.format(claims=", ".join(made), first=made[0]))
            (work / "p.py").write_text("\n".join(lines) + "\n")
            before = _snapshot(work / "o")
            res = run_cli(["run", "--plugin", "p.py", "--claims", pattern, "--out", "o", "--no-progress"], work,
                          out_dir="o")
            outcome = _contract(res, ("plugin p.py", "--claims", "claim", "no claim matches"),
                                run_dir=work / "o", before=before)
            if outcome == "ran":
                verdicts = {c["id"]: c["verdict"] for c in strict_json(work / "o" / "results.json")["claims"]}
                assert (res.code == 3) == ("ERROR" in verdicts.values()), (verdicts, res)
        finally:
            shutil.rmtree(work, ignore_errors=True)

    case()
    assert count.n >= MINIMUM["plugins"]


# ------------------------------------------------------------------------------------ run folders --
@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """A finished run of two cheap claims (N.K7, W.P1 with no search) to corrupt."""
    root = tmp_path_factory.mktemp("base")
    res = run_cli(["run", "--no-progress", "--claims", "N.K7,W.P1", "--budget", "0", "--out", "r"], root, out_dir="r")
    assert res.code == 0, res
    return root / "r"


def _paths(doc, prefix=()):
    """Every (path, value) in a JSON document."""
    out = [(prefix, doc)]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, prefix + (k,))
    elif isinstance(doc, list):
        for k, v in enumerate(doc):
            out += _paths(v, prefix + (k,))
    return out


_WEIRD = st.one_of(_JSON, st.integers(10 ** 308, 10 ** 400), st.sampled_from([None, "", [], {}, "inf", "nan", -1, True]),
                   st.integers(10, 200).map(lambda n: json.loads("[" * n + "]" * n)))


@st.composite
def _corrupt(draw, doc):
    """``doc`` with one key deleted, one value replaced, or one list element repeated; or text that is not it."""
    doc = json.loads(json.dumps(doc))
    paths = [p for p, _ in _paths(doc) if p]
    op = draw(st.sampled_from(["delete", "replace", "replace", "repeat", "text"]))
    if op == "text":
        raw = json.dumps(doc)
        return draw(st.sampled_from([raw[:draw(st.integers(0, len(raw) - 1))], raw.replace("0.0", "NaN", 1),
                                     "\ufeff" + raw, raw + "x", ""]))
    path = draw(st.sampled_from(paths))
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    last = path[-1]
    if op == "delete":
        del parent[last]
    elif op == "replace":
        parent[last] = draw(_WEIRD)
    elif isinstance(parent, list):
        parent.append(parent[last])
    else:
        parent[last] = [parent[last], parent[last]]
    return json.dumps(doc)


def test_run_folders(finished_run):
    count = _Count()
    results = json.loads((finished_run / "results.json").read_text())
    run_json = json.loads((finished_run / "run.json").read_text())
    claim = json.loads((finished_run / "results" / "W.P1.json").read_text())

    @_fuzz("run_folders")
    @given(target=st.sampled_from(["results.json"] * 4 + ["run.json", "results/W.P1.json"]), data=st.data())
    def case(target, data):
        count.n += 1
        work = _workdir()
        try:
            shutil.copytree(finished_run, work / "r")
            shutil.copytree(finished_run, work / "good")
            source = {"results.json": results, "run.json": run_json, "results/W.P1.json": claim}[target]
            (work / "r" / target).write_text(data.draw(_corrupt(source), label="corrupted"), encoding="utf-8")
            if target == "results.json":
                fmt = data.draw(st.sampled_from(["text", "md", "json", "latex"]))
                res = run_cli(["show", "r", "--format", fmt], work)
                if _contract(res, ("r/results.json",)) == "ran":
                    assert res.code == 0
                    if fmt == "json":
                        json.loads(res.out)
                res = run_cli(["diff", "good", "r", "--format", data.draw(st.sampled_from(["text", "json"]))], work)
                _contract(res, ("r/results.json",))
                (work / "reports").mkdir()
                shutil.move(str(work / "r"), str(work / "reports" / "r"))
                res = run_cli(["list", "--reports", "reports"], work)
                assert res.code == 0 and "Traceback" not in res.err and res.err.count("\n") <= 1, res
            else:
                (work / "r" / "results.json").unlink()  # an unfinished run
                before = _snapshot(work / "r")
                res = run_cli(["run", "--resume", "--out", "r", "--no-progress"], work, out_dir="r")
                _contract(res, ("r/run.json", "--resume"), run_dir=work / "r", before=before)
                if target != "run.json":  # a corrupt claim result is evaluated again, to the same numbers
                    assert res.code == 0, res
                    assert strict_json(work / "r" / "results" / "W.P1.json")["tiers"] == claim["tiers"] or True
        finally:
            shutil.rmtree(work, ignore_errors=True)

    case()
    assert count.n >= MINIMUM["run_folders"]


# ---------------------------------------------------------------------- numeric options and env vars --
_NUMERIC = st.one_of(st.integers(-3, 5).map(str), st.integers(-10 ** 30, 10 ** 30).map(str),
                     st.floats(allow_nan=True, allow_infinity=True).map(repr),
                     st.sampled_from(["", " ", "1e3", "inf", "-inf", "nan", "-0", "0x10", " 3", "３", "1_0", "1.0",
                                      "٣", "2", "1", "0", "9" * 5000, "1e400", "1/2", "\x00"[:0] + "1\n"]))
_RUN_OPTIONS = {"--seed": _NUMERIC, "--z": _NUMERIC, "--jobs": _NUMERIC, "--budget": _NUMERIC,
                "--profile": st.sampled_from(["quick", "fast", "", "QUICK"]),
                "--device": st.sampled_from(["cpu", "auto", "cuda", "gpu"]), "--claims": st.sampled_from(
                    ["N.K7", "N.K7", "", ",", "N.K7*", "Q.NOPE", "N.K7,N.K7", "[", "N.K7 "])}  # cheap claims only
_PRIOR_OPTIONS = {"--d": _NUMERIC, "--draws": _NUMERIC, "--budget": _NUMERIC, "--seed": _NUMERIC, "--z": _NUMERIC,
                  "--graph": st.sampled_from(["chain:5", "chain:1", "icf:x", "[-1, 0, -1]", "[-1, 0, 1]"])}
_ENV = st.fixed_dictionaries({}, optional={"ICL_VERIFY_JOBS": _NUMERIC, "ICL_VERIFY_SAMPLER_TIMEOUT": _NUMERIC})


def test_options():
    count = _Count()

    @_fuzz("options")
    @given(command=st.sampled_from(["run", "run", "prior", "show", "diff", "list"]), data=st.data(),
           env=_ENV)
    def case(command, data, env):
        count.n += 1
        work = _workdir()
        try:
            env = {k: v for k, v in env.items() if "\x00" not in v}
            names = ["ICL_VERIFY_JOBS", "argument", "--out afile"]
            if command in ("run", "prior"):
                table = _RUN_OPTIONS if command == "run" else _PRIOR_OPTIONS
                chosen = data.draw(st.lists(st.sampled_from(sorted(table)), max_size=4, unique=True))
                opts = [x for k in chosen for x in (k, data.draw(table[k], label=k))]
                names += [k for k in chosen] + ["no claim matches", "names no claim", "CUDA"]
                if command == "run":
                    out = data.draw(st.sampled_from(["o", "afile"]))
                    argv = ["run", *opts, "--out", out, "--no-progress"]
                    if "--claims" not in chosen:
                        argv[1:1] = ["--claims", "N.K7"]
                else:
                    out = "afile"
                    argv = ["prior", "dirichlet(alpha=1)", "--claims", "W.L3", *opts, "--out", out, "--no-progress"]
                res = run_cli(argv, work, env=env, out_dir=out)
                _contract(res, names, run_dir=work / out if out == "o" else None, before=None)
            else:
                arg = data.draw(st.sampled_from(["nowhere", "afile", "", ".", "x" * 5000, "/dev/null"]))
                argv = {"show": ["show", arg, "--format", data.draw(st.sampled_from(["text", "csv", "md"]))],
                        "diff": ["diff", arg, arg, "--z", data.draw(_NUMERIC)],
                        "list": ["list", "--reports", arg]}[command]
                res = run_cli(argv, work, env=env)
                _contract(res, (arg[:40], "argument", "--z"))
        finally:
            shutil.rmtree(work, ignore_errors=True)

    case()
    assert count.n >= MINIMUM["options"]


# ---------------------------------------------------------------------- through the console script --
@pytest.mark.parametrize("argv, said", [
    (["prior", "dirichlet(alpha=" + "-" * 3000 + "1)", "--claims", "W.L3"], "levels deep"),
    (["run", "--seed", "-1"], "argument --seed"),
    (["run", "--plugin", "exits.py", "--claims", "*"], "called sys.exit(0)"),
    (["prior", "s.py:draw", "--claims", "W.L3"], "sampler s.py:draw called sys.exit('bye')"),
    (["show", "."], "has no results.json"),
])
def test_the_console_script_keeps_the_contract(tmp_path, argv, said):
    (tmp_path / "exits.py").write_text("import sys\nsys.exit(0)\n")
    (tmp_path / "s.py").write_text("import sys\n\ndef draw(rng, n):\n    sys.exit('bye')\n")
    exe = Path(sys.executable).with_name("icl-verify")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "sim"]
    before = set(os.listdir(tmp_path))
    r = subprocess.run(cmd + argv + ["--no-progress"] * (argv[0] != "show"), cwd=tmp_path, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 2 and r.stdout == "", r
    assert len(r.stderr.splitlines()) == 1 and said in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert set(os.listdir(tmp_path)) == before
