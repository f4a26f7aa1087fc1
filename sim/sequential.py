"""Sequential decisions over training seeds: start with a few, add seeds while undecided.

A trained claim's deciding number is a mean across training seeds, with the seeds' standard
error on ``n - 1`` degrees of freedom. Few seeds make a wide Student-t margin
(:func:`sim.verdict.margin_multiplier`); more seeds narrow it. A :class:`SeedSchedule` says
how many seeds the first look uses, how many each later look adds, and the cap.

Error control across looks: **Bonferroni over the planned looks**. With ``K`` planned looks,
every look decides at the one-sided level ``Phi(-z) / K``, i.e. at

    z_K = Phi^{-1}(1 - Phi(-z) / K),

so the chance that any look makes a wrong decision is at most ``Phi(-z)`` (the union bound),
whatever the stopping rule. It is conservative next to an alpha-spending boundary, and it
needs no assumption on how the looks are correlated.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from sim.verdict import Number, Outcome

__all__ = ["SeedSchedule", "Look", "SequentialRun", "decide_sequentially", "bonferroni_z", "doubling_grid",
           "CORRECTION", "look_overrides"]

#: How the error rate is controlled across looks, as the report says it.
CORRECTION = "Bonferroni over the planned looks"


def bonferroni_z(z: float, looks: int) -> float:
    """The ``z`` each of ``looks`` planned looks decides at: ``Phi^{-1}(1 - Phi(-z) / looks)`` (``z`` for one look)."""
    from scipy import stats

    return float(z) if looks <= 1 else float(stats.norm.isf(stats.norm.sf(z) / looks))


def doubling_grid(Ls, cap: int, setting: str = "the cap") -> list[int]:
    """The grid a limit-in-L reading may look at: ``Ls`` (sorted), then the largest doubled while it
    stays at most ``cap`` (and ``cap`` itself last when the doubling skips it). Each L past ``Ls``
    is one more look, so a decision over this grid takes :func:`bonferroni_z` over
    ``len(grid) - len(Ls) + 1`` looks. ``setting`` names the cap in the error for a cap below ``Ls``."""
    grid = sorted(int(L) for L in Ls)
    if cap < grid[-1]:
        raise ValueError(f"{setting} = {cap} is below the largest L of the grid ({grid[-1]})")
    while 2 * grid[-1] <= cap:
        grid.append(2 * grid[-1])
    if grid[-1] < cap:
        grid.append(int(cap))
    return grid


@dataclass(frozen=True)
class SeedSchedule:
    """``start`` seeds at the first look, ``step`` more at each later look, at most ``cap``."""

    start: int
    step: int
    cap: int

    def __post_init__(self):
        if not 1 <= self.start <= self.cap:
            raise ValueError(f"seed schedule needs 1 <= start <= cap, got start={self.start}, cap={self.cap}")
        if self.step < 1:
            raise ValueError(f"seed schedule needs step >= 1, got {self.step}")

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any], key: str = "seeds") -> "SeedSchedule":
        """From a profile's settings: ``key`` is the cap, ``key_start`` the first look (default:
        the cap, one look), ``key_step`` what each later look adds (default: the rest at once)."""
        try:
            cap = int(settings[key])
            start = int(settings.get(f"{key}_start", cap))
            step = int(settings.get(f"{key}_step", max(1, cap - start)))
        except (TypeError, ValueError) as e:
            raise ValueError(f"settings {key!r}, {key}_start, {key}_step must be integers: {e}") from None
        return cls(min(start, cap), step, cap)

    def sizes(self) -> list[int]:
        """The number of seeds at each planned look."""
        out, n = [self.start], self.start
        while n < self.cap:
            n = min(self.cap, n + self.step)
            out.append(n)
        return out

    @property
    def looks(self) -> int:
        return len(self.sizes())

    def z_look(self, z: float) -> float:
        """The ``z`` every look decides at: ``Phi^{-1}(1 - Phi(-z) / K)`` for ``K`` planned looks."""
        return bonferroni_z(z, self.looks)

    def describe(self, z: float) -> str:
        """The schedule in one line: the seeds at each look and the ``z`` each look decides at."""
        sizes = self.sizes()
        if len(sizes) == 1:
            return f"{self.cap} seeds, one look at z = {z:g}"
        return (f"looks at {', '.join(map(str, sizes))} seeds; {CORRECTION} ({len(sizes)} looks): each at "
                f"z = {self.z_look(z):.3g} for an overall one-sided level of Phi(-{z:g})")


@dataclass(frozen=True)
class Look:
    """One look: how many seeds it used, what it decided, and the deciding line."""

    seeds: int
    outcome: Outcome
    line: str = ""


@dataclass
class SequentialRun:
    """The history of a sequential decision (reported next to the verdict)."""

    schedule: SeedSchedule
    z: float
    looks: list[Look] = field(default_factory=list)

    @property
    def seeds_used(self) -> int:
        return self.looks[-1].seeds if self.looks else 0

    @property
    def outcome(self) -> Outcome:
        return self.looks[-1].outcome if self.looks else Outcome.UNDECIDED

    def stop_reason(self) -> str:
        """Why the decision stopped: decided at a look, or still undecided at the cap."""
        if not self.looks:
            return "no look was made"
        last = self.looks[-1]
        k = len(self.looks)
        if last.outcome is not Outcome.UNDECIDED:
            return (f"stopped at look {k} of {self.schedule.looks} with {last.seeds} seeds: decided "
                    f"({last.outcome.value})")
        return f"stopped at the cap of {self.schedule.cap} seeds (look {k} of {self.schedule.looks}): still undecided"

    def line(self) -> str:
        """The stop reason, the schedule and every look's outcome, in one line."""
        hist = "; ".join(f"{lk.seeds} seeds: {lk.outcome.value}" for lk in self.looks)
        return f"{self.stop_reason()}. {self.schedule.describe(self.z)}. Looks: {hist}"

    def number(self, name: str = "training seeds the decision used") -> Number:
        """The seeds used as a ``trained`` :class:`~sim.verdict.Number`, with :meth:`line` as its note."""
        return Number(name, self.seeds_used, kind="trained", n=self.seeds_used, note=self.line())

    def record(self) -> dict:
        """The decision's history as plain data: seeds used, stop reason, correction, planned looks, z, looks."""
        return {"seeds used": self.seeds_used, "stop": self.stop_reason(), "correction": CORRECTION,
                "planned looks": self.schedule.sizes(), "z per look": self.schedule.z_look(self.z),
                "looks": [{"seeds": lk.seeds, "outcome": lk.outcome.value, "line": lk.line} for lk in self.looks]}


def look_overrides(settings: Mapping[str, Any], key: str, n: int) -> dict[str, int]:
    """The settings a look at ``n`` seeds runs with: ``key`` (the seeds setting) at ``n``, and each key
    named in ``seeds_also`` that is set (and not 0) following it up to its own cap ``<key>_cap``."""
    also = tuple(settings.get("seeds_also", ()))
    following = {k: min(n, int(settings.get(f"{k}_cap", n))) for k in also if settings.get(k)}
    return {key: n, **following}


def decide_sequentially(schedule: SeedSchedule, z: float,
                        decide: Callable[[int, float], tuple[Outcome, Any, str]]) -> tuple[Any, SequentialRun]:
    """Run ``decide(n_seeds, z_look)`` at each planned look until it is not UNDECIDED.

    ``decide`` trains what it lacks (seeds ``0 .. n_seeds - 1``; earlier seeds are reused,
    so seed ``k`` is the same model at every look) and returns ``(outcome, payload, line)``.
    Returns the last look's payload and the run's history. ``z_look`` already carries the
    correction for the planned looks (:meth:`SeedSchedule.z_look`).
    """
    run = SequentialRun(schedule, float(z))
    z_look = schedule.z_look(z)
    if not math.isfinite(z_look):
        raise ValueError(f"z={z} gives no finite per-look z over {schedule.looks} looks")
    payload = None
    for n in schedule.sizes():
        outcome, payload, line = decide(n, z_look)
        run.looks.append(Look(n, outcome, line))
        if outcome is not Outcome.UNDECIDED:
            break
    return payload, run
