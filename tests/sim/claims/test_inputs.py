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
