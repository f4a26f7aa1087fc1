"""``python -m benchmarks.accel_wall_time [--rounds N] [--seed S]``: what the accelerated paths buy
where a user waits, the quick profile's Markov-LM claims (E.1, G.1, G.2), with ``sim.accel`` on
and with ``ICL_VERIFY_ACCEL=0``, in alternating rounds in one process (the sweep workers inherit
the switch). Prints each claim's verdict and wall seconds per round, then the medians and ratios.
Slow (minutes per round), so not part of ``make bench``.
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

CLAIMS = ("E.1", "G.1", "G.2")


def measure(rounds: int = 2, seed: int = 0) -> dict[str, dict[str, list[float]]]:
    """``{mode: {claim: [seconds per round]}}`` for mode ``accel`` and ``plain``; raises if a
    claim's verdict differs between the modes."""
    from sim.claims import get
    from sim.runner import RunConfig, evaluate_claim

    old = os.environ.get("ICL_VERIFY_ACCEL")
    seconds: dict[str, dict[str, list[float]]] = {"accel": {}, "plain": {}}
    verdicts: dict[str, set[str]] = {c: set() for c in CLAIMS}
    try:
        for r in range(rounds):
            for mode in (("accel", "plain") if r % 2 == 0 else ("plain", "accel")):
                os.environ["ICL_VERIFY_ACCEL"] = "1" if mode == "accel" else "0"
                for cid in CLAIMS:
                    t0 = time.perf_counter()
                    with tempfile.TemporaryDirectory() as out:
                        res = evaluate_claim(get(cid), RunConfig(profile="quick", seed=seed), Path(out))
                    dt = time.perf_counter() - t0
                    seconds[mode].setdefault(cid, []).append(dt)
                    verdicts[cid].add(res.verdict.value)
                    print(f"round {r} {mode:5s} {cid}: {res.verdict.value} in {dt:.1f} s", flush=True)
    finally:
        if old is None:
            os.environ.pop("ICL_VERIFY_ACCEL", None)
        else:
            os.environ["ICL_VERIFY_ACCEL"] = old
    split = {c: v for c, v in verdicts.items() if len(v) > 1}
    if split:
        raise RuntimeError(f"verdicts differ between the accelerated and the plain paths: {split}")
    return seconds


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.accel_wall_time", description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    s = measure(args.rounds, args.seed)
    total = {m: sum(statistics.median(v) for v in s[m].values()) for m in s}
    for cid in CLAIMS:
        a, p = statistics.median(s["accel"][cid]), statistics.median(s["plain"][cid])
        print(f"{cid}: accelerated {a:.1f} s, plain {p:.1f} s, ratio {p / a:.2f}")
    print(f"together: accelerated {total['accel']:.1f} s, plain {total['plain']:.1f} s, "
          f"saved {total['plain'] - total['accel']:.1f} s")
    return 0


if __name__ == "__main__":  # the sweep workers are spawned: they must not rerun this
    raise SystemExit(main())
