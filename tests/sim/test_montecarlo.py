import math

import numpy as np
import pytest

from sim.montecarlo import Estimate, difference, mean_estimate, proportion_estimate, weighted_mean_estimate


def test_mean_estimate_standard_error():
    x = np.array([1.0, 2.0, 3.0, 4.0])
    e = mean_estimate(x, seed=3)
    assert e.value == 2.5 and e.n == 4 and e.seed == 3
    assert math.isclose(e.stderr, x.std(ddof=1) / 2)


def test_mean_estimate_covers_truth_at_nominal_rate():
    rng = np.random.default_rng(0)
    hits = sum(abs(mean_estimate(rng.exponential(size=200)).value - 1.0) < 2 * mean_estimate(
        rng.exponential(size=200)).stderr for _ in range(400))
    assert hits > 330  # about 95 % coverage; a wrong standard error (e.g. /n) would give far fewer


def test_mean_estimate_rejects_bad_input():
    with pytest.raises(ValueError, match="at least 2"):
        mean_estimate([1.0])
    with pytest.raises(ValueError, match="non-finite"):
        mean_estimate([1.0, float("nan")])


def test_proportion_never_claims_zero_error():
    e = proportion_estimate(0, 1000)
    assert e.value == 0 and e.stderr > 0
    e = proportion_estimate(1000, 1000)
    assert e.value == 1 and e.stderr > 0


def test_weighted_mean_and_difference():
    e = weighted_mean_estimate([1.0, 2.0, 3.0], [2.0, 1.0, 0.0])
    assert math.isclose(e.value, (2 + 2 + 0) / 3)
    d = difference(Estimate(1.0, 0.3, 10), Estimate(0.5, 0.4, 10))
    assert math.isclose(d.value, 0.5) and math.isclose(d.stderr, 0.5)
    paired = difference(None, None, paired_samples=[0.1, 0.3, 0.2])
    assert math.isclose(paired.value, 0.2)


def test_estimate_to_number_keeps_everything():
    n = Estimate(0.25, 0.01, 400, seed=9).number("p", tolerance=0.05, note="x")
    assert (n.value, n.stderr, n.n, n.seed, n.tolerance, n.kind) == (0.25, 0.01, 400, 9, 0.05, "montecarlo")


def test_proportion_stderr_is_agresti_coull_and_a_difference_counts_its_smaller_sample():
    """0 of 4: p~ = (0 + 2)/(4 + 4) = 1/4, s.e. = sqrt(p~ (1 - p~) / (n + 4)) = sqrt(3/16 / 8) (not / n); the
    difference of two independent estimates carries sqrt(se_a^2 + se_b^2) and the smaller n."""
    assert proportion_estimate(0, 4).stderr == pytest.approx(math.sqrt(3 / 16 / 8), rel=1e-15)
    assert proportion_estimate(7, 10).stderr == pytest.approx(math.sqrt(9 / 14 * 5 / 14 / 14), rel=1e-15)
    d = difference(Estimate(1.0, 0.3, 10), Estimate(0.5, 0.4, 1000))
    assert (d.value, d.stderr, d.n) == (0.5, pytest.approx(0.5, rel=1e-15), 10)


def test_interval_is_value_plus_minus_z_standard_errors():
    """Known values: 1 ± 3 x 0.25 at the default z = 3, 1 ± 2 x 0.25 at z = 2 (s.e. not 1, so z/s.e. shows)."""
    e = Estimate(1.0, 0.25, 10)
    assert e.interval() == (0.25, 1.75)
    assert e.interval(2.0) == (0.5, 1.5)


def test_every_estimate_records_the_seed_of_its_stream():
    """Every MC number carries its seed: a difference (paired or independent) and an importance-sampling mean
    keep the seed they are given, not None."""
    a, b = Estimate(1.0, 0.3, 10, seed=1), Estimate(0.5, 0.4, 10, seed=2)
    assert difference(a, b, seed=11).seed == 11
    assert difference(a, b, paired_samples=[0.1, 0.3, 0.2], seed=12).seed == 12
    assert weighted_mean_estimate([1.0, 2.0, 3.0], [2.0, 1.0, 0.0], seed=13).seed == 13
    assert proportion_estimate(3, 10, seed=14).seed == 14


def test_a_proportion_takes_one_trial_and_refuses_none_by_name():
    """n = 1 is a valid sample (Agresti-Coull keeps its error bar finite); n = 0 is refused with a ValueError
    that says why, not a ZeroDivisionError."""
    assert proportion_estimate(1, 1).value == 1.0 and proportion_estimate(1, 1).stderr == pytest.approx(
        math.sqrt(0.6 * 0.4 / 5), rel=1e-15)
    with pytest.raises(ValueError, match=r"^n must be positive$"):
        proportion_estimate(0, 0)
