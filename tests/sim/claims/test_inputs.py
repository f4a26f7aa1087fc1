"""sim.claims.inputs: the root law that stands in when the stationary law is not unique (N Knowl 2
on batches of draws is tested in tests/theory/test_chain_structure.py)."""
import numpy as np

from sim.claims.inputs import UNIFORM_FALLBACK, default_root_name, root_laws


def test_uniform_root_stands_in_when_the_stationary_law_is_not_unique():
    ident = np.eye(2)
    (name, root), = root_laws(ident, ("stationary",))
    assert name == UNIFORM_FALLBACK == default_root_name(ident) and np.allclose(root, 0.5)
    assert [n for n, _ in root_laws(ident, ("stationary", "uniform"))] == ["uniform"]  # not twice
    assert root_laws(np.array([[0.5, 0.5], [0.2, 0.8]]), ("stationary",))[0] == ("stationary", None)


def test_a_prior_with_its_own_dimension_overrides_the_claims_dims():
    """A user's prior fixed at d = 3 decides the dimension: n_matrices matrices of size 3, once, whatever the
    claim's own dims (2 and 5 here) would have drawn."""
    import zlib
    from types import SimpleNamespace

    from sim.claims.inputs import w_instances
    from sim.priors import Dirichlet

    ctx = SimpleNamespace(prior=Dirichlet(1.0).bind(3),
                          rng=lambda stream: np.random.default_rng(zlib.crc32(stream.encode())))
    insts = list(w_instances(ctx, n_matrices=2, dims=(2, 5), H=4, roots=("uniform",)))
    assert len(insts) == 2 and all(inst.pi.shape == (3, 3) for inst in insts)


def _ctx(prior):
    import zlib
    from types import SimpleNamespace

    return SimpleNamespace(prior=prior, rng=lambda stream: np.random.default_rng(zlib.crc32(stream.encode())))


def test_draws_come_from_the_users_prior_and_an_unsized_one_is_bound_to_the_claims_d():
    """icl-verify prior SPEC replaces the claim's default prior: a point mass gives back its own matrix every
    draw, and an unsized Dirichlet is bound to the d the claim asks for (still the user's alpha)."""
    from sim.claims.inputs import draw_matrices, prior_for
    from sim.priors import Dirichlet, Point

    pi = np.array([[0.9, 0.1], [0.3, 0.7]])
    pis = draw_matrices(_ctx(Point(pi)), 3, 2)
    assert pis.shape == (3, 2, 2) and np.array_equal(pis, np.broadcast_to(pi, (3, 2, 2)))
    bound = prior_for(_ctx(Dirichlet(0.3)), 4)
    assert isinstance(bound, Dirichlet) and bound.d == 4 and bound.alpha == 0.3
    assert prior_for(_ctx(None), 4).d == 4  # no user's prior: the default, bound to d


def test_default_root_is_the_stationary_law_only_when_it_is_unique():
    """Two closed classes (the identity): no unique stationary law, so the uniform law stands in, as its name
    says; one closed class (even with a transient state): the stationary law (None)."""
    from sim.claims.inputs import default_root

    assert np.array_equal(default_root(np.eye(2)), [0.5, 0.5])
    assert np.array_equal(default_root(np.eye(3)), np.full(3, 1 / 3))
    assert default_root(np.array([[1.0, 0.0], [0.5, 0.5]])) is None  # state 1 transient: mu = (1, 0) unique
    assert default_root(np.array([[0.5, 0.5], [0.2, 0.8]])) is None
