"""Monte Carlo estimators that always return a value with its standard error and n.

An :class:`Estimate` is what the verdict engine consumes (as a :class:`sim.verdict.Number`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from sim.verdict import Number

__all__ = ["Estimate", "mean_estimate", "proportion_estimate", "weighted_mean_estimate", "difference"]


@dataclass(frozen=True)
class Estimate:
    """A Monte Carlo estimate: ``value`` with its standard error ``stderr`` from ``n`` samples,
    and the seed of the stream that drew them (``None`` when not recorded)."""

    value: float
    stderr: float
    n: int
    seed: int | None = None

    def number(self, name: str, *, tolerance: float | None = None, note: str = "", kind: str = "montecarlo") -> Number:
        """The estimate as a reported :class:`~sim.verdict.Number` named ``name``."""
        return Number(name=name, value=float(self.value), stderr=float(self.stderr), n=int(self.n), seed=self.seed,
                      tolerance=tolerance, kind=kind, note=note)

    def interval(self, z: float = 3.0) -> tuple[float, float]:
        """``(value - z stderr, value + z stderr)``."""
        return self.value - z * self.stderr, self.value + z * self.stderr


def mean_estimate(samples, seed: int | None = None) -> Estimate:
    """Sample mean with the usual standard error ``s / sqrt(n)`` (``n >= 2``)."""
    x = np.asarray(samples, dtype=np.float64).reshape(-1)
    if x.size < 2:
        raise ValueError(f"a mean estimate needs at least 2 samples, got {x.size}")
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{int((~np.isfinite(x)).sum())} non-finite samples in a mean estimate")
    return Estimate(float(x.mean()), float(x.std(ddof=1) / math.sqrt(x.size)), int(x.size), seed)


def proportion_estimate(successes: int, n: int, seed: int | None = None) -> Estimate:
    """A proportion with the Wilson-adjusted standard error (never exactly 0 for 0 or n successes)."""
    if n <= 0:
        raise ValueError("n must be positive")
    p = successes / n
    p_adj = (successes + 2) / (n + 4)  # Agresti-Coull: keeps the error bar honest at p = 0 or 1
    return Estimate(p, math.sqrt(p_adj * (1 - p_adj) / (n + 4)), n, seed)


def weighted_mean_estimate(values, weights, seed: int | None = None) -> Estimate:
    """Importance-sampling mean ``(1/n) sum w_i f_i`` with its standard error (unnormalised weights)."""
    y = np.asarray(values, dtype=np.float64) * np.asarray(weights, dtype=np.float64)
    return mean_estimate(y, seed)


def difference(a: Estimate, b: Estimate, *, paired_samples=None, seed: int | None = None) -> Estimate:
    """``a - b``; from paired samples (the better error bar) when given, else independent errors."""
    if paired_samples is not None:
        return mean_estimate(paired_samples, seed)
    return Estimate(a.value - b.value, math.hypot(a.stderr, b.stderr), min(a.n, b.n), seed)
