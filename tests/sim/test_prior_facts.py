"""sim.priors.facts: N Knowl 10's assumption 3 (relabelling symmetry, uniform mean) decided in one
place, from the closed form, the atoms or seeded draws; the prior audit and N.K3 read the same
facts, so they cannot disagree."""
import numpy as np
import pytest

from sim.claims import get
from sim.claims.base import Context
from sim.papers.nichani.claims.gradient import prior_facts
from sim.priors import Finite, Prior, UserSampler, parse_prior
from sim.priors.facts import draws_of, symmetry, uniform_mean


def _facts(spec: str, d: int, n: int = 4000, seed: int = 0):
    prior = parse_prior(spec).bind(d)
    draws = draws_of(prior, n, seed)
    return symmetry(prior, draws, 3.0), uniform_mean(prior, draws, 3.0)


@pytest.mark.parametrize("spec, d, sym, mean", [
    ("dirichlet(alpha=0.5)", 3, ("holds", "guaranteed"), ("holds", "guaranteed")),
    ("sticky(dirichlet(alpha=1), stay=0.8)", 3, ("holds", "guaranteed"), ("fails", "analytic")),
    ("banded(dirichlet(alpha=1), width=1)", 4, ("fails", "estimated"), ("fails", "estimated")),
    ("symmetrize(point([[0.9, 0.1], [0.2, 0.8]]))", 2, ("holds", "exact"), ("fails", "exact")),
    ("point([[0.9, 0.1], [0.2, 0.8]])", 2, ("fails", "exact"), ("fails", "exact")),
    ("mixture(point([[0.5, 0.5], [0.5, 0.5]]), point([[0.9, 0.1], [0.1, 0.9]]), point([[0.1, 0.9], [0.9, 0.1]]))",
     2, ("holds", "exact"), ("holds", "exact")),
])
def test_each_fact_is_decided_by_the_strongest_means_available(spec, d, sym, mean):
    s, m = _facts(spec, d)
    assert (s.status, s.how) == sym, s.summary
    assert (m.status, m.how) == mean, m.summary


class _Sampler(Prior):
    """A prior without closed forms (as a user's sampler is): only draws decide its facts."""

    def __init__(self, fn, d):
        self.fn, self.d = fn, d

    def _sample(self, rng, n):
        return self.fn(rng, n)

    def spec(self):
        return "test-sampler"

    def bind(self, d):
        return self


def _relabelled(rng, mats):
    out = np.empty_like(mats)
    for k in range(len(mats)):
        p = rng.permutation(mats.shape[1])
        out[k] = mats[k][np.ix_(p, p)]
    return out


def test_the_trace_test_catches_a_symmetric_prior_whose_mean_is_not_uniform():
    """Relabelled sticky chains with a small stay: each diagonal entry of E[pi] is off 1/S by a
    little, the trace (which adds the S diagonal deviations) by S times as much, with an error only
    about sqrt(S) times larger: at this seed only the trace test sees it."""
    d, stay = 5, 0.01

    def draw(rng, n):
        return _relabelled(rng, stay * np.eye(d) + (1 - stay) * rng.dirichlet(np.ones(d), size=(n, d)))

    prior = _Sampler(draw, d)
    draws = draws_of(prior, 4000, 1)
    X = draws.mats
    entry_z = np.abs(X.mean(0) - 1 / d) / (X.std(0, ddof=1) / np.sqrt(len(X)))
    assert entry_z.max() < 3.88  # below the Bonferroni threshold of d^2 + 1 tests at z = 3: entries alone pass
    fact = uniform_mean(prior, draws, 3.0)
    assert fact.status == "fails" and "trace" in fact.summary, fact.summary
    fair = _Sampler(lambda rng, n: _relabelled(rng, rng.dirichlet(np.ones(d), size=(n, d))), d)
    assert uniform_mean(fair, draws_of(fair, 4000, 1), 3.0).status == "holds"


def test_second_moments_catch_what_first_moments_miss():
    """Diagonal entries with one mean but different spreads: a relabelling changes the law."""
    def draw(rng, n):
        a = np.where(rng.random(n) < 0.5, 0.0, 0.9)  # entry [0, 0]: 0 or 0.9 (mean 0.45)
        out = np.empty((n, 2, 2))
        out[:, 0, 0], out[:, 0, 1] = a, 1 - a
        out[:, 1, 1], out[:, 1, 0] = 0.45, 0.55  # entry [1, 1]: always 0.45
        return out

    prior = _Sampler(draw, 2)
    fact = symmetry(prior, draws_of(prior, 2000, 0), 3.0)
    assert fact.status == "fails" and fact.how == "estimated", fact.summary


def test_finite_prior_is_a_prior_whose_spec_parses_back_to_the_same_law():
    mats = np.array([[[0.9, 0.1], [0.2, 0.8]], [[0.5, 0.5], [0.3, 0.7]]])
    fp = Finite(mats, [0.25, 0.75])
    back = parse_prior(fp.spec())
    w, atoms = back.atoms()
    assert np.allclose(w, [0.25, 0.75]) and np.array_equal(atoms, mats)
    draws = fp.sample(np.random.default_rng(0), 4000)
    assert abs((draws[:, 0, 0] == 0.9).mean() - 0.25) < 0.03
    with pytest.raises(Exception, match="atom 1"):
        Finite(np.array([[[1.0, 0.0], [0.0, 1.0]], [[0.5, 0.6], [0.5, 0.5]]]))


@pytest.mark.parametrize("spec, S", [("banded(dirichlet(alpha=1), width=1)", 3),
                                      ("sticky(dirichlet(alpha=1), stay=0.8)", 3),
                                      ("symmetrize(point([[0.9, 0.1], [0.2, 0.8]]))", 2)])
def test_n_k3_and_the_audit_read_the_same_facts(spec, S, tmp_path):
    from sim.audit import audit_prior

    prior = parse_prior(spec)
    ctx = Context(get("N.K3"), "quick", 0, tmp_path, prior=prior)
    nk3 = prior_facts(ctx, S)
    audit = audit_prior(prior if prior.d is not None else prior.bind(S), dims=[S], n_draws=4000, seed=0)
    status = {True: "holds", False: "fails", None: "undecided"}
    assert status[nk3.symmetric] == audit.get("N.K10.3a").status
    assert status[nk3.mean_uniform] == audit.get("N.K10.3b").status


def test_a_user_sampler_is_decided_from_draws(tmp_path):
    path = tmp_path / "s.py"
    path.write_text("import numpy as np\n\ndef draw(rng, n):\n    return rng.dirichlet(np.ones(3), size=(n, 3))\n")
    prior = UserSampler(f"{path}:draw")
    s, m = symmetry(prior, draws_of(prior, 3000, 0), 3.0), uniform_mean(prior, draws_of(prior, 3000, 0), 3.0)
    assert (s.status, s.how) == ("holds", "estimated") and (m.status, m.how) == ("holds", "estimated")
    assert "not a proof" in s.summary and "seed" not in s.summary  # the numbers carry n and seed
    assert all(num.seed == 0 and num.n for num in s.numbers)


def test_a_mixture_is_symmetric_by_construction_only_when_every_component_is():
    """Half dirichlet(1) (symmetric), half banded (entries [0, 2] and [0, 3] are 0, [0, 1] is not): the mixture is
    not relabelling-invariant, so its closed form must not say so and the draws must show it."""
    from sim.priors import Banded, Dirichlet, Mixture

    prior = Mixture([(0.5, Dirichlet(1.0, 4)), (0.5, Banded(Dirichlet(1.0, 4), 1))])
    assert prior.symmetric() is not True
    fact = symmetry(prior, draws_of(prior, 2000, 0), 3.0)
    assert (fact.status, fact.how) == ("fails", "estimated"), fact.summary


def test_an_estimated_mean_is_tested_with_the_standard_error_of_the_mean():
    """Both rows (p, 1 - p) with p ~ Beta(4, 6), independently: E[pi] = [[0.4, 0.6], [0.4, 0.6]] has trace 1, so
    only the entry tests can see it is not uniform. An entry's spread is sqrt(0.4 * 0.6 / 11) = 0.148; over 400
    draws its standard error is 0.0074 and the deviation 0.1 is some 13 of them (against about one standard
    deviation: no evidence at all)."""

    class BetaRows(Prior):
        d = 2

        def _sample(self, rng, n):
            p = rng.beta(4.0, 6.0, size=(n, 2))
            return np.stack([p, 1.0 - p], axis=-1)

        def spec(self):
            return "beta-rows"

        def bind(self, d):
            return self

    prior = BetaRows()
    fact = uniform_mean(prior, draws_of(prior, 400, 0), 3.0)
    assert (fact.status, fact.how) == ("fails", "estimated"), fact.summary
    assert "E[pi][" in fact.summary  # decided by an entry, not by the trace
