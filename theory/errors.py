"""The one exception type of the exact core."""


class TheoryError(ValueError):
    """Invalid input to a ``theory`` function.

    Raised at the boundary (never a NaN three calls later); the message names the
    offending row, node, shape or token so the input can be fixed by hand.
    """
