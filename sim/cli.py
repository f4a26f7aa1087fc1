"""The ``icl-verify`` command line.

    icl-verify list [--claims P]         claims, sources, primary readings, tiers, deciding profile, last verdict
    icl-verify run [options]             run claims, write a report, exit 1 if any claim FAILs (or crashes)
    icl-verify plan [options]            what a run would train, its CPU/GPU-hours and wall time, before training
    icl-verify show RUN_DIR [--format F] print a finished run's summary (text, md, json or latex)
    icl-verify prior SPEC [options]      audit claims under a prior on transition matrices
    icl-verify sweep --out DIR [options] train a grid of models on the K-chain Markov task, locally or on Dask
    icl-verify diff RUN_A RUN_B          what changed between two runs; exit 1 if a verdict got worse

Exit codes: 0 every claim ran and none FAILed; 1 at least one claim FAILed (a finished run);
2 a usage or input error (one line says what, nothing is written); 3 an internal error (a check
crashed: its claim is ERROR in the report; or the tool itself failed: --debug shows the traceback).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from contextlib import ExitStack
from pathlib import Path

from sim.claims.base import PROFILES
from sim.commands import EXIT_FAIL, EXIT_INTERNAL, EXIT_OK, EXIT_USAGE
from sim.commands import UsageError as _UserError
from sim.commands import nonneg_int as _nonneg_int
from sim.commands import positive_float as _positive_float
from sim.commands import positive_int as _positive_int
from sim.files import RunEnvironmentError, UserCodeError

_EXIT_EPILOG = ("exit codes: 0 every claim ran and none FAILed; 1 at least one FAIL; 2 usage or input error; "
                "3 internal error (a crashed check or a bug; --debug shows the traceback)")
#: What a run uses when neither the command line nor (with --resume) the run's run.json says.
_RUN_DEFAULTS = {"profile": "quick", "claims": "*", "seed": 0, "device": "auto", "z": 3.0}


def _add_run_options(p: argparse.ArgumentParser) -> None:
    # Defaults are None here and filled in by _run_settings, so that --resume can take them from run.json.
    p.add_argument("--profile", choices=PROFILES, default=None,
                   help="how hard to try: quick (minutes on a laptop), standard (larger samples and budgets), paper "
                        "(the papers' sizes; GPU or patience). Default: quick")
    p.add_argument("--claims", default=None, metavar="PATTERN",
                   help="comma-separated globs over claim ids, e.g. 'W.*' or 'W.L1,N.K3' (default: all)")
    p.add_argument("--seed", type=_nonneg_int, default=None, help="master seed; every number in the report is "
                   "reproducible from it (default 0)")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default=None,
                   help="torch device for Monte Carlo and training; auto picks cuda when present (default auto)")
    p.add_argument("--out", type=Path, default=None, metavar="DIR",
                   help="where to write the report (default reports/<run-id>/, the run id derived from the config)")
    p.add_argument("--resume", action="store_true",
                   help="continue an interrupted run in --out: its settings are read from DIR/run.json, and finished "
                        "claims are kept")
    p.add_argument("--plugin", action="append", default=[], metavar="FILE", type=Path,
                   help="a Python file defining CLAIMS = [...] of your own claims (repeatable)")
    p.add_argument("--z", type=_positive_float, default=None,
                   help="standard errors of margin a Monte Carlo or trained PASS needs (default 3)")
    p.add_argument("--corpus", type=Path, default=None, metavar="DIR",
                   help="the counterexample corpus: every FAIL's counterexample is stored there, and the property "
                        "tier replays it before any search (default: DIR/corpus of --out; give one folder to share it "
                        "between runs)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars (for logs)")
    p.add_argument("--jobs", type=_positive_int, default=None, metavar="N",
                   help="claims evaluated at once, each in its own worker process; the numbers are the same as with "
                        "1 (default: $ICL_VERIFY_JOBS, else the number of CPUs on the CPU and 1 on a GPU; 1: one "
                        "after another in this process)")


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line (the contract of exit 2): what is wrong, and
    where the options are listed, in place of argparse's usage block."""

    def error(self, message):
        self.exit(EXIT_USAGE, f"{self.prog}: error: {_one_line(message)} (`{self.prog} --help` lists the options)\n")


def _one_line(text) -> str:
    """A message as the one line an input error prints (its first line; a prior spec's caret is left out)."""
    lines = str(text).strip().splitlines()
    return lines[0].rstrip() if lines else ""


def build_parser() -> argparse.ArgumentParser:
    """The ``icl-verify`` argument parser: the built-in commands and those of the paper homes."""
    parser = _Parser(
        prog="icl-verify",
        description="Verify the claims of the papers on how transformers learn causal structure in context: "
                    "exact, symbolic, property-based, Monte Carlo and trained checks with honest verdicts.",
        epilog=_EXIT_EPILOG)
    parser.add_argument("--debug", action="store_true", help="show the traceback of an internal error")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    p_list = sub.add_parser("list", help="list the claims with their sources, tiers and last verdict")
    p_list.add_argument("--reports", type=Path, default=Path("reports"),
                        help="folder searched for the last verdicts (default reports/)")
    p_list.add_argument("--plugin", action="append", default=[], metavar="FILE", type=Path,
                        help="also list the claims of this plugin file")
    p_list.add_argument("--claims", default=None, metavar="PATTERN",
                        help="only these claims (globs, e.g. 'G.*'), each followed by its primary reading: the "
                             "seed's statement quoted, its lines and its setting")

    p_run = sub.add_parser("run", help="run claims and write report.md, report.html, results.json, junit.xml",
                           epilog=_EXIT_EPILOG)
    _add_run_options(p_run)
    from sim.graphs import GRAPH_FILE_FORMATS, GRAPH_SPECS

    p_run.add_argument("--graph", action="append", default=None, metavar="GRAPH",
                       help="run the selected claims that take a causal graph on GRAPH in place of their own: " +
                            GRAPH_FILE_FORMATS + "; or " + GRAPH_SPECS + ". Nodes 0..n-1, edges parent -> child with "
                            "parent < child; each claim says what fits (one parent per node and the query last, or "
                            "N.K9's 2 parents and the target last) and the run lists the claims that took it. One "
                            "graph per run (its id and run.json record it; --resume keeps it)")
    p_run.add_argument("--budget", type=_nonneg_int, default=None, metavar="N",
                       help="examples for each property tier's counterexample search (default: the profile's); "
                            "0 replays the corpus only")
    _add_execution_options(p_run)
    _add_plan_parser(sub)

    p_show = sub.add_parser("show", help="print the summary of a finished run")
    p_show.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="a run folder (holding results.json)")
    p_show.add_argument("--format", choices=("text", "md", "json", "latex"), default="text",
                        help="text (the summary table, default), md (a Markdown table), json (each claim's verdict, "
                             "headline and deciding number) or latex (a booktabs table for an appendix)")
    p_show.add_argument("--standalone", action="store_true",
                        help="with --format latex: a whole document that compiles as it is (article, booktabs)")

    from sim.priors import spec_help

    p_prior = sub.add_parser(
        "prior", help="audit the claims under a prior on transition matrices (e.g. 'dirichlet(alpha=0.1)')",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Audit a prior on transition matrices: which assumptions of the papers it meets (N Knowl 10, "
                    "W Lemmas 3-4, irreducibility, aperiodicity; table at the top of the report), then run every "
                    "prior-dependent claim under it and say, per broken assumption, whether a counterexample to a "
                    "conclusion was found on draws that break it (necessary) or not within the budget (removable).",
        epilog="Prior specs (nest them; numbers may be written 1/3):\n" + spec_help())
    p_prior.add_argument("spec", metavar="SPEC", help="a prior spec, e.g. \"floor(dirichlet(alpha=1), gamma=0.3)\", "
                         "or module:function / path/to/file.py:function for your own sampler")
    p_prior.add_argument("--d", type=_positive_int, default=None,
                         help="number of states for priors that do not fix it (default: each claim's own sizes)")
    p_prior.add_argument("--budget", type=_positive_int, default=None, metavar="N",
                         help="examples for the counterexample search where an assumption fails (default: profile's)")
    p_prior.add_argument("--draws", type=_at_least_two, default=None, metavar="N",
                         help="draws per d for the assumption audit, at least 2 (a mean's standard error needs two; "
                              "default 2000 quick, 10000 standard, 50000 paper)")
    p_prior.add_argument("--graph", action="append", default=None, metavar="GRAPH",
                         help="graph for N's root-fraction and T_eff items: chain[:T], icf[:T], star[:T], roots[:T], "
                              "a parent list such as '[-1,0,1,-1]', or " + GRAPH_FILE_FORMATS +
                              "; positions 0..T-1, edges parent -> child with parent < child, the last position "
                              "(the query) a root (repeatable; default chain:20 and icf:20)")
    _add_run_options(p_prior)

    from sim.verdict import Z_DEFAULT

    p_diff = sub.add_parser(
        "diff", help="what changed between two finished runs: verdicts, numbers that moved, claims in one run only",
        description="Compare two finished runs: the claims whose verdict changed (with both headlines), the numbers "
                    "that moved beyond their combined standard errors (statistical numbers) or beyond round-off "
                    "(exact and symbolic ones), then the claims present in only one run.",
        epilog="exit codes: 0 no verdict got worse; 1 a verdict got worse (more severe: ERROR > FAIL > "
               "ASSUMPTION_UNMET > INCONCLUSIVE > PASS; changes to or from NOT_RUN never count); 2 a run folder is "
               "missing or not a finished run")
    p_diff.add_argument("run_a", type=Path, metavar="RUN_A", help="the earlier run folder (holding results.json)")
    p_diff.add_argument("run_b", type=Path, metavar="RUN_B", help="the later run folder (holding results.json)")
    p_diff.add_argument("--z", type=_positive_float, default=Z_DEFAULT,
                        help=f"combined standard errors a statistical number must move to be listed "
                             f"(default {Z_DEFAULT:g})")
    p_diff.add_argument("--format", choices=("text", "json"), default="text",
                        help="text (default) or json (verdict_changes, moved_numbers, only_in_a, only_in_b)")
    for command in _paper_commands():
        command.add_arguments(sub.add_parser(command.name, **command.parser))
    return parser


# ------------------------------------------------------------ where jobs run, and the cost plan --
def _add_execution_options(p: argparse.ArgumentParser) -> None:
    """``run``'s options for where the training jobs go (:mod:`sim.cluster`)."""
    from sim.cluster import EXECUTORS

    p.add_argument("--executor", choices=EXECUTORS, default="local",
                   help="where the training jobs run: local (worker processes on this machine, default), dask (every "
                        "job a task of the Dask scheduler at --address, e.g. a SLURM cluster from dask-jobqueue) or "
                        "dask-local (a Dask LocalCluster of --workers processes on 127.0.0.1); the numbers are the "
                        "same. Needs the cluster extra for dask: pip install 'icl-causal-verify[cluster]'")
    p.add_argument("--address", default=None, metavar="tcp://HOST:PORT",
                   help="the Dask scheduler of --executor dask")
    p.add_argument("--workers", type=_positive_int, default=None, metavar="N",
                   help="training worker processes: per claim with --executor local (default: the CPUs), in the "
                        "LocalCluster with --executor dask-local (default: the CPUs)")


def _add_plan_parser(sub) -> None:
    p = sub.add_parser(
        "plan", help="what a run would train, its CPU/GPU-hours and wall time, before training anything",
        description="List each claim's training jobs (models x steps x batch; a sequential decision at its first "
                    "look and at its cap), time a few steps of each model family on this device (cached per machine "
                    "and device under $XDG_CACHE_HOME/icl-causal-verify), and estimate the CPU- or GPU-hours and "
                    "the wall time on --jobs N local workers or --workers W cluster workers.",
        epilog="exit codes: 0 the plan was printed; 2 usage or input error")
    p.add_argument("--profile", choices=PROFILES, default="quick", help="the profile to plan (default quick)")
    p.add_argument("--claims", default="*", metavar="PATTERN",
                   help="comma-separated globs over claim ids, e.g. 'N.E,G.2' (default: all)")
    p.add_argument("--seed", type=_nonneg_int, default=0, help="master seed (the jobs' seeds follow it; default 0)")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                   help="the device to price the jobs on (default auto: cuda when present)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--jobs", type=_positive_int, default=None, metavar="N",
                       help="wall time on N local workers (default: the number of CPUs; 1 on a GPU)")
    where.add_argument("--workers", type=_positive_int, default=None, metavar="W",
                       help="wall time on W cluster workers (--executor dask)")
    p.add_argument("--plugin", action="append", default=[], metavar="FILE", type=Path,
                   help="a Python file defining CLAIMS = [...] of your own claims (repeatable)")
    p.add_argument("--recalibrate", action="store_true",
                   help="time every model family again instead of reading the cached measurements")
    p.add_argument("--format", choices=("text", "json"), default="text", help="text (a table, default) or json")


def _cmd_plan(args) -> int:
    from sim.device import DeviceError, resolve_device
    from sim.plan import Calibration, make_plan

    _load_plugins(args.plugin)
    selected = _select(args.claims)
    try:
        device = resolve_device(args.device)
    except DeviceError as exc:
        raise _UserError(str(exc)) from None
    workers = args.workers or args.jobs or (1 if device == "cuda" else os.cpu_count() or 1)
    calibration = Calibration(device)
    if args.recalibrate:
        calibration.entries = {}
    plan = make_plan(selected, args.profile, seed=args.seed, device=device, workers=workers,
                     cluster=args.workers is not None, calibration=calibration,
                     progress=lambda m: print(f"icl-verify plan: {m}", file=sys.stderr, flush=True))
    if args.format == "json":
        print(json.dumps(plan.to_dict(), indent=1))
        return EXIT_OK
    print(f"icl-verify plan: profile={args.profile} seed={args.seed} device={device} claims={len(selected)} "
          f"({args.claims}); unit costs measured on this machine ({calibration.path})")
    print(plan.render())
    return EXIT_OK


#: A run whose estimate exceeds this many seconds says so before it trains anything.
LONG_RUN_S = 600


def _run_estimate(args, config, selected, execution):
    """The plan of a run (:func:`sim.plan.make_plan`), its one-line total printed when it is long, and the
    :class:`sim.plan.Eta` that gives the progress bar its time left; None where nothing can be priced
    cheaply (a quick run on a machine with no cached measurements: quick is minutes by design)."""
    try:
        return _priced_run(args, config, selected, execution)
    except Exception as exc:  # noqa: BLE001 - an estimate never takes a run down
        print(f"icl-verify: no estimate of the run's time ({type(exc).__name__}: {exc})", file=sys.stderr)
        return None


def _priced_run(args, config, selected, execution):
    from sim.cluster import workers_of
    from sim.plan import Calibration, Eta, make_plan, plan_claims

    calibration = Calibration(config.device)
    measure = config.profile != "quick"
    if not measure:
        rows = plan_claims(selected, config.profile, seed=config.seed, device=config.device, z=config.z,
                           overrides=config.overrides)
        if calibration.missing([j.cost for r in rows for j in r.cap if j.cost is not None]):
            return None
    say = (lambda m: None) if args.no_progress else (lambda m: print(f"icl-verify: {m}", file=sys.stderr, flush=True))
    workers = workers_of(execution) or execution.workers or (1 if config.device == "cuda" else os.cpu_count() or 1)
    plan = make_plan(selected, config.profile, seed=config.seed, device=config.device, z=config.z,
                     overrides=config.overrides, workers=workers, cluster=execution.kind == "dask",
                     calibration=calibration, progress=say)
    if config.profile == "paper" or plan.wall_seconds("first") > LONG_RUN_S:
        print(f"icl-verify: estimate: {plan.summary()} (`icl-verify plan --profile {config.profile}` lists it claim "
              f"by claim; measured on this machine)", file=sys.stderr, flush=True)
    return Eta(plan)


def _paper_commands():
    """The commands the paper homes add (e.g. the Markov home's ``sweep``), found by the registry."""
    from sim.claims import paper_commands

    return paper_commands()


def main(argv=None) -> int:
    """Run ``icl-verify`` with ``argv`` (default ``sys.argv[1:]``) and return the exit status: 0 ok,
    1 a claim FAILed (``diff``: a verdict got worse), 2 a usage or input error (one line on
    stderr), 3 an internal error (the traceback with ``--debug``), 130 interrupted."""
    _printable_streams()
    try:
        parser = build_parser()
    except (ImportError, ValueError) as exc:  # a paper home that does not import (its commands join the parser)
        print(f"icl-verify: error: {_one_line(exc)}", file=sys.stderr)
        return EXIT_USAGE
    args = parser.parse_args(argv)
    try:
        if args.command == "list":
            return _cmd_list(args)
        if args.command == "run":
            return _cmd_run(args)
        if args.command == "plan":
            return _cmd_plan(args)
        if args.command == "show":
            return _cmd_show(args)
        if args.command == "prior":
            return _cmd_prior(args)
        if args.command == "diff":
            return _cmd_diff(args)
        for command in _paper_commands():
            if args.command == command.name:
                return command.run(args)
    except KeyboardInterrupt:
        started = args.command in ("run", "prior") and getattr(args, "_out_dir", None) is not None
        hint = (f"; the claims that finished are saved: `icl-verify run --resume --out {args._out_dir}` continues"
                if started else "")
        print(f"\ninterrupted{hint}", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `icl-verify list | head`: the reader left; not an error
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except (_UserError, UserCodeError) as exc:  # UserCodeError: a user's file or function that raised or exited
        print(f"icl-verify: error: {_one_line(exc)}", file=sys.stderr)
        return EXIT_USAGE
    except Exception as exc:  # a bug of ours, or an environment failure: one line, the traceback on --debug
        if args.debug:
            raise
        print(f"icl-verify: internal error: {type(exc).__name__}: {exc} (rerun with --debug for the traceback)",
              file=sys.stderr)
        return EXIT_INTERNAL
    parser.error(f"unknown command {args.command!r}")
    return EXIT_USAGE


def _printable_streams() -> None:
    """Text that is not UTF-8 (a file name's bytes, as Python keeps them in a path) is printed with
    backslash escapes instead of ending the command with a UnicodeEncodeError."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None and getattr(stream, "errors", "strict") == "strict":
            try:
                reconfigure(errors="backslashreplace")
            except (ValueError, OSError):  # pragma: no cover - a stream that cannot change
                pass


def _at_least_two(text: str) -> int:
    """An argparse type: an integer ``>= 2`` (``prior --draws``: a mean's standard error needs two draws)."""
    v = _positive_int(text)
    if v < 2:
        raise argparse.ArgumentTypeError(f"expected an integer of at least 2, got {v}")
    return v


def _load_plugins(paths) -> None:
    from sim import claims

    for p in paths:
        try:
            claims.load_plugin(p)
        except (OSError, ValueError, TypeError, SyntaxError, ImportError) as exc:  # UserCodeError is a ValueError
            raise _UserError(f"cannot load claim plugin {p}: {exc}") from None
    try:
        claims.all_claims()  # installed packages' claims load here; their errors are the user's input too
    except (ValueError, TypeError, ImportError) as exc:
        raise _UserError(str(exc)) from None


def _cmd_list(args) -> int:
    from sim import claims

    _load_plugins(args.plugin)
    if args.claims is None:
        chosen = claims.all_claims()
    else:
        try:
            chosen = claims.select(args.claims)
        except claims.UnknownClaimError as exc:
            raise _UserError(str(exc)) from None
    last = _last_verdicts(args.reports)
    rows = [("id", "source", "primary reading", "tiers", "decided by", "last verdict", "title")]
    for c in chosen:
        lv = last.get(c.id)
        tiers = ",".join(c.tiers) or ("(see note)" if c.pending else "(none)")
        title = f"{c.title} [{c.pending}]" if c.pending and not c.tiers else c.title
        rows.append((c.id, c.source.cite(), c.primary.cite() if c.primary else "—", tiers,
                     c.decided_by if c.tiers else "(see note)", f"{lv[0]} ({lv[1]})" if lv else "—", title))
    n = len(rows[0]) - 1
    widths = [max(len(r[i]) for r in rows) for i in range(n)]
    for k, r in enumerate(rows):
        print("  ".join(r[i].ljust(widths[i]) for i in range(n)) + "  " + r[n])
        if k == 0:
            print("  ".join("-" * w for w in widths) + "  -----")
    if args.claims is not None:
        for c in chosen:
            print(f"\n{c.id}: {c.title}  (decided by {c.decided_by if c.tiers else 'see note'})")
            if c.primary is None:
                print("  primary reading: none declared")
                continue
            print(f'  {c.primary.cite()}: "{c.primary.statement}"')
            if c.primary.setting:
                print(f"  setting: {c.primary.setting}")
    return EXIT_OK


def _last_verdicts(reports: Path) -> dict[str, tuple[str, str]]:
    """claim id -> (verdict, run id) from the most recent finished run that has it. A folder whose
    results.json cannot be read (:func:`sim.files.read_results`) is left out, with a one-line warning."""
    from sim.files import RunFileError, read_results

    out: dict[str, tuple[str, str]] = {}
    if not reports.is_dir():
        return out

    def mtime(path: Path) -> float:
        try:
            return path.stat().st_mtime
        except OSError:  # a dangling link or a loop: read_results names it below
            return 0.0

    for path in sorted(reports.glob("*/results.json"), key=mtime, reverse=True):
        try:
            doc = read_results(path.parent)
        except (FileNotFoundError, RunFileError) as exc:
            print(f"icl-verify: warning: skipping {path.parent}: {_one_line(exc)}", file=sys.stderr)
            continue
        for d in doc["claims"]:
            if d["verdict"] != "NOT_RUN":
                out.setdefault(d["id"], (d["verdict"], doc["run_id"]))
    return out


def _run_settings(args) -> None:
    """Fill the run options the user left out: from the run's run.json with --resume (so
    ``icl-verify run --resume --out DIR`` continues exactly that run), else the defaults.
    An option given with --resume must agree with run.json; a value read from run.json that
    this tool cannot use is an error naming run.json and the key."""
    from sim.device import DeviceError, resolve_device
    from sim.files import RunError, read_run_json
    from sim.runner import RunConfig

    saved = {}
    args._run_json, args._saved = None, {}
    if getattr(args, "resume", False):
        if args.out is None:
            raise _UserError("--resume needs --out DIR, the folder of the run to continue")
        try:
            doc = read_run_json(args.out)
        except RunError as exc:
            raise _UserError(str(exc)) from None
        if doc is None:
            raise _UserError(f"--resume: {args.out} holds no run to resume (no run.json)")
        args._run_json = Path(args.out) / "run.json"
        saved = dict(doc["config"])
        known = {f.name for f in dataclasses.fields(RunConfig)}
        try:
            RunConfig(**{k: v for k, v in saved.items() if k in known})
            resolve_device(saved["device"])
        except (RunError, DeviceError) as exc:
            raise _UserError(f"--resume: {args._run_json}: {exc}") from None
        for key in _RUN_DEFAULTS:
            given = getattr(args, key)
            if given is not None and key in saved and given != saved[key] and not (key == "device" and given == "auto"):
                raise _UserError(f"--resume: the run in {args.out} was made with --{key} {saved[key]}, not {given}; "
                                 f"leave --{key} out to continue it, or start a fresh run in another folder")
    for key, default in _RUN_DEFAULTS.items():
        if getattr(args, key) is None:
            if key in saved:
                args._saved[key] = saved[key]
            setattr(args, key, saved.get(key, default))
    args._saved_overrides = saved.get("overrides", {}) if args._run_json is not None else None


def _from_run_json(args, key: str) -> str:
    """Where a run option's value came from, for an error: run.json's key on --resume, else the option."""
    if key in getattr(args, "_saved", {}):
        return f"--resume: {args._run_json}: config.{key}"
    return f"--{key}"


def _run_overrides(args, selected) -> dict:
    """The run's per-claim overrides: ``--budget N`` as each selected claim's ``max_examples``; with
    --resume, the run's own from run.json (a --budget given then must be the one it was made with)."""
    budget = getattr(args, "budget", None)
    given = {} if budget is None else {c.id: {"max_examples": int(budget)} for c in selected}
    saved = getattr(args, "_saved_overrides", None)
    if saved is None:
        return given
    if budget is not None and given != saved:
        made = sorted({str(o.get("max_examples")) for o in saved.values() if isinstance(o, dict)})
        how = f"with --budget {', '.join(made)}" if made else "without --budget"
        raise _UserError(f"--resume: the run in {args.out} was made {how}, not with --budget {budget}; leave --budget "
                         "out to continue it, or start a fresh run in another folder")
    return saved


def _run_graph(args) -> dict | None:
    """The graph of ``run --graph`` as :func:`sim.graphs.graph_record`, or None. With --resume it is
    the run's own, from its run.json: a --graph given then must be that graph."""
    from sim.graphs import GraphFileError, GraphSpecError, graph_from_spec, graph_record
    from sim.files import read_run_json

    given = None
    if args.graph:
        if len(args.graph) > 1:
            raise _UserError(f"--graph is given {len(args.graph)} times; a run takes one graph (run once per graph: "
                             "each run gets its own id)")
        try:
            given = graph_record(graph_from_spec(args.graph[0]))
        except GraphFileError as exc:
            raise _UserError(f"--graph {exc}") from None
        except GraphSpecError as exc:
            raise _UserError(f"--graph: {exc}") from None
    if not args.resume:
        return given
    saved = read_run_json(args.out)["config"].get("graph")  # _run_settings has checked that the run exists
    if given is not None and (saved is None or (given["nodes"], given["edges"]) != (saved["nodes"], saved["edges"])):
        made = "without --graph" if saved is None else f"with --graph {saved['name']} ({saved['nodes']} nodes)"
        raise _UserError(f"--resume: the run in {args.out} was made {made}, not with --graph {args.graph[0]} "
                         f"({given['nodes']} nodes, other edges); leave --graph out to continue it, or start a fresh "
                         "run in another folder")
    return saved


def _make_config(args, prior_spec=None, overrides=None, graph=None):
    from sim import claims
    from sim.device import DeviceError, resolve_device
    from sim.runner import RunConfig, RunError

    try:
        device = resolve_device(args.device)
        return RunConfig(profile=args.profile, claims=args.claims, seed=args.seed, device=device,
                         prior=prior_spec, z=args.z, overrides=overrides or {}, plugins=claims.plugin_digests(),
                         graph=graph)
    except (DeviceError, RunError) as exc:
        raise _UserError(str(exc)) from None


def _select(pattern, args=None):
    """The claims ``pattern`` (``--claims``, or with --resume run.json's, which ``args`` tells) selects."""
    from sim import claims

    try:
        return claims.select(pattern)
    except claims.UnknownClaimError as exc:
        if "claims" not in getattr(args, "_saved", {}):
            raise _UserError(str(exc)) from None
        plugins = " ".join(f"--plugin {p}" for p in claims.plugin_digests()) or "none"
        raise _UserError(f"{_from_run_json(args, 'claims')}: {exc} (the plugins loaded now: {plugins}; a run of "
                         "plugin claims resumes with the same --plugin files)") from None


def _jobs(args, config) -> int:
    """``--jobs``; else the environment's ``ICL_VERIFY_JOBS``; else one claim per CPU on the CPU and one
    at a time on a GPU (one device)."""
    if args.jobs is not None:
        return args.jobs
    env = os.environ.get("ICL_VERIFY_JOBS", "").strip()
    if env:
        try:
            return _positive_int(env)
        except argparse.ArgumentTypeError:
            raise _UserError(f"ICL_VERIFY_JOBS={env!r}: expected a positive integer, the claims evaluated at once "
                             "(as --jobs)") from None
    return 1 if config.device == "cuda" else os.cpu_count() or 1


def _validate_run_inputs(args, config) -> None:
    """Every check of a run's inputs that is left once its configuration is made, before the header
    line is printed and before any audit, training or claim: the environment (``ICL_VERIFY_JOBS``),
    where the training jobs go (``--executor``, ``--address``, ``--workers``: :func:`sim.cluster.check_executor`)
    and the --out folder (:func:`sim.runner.check_out_dir`: a file, not writable, held by another
    run, non-empty and not a run's, or with --resume not this run). Sets ``args._jobs``. (A --corpus
    that cannot be written is not refused: the run completes and says so.)"""
    from sim.cluster import ExecutorError, check_executor
    from sim.runner import DEFAULT_REPORTS, RunError, check_out_dir

    args._jobs = _jobs(args, config)
    if getattr(args, "executor", None) is not None:  # run's options (prior's jobs run on this machine)
        try:
            check_executor(args.executor, args.address, args.workers)
        except ExecutorError as exc:
            raise _UserError(str(exc)) from None
    out_dir = args.out if args.out is not None else DEFAULT_REPORTS / config.run_id
    try:
        check_out_dir(out_dir, config, resume=args.resume)
    except RunError as exc:
        raise _UserError(str(exc)) from None


def _execute(args, config, selected, prior=None, header_extra="", audit=None, execution=None) -> int:
    from sim.corpus import Corpus
    from sim.report import summary_table
    from sim.runner import RunError, run

    print(f"icl-verify {config.run_id}: profile={config.profile} seed={config.seed} device={config.device} "
          f"claims={len(selected)} ({config.claims}){header_extra}", file=sys.stderr)
    from sim.runner import DEFAULT_REPORTS

    args._out_dir = args.out if args.out is not None else DEFAULT_REPORTS / config.run_id
    corpus = Corpus(args.corpus if args.corpus is not None else args._out_dir / "corpus", config)
    try:
        eta = _run_estimate(args, config, selected, execution) if execution is not None else None
        out_dir, dicts = run(config, selected, out_dir=args.out, resume=args.resume, prior=prior,
                             show_progress=not args.no_progress, audit=audit, corpus=corpus, jobs=args._jobs,
                             execution=execution, eta=eta)
    except RunEnvironmentError as exc:  # a full disk, an unwritable folder, a lost scheduler: fix it, resume
        command = "prior SPEC" if args.command == "prior" else "run"
        raise _UserError(f"{exc}; what finished is kept: once that is fixed, `icl-verify {command} --resume "
                         f"--out {args._out_dir}` continues") from None
    except RunError as exc:
        raise _UserError(str(exc)) from None
    print(summary_table(dicts))
    from sim.report import jobs_summary, jobs_text

    if jobs_summary(dicts):
        per = ", ".join(f"{d['id']} {d['jobs']['reused']}" for d in dicts if (d.get("jobs") or {}).get("reused"))
        print(f"\nTraining jobs: {jobs_text(jobs_summary(dicts))}" + (f" (per claim: {per})" if per else ""))
    if corpus.summary():
        print(f"\nCounterexample corpus {corpus.root}: {corpus.summary()}")
    for line in corpus.warnings:  # the run completed; what could not be read or written is said here
        print(f"icl-verify: corpus: {line}", file=sys.stderr)
    print(f"\nReport: {out_dir / 'report.md'}  (also report.html, results.json, junit.xml)")
    crashed = [d["id"] for d in dicts if d["verdict"] == "ERROR"]
    failed = [d["id"] for d in dicts if d["verdict"] == "FAIL"]
    if failed:
        print(f"{len(failed)} claim(s) FAILED: {', '.join(failed)}", file=sys.stderr)
    if crashed:
        print(f"{len(crashed)} check(s) crashed (ERROR in the report, with the traceback): {', '.join(crashed)}",
              file=sys.stderr)
        return EXIT_INTERNAL
    return EXIT_FAIL if failed else EXIT_OK


def _cmd_run(args) -> int:
    from sim.runner import RunError, graph_claims

    _run_settings(args)
    _load_plugins(args.plugin)
    selected = _select(args.claims, args)
    config = _make_config(args, overrides=_run_overrides(args, selected), graph=_run_graph(args))
    try:
        takers = graph_claims(config, selected)
    except RunError as exc:
        raise _UserError(str(exc)) from None
    _validate_run_inputs(args, config)
    header = ""
    if config.graph is not None:
        header = (f" graph={config.graph['name']} ({config.graph['nodes']} nodes, {len(config.graph['edges'])} edges) "
                  f"on {', '.join(c.id for c in takers)}")
        others = len(selected) - len(takers)
        if others:
            header += f"; {others} other claim(s) keep their own graphs"
    with ExitStack() as stack:  # where the training jobs go, for the length of the run
        try:  # a Dask cluster that cannot be started or reached: one line naming it, before the header line
            execution = stack.enter_context(_start_executor(args))
        except RunEnvironmentError as exc:
            raise _UserError(str(exc)) from None
        return _execute(args, config, selected, header_extra=header, execution=execution)


def _start_executor(args):
    """``run``'s :class:`sim.claims.jobs.Execution`, a context (:func:`sim.cluster.start_executor`): a
    LocalCluster started for the run, or the connection to a scheduler, closed after it."""
    from sim.cluster import start_executor

    if args.executor != "local":
        where = args.address or "a LocalCluster on 127.0.0.1"
        print(f"icl-verify: training jobs on Dask ({args.executor}: {where})", file=sys.stderr, flush=True)
    return start_executor(args.executor, args.address, args.workers)


def _cmd_show(args) -> int:
    from sim.report import load_results, summary_table

    if args.standalone and args.format != "latex":
        raise _UserError("--standalone goes with --format latex")
    try:
        doc = load_results(args.run_dir)
    except (FileNotFoundError, ValueError) as exc:
        raise _UserError(str(exc)) from None
    if args.format == "latex":
        from sim.latex import latex_table

        print(latex_table(doc, standalone=args.standalone))
        return EXIT_OK
    if args.format != "text":
        from sim.show import render

        print(render(doc, args.format))
        return EXIT_OK
    cfg = doc["config"]
    print(f"{doc['run_id']}: profile={cfg['profile']} seed={cfg['seed']} device={cfg['device']} "
          f"commit={doc.get('git_commit')} elapsed={doc.get('elapsed_s')}s")
    if doc.get("prior"):
        print(f"prior: {doc['prior']}")
    if cfg.get("graph"):
        ran = [d["id"] for d in doc["claims"] if d.get("graph")]
        print(f"graph: {cfg['graph']['name']} ({cfg['graph']['nodes']} nodes, {len(cfg['graph']['edges'])} edges) "
              f"on {', '.join(ran) or 'no claim that ran'}")
    if doc.get("audit"):
        from sim.report import audit_text, necessity_text

        print(audit_text(doc["audit"]))
        print(necessity_text(doc["audit"]))
    print(summary_table(doc["claims"]))
    print("\n" + ", ".join(f"{k} {v}" for k, v in doc["summary"].items() if v))
    return EXIT_OK


#: The most matrix entries (draws x d x d) the prior audit may hold: it keeps every draw of a size at once.
_MAX_AUDIT_ENTRIES = 2**30


def _cmd_prior(args) -> int:
    """``icl-verify prior SPEC``: parse, audit, run the prior-dependent claims under the prior,
    write the reports with the assumptions table at the top. A bad spec, sampler, option, graph,
    environment or --out folder fails here, before the audit and before anything is written (exit 2)."""
    from sim import claims as registry
    from sim.audit import AUDIT_DRAWS, DEFAULT_DIMS, DEFAULT_GRAPHS, audit_prior, claim_dims, parse_graph
    from sim.priors import PriorError, parse_prior
    from sim.report import audit_text, necessity_text

    _run_settings(args)
    _load_plugins(args.plugin)
    try:
        prior = parse_prior(args.spec)
        if args.d is not None:
            prior = prior.bind(args.d)
    except PriorError as exc:
        raise _UserError(str(exc)) from None
    if prior.d == 1:
        raise _UserError(f"{prior.spec()} is a prior on 1 state: every transition matrix is [[1]], no token carries "
                         "information and the claims have nothing to check; give d >= 2")
    chosen = _select(args.claims, args)
    selected = [c for c in chosen if c.prior_dependent]
    skipped = [c.id for c in chosen if not c.prior_dependent]
    if not selected:
        dep = [c.id for c in registry.all_claims() if c.prior_dependent]
        raise _UserError(f"none of the claims matching {args.claims!r} depends on the prior; prior-dependent claims: "
                         f"{', '.join(dep)}")
    try:
        graphs = [parse_graph(g) for g in (getattr(args, "graph", None) or DEFAULT_GRAPHS)]
    except PriorError as exc:
        raise _UserError(str(exc)) from None
    config = _make_config(args, prior_spec=prior.spec(), overrides=_run_overrides(args, selected))
    dims = [prior.d] if prior.d is not None else (claim_dims(selected, config.profile) or list(DEFAULT_DIMS))
    n_draws = getattr(args, "draws", None) or AUDIT_DRAWS[config.profile]
    if n_draws * max(dims) ** 2 > _MAX_AUDIT_ENTRIES:
        raise _UserError(f"--draws {n_draws} at d = {max(dims)} is {n_draws * max(dims) ** 2:.3g} matrix entries, more "
                         f"than the audit holds at once ({_MAX_AUDIT_ENTRIES:.3g}: 8 GiB of float64); give fewer "
                         "--draws or a smaller d")
    _validate_run_inputs(args, config)
    if skipped and args.claims.strip() != "*":
        print(f"skipping {len(skipped)} claim(s) that do not depend on the prior: {', '.join(skipped)}", file=sys.stderr)
    if not args.no_progress:
        print(f"icl-verify prior: auditing {prior.spec()} on {n_draws} draws at d = {', '.join(map(str, dims))} and "
              f"{len(graphs)} graph(s)", file=sys.stderr, flush=True)
    try:
        audit = audit_prior(prior, dims=dims, n_draws=n_draws, seed=config.seed, graphs=graphs, z=config.z)
    except PriorError as exc:
        raise _UserError(f"the prior failed while it was being audited: {exc}") from None
    print(audit_text(audit))
    print()
    code = _execute(args, config, selected, prior=prior, audit=audit, header_extra=f" prior={prior.spec()}")
    print()
    print(necessity_text(audit))
    return code


def _cmd_diff(args) -> int:
    from sim.diff import MalformedRunError, diff_runs, render_json, render_text
    from sim.report import load_results

    docs = []
    for run_dir in (args.run_a, args.run_b):
        try:
            docs.append(load_results(run_dir))
        except (FileNotFoundError, ValueError) as exc:
            raise _UserError(str(exc)) from None
    try:
        d = diff_runs(docs[0], docs[1], z=args.z)
    except MalformedRunError as exc:
        run_dir = args.run_a if exc.which == "A" else args.run_b
        raise _UserError(f"{run_dir}: {exc.detail}; rerun the claims to rewrite it") from None
    print(render_json(d) if args.format == "json" else render_text(d))
    return EXIT_FAIL if d.worse else EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
