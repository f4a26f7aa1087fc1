"""The reading model: one primary reading decides; findings (other readings) are reported with
their own verdicts and never change the claim's verdict."""
import json
import xml.etree.ElementTree as ET

import pytest

from sim.claims.base import Claim, PrimaryReading, Source
from sim.report import all_findings
from sim.runner import RunConfig, run
from sim.verdict import Finding, FindingKind, Number, Outcome, TierResult, Verdict, headline

LITERAL = Finding(FindingKind.LITERAL, "step 3 read as an exact identity", Verdict.FAIL,
                  "the exact identity fails on 15.7% ± 0.3% of prompts",
                  numbers=(Number("fraction of prompts missed", 0.157, stderr=0.003, n=20000, seed=5,
                                  kind="montecarlo"),))
CODE = Finding("reference code", "the code's loss line", "PASS", "agrees with the paper")


def _check(findings, verdict=Verdict.PASS, outcome=Outcome.HELD):
    def check(ctx):
        return TierResult("exact", verdict, outcome, "primary reading: held", findings=list(findings))
    return check


def _claim(findings, **kw):
    return Claim(id="T.READ", title="reading model", source=Source("T", "Knowl 8"),
                 statement="Primary reading: the approximation; the literal identity is a finding.",
                 assumptions=(), checks={"exact": _check(findings, **kw)},
                 settings={"quick": {"tiers": ("exact",)}},
                 primary=PrimaryReading("the output approximates the estimator", seed="002", lines="41-43",
                                        setting="N's chain task", review="the paper says approximates"))


def test_finding_kinds_are_the_five_of_the_spec():
    assert {k.value for k in FindingKind} == {"literal statement", "stricter criterion",
                                              "outside the paper's setting", "reference code",
                                              "unstated assumption"}
    with pytest.raises(ValueError):
        Finding("a hunch", "r", Verdict.FAIL, "d")
    with pytest.raises(ValueError):
        Finding(FindingKind.LITERAL, "r", Verdict.FAIL, "")


def test_primary_reading_needs_its_source():
    with pytest.raises(ValueError):
        PrimaryReading("statement", seed="", lines="3")
    assert PrimaryReading("s", seed="002", lines="41-43").cite() == "seed 002, lines 41-43"
    assert PrimaryReading("s", seed="000", lines="7").cite() == "seed 000, line 7"


def test_headline_keeps_the_verdict_and_names_failing_findings():
    assert headline(Verdict.PASS, [CODE]) == "PASS"
    assert headline(Verdict.PASS, [LITERAL, CODE]) == \
        "PASS (finding: the exact identity fails on 15.7% ± 0.3% of prompts)"


def test_a_failing_finding_never_decides(tmp_path):
    out, dicts = run(RunConfig(), [_claim([LITERAL, CODE])], out_dir=tmp_path, show_progress=False)
    d = dicts[0]
    assert d["verdict"] == "PASS"
    assert d["headline"].startswith("PASS (finding: the exact identity fails")
    assert d["primary_reading"]["cite"] == "seed 002, lines 41-43"
    doc = json.loads((out / "results.json").read_text())
    assert doc["summary"]["PASS"] == 1 and doc["summary"]["FAIL"] == 0
    assert [f["kind"] for f in doc["findings"]] == ["literal statement", "reference code"]
    assert doc["findings"][0]["claim"] == "T.READ" and doc["findings"][0]["verdict"] == "FAIL"
    assert doc["findings"][0]["numbers"][0]["stderr"] == 0.003
    assert doc["findings"] == all_findings(doc["claims"])
    # JUnit counts the claim as passed: a finding is not a failure of the paper
    assert ET.parse(out / "junit.xml").getroot().find("testsuite").get("failures") == "0"


def test_a_failing_primary_reading_still_fails_beside_a_passing_finding(tmp_path):
    claim = _claim([CODE], verdict=Verdict.FAIL, outcome=Outcome.VIOLATED)
    _, dicts = run(RunConfig(), [claim], out_dir=tmp_path, show_progress=False)
    assert dicts[0]["verdict"] == "FAIL" and dicts[0]["headline"] == "FAIL"


def test_reports_show_the_findings_table_and_the_primary_reading(tmp_path):
    out, _ = run(RunConfig(), [_claim([LITERAL])], out_dir=tmp_path, show_progress=False)
    md = (out / "report.md").read_text()
    assert "## Findings" in md
    assert md.index("## Findings") < md.index("## T.READ")  # the table sits at the top
    assert "| literal statement | step 3 read as an exact identity | **FAIL** |" in md
    assert "*Primary reading (decides):* the output approximates the estimator (seed 002, lines 41-43)" in md
    html = (out / "report.html").read_text()
    ET.fromstring(html.split("\n", 1)[1])  # still well-formed
    assert 'id="findings"' in html and "step 3 read as an exact identity" in html


def test_no_findings_no_table(tmp_path):
    out, _ = run(RunConfig(), [_claim([])], out_dir=tmp_path, show_progress=False)
    assert "## Findings" not in (out / "report.md").read_text()
