"""A check's trained jobs on the one grid runner (:func:`sim.sweep.map_runs`), memoised per claim.

A trained tier builds its jobs on the driver (plain, picklable dicts: settings values, seeds from
``ctx.seed_for``, the device) and hands them to :func:`run_jobs` with a module-level job function.
Each job's result is kept in ``ctx.memo_store`` under ``key(job)``, so a later look of a
sequential decision (which adds seeds) reuses the models an earlier look trained.

Where the jobs run: on the CPU with two or more workers (``settings["workers"]``, default the CPU
count, never more than the jobs to do) on a local pool of one-thread worker processes; otherwise
(a GPU, one worker, one job) here, one by one, each job getting a ``"progress"`` entry, a callable
taking one message, for its live progress. The numbers are the same either way: every job carries
its own seeds.
"""
from __future__ import annotations

import os
from typing import Any, Callable, Hashable, Mapping, Sequence

from sim.claims.base import Context

__all__ = ["run_jobs"]

Job = Mapping[str, Any]


def run_jobs(ctx: Context, fn: Callable[[Job], Any], jobs: Sequence[Job], *, key: Callable[[Job], Hashable],
             label: str) -> list:
    """``[fn(job) for job in jobs]``, in order, each job done once per claim evaluation.

    ``fn``: a module-level function (a worker process imports it) taking one job dict;
    ``key(job)``: a hashable memo key naming every input of ``fn`` that changes its result (not
    ``"progress"``); jobs with a key already in ``ctx.memo_store``, or repeating one earlier in
    ``jobs``, are not run again and get the stored result (the same object). ``label`` starts
    every progress message (``"<label> 2/6: ..."``).
    """
    keys = [key(job) for job in jobs]
    todo: dict[Hashable, Job] = {}  # first job of each key not done yet, in order
    for k, job in zip(keys, jobs):
        if k not in ctx.memo_store and k not in todo:
            todo[k] = job
    if todo:
        for k, result in zip(todo, _map_jobs(ctx, fn, list(todo.values()), label)):
            ctx.memo(k, lambda result=result: result)
    return [ctx.memo_store[k] for k in keys]


def _map_jobs(ctx: Context, fn: Callable[[Job], Any], jobs: list[Job], label: str) -> list:
    from sim.sweep import map_runs

    workers = min(len(jobs), int(ctx.settings.get("workers") or os.cpu_count() or 1))
    if ctx.device != "cpu" or workers < 2:  # here, one by one, with each job's live progress
        n = len(jobs)
        jobs = [{**job, "progress": lambda msg, k=k: ctx.progress(f"{label} {k + 1}/{n}: {msg}")}
                for k, job in enumerate(jobs)]
        return map_runs(fn, jobs, executor="serial")
    ctx.progress(f"{label}: {len(jobs)} models on {workers} worker processes")
    return map_runs(fn, jobs, executor="local", workers=workers,
                    progress=lambda msg: ctx.progress(f"{label}: {msg.replace('runs', 'models')}"))
