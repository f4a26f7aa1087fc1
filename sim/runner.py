"""Run claims under a profile and write results as they finish, so nothing is lost.

Layout of a run folder (default ``reports/<run-id>/``)::

    run.json            the configuration (hashed into the run id) and when it started
    results/<id>.json   one file per claim, written atomically the moment it finishes
    figures/*.png       figures, written by the claims
    results.json        the assembled results (schema in README, "results.json")
    report.md, report.html, junit.xml

``--resume`` reuses every ``results/<id>.json`` of a run with the same configuration;
each claim's randomness depends only on (seed, claim id, purpose), so a resumed run ends
with the same numbers as an uninterrupted one.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from .claims.base import PROFILES, Claim, Context, crash_result
from .verdict import ClaimResult, Verdict, combine_verdicts, headline, to_jsonable

__all__ = ["RunConfig", "RunError", "evaluate_claim", "run", "atomic_write_text", "DEFAULT_REPORTS"]

DEFAULT_REPORTS = Path("reports")


class RunError(RuntimeError):
    """A run could not start (bad configuration, a resume that does not match)."""


@dataclass(frozen=True)
class RunConfig:
    """Everything that determines a run's numbers; hashed into the run id."""

    profile: str = "quick"
    claims: str = "*"
    seed: int = 0
    device: str = "cpu"  # resolved (cpu | cuda), not "auto"
    prior: str | None = None
    z: float = 3.0
    overrides: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.profile not in PROFILES:
            raise RunError(f"unknown profile {self.profile!r}; expected one of {', '.join(PROFILES)}")
        if not isinstance(self.seed, int) or self.seed < 0:
            raise RunError(f"seed must be a non-negative integer, got {self.seed!r}")
        if self.device not in ("cpu", "cuda"):
            raise RunError(f"device must be resolved to cpu or cuda, got {self.device!r}")
        if not self.z > 0:
            raise RunError(f"z must be positive, got {self.z!r}")

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)

    def digest(self) -> str:
        from . import __version__

        blob = json.dumps({**self.as_dict(), "version": __version__}, sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:10]

    @property
    def run_id(self) -> str:
        return f"{self.profile}-seed{self.seed}-{self.digest()}"


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so a reader (or a killed run) never sees half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def evaluate_claim(claim: Claim, config: RunConfig, out_dir: Path, *, prior=None,
                   progress: Callable[[str], None] = lambda m: None) -> ClaimResult:
    """Run the tiers of ``claim`` that ``config.profile`` asks for. Never raises for a crash
    inside a check: that tier becomes ERROR with its traceback."""
    ctx = Context(claim=claim, profile=config.profile, seed=config.seed, out_dir=Path(out_dir),
                  device=config.device, prior=prior, z=config.z, progress=progress,
                  overrides=config.overrides.get(claim.id, {}))
    t0 = time.perf_counter()
    tiers = claim.tiers_for(config.profile)
    if "tiers" in ctx.overrides:  # e.g. tests running one tier
        tiers = tuple(t for t in claim.tiers if t in ctx.overrides["tiers"])
    results = []
    for tier in tiers:
        progress(f"{claim.id} [{tier}]")
        t1 = time.perf_counter()
        try:
            res = claim.checks[tier](ctx)
        except Exception as exc:  # a crash is reported, never turned into a verdict
            res = crash_result(tier, exc)
        res.elapsed_s = round(time.perf_counter() - t1, 3)
        results.append(res)
    note = ""
    if not tiers:
        note = claim.pending or f"not run in profile {config.profile!r}; decided by profile {claim.decided_by!r}"
    verdict = combine_verdicts(r.verdict for r in results)  # findings never decide
    primary = {} if claim.primary is None else {**dataclasses.asdict(claim.primary), "cite": claim.primary.cite()}
    return ClaimResult(
        id=claim.id, title=claim.title, paper=claim.source.paper, source=claim.source.cite(),
        statement=claim.statement, tiers_supported=list(claim.tiers), decided_by=claim.decided_by,
        verdict=verdict, tiers=results,
        seed=ctx.seed_for("claim"), config_hash=config.digest(),
        elapsed_s=round(time.perf_counter() - t0, 3), note=note, primary_reading=primary,
        headline=headline(verdict, (f for r in results for f in r.findings)))


def _prepare_dir(out_dir: Path, config: RunConfig, resume: bool) -> None:
    run_json = out_dir / "run.json"
    if resume:
        if not run_json.exists():
            raise RunError(f"--resume: {out_dir} holds no run to resume (no run.json)")
        old = json.loads(run_json.read_text())
        if old.get("config_hash") != config.digest():
            raise RunError(f"--resume: the run in {out_dir} was made with a different configuration "
                           f"({old.get('config')}); start a fresh run or use a different --out")
        return
    for name in ("results", "figures"):
        shutil.rmtree(out_dir / name, ignore_errors=True)
    for name in ("results.json", "report.md", "report.html", "junit.xml"):
        (out_dir / name).unlink(missing_ok=True)


def run(config: RunConfig, claims: Sequence[Claim], *, out_dir: Path | None = None, resume: bool = False,
        prior=None, show_progress: bool = True, audit=None) -> tuple[Path, list[dict[str, Any]]]:
    """Evaluate ``claims`` and write the run folder; returns ``(out_dir, claim dicts)``.

    ``audit`` (the prior audit, :mod:`sim.audit`): a JSON-able dict, or a callable that gets
    the claim dicts once every claim has finished and returns it; it is written at the top
    of the reports, in the same final write that marks the run complete.
    """
    from .report import write_reports

    if not claims:
        raise RunError("no claims selected")
    out_dir = Path(out_dir) if out_dir is not None else DEFAULT_REPORTS / config.run_id
    out_dir.mkdir(parents=True, exist_ok=True)
    _prepare_dir(out_dir, config, resume)
    started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    if not resume:
        atomic_write_text(out_dir / "run.json", json.dumps(
            {"run_id": config.run_id, "config": config.as_dict(), "config_hash": config.digest(),
             "started": started, "claims": [c.id for c in claims]}, indent=2))
    t0 = time.perf_counter()
    dicts: list[dict[str, Any]] = []
    bar = _progress_bar(len(claims), show_progress)
    try:
        for claim in claims:
            path = out_dir / "results" / f"{claim.id}.json"
            bar.set_description(claim.id)
            if resume and path.exists():
                data = json.loads(path.read_text())
                if data.get("config_hash") == config.digest():
                    dicts.append(data)
                    bar.update(1)
                    continue
            result = evaluate_claim(claim, config, out_dir, prior=prior,
                                    progress=lambda m: bar.set_postfix_str(m, refresh=True))
            data = to_jsonable(result)
            atomic_write_text(path, json.dumps(data, indent=2))
            dicts.append(data)
            bar.update(1)
    finally:
        bar.close()
    audit_doc = audit(dicts) if callable(audit) else audit
    write_reports(out_dir, config, dicts, elapsed_s=time.perf_counter() - t0, prior=prior, audit=audit_doc)
    return out_dir, dicts


def _progress_bar(total: int, enabled: bool):
    from tqdm.auto import tqdm

    return tqdm(total=total, unit="claim", disable=not enabled, dynamic_ncols=True, leave=True)


def claim_counts(dicts: Sequence[dict]) -> dict[str, int]:
    counts = {v.value: 0 for v in Verdict}
    for d in dicts:
        counts[d["verdict"]] += 1
    return counts
