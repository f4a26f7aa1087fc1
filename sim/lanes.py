"""Claims evaluated side by side: a run's lanes, each a worker process that evaluates one claim at a time.

Most checks compute on one thread (:mod:`sim.threads`), so a run that evaluates its claims one
after another leaves every other core idle; the trained tiers start their own pools of training
workers (:mod:`sim.claims.jobs`) and use the cores only while they train. With ``lanes`` worker
processes the run evaluates that many claims at once, the trained ones first (they take longest,
and a long claim started last would finish alone). A claim that reuses another's trained models
from its process's memory (``Claim.reuses``: N.K4 evaluates N.K1's) is evaluated after that claim,
in the same lane.

A lane evaluates a claim exactly as the driver would (with the runner's
:func:`sim.runner.evaluate_claim`, which the runner hands over: its
randomness depends only on the master seed, the claim id and the purpose, and its torch and BLAS
run on one thread), so a claim's numbers do not depend on how many lanes there are, nor on which
lane evaluates it. The claims are named to a lane by id and looked up there, after the run's
plugin files are loaded into it; the prior, the configuration and the corpus are sent as they are.

Lanes are not daemonic (a trained claim's own training pool is their child); they are stopped
when the run ends or is interrupted. A lane that dies (killed, out of memory) ends its claim as
ERROR, saying so, and a fresh lane takes the next claim.
"""
from __future__ import annotations

import multiprocessing as mp
import pickle
import traceback
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any, Callable, Sequence

from sim.claims.base import Claim
from sim.sweep import stop_worker_processes, worker_messages

__all__ = ["evaluate_in_lanes", "lane_order", "picklable"]


def lane_order(claims: Sequence[Claim], profile: str) -> list[list[int]]:
    """The units lanes take, in order: lists of indices of ``claims``, each evaluated in one lane, one
    after another. Claims with a trained tier in ``profile`` come first (training is the long
    work), each group in catalogue order; a claim that ``reuses`` another's trained models joins the
    unit of that claim, after it, so that it finds them in its process's memory."""
    trained = [k for k, c in enumerate(claims) if "trained" in c.tiers_for(profile)]
    order = trained + [k for k in range(len(claims)) if k not in set(trained)]
    index = {c.id: k for k, c in enumerate(claims)}

    def host(k: int, seen=()) -> int:  # the claim at the head of k's chain of reuses within this run
        up = next((index[r] for r in claims[k].reuses if r in index and index[r] not in seen), None)
        return k if up is None else host(up, seen + (k,))

    units: dict[int, list[int]] = {k: [k] for k in order if host(k) == k}
    for k in order:
        if host(k) != k:
            units.setdefault(host(k), []).append(k)  # a host left out by a cycle of reuses still gets a unit
    return list(units.values())


def picklable(obj: Any) -> bool:
    """Whether ``obj`` can be sent to a lane (a prior from a user's file may not be)."""
    try:
        pickle.dumps(obj)
    except Exception:  # noqa: BLE001 - any refusal means: evaluate in this process
        return False
    return True


def _lane_main(conn, plugins: Sequence[str], evaluate) -> None:  # pragma: no cover - runs in the lane process
    """A lane: load the run's plugins, then evaluate ``(index, claim id, kwargs)`` messages until ``None``
    as ``evaluate(claim, progress=..., on_job=..., **kwargs)``, sending ``("progress", index, message)``
    and ``("job", index, event)`` (a training job finished) while it works, then ``("done", index,
    result)``, ``("failed", index, traceback)`` or ``("environment", index, (where, detail))`` (the
    run's environment failed: :class:`sim.files.RunEnvironmentError`)."""
    from sim import claims as registry
    from sim.files import environment_failure
    from sim.threads import limit_process_threads

    limit_process_threads()
    for path in plugins:
        registry.load_plugin(path)
    for index, claim_id, kwargs in worker_messages(conn):
        try:
            result = evaluate(registry.get(claim_id), progress=lambda m, i=index: conn.send(("progress", i, m)),
                              on_job=lambda e, i=index: conn.send(("job", i, e)), **kwargs)
            conn.send(("done", index, (result, kwargs.get("corpus"))))  # the corpus: what this copy counted
        except BaseException as exc:  # evaluate_claim already turns a crashed check into ERROR; this is anything else
            failure = environment_failure(exc)
            if failure is not None:
                conn.send(("environment", index, (failure.where, failure.detail)))
            else:
                conn.send(("failed", index, traceback.format_exc()))


def evaluate_in_lanes(claims: Sequence[Claim], lanes: int, *, evaluate: Callable, plugins: Sequence[str],
                      kwargs: dict, finished: Callable[[int, Any], None], progress: Callable[[int, str], None],
                      lost: Callable[[int, str], Any], job_done: Callable[[int, dict], None] | None = None) -> None:
    """Evaluate ``claims`` on ``lanes`` worker processes (:func:`lane_order`), each as
    ``evaluate(claim, progress=..., on_job=..., **kwargs)`` (a module-level function, sent to the lanes
    by name: :func:`sim.runner.evaluate_claim`), calling ``finished(index, result)`` as each one ends,
    ``progress(index, message)`` as its check reports and ``job_done(index, event)`` as each of its
    training jobs finishes; ``result`` is ``(ClaimResult, the lane's copy of kwargs["corpus"])``. A
    claim whose lane raised outside the check, or died, gets ``finished(index, lost(index, why))``; a
    failure of the run's environment in a lane stops the lanes and is raised here
    (:class:`sim.files.RunEnvironmentError`)."""
    from sim.files import RunEnvironmentError

    ctx = mp.get_context("spawn")  # fork after torch has started threads can deadlock
    queue = lane_order(claims, kwargs["config"].profile)
    plugins = [str(Path(p)) for p in plugins]

    def start():
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=_lane_main, args=(child, plugins, evaluate), daemon=False)
        proc.start()
        child.close()
        return {"proc": proc, "conn": parent, "claim": None, "unit": []}

    slots = [start() for _ in range(max(1, min(lanes, len(queue))))]
    try:
        while queue or any(s["claim"] is not None or s["unit"] for s in slots):
            for s in slots:
                if s["claim"] is None and not s["unit"] and queue:
                    s["unit"] = queue.pop(0)
                if s["claim"] is None and s["unit"]:
                    s["claim"] = s["unit"].pop(0)
                    s["conn"].send((s["claim"], claims[s["claim"]].id, kwargs))
            busy = [s for s in slots if s["claim"] is not None]
            ready = wait([s["conn"] for s in busy] + [s["proc"].sentinel for s in busy])
            for k, s in enumerate(slots):
                if s["claim"] is None:
                    continue
                while s["conn"] in ready and s["conn"].poll():
                    try:
                        kind, index, payload = s["conn"].recv()
                    except (EOFError, OSError):
                        break
                    if kind == "progress":
                        progress(index, payload)
                        continue
                    if kind == "job":
                        if job_done is not None:
                            job_done(index, payload)
                        continue
                    if kind == "environment":
                        raise RunEnvironmentError(*payload)
                    s["claim"] = None
                    finished(index, payload if kind == "done" else lost(index, payload))
                    break
                if s["claim"] is not None and not s["proc"].is_alive():
                    s["proc"].join(timeout=1)
                    index, s["claim"] = s["claim"], None
                    finished(index, lost(index, f"its lane (worker process {s['proc'].pid}) died with exit code "
                                                f"{s['proc'].exitcode} while evaluating it"))
                    s["conn"].close()
                    unit, slots[k] = s["unit"], (start() if queue or s["unit"] else s)
                    slots[k]["unit"] = unit  # the rest of its unit goes on in a fresh lane (it retrains what it reuses)
    finally:
        stop_worker_processes(slots)
