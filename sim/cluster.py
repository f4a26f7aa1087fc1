"""Where a run's training jobs go (``icl-verify run --executor``): this machine, an existing Dask
scheduler, or a Dask ``LocalCluster`` started for the run.

``local`` (default)
    worker processes on this machine, per claim (:mod:`sim.claims.jobs`); ``--workers N`` sets how many.
``dask``
    every training job is one task of the scheduler at ``--address tcp://HOST:PORT`` (e.g. a SLURM or PBS
    cluster started with ``dask-jobqueue``, whose workers have this package installed); the claims are
    decided here, from the jobs' results.
``dask-local``
    a ``distributed.LocalCluster`` of ``--workers N`` one-thread worker processes on 127.0.0.1, its
    dashboard off, started for the run and stopped after it: the same code path as a cluster, on one machine.

The numbers do not depend on the executor: every job carries its own seeds. Dask is the optional
extra ``cluster`` (``pip install 'icl-causal-verify[cluster]'``); without it these executors are a
usage error before any work.
"""
from __future__ import annotations

import os
import re
from contextlib import contextmanager
from typing import Iterator

from sim.claims.jobs import Execution, close_clients
from sim.files import RunEnvironmentError

__all__ = ["EXECUTORS", "ExecutorError", "check_executor", "start_executor", "workers_of"]

EXECUTORS = ("local", "dask", "dask-local")
_ADDRESS = re.compile(r"(tcp|tls)://(\[[0-9a-fA-F:]+\]|[A-Za-z0-9_.-]+):(\d{1,5})")


class ExecutorError(ValueError):
    """Executor options that do not go together, a malformed address, or Dask not installed."""


def check_executor(executor: str, address: str | None, workers: int | None) -> None:
    """Raise :class:`ExecutorError` (one line naming the option) unless the options make sense:
    ``dask`` needs ``--address tcp://HOST:PORT``, ``--address`` goes with ``dask`` only, and both Dask
    executors need ``dask.distributed``."""
    if executor not in EXECUTORS:
        raise ExecutorError(f"--executor {executor!r}: expected one of {', '.join(EXECUTORS)}")
    if executor == "dask":
        if not address:
            raise ExecutorError("--executor dask needs --address tcp://HOST:PORT, the Dask scheduler's address")
        m = _ADDRESS.fullmatch(address)
        if not m or not 0 < int(m.group(3)) < 65536:
            raise ExecutorError(f"--address {address!r} is not a scheduler address; expected tcp://HOST:PORT, e.g. "
                                "tcp://10.0.0.5:8786")
    elif address:
        raise ExecutorError(f"--address goes with --executor dask (an existing scheduler), not --executor {executor}")
    if executor != "local":
        try:
            import distributed  # noqa: F401
        except ImportError:
            raise ExecutorError(f"--executor {executor} needs Dask's distributed package, which is not installed: "
                                "pip install 'icl-causal-verify[cluster]'") from None


@contextmanager
def start_executor(executor: str, address: str | None = None, workers: int | None = None) -> Iterator[Execution]:
    """The :class:`~sim.claims.jobs.Execution` of the options (checked by :func:`check_executor`) for the
    length of a run: for ``dask`` a connection to the scheduler (a :class:`~sim.files.RunEnvironmentError`
    naming it when it cannot be reached), for ``dask-local`` a ``LocalCluster`` on 127.0.0.1, closed after."""
    if executor == "local":
        yield Execution("local", workers=workers)
        return
    from sim.claims.jobs import dask_client

    cluster = None
    try:
        try:
            if executor == "dask-local":
                from distributed import LocalCluster

                n = int(workers or os.cpu_count() or 1)
                cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, host="127.0.0.1",
                                       dashboard_address=None, silence_logs=40)
                address = cluster.scheduler_address
            dask_client(address)  # reach it now: an unreachable scheduler is said before any work
        except OSError as exc:
            raise RunEnvironmentError(str(address or "127.0.0.1"), f"cannot start the Dask cluster ({exc})") from None
        yield Execution("dask", address=address)
    finally:
        close_clients()
        if cluster is not None:
            cluster.close()


def workers_of(execution: Execution) -> int | None:
    """How many workers the execution's Dask cluster has now (None for local, or when it cannot say)."""
    if execution.kind != "dask":
        return None
    from sim.claims.jobs import dask_client

    try:
        return len(dask_client(execution.address).scheduler_info().get("workers", {})) or None
    except Exception:  # noqa: BLE001 - an estimate's detail; the run itself will say what is wrong
        return None
