"""Sweeps: a grid of runs on a local process pool (default) or a Dask distributed cluster.

A *run* is ``fn(params) -> JSON-able dict`` with ``fn`` named ``"module:function"`` (so any
worker can import it) and ``params`` a JSON-able dict. Its id is a hash of
``(fn, params, format version)``. Every finished run is written **atomically, by the
driver, the moment it finishes** to ``OUT/runs/<id>.json``; a run that failed (an
exception, or its worker process died) is recorded in ``OUT/failed/<id>.json`` and is
simply not a result. Running the same sweep again (``resume``, the default) reuses every
finished run and computes only the missing ones, so an interrupted sweep, or one whose
worker was lost, finishes on the next call, and a lost worker loses only the run it was
computing.

Executors
---------
``local``
    worker processes on this machine (``spawn``), one run at a time each; a worker
    that dies takes only its own run with it and is replaced.
``dask``
    a ``distributed.Client`` on a scheduler address (``tcp://host:8786``; clusters
    on SLURM / PBS / ... come from ``dask-jobqueue``, see docs/theory-and-sim.md) or a client
    you pass. Workers need this package installed; results travel back to the
    driver, so no shared filesystem is needed. A run lost with its worker is retried
    alone once (it may only have been queued there), so only the run that
    kills its worker is lost.
``serial``
    in this process, one after another (CUDA runs, debugging).

A run may also hand objects back to the process that ran the sweep without writing them: it
returns :class:`Kept` ``(record, objects)`` (e.g. the trained weights a later check reads);
``record`` is written as always, ``objects`` land in :attr:`SweepResult.kept` only (a record
reused from disk has none).

Every executor runs ``fn`` with torch limited to one thread (``torch.set_num_threads(1)``),
so runs do not oversubscribe a node and the same seeds give the same numbers on every
executor.
"""
from __future__ import annotations

import hashlib
import importlib
import itertools
import json
import os
import socket
import time
import traceback
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

from sim.threads import limit_process_threads
from sim.files import atomic_write_text

__all__ = ["Kept", "map_runs", "worker_messages", "stop_worker_processes", "EXECUTORS", "SweepError", "SweepResult", "grid", "run_id", "run_sweep", "selftest_run",
           "deterministic_part", "RunStore", "function_name"]

EXECUTORS = ("local", "dask", "serial")
#: Bumped when the meaning of a run record changes, so stale records are not reused.
FORMAT = 1


@dataclass(frozen=True)
class Kept:
    """A run's result with objects for the driver's memory: ``record`` (JSON-able) is written
    to ``runs/<id>.json`` as any result; ``objects`` (picklable) come back to the process that
    called :func:`run_sweep`, in :attr:`SweepResult.kept`, and are never written."""

    record: dict
    objects: Any


class SweepError(RuntimeError):
    """A sweep could not start (bad executor, missing address, dask not installed...)."""


class SchedulerLost(SweepError):
    """The Dask scheduler at ``address`` stopped answering while runs were under way: an
    environment failure, not a failed run (the runs that finished are kept)."""

    def __init__(self, address: str, detail: str):
        super().__init__(f"lost the Dask scheduler at {address}: {detail}")
        self.address = address


def grid(base: Mapping[str, Any] | None = None, **axes: Sequence[Any]) -> list[dict[str, Any]]:
    """The cartesian product of ``axes`` over ``base``, in row-major order of the axes given:
    ``grid({"N": 64}, K=[1, 4], seed=[0, 1])`` -> 4 dicts."""
    base = dict(base or {})
    names = list(axes)
    for n in names:
        if isinstance(axes[n], (str, bytes)) or not isinstance(axes[n], Iterable):
            raise SweepError(f"grid axis {n!r} must be a list of values, got {axes[n]!r}")
    return [{**base, **dict(zip(names, values))} for values in itertools.product(*(list(axes[n]) for n in names))]


def function_name(fn) -> str:
    """``"module:function"`` for a module-level function (how a worker imports it), or ``fn`` itself
    when it is already such a name; a :class:`SweepError` for one a worker cannot import."""
    if isinstance(fn, str):
        if ":" not in fn:
            raise SweepError(f"a run function is named 'module:function', got {fn!r}")
        return fn
    name = f"{fn.__module__}:{fn.__qualname__}"
    if fn.__module__ == "__main__" or "<" in fn.__qualname__:
        raise SweepError(f"run function {name} cannot be imported by a worker; define it at module level "
                         "in an importable module")
    return name


_fn_name = function_name


def _resolve(fn_name: str) -> Callable[[Mapping[str, Any]], dict]:
    module, _, attr = fn_name.partition(":")
    obj = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def run_id(fn, params: Mapping[str, Any]) -> str:
    """``sha256(fn, params, FORMAT)`` (16 hex digits): the file name of the run's record."""
    blob = json.dumps({"fn": _fn_name(fn), "params": params, "format": FORMAT}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _execute(fn_name: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """Run one grid point where the executor put it (worker process, Dask worker, here)."""
    limit_process_threads()
    t0 = time.perf_counter()
    result = _resolve(fn_name)(dict(params))
    return {"result": result, "elapsed_s": time.perf_counter() - t0,
            "worker": {"host": socket.gethostname(), "pid": os.getpid()}}


@dataclass
class SweepResult:
    """What a sweep produced: ``records[id]`` for every finished run (this call's and the
    reused ones), ``failed[id]`` the reason for every run that did not finish, ``kept[id]``
    the objects of every run of this call that returned :class:`Kept`."""

    out_dir: Path
    ids: list[str]
    params: list[dict[str, Any]]
    records: dict[str, dict[str, Any]] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    reused: int = 0
    seconds: float = 0.0
    reused_ids: set[str] = field(default_factory=set)
    kept: dict[str, Any] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        return all(i in self.records for i in self.ids)

    def results(self) -> list[dict[str, Any] | None]:
        """Each grid point's ``fn`` result in grid order (``None`` where it failed)."""
        return [self.records[i]["result"] if i in self.records else None for i in self.ids]


def deterministic_part(record: Any) -> Any:
    """A record without wall-clock fields (keys ``elapsed_s``, ``worker``, ``timing``,
    ``finished``): what must agree between executors for the same seeds."""
    if isinstance(record, dict):
        return {k: deterministic_part(v) for k, v in record.items()
                if k not in ("elapsed_s", "worker", "timing", "finished")}
    if isinstance(record, list):
        return [deterministic_part(v) for v in record]
    return record


class RunStore:
    """The finished runs of one function in a folder: ``runs/<id>.json``, each written atomically
    (:func:`sim.files.atomic_write_text`) the moment its run finishes, and ``failed/<id>.json`` for
    the runs that did not. A record is reused only for the same function and the same ``params``
    (compared after a JSON round trip); a damaged file is a missing one. :func:`run_sweep` keeps its
    grid here, and :func:`sim.claims.jobs.run_jobs` a claim's training jobs."""

    def __init__(self, out_dir: Path, fn_name: str):
        self.out_dir = Path(out_dir)
        self.fn = fn_name  # the folders are made by the first write

    def path(self, rid: str) -> Path:
        """Where the record of run ``rid`` is (or will be)."""
        return self.out_dir / "runs" / f"{rid}.json"

    def load(self, rid: str, params) -> dict | None:
        """The record of run ``rid`` made by this function with these ``params``, or None."""
        p = self.path(rid)
        if not p.exists():
            return None
        try:
            rec = json.loads(p.read_text())
        except (OSError, json.JSONDecodeError):
            return None  # a damaged file is recomputed
        return rec if rec.get("fn") == self.fn and rec.get("params") == json.loads(json.dumps(params)) else None

    def save(self, rid: str, params, out: dict) -> dict:
        """Write run ``rid``'s record (``out``: its result and timing) and forget an earlier failure."""
        rec = {"id": rid, "fn": self.fn, "params": params, "format": FORMAT,
               "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z"), **out}
        atomic_write_text(self.path(rid), json.dumps(rec, default=str))
        (self.out_dir / "failed" / f"{rid}.json").unlink(missing_ok=True)
        return rec

    def fail(self, rid: str, params, reason: str) -> None:
        """Record why run ``rid`` did not finish."""
        atomic_write_text(self.out_dir / "failed" / f"{rid}.json",
                          json.dumps({"id": rid, "fn": self.fn, "params": params, "reason": reason,
                                      "when": time.strftime("%Y-%m-%dT%H:%M:%S%z")}, default=str))


def run_sweep(fn, params_list: Sequence[Mapping[str, Any]], out_dir: str | os.PathLike, *,
              executor: str = "local", workers: int | None = None, address: str | None = None, client=None,
              resume: bool = True, progress: Callable[[str], None] | None = None) -> SweepResult:
    """Run ``fn`` on every ``params`` of ``params_list`` and write each record as it finishes.

    Parameters
    ----------
    fn : ``"module:function"`` or an importable module-level function
    params_list : JSON-able dicts (duplicates run once)
    out_dir : folder of the sweep (``runs/``, ``failed/``, ``sweep.json``)
    executor : ``local`` | ``dask`` | ``serial``
    workers : local worker processes (default: CPU count, at most the runs to do)
    address : Dask scheduler address (``tcp://host:port``), for ``executor="dask"``
    client : an existing ``distributed.Client`` (instead of ``address``)
    resume : reuse finished runs found in ``out_dir`` (False: recompute everything)

    Returns a :class:`SweepResult`; it never raises for a run that fails (see ``failed``).
    """
    if executor not in EXECUTORS:
        raise SweepError(f"unknown executor {executor!r}; expected one of {', '.join(EXECUTORS)}")
    fn_name = _fn_name(fn)
    out = Path(out_dir)
    store = RunStore(out, fn_name)
    params_list = [json.loads(json.dumps(dict(p), default=str)) for p in params_list]
    ids = [run_id(fn_name, p) for p in params_list]
    res = SweepResult(out_dir=out, ids=ids, params=params_list)
    atomic_write_text(out / "sweep.json", json.dumps({"fn": fn_name, "format": FORMAT, "runs": [
        {"id": i, "params": p} for i, p in zip(ids, params_list)]}, indent=1, default=str))
    todo: dict[str, dict] = {}
    for rid, p in zip(ids, params_list):
        if rid in todo or rid in res.records:
            continue
        rec = store.load(rid, p) if resume else None
        if rec is not None:
            res.records[rid] = rec
            res.reused += 1
            res.reused_ids.add(rid)
        else:
            todo[rid] = p
    say = progress or (lambda msg: None)
    t0 = time.perf_counter()
    total, done = len(todo), [0]

    def finished(rid: str, out_or_error) -> None:
        done[0] += 1
        if isinstance(out_or_error, dict):
            if isinstance(out_or_error["result"], Kept):
                res.kept[rid] = out_or_error["result"].objects
                out_or_error = {**out_or_error, "result": out_or_error["result"].record}
            res.records[rid] = store.save(rid, todo[rid], out_or_error)
            say(f"run {done[0]}/{total} finished ({rid})")
        else:
            res.failed[rid] = str(out_or_error)
            store.fail(rid, todo[rid], str(out_or_error))
            say(f"run {done[0]}/{total} FAILED ({rid}): {str(out_or_error).splitlines()[-1][:200]}")

    if todo:
        _dispatch(executor, fn_name, todo, finished, workers=workers, address=address, client=client)
    res.seconds = time.perf_counter() - t0
    return res


def map_runs(fn, params_list: Sequence[Mapping[str, Any]], *, executor: str = "local", workers: int | None = None,
             address: str | None = None, client=None, progress: Callable[[str], None] | None = None,
             on_result: Callable[[int, Any, float], None] | None = None) -> list[Any]:
    """``[fn(p) for p in params_list]`` on an executor, kept in memory: the grid runner of
    :func:`run_sweep` for runs whose results are Python objects (a trained model), so any
    picklable ``params`` and result will do. Results come back in ``params_list`` order, each
    computed with torch at one thread; the first run that fails raises :class:`SweepError` with its
    traceback, and the workers are stopped. ``on_result(index, result, seconds)`` is called here,
    in the caller's process, the moment each run finishes (in the order they finish), e.g. to
    write a record of it (:func:`sim.claims.jobs.run_jobs`)."""
    if executor not in EXECUTORS:
        raise SweepError(f"unknown executor {executor!r}; expected one of {', '.join(EXECUTORS)}")
    fn_name = _fn_name(fn)
    todo = {str(k): p for k, p in enumerate(params_list)}
    results: dict[str, Any] = {}
    say = progress or (lambda msg: None)

    def finished(rid: str, out_or_error) -> None:
        if not isinstance(out_or_error, dict):
            raise SweepError(f"run {int(rid) + 1} of {len(todo)} ({fn_name}) failed:\n{out_or_error}")
        results[rid] = out_or_error["result"]
        if on_result is not None:
            on_result(int(rid), results[rid], float(out_or_error.get("elapsed_s", 0.0)))
        say(f"{len(results)}/{len(todo)} runs finished")

    if todo:
        _dispatch(executor, fn_name, todo, finished, workers=workers, address=address, client=client)
    return [results[str(k)] for k in range(len(params_list))]


# ------------------------------------------------------------------------------ executors ---
def _dispatch(executor: str, fn_name: str, todo: dict, finished, *, workers, address, client) -> None:
    """Run ``todo`` (``{id: params}``) on ``executor``, calling ``finished(id, record-or-traceback)``."""
    if executor == "serial":
        _run_serial(fn_name, todo, finished)
    elif executor == "local":
        _run_local(fn_name, todo, finished, workers)
    else:
        _run_dask(fn_name, todo, finished, address=address, client=client)


def _run_serial(fn_name, todo, finished) -> None:
    import torch

    old = torch.get_num_threads()
    try:
        for rid, p in todo.items():
            try:
                out = _execute(fn_name, p)
            except Exception:  # a failed run is recorded, the sweep goes on
                out = traceback.format_exc()
            finished(rid, out)
    finally:
        torch.set_num_threads(old)


def worker_messages(conn) -> Iterator[Any]:  # pragma: no cover - runs in the worker process
    """What a worker process receives on ``conn``, until its pool says stop (``None``) or goes away."""
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        if msg is None:
            return
        yield msg


def _worker_loop(conn) -> None:  # pragma: no cover - runs in the worker process
    """A local worker: receive ``(id, fn, params)``, send back ``(id, ok, record-or-traceback)``."""
    limit_process_threads()
    for rid, fn_name, params in worker_messages(conn):
        try:
            conn.send((rid, True, _execute(fn_name, params)))
        except Exception:
            conn.send((rid, False, traceback.format_exc()))


def _run_local(fn_name, todo, finished, workers) -> None:
    import multiprocessing as mp
    from multiprocessing.connection import wait

    ctx = mp.get_context("spawn")  # fork after torch has started threads can deadlock
    n = max(1, min(workers or os.cpu_count() or 1, len(todo)))
    queue = list(todo.items())

    def start():
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=_worker_loop, args=(child,), daemon=True)
        proc.start()
        child.close()
        return {"proc": proc, "conn": parent, "run": None}

    slots = [start() for _ in range(n)]
    try:
        while queue or any(s["run"] for s in slots):
            for s in slots:
                if s["run"] is None and queue:
                    rid, p = queue.pop(0)
                    s["run"] = rid
                    s["conn"].send((rid, fn_name, p))
            busy = [s for s in slots if s["run"]]
            ready = wait([s["conn"] for s in busy] + [s["proc"].sentinel for s in busy])
            for k, s in enumerate(slots):
                if not s["run"]:
                    continue
                if s["conn"] in ready or s["conn"].poll():
                    try:
                        rid, ok, payload = s["conn"].recv()
                    except (EOFError, OSError):
                        ok, payload, rid = None, None, s["run"]
                    if ok is not None:
                        s["run"] = None
                        finished(rid, payload if ok else payload)
                        continue
                if s["proc"].sentinel in ready or not s["proc"].is_alive():
                    s["proc"].join(timeout=1)
                    rid, s["run"] = s["run"], None
                    finished(rid, f"worker process {s['proc'].pid} died (exit code {s['proc'].exitcode}) while "
                                  "computing this run; rerun the sweep to finish it")
                    s["conn"].close()
                    slots[k] = start() if queue else {"proc": s["proc"], "conn": s["conn"], "run": None}
    finally:
        stop_worker_processes(slots)


def stop_worker_processes(slots) -> None:
    """Ask each worker (``{"proc": Process, "conn": its end of the pipe}``) to stop, wait 5 s for it, then
    terminate it: the end of a local pool (here and :mod:`sim.lanes`), normal or interrupted."""
    for s in slots:
        try:
            if s["proc"].is_alive():
                s["conn"].send(None)
        except (OSError, BrokenPipeError):
            pass
    for s in slots:
        s["proc"].join(timeout=5)
        if s["proc"].is_alive():
            s["proc"].terminate()
            s["proc"].join(timeout=5)


def _run_dask(fn_name, todo, finished, *, address=None, client=None) -> None:
    try:
        from distributed import Client, as_completed
    except ImportError:
        raise SweepError("the dask executor needs dask.distributed: pip install 'icl-causal-verify[cluster]' "
                         "(or pip install 'dask[distributed]')") from None
    own = client is None
    if own:
        if not address:
            raise SweepError("the dask executor needs a scheduler address (--address tcp://host:8786) or a client")
        try:
            client = Client(address, timeout="30s")
        except (OSError, TimeoutError) as exc:
            raise SweepError(f"cannot reach the Dask scheduler at {address}: {exc}") from None
    where = address or getattr(getattr(client, "scheduler", None), "address", "the client's scheduler")

    def outcome(fut):
        try:
            return fut.result()
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:  # KilledWorker, the run raised on the worker, or the scheduler is gone
            if _scheduler_gone(client, exc):
                raise SchedulerLost(where, f"{type(exc).__name__}: {exc}".rstrip(": ")) from None
            return f"{type(exc).__name__}: {exc}"
        finally:
            fut.release()

    def submit(rid):
        # a fresh key per submission: a key that failed before must not be served from the cluster's memory
        return client.submit(_execute, fn_name, todo[rid], key=f"icl-run-{rid}-{uuid.uuid4().hex[:8]}", pure=False)

    try:
        futures = {submit(rid): rid for rid in todo}
        killed = []
        for fut in as_completed(list(futures)):
            out = outcome(fut)
            if isinstance(out, str) and out.startswith("KilledWorker"):
                killed.append(futures[fut])  # maybe only queued on the worker that died: retry it alone
            else:
                finished(futures[fut], out)
        for rid in killed:  # alone, a run that kills its worker again is the culprit, and only it is lost
            finished(rid, outcome(submit(rid)))
    finally:
        if own:
            client.close()


def _scheduler_gone(client, exc: BaseException) -> bool:
    """Whether ``exc`` (raised by a future's result) means the scheduler went away rather than the run
    failing: the future was cancelled, or the client no longer talks to a running scheduler."""
    import asyncio
    import concurrent.futures

    if isinstance(exc, (asyncio.CancelledError, concurrent.futures.CancelledError)):
        return True
    return getattr(client, "status", "running") not in ("running", "connecting")  # e.g. a closed comm


# ------------------------------------------------------------------------------ self-test ---
def selftest_run(params: Mapping[str, Any]) -> dict[str, Any]:
    """A cheap run for testing executors: ``params = {"seed", "n", "crash_if": path?, "sleep": s?, "keep": bool?}``.

    Returns ``n`` normal draws from ``seed`` and the torch threads the worker runs with
    (with ``keep``: as :class:`Kept`, the draws also as a numpy array for the driver's memory).
    If the file ``crash_if`` exists, the worker process dies on the spot (``os._exit``), as
    a killed or lost worker would.
    """
    import numpy as np

    flag = params.get("crash_if")
    if params.get("sleep"):
        time.sleep(float(params["sleep"]))
    if flag and os.path.exists(flag):
        os._exit(17)
    try:
        import torch

        threads = torch.get_num_threads()
    except ImportError:  # pragma: no cover
        threads = None
    values = np.random.default_rng(int(params.get("seed", 0))).normal(size=int(params.get("n", 4)))
    record = {"values": values.tolist(), "torch_threads": threads}
    return Kept(record, {"values": values}) if params.get("keep") else record
