"""sim.claims.base.certified_tier: every certificate PROVED is a PASS with each domain whole in the
result; a certified counterexample box is a FAIL whose centre goes to the corpus and is replayed by the
next run before any search; an undecided or refused certificate is INCONCLUSIVE with what would decide
it; a user's prior leaves the tier NOT_RUN. The tier name flows through the claim machinery."""
from fractions import Fraction

from sim.claims.base import TIERS, Claim, Context, Source, certified_tier
from sim.corpus import FIXED, REPLAYED, STORED, Corpus
from sim.verdict import Outcome, Verdict
from theory.certified import Domain, Inequality, Region


def _claim(cid="T.C"):
    return Claim(id=cid, title="t", source=Source("T", "test"), statement="s", assumptions=(),
                 checks={"certified": lambda ctx: None}, settings={"quick": {"tiers": ("certified",)}})


def _ctx(tmp_path, corpus=None, prior=None, **overrides):
    return Context(claim=_claim(), profile="quick", seed=0, out_dir=tmp_path, corpus=corpus, prior=prior,
                   overrides=overrides)


def _corpus(tmp_path):
    from sim.runner import RunConfig

    return Corpus(tmp_path / "corpus", RunConfig())


def _square(bound):
    """``x^2 <= bound`` on ``x`` in [0, 2]: true for bound 4.5, false for bound 3."""
    dom = Domain(("x",), (0,), (2,), {"what": "x in a test interval"})
    return Inequality(f"x^2 <= {bound}", f"x^2 <= {bound} for every x in [0, 2]", dom, lambda x: x * x,
                      limit=Fraction(bound), describe=lambda p: {"x^2": p[0] ** 2})


def test_the_certified_tier_is_a_tier():
    assert "certified" in TIERS and TIERS.index("certified") == TIERS.index("property") + 1
    assert _claim().tiers == ("certified",)


def test_every_certificate_proved_is_a_pass_with_its_domain_whole(tmp_path):
    res = certified_tier(_ctx(tmp_path), [_square(4.5), _square(5)], what="squares")
    assert (res.tier, res.verdict, res.conclusion) == ("certified", Verdict.PASS, Outcome.HELD)
    assert res.summary.startswith("squares: PROVED on every stated domain (2 certificates, ")
    first = res.numbers[0]
    assert (first.name, first.value, first.n, first.kind) == ("certificates PROVED", 2, 2, "certified")
    assert [n.name for n in res.numbers[1:]] == ["x^2 <= 4.5: boxes evaluated", "x^2 <= 5: boxes evaluated"]
    cert = res.certificates[0]
    assert cert["status"] == "PROVED" and cert["domain in words"] == "what: x in a test interval; x in [0, 2]"
    assert cert["precision (bits)"] == 53 and cert["box budget"] == 20000 and "time (s, process)" in cert


def test_a_counterexample_box_fails_goes_to_the_corpus_and_is_replayed(tmp_path):
    corpus = _corpus(tmp_path)
    res = certified_tier(_ctx(tmp_path, corpus=corpus), [_square(4.5), _square(3)], what="squares")
    assert (res.verdict, res.conclusion) == (Verdict.FAIL, Outcome.VIOLATED)
    cex = res.counterexample
    assert cex["inequality"] == "x^2 <= 3" and cex["x^2"] > 3 and cex["box"]["x"][0] ** 2 > 3
    assert "a certified counterexample box for 'x^2 <= 3'" in res.summary
    assert [c["status"] for c in res.certificates] == ["PROVED", "COUNTEREXAMPLE"]
    [note] = res.corpus
    assert note["status"] == STORED and "certified-" in note["file"]
    # the next run replays the stored centre before any search
    again = certified_tier(_ctx(tmp_path, corpus=_corpus(tmp_path)), [_square(3)], what="squares")
    assert again.verdict is Verdict.FAIL and not again.certificates
    assert again.corpus[0]["status"] == REPLAYED and "replayed from the corpus" in again.summary
    assert again.counterexample["point"] == [cex["centre"]["x"]]
    # a corrected claim no longer fails there: the entry is marked fixed and the search decides
    fixed = certified_tier(_ctx(tmp_path, corpus=_corpus(tmp_path)), [_renamed(_square(5), "x^2 <= 3")],
                           what="squares")
    assert fixed.verdict is Verdict.PASS and fixed.corpus[0]["status"] == FIXED


def _renamed(q, name):
    import dataclasses

    return dataclasses.replace(q, name=name)


def test_an_undecided_certificate_is_inconclusive_with_what_would_decide_it(tmp_path):
    dom = Domain(("x",), (0,), (1,), {"what": "t"})
    tight = Inequality("x <= 1, strictly", "", dom, lambda x: x, limit=1, strict=True)
    res = certified_tier(_ctx(tmp_path, certified_max_boxes=40), [tight], what="t")
    assert (res.verdict, res.conclusion) == (Verdict.INCONCLUSIVE, Outcome.UNDECIDED)
    assert "0 of 1 certificates PROVED" in res.summary and "UNDECIDED" in res.summary
    assert "a box budget above 40 (setting certified_max_boxes)" in res.budget and "largest box left open" in res.budget


def test_a_refused_domain_is_inconclusive_never_a_pass(tmp_path):
    singular = Region("x = 0, where both sides vanish", meets=lambda box: box.lo[0] <= 0)
    dom = Domain(("x",), (0,), (1,), {"what": "t"}, singular=(singular,))
    res = certified_tier(_ctx(tmp_path), [Inequality("x^2 <= x", "", dom, lambda x: x * x - x, limit=0)], what="t")
    assert res.verdict is Verdict.INCONCLUSIVE and res.certificates[0]["status"] == "REFUSED"
    assert "handles the singular set" in res.budget


def test_under_a_user_prior_the_tier_is_not_run(tmp_path):
    from sim.priors import parse_prior

    res = certified_tier(_ctx(tmp_path, prior=parse_prior("dirichlet(alpha=1)")), [_square(3)], what="squares")
    assert res.verdict is Verdict.NOT_RUN and "not run under a user's prior" in res.summary


def test_the_report_prints_each_certificate_whole(tmp_path):
    import xml.etree.ElementTree as ET

    from sim.runner import RunConfig, run

    def check(ctx):
        return certified_tier(ctx, [_square(4.5)], what="squares")

    claim = Claim(id="T.REP", title="t", source=Source("T", "test"), statement="s", assumptions=(),
                  checks={"certified": check}, settings={"quick": {"tiers": ("certified",)}})
    out, (doc,) = run(RunConfig(profile="quick", claims="T.REP"), [claim], out_dir=tmp_path, show_progress=False)
    assert doc["verdict"] == "PASS" and doc["tiers"][0]["certificates"][0]["status"] == "PROVED"
    md, html = (out / "report.md").read_text(), (out / "report.html").read_text()
    for text in (md, html):
        assert "what: x in a test interval; x in [0, 2]" in text and "53 bits" in text and "s (process)" in text
    assert "| x^2 <= 4.5: x^2 <= 4.5 for every x in [0, 2] | PROVED |" in md
    assert "0 (certified)" in md
    ET.fromstring(html.split("\n", 1)[1])  # still well-formed
