"""The cost plan (``icl-verify plan``): what a run will train, what that costs on this device, and how
long it takes on N local workers or W cluster workers, before anything is trained.

- **Jobs.** Each claim lists its trained tiers' jobs without training them (``Claim.jobs``: per tier a
  function of the context returning :class:`sim.claims.jobs.PlannedJob`, built by the same code the
  check builds its jobs with). A tier decided sequentially is listed at its first look and at its
  cap (the seeds it trains at most). A job that a claim ``reuses`` from another is counted once.
  A trained tier that declares no jobs is listed as "no estimate".
- **Calibration.** The cost of one unit of a model family (a training step, an evaluation) at a
  shape is measured by the family's own timing run (:class:`sim.claims.jobs.Cost` names it) at two
  counts: ``seconds = fixed + count x per_unit``. On the CPU it is process CPU time at one thread (what
  a worker spends, and robust to other processes on the machine); on a GPU, synchronised wall time.
  The measurements are cached per machine and device in ``$XDG_CACHE_HOME/icl-causal-verify/``
  (default ``~/.cache/icl-causal-verify/``), so only a shape seen for the first time costs seconds.
  A shape with many batched models or long blocks (a field the family declares its cost affine in,
  ``Cost.linear``, above its cap in :data:`LINEAR_CAPS`) is timed at two smaller values of that field
  and priced along the line through them. Each timing function is warmed up once per calibration
  (imports, kernels), not once per shape.
- **Estimate.** A job costs ``sum over its parts (fixed + count x per_unit)``; a claim the sum of its
  jobs (CPU- or GPU-seconds). Wall time on ``n`` workers is the longest-processing-time-first schedule
  of the jobs (each worker takes the next job as it frees up): at least the total over ``n`` and at
  least the longest job. What a claim computes outside its training jobs (exact, property and Monte
  Carlo tiers, the readouts after training) is not estimated; jobs that may stop early are priced
  at their full steps (an upper bound).
- **ETA.** :class:`Eta` turns a plan into the run's estimate of the time left, corrected by the ratio
  of the measured to the estimated time of the jobs that have finished, and counting down while the
  jobs in flight run.
"""
from __future__ import annotations

import dataclasses
import heapq
import itertools
import json
import math
import os
import platform
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from sim.claims.base import Claim, Context
from sim.claims.jobs import Cost, PlannedJob

__all__ = ["TierPlan", "Plan", "Calibration", "Eta", "plan_claims", "make_plan", "cache_dir", "schedule_wall",
           "format_seconds", "COUNTS", "LINEAR_CAPS", "selftest_timer"]

#: The two counts each unit is timed at (after one warm-up run per timer): ``per_unit`` is the slope between them.
COUNTS = {"step": (2, 10), "eval": (1, 3), "block": (1, 3)}
#: The largest value a shape field that a family declares its cost affine in (``Cost.linear``) is timed at:
#: a unit above it is timed at half the cap and at the cap (every such field at both, the corners of a box)
#: and priced by the multilinear function through those timings. A block of 96 batched task heads, or of
#: 500 steps and the evaluation after them, would otherwise be timed as declared, five blocks of it, for
#: minutes.
LINEAR_CAPS = {"models": 16, "eval_every": 20}
#: Bumped when the meaning of a cached measurement changes.
CACHE_FORMAT = 1


@dataclass
class TierPlan:
    """One claim's tier: its jobs at the first look and at the cap (the same list when it is not
    sequential), the look sizes, and ``reused``: job ids another claim of the run trains."""

    claim: str
    tier: str
    first: list[PlannedJob] = field(default_factory=list)
    cap: list[PlannedJob] = field(default_factory=list)
    looks: list[int] = field(default_factory=list)
    note: str = ""
    reused: set = field(default_factory=set)

    @property
    def estimated(self) -> bool:
        """Whether every job of the tier has a declared cost (and the listing did not fail)."""
        return not self.note and all(j.cost is not None for j in self.cap)


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/icl-causal-verify`` (default ``~/.cache/icl-causal-verify``)."""
    base = os.environ.get("XDG_CACHE_HOME", "").strip()
    return (Path(base) if base else Path.home() / ".cache") / "icl-causal-verify"


def _device_tag(device: str) -> str:
    if device == "cuda":
        import torch

        name = torch.cuda.get_device_name(0)
    else:
        name = platform.processor() or platform.machine() or "cpu"
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in f"{device}-{name}")[:80]


def _machine() -> str:
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in platform.node() or "machine")[:60]


class Calibration:
    """Measured unit costs, ``(family, unit, shape) -> (fixed seconds, seconds per unit)``, kept in
    a cache file per machine and device (module docstring)."""

    def __init__(self, device: str = "cpu", path: Path | None = None):
        import torch

        import sim

        self.device = device
        self.path = path if path is not None else cache_dir() / f"calibration-{_machine()}-{_device_tag(device)}.json"
        self.stamp = {"format": CACHE_FORMAT, "torch": torch.__version__, "package": sim.__version__,
                      "threads": 1 if device == "cpu" else None}
        self.entries: dict[str, dict] = {}
        self.measured = 0
        self._warm: set[str] = set()  # timers run once already (imports and kernels loaded)
        try:
            doc = json.loads(self.path.read_text())
            if doc.get("stamp") == self.stamp:
                self.entries = dict(doc.get("entries", {}))
        except (OSError, ValueError, AttributeError):
            pass  # no cache yet, or an unreadable one: measure again

    @staticmethod
    def key(family: str, unit: str, shape) -> str:
        """The cache's key of one unit of ``family`` at ``shape`` (``(name, value)`` pairs)."""
        return f"{family}|{unit}|{json.dumps([list(kv) for kv in shape], sort_keys=True, default=str)}"

    def missing(self, costs: Sequence[Cost]) -> list[tuple[Cost, tuple]]:
        """The ``(cost, part)`` of every unit shape in ``costs`` not measured yet (each once)."""
        out, seen = [], set()
        for cost in costs:
            for part in cost.parts:
                k = self.key(cost.family, part[0], part[1])
                if k not in self.entries and k not in seen:
                    seen.add(k)
                    out.append((cost, part))
        return out

    def measure(self, costs: Sequence[Cost], progress: Callable[[str], None] = lambda m: None) -> None:
        """Time every unit shape of ``costs`` not in the cache, writing the cache after each (an
        interrupted calibration keeps what it measured)."""
        todo = self.missing(costs)
        for k, (cost, (unit, shape, _)) in enumerate(todo):
            progress(f"calibrating {cost.family} {unit} {k + 1}/{len(todo)}: {dict(shape)}")
            self.entries[self.key(cost.family, unit, shape)] = self._time(cost.timer, unit, dict(shape), cost.linear)
            self.measured += 1
            self.save()

    def save(self) -> None:
        """Write the measurements to the cache file (one that cannot be written is measured again next time)."""
        from sim.files import atomic_write_text

        try:
            atomic_write_text(self.path, json.dumps({"stamp": self.stamp, "entries": self.entries}, indent=1))
        except OSError:
            pass  # a cache that cannot be written is measured again next time

    def _time(self, timer: str, unit: str, shape: dict, linear: Sequence[str] = ()) -> dict:
        """One unit's ``fixed`` and ``per_unit`` seconds at ``shape``: timed there, or, where a field of
        ``linear`` exceeds its cap in :data:`LINEAR_CAPS`, at the corners ``{cap / 2, cap}`` of those
        fields and extended along the multilinear function through them (``scaled``: each field's timed
        values)."""
        over = {k: LINEAR_CAPS[k] for k in linear if k in LINEAR_CAPS and isinstance(shape.get(k), int)
                and not isinstance(shape.get(k), bool) and shape[k] > LINEAR_CAPS[k]}
        when = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        if not over:
            return {**self._time_at(timer, unit, shape), "when": when}
        points = {k: (max(1, cap // 2), cap) for k, cap in over.items()}
        fixed = per = 0.0
        for corner in itertools.product((0, 1), repeat=len(over)):
            at = {k: points[k][c] for k, c in zip(over, corner)}
            weight = 1.0
            for k, c in zip(over, corner):  # the linear weights of the corner's value at the shape's value
                lo, hi = points[k]
                weight *= (shape[k] - lo) / (hi - lo) if c else (hi - shape[k]) / (hi - lo)
            e = self._time_at(timer, unit, {**shape, **at})
            fixed += weight * e["fixed"]
            per += weight * e["per_unit"]
        return {"fixed": max(0.0, fixed), "per_unit": max(0.0, per), "counts": list(COUNTS.get(unit, (1, 3))),
                "scaled": {k: list(v) for k, v in points.items()}, "when": when}

    def _time_at(self, timer: str, unit: str, shape: dict) -> dict:
        import importlib

        from sim.threads import torch_threads

        module, _, name = timer.partition(":")
        fn = getattr(importlib.import_module(module), name)
        c1, c2 = COUNTS.get(unit, (1, 3))
        with torch_threads(1 if self.device == "cpu" else None):
            if timer not in self._warm:
                fn(unit, shape, 1, self.device)  # warm-up: imports, allocations, kernels
                self._warm.add(timer)
            t1, t2 = self._clock(fn, unit, shape, c1), self._clock(fn, unit, shape, c2)
        per = max(0.0, (t2 - t1) / (c2 - c1))
        return {"fixed": max(0.0, t1 - c1 * per), "per_unit": per, "counts": [c1, c2]}

    def _clock(self, fn, unit, shape, count) -> float:
        if self.device == "cpu":
            t0 = time.process_time()
            fn(unit, shape, count, self.device)
            return time.process_time() - t0
        import torch

        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn(unit, shape, count, self.device)
        torch.cuda.synchronize()
        return time.perf_counter() - t0

    def seconds(self, cost: Cost) -> float | None:
        """The estimated seconds of a job of ``cost``; None when a part is not measured."""
        total = 0.0
        for unit, shape, count in cost.parts:
            e = self.entries.get(self.key(cost.family, unit, shape))
            if e is None:
                return None
            total += e["fixed"] + count * e["per_unit"]
        return total


def _look_context(claim: Claim, profile: str, seed: int, device: str, prior, z: float, overrides: Mapping,
                  tier: str) -> list[tuple[int | None, Context]]:
    """The contexts a tier's jobs are listed in: ``[(None, ctx)]``, or for a tier decided sequentially
    ``[(first look's seeds, ctx), (cap, ctx)]``, each as the runner makes its look's context."""
    from sim.sequential import SeedSchedule, look_overrides

    ctx = Context(claim=claim, profile=profile, seed=seed, out_dir=Path("."), device=device, prior=prior, z=z,
                  overrides=dict(overrides))
    s = ctx.settings
    key = s.get("seeds_key", "seeds")
    if tier != s.get("seeds_tier", "trained") or f"{key}_start" not in s:
        return [(None, ctx)]
    schedule = SeedSchedule.from_settings(s, key)
    z_look = schedule.z_look(z)
    sizes = schedule.sizes()
    return [(n, dataclasses.replace(ctx, z=z_look, overrides={**ctx.overrides, **look_overrides(s, key, n)}))
            for n in (sizes[0], sizes[-1])]


def plan_claims(claims: Sequence[Claim], profile: str, *, seed: int = 0, device: str = "cpu", prior=None,
                z: float = 3.0, overrides: Mapping[str, Mapping] | None = None) -> list[TierPlan]:
    """Every claim's trained work in ``profile``: one :class:`TierPlan` per tier that declares jobs
    (``Claim.jobs``) or trains (the ``trained`` tier), in claim order."""
    overrides = overrides or {}
    out: list[TierPlan] = []
    owner: dict[str, str] = {}  # job id -> the claim that trains it
    for claim in claims:
        for tier in claim.tiers_for(profile):
            if tier not in claim.jobs:
                if tier == "trained":
                    out.append(TierPlan(claim.id, tier, note="no estimate: this tier declares no jobs"))
                continue
            row = TierPlan(claim.id, tier)
            try:
                listed = [(n, claim.jobs[tier](ctx)) for n, ctx in
                          _look_context(claim, profile, seed, device, prior, z, overrides.get(claim.id, {}), tier)]
            except Exception as exc:  # noqa: BLE001 - a claim's listing that fails is said, not fatal
                row.note = f"no estimate: listing its jobs failed ({type(exc).__name__}: {exc})"
                out.append(row)
                continue
            row.first, row.cap = listed[0][1], listed[-1][1]
            row.looks = [n for n, _ in listed if n is not None]
            for job in row.cap:
                if job.id is not None and job.id in owner and owner[job.id] in claim.reuses:
                    row.reused.add(job.id)
                elif job.id is not None:
                    owner.setdefault(job.id, claim.id)
            out.append(row)
    return out


def schedule_wall(durations: Sequence[float], workers: int) -> float:
    """The makespan of ``durations`` on ``workers`` workers, longest first, each worker taking the next
    job as it frees up."""
    if not durations:
        return 0.0
    free = [0.0] * max(1, int(workers))
    for d in sorted(durations, reverse=True):
        heapq.heappush(free, heapq.heappop(free) + d)
    return max(free)


def format_seconds(s: float | None) -> str:
    """``"45 s"``, ``"12 min"``, ``"3.4 h"``; ``"—"`` for None."""
    if s is None or not math.isfinite(s):
        return "—"
    if s < 90:
        return f"{s:.0f} s"
    if s < 5400:
        return f"{s / 60:.0f} min"
    return f"{s / 3600:.1f} h"


@dataclass
class Plan:
    """A priced plan: the tiers, the calibration, and the wall-time model's ``workers``."""

    profile: str
    device: str
    rows: list[TierPlan]
    calibration: Calibration
    workers: int
    cluster: bool = False

    def job_seconds(self, job: PlannedJob) -> float | None:
        """A job's estimated seconds (:meth:`Calibration.seconds`); None without a cost or a measurement."""
        return None if job.cost is None else self.calibration.seconds(job.cost)

    def _seconds(self, jobs: Sequence[PlannedJob], reused: set) -> list[float]:
        return [self.job_seconds(j) or 0.0 for j in jobs if j.id not in reused]

    def claim_seconds(self, row: TierPlan, which: str = "first") -> float | None:
        """A tier's estimated seconds at its first look (``which="first"``) or at its cap."""
        if not row.estimated:
            return None
        return sum(self._seconds(row.first if which == "first" else row.cap, row.reused))

    def total_seconds(self, which: str = "first") -> float:
        """CPU- (or GPU-) seconds of every estimated tier."""
        return sum(self.claim_seconds(r, which) or 0.0 for r in self.rows)

    def wall_seconds(self, which: str = "first", workers: int | None = None) -> float:
        """Wall time of every estimated job on ``workers`` (default the plan's) (:func:`schedule_wall`)."""
        durations = [d for r in self.rows if r.estimated
                     for d in self._seconds(r.first if which == "first" else r.cap, r.reused)]
        return schedule_wall(durations, self.workers if workers is None else workers)

    @property
    def unit(self) -> str:
        """``"GPU"`` or ``"CPU"``: what the seconds are of."""
        return "GPU" if self.device == "cuda" else "CPU"

    def where(self) -> str:
        """``"2 local workers"``, ``"64 cluster workers"`` or ``"one GPU"``: what the wall time is on."""
        if self.device == "cuda":
            return "one GPU"
        return f"{self.workers} {'cluster' if self.cluster else 'local'} worker{'s' if self.workers != 1 else ''}"

    def summary(self) -> str:
        """The totals in one line (what ``run`` prints before a long run)."""
        first, cap = self.total_seconds("first"), self.total_seconds("cap")
        wall_first, wall_cap = self.wall_seconds("first"), self.wall_seconds("cap")
        span = (f"{format_seconds(first)} of {self.unit} time" if math.isclose(first, cap) else
                f"{format_seconds(first)} of {self.unit} time ({format_seconds(cap)} if every sequential decision "
                f"runs to its cap)")
        wall = (format_seconds(wall_first) if math.isclose(wall_first, wall_cap) else
                f"{format_seconds(wall_first)} to {format_seconds(wall_cap)}")
        return f"training {span}; about {wall} on {self.where()}"

    def render(self) -> str:
        """The per-claim table and the totals."""
        head = ("claim", "tier", "jobs", "models x steps (batch)", "family", f"{self.unit} first look",
                f"{self.unit} at cap")
        lines = [head]
        for r in self.rows:
            if not r.estimated and r.note:
                lines.append((r.claim, r.tier, "—", r.note, "", "—", "—"))
                continue
            jobs = (f"{len(r.first)}" if len(r.first) == len(r.cap) else f"{len(r.first)} -> {len(r.cap)}")
            if r.looks:
                jobs += f" (seeds {r.looks[0]} -> {r.looks[-1]})"
            if r.reused:
                jobs += f", {len(r.reused)} reused"
            shapes = list(dict.fromkeys(j.cost.describe() for j in r.cap if j.cost is not None))
            families = ", ".join(dict.fromkeys(j.cost.family for j in r.cap if j.cost is not None))
            shown = "; ".join(shapes[:2]) + (f"; +{len(shapes) - 2} more" if len(shapes) > 2 else "")
            lines.append((r.claim, r.tier, jobs, shown, families, format_seconds(self.claim_seconds(r, "first")),
                          format_seconds(self.claim_seconds(r, "cap"))))
        widths = [max(len(str(row[i])) for row in lines) for i in range(len(head))]
        out = ["  ".join(str(row[i]).ljust(widths[i]) for i in range(len(head))).rstrip() for row in lines]
        out.insert(1, "  ".join("-" * w for w in widths))
        out.append("")
        first, cap = self.total_seconds("first"), self.total_seconds("cap")
        out.append(f"total {self.unit} time: {_hours(first)} at the first looks, {_hours(cap)} if every sequential "
                   f"decision runs to its cap")
        out.append(f"wall time on {self.where()}: about {format_seconds(self.wall_seconds('first'))} "
                   f"(at most {format_seconds(self.wall_seconds('cap'))})")
        missing = [r.claim for r in self.rows if not r.estimated]
        if missing:
            out.append(f"no estimate for: {', '.join(dict.fromkeys(missing))}")
        out.append("not estimated: the exact, property and Monte Carlo tiers and the readouts after training; jobs "
                   "that stop early are priced at their full steps")
        return "\n".join(out)

    def to_dict(self) -> dict:
        """The plan as plain data (``plan --format json``)."""
        return {"profile": self.profile, "device": self.device, "workers": self.workers, "cluster": self.cluster,
                "claims": [{"claim": r.claim, "tier": r.tier, "note": r.note, "looks": r.looks,
                            "jobs_first_look": len(r.first), "jobs_at_cap": len(r.cap), "reused": len(r.reused),
                            "seconds_first_look": self.claim_seconds(r, "first"),
                            "seconds_at_cap": self.claim_seconds(r, "cap"),
                            "jobs": [{"id": j.id, "label": j.label, "family": j.cost.family if j.cost else None,
                                      "describe": j.cost.describe() if j.cost else None,
                                      "seconds": self.job_seconds(j)} for j in r.cap]} for r in self.rows],
                "total_seconds_first_look": self.total_seconds("first"),
                "total_seconds_at_cap": self.total_seconds("cap"),
                "wall_seconds_first_look": self.wall_seconds("first"), "wall_seconds_at_cap": self.wall_seconds("cap"),
                "calibration": str(self.calibration.path)}


def _hours(s: float) -> str:
    return f"{s / 3600:.2f} h ({format_seconds(s)})" if s >= 360 else format_seconds(s)


def make_plan(claims: Sequence[Claim], profile: str, *, seed: int = 0, device: str = "cpu", prior=None, z: float = 3.0,
              overrides: Mapping[str, Mapping] | None = None, workers: int = 1, cluster: bool = False,
              calibrate: bool = True, calibration: Calibration | None = None,
              progress: Callable[[str], None] = lambda m: None) -> Plan:
    """The priced :class:`Plan` of ``claims`` in ``profile``: the jobs (:func:`plan_claims`), the unit
    costs measured where the cache lacks them (only with ``calibrate``), on ``workers`` workers."""
    rows = plan_claims(claims, profile, seed=seed, device=device, prior=prior, z=z, overrides=overrides)
    cal = calibration or Calibration(device)
    if calibrate:
        cal.measure([j.cost for r in rows for j in r.cap if j.cost is not None], progress)
    return Plan(profile, device, rows, cal, int(workers), cluster)


class Eta:
    """The time left of a run, from its :class:`Plan`: the estimated seconds of the first-look jobs not
    yet done, scaled by the ratio measured / estimated of the jobs that finished, over the plan's
    workers. :meth:`job_done` and :meth:`claim_done` are called as the run goes (``sim.runner.run``)."""

    def __init__(self, plan: Plan, slots: int | None = None, clock: Callable[[], float] = time.monotonic):
        self.plan, self.slots = plan, max(1, int(slots or plan.workers))
        self.clock = clock
        self.since = clock()  # the last time a job or claim finished: the jobs in flight count down from it
        self.pending: dict[tuple[str, str], float] = {}
        for r in plan.rows:
            if r.estimated:
                for j in r.first:
                    if j.id is not None and j.id not in r.reused:
                        self.pending[(r.claim, j.id)] = plan.job_seconds(j) or 0.0
        self.estimated_done = 0.0
        self.measured_done = 0.0

    def job_done(self, event: Mapping[str, Any]) -> None:
        """A training job finished (``{"claim", "id", "seconds"}``), or was reused (``"reused": True``:
        it costs nothing, and says nothing of this machine's speed)."""
        est = self.pending.pop((event.get("claim"), event.get("id")), None)
        self.since = self.clock()
        if est is not None and est > 0 and not event.get("reused"):
            self.estimated_done += est
            self.measured_done += float(event.get("seconds") or 0.0)

    def claim_done(self, claim_id: str) -> None:
        """A claim finished: whatever of its plan did not run is not waited for."""
        for k in [k for k in self.pending if k[0] == claim_id]:
            del self.pending[k]
        self.since = self.clock()

    @property
    def factor(self) -> float:
        """Measured / estimated seconds of the finished jobs (1 until one has finished)."""
        return self.measured_done / self.estimated_done if self.estimated_done > 0 and self.measured_done > 0 else 1.0

    def seconds_left(self) -> float:
        """The estimated seconds of the jobs left, corrected by :attr:`factor`, over the workers, less the
        time since the last job finished (the jobs in flight have been running that long); never below 0."""
        return max(0.0, sum(self.pending.values()) * self.factor / self.slots - (self.clock() - self.since))

    def text(self) -> str:
        """``"ETA ~12 min"``; ``"ETA: past the estimate"`` once the jobs in flight have run longer than it
        said; empty when nothing estimated is left."""
        if not any(v > 0 for v in self.pending.values()):
            return ""
        left = self.seconds_left()
        return f"ETA ~{format_seconds(left)}" if left > 0 else "ETA: past the estimate"


def selftest_timer(unit: str, shape: Mapping[str, Any], count: int, device: str = "cpu") -> None:
    """A cheap timing run for testing the calibration: ``count`` units of ``shape["work"]`` sums over a
    small array, times ``shape["models"]`` (CPU time in proportion to ``count``); ``shape["fixed"]`` more
    before them."""
    import numpy as np

    a = np.arange(1000, dtype=np.float64)
    per = int(shape.get("work", 100)) * int(shape.get("models", 1))
    for _ in range(int(shape.get("fixed", 0)) + int(count) * per):
        a.sum()

