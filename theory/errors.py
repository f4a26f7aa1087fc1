"""The one exception type of the exact core, and the reader of numeric inputs that raises it."""
import numpy as np


class TheoryError(ValueError):
    """Invalid input to a ``theory`` function.

    Raised at the boundary (never a NaN three calls later); the message names the
    offending row, node, shape or token so the input can be fixed by hand.
    """


def as_real_array(x, name: str) -> np.ndarray:
    """``x`` as a float64 array, or a :class:`TheoryError` naming ``name``.

    Complex input is refused, not cast: numpy's cast drops the imaginary part with only a
    ``ComplexWarning``, which would turn a wrong input into a silently wrong answer."""
    try:
        if np.iscomplexobj(x):
            raise TypeError("complex values, where real numbers are needed")
        return np.array(x, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TheoryError(f"{name} could not be read as an array of numbers: {exc}") from None
