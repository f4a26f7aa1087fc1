"""W's lemmas certified at d = 2 (sim.papers.wei.certificates, the certified tiers of W.L3, W.L4, W.T3):
PROVED on their stated domains, printed whole; a sharpened W.L3 (the bound times 0.97) and a sharpened
contraction bracket (0.97 Dobrushin) each get a certified counterexample box and FAIL; the certified
upper bound on W.L3's supremum lies above the best optimised value at every floor, with the gap
reported; wrong variants of W.L4 and W.T3 FAIL with a box."""
import dataclasses

import numpy as np
import pytest

from sim.claims import get
from sim.papers.wei import certificates as wc
from sim.verdict import Verdict
from theory import CausalTree, mutual_information, pairwise_joint, stationary, wei_gradient_at_zero


def _certified(result):
    return next(t for t in result.tiers if t.tier == "certified")


def _only_certified(claim):
    return dataclasses.replace(claim, settings={**claim.settings,
                                                "quick": {**claim.settings["quick"], "tiers": ("certified",)}})


def test_w_l3_is_proved_and_its_tightness_is_a_bracket_that_holds_the_optimum(run_claim):
    """The independent check of issue 45: at every floor the certified upper bound on sup ratio / bound lies
    above the best value the optimiser finds (on the same domain: d = 2, the same trees), and the report
    gives both and their gap."""
    res = run_claim(_only_certified(get("W.L3")), certified_floors=(0.05, 0.01), bracket_floors=(0.05,))
    tier = _certified(res)
    assert res.verdict is Verdict.PASS, tier.summary
    assert [c["status"] for c in tier.certificates] == ["PROVED"] * 3
    nums = {n.name: n.value for n in tier.numbers}
    q = "sup I(x_h;x_h') / ((1 - delta*gamma) I(x_h;x_pa)), d = 2"
    for floor, known in ((0.05, 0.80696), (0.01, 0.94469)):  # the BSC corner pi = [[1-f, f], [f, 1-f]]
        opt = nums[f"certified tightness: {q} at min entry of pi {floor:g}: best optimised"]
        upper = nums[f"certified tightness: {q} at min entry of pi {floor:g}: certified upper bound"]
        gap = nums[f"certified tightness: {q} at min entry of pi {floor:g}: gap"]
        assert opt <= upper and gap == pytest.approx(upper - opt) and gap <= 2e-3
        assert opt == pytest.approx(known, abs=1e-4) and upper < 1
    finding = next(f for f in tier.findings if f.reading.startswith("certified tightness of W Lemma 3"))
    assert finding.verdict is Verdict.PASS and "(gap " in finding.detail
    domain = tier.certificates[0]["domain in words"]
    for part in ("d: 2", "every entry >= 1/20", "root law: stationary", "every recursive tree on 3, 4 nodes (8 trees)",
                 "at tree distances [2, 3]", "singular set: lam = 1 - a - b = 0", "handled: both informations"):
        assert part in domain, part


def test_an_optimum_above_the_certified_bound_is_an_error_not_a_verdict(run_claim, monkeypatch):
    from sim.papers.wei.claims import information

    real = information.tight_optima

    def inflated(ctx, value, **kw):
        return [dataclasses.replace(t, value=t.value + 0.01) for t in real(ctx, value, **kw)]

    monkeypatch.setattr(information, "tight_optima", inflated)
    res = run_claim(_only_certified(get("W.L3")), certified_floors=(0.05,), bracket_floors=())
    tier = _certified(res)
    assert tier.verdict is Verdict.ERROR and "BracketMismatch" in tier.error


def test_a_sharpened_w_l3_gets_a_certified_counterexample_box_and_fails(run_claim):
    """The bound times 0.97: the supremum of ratio / bound at the floor 0.001 is 0.9915, so
    0.9915 / 0.97 > 1 near the binary symmetric channel with crossover 0.001."""
    sharp = get("W.L3").variant(bound=lambda delta, gamma: 0.97 * (1 - delta * gamma))
    res = run_claim(_only_certified(sharp), certified_floors=(0.001,), bracket_floors=())
    tier = _certified(res)
    assert res.verdict is Verdict.FAIL and tier.certificates[0]["status"] == "COUNTEREXAMPLE"
    cex = tier.counterexample
    pi = np.array(cex["pi"])
    assert pi.min() >= 0.001 - 1e-15 and cex["enclosure of the value on the box"][0] > 1
    tree = CausalTree([-1, 0, 1, 2])  # recheck the centre by hand: h = 3, pa = 2, h' = 1 (distance 2)
    mu = stationary(pi)
    ratio = (mutual_information(pairwise_joint(pi, tree, 3, 1, root=mu), "kl")
             / mutual_information(pairwise_joint(pi, tree, 3, 2, root=mu), "kl"))
    gamma, delta = 2 * pi.min(), mu.min()
    assert ratio > 0.97 * (1 - delta * gamma)


def test_a_sharpened_contraction_bracket_gets_a_certified_counterexample_box_and_fails(run_claim):
    """eta_chi2 <= 0.97 Dobrushin fails at floor 0.01: the binary symmetric channel with crossover 0.01 and
    a uniform input has eta_chi2 / Dobrushin = 0.98."""
    res = run_claim(_only_certified(get("W.L3").variant(bracket=0.97)), certified_floors=(), bracket_floors=(0.01,))
    tier = _certified(res)
    assert res.verdict is Verdict.FAIL
    cex = tier.counterexample
    assert cex["inequality"].startswith("contraction bracket eta_chi2 <= 0.97 Dobrushin")
    K, p = np.array(cex["K"]), np.array(cex["p"])
    from theory import dobrushin, eta_chi2

    assert eta_chi2(K, p) > 0.97 * dobrushin(K) and K.min() >= 0.01 - 1e-15


def test_the_kl_end_of_the_bracket_is_certified_on_its_stated_input_floor():
    from theory.certified import certify

    (chi2, kl) = wc.bracket_inequalities(0.2, 1.0, kl=True, input_floor=0.3)
    cert = certify(kl, max_boxes=20000)
    assert cert.status == "PROVED", cert.reason
    assert "p = (p0, 1 - p0) with every entry >= 3/10" in cert.record()["domain in words"]
    assert certify(wc.bracket_inequalities(0.2, 0.5, kl=True, input_floor=0.3)[1], max_boxes=20000).status == \
        "COUNTEREXAMPLE"


def test_w_l4_is_proved_and_a_shifted_gap_fails_near_rank_one(run_claim):
    res = run_claim(_only_certified(get("W.L4")))
    assert res.verdict is Verdict.PASS and len(_certified(res).certificates) == 3
    shifted = run_claim(_only_certified(get("W.L4").variant(shift=1e-3)))
    tier = _certified(shifted)
    assert shifted.verdict is Verdict.FAIL
    assert abs(tier.counterexample["lam = 1 - a - b"]) < 0.2  # the gap vanishes like lam^2 at rank one


def test_w_t3_is_proved_per_class_of_trees_and_wrong_variants_fail(run_claim):
    res = run_claim(_only_certified(get("W.T3")), certified_domains=((0.05, 3),))
    tier = _certified(res)
    assert res.verdict is Verdict.PASS and len(tier.certificates) == 3  # h = 2: 1 class; h = 3: 2 classes
    assert tier.readings == [{"name": "mixture (decides)", "verdict": "PASS",
                              "detail": "3 certificates, one per class of trees with the same margin"}]
    assert "[-1, 0, 0, 1], [-1, 0, 0, 2], [-1, 0, 1, 0], [-1, 0, 1, 2]" in tier.certificates[2]["domain in words"]
    leading = run_claim(_only_certified(get("W.T3").variant(lead=0.2)), certified_domains=((0.05, 2),))
    assert leading.verdict is Verdict.FAIL  # the lead at floor 0.05 is about 0.077, not 0.2
    grandparent = get("W.T3").variant(claimed_argmax=lambda tree, h: tree.parent(tree.parent(h)) if
                                       tree.parent(tree.parent(h)) is not None else tree.parent(h))
    wrong = run_claim(_only_certified(grandparent), certified_domains=((0.05, 3),))
    tier = _certified(wrong)
    assert wrong.verdict is Verdict.FAIL
    pi, name = np.array(tier.counterexample["pi"]), tier.counterexample["inequality"]
    assert name.startswith("W Theorem 3, h = ") and pi.min() >= 0.05 - 1e-15
    trees = next(c["domain in words"] for c in tier.certificates if c["inequality"] == name)
    par = [int(x) for x in trees.split("h = ")[1].split(": [")[1].split("]")[0].split(", ")]  # first tree of the class
    G = wei_gradient_at_zero(pi, par, len(par) - 1, root=stationary(pi))  # recheck the centre by hand
    gp = par[par[-1]] if par[par[-1]] >= 0 else par[-1]
    assert G[gp] <= np.delete(G, gp).max()


def test_the_gradient_classes_cover_every_tree_once():
    classes = wc.gradient_classes(4, lambda tree, h: tree.parent(h))
    trees = [t for _, _, members in classes for t in members]
    assert len(trees) == len(set(trees)) == 2 + 6 + 24 and len(classes) == 7
    rng = np.random.default_rng(5)
    for par, claimed, members in classes:  # one margin per class: check two members numerically
        a, b = rng.uniform(0.1, 0.9, 2)
        pi = np.array([[1 - a, a], [b, 1 - b]])
        margins = []
        for m in members[:2]:
            G = wei_gradient_at_zero(pi, list(m), len(m) - 1, root=stationary(pi))
            margins.append(G[m[-1]] - np.delete(G, m[-1]).max())
        assert margins[0] == pytest.approx(margins[-1], abs=1e-14)


def test_pair_distances_list_every_pair():
    by_k = wc.pair_distances((3, 4))
    assert sorted(by_k) == [2, 3] and sum(len(v) for v in by_k.values()) == 2 * 1 + 6 * 3
    assert ((-1, 0, 1, 2), 3, 0) in by_k[3]
