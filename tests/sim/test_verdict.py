import math

import numpy as np
import pytest

from sim.verdict import (Assumption, Number, Outcome, Verdict, combine_verdicts, compare, tier_verdict,
                         to_jsonable)



def test_compare_margin_is_strict_and_two_sided():
    assert compare(0.31, 0.0, stderr=0.1, z=3) is Outcome.HELD
    assert compare(0.29, 0.0, stderr=0.1, z=3) is Outcome.UNDECIDED
    assert compare(-0.29, 0.0, stderr=0.1, z=3) is Outcome.UNDECIDED
    assert compare(-0.31, 0.0, stderr=0.1, z=3) is Outcome.VIOLATED
    assert compare(0.31, 0.0, stderr=0.1, z=3, direction="<=") is Outcome.VIOLATED
    # exact numbers: a round-off tolerance, nothing else
    assert compare(1e-13, 0.0, tol=1e-12) is Outcome.UNDECIDED
    assert compare(2e-12, 0.0, tol=1e-12) is Outcome.HELD


def test_compare_rejects_nan():
    with pytest.raises(ValueError, match="NaN"):
        compare(float("nan"), 0.0)


def test_tier_verdict_semantics():
    ok = Assumption("a", True)
    bad = Assumption("b", False)
    unknown = Assumption("c", None)
    assert tier_verdict([ok], Outcome.HELD) is Verdict.PASS
    assert tier_verdict([ok], Outcome.VIOLATED) is Verdict.FAIL
    assert tier_verdict([ok], Outcome.UNDECIDED) is Verdict.INCONCLUSIVE
    # a failed assumption wins over whatever the conclusion did
    assert tier_verdict([ok, bad], Outcome.HELD) is Verdict.ASSUMPTION_UNMET
    assert tier_verdict([ok, bad], Outcome.VIOLATED) is Verdict.ASSUMPTION_UNMET
    assert tier_verdict([unknown], Outcome.HELD) is Verdict.INCONCLUSIVE


def test_combine_verdicts_most_severe_wins():
    V = Verdict
    assert combine_verdicts([V.PASS, V.PASS]) is V.PASS
    assert combine_verdicts([V.PASS, V.INCONCLUSIVE]) is V.INCONCLUSIVE
    assert combine_verdicts([V.INCONCLUSIVE, V.ASSUMPTION_UNMET]) is V.ASSUMPTION_UNMET
    assert combine_verdicts([V.ASSUMPTION_UNMET, V.FAIL, V.PASS]) is V.FAIL
    assert combine_verdicts([V.FAIL, V.ERROR]) is V.ERROR
    assert combine_verdicts([]) is V.NOT_RUN


def test_number_requires_honest_error():
    with pytest.raises(ValueError):
        Number("x", 1.0, stderr=-1.0)
    with pytest.raises(ValueError):
        Number("x", 1.0, kind="guess")
    n = Number("p", 0.25, stderr=0.01, n=400, seed=7, tolerance=0.05, kind="montecarlo")
    text = n.format()
    assert "±" in text and "n=400" in text and "seed=7" in text


def test_to_jsonable_handles_numpy_inf_and_enums():
    out = to_jsonable({"a": np.float64(math.inf), "b": np.arange(3), "v": Verdict.PASS, "t": (1, 2)})
    assert out == {"a": "inf", "b": [0, 1, 2], "v": "PASS", "t": [1, 2]}
