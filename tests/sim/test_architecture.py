"""docs/architecture.md holds: its worked example (a new paper home in one file) is found, listed
and run exactly as written, and the import rules between the homes hold on every module of
``sim/`` and ``theory/``."""
import ast
import importlib
import importlib.util
import itertools
import re
import sys
from pathlib import Path

import networkx as nx
import pytest

import sim.papers
from sim.claims import all_claims
from sim.cli import main
from sim.runner import RunConfig, evaluate_claim
from sim.verdict import Verdict

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"
TOY_CLAIMS = "sim/papers/toy/claims.py"
TOY_TEST = "tests/papers/toy/test_toy_claims.py"

#: Modules outside the homes that may import a home: the registry's discovery, and the homes' package.
HOME_IMPORTERS = {"sim.claims", "sim.papers"}


def doc_file(path: str) -> str:
    """The fenced ```python block that follows the line ``<!-- file: PATH -->`` in the page."""
    found = re.search(rf"^<!-- file: {re.escape(path)} -->\n```python\n(.*?)^```$", DOC.read_text(), re.M | re.S)
    assert found, f"{DOC} has no ```python block after a line <!-- file: {path} -->"
    return found.group(1)


def one_claim_home(claim_id: str) -> str:
    return ("from sim.claims.base import Claim, Source\n"
            f"CLAIMS = [Claim(id={claim_id!r}, title='t', source=Source('T', 'here'), statement='s',\n"
            "                assumptions=(), checks={}, settings={})]\n")


@pytest.fixture
def homes(tmp_path, monkeypatch):
    """``homes(name, text, file="claims.py")`` writes ``<name>/<file>`` in a folder appended to
    ``sim.papers.__path__``. The conftest's registry fixture restores registered (plugin) claims
    only, and these homes are found, not registered: so their modules leave ``sys.modules`` and
    ``sim.papers`` here, and monkeypatch restores ``__path__``."""
    folder = tmp_path / "homes"
    folder.mkdir()
    monkeypatch.setattr(sim.papers, "__path__", [*sim.papers.__path__, str(folder)])

    def write(name: str, text: str, file: str = "claims.py") -> Path:
        path = folder / name / file
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        importlib.invalidate_caches()  # the import system caches folder listings
        return path

    yield write
    for name in (p.name for p in folder.iterdir()):
        for mod in [m for m in sys.modules if m == f"sim.papers.{name}" or m.startswith(f"sim.papers.{name}.")]:
            del sys.modules[mod]
        if hasattr(sim.papers, name):
            delattr(sim.papers, name)


# ------------------------------------------------------------------ the worked example --
def test_the_walkthrough_home_is_listed_and_decides(homes, tmp_path, capsys):
    homes("toy", doc_file(TOY_CLAIMS))
    assert main(["list", "--reports", str(tmp_path / "no-reports")]) == 0
    assert re.search(r"^TOY\.MI +TOY Cover & Thomas, Theorem 2\.4\.1 +— +exact ", capsys.readouterr().out, re.M)
    claim = next(c for c in all_claims() if c.id == "TOY.MI")
    config = RunConfig(profile="quick")
    assert evaluate_claim(claim, config, tmp_path / "right").verdict is Verdict.PASS
    for k, weight in enumerate((0.9, 1 + 1e-6)):  # wrong by a tenth, and by a millionth: both beyond round-off
        wrong = evaluate_claim(claim.variant(joint_weight=weight), config, tmp_path / f"wrong{k}")
        assert wrong.verdict is Verdict.FAIL, weight
        assert wrong.tiers[0].counterexample["joint"]


def test_the_walkthrough_test_file_passes(homes, tmp_path):
    homes("toy", doc_file(TOY_CLAIMS))
    path = tmp_path / "test_toy_claims.py"
    path.write_text(doc_file(TOY_TEST))
    spec = importlib.util.spec_from_file_location("architecture_doc_test_toy_claims", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    tests = {name: fn for name, fn in vars(module).items() if name.startswith("test_")}
    assert sorted(tests) == ["test_identity_passes", "test_wrong_weight_fails_with_a_counterexample"]
    for name, test in tests.items():
        (tmp_path / name).mkdir()
        test(tmp_path / name)


# ------------------------------------------------------------------------ discovery --
def test_homes_are_the_builtin_ones_then_found_folders_by_name(homes):
    homes("zeta", one_claim_home("Z.1"))
    homes("alpha", one_claim_home("A.1"), file="claims/__init__.py")
    homes("notes", "x = 1\n", file="readme.py")  # no claims: not a home
    homes("_draft", one_claim_home("D.1"))  # private: not a home
    homes("loose", one_claim_home("L.1"), file="claims/extra.py")  # claims/ without __init__.py: no CLAIMS
    assert sim.papers.paper_homes() == [*sim.papers.PAPERS, "alpha", "zeta"]
    assert [c.id for c in all_claims()][-2:] == ["A.1", "Z.1"]


def test_a_home_that_is_not_a_python_name_is_an_error(homes, capsys):
    homes("my-paper", one_claim_home("M.1"))
    with pytest.raises(ValueError, match=r"my-paper.*not a Python name"):
        sim.papers.paper_homes()
    assert main(["list"]) == 2  # one line, before any command runs (the homes' commands join the parser)
    assert "not a Python name" in capsys.readouterr().err


def test_a_home_whose_commands_fail_to_import_is_a_one_line_error(homes, capsys):
    homes("cmds", one_claim_home("C.1"))
    homes("cmds", "raise RuntimeError('half-written command')\n", file="commands.py")
    assert main(["list"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "half-written command" in err


@pytest.mark.parametrize("text, error", [
    ("import numpy\n\nCLAIMS = [undefined_name]\n", r"claims\.py:3: NameError: name 'undefined_name'"),
    ("CLAIMS = [\n", r"SyntaxError: .*line 1"),
    ("FOUND = []\n", r"defines no CLAIMS list"),
])
def test_a_home_that_fails_to_import_is_named(homes, capsys, text, error):
    homes("broken", text)
    with pytest.raises(ImportError, match=rf"paper home 'broken'.*{error}"):
        all_claims()
    assert main(["list"]) == 2  # the CLI says it in one line
    assert "paper home 'broken'" in capsys.readouterr().err


def test_a_found_home_may_not_reuse_a_claim_id(homes):
    homes("copycat", one_claim_home("W.L1"))
    with pytest.raises(RuntimeError, match=r"duplicate claim ids \['W.L1'\]"):
        all_claims()


# --------------------------------------------------------------------- import rules --
def module_files(root: Path) -> dict[str, Path]:
    """``{dotted module name: file}`` for every module under ``root/sim`` and ``root/theory``."""
    out = {}
    for top in ("sim", "theory"):
        for path in sorted((root / top).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def imported_names(module: str, path: Path) -> list[tuple[str, int]]:
    """``(dotted name, line)`` of every import in the file, inside functions too: ``import a.b``;
    ``from a import b`` as ``a.b`` (a submodule, or a name defined in ``a``); relative imports
    resolved; ``importlib.import_module("a.b")`` with a literal name."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            out += [(f"{base}.{alias.name}", node.lineno) for alias in node.names]
        elif (isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module"
              and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            out.append((node.args[0].value, node.lineno))
    return out


def import_graph(root: Path) -> nx.DiGraph:
    """Modules of ``sim/`` and ``theory/`` and who imports whom; an imported name maps to the
    longest module it names (``sim.papers.PAPERS`` -> ``sim.papers``). Each edge keeps its first
    ``where`` (file:line)."""
    files = module_files(root)
    g = nx.DiGraph()
    g.add_nodes_from(files)
    for module, path in files.items():
        for name, line in imported_names(module, path):
            target = name
            while target and target not in files:
                target = target.rpartition(".")[0]
            if target and target != module and not g.has_edge(module, target):
                g.add_edge(module, target, where=f"{path.relative_to(root)}:{line}")
    return g


def home_of(module: str) -> str | None:
    """``wei`` for ``sim.papers.wei.claims.bma``; None outside the homes."""
    parts = module.split(".")
    return parts[2] if parts[:2] == ["sim", "papers"] and len(parts) > 2 else None


def rule_violations(g: nx.DiGraph) -> list[str]:
    """The imports that break the rules of docs/architecture.md, one line each."""
    out = []
    for module, target, data in g.edges(data=True):
        src, dst = home_of(module), home_of(target)
        if dst and src is None and module not in HOME_IMPORTERS:
            out.append(f"{data['where']}: {module}, generic machinery, imports the paper home module {target}")
        if dst and src and src != dst:
            out.append(f"{data['where']}: {module}, in home {src!r}, imports home {dst!r}: {target}")
        if module.split(".")[0] == "theory" and target.split(".")[0] == "sim":
            out.append(f"{data['where']}: {module} imports {target}; theory/ imports nothing from sim")
    return out


def import_cycles(g: nx.DiGraph, limit: int = 10) -> list[str]:
    """Up to ``limit`` import cycles, each as ``a -> b -> a`` with where each import is."""
    return [" -> ".join(f"{a} ({g.edges[a, b]['where']})" for a, b in zip(c, c[1:] + c[:1])) + f" -> {c[0]}"
            for c in itertools.islice(nx.simple_cycles(g), limit)]


def test_the_import_rules_hold():
    g = import_graph(ROOT)
    assert {"sim.claims", "sim.papers.wei.claims", "theory.joint"} <= set(g)  # it read the tree
    assert g.has_edge("sim.claims", "sim.papers")  # and imports inside functions
    bad = rule_violations(g)
    assert not bad, "imports that break docs/architecture.md's rules:\n" + "\n".join(bad)


def test_the_import_graph_has_no_cycles():
    cycles = import_cycles(import_graph(ROOT))
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def test_the_rule_checks_catch_each_kind_of_break(tmp_path):
    files = {
        "sim/__init__.py": "",
        "sim/claims/__init__.py": "import importlib\nimportlib.import_module('sim.papers.alpha.claims')\n",
        "sim/runner.py": "def run():\n    from sim.papers.alpha import task\n",
        "sim/report.py": "import importlib\n\nimportlib.import_module('sim.papers.beta.task')\n",
        "sim/papers/__init__.py": "PAPERS = ('alpha', 'beta')\n",
        "sim/papers/alpha/claims.py": "from sim.papers import PAPERS\nfrom . import task\n",
        "sim/papers/alpha/task.py": "from sim.papers.beta.task import law\n",
        "sim/papers/beta/task.py": "def law():\n    import sim.runner\n",
        "theory/__init__.py": "from .a import f\n",
        "theory/a.py": "from .b import g\n\ndef f():\n    from sim import runner\n",
        "theory/b.py": "def g():\n    from theory import a\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    g = import_graph(tmp_path)
    assert sorted(line.split(": ", 1)[0] for line in rule_violations(g)) == [
        "sim/papers/alpha/task.py:1", "sim/report.py:3", "sim/runner.py:2", "theory/a.py:4"]
    cycles = {frozenset(c) for c in nx.simple_cycles(g)}
    assert cycles == {frozenset({"theory.a", "theory.b"}),
                      frozenset({"sim.runner", "sim.papers.alpha.task", "sim.papers.beta.task"})}
    assert "theory.b (theory/b.py:2) -> theory.a" in "\n".join(import_cycles(g))
