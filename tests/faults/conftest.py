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
