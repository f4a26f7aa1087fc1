"""Reports: well-formed HTML and JUnit, escaping of every text that comes from claims or configs,
figures embedded, the results.json schema."""
import json
import xml.etree.ElementTree as ET

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from sim.claims.base import Claim, Source  # noqa: E402
from sim.report import SCHEMA  # noqa: E402
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
