"""Fault injection: bad inputs and misbehaving claims that must neither destroy files nor
misreport. Each test reproduces one case of the safe-runs issue and keeps it closed."""
import json
import sys
import textwrap

import pytest

from sim import claims as registry


def strict_json(path):
    """Parse ``path`` as strict JSON: NaN and Infinity are errors, not numbers."""
    def refuse(name):
        raise ValueError(f"{path} holds the non-JSON constant {name}")
    return json.loads(path.read_text(), parse_constant=refuse)


PLUGIN_HEADER = """
from sim.claims.base import Claim, Source
from sim.verdict import Outcome, TierResult, Verdict

def _ok(ctx):
    return TierResult("exact", Verdict.PASS, Outcome.HELD, "held")

def _fail(ctx):
    return TierResult("exact", Verdict.FAIL, Outcome.VIOLATED, "violated", counterexample={"x": 1})

def claim(cid, check=_ok, title="a user claim"):
    return Claim(id=cid, title=title, source=Source("U", "Lemma 1"), statement="a statement",
                 assumptions=(), checks={"exact": check}, settings={"quick": {"tiers": ("exact",)}})
"""


@pytest.fixture
def plugin(tmp_path):
    """Write a plugin file from a body using ``claim(id, check)``; returns its path."""
    made = []

    def write(body: str, name: str = "plugin.py"):
        path = tmp_path / name
        path.write_text(PLUGIN_HEADER + textwrap.dedent(body))
        made.append(path)
        return path
    yield write


@pytest.fixture(autouse=True)
def clean_registry():
    """Plugin claims live in a module-level registry: each test starts and ends without them."""
    saved = (dict(registry._EXTRA), dict(registry._ORIGIN), dict(registry._DIGESTS))
    registry._EXTRA.clear(), registry._ORIGIN.clear(), registry._DIGESTS.clear()
    yield
    for store, old in zip((registry._EXTRA, registry._ORIGIN, registry._DIGESTS), saved):
        store.clear()
        store.update(old)
    for name in [m for m in sys.modules if m.startswith("icl_verify_plugin_")]:
        del sys.modules[name]


# -- the input contract (docs/inputs.md): what every bad input must get ------------------------------
class Outcome:
    """What one in-process ``icl-verify`` call did: its exit code, stdout, stderr, and the paths it
    left in the folder it ran in (relative, outside ``--out``) that were not there before."""

    def __init__(self, code, out, err, new_paths):
        self.code, self.out, self.err, self.new_paths = code, out, err, new_paths

    def __repr__(self):
        return f"Outcome(code={self.code}, err={self.err[-600:]!r}, new={sorted(self.new_paths)[:5]})"


def _tree(root):
    import os

    out = set()
    for base, dirs, files in os.walk(root):
        for name in dirs + files:
            out.add(os.path.relpath(os.path.join(base, name), root))
    return out


def run_cli(argv, cwd, *, env=None, out_dir=None):
    """``sim.cli.main(argv)`` in this process with ``cwd`` as the current folder and ``env`` set
    (None unsets), stdout and stderr captured (hypothesis's examples cannot use capsys).
    ``out_dir`` (relative to ``cwd``): the run folder, whose contents are not counted as written
    outside it."""
    import contextlib
    import io
    import os

    from sim.cli import main

    before = _tree(cwd)
    saved_env = {k: os.environ.get(k) for k in (env or {})}
    old_cwd = os.getcwd()
    out, err = io.StringIO(), io.StringIO()
    try:
        os.chdir(cwd)
        for k, v in (env or {}).items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main([str(a) for a in argv])
            except SystemExit as exc:  # argparse's own exits (an option it refuses, --help)
                code = exc.code
    finally:
        os.chdir(old_cwd)
        for k, v in saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    new = _tree(cwd) - before
    if out_dir is not None:
        prefix = os.path.normpath(str(out_dir))
        above = {os.path.dirname(prefix)}  # the folders --out is made in are its own
        while os.path.dirname(min(above, key=len)):
            above.add(os.path.dirname(min(above, key=len)))
        new = {p for p in new if p != prefix and not p.startswith(prefix + os.sep) and p not in above}
    return Outcome(code, out.getvalue(), err.getvalue(), new)


def assert_input_error(res, *fragments):
    """The contract for a bad input: exit 2, one line on stderr starting ``icl-verify`` and naming
    every fragment, nothing on stdout, no traceback, nothing written."""
    assert res.code == 2, res
    lines = res.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("icl-verify"), res
    for f in fragments:
        assert f in lines[0], (f, res)
    assert res.out == "" and "Traceback" not in res.err, res
    assert not res.new_paths, res


def assert_finished_run(res, run_dir):
    """The contract for a good input: exit 0 or 1, no traceback, nothing outside the run folder,
    and the run folder whole (results.json, run.json and the three reports, each parsing)."""
    import xml.etree.ElementTree as ET

    from sim.report import load_results

    assert res.code in (0, 1), res
    assert "Traceback" not in res.err and not res.new_paths, res
    doc = load_results(run_dir)
    assert doc["claims"], doc
    strict_json(run_dir / "run.json")
    ET.parse(run_dir / "junit.xml")
    ET.fromstring((run_dir / "report.html").read_text().split("\n", 1)[1])
    assert (run_dir / "report.md").read_text().startswith("# icl-verify report")
