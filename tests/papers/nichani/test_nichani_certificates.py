"""N.K3's gap bound certified at S = 2 (sim.papers.nichani.certificates): the graphs reduce to (distance,
roots) cases exactly as enumerated; the pointwise bound is PROVED outside the stated neighbourhood of
rank-one pi, a bound eight times larger gets a certified counterexample box, and the closed-form signal
the certificate uses is N's g."""
import dataclasses
from fractions import Fraction

import numpy as np

from sim.claims import get
from sim.papers.nichani.certificates import gap_inequality, graph_cases
from sim.runner import RunConfig, evaluate_claim
from sim.verdict import Verdict
from theory import nichani_gradient_signal, stationary
from theory.certified import certify


def _only_certified(claim, **settings):
    return dataclasses.replace(claim, settings={**claim.settings, "quick": {**claim.settings["quick"],
                                                                            "tiers": ("certified",), **settings}})


def test_graph_cases_count_every_pair_of_every_graph():
    """Graphs on 4 positions (p(1) in {-1, 0}, p(2) in {-1, 0, 1}, at least one edge: 5 graphs): a non-root i
    has i candidates j <= i other than p(i)."""
    graphs = [(-1, p1, p2, -1) for p1 in (-1, 0) for p2 in (-1, 0, 1) if (p1, p2) != (-1, -1)]
    expected = sum(i for par in graphs for i, p in enumerate(par) if p >= 0)
    cases = graph_cases(4)
    assert sum(cases.values()) == expected == 11
    assert cases[(2, 2)] == 2  # (-1, 0, 1, -1): i = 2, j = 0; (-1, 0, 0, -1): i = 2, j = 1
    assert {k for k, _ in cases} == {None, 2}


def test_the_gap_bound_is_proved_and_a_larger_bound_is_refuted(tmp_path):
    res = evaluate_claim(_only_certified(get("N.K3")), RunConfig(profile="quick"), tmp_path)
    (tier,) = res.tiers
    assert res.verdict is Verdict.PASS, tier.summary
    words = tier.certificates[0]["domain in words"]
    assert "excluded: |lam| = |1 - a - b| < 1/1000000000" in words and "every one-parent graph on T = 7" in words
    wrong = get("N.K3").variant(gap_bound=lambda gamma, S: 8 * gamma ** 3 / (2 * S))
    bad = evaluate_claim(_only_certified(wrong), RunConfig(profile="quick"), tmp_path / "wrong")
    assert bad.verdict is Verdict.FAIL
    pi = np.array(bad.tiers[0].counterexample["pi"])
    # recheck the centre by hand, pointwise: the chain on T = 7 (roots 0 and 6) with N's g of the one-atom
    # prior; j = i has g[i, i] = 0 under the uniform mean
    par = [-1, 0, 1, 2, 3, 4, -1]
    g = nichani_gradient_signal(pi[None], par)
    mu = stationary(pi)
    gamma = min(2 * pi.min(), np.sqrt(2 * ((pi - mu) ** 2).sum()), 1 - 2 / 7)
    gaps = [g[i, i - 1] - (g[i, j] if j < i else 0.0) for i in range(2, 6) for j in range(i + 1) if j != i - 1]
    assert min(gaps) < 8 * gamma ** 3 / 4


def test_without_its_exclusion_the_certificate_is_refused():
    """The bound is a function of gamma given by the claim, so the singular set lam = 0 is not divided out
    but excluded: the same certificate with no exclusion is REFUSED."""
    q = gap_inequality(0.1, 5, lambda gamma, S: gamma ** 3 / (2 * S), Fraction(1, 10 ** 9))
    dom = dataclasses.replace(q.domain, excluded=())
    assert certify(dataclasses.replace(q, domain=dom), max_boxes=100).status == "REFUSED"
