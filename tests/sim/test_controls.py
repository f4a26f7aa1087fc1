"""Negative controls: a wrong mechanism run through a claim's own deciding check must FAIL,
and a PASS stands only when every control did (issue: every PASS earns its keep)."""
import json
import xml.etree.ElementTree as ET

import pytest

from sim.claims.base import Claim, Source
from sim.runner import RunConfig, run
from sim.verdict import Control, Outcome, TierResult, Verdict, guard_with_controls

UNIGRAM = Control("prompt unigram (A1 = true adjacency, A2 = 0)", "predicts the prompt's unigram, not pi(.|s_T)",
                  Verdict.FAIL, "0.99-quantile slope -0.01 ± 0.02 (needs < 0 by 3 s.e.)")


def _passing(controls):
    return TierResult("trained", Verdict.PASS, Outcome.HELD, "error decays", controls=list(controls))


def test_a_pass_stands_when_every_control_fails():
    res = guard_with_controls(_passing([UNIGRAM, Control("uniform", "ignores the prompt", "FAIL", "slope 0")]))
    assert res.verdict is Verdict.PASS and res.summary == "error decays"


@pytest.mark.parametrize("standing", [Verdict.PASS, Verdict.INCONCLUSIVE, Verdict.ERROR])
def test_a_control_that_does_not_fail_makes_the_pass_inconclusive(standing):
    bad = Control("untrained model", "random weights", standing, "slope -0.5 ± 0.1")
    res = guard_with_controls(_passing([UNIGRAM, bad]))
    assert res.verdict is Verdict.INCONCLUSIVE and res.conclusion is Outcome.UNDECIDED
    assert "cannot tell this mechanism from a wrong one" in res.summary and "untrained model" in res.summary
    assert "every control FAILs" in res.budget


def test_controls_never_turn_a_fail_into_something_else():
    res = TierResult("trained", Verdict.FAIL, Outcome.VIOLATED, "no decay",
                     controls=[Control("uniform", "ignores the prompt", "PASS", "slope -1")])
    assert guard_with_controls(res).verdict is Verdict.FAIL


def test_a_control_needs_its_mechanism_and_number():
    with pytest.raises(ValueError):
        Control("uniform", "", Verdict.FAIL, "slope 0")
    with pytest.raises(ValueError):
        Control("uniform", "x", "MAYBE", "slope 0")


def _claim(controls):
    def check(ctx):
        return _passing(controls)
    return Claim(id="T.CTRL", title="controlled", source=Source("T", "Knowl 4"), statement="decays",
                 assumptions=(), checks={"trained": check}, settings={"quick": {"tiers": ("trained",)}})


def test_the_runner_applies_the_controls_and_the_reports_show_their_table(tmp_path):
    bad = Control("model on the wrong graph", "attends to a non-parent", Verdict.PASS, "slope -0.4 ± 0.05")
    run(RunConfig(profile="quick"), [_claim([UNIGRAM, bad])], out_dir=tmp_path, show_progress=False)
    doc = json.loads((tmp_path / "results.json").read_text())
    claim = doc["claims"][0]
    assert claim["verdict"] == "INCONCLUSIVE"
    assert [c["verdict"] for c in claim["tiers"][0]["controls"]] == ["FAIL", "PASS"]
    md = (tmp_path / "report.md").read_text()
    assert "| control | wrong mechanism | verdict | deciding number |" in md
    assert "| model on the wrong graph | attends to a non-parent | PASS | slope -0.4 ± 0.05 |" in md
    assert "model on the wrong graph" in (tmp_path / "report.html").read_text()
    ET.parse(tmp_path / "junit.xml")


def test_a_check_returning_something_else_as_a_control_is_its_error(tmp_path):
    def check(ctx):
        return TierResult("trained", Verdict.PASS, Outcome.HELD, "ok", controls=[{"name": "x"}])
    claim = Claim(id="T.BADCTRL", title="bad", source=Source("T", "x"), statement="s", assumptions=(),
                  checks={"trained": check}, settings={"quick": {"tiers": ("trained",)}})
    run(RunConfig(profile="quick"), [claim], out_dir=tmp_path, show_progress=False)
    doc = json.loads((tmp_path / "results.json").read_text())
    assert doc["claims"][0]["verdict"] == "ERROR"
    assert "not sim.verdict.Control" in doc["claims"][0]["tiers"][0]["error"]
