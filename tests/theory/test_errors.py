"""theory.errors.as_real_array: every numeric input of the exact core is read by it, and complex
input is refused with the input's name, never cast (numpy's cast drops the imaginary part with only
a ComplexWarning)."""
import warnings

import numpy as np
import pytest

from theory import TheoryError, chernoff_exponent, f_divergence, validate_stochastic
from theory.continuous import gaussian_bma_logits
from theory.errors import as_real_array
from theory.gradients import nichani_gradient_signal, wei_gradient_at_zero

HALF = np.full((2, 2), 0.5)


@pytest.mark.parametrize("call, name", [
    (lambda: validate_stochastic(HALF + 0j), "pi"),
    (lambda: f_divergence(np.array([0.5, 0.5]) + 0j, [0.5, 0.5]), "p"),
    (lambda: chernoff_exponent(np.array([1.0, -1.0]) + 1j, [0.5, 0.5]), "values"),
    (lambda: chernoff_exponent([1.0, -1.0], np.array([0.5, 0.5]) + 0j), "probs"),
    (lambda: nichani_gradient_signal((HALF + 0j)[None], [-1, 0]), "pis"),
    (lambda: wei_gradient_at_zero(HALF, [-1, 0], 1, scores=np.array([1 + 1j])), "scores"),
    (lambda: gaussian_bma_logits(np.zeros((2, 3, 2)) + 1j, np.eye(2), 0.5, 1), "context"),
])
def test_complex_input_is_refused_by_name_without_a_warning(call, name):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(TheoryError, match=rf"^{name} could not be read as an array of numbers: complex values, "
                                              "where real numbers are needed$"):
            call()


def test_real_input_of_any_numeric_type_is_read_as_float64():
    for x in ([1, 2], np.array([1, 2], dtype=np.int32), np.array([True, False]), np.float32([0.5, 1.5]), 3):
        arr = as_real_array(x, "x")
        assert arr.dtype == np.float64 and np.array_equal(arr, np.asarray(x, dtype=np.float64))
    with pytest.raises(TheoryError, match=r"^x could not be read as an array of numbers: "):
        as_real_array([[1.0, 2.0], [3.0]], "x")  # ragged
    with pytest.raises(TheoryError, match=r"^x could not be read as an array of numbers: "):
        as_real_array(["a"], "x")
