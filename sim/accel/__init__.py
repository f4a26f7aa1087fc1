"""Accelerated kernels for the Markov-chain LM's training and evaluation, apart from the plain models.

:mod:`sim.accel.fused_layers` (the attention sublayer, the token-only first layer and the loss
head as single autograd nodes with hand-written backward passes), :mod:`sim.accel.relative_attention`
(the relative-position attention core) and :mod:`sim.accel.native` (C cores built at first use
from ``csrc/``). They know no model: :mod:`sim.papers.markov.fast` is the one place that runs a
model through them, and each is tested against the plain model's values and gradients.
:func:`enabled` is the one switch: ``ICL_VERIFY_ACCEL=0`` runs every model on its plain path
(``ICL_VERIFY_NATIVE=0`` turns off the C cores alone).
"""
from __future__ import annotations

import os

__all__ = ["enabled"]

_OFF = ("0", "false", "no", "off")


def enabled() -> bool:
    """Whether the accelerated paths run: yes unless ``ICL_VERIFY_ACCEL`` is 0 (false, no, off).
    Read when a model is built or a kernel is chosen, so sweep workers inherit it."""
    return os.environ.get("ICL_VERIFY_ACCEL", "1").strip().lower() not in _OFF
