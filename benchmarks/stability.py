"""``python -m benchmarks.stability``: do the verdicts hold at master seeds nobody chose?

Runs ``icl-verify run`` once per master seed (same profile, same claims, each in its own
process and output folder), then lays the verdicts side by side. A claim is *stable* when it
gets the same verdict at every seed and never ERRORs. The exit status is 0 when every claim
is stable, 1 when one is not (a PASS at one seed and a FAIL at another is called out as a
flip), 2 for bad arguments.

By default the seeds are drawn at random (and printed), so that no one can tune a threshold
until the seeds they know pass: ``--seeds`` names them to reproduce a run. The table is
written to ``OUT/stability.md`` and ``OUT/stability.json`` beside each seed's report.

Slow (a whole profile per seed), so it is not part of the test suite; its comparison logic is
(``tests/sim/test_stability.py``).
"""
from __future__ import annotations

import argparse
import json
import secrets
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

#: The claims with a trained tier in the quick profile: the ones whose verdicts can move with the seed.
TRAINED = "W.P2,W.E1,W.E2,N.K1,N.K4,N.E,G.1,G.2,E.1"


@dataclass
class ClaimStability:
    """One claim across the seeds: its verdict at each, and the training seeds each decision used."""

    claim: str
    verdicts: dict[int, str]
    seeds_used: dict[int, str] = field(default_factory=dict)

    @property
    def stable(self) -> bool:
        return len(set(self.verdicts.values())) == 1 and "ERROR" not in self.verdicts.values()

    @property
    def flip(self) -> bool:
        """PASS at one seed and FAIL at another: the worst kind of instability."""
        return {"PASS", "FAIL"} <= set(self.verdicts.values())


def compare_runs(results: dict[int, dict]) -> list[ClaimStability]:
    """Side-by-side verdicts of results.json documents keyed by master seed. A claim missing from
    a run (the run crashed before it) counts as ``MISSING`` there, so it is never stable."""
    claims: list[str] = []
    for doc in results.values():
        claims += [c["id"] for c in doc.get("claims", []) if c["id"] not in claims]
    rows = []
    for cid in claims:
        row = ClaimStability(cid, {})
        for seed, doc in results.items():
            rec = next((c for c in doc.get("claims", []) if c["id"] == cid), None)
            row.verdicts[seed] = "MISSING" if rec is None else rec["verdict"]
            used = [f"{t['tier']}: {t['sequential']['seeds used']}" for t in (rec or {}).get("tiers", [])
                    if t.get("sequential")]
            if used:
                row.seeds_used[seed] = "; ".join(str(u) for u in used)
        rows.append(row)
    return rows


def render_markdown(rows: list[ClaimStability], seeds: list[int], profile: str, seconds: dict[int, float]) -> str:
    head = f"| claim | {' | '.join(f'seed {s}' for s in seeds)} | stable |"
    lines = [f"# Verdict stability, profile {profile}, master seeds {seeds}", "", head,
             "|" + "---|" * (len(seeds) + 2)]
    for r in rows:
        cells = [r.verdicts[s] + (f" ({r.seeds_used[s]} seeds)" if s in r.seeds_used else "") for s in seeds]
        mark = "yes" if r.stable else ("NO: PASS/FAIL flip" if r.flip else "NO")
        lines.append(f"| {r.claim} | {' | '.join(cells)} | {mark} |")
    lines += ["", "Wall time per seed: " + ", ".join(f"{s}: {seconds[s]:.0f} s" for s in seeds if s in seconds)]
    return "\n".join(lines) + "\n"


def _run_one(seed: int, args, out: Path) -> tuple[int, float, int]:
    cmd = [sys.executable, "-m", "sim", "run", "--profile", args.profile, "--seed", str(seed),
           "--out", str(out / f"seed-{seed}")]
    if args.claims:
        cmd += ["--claims", args.claims]
    t0 = time.perf_counter()
    with open(out / f"seed-{seed}.log", "w") as log:
        rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT).returncode
    return seed, time.perf_counter() - t0, rc


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.stability", description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, nargs="+", help="master seeds (default: --random of them, drawn at random)")
    p.add_argument("--random", type=int, default=5, metavar="K", help="how many random seeds to draw (default 5)")
    p.add_argument("--profile", default="quick")
    p.add_argument("--claims", default=TRAINED, help=f"claim pattern (default: the trained claims, {TRAINED}); "
                                                     "'' for every claim")
    p.add_argument("--out", type=Path, default=Path("reports/stability"))
    p.add_argument("--jobs", type=int, default=1, help="seeds run at once (each run is one process)")
    args = p.parse_args(argv)
    if args.random < 1 or args.jobs < 1:
        p.error("--random and --jobs must be at least 1")
    seeds = args.seeds or [secrets.randbelow(2**31) for _ in range(args.random)]
    args.out.mkdir(parents=True, exist_ok=True)
    print(f"stability: profile {args.profile}, claims {args.claims or 'all'}, master seeds {seeds}", flush=True)
    seconds, codes = {}, {}
    from concurrent.futures import ThreadPoolExecutor  # each job is a subprocess: threads only wait on it

    with ThreadPoolExecutor(args.jobs) as pool:
        for seed, secs, rc in pool.map(lambda s: _run_one(s, args, args.out), seeds):
            seconds[seed], codes[seed] = secs, rc
            print(f"  seed {seed}: exit {rc} after {secs:.0f} s", flush=True)
    results = {}
    for seed in seeds:
        path = args.out / f"seed-{seed}" / "results.json"
        results[seed] = json.loads(path.read_text()) if path.exists() else {"claims": []}
        if codes[seed] not in (0, 1):
            print(f"  seed {seed}: the run ended with exit {codes[seed]}; see {args.out / f'seed-{seed}.log'}")
    rows = compare_runs(results)
    text = render_markdown(rows, seeds, args.profile, seconds)
    (args.out / "stability.md").write_text(text)
    (args.out / "stability.json").write_text(json.dumps(
        {"profile": args.profile, "claims": args.claims, "seeds": seeds, "seconds": seconds, "exit codes": codes,
         "rows": [{**asdict(r), "stable": r.stable, "flip": r.flip} for r in rows]}, indent=2))
    print(text)
    unstable = [r.claim for r in rows if not r.stable]
    if unstable or not rows:
        print(f"unstable: {', '.join(unstable) or 'no claims ran'}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
