"""The prior audit: for each assumption of N Knowl 10 and W Lemma 3, a prior (or graph) that breaks
only that assumption (plus what it breaks by necessity, said per test) and what the audit and the
report say; necessity from the claims; the CLI end to end, including the errors that must stop a
run before any report is written."""
import json
from pathlib import Path

import numpy as np
import pytest

from sim.audit import (
    ASSUMPTIONS,
    PriorAudit,
    attach_results,
    audit_prior,
    claim_dims,
    parse_graph,
)
from sim.cli import main
from sim.priors import PriorError, parse_prior
from sim.report import audit_text, necessity_text, render_html, render_markdown

DATA = Path(__file__).parent / "data"
SAMPLERS = DATA / "user_priors.py"
PLUGIN = DATA / "user_prior_claims.py"
KEYS = [a.key for a in ASSUMPTIONS]

GOOD = "floor(dirichlet(alpha=1), gamma=0.3)"
ZERO_DIAG = "[[0, 0.5, 0.5], [0.5, 0.5, 0], [0.5, 0, 0.5]]"  # zeros, irreducible, aperiodic, trace 1, doubly stochastic
TRANSIENT = "[[0.2, 0.4, 0.4], [0, 0.4, 0.6], [0, 0.6, 0.4]]"  # state 0 transient: mu_0 = 0; trace 1


def _audit(spec, *, dims=(3,), graphs=("chain:20", "icf:20"), n=400, seed=0):
    return audit_prior(parse_prior(spec), dims=dims, n_draws=n, seed=seed, graphs=graphs)


def _failing(audit: PriorAudit) -> set[str]:
    return {a.key for a in audit.assumptions if a.status == "fails"}


def _md_row(audit: PriorAudit, key: str) -> str:
    doc = {"run_id": "r", "config": {"profile": "quick", "seed": 0, "device": "cpu", "claims": "*", "z": 3.0},
           "prior": audit.spec, "git_commit": None, "created": "", "elapsed_s": 0, "summary": {}, "claims": [],
           "versions": {}, "audit": audit.to_dict()}
    md = render_markdown(doc)
    return next(line for line in md.splitlines() if line.startswith(f"| {key} "))


def _assert_only(audit, expected: set[str]):
    assert _failing(audit) == expected, {a.key: (a.status, a.worst().summary) for a in audit.assumptions}
    for a in audit.assumptions:
        row = _md_row(audit, a.key)
        if a.key in expected:
            assert "**FAILS**" in row
        else:
            assert "| holds |" in row, row


# -- a prior that meets every assumption ---------------------------------------------------------
def test_floored_dirichlet_meets_every_assumption():
    a = _audit(GOOD, dims=(2, 3, 5))
    assert all(x.status == "holds" for x in a.assumptions), {x.key: x.status for x in a.assumptions}
    assert a.get("N.K10.1").how == "guaranteed" and a.get("W.L3.gamma").how == "guaranteed"
    assert a.get("N.K10.2").how == "estimated"  # E[sum ||pi(.|s) - mu||^2] from draws, with its error bar
    n2 = a.get("N.K10.2").findings[0].numbers[0]
    assert n2.kind == "montecarlo" and n2.stderr > 0 and n2.n == 400
    # N's gamma: 0.3 from the floor, the binding item everywhere (1 - r = 0.9 chain, 0.45 icf)
    assert all(abs(g["gamma"] - 0.3) < 1e-12 and "item 1" in g["limited_by"] for g in a.gamma_table)
    assert "N's gamma" in audit_text(a)


# -- N Knowl 10, one assumption at a time ---------------------------------------------------------
def test_only_the_lower_bound_n1_dirichlet():
    """Dirichlet(1): every draw is positive (W's per-draw gamma > 0 holds), but draws come arbitrarily
    close to a zero entry, so no single gamma > 0 bounds them all (N item 1, decided analytically)."""
    a = _audit("dirichlet(alpha=1)")
    _assert_only(a, {"N.K10.1"})
    f = a.get("N.K10.1").findings[0]
    assert f.how == "analytic" and "essential infimum 0" in f.summary
    assert a.get("W.L3.gamma").findings[0].how == "estimated"


def test_only_nondegeneracy_n2_point_at_uniform_rows():
    """pi = 11^T/3 mixes in one step. Non-degeneracy and W Lemma 4's I(x_h; x_pa) > 0 are the same
    condition here (every row equals mu_pi), so both fail; nothing else does."""
    a = _audit("point([[1/3, 1/3, 1/3], [1/3, 1/3, 1/3], [1/3, 1/3, 1/3]])")
    _assert_only(a, {"N.K10.2", "W.L4.info"})
    f = a.get("N.K10.2").findings[0]
    assert f.how == "exact" and f.gamma == 0.0 and "mixes in one step" in f.summary


def test_only_symmetry_n3a_exact_for_a_finite_prior():
    """Two atoms J/3 +- 0.2 X with X nonzero only in row 0: uniform mean, floor 0.133, but relabelling
    moves the special row, so the law changes."""
    a = _audit("mixture(point([[0.5333333333333333, 0.13333333333333333, 1/3], [1/3, 1/3, 1/3], [1/3, 1/3, 1/3]]), "
               "point([[0.13333333333333333, 0.5333333333333333, 1/3], [1/3, 1/3, 1/3], [1/3, 1/3, 1/3]]))")
    _assert_only(a, {"N.K10.3a"})
    assert a.get("N.K10.3a").how == "exact"
    assert "transposition" in a.get("N.K10.3a").findings[0].summary


def test_only_symmetry_n3a_estimated_for_a_users_sampler():
    """The same law from a user's sampler: no closed form, so the relabelling statistics decide it."""
    a = _audit(f"{SAMPLERS}:asymmetric_uniform_mean")
    sym, mean = a.get("N.K10.3a"), a.get("N.K10.3b")
    assert sym.status == "fails" and sym.how == "estimated"
    assert "not relabelling-invariant" in sym.findings[0].summary
    assert mean.status == "holds" and mean.how == "estimated"
    # no closed-form floor for a user's sampler: the a.s. bound is undecided, never "holds"
    assert a.get("N.K10.1").status == "undecided"
    assert {k for k in _failing(a)} == {"N.K10.3a"}


def test_symmetric_users_sampler_is_not_flagged():
    a = _audit(f"{SAMPLERS}:floored")
    assert a.get("N.K10.3a").status == "holds" and a.get("N.K10.3a").how == "estimated"
    assert a.get("N.K10.3b").status == "holds"


def test_only_uniform_mean_n3b_sticky():
    """A sticky floored chain: symmetric, floored, but E[pi] = 0.3 I + 0.7 J/3 is not uniform."""
    a = _audit("sticky(floor(dirichlet(alpha=1), gamma=0.5), stay=0.3)")
    _assert_only(a, {"N.K10.3b"})
    f = a.get("N.K10.3b").findings[0]
    assert f.how == "analytic" and "E[trace pi] = 1.6" in f.summary


def test_only_uniform_mean_n3b_symmetrized_point():
    a = _audit("symmetrize(point([[0.9, 0.1], [0.2, 0.8]]))")
    _assert_only(a, {"N.K10.3b"})
    assert a.get("N.K10.3b").how == "exact" and a.get("N.K10.3a").how == "exact"


def test_only_root_fraction_n4_graph_without_edges():
    a = _audit(GOOD, graphs=("chain:20", "roots:20"))
    _assert_only(a, {"N.K10.4"})
    chain, roots = a.get("N.K10.4").findings
    assert chain.status == "holds" and roots.status == "fails" and "every position is a root" in roots.summary
    assert any(g["gamma"] == 0 and "item 4" in g["limited_by"] for g in a.gamma_table if "roots" in g["graph"])


def test_only_effective_length_n5_star_graph():
    a = _audit(GOOD, graphs=("star:20",))
    _assert_only(a, {"N.K10.5"})
    f = a.get("N.K10.5").findings[0]
    assert "T_eff = 20/18" in f.summary and "< S = 3" in f.summary


# -- W Lemma 3 --------------------------------------------------------------------------------------
def test_only_gamma_w_l3_symmetrized_zero_diagonal_point():
    """Zero entries on every draw: W's per-draw gamma = 0, hence also no a.s. bound for N (item 1);
    still irreducible, aperiodic, uniform stationary law (delta = 1/3), symmetric, uniform mean."""
    a = _audit(f"symmetrize(point({ZERO_DIAG}))")
    _assert_only(a, {"W.L3.gamma", "N.K10.1"})
    g = a.get("W.L3.gamma").findings[0]
    assert g.how == "exact" and g.witness["pi"] and min(min(r) for r in g.witness["pi"]) == 0


def test_delta_w_l3_cannot_fail_alone():
    """delta = min mu_pi > 0 whenever gamma > 0 (mu >= min pi), so a prior breaking delta has zero
    entries and a transient state: it breaks gamma (W and N) and irreducibility with it."""
    a = _audit(f"symmetrize(point({TRANSIENT}))")
    _assert_only(a, {"W.L3.delta", "W.L3.gamma", "N.K10.1", "N.K2.irreducible"})
    assert "marginal probability 0" in a.get("W.L3.delta").findings[0].summary


def test_periodic_chain_breaks_aperiodicity():
    a = _audit("point([[0, 1], [1, 0]])", dims=(2,))
    assert {"N.K2.aperiodic", "W.L3.gamma", "N.K10.1"} <= _failing(a)
    assert a.get("N.K2.irreducible").status == "holds"


# -- graphs, sizes, rendering ------------------------------------------------------------------------
@pytest.mark.parametrize("text, r, leaves, t_eff", [
    ("chain:20", 2 / 20, 1, 20.0), ("icf:20", 11 / 20, 1, 20.0), ("star:20", 2 / 20, 18, 20 / 18),
    ("roots:6", 1.0, 1, 6.0), ("[-1, 0, 0, 1, -1]", 2 / 5, 2, 2.5),
])
def test_graphs(text, r, leaves, t_eff):
    g = parse_graph(text)
    assert g.root_fraction == pytest.approx(r) and g.max_leaves == leaves and g.T_eff == pytest.approx(t_eff)


@pytest.mark.parametrize("text, pattern", [
    ("ring:20", "unknown graph 'ring'"), ("chain:x", "T must be an integer"), ("[-1, 0, 1]", "query and must be a root"),
    ("[-1, 3, -1]", r"parents\[1\] = 3 is not a position"), ("[1,", "not a JSON list"),
])
def test_bad_graphs_are_explained(text, pattern):
    with pytest.raises(PriorError, match=pattern):
        parse_graph(text)


def test_claim_dims_reads_the_profiles_sizes():
    from sim.claims import get

    assert claim_dims([get("W.L3")], "quick") == [2, 3, 4, 5]


def test_report_escapes_everything_from_the_audit():
    a = _audit(GOOD)
    a.get("N.K10.1").findings[0].summary = "<script>alert(1)</script>"
    doc = {"run_id": "r", "config": {"profile": "quick", "seed": 0, "device": "cpu", "claims": "*", "z": 3.0},
           "prior": a.spec, "git_commit": None, "created": "", "elapsed_s": 0, "summary": {}, "claims": [],
           "versions": {}, "audit": a.to_dict()}
    html = render_html(doc, Path("."))
    md = render_markdown(doc)
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "<script>" not in md


# -- necessity from the claims' results ---------------------------------------------------------------
def _dict(cid, tier, cwa, *, conclusion="held", cex=None, names=("min pi >= gamma/d with gamma > 0",)):
    return {"id": cid, "verdict": "ASSUMPTION_UNMET", "tiers": [{
        "tier": tier, "verdict": "ASSUMPTION_UNMET", "conclusion": conclusion, "counterexample": cex,
        "conclusion_without_assumptions": cwa, "numbers": [],
        "assumptions": [{"name": n, "holds": False, "detail": ""} for n in names]}]}


def test_necessity_necessary_removable_and_not_tested():
    perm = [[0.0, 1.0], [1.0, 0.0]]
    a = _audit(f"symmetrize(point({ZERO_DIAG}))")
    attach_results(a, [_dict("W.L3", "property", "violated: the smallest counterexample found breaks min pi >= "
                                                 "gamma/d with gamma > 0 (the assumption looks necessary)",
                             conclusion="violated", cex={"pi": perm})])
    assert a.get("W.L3.gamma").necessity == "necessary"
    assert a.get("W.L3.gamma").evidence[0].counterexample == {"pi": perm}
    assert a.get("N.K10.1").necessity == "not tested" and "N.K3" in a.get("N.K10.1").necessity_detail
    b = _audit(f"symmetrize(point({ZERO_DIAG}))")
    attach_results(b, [_dict("W.L3", "property", "no counterexample within the budget of 50 examples (the "
                                                 "assumption did not look necessary for this prior)")])
    assert b.get("W.L3.gamma").necessity == "removable" and "50 examples" in b.get("W.L3.gamma").necessity_detail
    assert "REMOVABLE" in necessity_text(b)


def test_necessity_attributes_a_counterexample_to_what_its_pi_breaks():
    """A counterexample whose pi breaks gamma and I(x_h; x_pa) at once is only joint evidence."""
    a = _audit("sparse(dirichlet(alpha=0.5), threshold=0.1)", dims=(2,), n=200)
    names = ("min pi >= gamma/d with gamma > 0", "every marginal >= delta > 0", "I(x_h; x_pa(h)) > 0")
    both = [[1.0, 0.0], [1.0, 0.0]]  # zeros; rows equal: I = 0; state 1 transient: delta = 0
    attach_results(a, [_dict("W.L4", "exact", "violated on 3 of 9 instances that break an assumption", names=names,
                             conclusion="violated", cex={"pi": both})])
    assert a.get("W.L3.gamma").necessity == "necessary jointly"
    assert "also breaks" in a.get("W.L3.gamma").necessity_detail


def test_counterexample_on_valid_inputs_is_not_evidence_of_necessity():
    a = _audit(f"symmetrize(point({ZERO_DIAG}))")
    attach_results(a, [_dict("W.L3", "property", None, conclusion="violated", cex={"pi": [[0.5, 0.5], [0.5, 0.5]]})])
    assert a.get("W.L3.gamma").necessity == "undecided"
    assert "meet every assumption" in a.get("W.L3.gamma").necessity_detail


# -- the CLI end to end -----------------------------------------------------------------------------
def _run(tmp_path, *argv):
    out = tmp_path / "run"
    code = main(["prior", *argv, "--out", str(out), "--no-progress", "--draws", "200"])
    return code, out


def test_user_claim_runs_under_a_prior_and_appears_in_the_report(tmp_path, capsys):
    code, out = _run(tmp_path, GOOD, "--plugin", str(PLUGIN), "--claims", "USER.*", "--d", "3")
    assert code == 0
    doc = json.loads((out / "results.json").read_text())
    assert doc["complete"] is True and doc["prior"] == "floor(dirichlet(alpha=1, d=3), gamma=0.3)"
    assert [c["id"] for c in doc["claims"]] == ["USER.DOBRUSHIN"] and doc["claims"][0]["verdict"] == "PASS"
    assert doc["audit"]["dims"] == [3] and all(a["status"] == "holds" for a in doc["audit"]["assumptions"])
    md = (out / "report.md").read_text()
    assert md.index("## Assumptions under the prior") < md.index("## USER.DOBRUSHIN")
    printed = capsys.readouterr().out
    assert "N.K10.1 entrywise lower bound gamma > 0" in printed and "Every assumption holds" in printed
    assert main(["show", str(out)]) == 0
    assert "Assumptions under prior floor(dirichlet(alpha=1, d=3), gamma=0.3)" in capsys.readouterr().out


def test_broken_assumption_found_necessary_through_a_users_claim(tmp_path):
    """Permutation matrices (Birkhoff with k = 1) have gamma = 0 and Dobrushin = 1: the user's claim finds
    the counterexample, and the report says the lower bound looks necessary for it."""
    code, out = _run(tmp_path, "doubly_stochastic(k=1)", "--plugin", str(PLUGIN), "--claims", "USER.*",
                     "--budget", "30")
    assert code == 0
    doc = json.loads((out / "results.json").read_text())
    au = {a["key"]: a for a in doc["audit"]["assumptions"]}
    assert au["W.L3.gamma"]["status"] == "fails" and au["W.L3.gamma"]["necessity"] == "necessary"
    assert au["N.K10.1"]["necessity"] == "necessary"
    assert au["N.K2.irreducible"]["status"] == "fails" and au["N.K2.irreducible"]["necessity"] == "not tested"
    assert doc["config"]["overrides"] == {"USER.DOBRUSHIN": {"max_examples": 30}}
    md = (out / "report.md").read_text()
    assert "looks **necessary**" in md and "Broken assumptions: necessary or removable?" in md


def test_broken_assumption_removable_within_budget(tmp_path):
    """Zero entries but rows overlapping: Dobrushin < 1 still holds, so gamma looks removable for this claim."""
    code, out = _run(tmp_path, f"symmetrize(point({ZERO_DIAG}))", "--plugin", str(PLUGIN), "--claims", "USER.*",
                     "--budget", "20")
    assert code == 0
    au = {a["key"]: a for a in json.loads((out / "results.json").read_text())["audit"]["assumptions"]}
    assert au["W.L3.gamma"]["necessity"] == "removable"
    assert "no counterexample within the budget" in au["W.L3.gamma"]["necessity_detail"]


def test_builtin_claim_under_a_sparse_prior_names_broken_assumptions(tmp_path):
    code, out = _run(tmp_path, "sparse(dirichlet(alpha=0.5), threshold=0.1)", "--claims", "W.L3", "--budget", "40")
    doc = json.loads((out / "results.json").read_text())
    au = {a["key"]: a for a in doc["audit"]["assumptions"]}
    broken = {k for k, a in au.items() if a["status"] == "fails"}
    assert {"W.L3.gamma", "W.L3.delta", "N.K10.1", "N.K2.irreducible"} <= broken
    assert au["W.L3.gamma"]["necessity"] in ("necessary", "necessary jointly", "removable")
    assert doc["claims"][0]["verdict"] == "ASSUMPTION_UNMET" and code == 0


@pytest.mark.parametrize("spec, pattern", [
    ("floor(dirichlet(alpha=1), gamma=0.3", "malformed prior spec"),
    ("dirichelt(alpha=1)", "did you mean 'dirichlet'"),
    (f"{SAMPLERS}:raises", "raised RuntimeError: my sampler is broken"),
    (f"{SAMPLERS}:not_stochastic", "row 1 sums to 1.2"),
    (f"{SAMPLERS}:breaks_later", r"the prior failed while it was being audited: draw 7 of sampler"),
    ("point([[0.5, 0.5], [0.5, 0.5]])", r"point prior is fixed at d = 2, cannot use it with d = 3"),
])
def test_bad_prior_fails_before_any_report_is_written(tmp_path, capsys, spec, pattern):
    import re

    extra = ("--d", "3") if spec.startswith("point") else ()
    code, out = _run(tmp_path, spec, "--claims", "W.L3", *extra)
    assert code == 2
    err = capsys.readouterr().err
    assert re.search(pattern, err), err
    assert "Traceback" not in err
    assert not (out / "results.json").exists() and not (out / "report.md").exists()


def test_prior_only_runs_prior_dependent_claims(tmp_path, capsys):
    code, _ = _run(tmp_path, GOOD, "--claims", "W.P1")
    assert code == 2
    assert "depends on the prior" in capsys.readouterr().err


def test_nondegeneracy_by_hand_for_a_point():
    """pi = [[0.9, 0.1], [0.2, 0.8]]: mu = (2/3, 1/3), rows - mu = +-(0.2333, -0.2333) and
    (-0.4667, 0.4667): sum = 2 (7/30)^2 + 2 (14/30)^2 = 0.54444..., gamma_2 = sqrt(2 * 0.5444)."""
    a = _audit("point([[0.9, 0.1], [0.2, 0.8]])", dims=(2,))
    f = a.get("N.K10.2").findings[0]
    expected = 2 * (7 / 30) ** 2 + 2 * (14 / 30) ** 2
    assert f.numbers[0].value == pytest.approx(expected, rel=1e-12)
    assert f.gamma == pytest.approx(np.sqrt(2 * expected), rel=1e-12)
    assert f.numbers[0].value != pytest.approx(expected * 1.01, rel=1e-6)  # a perturbed value is told apart


def test_estimated_numbers_reproduce_from_their_seed_with_theory():
    """The audit's Monte Carlo numbers carry their seed: redrawing with it and recomputing with
    theory.stationary gives the same E[sum ||pi(.|s) - mu||^2] and the same fraction of zero entries."""
    from theory import stationary

    a = _audit("sparse(dirichlet(alpha=0.5), threshold=0.2)", dims=(3,), n=300)
    num = a.get("N.K10.2").findings[0].numbers[0]
    x = parse_prior("sparse(dirichlet(alpha=0.5), threshold=0.2)").bind(3).sample(np.random.default_rng(num.seed), 300)
    vals = []
    for pi in x:
        try:
            mu = stationary(pi)
        except Exception:
            continue  # several closed classes: left out, as the audit says
        vals.append(((pi - mu) ** 2).sum())
    assert num.value == pytest.approx(np.mean(vals), rel=1e-10) and num.n == len(vals)
    zero = next(n for n in a.get("N.K10.1").findings[0].numbers if n.name.startswith("fraction of draws with a zero"))
    assert zero.value == pytest.approx(np.mean(x.min(axis=(1, 2)) == 0))


def test_a_masked_fail_is_flagged():
    """A tier whose counterexample meets every assumption it checks, but whose verdict is ASSUMPTION_UNMET
    because other draws broke one, is named in the audit's notes (it is a FAIL in substance)."""
    a = _audit(f"symmetrize(point({ZERO_DIAG}))")
    attach_results(a, [_dict("W.L3", "exact", "violated on 1 of 4 instances that break an assumption",
                             conclusion="violated", cex={"pi": [[0.6, 0.4], [0.3, 0.7]], "gamma": 0.6, "delta": 0.4})])
    assert any("W.L3 exact: its counterexample meets every assumption" in n for n in a.notes)
    assert a.get("W.L3.gamma").necessity == "undecided"


def test_nondegeneracy_from_one_positive_draw_is_within_its_error_bar():
    """One positive sum b among n draws: mean b/n, and the sample variance (ddof 1) is b^2/n, so the standard
    error is b/n too: the mean is one standard error from 0, undecided at z = 3, not holds."""
    from sim.audit.checks import _DAudit
    from sim.priors import Prior

    class OneSticky(Prior):
        """Draw 0 is sticky, its rows 0.4 from mu = (1/2, 1/2) in each entry: sum 2 * 2 * 0.4^2 = 0.64; every
        other draw has both rows equal to mu (sum 0)."""

        d = 2

        def _sample(self, rng, n):
            out = np.full((n, 2, 2), 0.5)
            out[0] = [[0.9, 0.1], [0.1, 0.9]]
            return out

        def spec(self):
            return "one-sticky"

        def bind(self, d):
            return self

    f = _DAudit(OneSticky(), 2, 50, 0, 3.0).nondegeneracy(None)
    assert f.status == "undecided", f.summary
    assert f.numbers[0].value == pytest.approx(0.64 / 50) and f.numbers[0].stderr == pytest.approx(0.64 / 50)


def test_effective_length_equal_to_the_number_of_states_meets_item_5():
    """N Knowl 10 item 5 asks T_eff >= S. [-1, 0, 1, -1]: roots 0 and 3, one leaf under each, T_eff = 4 / 1 = 4:
    it holds at S = 4 (the boundary) and fails at S = 5."""
    g = parse_graph("[-1, 0, 1, -1]")
    assert g.T_eff == 4
    audit = audit_prior(parse_prior("dirichlet(alpha=1)"), dims=[4, 5], n_draws=20, seed=0, graphs=[g])
    by_d = {f.where: f.status for f in audit.get("N.K10.5").findings}
    assert by_d == {f"{g.name}, d=4": "holds", f"{g.name}, d=5": "fails"}


def test_an_assumption_holds_only_if_it_holds_at_every_size():
    """One size that holds does not settle another that is undecided: the assumption stays undecided (and one
    that fails anywhere fails)."""
    from sim.audit.records import AssumptionAudit, Finding

    def audit(*statuses):
        a = AssumptionAudit("N.K10.1", "lower bound", "N", "every entry >= gamma/S", ("N.K3",))
        a.findings = [Finding(f"d={k + 2}", s, "estimated", s) for k, s in enumerate(statuses)]
        return a.status

    assert audit("holds", "holds") == "holds"
    assert audit("holds", "undecided") == audit("undecided", "holds") == "undecided"
    assert audit("holds", "undecided", "fails") == "fails"
    assert audit() == "undecided"
