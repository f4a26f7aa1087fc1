"""``python -m benchmarks.lanes``: the wall time of a whole profile with claims side by side (``--jobs``)
against one after another, in one process, and the check that both give the same numbers.

Runs :func:`sim.runner.run` twice on the same profile, master seed and claims: first with
``--jobs 1`` (every claim in this process, one after another: the baseline), then with
``--jobs N`` (:mod:`sim.lanes`). Prints both wall times, their ratio and the CPU time this
process and its children used, and compares the two runs claim by claim: the verdict and every
tier's numbers must be equal (timings aside). The exit status is 1 when they differ (a
correctness failure, not a timing one), 0 otherwise. A whole quick profile takes minutes each
way, so this is not part of the test suite; ``tests/sim/test_lanes.py`` holds the equality on
small claims.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path


def _cpu_seconds() -> float:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _numbers(doc: dict) -> dict:
    """Per claim: its verdict and each tier's verdict and numbers, without the timings some report
    ("training seconds ...")."""
    out = {}
    for c in doc["claims"]:
        tiers = [(t["tier"], t["verdict"], [n for n in t["numbers"] if "training seconds" not in n["name"]])
                 for t in c["tiers"]]
        out[c["id"]] = (c["verdict"], tiers)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.lanes", description=__doc__.split("\n\n")[0])
    p.add_argument("--profile", default="quick")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--claims", default="*", help="claim pattern (default: all)")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="lanes of the second run (default: CPUs)")
    p.add_argument("--out", type=Path, default=None, help="folder for the two runs (default: a temporary one)")
    args = p.parse_args(argv)

    from sim import claims as registry
    from sim.runner import RunConfig, run

    out = args.out or Path(tempfile.mkdtemp(prefix="bench-lanes-"))
    config = RunConfig(profile=args.profile, claims=args.claims, seed=args.seed)
    selected = registry.select(args.claims)
    walls, cpus, docs = {}, {}, {}
    for jobs in (1, args.jobs):
        folder = out / f"jobs{jobs}"
        t0, c0 = time.perf_counter(), _cpu_seconds()
        run(config, selected, out_dir=folder, show_progress=False, jobs=jobs)
        walls[jobs], cpus[jobs] = time.perf_counter() - t0, _cpu_seconds() - c0
        docs[jobs] = json.loads((folder / "results.json").read_text())
        print(f"--jobs {jobs}: {walls[jobs]:.1f} s wall, {cpus[jobs]:.1f} CPU-s ({len(selected)} claims, profile "
              f"{args.profile}, seed {args.seed})", flush=True)
    a, b = _numbers(docs[1]), _numbers(docs[args.jobs])
    differ = [cid for cid in a if a[cid] != b.get(cid)]
    print(f"speed-up: {walls[1] / walls[args.jobs]:.2f}x  (--jobs 1 / --jobs {args.jobs}, same process)")
    print(f"numbers: {'equal for every claim' if not differ else 'DIFFER for ' + ', '.join(differ)}  (runs in {out})")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
