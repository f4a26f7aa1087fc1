"""Run claims under a profile and write results as they finish, so nothing is lost.

Layout of a run folder (default ``reports/<run-id>/``)::

    run.json            the configuration (hashed into the run id) and when it started
    results/<id>.json   one file per claim, written atomically the moment it finishes
    figures/*.png       figures, written by the claims
    results.json        the assembled results (schema: docs/results.md)
    report.md, report.html, junit.xml

``--resume`` reuses every ``results/<id>.json`` of a run with the same configuration;
each claim's randomness depends only on (seed, claim id, purpose), so a resumed run ends
with the same numbers as an uninterrupted one.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import shutil
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from sim.claims.base import PROFILES, Claim, Context, crash_result
from sim.seeds import derive_seed
from sim.claims.jobs import job_counts
from sim.files import (MAX_JSON_DEPTH, RUN_SCHEMA, RunError, atomic_write_text, dump_json, environment_failure,
                       json_depth, read_claim_result, read_run_json)
from sim.verdict import ClaimResult, Outcome, Verdict, combine_verdicts, headline, to_jsonable

__all__ = ["RunConfig", "RunError", "evaluate_claim", "run", "graph_claims", "check_out_dir", "atomic_write_text",
           "dump_json", "DEFAULT_REPORTS", "RUN_SCHEMA"]

DEFAULT_REPORTS = Path("reports")
_LOCK = ".icl-verify.lock"


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
    #: Plugin files and the sha256 of their content: an edited plugin is a new configuration.
    plugins: dict = field(default_factory=dict)
    #: The user's causal graph (``run --graph``) as :func:`sim.graphs.graph_record` (name, nodes,
    #: edges), in place of the graphs of the claims that take one; None: every claim's own graphs.
    graph: dict | None = None

    def __post_init__(self):
        if self.profile not in PROFILES:
            raise RunError(f"unknown profile {self.profile!r}; expected one of {', '.join(PROFILES)}")
        if not isinstance(self.seed, int) or self.seed < 0:
            raise RunError(f"seed must be a non-negative integer, got {self.seed!r}")
        if self.device not in ("cpu", "cuda"):
            raise RunError(f"device must be resolved to cpu or cuda, got {self.device!r}")
        if not (isinstance(self.z, (int, float)) and math.isfinite(self.z) and self.z > 0):
            raise RunError(f"z must be a positive finite number, got {self.z!r}")
        if self.graph is not None:
            from sim.graphs import GraphSpecError, graph_from_record

            try:
                graph_from_record(self.graph)
            except GraphSpecError as exc:
                raise RunError(f"graph: {exc}") from None

    def as_dict(self) -> dict:
        """Every field as plain data (run.json's ``config``)."""
        return dataclasses.asdict(self)

    def digest(self) -> str:
        """The first 10 hex digits of the sha256 of the fields and the package version: the run's ``config_hash``."""
        from sim import __version__

        fields = self.as_dict()
        if fields["graph"] is None:
            del fields["graph"]  # a run without --graph keeps the id it had before the option existed
        blob = json.dumps({**fields, "version": __version__}, sort_keys=True, default=str, allow_nan=False)
        return hashlib.sha256(blob.encode()).hexdigest()[:10]

    @property
    def run_id(self) -> str:
        return f"{self.profile}-seed{self.seed}-{self.digest()}"


def evaluate_claim(claim: Claim, config: RunConfig, out_dir: Path, *, prior=None,
                   progress: Callable[[str], None] = lambda m: None, corpus=None, execution=None,
                   on_job: Callable[[dict], None] | None = None) -> ClaimResult:
    """Run the tiers of ``claim`` that ``config.profile`` asks for. Never raises for a crash
    inside a check: that tier becomes ERROR with its traceback; a failure of the run's environment
    (a full disk, an unwritable folder, a lost Dask scheduler) is raised as a
    :class:`~sim.files.RunEnvironmentError`. ``corpus`` (a :class:`sim.corpus.Corpus`, or None):
    the property tier replays it first; FAILs are stored in it. ``execution`` (a
    :class:`sim.claims.jobs.Execution`, None: this machine): where the training jobs run;
    ``on_job`` is told as each one finishes.

    With ``config.graph``, a claim that takes a graph (``claim.graph_input``) runs on it: its
    settings name the user's graph in place of its own
    (:meth:`GraphInput.overrides <sim.claims.base.GraphInput.overrides>`), and the result records
    the graph and draws it."""
    overrides = dict(config.overrides.get(claim.id, {}))
    given = _given_graph(claim, config)
    if given is not None:
        overrides.update(claim.graph_input.overrides(given, {**claim.settings.get(config.profile, {}), **overrides}))
    ctx = Context(claim=claim, profile=config.profile, seed=config.seed, out_dir=Path(out_dir),
                  device=config.device, prior=prior, z=config.z, progress=progress, overrides=overrides,
                  corpus=corpus, execution=execution, on_job=on_job)
    t0 = time.perf_counter()
    tiers = claim.tiers_for(config.profile)
    if "tiers" in ctx.overrides:  # e.g. tests running one tier
        tiers = tuple(t for t in claim.tiers if t in ctx.overrides["tiers"])
    results = []
    for tier in tiers:
        progress(f"{claim.id} [{tier}]")
        t1 = time.perf_counter()
        try:
            res = _run_tier(ctx, claim, tier)
        except KeyboardInterrupt:  # a real Ctrl-C ends the run, leaving it resumable
            raise
        except BaseException as exc:  # a crash (or an exit) is that claim's ERROR, never the run's end
            failure = environment_failure(exc)
            if failure is not None:  # but a full disk or a lost scheduler is the run's: --resume continues it
                raise failure from None
            res = crash_result(tier, exc)
        _draw_counterexamples(ctx, res)
        if corpus is not None:
            corpus.after_tier(ctx, res)
        res.elapsed_s = round(time.perf_counter() - t1, 3)
        results.append(res)
    note = ""
    if not tiers:
        note = claim.pending or f"not run in profile {config.profile!r}; decided by profile {claim.decided_by!r}"
    verdict = combine_verdicts(r.verdict for r in results)  # findings never decide
    primary = {} if claim.primary is None else {**dataclasses.asdict(claim.primary), "cite": claim.primary.cite()}
    graph = _graph_used(ctx, config, given) if given is not None and tiers else None
    return ClaimResult(
        id=claim.id, title=claim.title, paper=claim.source.paper, source=claim.source.cite(),
        statement=claim.statement, tiers_supported=list(claim.tiers), decided_by=claim.decided_by,
        verdict=verdict, tiers=results,
        seed=ctx.seed_for("claim"), config_hash=config.digest(),
        elapsed_s=round(time.perf_counter() - t0, 3), note=note, primary_reading=primary,
        headline=headline(verdict, (f for r in results for f in r.findings)), graph=graph,
        jobs=job_counts(ctx.job_log))


def _given_graph(claim: Claim, config: RunConfig):
    """The run's graph as the claim's settings take it (a GivenGraph), or None."""
    if config.graph is None or claim.graph_input is None:
        return None
    from theory.graphs import GivenGraph

    from sim.graphs import graph_from_record

    return GivenGraph.from_graph(config.graph["name"], graph_from_record(config.graph))


def _graph_used(ctx: Context, config: RunConfig, given) -> dict:
    """What a claim's result says of the user's graph it ran on: the graph (name, nodes, edges),
    the settings it replaced (with their values for the run), what it replaces and why its size is
    bounded or fixed (:class:`~sim.claims.base.GraphInput`), and its drawing."""
    gi = ctx.claim.graph_input
    keys = dict.fromkeys(k for pair in gi.settings.items() for k in pair)  # graph names, then their lengths
    used = {k: ctx.settings[k] for k in keys if k in ctx.settings}
    out = {**config.graph, "settings": used, "replaces": gi.replaces, "size_note": gi.size_note, "figure": None}
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        from sim.graphs import draw_graph, graph_from_record

        g = graph_from_record(config.graph)
        fig, ax = plt.subplots(figsize=(max(4.0, 0.35 * g.number_of_nodes() + 2), 3.2))
        draw_graph(ax, g, title=f"{ctx.claim.id} ran on the user's graph {given} ({g.number_of_nodes()} nodes)")
        out["figure"] = ctx.save_figure(fig, "user-graph")
    except Exception as exc:  # a drawing never takes the verdict down
        out["figure_error"] = f"{type(exc).__name__}: {exc}"
    return out


#: A look's verdict as the sequential decision reads it: only INCONCLUSIVE asks for more seeds.
_LOOK_OUTCOME = {Verdict.PASS: Outcome.HELD, Verdict.FAIL: Outcome.VIOLATED, Verdict.ASSUMPTION_UNMET: Outcome.HELD,
                 Verdict.INCONCLUSIVE: Outcome.UNDECIDED}


def _run_tier(ctx: Context, claim: Claim, tier: str):
    """One tier's check. A tier whose settings give a seed schedule (``seeds_start`` below the
    cap ``seeds``, ``seeds_step``; ``seeds_key`` renames ``seeds``, ``seeds_tier`` names the
    tier, ``trained`` by default) is decided sequentially (:mod:`sim.sequential`): it runs at
    the first look's number of seeds and at each later look's while its verdict (controls
    included) is INCONCLUSIVE, every look at the per-look ``z`` of the Bonferroni correction.
    Keys named in ``seeds_also`` follow ``seeds`` (where they are set and not 0: 0 switches that part
    off), up to their own cap ``<key>_cap`` where the settings give one: a part whose criterion is
    decided with a wide margin on a few seeds need not grow with the one that needs many. Seeds
    already trained are reused (``ctx.memo``)."""
    from sim.sequential import Look, SeedSchedule, SequentialRun, decide_sequentially, look_overrides

    s = ctx.settings
    key = s.get("seeds_key", "seeds")
    if tier != s.get("seeds_tier", "trained"):
        return _checked(claim.checks[tier](ctx), claim, tier)
    if f"{key}_start" not in s:
        res = _checked(claim.checks[tier](ctx), claim, tier)
        n = _fixed_seed_count(s.get(key))
        if n and res.sequential is None and res.verdict is not Verdict.ERROR:
            # a fixed number of seeds is one planned look: the report says so like a sequential decision
            run = SequentialRun(SeedSchedule(n, 1, n), ctx.z,
                                [Look(n, _LOOK_OUTCOME.get(res.verdict, Outcome.HELD),
                                      f"{res.verdict.value}: {res.summary[:300]}")])
            res.sequential = run.record()
            res.numbers.append(run.number())
        return res
    schedule = SeedSchedule.from_settings(s, key)

    def look(n: int, z_look: float):
        ctx.progress(f"{claim.id} [{tier}] {n} seeds")
        # dataclasses.replace keeps the same memo_store: the looks share their trained seeds
        look_ctx = dataclasses.replace(ctx, z=z_look, overrides={**ctx.overrides, **look_overrides(s, key, n)})
        res = _checked(claim.checks[tier](look_ctx), claim, tier)
        outcome = _LOOK_OUTCOME.get(res.verdict, Outcome.HELD)  # ERROR: stop and report it
        return outcome, res, f"{res.verdict.value}: {res.summary[:300]}"

    res, run = decide_sequentially(schedule, ctx.z, look)
    res.sequential = run.record()
    res.numbers.append(run.number())
    res.summary += f" [{run.stop_reason()}]"
    if res.verdict is Verdict.INCONCLUSIVE:
        res.budget = (res.budget + "; " if res.budget else "") + (
            f"more seeds than the cap of {schedule.cap} (setting {key!r}), or a profile with a larger cap")
    return res


def _fixed_seed_count(seeds) -> int:
    """How many training seeds a fixed ``seeds`` setting names (a count or a sequence of seeds); 0 if none."""
    if isinstance(seeds, (list, tuple)):
        return len(seeds)
    return seeds if isinstance(seeds, int) and not isinstance(seeds, bool) and seeds > 0 else 0


def _draw_counterexamples(ctx: Context, res) -> None:
    """Draw the causal graph of a failing tier's counterexample and of each failing finding's,
    beside the record itself (a reader should not rebuild a tree from a parent list)."""
    from sim.graphs import draw_counterexample

    cases = []
    if res.verdict in (Verdict.FAIL, Verdict.ASSUMPTION_UNMET) and res.counterexample:
        cases.append((res.counterexample, f"{res.tier}-counterexample-graph", f"{ctx.claim.id} {res.tier}: counterexample"))
    for k, f in enumerate(res.findings):
        if f.verdict is Verdict.FAIL and f.counterexample:
            cases.append((f.counterexample, f"{res.tier}-finding{k + 1}-graph",
                          f"{ctx.claim.id} finding ({f.kind}): counterexample"))
    for cex, name, title in cases:
        try:
            path = draw_counterexample(ctx, cex, name, title)
        except Exception as exc:  # a drawing never takes the verdict down
            path, res.summary = None, res.summary + f" (the counterexample's graph could not be drawn: {exc})"
        if path:
            res.figures.append(path)


def _checked(res, claim: Claim, tier: str):
    """A check's return value, refused unless it is a TierResult with a known verdict."""
    from sim.verdict import Control, Outcome, TierResult, guard_with_controls

    if not isinstance(res, TierResult):
        raise TypeError(f"the {tier} check of {claim.id} returned {type(res).__name__}, not a sim.verdict.TierResult")
    try:
        res.verdict, res.conclusion = Verdict(res.verdict), Outcome(res.conclusion)
    except ValueError as exc:
        raise TypeError(f"the {tier} check of {claim.id} returned an unknown verdict or conclusion: {exc}") from None
    if not all(isinstance(c, Control) for c in res.controls):
        raise TypeError(f"the {tier} check of {claim.id} returned controls that are not sim.verdict.Control")
    return guard_with_controls(res)


def check_out_dir(out_dir: Path, config: RunConfig, *, resume: bool) -> None:
    """Everything :func:`run` would refuse about ``out_dir``, checked before any work and without
    writing anything outside it: a file where the folder should be, a folder that cannot be
    written, one another live run holds, a non-empty folder that is not an icl-verify run's, a
    corrupt run.json, and with ``resume`` a folder holding no run or another configuration's.
    :func:`run` checks them again once it holds the folder. Raises :class:`RunError`."""
    out_dir = Path(out_dir)
    try:
        st = os.stat(out_dir)
    except FileNotFoundError:
        st = None
        if os.path.islink(out_dir):
            raise RunError(f"--out {out_dir} is a link to {os.readlink(out_dir)}, which does not exist; nothing was "
                           "written") from None
    except OSError as exc:  # a name too long, a link loop, a parent that is a file
        raise RunError(f"cannot write to --out {out_dir}: {exc.strerror or exc}") from None
    if st is None:
        if resume:
            raise RunError(f"--resume: {out_dir} holds no run to resume (no run.json)")
        parent = _existing_parent(out_dir)
        if not parent.is_dir():
            raise RunError(f"--out {out_dir}: {parent} is a file, not a folder; nothing was written")
        if not os.access(parent, os.W_OK | os.X_OK):
            raise RunError(f"cannot write to --out {out_dir}: {parent} is not writable (Permission denied)")
        return
    if not stat.S_ISDIR(st.st_mode):
        raise RunError(f"--out {out_dir} is a file, not a folder; nothing was written")
    _probe_writable(out_dir)
    holder = _FolderLock(out_dir).live_holder()
    if holder is not None:
        raise RunError(f"another icl-verify run (pid {holder}) is writing to {out_dir}; wait for it to finish or "
                       "choose another --out")
    _check_dir(out_dir, config, resume)


def _existing_parent(path: Path) -> Path:
    """The nearest folder above ``path`` that exists (``.`` for a relative path with none)."""
    for parent in Path(os.path.abspath(path)).parents:
        if parent.exists():
            return parent
    return Path(".")  # pragma: no cover - the root exists


def _probe_writable(out_dir: Path) -> None:
    """Write and remove a file in ``out_dir`` (a read-only mount, or permissions, say no here)."""
    try:
        probe = out_dir / f".icl-verify-write-test-{os.getpid()}"
        probe.touch()
        probe.unlink()
    except OSError as exc:
        raise RunError(f"cannot write to --out {out_dir}: {exc.strerror or exc}") from None


def _check_dir(out_dir: Path, config: RunConfig, resume: bool) -> dict | None:
    """The refusals of :func:`_prepare_dir`, writing nothing; returns the folder's run.json (or None)."""
    old = read_run_json(out_dir)
    for name in ("results", "figures"):  # where a run writes: a file there would stop it half-way
        if (out_dir / name).exists() and not (out_dir / name).is_dir():
            raise RunError(f"--out {out_dir}: {out_dir / name} is a file, where the run keeps its "
                           f"{'claim results' if name == 'results' else 'figures'}; nothing was written. Remove it "
                           "or choose another --out")
    if resume:
        if old is None:
            raise RunError(f"--resume: {out_dir} holds no run to resume (no run.json)")
        if old.get("config_hash") != config.digest():
            raise RunError(f"--resume: the run in {out_dir} was made with a different configuration "
                           f"({old.get('config')}); start a fresh run or use a different --out")
        return old
    if old is None:
        found = sorted(p.name for p in out_dir.iterdir() if p.name not in (_LOCK, "corpus"))
        if found:
            shown = ", ".join(found[:5]) + (f" and {len(found) - 5} more" if len(found) > 5 else "")
            raise RunError(f"--out {out_dir} is not empty and is not an icl-verify run folder (it holds {shown}); "
                           "nothing was written or deleted. Choose a new or empty folder")
    return old


def _prepare_dir(out_dir: Path, config: RunConfig, resume: bool, claim_ids: Sequence[str]) -> None:
    """Make ``out_dir`` ready for this run without touching anything that is not a run's.

    A fresh run writes into a new or empty folder, or into an earlier icl-verify run's folder
    (its run.json says so), where it removes only what that run wrote: its per-claim results,
    its figures (named ``<claim id>-*.png``), its training jobs' records (``jobs/<claim id>/``) and
    its four reports. Anything else is refused, but
    for a ``corpus`` folder (the default counterexample corpus, kept from run to run)."""
    old = _check_dir(out_dir, config, resume)
    if resume or old is None:
        return
    owned = set(old.get("claims", [])) | set(claim_ids)
    for path in (out_dir / "results").glob("*.json") if (out_dir / "results").is_dir() else ():
        if path.stem in owned:
            path.unlink()
    for path in (out_dir / "figures").glob("*.png") if (out_dir / "figures").is_dir() else ():
        if any(path.name.startswith(f"{cid}-") for cid in owned):
            path.unlink()
    for name in ("results.json", "report.md", "report.html", "junit.xml"):
        (out_dir / name).unlink(missing_ok=True)
    for cid in owned:  # the training jobs' records (sim.claims.jobs): a fresh run trains afresh
        if (out_dir / "jobs" / cid).is_dir():
            shutil.rmtree(out_dir / "jobs" / cid)


class _FolderLock:
    """One run at a time per folder: ``.icl-verify.lock`` holds the writer's pid.

    A lock left by a process that no longer exists (a SIGKILLed run) is taken over."""

    def __init__(self, out_dir: Path):
        self.path = Path(out_dir) / _LOCK
        self.held = False

    def __enter__(self):
        for _ in range(2):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                pid = self.live_holder()
                if pid is not None:
                    raise RunError(f"another icl-verify run (pid {pid}) is writing to {self.path.parent}; wait for "
                                   f"it to finish or choose another --out") from None
                self.path.unlink(missing_ok=True)  # stale: its writer is gone
                continue
            with os.fdopen(fd, "w") as fh:
                fh.write(str(os.getpid()))
            self.held = True
            return self
        raise RunError(f"cannot take the lock {self.path}; another run is starting there")

    def _holder(self) -> int | None:
        try:
            return int(self.path.read_text().strip())
        except (OSError, ValueError, UnicodeDecodeError):
            return None

    def live_holder(self) -> int | None:
        """The pid of another process that holds the folder and is alive, or None."""
        pid = self._holder()
        return pid if pid is not None and pid != os.getpid() and _alive(pid) else None

    def __exit__(self, *exc):
        if self.held:
            self.path.unlink(missing_ok=True)
        return False


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def run(config: RunConfig, claims: Sequence[Claim], *, out_dir: Path | None = None, resume: bool = False,
        prior=None, show_progress: bool = True, audit=None, corpus=None,
        jobs: int = 1, execution=None, eta=None) -> tuple[Path, list[dict[str, Any]]]:
    """Evaluate ``claims`` and write the run folder; returns ``(out_dir, claim dicts)``.

    ``jobs``: how many claims are evaluated at once, each in a worker process (:mod:`sim.lanes`;
    the numbers are the same as with 1); 1 evaluates them one after another in this process. A
    prior that cannot be sent to another process (e.g. one a user's file defines) runs with 1.

    ``execution`` (a :class:`sim.claims.jobs.Execution`, None: this machine): where the claims'
    training jobs run, e.g. on a Dask cluster; the numbers do not depend on it. ``eta`` (a
    :class:`sim.plan.Eta`, or None): told as jobs and claims finish, it gives the progress bar its
    estimate of the time left.

    A failure of the run's environment (a full disk, an output folder that became unwritable, a
    lost Dask scheduler) raises :class:`~sim.files.RunEnvironmentError` naming the file, folder or
    address; what had finished (claims, training jobs) is kept for ``--resume``.

    ``corpus`` (a :class:`sim.corpus.Corpus`, or None for none): the counterexample corpus the
    claims replay and store their FAILs in.

    ``audit`` (a :class:`sim.audit.PriorAudit`): once every claim has finished, the claims'
    evidence on each broken assumption is attached to it (:func:`sim.audit.attach_results`)
    and it is written at the top of the reports, in the same final write that marks the run
    complete.
    """
    if not claims:
        raise RunError("no claims selected")
    graph_claims(config, claims)
    out_dir = Path(out_dir) if out_dir is not None else DEFAULT_REPORTS / config.run_id
    check_out_dir(out_dir, config, resume=resume)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RunError(f"cannot write to --out {out_dir}: {exc.strerror or exc}") from None
    _probe_writable(out_dir)
    with _FolderLock(out_dir):
        try:
            return _run_locked(config, claims, out_dir, resume=resume, prior=prior, show_progress=show_progress,
                               audit=audit, corpus=corpus, jobs=jobs, execution=execution, eta=eta)
        except OSError as exc:  # writing the run folder failed under way
            failure = environment_failure(exc, out_dir)
            if failure is None:
                raise
            raise failure from None


def graph_claims(config: RunConfig, claims: Sequence[Claim]) -> list[Claim]:
    """The claims of ``claims`` that run on ``config.graph`` (none without one), each checked to
    take it in ``config.profile``. A :class:`RunError` before anything runs when none of them takes a
    graph (it lists those that do) or when the graph does not fit one (it names the claim and node)."""
    if config.graph is None:
        return []
    from sim import claims as registry
    from sim.claims.base import GraphFitError
    from sim.graphs import graph_from_record

    takers = [c for c in claims if c.graph_input is not None]
    if not takers:
        known = [c.id for c in registry.all_claims() if c.graph_input is not None]
        raise RunError(f"--graph: no claim matching {config.claims!r} takes a graph (their checks draw their own, or "
                       f"none); the claims that take one: {', '.join(known) or 'none'}")
    g = graph_from_record(config.graph)
    for c in takers:
        settings = {**c.settings.get(config.profile, {}), **config.overrides.get(c.id, {})}
        try:
            c.graph_input.check(c.id, g, settings)
        except GraphFitError as exc:
            hint = f" (or leave {c.id} out of --claims)" if len(takers) > 1 else ""
            raise RunError(f"--graph {config.graph['name']}: {exc}{hint}") from None
    return takers


def _run_locked(config, claims, out_dir: Path, *, resume, prior, show_progress, audit, corpus=None, jobs=1,
                execution=None, eta=None):
    from sim.report import write_reports

    _prepare_dir(out_dir, config, resume, [c.id for c in claims])
    started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    if not resume:
        atomic_write_text(out_dir / "run.json", dump_json(
            {"schema": RUN_SCHEMA, "run_id": config.run_id, "config": config.as_dict(), "config_hash": config.digest(),
             "started": started, "claims": [c.id for c in claims]}))
    t0 = time.perf_counter()
    found: dict[int, dict[str, Any]] = {}  # claim index -> its result dict
    bar = _progress_bar(len(claims), show_progress)
    todo = []
    for k, claim in enumerate(claims):
        data = _saved_result(out_dir / "results" / f"{claim.id}.json") if resume else None  # None: run it (again)
        if data is not None and data.get("config_hash") == config.digest() and data.get("id") == claim.id:
            found[k] = data
            bar.update(1)
        else:
            todo.append(k)

    def finished(k: int, result: ClaimResult) -> None:
        data, text = _serialised(result)
        atomic_write_text(out_dir / "results" / f"{claims[k].id}.json", text)
        found[k] = data
        if eta is not None:
            eta.claim_done(claims[k].id)
        bar.update(1)

    def with_eta(message: str) -> str:
        left = eta.text() if eta is not None else ""
        return f"{message} | {left}" if left else message

    try:
        if jobs > 1 and len(todo) > 1 and _lanes_can_take(prior):
            _evaluate_in_lanes(config, [claims[k] for k in todo], jobs, out_dir, prior, corpus, bar,
                               lambda i, result: finished(todo[i], result), execution=execution, eta=eta,
                               with_eta=with_eta)
        else:
            for k in todo:
                bar.set_description(claims[k].id)
                finished(k, evaluate_claim(claims[k], config, out_dir, prior=prior, corpus=corpus, execution=execution,
                                           progress=lambda m: bar.set_postfix_str(with_eta(m), refresh=True),
                                           on_job=eta.job_done if eta is not None else None))
    finally:
        bar.close()
    dicts = [found[k] for k in range(len(claims))]
    audit_doc = None
    if audit is not None:
        from sim.audit import attach_results

        attach_results(audit, dicts)
        audit_doc = audit.to_dict()
    write_reports(out_dir, config, dicts, elapsed_s=time.perf_counter() - t0, prior=prior, audit=audit_doc)
    return out_dir, dicts


def _lanes_can_take(prior) -> bool:
    from sim.lanes import picklable

    return prior is None or picklable(prior)


def _evaluate_in_lanes(config, claims, jobs: int, out_dir: Path, prior, corpus, bar, finished, *, execution=None,
                       eta=None, with_eta=lambda m: m) -> None:
    """``claims`` on ``jobs`` lanes (:func:`sim.lanes.evaluate_in_lanes`), the bar naming the claims
    under way and the latest message of each; a lane's corpus counts and warnings join ``corpus``'s."""
    from sim.lanes import evaluate_in_lanes

    running: dict[int, str] = {}

    def progress(i: int, message: str) -> None:
        running[i] = message
        bar.set_description(", ".join(claims[j].id for j in sorted(running)))
        bar.set_postfix_str(with_eta(" | ".join(running[j] for j in sorted(running))), refresh=True)

    def done(i: int, outcome) -> None:
        running.pop(i, None)
        result, lane_corpus = outcome
        if corpus is not None and lane_corpus is not None:
            corpus.absorb(lane_corpus)
        finished(i, result)

    def lost(i: int, why: str):
        claim = claims[i]
        tier = (claim.tiers_for(config.profile) or ("run",))[0]
        res = crash_result(tier, RuntimeError(why))
        res.summary, res.error = f"the claim's evaluation did not finish: {why.strip().splitlines()[-1]}", why
        return ClaimResult(id=claim.id, title=claim.title, paper=claim.source.paper, source=claim.source.cite(),
                           statement=claim.statement, tiers_supported=list(claim.tiers), decided_by=claim.decided_by,
                           verdict=Verdict.ERROR, tiers=[res], seed=derive_seed(config.seed, claim.id, "claim"),
                           config_hash=config.digest(), headline=str(Verdict.ERROR)), None

    evaluate_in_lanes(claims, jobs, evaluate=evaluate_claim, plugins=list(config.plugins), finished=done,
                      progress=progress, lost=lost,
                      job_done=(lambda i, e: eta.job_done(e)) if eta is not None else None,
                      kwargs={"config": config, "out_dir": out_dir, "prior": prior, "corpus": corpus,
                              "execution": execution})


def _saved_result(path: Path) -> dict | None:
    """A claim's result saved by an earlier attempt of this run, or None (absent, or not a whole
    result: :func:`sim.files.read_claim_result`), in which case the claim is evaluated again."""
    try:
        return read_claim_result(path)
    except RunError:
        return None


def _serialised(result: ClaimResult) -> tuple[dict, str]:
    """A claim's result as strict JSON; a result that cannot be written becomes that claim's ERROR."""
    try:
        data = to_jsonable(result)
        if json_depth(data, MAX_JSON_DEPTH) > MAX_JSON_DEPTH:  # it could not be read back (sim.files.parse_json)
            raise ValueError(f"it nests more than {MAX_JSON_DEPTH} levels deep")
        return data, dump_json(data)
    except (TypeError, ValueError, RecursionError) as exc:
        bad = TypeError(f"the result of {result.id} cannot be written as JSON: {exc}")
        result.tiers = [crash_result(result.tiers[0].tier if result.tiers else "report", bad)]
        result.verdict, result.headline = Verdict.ERROR, str(Verdict.ERROR)
        data = to_jsonable(result)
        return data, dump_json(data)


def _progress_bar(total: int, enabled: bool):
    from tqdm.auto import tqdm

    return tqdm(total=total, unit="claim", disable=not enabled, dynamic_ncols=True, leave=True)
