"""The pytest plugin (sim/pytest_plugin.py): ``pytest --icl-verify PATTERN`` collects one item per
claim and tier. Each case runs pytest in a subprocess (``runpytest_subprocess``), so the plugin
is loaded from the ``pytest11`` entry point exactly as a user's pytest loads it."""
import os
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

#: pytester points HOME at its tmp folder; keep matplotlib's font cache (W.L3 draws figures), read
#: where matplotlib reads it, before HOME moves.
_MPL_DIR = os.environ.get("MPLCONFIGDIR") or str(Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
                                                  / "matplotlib")

USER_CLAIMS = '''
from sim.claims.base import Claim, Source
from sim.verdict import Assumption, Number, Outcome, TierResult, Verdict

_ALL = ("quick", "standard", "paper")


def _fail(ctx):
    return TierResult("exact", Verdict.FAIL, Outcome.VIOLATED, "row sums are not 1",
                      numbers=[Number("max |row sum - 1|", 0.25, tolerance=1e-9)],
                      counterexample={"pi": [[0.5, 0.75], [0.5, 0.5]], "row": 0})


def _inconclusive(ctx):
    return TierResult("montecarlo", Verdict.INCONCLUSIVE, Outcome.UNDECIDED, "the error bar straddles 0.5",
                      numbers=[Number("p", 0.5, stderr=0.01, n=100, kind="montecarlo")],
                      budget="n = 10^6 samples")


def _unmet(ctx):
    return TierResult("exact", Verdict.ASSUMPTION_UNMET, Outcome.HELD, "the draw has a zero entry",
                      assumptions=[Assumption("min pi > 0", False, "min pi = 0")])


def _pass(ctx):
    return TierResult("exact", Verdict.PASS, Outcome.HELD, "fine", numbers=[Number("x", 1.0)])


def _crash(ctx):
    raise ZeroDivisionError("boom in the check")


def _claim(cid, tier, fn, **kw):
    settings = kw.pop("settings", {p: {"tiers": (tier,)} for p in _ALL})
    return Claim(id=cid, title=f"claim {cid}", source=Source("USER", "test"), statement="a user claim",
                 assumptions=(), checks={tier: fn}, settings=settings, **kw)


CLAIMS = [
    _claim("U.PASS", "exact", _pass),
    _claim("U.FAIL", "exact", _fail),
    _claim("U.INC", "montecarlo", _inconclusive),
    _claim("U.UNMET", "exact", _unmet),
    _claim("U.CRASH", "exact", _crash),
    _claim("U.LATER", "exact", _pass, settings={"paper": {"tiers": ("exact",)}}, decided_by="paper"),
]
'''


@pytest.fixture
def project(pytester, monkeypatch):
    """A fresh project folder holding only a claim plugin file (user_claims.py)."""
    monkeypatch.setenv("MPLCONFIGDIR", _MPL_DIR)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    pytester.makepyfile(user_claims=USER_CLAIMS)
    return pytester


def test_w_l3_runs_and_passes(project):
    r = project.runpytest_subprocess("--icl-verify", "W.L3", "-v")
    r.assert_outcomes(passed=3)  # exact, property and (issue 45) certified
    r.stdout.fnmatch_lines(["*icl-verify::W.L3[[]exact[]] PASSED*", "*icl-verify::W.L3[[]property[]] PASSED*",
                            "*icl-verify::W.L3[[]certified[]] PASSED*"])
    assert r.ret == 0


def test_strict_fails_what_would_be_skipped(project):
    r = project.runpytest_subprocess("--icl-verify", "U.INC,U.UNMET,U.LATER", "--icl-plugin", "user_claims.py",
                                     "--icl-strict")
    # a claim not run in the profile stays skipped: it is decided by another profile, not undecided
    r.assert_outcomes(failed=2, skipped=1)
    r.stdout.fnmatch_lines(["*U.INC [[]montecarlo[]]: INCONCLUSIVE: the error bar straddles 0.5*",
                            "*(--icl-strict fails INCONCLUSIVE, ASSUMPTION_UNMET, NOT_RUN)*"])
    r.stdout.fnmatch_lines(["*min pi > 0: violated (min pi = 0)*"])


def test_unknown_pattern_is_a_usage_error(project):
    r = project.runpytest_subprocess("--icl-verify", "Q.NOPE")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    r.stderr.fnmatch_lines(["ERROR: icl-verify: no claim matches 'Q.NOPE'; known claims: W.L1, *W.L3*"])
    assert "Traceback" not in r.stderr.str()


def test_outcomes_of_user_claims_under_xdist_with_junitxml(project):
    """One run (each pytest start imports the claims: seconds) checks the outcomes, their texts,
    ``-n 2`` and ``--junitxml`` together."""
    r = project.runpytest_subprocess("--icl-verify", "U.*", "--icl-plugin", "user_claims.py", "-rs", "-n", "2",
                                     "--junitxml=junit.xml")
    # PASS passes, FAIL fails, a crash is an error, INCONCLUSIVE / ASSUMPTION_UNMET / not in the profile skip
    r.assert_outcomes(passed=1, failed=1, errors=1, skipped=3)
    assert r.ret == pytest.ExitCode.TESTS_FAILED
    out = r.stdout.str()
    # the FAIL shows its summary, counterexample and numbers
    r.stdout.fnmatch_lines(["*U.FAIL [[]exact[]]: FAIL: row sums are not 1*", "counterexample:",
                            '*"pi": [[][[]0.5, 0.75[]], [[]0.5, 0.5[]][]],*', "numbers:",
                            "*max |row sum - 1| = 0.25, tol=1.0e-09*"])
    # the crash is an error at setup, with the check's own traceback
    r.stdout.fnmatch_lines(["*ERROR at setup of U.CRASH [[]exact[]]*"])
    assert 'raise ZeroDivisionError("boom in the check")' in out
    # skipped with their reasons, reported at the item (not at a line of the plugin)
    r.stdout.fnmatch_lines_random([
        "SKIPPED * icl-verify:1: U.INC [[]montecarlo[]]: INCONCLUSIVE: the error bar straddles 0.5 "
        "(would be decided by: n = 10^6 samples)",
        "SKIPPED * U.UNMET [[]exact[]]: ASSUMPTION_UNMET: the draw has a zero entry",
        "SKIPPED * U.LATER is not run in profile 'quick'; it is decided by profile 'paper' (--icl-profile paper)",
    ])
    assert "sim/pytest_plugin.py" not in out

    root = ET.parse(project.path / "junit.xml").getroot()
    cases = {tc.get("name"): tc for tc in root.iter("testcase")}
    assert set(cases) == {"U.PASS[exact]", "U.FAIL[exact]", "U.INC[montecarlo]", "U.UNMET[exact]",
                          "U.CRASH[exact]", "U.LATER"}
    assert {tc.get("classname") for tc in cases.values()} == {"icl-verify"}
    assert [c.tag for c in cases["U.PASS[exact]"] if c.tag != "properties"] == []
    failure = cases["U.FAIL[exact]"].find("failure")
    assert failure is not None and '"pi": [[0.5, 0.75], [0.5, 0.5]]' in failure.text
    assert cases["U.CRASH[exact]"].find("error") is not None
    assert "INCONCLUSIVE" in cases["U.INC[montecarlo]"].find("skipped").get("message")
    props = {p.get("name"): p.get("value") for p in cases["U.FAIL[exact]"].iter("property")}
    assert props == {"icl_claim": "U.FAIL", "icl_tier": "exact", "icl_verdict": "FAIL"}


def test_inert_without_the_option(project):
    project.makepyfile(test_mine="""
        import sys

        def test_mine():
            assert "sim.claims" not in sys.modules and "torch" not in sys.modules
        """)
    r = project.runpytest_subprocess("-p", "no:cacheprovider")
    r.assert_outcomes(passed=1)
    r.stdout.fnmatch_lines(["collected 1 item"])
    assert "icl-verify" not in r.stdout.str()
    # and the entry point did load it: its options are there
    h = project.runpytest_subprocess("--help")
    h.stdout.fnmatch_lines(["*--icl-verify=PATTERN*"])
