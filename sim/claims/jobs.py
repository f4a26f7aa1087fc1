"""A check's trained jobs on the one grid runner (:func:`sim.sweep.map_runs`): memoised per claim,
recorded in the run folder the moment each finishes, declared without training for the cost plan.

A trained tier builds its jobs on the driver (plain, picklable dicts: settings values, seeds from
``ctx.seed_for``, the device) and hands them to :func:`run_jobs` with a module-level job function.

- **Memo.** Each job's result is kept in ``ctx.memo_store`` under ``key(job)``, so a later look of
  a sequential decision (which adds seeds) reuses the models an earlier look trained.
- **Records.** Each finished job's result is written atomically to
  ``OUT/jobs/<claim id>/runs/<job id>.json`` (:class:`sim.sweep.RunStore`, the sweep's own
  records) the moment it finishes, the job id a hash of the function and ``repr(key(job))``. A
  job whose record is there is not trained again: an interrupted run (a killed driver, a lost
  worker) loses only the jobs in flight, and ``--resume`` trains only what is missing, even in the
  middle of a sequential decision. A claim that ``reuses`` another (N.K4 evaluates N.K1's models)
  also finds that claim's records. The result travels as a pickle inside the JSON record (a
  trained model is not JSON): a run folder is trusted like the code that wrote it.
- **Where the jobs run** (``ctx.execution``, an :class:`Execution`): by default on the CPU with
  two or more workers (``settings["workers"]``, else ``Execution.workers``, else the CPU count,
  never more than the jobs to do) on a local pool of one-thread worker processes; otherwise (a GPU,
  one worker, one job) here, one by one, each job getting a ``"progress"`` entry, a callable taking
  one message, for its live progress. With ``Execution("dask", address)`` every job is one task
  of a Dask cluster. The numbers are the same everywhere: every job carries its own seeds.
- **Batched groups.** A family that trains several seeds as one model (:func:`sim.train.train_batched`)
  passes ``batch`` (a module-level function taking ``{"jobs": [...]}`` and returning their results
  in order) and ``group`` (jobs with one group key train as one): on a GPU always, on the CPU when
  ``batch_on_cpu``. A group is the jobs of one call still to do with one group key, so it is the
  same set of seeds in a fresh and in a resumed run, and each job's record is still its own.
- **Cost.** ``cost(job)`` declares what a job trains (:class:`Cost`: the model family, and the
  steps and evaluations at each shape), so ``icl-verify plan`` (:mod:`sim.plan`) can price a
  claim's jobs without training them: a claim's ``jobs`` function builds the same job lists its
  check does and returns :func:`planned_jobs` of them.
"""
from __future__ import annotations

import base64
import hashlib
import os
import pickle
from dataclasses import dataclass
from typing import Any, Callable, Hashable, Mapping, Sequence

from sim.claims.base import Context

__all__ = ["run_jobs", "planned_jobs", "job_id", "job_counts", "Cost", "PlannedJob", "Execution", "EXECUTION_KINDS",
           "dask_client", "close_clients"]

Job = Mapping[str, Any]

#: Where a run's training jobs go: ``local`` (this machine: worker processes, or here on a GPU) or
#: ``dask`` (the tasks of a Dask scheduler).
EXECUTION_KINDS = ("local", "dask")


@dataclass(frozen=True)
class Execution:
    """Where a run's training jobs run: ``kind`` ``local`` (``workers`` worker processes per claim,
    default the CPU count) or ``dask`` (a scheduler at ``address``, ``tcp://host:port``). Not part
    of a run's configuration: the numbers do not depend on it."""

    kind: str = "local"
    address: str | None = None
    workers: int | None = None

    def __post_init__(self):
        if self.kind not in EXECUTION_KINDS:
            raise ValueError(f"unknown execution {self.kind!r}; expected one of {', '.join(EXECUTION_KINDS)}")
        if self.kind == "dask" and not self.address:
            raise ValueError("a dask execution needs the scheduler's address")


@dataclass(frozen=True)
class Cost:
    """What one job trains, declared without training it: the model ``family``, the function
    ``timer`` (``"module:function"``, called as ``timer(unit, shape, count, device)``) that runs
    ``count`` of that family's units at a shape for the calibration (:mod:`sim.plan`), and
    ``parts``: ``(unit, shape, count)`` triples, ``unit``
    ``"step"`` (training steps), ``"eval"`` (evaluations) or ``"block"`` (a run of steps and the
    evaluation after them), ``shape`` a tuple of ``(name, value)`` pairs (what the cost of one unit
    depends on). ``steps``: the training steps in all; ``models``: models trained as one;
    ``early_stop``: training may stop before its steps (the estimate is then an upper bound);
    ``linear``: shape fields a unit's cost is affine in (the models trained as one, the steps of a block),
    which the calibration may time at smaller values (:data:`sim.plan.LINEAR_CAPS`)."""

    family: str
    timer: str
    parts: tuple
    steps: int = 0
    models: int = 1
    early_stop: bool = False
    linear: tuple = ()

    @classmethod
    def of(cls, family: str, timer: str, *, steps: Sequence[tuple[Mapping[str, Any], int]] = (),
           evals: Sequence[tuple[Mapping[str, Any], int]] = (), blocks: Sequence[tuple[Mapping[str, Any], int]] = (),
           block_steps: int = 0, models: int = 1, early_stop: bool = False, linear: Sequence[str] = ()) -> "Cost":
        """A cost from ``steps`` and ``evals``, each ``(shape dict, count)``, and ``blocks`` (``block_steps``
        training steps and the evaluation after them, for a family whose evaluations the probe cannot
        run alone); parts of count 0 are left out."""
        groups = (("step", steps), ("eval", evals), ("block", blocks))
        parts = tuple((unit, tuple(sorted((str(k), v) for k, v in shape.items())), int(n))
                      for unit, group in groups for shape, n in group if int(n) > 0)
        n_steps = sum(int(n) for _, n in steps) + int(block_steps) * sum(int(n) for _, n in blocks)
        return cls(family, timer, parts, n_steps, int(models), bool(early_stop), tuple(linear))

    def describe(self) -> str:
        """``"4 models x 600 steps (batch 32)"``, the batch (or batches) from the training parts' shapes."""
        batches = list(dict.fromkeys(dict(shape).get("batch") for unit, shape, _ in self.parts if unit != "eval"))
        batch = "" if batches == [None] or not batches else (
            f" (batch {batches[0]})" if len(batches) == 1 else f" (batches {'/'.join(map(str, batches))})")
        model = f"{self.models} models" if self.models != 1 else "1 model"
        return f"{model} x {self.steps}{' or fewer' if self.early_stop else ''} steps{batch}"


@dataclass(frozen=True)
class PlannedJob:
    """One job as the cost plan sees it: its id (:func:`job_id`; None when its key cannot name it
    across processes), the run_jobs label and its :class:`Cost` (None: the family declares none)."""

    id: str | None
    label: str
    cost: Cost | None


def job_id(fn, key: Hashable) -> str | None:
    """The file name of a job's record: 16 hex digits of ``sha256(function name, repr(key))``; None
    when the key's ``repr`` is not the same in every process (it shows an object's address)."""
    from sim.sweep import function_name

    text = repr(key)
    if " at 0x" in text:
        return None
    return hashlib.sha256(f"{function_name(fn)}\n{text}".encode()).hexdigest()[:16]


def planned_jobs(fn: Callable[[Job], Any], jobs: Sequence[Job], *, key: Callable[[Job], Hashable], label: str,
                 cost: Callable[[Job], Cost] | None = None, **_run_options) -> list[PlannedJob]:
    """What :func:`run_jobs` with the same arguments would train, without training: one
    :class:`PlannedJob` per distinct key, in order. A claim's ``jobs`` function returns these (the
    cost plan's source); ``batch``, ``group`` and ``batch_on_cpu`` are accepted and ignored."""
    out, seen = [], set()
    for job in jobs:
        k = key(job)
        if k in seen:
            continue
        seen.add(k)
        out.append(PlannedJob(job_id(fn, k), label, cost(job) if cost is not None else None))
    return out


def job_counts(log: Sequence[Mapping[str, Any]]) -> dict[str, int] | None:
    """A claim's training jobs from its ``ctx.job_log``: ``trained`` here and ``reused`` from the
    run folder (an interrupted run's, or the records of a claim it reuses); None when it has none."""
    if not log:
        return None
    return {"trained": sum(e["status"] == "trained" for e in log), "reused": sum(e["status"] == "reused" for e in log)}


def run_jobs(ctx: Context, fn: Callable[[Job], Any], jobs: Sequence[Job], *, key: Callable[[Job], Hashable],
             label: str, cost: Callable[[Job], Cost] | None = None, batch: Callable[[Mapping], list] | None = None,
             group: Callable[[Job], Hashable] | None = None, batch_on_cpu: bool = False) -> list:
    """``[fn(job) for job in jobs]``, in order, each job done once per claim evaluation and recorded
    in the run folder (module docstring).

    ``fn``: a module-level function (a worker process imports it) taking one job dict;
    ``key(job)``: a hashable memo key naming every input of ``fn`` that changes its result (not
    ``"progress"``), with a ``repr`` that is the same in every process (it names the record);
    jobs with a key already in ``ctx.memo_store``, or repeating one earlier in ``jobs``, are not run
    again and get the stored result (the same object). ``label`` starts every progress message
    (``"<label> 2/6: ..."``). ``cost``: the job's :class:`Cost`. ``batch``, ``group``,
    ``batch_on_cpu``: batched groups (module docstring).
    """
    keys = [key(job) for job in jobs]
    todo: dict[Hashable, Job] = {}  # first job of each key not done yet, in order
    ids: dict[Hashable, str | None] = {}
    stores = _stores(ctx, fn)
    for k, job in zip(keys, jobs):
        if k in ctx.memo_store or k in todo:
            continue
        ids[k] = job_id(fn, k)
        found = _load(stores, ids[k], k)
        if found is not None:
            ctx.memo(k, lambda found=found: found)
            ctx.job_log.append({"id": ids[k], "label": label, "status": "reused", "seconds": 0.0})
            if ctx.on_job is not None:
                ctx.on_job({"claim": ctx.claim.id, "id": ids[k], "seconds": 0.0, "reused": True})
        else:
            todo[k] = job
    if todo:
        todo_keys = list(todo)

        def done(i: int, result: Any, seconds: float) -> None:
            k = todo_keys[i]
            _save(stores[0] if stores else None, ids[k], k, result, seconds)
            ctx.memo(k, lambda: result)
            ctx.job_log.append({"id": ids[k], "label": label, "status": "trained", "seconds": seconds})
            if ctx.on_job is not None:
                ctx.on_job({"claim": ctx.claim.id, "id": ids[k], "seconds": seconds})

        _map_jobs(ctx, fn, list(todo.values()), label, done, ids=[ids[k] for k in todo_keys], batch=batch,
                  group=group, batch_on_cpu=batch_on_cpu)
    return [ctx.memo_store[k] for k in keys]


# ------------------------------------------------------------------------------ records ---
def _stores(ctx: Context, fn) -> list:
    """The record stores a claim reads: its own first (where it writes), then those of the claims it
    reuses."""
    from sim.sweep import RunStore, function_name

    name = function_name(fn)
    return [RunStore(ctx.out_dir / "jobs" / cid, name) for cid in (ctx.claim.id, *ctx.claim.reuses)]


def _params(k: Hashable) -> dict:
    return {"key": repr(k)}


def _load(stores, rid: str | None, k: Hashable):
    if rid is None:
        return None
    for store in stores:
        rec = store.load(rid, _params(k))
        if rec is not None and isinstance(rec.get("result"), dict) and "pickle" in rec["result"]:
            try:
                return pickle.loads(base64.b64decode(rec["result"]["pickle"]))
            except Exception:  # noqa: BLE001 - a damaged or stale record is a missing one: train again
                continue
    return None


def _save(store, rid: str | None, k: Hashable, result: Any, seconds: float) -> None:
    from sim.files import environment_failure

    if store is None or rid is None:
        return
    try:
        blob = base64.b64encode(pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)).decode("ascii")
    except Exception:  # noqa: BLE001 - a result that cannot be pickled is kept in memory only
        return
    try:
        store.save(rid, _params(k), {"result": {"pickle": blob}, "elapsed_s": round(seconds, 3)})
    except OSError as exc:
        failure = environment_failure(exc, store.path(rid))
        if failure is not None:
            raise failure from None
        raise


# ---------------------------------------------------------------------------- executors ---
_CLIENTS: dict[str, Any] = {}


def dask_client(address: str):
    """This process's Dask client of the scheduler at ``address`` (made once; :func:`close_clients`
    closes it); a :class:`~sim.files.RunEnvironmentError` naming the address when it cannot be reached."""
    from sim.files import RunEnvironmentError

    if address not in _CLIENTS:
        try:
            from distributed import Client
        except ImportError:
            raise RunEnvironmentError(address, "the dask executor needs dask.distributed (pip install "
                                               "'icl-causal-verify[cluster]')") from None
        try:
            _CLIENTS[address] = Client(address)  # waits distributed.comm.timeouts.connect (30 s by default)
        except (OSError, TimeoutError) as exc:
            raise RunEnvironmentError(address, f"cannot reach the Dask scheduler ({exc})") from None
    return _CLIENTS[address]


def close_clients() -> None:
    """Close this process's Dask clients (at the end of a run)."""
    while _CLIENTS:
        _, client = _CLIENTS.popitem()
        try:
            client.close()
        except Exception:  # noqa: BLE001 - a client of a scheduler that is gone
            pass


def _tasks(jobs: list[Job], group) -> list[list[int]]:
    """Indices of ``jobs`` per task: the jobs of one group key together, in order of first appearance."""
    groups: dict[Hashable, list[int]] = {}
    for i, job in enumerate(jobs):
        groups.setdefault(group(job), []).append(i)
    return list(groups.values())


def _map_jobs(ctx: Context, fn, jobs: list[Job], label: str, done, *, ids, batch, group, batch_on_cpu) -> None:
    """Run ``jobs`` (their record ids ``ids``) where ``ctx.execution`` says, calling ``done(index, result,
    seconds)`` here as each finishes."""
    from sim.files import RunEnvironmentError
    from sim.sweep import SchedulerLost, map_runs

    # a family that batches does so for a group of one too: one code path, the same numbers
    grouped = batch is not None and group is not None and (ctx.device != "cpu" or batch_on_cpu)
    tasks = _tasks(jobs, group) if grouped else [[i] for i in range(len(jobs))]
    run_fn = batch if grouped else fn
    params = [{"jobs": [jobs[i] for i in t]} for t in tasks] if grouped else [jobs[t[0]] for t in tasks]
    word = "groups of models" if grouped else "models"

    reported: set[int] = set()

    def finished(t: int, result: Any, seconds: float) -> None:
        reported.add(t)
        members = tasks[t]
        results = result if grouped else [result]
        for i, r in zip(members, results):
            done(i, r, seconds / len(members))

    def collect(results: list) -> None:  # any task the grid runner returned without reporting it
        for t, result in enumerate(results):
            if t not in reported:
                finished(t, result, 0.0)

    execution = ctx.execution or Execution()
    if execution.kind == "dask":
        ctx.progress(f"{label}: {len(params)} {word} on the Dask cluster at {execution.address}")
        try:
            collect(map_runs(run_fn, params, executor="dask", client=dask_client(execution.address),
                             on_result=finished,
                             progress=lambda msg: ctx.progress(f"{label}: {msg.replace('runs', word)}")))
        except SchedulerLost as exc:
            raise RunEnvironmentError(exc.address, "lost the Dask scheduler") from None
        return
    workers = min(len(params), int(ctx.settings.get("workers") or execution.workers or os.cpu_count() or 1))
    if ctx.device != "cpu" or workers < 2:  # here, one by one, with each task's live progress
        n = len(params)
        params = [{**p, "progress": lambda msg, k=k: ctx.progress(f"{label} {k + 1}/{n}: {msg}")}
                  for k, p in enumerate(params)]
        collect(map_runs(run_fn, params, executor="serial", on_result=finished))
        return
    ctx.progress(f"{label}: {len(params)} {word} on {workers} worker processes")
    collect(map_runs(run_fn, params, executor="local", workers=workers, on_result=finished,
                     progress=lambda msg: ctx.progress(f"{label}: {msg.replace('runs', word)}")))
