"""Every module, class or function a claim's statement or primary reading names exists.

The statements are shown verbatim on the catalogue pages and in every report; after code moves
(one home per paper) some still named ``sim.models.wei_construction``, which no longer existed."""
import importlib
import re

import pytest

from sim.claims import all_claims

DOTTED = re.compile(r"\b((?:sim|theory)(?:\.[A-Za-z_]\w*)+)")


def resolves(name: str) -> bool:
    """Whether ``name`` is a module, or an attribute path under the longest importable module prefix."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        try:
            for p in parts[i:]:
                obj = getattr(obj, p)
        except AttributeError:
            return False
        return True
    return False


def test_the_resolver_tells_a_moved_name_from_a_real_one():
    assert resolves("sim.papers.wei.model.wei_construction") and resolves("theory.markov")
    assert not resolves("sim.models.wei_construction") and not resolves("sim.nowhere.thing")


@pytest.mark.parametrize("claim", all_claims(), ids=lambda c: c.id)
def test_every_name_a_claim_text_gives_exists(claim):
    texts = {"statement": claim.statement, "primary reading": str(claim.primary or "")}
    missing = [(where, name) for where, text in texts.items() for name in sorted(set(DOTTED.findall(text)))
               if not resolves(name.rstrip("."))]
    assert not missing, f"{claim.id} names code that does not exist: {missing}"
