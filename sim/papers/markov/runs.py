"""Shared machinery of the trained Markov-chain claims (G.1-G.8, E.1): turning a profile's
settings into training runs (jobs of the grid runner, :func:`sim.claims.jobs.run_jobs`, with their
declared cost), the SA-transformer runs G.2 and G.7 share, reading a run's nearest strategy with its
paired error bar, the trained models a claim probes, and the figures.

Trained models: a run asked with ``keep_models`` returns its end-of-training and plateau weights
beside its record (:class:`sim.sweep.Kept`); its job record in the run folder holds both, and
:func:`sweep_records` keeps the models in this process, by job id, so :func:`kept_runs` gives them
to a later claim (G.3 and G.4 probe G.1's models: ``Claim.reuses``). A claim run alone, or resumed,
finds them in G.1's records; where there are none they are trained again from the same parameters:
the same model, since a run depends on its parameters only.
"""
from __future__ import annotations

import dataclasses
import json
import math
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from sim.claims.jobs import Cost, job_id, run_jobs
from sim.papers.markov.task import (MarkovRunSpec, audit_strategies, eval_schedule, evaluation_sets, predict,
                                    run_chains, run_markov, score_predictions, train_markov)
from sim.papers.markov.placement import placement, separations
from sim.seeds import derive_seed
from sim.sweep import Kept

#: Phases a trained model is placed in: the four strategies of G, plus "uniform" for a model
#: still at its initial plateau (G2 with add-alpha and a short context is close to uniform,
#: so without it an untrained model would be read as G2).
PHASES = ("uniform", "G1", "G2", "M1", "M2")
_SPEC_FIELDS = {f.name for f in dataclasses.fields(MarkovRunSpec)}
#: ``{job id: (record, kept models)}`` of the runs this process trained or read with ``keep_models``.
_KEPT: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
_KEPT_MAX = 512  # G.1's standard grid keeps 32 runs (about 0.9 MB each)


def run_params(ctx, **extra) -> dict[str, Any]:
    """A run's parameters from the active profile's settings (keys that are
    :class:`~sim.papers.markov.task.MarkovRunSpec` fields), the user's prior (as its spec string), the device and
    ``extra``."""
    p = {k: (list(v) if isinstance(v, tuple) else v) for k, v in ctx.settings.items() if k in _SPEC_FIELDS}
    if ctx.prior is not None:
        p["prior"] = ctx.prior.spec()
    p.update(extra)
    if ctx.device != "cpu":
        p["device"] = ctx.device
    return p


def sweep_records(ctx, name: str, params_list: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Train the grid of runs ``params_list`` (:func:`sim.papers.markov.task.run_markov`'s parameters)
    on the grid runner (:func:`sim.claims.jobs.run_jobs`: each run's record is kept in the run folder
    as it finishes, so an interrupted claim resumes) and return the records in grid order. A run
    asked with ``keep_models`` also leaves its models in this process (:func:`kept_runs`)."""
    args = markov_jobs(ctx, name, params_list)
    return [_unkept(ctx, args["jobs"][i], result) for i, result in enumerate(run_jobs(ctx, **args))]


def markov_jobs(ctx, name: str, params_list: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """:func:`sim.claims.jobs.run_jobs`'s arguments for the grid ``params_list`` of part ``name``
    (what :func:`sweep_records` trains and a claim's plan prices)."""
    return {"fn": run_markov, "jobs": [json.loads(json.dumps(dict(p), default=str)) for p in params_list],
            "key": markov_key, "label": f"{ctx.claim.id} {name} run", "cost": markov_cost}


def markov_key(params: Mapping[str, Any]) -> tuple:
    """A run's memo key: its parameters as sorted JSON (every input of the run)."""
    return ("markov.run", json.dumps({k: v for k, v in params.items() if k != "progress"}, sort_keys=True))


#: The fields of a run that set the cost of one training step, and of one evaluation.
_STEP_SHAPE = ("C", "K", "N", "width", "layers", "heads", "mlp", "positions", "batch")
_EVAL_SHAPE = ("C", "K", "N", "width", "layers", "heads", "mlp", "positions", "n_eval", "strategies", "ood")


def markov_cost(params: Mapping[str, Any]) -> Cost:
    """What one run of :func:`sim.papers.markov.task.run_markov` trains: ``steps`` AdamW steps of the
    Markov LM at ``batch`` and one evaluation at each step of its evaluation schedule (fewer when a
    stopping rule ends it early)."""
    spec = MarkovRunSpec.from_dict({k: v for k, v in params.items() if k in _SPEC_FIELDS})
    # K sets the cost only by being finite (the training chains, and an in-distribution evaluation set) or not
    d = {**dataclasses.asdict(spec), "K": "inf" if spec.K == "inf" else "finite"}
    shape = {k: (list(d[k]) if isinstance(d[k], tuple) else d[k]) for k in _STEP_SHAPE}
    eshape = {k: (list(d[k]) if isinstance(d[k], tuple) else d[k]) for k in _EVAL_SHAPE}
    n_evals = len(eval_schedule(spec.steps, spec.eval_every, spec.eval_log_points))
    return Cost.of("markov-lm", "sim.papers.markov.runs:timing_run", steps=[(shape, spec.steps)],
                   evals=[(eshape, n_evals)],
                   early_stop=bool(spec.stop_when_nearest or spec.stop_when_placed or spec.stop_rules))


#: The seed of the cost plan's timing runs: they time a step, no number of theirs is reported.
TIMING_SEED = 0
#: The training chains of a timing run with a finite K (the step's cost does not depend on how many).
_TIMING_CHAINS = 16


def timing_run(unit: str, shape: Mapping[str, Any], count: int, device: str = "cpu") -> None:
    """The cost plan's timing run (:mod:`sim.plan`): ``count`` training steps (``unit="step"``) or
    evaluations (``"eval"``) of the Markov LM at ``shape`` (the fields of :func:`markov_cost`)."""
    import torch

    from sim.papers.markov.model import MarkovLM
    from sim.papers.markov.task import _Evaluator

    fields = {k: (tuple(v) if isinstance(v, list) else v) for k, v in shape.items()}
    fields["K"] = "inf" if shape.get("K") == "inf" else _TIMING_CHAINS
    spec = MarkovRunSpec.from_dict({**fields,
                                    "steps": int(count) if unit == "step" else 0, "eval_every": 10 ** 9,
                                    "eval_log_points": 0, "n_eval": int(shape.get("n_eval", 2)),
                                    "strategies": tuple(shape.get("strategies", ("uniform",))),
                                    "ood": bool(shape.get("ood", True)), "threads": 1})
    if unit == "step":
        train_markov(spec, device=device)
        return
    P, mu = run_chains(spec)
    evaluator = _Evaluator(spec, P, mu, device)
    model = MarkovLM(spec.model_config(), generator=torch.Generator().manual_seed(TIMING_SEED)).to(device)
    for _ in range(int(count)):
        evaluator(model)


def _unkept(ctx, params: Mapping[str, Any], result: Any) -> dict[str, Any]:
    """A run's record; the models of a :class:`sim.sweep.Kept` result are kept in this process."""
    if not isinstance(result, Kept):
        return result
    _keep(job_id(run_markov, markov_key(params)), result.record, result.objects)
    return result.record


def _keep(rid: str, record: dict[str, Any], models: dict[str, Any]) -> None:
    if rid not in _KEPT and len(_KEPT) >= _KEPT_MAX:
        _KEPT.pop(next(iter(_KEPT)))
    _KEPT[rid] = (record, models)


def kept_runs(ctx, label: str, params_list: Sequence[Mapping[str, Any]]
              ) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """``(record, models)`` of each run of ``params_list`` (each with ``keep_models``), in order:
    from this process's memory where a claim's runs kept them (G.1's, for G.3 and G.4), the others
    through :func:`sim.claims.jobs.run_jobs` (found in the records of the claims this one ``reuses``
    in the run folder, else trained and recorded) and kept. ``models`` as
    :func:`sim.papers.markov.task.run_markov` returns them."""
    args = markov_jobs(ctx, label, params_list)
    args["label"] = label
    if not all(p.get("keep_models") for p in args["jobs"]):
        raise ValueError("kept_runs needs runs asked with keep_models=True")
    ids = [job_id(run_markov, markov_key(p)) for p in args["jobs"]]
    todo = [p for rid, p in zip(ids, args["jobs"]) if rid not in _KEPT]
    if todo:
        ctx.progress(f"{label}: {len(todo)} of {len(ids)} models not in memory")
        for p, result in zip(todo, run_jobs(ctx, **{**args, "jobs": todo})):
            _unkept(ctx, p, result)
    return [_KEPT[rid] for rid in ids]


def clear_kept() -> None:
    """Forget the models kept in this process (tests)."""
    _KEPT.clear()


#: The key the SA-transformer runs' seeds are derived under (with the master seed), in place of a
#: claim id: G.2 trains them and G.7 reads the same runs (:func:`sa_runs`).
SA_SEED_KEY = "sa-transformer runs"


def sa_seed(ctx, purpose: str) -> int:
    """A seed of the shared SA-transformer runs: from the master seed and :data:`SA_SEED_KEY`, the same
    for every claim that asks (G.2 and G.7), so a claim that reuses G.2 (``Claim.reuses``) finds G.2's
    runs in the run folder's records (:func:`sim.claims.jobs.run_jobs`)."""
    return derive_seed(ctx.seed, SA_SEED_KEY, purpose)


def sa_jobs(ctx, s: Mapping[str, Any], *, variant: str, layer1: str, loss: str, Ns: Sequence[int], n_seeds: int,
            batch: int, task: str = "markov", max_steps: int | None = None) -> dict[str, Any]:
    """:func:`sim.claims.jobs.run_jobs`'s arguments for the SA-transformer at every N of ``Ns``: one
    job per N, its seeds trained as one model (:func:`sim.papers.markov.sa_transformer.tau_job`); what
    :func:`sa_runs` trains and a claim's plan prices."""
    from sim.papers.markov.sa_transformer import tau_cost, tau_job, tau_key

    seeds = [sa_seed(ctx, f"sa-init-{i}") for i in range(int(n_seeds))]
    jobs = [{"N": int(N), "seeds": seeds, "C": s["C"], "alpha": s["alpha"], "layer1": layer1, "loss": loss,
             "lr": s["sa_lr"], "batch": int(batch), "max_steps": int(max_steps or s["sa_max_steps"]),
             "eval_every": s["sa_eval_every"], "n_eval": s["sa_n_eval"], "init_std": s["sa_init_std"],
             "patience": s["sa_patience"], "data_seed": sa_seed(ctx, f"sa-data-{variant}-N{N}"),
             "eval_seed": sa_seed(ctx, f"sa-eval-{variant}-N{N}"), "task": task,
             "prior": None if ctx.prior is None else ctx.prior.spec()} for N in Ns]
    return {"fn": tau_job, "jobs": jobs, "key": tau_key, "cost": tau_cost,
            "label": f"{ctx.claim.id} SA-transformer ({variant}) N"}


def sa_runs(ctx, s: Mapping[str, Any], *, variant: str, layer1: str, loss: str, Ns: Sequence[int], n_seeds: int,
            batch: int, task: str = "markov", max_steps: int | None = None) -> dict[str, Any]:
    """Train the SA-transformer at every N of ``Ns`` (seeds batched; :func:`sa_jobs` on the grid runner,
    :func:`sim.claims.jobs.run_jobs`) and collect ``tau_2Gen``.

    Returns ``points`` ``[(N, init seed, tau)]`` of the runs that crossed from G1 to G2, ``missing``
    ``[(N, init seed)]`` of those that did not, the ``records`` per N, the ``seeds`` and the
    training ``seconds``. ``s`` holds the profile's ``sa_*`` settings; ``variant`` names the runs'
    data and evaluation seeds (``sa`` for the decisive runs)."""
    args = sa_jobs(ctx, s, variant=variant, layer1=layer1, loss=loss, Ns=Ns, n_seeds=n_seeds, batch=batch, task=task,
                   max_steps=max_steps)
    seeds = args["jobs"][0]["seeds"] if args["jobs"] else []
    pts, missing, recs = [], [], []
    for N, rec in zip(Ns, run_jobs(ctx, **args)):
        recs.append(rec)
        for sd, t in zip(seeds, rec["tau"]):
            (missing.append((N, sd)) if t is None or t <= 0 else pts.append((N, sd, t)))
    return {"points": pts, "missing": missing, "records": recs, "seeds": seeds,
            "seconds": sum(r["seconds"] for r in recs)}


def check_labels(labels: Mapping[str, str]) -> None:
    """The instrument's own check: each phase label must compute that strategy's definition
    (a table with labels swapped, e.g. G2 <-> M2, is caught before any training)."""
    table = {label: (lambda s: lambda x, **kw: predict(s, x, **kw))(strategy) for label, strategy in labels.items()}
    bad = audit_strategies(table)
    if bad:
        raise ValueError("strategy labels disagree with their definitions (brute force): "
                         + ", ".join(f"{k} (max deviation {v:.3g}; computes {labels[k]})" for k, v in sorted(bad.items())))


def curve(rec, which: str, label: str, labels: Mapping[str, str] | None = None) -> np.ndarray:
    """The KL curve of strategy ``label`` (through ``labels``, phase -> strategy) over a record's
    evaluations, on the evaluation set ``which``."""
    return np.asarray(rec["eval"][which][(labels or {}).get(label, label)], dtype=float)


def phase_series(rec, which: str, phases: Sequence[str], labels=None) -> list[str]:
    """The nearest phase at every evaluation (:func:`sim.papers.markov.placement.placement`), in step order."""
    return [placement(rec, which, phases, i, labels)["phase"] for i in range(len(rec["steps"]))]


def compact(seq: Iterable[str]) -> list[str]:
    """``seq`` with consecutive repeats merged: ``G1, G1, G2, G1`` -> ``G1, G2, G1``."""
    out: list[str] = []
    for s in seq:
        if not out or out[-1] != s:
            out.append(s)
    return out


def seeds_spread(values: Sequence[float]) -> tuple[float, float]:
    """Mean and standard error over seeds, or over evaluation sequences (0 for one value)."""
    v = np.asarray(values, dtype=float)
    return float(v.mean()), (float(v.std(ddof=1) / math.sqrt(len(v))) if len(v) > 1 else 0.0)


# ------------------------------------------------------------- negative controls ---
# A control model is scored on the very evaluation sequences of the trained run it stands
# beside (rebuilt from the run's parameters), so its record has the shape a training run
# writes and goes through the claim's own deciding check unchanged.
Predictor = Callable[[np.ndarray, str], np.ndarray]  # (inputs (n, T), set name) -> probabilities (n, T, C)


class EvalSets:
    """The evaluation sets of one run (:func:`sim.papers.markov.task.evaluation_sets`), built once from
    the run's parameters; scores control models and the strategies against each other."""

    def __init__(self, params: Mapping[str, Any]):
        spec = MarkovRunSpec.from_dict({k: v for k, v in params.items() if k in _SPEC_FIELDS})
        P, mu = run_chains(spec)
        self.spec, self.P, self.mu = spec, P, mu
        self.sets = evaluation_sets(spec, P, mu)

    def record(self, steps: Sequence[float], predictors: Sequence[Predictor]) -> dict[str, Any]:
        """A record (the shape :func:`sim.papers.markov.task.train_markov` writes) of a model whose
        prediction at evaluation ``i`` (step ``steps[i]``) is ``predictors[i]``."""
        rec: dict[str, Any] = {"steps": list(steps), "eval": {}, "pair_order": list(self.spec.strategies)}
        for fn in predictors:
            for which, (inp, preds, targets) in self.sets.items():
                q = np.asarray(fn(inp, which), dtype=float)
                with np.errstate(divide="ignore"):
                    row = score_predictions(preds, np.log(q), targets)
                ev = rec["eval"].setdefault(which, {})
                for name, (v, se) in row.items():
                    ev.setdefault(name, []).append(v)
                    if name != "pair_se":
                        ev.setdefault(name + "_se", []).append(se)
        return rec

    def separations(self) -> dict[str, dict[str, dict[str, tuple[float, float]]]]:
        """:func:`sim.papers.markov.placement.separations` of this run's evaluation sets."""
        return separations(self.sets)


def frozen_record(rec: Mapping[str, Any], index: int = 0) -> dict[str, Any]:
    """``rec`` with every evaluation replaced by evaluation ``index`` (``0``: the model as
    initialised, i.e. never trained), on the same steps."""
    return _reindexed(rec, [index] * len(rec["steps"]))


def reversed_record(rec: Mapping[str, Any]) -> dict[str, Any]:
    """``rec``'s evaluations in reverse order on the same steps: the same models, their
    stages run backwards."""
    return _reindexed(rec, list(range(len(rec["steps"]) - 1, -1, -1)))


def _reindexed(rec, order):
    ev = {which: {name: [vals[i] for i in order] for name, vals in row.items()} for which, row in rec["eval"].items()}
    return {**rec, "eval": ev}


COLORS = {"uniform": "#bbbbbb", "G1": "#9ecae1", "G2": "#08519c", "M1": "#fdae6b", "M2": "#d94801",
          "unigram": "#9ecae1", "bigram": "#08519c"}


def phase_diagram(path, title: str, rows: Sequence[tuple[str, Any]], which: str, phases: Sequence[str],
                  labels=None) -> None:
    """One band per (row label, record): evaluation steps on a log axis, coloured by the
    nearest phase."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    fig, ax = plt.subplots(figsize=(5.6, 0.35 * len(rows) + 1.6), dpi=110)
    for y, (name, rec) in enumerate(rows):
        steps = np.maximum(np.asarray(rec["steps"], dtype=float), 1.0)
        ser = phase_series(rec, which, phases, labels)
        edges = np.concatenate([steps, [steps[-1] * 1.05]])
        for i, ph in enumerate(ser):
            ax.barh(y, edges[i + 1] - edges[i], left=edges[i], height=0.8, color=COLORS.get(ph, "k"), linewidth=0)
    ax.set_xscale("log")
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([r[0] for r in rows], fontsize=7)
    ax.set_xlabel("training step")
    ax.set_ylabel("training chains K, seed")
    ax.set_title(title, fontsize=9)
    ax.legend(handles=[Patch(color=COLORS[p], label=p) for p in phases], fontsize=7, ncol=len(phases),
              loc="upper center", bbox_to_anchor=(0.5, -0.18 if len(rows) > 4 else -0.3), frameon=False)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def distance_curves(path, title: str, groups: Sequence[tuple[str, Sequence[Any]]], which: str,
                    phases: Sequence[str], labels=None) -> None:
    """KL to each strategy against the training step: one panel per group (e.g. one K),
    mean over seeds with the seeds' range shaded."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(groups), figsize=(min(5.0 * len(groups), 11), 3.6), dpi=110, squeeze=False)
    for ax, (name, recs) in zip(axes[0], groups):
        n = min(len(r["steps"]) for r in recs)
        steps = np.maximum(np.asarray(recs[0]["steps"][:n], dtype=float), 1.0)
        for p in phases:
            ys = np.array([curve(r, which, p, labels)[:n] for r in recs])
            ax.plot(steps, ys.mean(axis=0), color=COLORS.get(p), label=p, lw=1.4)
            if len(recs) > 1:
                ax.fill_between(steps, ys.min(axis=0), ys.max(axis=0), color=COLORS.get(p), alpha=0.2, lw=0)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("training step")
        ax.set_ylabel(f"KL(strategy || model), {which}")
        ax.set_title(name, fontsize=9)
    axes[0][0].legend(fontsize=7)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def rel(ctx, path) -> str:
    """``path`` relative to the run folder ``ctx.out_dir`` (how tiers list their figures)."""
    return str(path.relative_to(ctx.out_dir))
