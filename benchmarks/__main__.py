"""``python -m benchmarks [NAME ...] [--quick] [--repeats N]``: run benchmark modules, print a table.

Every module ``benchmarks/bench_<name>.py`` exposes ``run(*, quick, repeats)`` returning
rows with ``name, ours_s, baseline_s, ratio, max_abs_diff, tolerance, agree, note``.
With NAMEs only ``bench_<NAME>`` modules run. The exit status is 1 when a fast path and
its baseline disagree beyond the stated tolerance (a correctness failure, not a timing one).
"""
from __future__ import annotations

import argparse
import importlib
import math
import os
import pkgutil
import platform
import sys

import numpy as np


def _module_names() -> list[str]:
    here = os.path.dirname(os.path.abspath(__file__))
    return sorted(m.name[len("bench_"):] for m in pkgutil.iter_modules([here]) if m.name.startswith("bench_"))


def environment_line() -> str:
    """One line: python, numpy, BLAS, CPU count and the thread-count variables that are set."""
    blas = "unknown BLAS"
    try:
        info = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        blas = f"{info.get('name', '?')} {info.get('version', '')}".strip()
    except Exception:  # older numpy without mode="dicts"
        pass
    threads = ", ".join(f"{v}={os.environ[v]}" for v in
                        ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS") if v in os.environ)
    return (f"python {platform.python_version()}, numpy {np.__version__} ({blas}), "
            f"{os.cpu_count()} CPUs, threads: {threads or 'BLAS default (no *_NUM_THREADS set)'}")


def _fmt_s(t: float) -> str:
    return "—" if not math.isfinite(t) else f"{t:.3f}" if t >= 0.01 else f"{t:.2e}"


def format_table(rows) -> str:
    header = ["benchmark", "ours (s)", "baseline (s)", "ratio", "max |diff|", "agree", "note"]
    body = [[r.name, _fmt_s(r.ours_s), _fmt_s(r.baseline_s),
             "—" if not math.isfinite(r.ratio) else f"{r.ratio:.1f}x",
             f"{r.max_abs_diff:.1e}", f"{'yes' if r.agree else 'NO'} (tol {r.tolerance:g})", r.note]
            for r in rows]
    widths = [max(len(str(x)) for x in col) for col in zip(header, *body)]
    line = lambda cells: "  ".join(str(c).ljust(w) for c, w in zip(cells, widths)).rstrip()
    return "\n".join([line(header), line(["-" * w for w in widths])] + [line(b) for b in body])


def main(argv=None) -> int:
    names = _module_names()
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    parser.add_argument("only", nargs="*", metavar="NAME", help=f"benchmark modules to run (of: {', '.join(names)})")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, one repeat (a smoke run)")
    parser.add_argument("--repeats", type=int, default=3, help="timing repeats; the best is reported")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.only) - set(names))
    if unknown:
        parser.error(f"unknown benchmark {', '.join(unknown)}; available: {', '.join(names)}")
    print(environment_line(), flush=True)
    rows = []
    for name in args.only or names:
        module = importlib.import_module(f"benchmarks.bench_{name}")
        rows.extend(module.run(quick=args.quick, repeats=args.repeats))
    print(format_table(rows))
    return 0 if all(r.agree for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
