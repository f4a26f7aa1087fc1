"""``python -m benchmarks.n_recipe``: N.E's primary reading under N's own ``many_graphs.ipynb`` recipe.

N's reference number for Fig. 2, mean first-layer attention on the parent 0.837 ± 0.054 over
20 graphs (:data:`sim.papers.nichani.claims.experiments.N_REFERENCE_MASS`), comes from
``many_graphs.ipynb``: vocabulary S = 3, T = 20, alpha = 0.1, a random graph per model (each
context position a root with probability 1/2, else a uniform earlier parent: the ``many`` law
of :func:`theory.graphs.n_parents`), CatFormer heads [1, 1] from zero, plain gradient descent at
a constant lr 1 for 2**14 steps, batch 1024 (:data:`sim.papers.nichani.recipes.N_MANY_GRAPHS_RECIPE`).
This runs claim N.E on that setting, one model per graph, through the same code path as
``icl-verify run`` (the paper profile with N.E's settings overridden), and writes

    OUT/N.E.json      the claim's result (verdict, numbers, readings, controls, findings)
    OUT/figures/      its figures

Slow on a CPU: about 50 ms a step at one thread, so about 14 minutes a model. It is not part of
the test suite; the README gives its outcome beside N's.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


def overrides(graphs: int, steps: int) -> dict:
    """N.E's settings for N's many-graphs run: ``graphs`` models, one per random graph."""
    return {"graphs": ("many",), "S": 3, "seeds": graphs, "random_graphs": graphs, "seeds_start": graphs,
            "workers": 1,
            "recipe": {"name": "N's recipe (many_graphs.ipynb)", "optimizer": "sgd", "lr": 1.0, "steps": steps,
                       "batch": 1024, "schedule": "constant"},
            "n_eval": 16384, "n_probe": 2048, "n_bayes": 512, "is_samples": 1000, "adam_reading": False}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.n_recipe", description=__doc__.splitlines()[0])
    ap.add_argument("--graphs", type=int, default=5, help="models, one per random graph (default 5; N used 20)")
    ap.add_argument("--steps", type=int, default=2**14, help="training steps (default 2**14, N's; fewer is not "
                                                               "N's recipe and does not decide)")
    ap.add_argument("--seed", type=int, default=0, help="master seed (default 0)")
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    if args.graphs < 1 or args.steps < 1:
        ap.error("--graphs and --steps must be positive")
    import torch

    from sim.claims import get
    from sim.runner import RunConfig, evaluate_claim
    from sim.verdict import to_jsonable

    torch.set_num_threads(1)
    args.out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    config = RunConfig(profile="paper", seed=args.seed, device=args.device,
                       overrides={"N.E": overrides(args.graphs, args.steps)})
    res = evaluate_claim(get("N.E"), config, args.out, progress=lambda m: print(m, file=sys.stderr, flush=True))
    (args.out / "N.E.json").write_text(json.dumps(to_jsonable(res), indent=1, default=str))
    print(f"N.E under N's many_graphs recipe: {res.verdict.value} ({time.time() - t0:.0f} s, {args.graphs} graphs, "
          f"{args.steps} steps); {args.out / 'N.E.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
