"""W.L2 (DPI), W.L3 (strong DPI), W.L4 (expected log-likelihood): pass, wrong variants FAIL with a
counterexample, broken assumptions give ASSUMPTION_UNMET and say whether the conclusion held."""
import numpy as np

from sim.claims import get
from sim.priors import Point
from sim.verdict import FindingKind, Verdict
from theory import mutual_information, pairwise_joint

SMALL = dict(n_matrices=2, dims=(2, 3), H=6, max_d=3, max_H=6, max_examples=40)
SWAP = Point([[0.0, 1.0], [1.0, 0.0]])  # gamma = 0: every token is a function of the root
IDENTICAL_ROWS = Point([[0.3, 0.7], [0.3, 0.7]])  # I(x_h; x_pa) = 0


def test_w_l2_passes(run_claim):
    res = run_claim(get("W.L2"), **SMALL)
    assert res.verdict is Verdict.PASS, [(t.tier, t.summary) for t in res.tiers]


def test_w_l2_halved_dpi_fails_with_recheckable_counterexample(run_claim):
    res = run_claim(get("W.L2").variant(factor=0.5), tiers=("exact", "property"), **SMALL)
    assert res.verdict is Verdict.FAIL
    cex = next(t for t in res.tiers if t.tier == "exact").counterexample
    joint_hp = pairwise_joint(np.array(cex["pi"]), cex["parents"], cex["h"], cex["h_prime"],
                              root=None if cex["root_law"] == "stationary" else cex["root_law"])
    assert np.isclose(mutual_information(joint_hp, cex["kind"]), cex[f"I_{cex['kind']}(x_h; x_h')"])


def test_w_l2_two_parent_mechanism_breaks_markov_assumption(run_claim):
    res = run_claim(get("W.L2"), tiers=("exact",), mechanism="two-parent", **SMALL)
    assert res.verdict is Verdict.ASSUMPTION_UNMET
    assert "looks necessary" in res.tiers[0].conclusion_without_assumptions


def test_w_l3_passes_and_reports_contraction_coefficients(run_claim):
    res = run_claim(get("W.L3"), **SMALL)
    assert res.verdict is Verdict.PASS
    exact = next(t for t in res.tiers if t.tier == "exact")
    names = [n.name for n in exact.numbers]
    assert any("eta_chi2" in n for n in names) and any("Dobrushin" in n for n in names)
    # the sharp SDPI (ratio <= Dobrushin of the channel pa -> h') and the per-position delta are stricter
    # readings than W's: findings, both PASS here
    assert [(f.kind, f.verdict) for f in exact.findings] == [(FindingKind.STRICTER, Verdict.PASS)] * 2
    assert "Dobrushin" in exact.findings[0].reading and exact.readings == []
    assert exact.figures


def test_w_l3_tripled_constant_is_caught(run_claim):
    wrong = get("W.L3").variant(bound=lambda delta, gamma: 1 - 3 * delta * gamma)
    res = run_claim(wrong, max_examples=150, max_d=4, max_H=7, n_matrices=2, dims=(2, 3), H=6)
    assert res.verdict is Verdict.FAIL
    prop = next(t for t in res.tiers if t.tier == "property")
    cex = prop.counterexample
    assert cex["I(x_h; x_h')"] > cex["claimed bound"] * cex["I(x_h; x_pa)"]


def test_w_l3_gamma_zero_is_assumption_unmet_and_necessary(run_claim):
    res = run_claim(get("W.L3"), prior=SWAP, tiers=("exact",), n_matrices=1, dims=(2,), H=6)
    assert res.verdict is Verdict.ASSUMPTION_UNMET
    gamma = next(a for a in res.tiers[0].assumptions if a.name.startswith("min pi"))
    assert gamma.holds is False
    assert "looks necessary" in res.tiers[0].conclusion_without_assumptions  # ratio = 1: no contraction


def test_w_l4_passes_and_reports_the_other_readings_as_findings(run_claim):
    res = run_claim(get("W.L4"), **SMALL)
    assert res.verdict is Verdict.PASS
    exact = next(t for t in res.tiers if t.tier == "exact")
    kinds = {f.kind: f for f in exact.findings}
    assert set(kinds) == {FindingKind.LITERAL, FindingKind.OUTSIDE}
    assert kinds[FindingKind.OUTSIDE].verdict is Verdict.PASS  # non-strict for every pi, zeros included


def test_w_l4_literal_every_position_fails_on_a_heavy_diagonal(run_claim):
    """'for all h' != pa(h)' read literally includes h' = h: E[log pi(x_h|x_h)] = sum_a mu(a) log pi(a, a)
    beats the parent when pi's diagonal is heavy. The primary reading (h' < h) still PASSes."""
    heavy = Point([[0.95, 0.05], [0.05, 0.95]])
    res = run_claim(get("W.L4"), prior=heavy, tiers=("exact",), n_matrices=1, dims=(2,), H=5)
    assert res.verdict is Verdict.PASS
    lit = next(f for f in res.tiers[0].findings if f.kind is FindingKind.LITERAL)
    assert lit.verdict is Verdict.FAIL and lit.counterexample["h_prime"] >= lit.counterexample["h"]
    assert res.headline.startswith("PASS (finding")


def test_w_l4_shifted_gap_fails(run_claim):
    res = run_claim(get("W.L4").variant(shift=0.05), **SMALL)
    assert res.verdict is Verdict.FAIL
    assert any(t.counterexample for t in res.tiers)


def test_w_l4_independent_rows_are_assumption_unmet(run_claim):
    res = run_claim(get("W.L4"), prior=IDENTICAL_ROWS, tiers=("exact",), n_matrices=1, dims=(2,), H=5)
    assert res.verdict is Verdict.ASSUMPTION_UNMET
    assert "looks necessary" in res.tiers[0].conclusion_without_assumptions  # equality: no strict gap
