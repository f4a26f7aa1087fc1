"""Reports: well-formed HTML and JUnit, escaping of every text that comes from claims or configs,
figures embedded, the results.json schema."""
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from sim.claims.base import Claim, Source  # noqa: E402
from sim.report import (SCHEMA, all_findings, load_results, render_html, render_junit, render_markdown,  # noqa: E402
                        summary_table, summary_table_markdown)
from sim.runner import RunConfig, run  # noqa: E402
from sim.verdict import Number, Outcome, TierResult, Verdict  # noqa: E402

EVIL = '<script>alert("x")</script> & <b>bold</b> \' " ]]>'


def _evil_check(ctx):
    fig, ax = plt.subplots(figsize=(2, 2))
    ax.plot([0, 1], [0, 1])
    path = ctx.figure_path("line")
    fig.savefig(path)
    plt.close(fig)
    return TierResult("exact", Verdict.FAIL, Outcome.VIOLATED, summary=EVIL,
                      numbers=[Number(EVIL, 1.0, note=EVIL)], counterexample={"text": EVIL, "pi": [[1.0]]},
                      figures=[str(path.relative_to(ctx.out_dir))])


def _make_run(tmp_path):
    claim = Claim(id="T.EVIL", title=EVIL, source=Source("T", EVIL), statement=EVIL, assumptions=(),
                  checks={"exact": _evil_check}, settings={"quick": {"tiers": ("exact",)}})
    cfg = RunConfig(profile="quick", claims=EVIL, seed=0)
    out, dicts = run(cfg, [claim], out_dir=tmp_path, show_progress=False)
    return out


def test_html_is_well_formed_and_escapes_everything(tmp_path):
    out = _make_run(tmp_path)
    text = (out / "report.html").read_text()
    root = ET.fromstring(text.split("\n", 1)[1])  # drop the doctype line; the rest must be well-formed XML
    assert root.tag.endswith("html")
    assert "<script>" not in text and "<b>bold</b>" not in text
    assert "&lt;script&gt;" in text
    # the figure is embedded, so the file opens with no server and no sibling files
    imgs = [e for e in root.iter() if e.tag.endswith("img")]
    assert imgs and imgs[0].get("src").startswith("data:image/png;base64,")


def test_junit_is_well_formed_with_one_case_per_claim(tmp_path):
    out = _make_run(tmp_path)
    tree = ET.parse(out / "junit.xml")
    cases = list(tree.iter("testcase"))
    assert [c.get("name") for c in cases] == ["T.EVIL"]
    assert cases[0].find("failure") is not None
    assert tree.getroot().find("testsuite").get("failures") == "1"


def test_results_json_schema(tmp_path):
    out = _make_run(tmp_path)
    doc = json.loads((out / "results.json").read_text())
    assert doc["schema"] == SCHEMA and doc["complete"] is True
    for key in ("run_id", "config", "config_hash", "seeds", "versions", "git_commit", "summary", "claims"):
        assert key in doc
    c = doc["claims"][0]
    for key in ("id", "verdict", "tiers", "statement", "source", "decided_by", "seed"):
        assert key in c
    t = c["tiers"][0]
    assert {"tier", "verdict", "numbers", "assumptions", "counterexample", "figures"} <= set(t)
    num = t["numbers"][0]
    assert {"value", "stderr", "n", "seed", "tolerance", "kind"} <= set(num)
    assert doc["versions"]["torch"].startswith("2.13")


def test_markdown_has_a_section_per_claim_with_counterexample(tmp_path):
    out = _make_run(tmp_path)
    md = (out / "report.md").read_text()
    assert "## T.EVIL" in md and "Counterexample (in full)" in md and "figures/T.EVIL-line.png" in md


def test_markdown_escapes_markup_from_claims(tmp_path):
    out = _make_run(tmp_path)
    md = (out / "report.md").read_text()
    outside_code = md.split("```json")[0]
    assert "<script>" not in outside_code and "&lt;script>" in outside_code


def _witness_check(ctx):
    from sim.verdict import Finding, FindingKind

    f = Finding(FindingKind.STRICTER, "tightness: " + EVIL, Verdict.PASS, "sup 0.99 (a lower bound on the supremum)",
                witness={"pi": [[0.999, 0.001], [0.001, 0.999]], "note": EVIL})
    return TierResult("exact", Verdict.PASS, Outcome.HELD, summary="held", findings=[f])


def test_a_findings_witness_is_reported_in_full_and_escaped(tmp_path):
    claim = Claim(id="T.WIT", title="witness", source=Source("T", "x"), statement="x", assumptions=(),
                  checks={"exact": _witness_check}, settings={"quick": {"tiers": ("exact",)}})
    out, _ = run(RunConfig(profile="quick", claims="T.WIT", seed=0), [claim], out_dir=tmp_path, show_progress=False)
    md = (out / "report.md").read_text()
    assert 'witness (in full): `{"pi": [[0.999, 0.001], [0.001, 0.999]]' in md and "counterexample:" not in md
    html = (out / "report.html").read_text()
    assert "witness (in full)" in html and "0.999" in html and "<script>" not in html
    doc = json.loads((out / "results.json").read_text())
    assert doc["claims"][0]["tiers"][0]["findings"][0]["witness"]["pi"][0] == [0.999, 0.001]


# -- hand-built claim dicts: which verdict, finding and error bar each report shows is known ---------------
def _n(name, value, stderr=0.0, kind="exact"):
    return {"name": name, "value": value, "stderr": stderr, "n": None, "seed": None, "tolerance": None, "kind": kind,
            "note": ""}


def _t(tier, verdict, numbers=(), findings=(), assumptions=()):
    return {"tier": tier, "verdict": verdict, "summary": f"{tier} said {verdict}", "assumptions": list(assumptions),
            "numbers": list(numbers), "findings": list(findings), "counterexample": None, "figures": [],
            "elapsed_s": 0.1}


def _c(cid, verdict, tiers, note="", supported=None):
    return {"id": cid, "title": f"title {cid}", "paper": "T", "source": "T §1", "statement": "s", "verdict": verdict,
            "headline": verdict, "tiers_supported": supported if supported is not None else [t["tier"] for t in tiers],
            "decided_by": "standard", "seed": 1, "elapsed_s": 0.5, "note": note, "tiers": list(tiers)}


def _d(claims):
    from sim.files import claim_counts

    return {"run_id": "r", "created": "now", "git_commit": "c", "elapsed_s": 1.0, "prior": None, "audit": None,
            "config": {"profile": "quick", "seed": 0, "device": "cpu", "claims": "*", "z": 3.0},
            "versions": {}, "summary": claim_counts(claims), "findings": all_findings(claims), "claims": claims}


def _finding(verdict, detail):
    return {"kind": "stricter criterion", "reading": "sup over all prompts", "verdict": verdict, "detail": detail}


def test_junit_gives_each_verdict_its_own_outcome():
    """docs/results.md: FAIL is a failure, ERROR an error, anything else that is not a PASS (ASSUMPTION_UNMET too)
    is skipped; the suite's counts agree with the cases."""
    verdicts = ["PASS", "FAIL", "ERROR", "ASSUMPTION_UNMET", "INCONCLUSIVE", "NOT_RUN"]
    claims = [_c(f"T.{v}", v, [_t("exact", v)] if v != "NOT_RUN" else []) for v in verdicts]
    root = ET.fromstring(render_junit(_d(claims)))
    outcome = {c.get("name"): [e.tag for e in c if e.tag != "system-out"] for c in root.iter("testcase")}
    assert outcome == {"T.PASS": [], "T.FAIL": ["failure"], "T.ERROR": ["error"], "T.ASSUMPTION_UNMET": ["skipped"],
                       "T.INCONCLUSIVE": ["skipped"], "T.NOT_RUN": ["skipped"]}
    suite = root.find("testsuite")
    counts = tuple(suite.get(k) for k in ("tests", "failures", "errors", "skipped"))
    assert counts == ("6", "1", "1", "3")


def test_a_finding_is_listed_with_its_claims_verdict_not_its_tiers():
    # the finding sits in a tier that PASSed; the claim FAILed on a later tier
    claims = [_c("T.TWO", "FAIL", [_t("montecarlo", "PASS", findings=[_finding("INCONCLUSIVE", "undecided at n=10")]),
                                   _t("trained", "FAIL")])]
    assert [(f["claim"], f["claim_verdict"], f["tier"], f["verdict"]) for f in all_findings(claims)] == [
        ("T.TWO", "FAIL", "montecarlo", "INCONCLUSIVE")]
    assert "| [T.TWO](#ttwo) (FAIL) | stricter criterion |" in render_markdown(_d(claims))


def test_terminal_table_says_a_finding_that_is_not_a_pass():
    """An INCONCLUSIVE finding is said beside the verdict as a FAIL one is; a PASS finding is not."""
    quiet = _c("T.Q", "PASS", [_t("exact", "PASS", findings=[_finding("PASS", "holds too")])])
    loud = _c("T.L", "PASS", [_t("exact", "PASS", findings=[_finding("INCONCLUSIVE", "undecided at n=10")])])
    rows = summary_table([quiet, loud]).splitlines()
    assert "finding" not in rows[2] and "[1 finding: undecided at n=10] exact said PASS" in rows[3]


def test_numbers_table_keeps_every_nonzero_error_bar():
    """The s.e. column shows a number's standard error whatever its kind (``kind`` defaults to exact, and
    Number.format prints a ± for any non-zero one); only a zero one of an exact number reads '0 (exact)'."""
    nums = [_n("with error", 0.5, 0.02), _n("exact", 0.25), _n("mc", 0.75, 0.03, "montecarlo")]
    md = render_markdown(_d([_c("T.N", "PASS", [_t("exact", "PASS", numbers=nums)])]))
    assert "| with error | 0.5 | 0.02 |" in md
    assert "| exact | 0.25 | 0 (exact) |" in md and "| mc | 0.75 | 0.03 |" in md


def test_html_summary_row_shows_the_claims_verdict():
    # the last (most thorough) tier PASSed, the claim FAILed on an earlier one: the row must say FAIL
    claims = [_c("T.F", "FAIL", [_t("exact", "FAIL"), _t("trained", "PASS")])]
    root = ET.fromstring(render_html(_d(claims), Path(".")).split("\n", 1)[1])
    body = next(e for e in root if e.tag.endswith("body"))
    table = next(e for e in body if e.tag.endswith("table"))
    rows = [r for r in table if r.tag.endswith("tr")]
    verdict_cell = [c for c in rows[1] if c.tag.endswith("td")][2]
    assert "".join(verdict_cell.itertext()).strip() == "FAIL"


def test_a_claim_that_did_not_run_says_which_profile_decides_it():
    """A claim with tiers of its own that did not run names the profile that decides it; only a claim with no tiers
    of its own is explained by its note."""
    skipped = _c("T.S", "NOT_RUN", [], note="the trained tier needs a GPU", supported=["trained"])
    none = _c("T.X", "NOT_RUN", [], note="a definition, checked by another claim", supported=[])
    md = summary_table_markdown([skipped, none])
    assert "| decided by standard |" in md.splitlines()[2]
    assert "| a definition, checked by another claim |" in md.splitlines()[3]


def test_load_results_refuses_another_schema(tmp_path):
    (tmp_path / "results.json").write_text(json.dumps({"schema": "someone-else/v9", "claims": []}))
    with pytest.raises(ValueError, match="is not an icl-verify results file"):
        load_results(tmp_path)


def test_an_undecided_assumption_is_not_reported_as_holding():
    asm = [{"name": "A1 bounded", "holds": None, "detail": "no bound found"},
           {"name": "A2 mixing", "holds": True, "detail": "ok"}, {"name": "A3 rank", "holds": False, "detail": "no"}]
    doc = _d([_c("T.A", "INCONCLUSIVE", [_t("exact", "INCONCLUSIVE", assumptions=asm)])])
    md = render_markdown(doc)
    assert "- A1 bounded: **undecided**" in md and "- A2 mixing: **holds**" in md and "- A3 rank: **FAILS**" in md
    assert "A1 bounded: <b>undecided</b>" in render_html(doc, Path("."))


def test_terminal_table_says_the_first_tier_that_did_not_pass():
    """An INCONCLUSIVE tier's summary (why it is undecided) is the one said, not the PASSing tier before it."""
    c = _c("T.I", "INCONCLUSIVE", [_t("exact", "PASS"), _t("montecarlo", "INCONCLUSIVE")])
    assert summary_table([c]).splitlines()[2].endswith("montecarlo said INCONCLUSIVE")
