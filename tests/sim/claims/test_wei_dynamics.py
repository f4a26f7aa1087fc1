"""W.T3 (W Theorem 3): the gradient at W = 0 points at the true parent. W's setting decides
(mixture output, stationary root); PASS on defaults, wrong variants (argmax at h-1, sign flip, a
wrong gradient formula) FAIL, identical rows are ASSUMPTION_UNMET with the conclusion violated
there; the logits output and a uniform root are `outside the paper's setting` findings (both
FAIL on recorded witnesses), the stationary root an `unstated assumption` finding."""
import numpy as np
import pytest

from sim.claims.wei.dynamics import LOGITS_WITNESS, UNIFORM_ROOT_WITNESS, W_T3, _autograd_gradients, _bonferroni_z
from sim.priors import Point
from sim.sampling import sample_w_prompts
from sim.verdict import FindingKind, Outcome, Verdict
from theory import CausalTree, mutual_information, pairwise_joint, wei_chi2_signal, wei_gradient_at_zero

SMALL = {"n_matrices": 2, "dims": (2, 3), "H": 5, "trees_per_matrix": 1, "max_examples": 15, "max_H": 5,
         "max_d": 3, "mc_H": 5, "mc_samples": 3000}


@pytest.fixture
def run(run_claim):
    return lambda claim, prior=None, **over: run_claim(claim, prior=prior, **{**SMALL, **over})


def test_passes_on_defaults(run, tmp_path):
    res = run(W_T3)
    assert res.verdict is Verdict.PASS, [(t.tier, t.verdict, t.summary, t.error) for t in res.tiers]
    assert W_T3.primary is not None and (W_T3.primary.seed, W_T3.primary.lines) == ("000", "221-225")
    assert "stationary root (every marginal = mu_pi)" in W_T3.assumptions
    exact = next(t for t in res.tiers if t.tier == "exact")
    nums = {n.name: n for n in exact.numbers}
    assert nums["max |g~[pa] - I_chi2(x_h; x_pa)| (stationary root)"].value < 1e-12
    assert nums["Spearman(G, chi2 signal): mean over positions"].value > 0.5
    assert exact.figures and (tmp_path / exact.figures[0]).exists()
    for t in res.tiers:  # only the deciding reading is a criterion; the others are findings
        assert [r["name"] for r in t.readings] == ["mixture (decides)"], t.tier
        assert all(f.kind in (FindingKind.OUTSIDE, FindingKind.UNSTATED) for f in t.findings)
    mc = next(t for t in res.tiers if t.tier == "montecarlo")
    (logits,) = mc.findings
    assert logits.kind is FindingKind.OUTSIDE and logits.verdict is Verdict.PASS and "logits" in logits.reading
    # the headline keeps the failing findings beside the PASS
    assert res.headline.startswith("PASS (findings: ") and "logits" in res.headline and "uniform root" in res.headline


def test_findings_outside_the_setting_and_the_unstated_assumption(run):
    """The logits output and a uniform root fail on recorded witnesses (full-support pi, every
    other assumption met) while W's mixture reading holds there; the stationary root is reported
    as W's unstated assumption, shown needed by the uniform-root witness."""
    res = run(W_T3, tiers=("exact",))
    exact = res.tiers[0]
    assert exact.verdict is Verdict.PASS
    by = {(f.kind, f.reading.split(",")[0].split(" (")[0]): f for f in exact.findings}
    logits = next(f for f in exact.findings if f.kind is FindingKind.OUTSIDE and "logits" in f.reading)
    assert logits.verdict is Verdict.FAIL and logits.counterexample["pi"][0][0] == 0.9994
    assert "argmax G off the parent" in logits.detail
    uniform = next(f for f in exact.findings if f.kind is FindingKind.OUTSIDE and "uniform root" in f.reading)
    assert uniform.verdict is Verdict.FAIL and uniform.counterexample["root_law"] == "uniform"
    assert uniform.counterexample["pi"] == UNIFORM_ROOT_WITNESS["pi"]
    unstated = next(f for f in exact.findings if f.kind is FindingKind.UNSTATED)
    assert unstated.verdict is Verdict.PASS and "stationary root" in unstated.reading and unstated.detail
    assert len(by) == 3
    # Re-check both witnesses by hand with the theory function.
    pi, tree, h = np.array(LOGITS_WITNESS["pi"]), CausalTree(LOGITS_WITNESS["parents"]), LOGITS_WITNESS["h"]
    assert np.argmax(wei_gradient_at_zero(pi, tree, h, reading="logits")) == 3 != tree.parent(h)
    assert np.argmax(wei_gradient_at_zero(pi, tree, h, reading="mixture")) == tree.parent(h)
    # without the witnesses (a run that draws none of its own) the unstated finding cannot show necessity
    res = run(W_T3, tiers=("exact",), witness=False)
    unstated = next(f for f in res.tiers[0].findings if f.kind is FindingKind.UNSTATED)
    assert unstated.verdict in (Verdict.PASS, Verdict.INCONCLUSIVE)


@pytest.mark.parametrize("variant", [{"claimed_argmax": lambda tree, h: h - 1}, {"sign": -1.0}])
def test_wrong_variants_fail_with_counterexample(run, variant):
    res = run(W_T3.variant(**variant), tiers=("exact", "property"))
    assert res.verdict is Verdict.FAIL
    for t in res.tiers:
        assert t.verdict is Verdict.FAIL and t.counterexample
        cex = t.counterexample
        G = np.asarray(cex["-E[dl/dp_hat] (h' = 0..h-1)"])
        assert cex["margin"] <= 0 and len(G) == cex["h"]
        # re-check by hand
        recomputed = wei_gradient_at_zero(np.array(cex["pi"]), cex["parents"], cex["h"], reading=cex["reading"])
        assert np.allclose(recomputed, G, atol=1e-12)


def _without_attention_factor(pi, tree, h, root=None, reading="mixture"):
    """A wrong gradient formula: -E[dl/dp_hat] without the softmax Jacobian's factor A_h' = 1/h."""
    return h * wei_gradient_at_zero(pi, tree, h, root=root, reading=reading)


def _chi2_signal_as_gradient(pi, tree, h, root=None, reading="mixture"):
    """A wrong gradient formula: 'tracks chi-square MI' read as equality, G = g~ / h."""
    return wei_chi2_signal(pi, tree, h, root=root) / h


@pytest.mark.parametrize("formula", [_without_attention_factor, _chi2_signal_as_gradient])
def test_a_wrong_gradient_formula_fails(run, formula):
    """The formula under test is a parameter: autograd through W's model disagrees with a wrong one
    (the Monte Carlo tier FAILs with the entry that shows it), whatever its argmax does."""
    res = run(W_T3.variant(gradient=formula), tiers=("montecarlo",))
    assert res.verdict is Verdict.FAIL, [(t.tier, t.verdict, t.summary) for t in res.tiers]
    cex = res.tiers[0].counterexample
    assert cex["reading"] == "mixture" and abs(cex["monte carlo"] - cex["exact"]) > cex["z needed"] * cex["stderr"]


def test_identical_rows_are_assumption_unmet_and_violate(run):
    prior = Point(np.array([[0.2, 0.3, 0.5]] * 3))
    res = run(W_T3, prior=prior)
    assert res.verdict is Verdict.ASSUMPTION_UNMET
    exact = next(t for t in res.tiers if t.tier == "exact")
    assert exact.verdict is Verdict.ASSUMPTION_UNMET and "violated" in exact.conclusion_without_assumptions
    prop = next(t for t in res.tiers if t.tier == "property")
    assert prop.verdict is Verdict.ASSUMPTION_UNMET  # nothing searched met the assumptions: not a PASS


def test_autograd_matches_enumeration_and_can_fail():
    """The Monte Carlo tier's estimator: per-sample autograd gradients of W's torch model at
    W_KQ = 0 average to the exact expectation; the same check rejects a wrong reference."""
    rng = np.random.default_rng(0)
    pi = np.array([[0.6, 0.3, 0.1], [0.2, 0.5, 0.3], [0.1, 0.2, 0.7]])
    parents = np.array([-1, 0, 1, 1, 2])
    from theory import stationary

    tokens = sample_w_prompts(rng, pi, np.broadcast_to(parents, (20000, 5)), 1, roots=stationary(pi))
    g = _autograd_gradients(pi, 1, tokens, "mixture")
    z = _bonferroni_z(3.0, 4)
    for h in (3, 4):
        exact = wei_gradient_at_zero(pi, parents, h)
        mean, se = g[:, h, :h].mean(0), g[:, h, :h].std(0, ddof=1) / np.sqrt(len(g))
        assert np.all(np.abs(mean - exact) <= z * se + 1e-12)
        wrong = wei_gradient_at_zero(pi, [-1, 0, 1, 0, 1], h)  # the reference of another tree
        assert np.any(np.abs(mean - wrong) > z * se)


def test_chi2_identity_at_parent():
    pi = np.array([[0.7, 0.2, 0.1], [0.1, 0.8, 0.1], [0.3, 0.3, 0.4]])
    tree = CausalTree([-1, 0, 0, 2])
    g = wei_chi2_signal(pi, tree, 3)
    ic = mutual_information(pairwise_joint(pi, tree, 3, 2), "chi2")
    assert abs(g[2] - ic) < 1e-12


def test_uniform_root_breaks_the_ordering(run):
    """The stationary root is a needed assumption: on a full-support pi (min 1e-4) with a uniform
    root the mixture gradient peaks away from the parent; the engine reports ASSUMPTION_UNMET
    with the conclusion violated, and the same pi with its stationary root passes."""
    w = UNIFORM_ROOT_WITNESS
    pi, tree = np.array(w["pi"]), CausalTree(w["parents"])
    g = wei_gradient_at_zero(pi, tree, w["h"], root=np.full(3, 1 / 3))
    assert np.argmax(g) != tree.parent(w["h"])
    assert np.argmax(wei_gradient_at_zero(pi, tree, w["h"])) == tree.parent(w["h"])
    over = dict(tiers=("exact",), n_matrices=1, trees_per_matrix=4, H=6)
    bad = run(W_T3, prior=Point(pi), roots=("uniform",), **over).tiers[0]
    assert bad.verdict is Verdict.ASSUMPTION_UNMET and "violated" in bad.conclusion_without_assumptions
    assert run(W_T3, prior=Point(pi), roots=("stationary",), **over).verdict is Verdict.PASS


def test_reducible_prior_falls_back_to_the_uniform_root_and_the_property_tier_names_the_assumptions(run):
    """Two closed classes (no unique stationary law): the exact tier uses the uniform root (named
    in its records) with the stationary-root assumption failing, instead of dropping the draw;
    the property tier searches the prior's draws through base.property_tier and says which
    assumptions failed on them and whether a counterexample exists there."""
    prior = Point(np.array([[1.0, 0.0, 0.0], [0.0, 0.5, 0.5], [0.0, 0.5, 0.5]]))
    res = run(W_T3, prior=prior, tiers=("exact", "property"))
    assert res.verdict is Verdict.ASSUMPTION_UNMET, [(t.tier, t.verdict, t.summary, t.error) for t in res.tiers]
    exact, prop = res.tiers
    failed = {a.name for a in exact.assumptions if a.holds is False}
    assert "stationary root (every marginal = mu_pi)" in failed and "min pi > 0" in failed
    assert exact.conclusion_without_assumptions
    failed = {a.name: a.detail for a in prop.assumptions if a.holds is False}
    assert "stationary root (every marginal = mu_pi)" in failed and "draws" in failed["min pi > 0"]
    assert prop.conclusion_without_assumptions
    if prop.counterexample:  # a counterexample on a draw that breaks an assumption, with its root law
        assert prop.counterexample["root_law"] == "uniform (stationary law not unique)"


# ------------------------------------------------------------------- negative controls (issue 20) --
def test_montecarlo_controls_all_fail_and_are_reported(run):
    """Targets from a wrong graph and the gradient of the negated loss go through the tier's own deciding
    check (decide_gradient: argmax at the parent, agreement with the exact G) and FAIL it."""
    mc = run(W_T3, tiers=("montecarlo",)).tiers[0]
    assert mc.verdict is Verdict.PASS, mc.summary
    names = [c.name.split(" (")[0] for c in mc.controls]
    assert names == ["targets from a wrong graph", "gradient of the negated loss"]
    for c in mc.controls:
        assert c.verdict is Verdict.FAIL, (c.name, c.deciding)
        assert c.deciding.startswith("smallest MC margin") and c.numbers[0].value < 0


def test_decide_gradient_catches_a_gradient_that_follows_another_graph():
    """A wrong mechanism, not a threshold: autograd gradients of data drawn from another tree point at that
    tree's parents; judged against the claimed tree, the margin at the parent is significantly negative."""
    from theory import stationary

    from sim.claims.wei.dynamics import _wrong_graph, decide_gradient

    pi = np.array([[0.6, 0.3, 0.1], [0.2, 0.5, 0.3], [0.1, 0.2, 0.7]])
    parents = np.array([-1, 0, 1, 1, 2])
    exact = {h: wei_gradient_at_zero(pi, parents, h) for h in range(2, 5)}
    claimed = {h: int(parents[h]) for h in range(2, 5)}
    rng = np.random.default_rng(0)
    for tree, outcome in ((parents, Outcome.HELD), (_wrong_graph(parents), Outcome.VIOLATED)):
        tokens = sample_w_prompts(rng, pi, np.broadcast_to(tree, (8000, 5)), 1, roots=stationary(pi))
        dec = decide_gradient(_autograd_gradients(pi, 1, tokens, "mixture"), exact, claimed, 3.0, 0)
        assert dec["outcome"] is outcome and dec["outcome_argmax"] is outcome, dec["line"]
