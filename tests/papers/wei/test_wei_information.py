"""W.L2 (DPI), W.L3 (strong DPI), W.L4 (expected log-likelihood): pass, wrong variants FAIL with a
counterexample, broken assumptions give ASSUMPTION_UNMET and say whether the conclusion held."""
import numpy as np
import pytest

from sim.claims import get
from sim.priors import Point
from sim.verdict import FindingKind, Verdict
from theory import dobrushin, eta_chi2, mutual_information, pairwise_joint

SMALL = dict(n_matrices=2, dims=(2, 3), H=6, max_d=3, max_H=6, max_examples=40, certified_floors=(0.05,),
             bracket_floors=(0.05,))
SWAP = Point([[0.0, 1.0], [1.0, 0.0]])  # gamma = 0: every token is a function of the root
IDENTICAL_ROWS = Point([[0.3, 0.7], [0.3, 0.7]])  # I(x_h; x_pa) = 0


def test_w_l2_passes(run_claim):
    res = run_claim(get("W.L2"), **SMALL)
    assert res.verdict is Verdict.PASS, [(t.tier, t.summary) for t in res.tiers]


def test_w_l2_halved_dpi_fails_with_recheckable_counterexample(run_claim):
    res = run_claim(get("W.L2").variant(factor=0.5), tiers=("exact", "property"), **SMALL)
    assert res.verdict is Verdict.FAIL
    assert [t.verdict for t in res.tiers] == [Verdict.FAIL, Verdict.FAIL]  # each tier applies the factor
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
    # readings than W's: findings, both PASS here; then the tightness of the contraction bracket (two
    # ends) and of W's bound
    assert [(f.kind, f.verdict) for f in exact.findings] == [(FindingKind.STRICTER, Verdict.PASS)] * 5
    assert "Dobrushin" in exact.findings[0].reading and exact.readings == []
    assert exact.figures


def test_w_l3_reports_how_tight_the_contraction_bracket_is(run_claim):
    """Issue 18: sup over channels K (d = 2, 3, min entry >= floor) and inputs p of eta_chi2 / Dobrushin and of
    eta_KL's lower end / Dobrushin, by optimisation. The binary symmetric channel at the floor with uniform p
    gives 1 - 2 floor, so the optimum is at least that; the bracket makes it at most 1; eta_KL >= eta_chi2."""
    exact = run_claim(get("W.L3"), tiers=("exact",), **SMALL).tiers[0]
    rows = {end: {n.name.rsplit(" at min entry of K ", 1)[1]: n for n in exact.numbers
                  if n.name.startswith(f"tightness: sup {end}")} for end in ("eta_chi2", "eta_KL")}
    for end, table in rows.items():
        assert set(table) == {"0.05", "0.01", "0.001"}, end
        for floor, n in table.items():
            assert 1 - 2 * float(floor) - 1e-6 <= n.value <= 1 + 1e-12, (end, floor, n.value)
            assert "a lower bound on the supremum" in n.note and '"K"' in n.note and '"p"' in n.note
        assert table["0.001"].value > 0.99
    for floor in rows["eta_chi2"]:
        assert rows["eta_KL"][floor].value >= rows["eta_chi2"][floor].value - 1e-12
    bracket = [f for f in exact.findings if "bracket" in f.reading]
    assert [(f.kind, f.verdict) for f in bracket] == [(FindingKind.STRICTER, Verdict.PASS)] * 2
    w = bracket[0].witness  # re-check by hand with theory's functions
    K, p = np.array(w["K"]), np.array(w["p"])
    assert K.min() >= 0.001 - 1e-12 and w["level"] == {"min entry of K": 0.001}
    assert eta_chi2(K, p) / dobrushin(K) == pytest.approx(w["value"], rel=1e-9)
    assert sum("tightness-bracket" in f for f in exact.figures) == 2


def test_w_l3_tightness_reaches_the_bound_at_the_boundary_with_its_witness(run_claim):
    """Issue 18: the supremum of ratio / (1 - delta*gamma), found by optimisation from random starts,
    is >= 0.94 at min pi >= 0.01 and >= 0.99 at min pi >= 0.001 (W.L3 is tight, not loose)."""
    res = run_claim(get("W.L3"), tiers=("exact",), **SMALL)
    exact = res.tiers[0]
    best = {n.name.rsplit(" at min entry of pi ", 1)[1]: n for n in exact.numbers
            if n.name.startswith("tightness: sup I(x_h;x_h')")}
    assert set(best) == {"0.05", "0.01", "0.001"}
    assert best["0.01"].value >= 0.94 and best["0.001"].value >= 0.99
    assert "a lower bound on the supremum" in best["0.001"].note
    sample = next(n for n in exact.numbers if n.name == "max ratio / bound over the sampled pairs")
    assert "lower bound on the supremum" in sample.note and sample.value < best["0.05"].value
    tight = exact.findings[-1]
    assert tight.reading.startswith("tightness") and tight.witness["level"] == {"min entry of pi": 0.001}
    w = tight.witness
    pi = np.array(w["pi"])
    # the witness re-checks by hand: its own ratio and bound, at the floor
    assert pi.min() == pytest.approx(0.001, abs=1e-6) and w["ratio / bound"] >= 0.99
    assert w["ratio"] == pytest.approx(w["I(x_h; x_h')"] / w["I(x_h; x_pa)"])
    assert w["bound"] == pytest.approx(1 - w["delta"] * w["gamma"]) and w["h_prime"] != w["parent"]
    assert any("tightness-ratio-to-bound" in f for f in exact.figures)


def test_w_l3_a_bound_below_the_supremum_fails_the_exact_tier_through_its_optimum(run_claim):
    """0.9 (1 - delta*gamma) holds on every sampled pair (their ratio / bound stays below 0.4) but not at the
    optimum: the tightness optimisation FAILs the exact tier with the optimum as counterexample."""
    res = run_claim(get("W.L3").variant(bound=lambda delta, gamma: 0.9 * (1 - delta * gamma)), tiers=("exact",),
                    **SMALL)
    exact = res.tiers[0]
    assert exact.verdict is Verdict.FAIL and "tightness optimisation" in exact.counterexample["found by"]


def test_w_l2_and_w_l4_report_their_tightness(run_claim):
    l2 = run_claim(get("W.L2"), tiers=("exact",), **SMALL).tiers[0]
    kl = next(f for f in l2.findings if "I_kl" in f.reading)
    assert kl.verdict is Verdict.PASS and kl.numbers[-1].value > 0.98  # the DPI is tight (permutations)
    assert sum("tightness-dpi" in f for f in l2.figures) == 2
    l4 = run_claim(get("W.L4"), tiers=("exact",), **SMALL).tiers[0]
    gap = next(f for f in l4.findings if f.reading.startswith("tightness"))
    values = [n.value for n in gap.numbers]
    assert gap.verdict is Verdict.PASS and all(v > 0 for v in values) and values[-1] < 0.05
    assert "upper bound on the infimum" in gap.numbers[0].note


def test_w_l2_w_l4_property_tiers_report_the_closest_approach(run_claim):
    for cid in ("W.L2", "W.L4"):
        prop = run_claim(get(cid), tiers=("property",), **SMALL).tiers[0]
        closest = next(n for n in prop.numbers if n.name.startswith("closest approach: smallest margin"))
        assert prop.verdict is Verdict.PASS and 0 <= closest.value < 0.05, (cid, closest)


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
    assert set(kinds) == {FindingKind.LITERAL, FindingKind.OUTSIDE, FindingKind.STRICTER}  # stricter: tightness
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


@pytest.mark.parametrize("shortfall, verdict", [(3e-13, Verdict.PASS), (3e-10, Verdict.FAIL)])
def test_dpi_roundoff_tolerance_a_factor_short_of_one_by_3e_10_fails(run_claim, shortfall, verdict):
    """ROUNDOFF (1e-12) is the only slack in the DPI comparison. Under the swap chain every token is a
    function of the root, so I(x_h; x_h') = I(x_h; x_pa) exactly (to float64 round-off): a claimed factor
    1 - 3e-13 still holds within round-off, 1 - 3e-10 is refuted (a tolerance widened 1000x would pass it)."""
    res = run_claim(get("W.L2").variant(factor=1 - shortfall), prior=SWAP, tiers=("exact",), **SMALL)
    exact = res.tiers[0]
    assert exact.verdict is verdict, exact.summary
    if verdict is Verdict.FAIL:
        cex = exact.counterexample
        i_hp, i_pa = cex[f"I_{cex['kind']}(x_h; x_h')"], cex[f"I_{cex['kind']}(x_h; x_pa)"]
        assert i_hp == pytest.approx(i_pa, rel=1e-14) and i_pa > 0.1


def test_w_l2_symbolic_tier_refutes_a_halved_dpi_rather_than_proving_w_s(run_claim):
    """The symbolic tier proves the DPI the claim states, with its factor: a halved DPI is refuted exactly
    (both channels noiseless), where it used to prove W's factor-1 DPI whatever the claim said."""
    res = run_claim(get("W.L2").variant(factor=0.5), tiers=("symbolic",), **SMALL)
    sym = res.tiers[0]
    assert sym.verdict is Verdict.FAIL, sym.summary
    assert sym.counterexample["claimed_factor"] == "1/2" and sym.counterexample["kind"] == "chi2"
    assert [r["verdict"] for r in sym.readings] == ["FAIL"] * 4
    assert run_claim(get("W.L2"), tiers=("symbolic",), **SMALL).tiers[0].verdict is Verdict.PASS


@pytest.mark.parametrize("cid, per_pair", [("W.L2", 4), ("W.L3", 1), ("W.L4", 1)])
def test_exact_tiers_check_every_earlier_non_parent_position(run_claim, cid, per_pair):
    """Each position h has one parent among 0..h-1, so a tree on H nodes has (H-1)(H-2)/2 pairs (h, h' != pa(h)),
    h' < h; the exact tiers check all of them, per matrix, tree and root law (W.L2: per divergence too), whatever
    the tree (a loop that stopped at h' = h - 2 would skip h' = h - 1 wherever it is not the parent)."""
    import re

    H, n_matrices, dims = 6, 2, (2, 3)
    res = run_claim(get(cid), tiers=("exact",), n_matrices=n_matrices, dims=dims, H=H)
    n_instances = len(dims) * n_matrices * 2  # one tree per matrix, stationary and uniform root laws
    expected = n_instances * (H - 1) * (H - 2) // 2 * per_pair
    assert re.search(rf"of {expected} instances", res.tiers[0].summary), res.tiers[0].summary
    if cid == "W.L4":  # the finding on sparse pi walks the same pairs
        outside = next(f for f in res.tiers[0].findings if f.kind is FindingKind.OUTSIDE)
        assert outside.numbers[0].n == expected
