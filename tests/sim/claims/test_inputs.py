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
