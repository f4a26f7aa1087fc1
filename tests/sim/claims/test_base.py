"""sim.claims.base.summarize_instances: how per-instance checks become a tier's verdict.

Each test pins one rule of the verdict engine with hand-made instances, so a mutant of the rule
(a dropped line, a flipped comparison, the wrong instance picked as counterexample) fails here.
At the end, the other pieces of sim.claims.base a verdict depends on: Claim.variant, the property
tier's matrices and its climb towards a violation, and GraphInput's size limit.
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


def test_a_variant_replaces_only_the_params_it_names():
    """Claim.variant is how a test hands the engine a wrong formula: the named param takes the new value, the
    others keep the claim's, the claim itself is unchanged, and an unknown name is refused."""
    from sim.claims.base import Claim, Source

    c = Claim(id="X.1", title="t", source=Source("W", "Lemma 0"), statement="s", assumptions=(), checks={},
              settings={}, params={"factor": 1.0, "power": 2})
    v = c.variant(factor=0.5)
    assert dict(v.params) == {"factor": 0.5, "power": 2} and dict(c.params) == {"factor": 1.0, "power": 2}
    with pytest.raises(KeyError, match="no params"):
        c.variant(facto=0.5)


def test_matrices_strategy_floors_entries_at_gamma_over_d_not_at_gamma():
    """With min_entry_fraction the property tier searches matrices with min pi >= gamma/d (W Lemma 3's
    minorisation, N Knowl 10's gamma/S): at gamma = 0.5, d = 2 every draw has entries >= 0.25, and entries
    between 0.25 and 0.5 are reachable (a floor at gamma itself would forbid them)."""
    from types import SimpleNamespace

    from hypothesis import HealthCheck, find, settings, strategies as st
    from hypothesis.errors import NoSuchExample

    from sim.claims.base import matrices_strategy

    strat = matrices_strategy(SimpleNamespace(prior=None), st.just(2), min_entry_fraction=st.just(0.5))
    cfg = settings(max_examples=200, database=None, derandomize=True, suppress_health_check=list(HealthCheck))
    low = find(strat, lambda pi: pi.min() < 0.45, settings=cfg)
    assert 0.25 - 1e-12 <= low.min() < 0.45
    with pytest.raises(NoSuchExample):  # nothing below the floor
        find(strat, lambda pi: pi.min() < 0.25 - 1e-12, settings=cfg)


def test_the_climb_asks_hypothesis_to_maximise_closeness_to_a_violation(monkeypatch):
    """hypothesis.target maximises, so the climb reports -margin (smaller margin = closer to a violation) on the
    inputs meeting every assumption, and keeps the `keep` smallest margins, an equal margin once."""
    import hypothesis

    from sim.claims.base import _Climb

    seen = []
    monkeypatch.setattr(hypothesis, "target", lambda value, label="": seen.append(value))
    climb = _Climb(lambda x: 10.0 - x, lambda x: x % 2 == 0, keep=2)
    for x in (2, 3, 8, 4, 8):
        climb.observe(x)
    assert seen == [-8.0, -2.0, -6.0, -2.0]  # 3 breaks the assumption: not climbed on
    assert climb.best == [(2.0, 8), (6.0, 4)] and climb.evaluated == 4


def test_graph_input_takes_a_graph_of_exactly_max_nodes_and_refuses_one_more():
    """max_nodes is the largest graph a claim takes ("at most max_nodes"): a chain on 3 nodes with max_nodes = 3
    fits, one on 4 is refused by name."""
    import networkx as nx

    from sim.claims.base import GraphFitError, GraphInput

    def chain(n):  # 0 -> 1 -> ... -> n-2, the last node a root (the query)
        g = nx.DiGraph()
        g.add_nodes_from(range(n))
        g.add_edges_from((i, i + 1) for i in range(n - 2))
        return g

    gi = GraphInput(settings={"graphs": "T"}, max_nodes=3, size_note="all S^T prompts are enumerated")
    gi.check("X.1", chain(3), {})
    with pytest.raises(GraphFitError, match="4 nodes is too many"):
        gi.check("X.1", chain(4), {})
