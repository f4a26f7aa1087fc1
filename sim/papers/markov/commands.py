"""The Markov home's command: ``icl-verify sweep``, a grid of Markov-chain LM runs on the K-chain task.

One model per (K, N, seed) of a grid (claims G.1, G.2, E.1 ask for the same runs), trained on a
local process pool, a Dask cluster or in this process (:mod:`sim.sweep`), each placed at its
nearest strategy. Found by the registry through ``COMMANDS`` (:mod:`sim.commands`).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from pathlib import Path

from sim.commands import EXIT_FAIL, EXIT_OK, Command, UsageError, positive_int

__all__ = ["COMMANDS"]


_SWEEP_EPILOG = """examples:
  icl-verify sweep --out sweeps/g1 --K 2,16,128,1024 --seeds 0,1,2 --set steps=1000
  icl-verify sweep --out sweeps/e1 --preset edelman --seeds 0,1,2,3
  icl-verify sweep --out sweeps/g1 --K 2,1024 --executor dask --address tcp://10.0.0.5:8786

Finished runs are written to DIR/runs/<id>.json as they finish; rerunning the same command
resumes (only missing or failed runs are computed). Run settings for --set (KEY=VALUE):
{fields}
"""


def _csv(kind):
    def parse(text: str):
        out = []
        for item in text.split(","):
            item = item.strip()
            if kind == "K" and item.lower() in ("inf", "infinity"):
                out.append("inf")
                continue
            try:
                v = int(item)
            except ValueError:
                raise argparse.ArgumentTypeError(f"expected comma-separated integers{' or inf' if kind == 'K' else ''}, "
                                                 f"got {item!r}") from None
            if v < (0 if kind == "seed" else 1):
                raise argparse.ArgumentTypeError(f"expected {'non-negative' if kind == 'seed' else 'positive'} "
                                                 f"integers, got {v}")
            out.append(v)
        if not out:
            raise argparse.ArgumentTypeError("expected at least one value")
        return out
    return parse


def _add_arguments(p: argparse.ArgumentParser) -> None:
    from sim.sweep import EXECUTORS

    p.add_argument("--out", type=Path, required=True, metavar="DIR", help="sweep folder (created; reused to resume)")
    p.add_argument("--preset", choices=("gibson", "edelman"), default="gibson",
                   help="base settings: gibson (C=10, alpha=0.1, width 64, attention+MLP; G.1's quick settings) or "
                        "edelman (C=2, fresh chains, width 16, attention only, AdamW 5e-4; E's main configuration). "
                        "Default gibson")
    p.add_argument("--K", type=_csv("K"), default=None, metavar="LIST",
                   help="numbers of training chains, e.g. 1,16,256 or inf (a fresh chain per sequence); "
                        "default 2,1024 (gibson) or inf (edelman)")
    p.add_argument("--N", type=_csv("N"), default=None, metavar="LIST",
                   help="context lengths (default 64 gibson, 100 edelman)")
    p.add_argument("--seeds", type=_csv("seed"), default=[0], metavar="LIST", help="training seeds (default 0)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="a run setting for every run (repeatable), e.g. steps=2000, lr=3e-4, mlp=false, "
                        "betas=0.9,0.95; unknown keys are errors (list below)")
    p.add_argument("--executor", choices=EXECUTORS, default=None,
                   help="local (process pool, default), dask (needs --address) or serial (this process)")
    p.add_argument("--address", default=None, metavar="tcp://HOST:PORT",
                   help="Dask scheduler address; implies --executor dask")
    p.add_argument("--workers", type=positive_int, default=None,
                   help="local worker processes (default: the CPU count)")
    p.add_argument("--device", choices=("cpu", "cuda", "auto"), default="cpu",
                   help="torch device of each run (default cpu; cuda runs use --executor serial unless told)")
    p.add_argument("--fresh", action="store_true", help="recompute runs already finished in DIR")
    p.add_argument("--no-progress", action="store_true", help="no progress lines")


def _setting_value(key: str, text: str):
    """``--set KEY=VALUE`` typed by the run setting's default (unknown keys are errors)."""
    import difflib

    from sim.papers.markov.task import MarkovRunSpec

    fields = {f.name: f for f in dataclasses.fields(MarkovRunSpec)}
    if key in ("K", "N", "seed"):
        raise UsageError(f"--set {key}=...: use --{key if key != 'seed' else 'seeds'} for the grid axes")
    if key not in fields:
        close = difflib.get_close_matches(key, fields, n=1)
        raise UsageError(f"unknown run setting {key!r}" + (f" (did you mean {close[0]!r}?)" if close else "")
                         + f"; known: {', '.join(sorted(fields))}")
    default = fields[key].default
    none_types = {"chain_seed": int, "prior": str, "grad_clip": float, "stop_when_nearest": str, "stop_set": str,
                  "threads": int}
    low = text.strip().lower()
    try:
        if default is None:
            return None if low == "none" else none_types[key](text)
        if isinstance(default, bool):
            if low not in ("true", "false", "1", "0", "yes", "no"):
                raise ValueError
            return low in ("true", "1", "yes")
        if isinstance(default, tuple):
            items = [t.strip() for t in text.split(",") if t.strip()]
            return [float(t) for t in items] if key == "betas" else items
        return type(default)(text)
    except (ValueError, TypeError):
        kind = "true/false" if isinstance(default, bool) else type(default).__name__ if default is not None \
            else none_types[key].__name__
        raise UsageError(f"--set {key}={text!r}: expected a {kind} value") from None


def _run(args) -> int:
    from sim.papers.markov.recipes import EDELMAN_MAIN, GIBSON_BASE
    from sim.device import DeviceError, resolve_device
    from sim.papers.markov.task import MarkovRunSpec, nearest
    from sim.sweep import SweepError, grid, run_sweep

    base = dict(EDELMAN_MAIN if args.preset == "edelman" else GIBSON_BASE)
    base.update(steps=2000 if args.preset == "edelman" else 600, n_eval=128, eval_every=50, eval_log_points=8)
    base = {k: list(v) if isinstance(v, tuple) else v for k, v in base.items()}
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep:
            raise UsageError(f"--set expects KEY=VALUE, got {item!r}")
        base[key.strip()] = _setting_value(key.strip(), value)
    Ks = args.K or (["inf"] if args.preset == "edelman" else [2, 1024])
    Ns = args.N or [base["N"]]
    try:
        device = resolve_device(args.device)
    except DeviceError as exc:
        raise UsageError(str(exc)) from None
    if device != "cpu":
        base["device"] = device
    params = grid(base, K=Ks, N=Ns, seed=args.seeds)
    for p in params:  # no memorising strategies without a finite set of training chains
        if p["K"] == "inf":
            p["strategies"] = [s for s in p["strategies"] if s not in ("M1", "M2")]
    try:
        for p in params:
            MarkovRunSpec.from_dict({k: v for k, v in p.items() if k != "device"})
    except ValueError as exc:
        raise UsageError(f"bad run settings: {exc}") from None
    executor = args.executor or ("dask" if args.address else "local" if device == "cpu" else "serial")
    if args.address and executor != "dask":
        raise UsageError("--address is for --executor dask")
    if os.path.lexists(args.out) and not os.path.isdir(args.out):  # refused before the header, not half-way
        raise UsageError(f"--out {args.out} is not a folder; nothing was written")
    print(f"icl-verify sweep: {len(params)} runs ({len(Ks)} K x {len(Ns)} N x {len(args.seeds)} seeds), "
          f"executor={executor}{' ' + args.address if args.address else ''}, out={args.out}", file=sys.stderr)
    say = None if args.no_progress else (lambda msg: print(msg, file=sys.stderr, flush=True))
    try:
        res = run_sweep("sim.papers.markov.task:run_markov", params, args.out, executor=executor, workers=args.workers,
                        address=args.address, resume=not args.fresh, progress=say)
    except SweepError as exc:
        raise UsageError(str(exc)) from None
    phases = [s for s in base["strategies"]]
    rows = [("K", "N", "seed", "nearest ood", "nearest id", "final loss", "steps", "seconds", "status")]
    summary = []
    for rid, p in zip(res.ids, res.params):
        rec = res.records.get(rid)
        if rec is None:
            rows.append((str(p["K"]), str(p["N"]), str(p["seed"]), "", "", "", "", "", "FAILED"))
            summary.append({"id": rid, "params": p, "status": "failed", "reason": res.failed.get(rid, "")})
            continue
        r = rec["result"]
        near = {w: nearest(r, w, phases)[0] for w in r["eval"]}
        loss_set = "id" if "id" in r["eval"] else "ood"
        rows.append((str(p["K"]), str(p["N"]), str(p["seed"]), near.get("ood", "-"), near.get("id", "-"),
                     f"{r['eval'][loss_set]['loss'][-1]:.4f}", str(r["steps"][-1]), f"{rec['elapsed_s']:.1f}",
                     "reused" if rid in res.reused_ids else "ok"))
        summary.append({"id": rid, "params": p, "status": "ok", "nearest": near, "steps": r["steps"][-1],
                        "seconds": rec["elapsed_s"]})
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for k, r in enumerate(rows):
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
        if k == 0:
            print("  ".join("-" * w for w in widths))
    from sim.files import atomic_write_text

    atomic_write_text(args.out / "summary.json", json.dumps({"runs": summary, "reused": res.reused,
                                                             "seconds": res.seconds}, indent=1, default=str))
    print(f"\n{len(res.records)} of {len(res.ids)} runs finished ({res.reused} reused) in {res.seconds:.1f} s; "
          f"records in {args.out / 'runs'}, summary in {args.out / 'summary.json'}")
    if res.failed:
        print(f"{len(res.failed)} run(s) failed (reasons in {args.out / 'failed'}); rerun the same command to "
              "resume", file=sys.stderr)
        return EXIT_FAIL
    return EXIT_OK


def _fields() -> str:
    from sim.papers.markov.task import MarkovRunSpec

    return ", ".join(f.name for f in dataclasses.fields(MarkovRunSpec) if f.name not in ("K", "N", "seed"))


COMMANDS = [Command(
    "sweep", _add_arguments, _run,
    parser=dict(
        help="train a grid of models on the K-chain Markov task (claims G.1, G.2, E.1), on a local "
             "process pool or a Dask cluster",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Train one model per (K, N, seed) of a grid on the in-context Markov-chain task and place each "
                    "at the nearest strategy (uniform, G1, G2, M1, M2; or E's uniform, unigram, bigram). Every run is "
                    "written to DIR/runs/ the moment it finishes, so a sweep resumes and a lost worker loses only "
                    "its own run. Workers run torch with one thread each.",
        epilog=_SWEEP_EPILOG.format(fields=_fields())))]
