"""sim.claims.base.summarize_instances: how per-instance checks become a tier's verdict.

Each test pins one rule of the verdict engine with hand-made instances, so a mutant of the rule
(a dropped line, a flipped comparison, the wrong instance picked as counterexample) fails here.
"""
import pytest

from sim.claims.base import InstanceCheck, summarize_instances
from sim.verdict import Outcome, Verdict

A, B = "assumption A", "assumption B"


def check(outcome, margin, *, a=True, b=True, tag=""):
    return InstanceCheck(assumptions={A: a, B: b}, outcome=outcome, margin=margin, record={"tag": tag})


def summarize(checks, **kw):
    return summarize_instances("exact", checks, [A, B], what="the lemma", **kw)


def test_fail_wins_over_assumption_unmet_when_a_counterexample_meets_every_assumption():
    """A counterexample meeting every assumption decides FAIL, even though other drawn instances
    break an assumption (tier_verdict alone would say ASSUMPTION_UNMET)."""
    res = summarize([check(Outcome.VIOLATED, -0.5, tag="bad"), check(Outcome.HELD, 1.0, a=False, tag="broken")])
    assert res.verdict is Verdict.FAIL
    assert res.conclusion is Outcome.VIOLATED
    assert res.counterexample == {"tag": "bad"}
    assert [(x.name, x.holds) for x in res.assumptions] == [(A, False), (B, True)]
    assert res.conclusion_without_assumptions == ("held on all 1 instances that break an assumption "
                                                  "(the assumption did not look necessary on these inputs)")


def test_counterexample_is_the_worst_violation_among_instances_meeting_every_assumption():
    res = summarize([check(Outcome.VIOLATED, -0.1, tag="mild"), check(Outcome.HELD, -5.0, tag="held"),
                     check(Outcome.VIOLATED, -2.0, tag="worst"), check(Outcome.VIOLATED, -9.0, a=False, tag="broken")])
    assert res.verdict is Verdict.FAIL
    assert res.counterexample == {"tag": "worst"}
    assert res.summary == ("the lemma: violated — 2 of 3 instances violate (smallest margin -5); "
                           "1 further instances break an assumption")
    assert res.conclusion_without_assumptions.startswith("violated on 1 of 1 instances that break an assumption")


def test_all_held_is_pass_with_every_assumption_reported():
    res = summarize([check(Outcome.HELD, 0.25), check(Outcome.HELD, 0.5)], budget="more instances")
    assert (res.tier, res.verdict, res.conclusion, res.counterexample) == ("exact", Verdict.PASS, Outcome.HELD, None)
    assert [(x.name, x.holds, x.detail) for x in res.assumptions] == [(A, True, "held on all 2 instances"),
                                                                       (B, True, "held on all 2 instances")]
    assert res.conclusion_without_assumptions is None
    assert res.budget == ""  # a budget is only said for an undecided conclusion
    assert res.summary == "the lemma: held — 0 of 2 instances violate (smallest margin 0.25)"


def test_undecided_instance_makes_the_tier_inconclusive_and_keeps_the_budget():
    res = summarize([check(Outcome.HELD, 0.5), check(Outcome.UNDECIDED, 0.0)], budget="10x the samples")
    assert (res.verdict, res.conclusion, res.budget) == (Verdict.INCONCLUSIVE, Outcome.UNDECIDED, "10x the samples")
    assert res.counterexample is None


def test_undecided_without_a_budget_says_none():
    assert summarize([check(Outcome.UNDECIDED, 0.0)]).budget == ""


def test_violation_wins_over_undecided_among_instances_meeting_every_assumption():
    res = summarize([check(Outcome.UNDECIDED, 0.0), check(Outcome.VIOLATED, -1.0, tag="v"), check(Outcome.HELD, 1)])
    assert (res.verdict, res.conclusion, res.counterexample) == (Verdict.FAIL, Outcome.VIOLATED, {"tag": "v"})


def test_violation_only_where_an_assumption_breaks_is_assumption_unmet_with_that_witness():
    res = summarize([check(Outcome.HELD, 1.0), check(Outcome.VIOLATED, -0.5, b=False, tag="w1"),
                     check(Outcome.VIOLATED, -3.0, b=False, tag="w2")])
    assert (res.verdict, res.conclusion) == (Verdict.ASSUMPTION_UNMET, Outcome.HELD)
    assert res.counterexample == {"tag": "w2"}  # the worst violation among the broken instances
    assert [(x.name, x.holds, x.detail) for x in res.assumptions] == [
        (A, True, "held on all 3 instances"), (B, False, "failed on 2 of 3 instances")]
    assert res.conclusion_without_assumptions == ("violated on 2 of 2 instances that break an assumption "
                                                  "(the assumption looks necessary)")


def test_every_instance_breaking_an_assumption_judges_the_conclusion_on_them():
    res = summarize([check(Outcome.UNDECIDED, 0.0, a=False), check(Outcome.HELD, 2.0, a=False)])
    assert (res.verdict, res.conclusion) == (Verdict.ASSUMPTION_UNMET, Outcome.UNDECIDED)
    assert res.conclusion_without_assumptions == "undecided on some of the 2 instances that break an assumption"
    assert res.summary == ("the lemma: undecided — 0 of 2 instances violate (smallest margin 0)"
                           " — every instance breaks an assumption")
    assert res.counterexample is None


def test_an_assumption_a_check_does_not_mention_counts_as_held():
    res = summarize_instances("exact", [InstanceCheck({A: True}, Outcome.HELD, 1.0, {})], [A, B], what="w")
    assert [(x.name, x.holds) for x in res.assumptions] == [(A, True), (B, True)]
    assert res.verdict is Verdict.PASS


def test_numbers_are_passed_through_and_no_checks_is_an_error():
    from sim.verdict import Number

    n = Number("max error", 1e-16, tolerance=1e-10)
    assert summarize([check(Outcome.HELD, 1.0)], numbers=[n]).numbers == [n]
    with pytest.raises(ValueError, match="exact: no instances were checked"):
        summarize([])
