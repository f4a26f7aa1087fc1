"""How tight is an inequality? Its extremes found by optimisation, and the report of them.

A claim ``LHS <= RHS`` (or ``gap >= bound``) is tight when the supremum of ``LHS / RHS`` (or the
infimum of ``gap / bound``) over the inputs that meet its assumptions is 1. A random sample's
maximum says little about that supremum; this module climbs to it:

- :func:`optimise` runs a local scipy optimiser (Nelder-Mead by default) from random starts in an
  *unconstrained* parameterisation, ``project(case, z)`` mapping every real vector ``z`` into the
  assumptions (``case`` is the discrete part: dimension, tree, positions), and returns a
  :class:`Tightness`: the best value, the witness in full, the optimiser, starts, evaluations, seed.
  Deterministic given the seed.
- :func:`floored_rows` is the parameterisation of transition matrices with a floor ``m`` on every
  entry: ``row = m + (1 - d m) softmax(z_row)``; :func:`floored_rows_inverse` lifts a matrix back.
- :func:`report_tightness` puts a table of optima at several levels of an assumption's parameter
  into a tier result: Numbers, a Finding with the witness, and a figure.
- :class:`Polish` tells the property tier (``sim.claims.base.property_tier``) how to move a found
  example continuously (lift to ``(case, z)``, project back) so it can polish the examples nearest
  to a violation.

Unless a closed form or a proof of optimality is given (``exact=True``), the best value found is
only a bound on the extreme: a lower bound on a supremum, an upper bound on an infimum, and it is
labelled so wherever it is reported.
"""
from __future__ import annotations

import itertools
import json
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

__all__ = ["Tightness", "Polish", "NoFiniteValue", "optimise", "starts_by_dimension", "floored_rows", "floored_rows_inverse",
           "report_tightness", "report_certified_bracket", "BracketMismatch", "label_for", "EXACT_LABEL", "SUP_LABEL",
           "INF_LABEL", "BRACKET_ROUNDOFF"]

SUP_LABEL = "best found by optimisation (a lower bound on the supremum)"
#: How far an optimiser's float64 value may stand beyond a certified bound on the same extreme, relative to
#: ``max(1, |bound|)``, before the two are declared inconsistent: the float evaluation's round-off (about
#: 1e-14 for the claims' ratios of informations), with room to spare.
BRACKET_ROUNDOFF = 1e-9
INF_LABEL = "best found by optimisation (an upper bound on the infimum)"
EXACT_LABEL = "exact (closed form or proof of optimality)"
#: Logits beyond this size change no float64 probability that matters; it keeps z finite.
_LOGIT_BOUND = 60.0


def label_for(sense: str, exact: bool = False) -> str:
    """What a best value is: exact, or the one-sided bound an optimiser's best gives."""
    if sense not in ("sup", "inf"):
        raise ValueError(f"sense must be 'sup' or 'inf', got {sense!r}")
    return EXACT_LABEL if exact else SUP_LABEL if sense == "sup" else INF_LABEL


@dataclass(frozen=True)
class Tightness:
    """The extreme of an objective found by :func:`optimise`.

    ``value`` is the best ``sup`` (largest) or ``inf`` (smallest) value found, ``witness`` the input
    attaining it in full (``describe(point)``), ``level`` the assumption level it was searched at
    (e.g. ``{"min entry": 0.01}``), ``optimiser`` / ``starts`` / ``evaluations`` / ``seed`` how.
    """

    value: float
    sense: str
    witness: dict
    optimiser: str
    starts: int
    evaluations: int
    seed: int
    level: dict = field(default_factory=dict)
    exact: bool = False
    #: The optimum itself (``project(case, z)``), for a caller that goes on with it; not reported.
    point: Any = field(default=None, repr=False, compare=False)

    @property
    def label(self) -> str:
        return label_for(self.sense, self.exact)


def floored_rows(z, d: int, floor: float) -> np.ndarray:
    """The ``(d, d)`` row-stochastic matrix with every entry ``>= floor`` that ``z`` (``d*d`` reals)
    parameterises: ``row_i = floor + (1 - d floor) softmax(z_i)``. Every real ``z`` is feasible,
    so an unconstrained optimiser stays inside ``{min entry >= floor}``."""
    if not 0.0 <= floor * d < 1.0:
        raise ValueError(f"a floor of {floor} on {d} states leaves no room (needs 0 <= d * floor < 1)")
    z = np.clip(np.asarray(z, dtype=np.float64).reshape(d, d), -_LOGIT_BOUND, _LOGIT_BOUND)
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return floor + (1.0 - d * floor) * e / e.sum(axis=1, keepdims=True)


def starts_by_dimension(cases_by_dim: dict) -> Callable[[np.random.Generator], tuple[Any, np.ndarray]]:
    """A start sampler for :func:`optimise` over matrices of several sizes: each call takes the next
    dimension of ``cases_by_dim`` (``{d: [case, ...]}``, each case's first entry ``d``) in turn, so
    every size is searched, a random case of it, and ``d*d`` standard-normal logits times 2."""
    dims, turn = list(cases_by_dim), itertools.count()

    def sample(rng):
        pool = cases_by_dim[dims[next(turn) % len(dims)]]
        case = pool[int(rng.integers(len(pool)))]
        return case, 2.0 * rng.standard_normal(case[0] ** 2)

    return sample


def floored_rows_inverse(pi, floor: float) -> np.ndarray:
    """Logits ``z`` with ``floored_rows(z, d, floor) ~= pi`` (entries at the floor go to -60, i.e.
    within ``e^-60`` of it). ``pi`` must have every entry ``>= floor``."""
    pi = np.asarray(pi, dtype=np.float64)
    d = pi.shape[0]
    if pi.min() < floor - 1e-15:
        raise ValueError(f"cannot lift pi with min entry {pi.min():.3g} below the floor {floor:.3g}")
    above = np.maximum(pi - floor, 0.0) / (1.0 - d * floor)
    with np.errstate(divide="ignore"):
        z = np.log(above)
    z = np.clip(z, -_LOGIT_BOUND, _LOGIT_BOUND)
    return (z - z.mean(axis=1, keepdims=True)).ravel()


@dataclass(frozen=True)
class Polish:
    """How to move an example of a property search continuously.

    ``lift(x) -> (case, z)``: its discrete part and unconstrained parameters; ``project(case, z)
    -> x``: the example back, meeting every assumption for every real ``z`` (e.g. a floor on the
    entries of ``pi`` through :func:`floored_rows`). ``budget`` caps the evaluations per example
    (the profile's ``polish_budget`` setting overrides it)."""

    lift: Callable[[Any], tuple[Any, np.ndarray]]
    project: Callable[[Any, np.ndarray], Any]
    budget: int = 200


class NoFiniteValue(ValueError):
    """The objective was not finite at any point the optimiser evaluated (every start outside the
    objective's domain, e.g. polished points that all break an assumption)."""


def _finite(v) -> float:
    v = float(v)
    return v if math.isfinite(v) else math.nan


def optimise(objective: Callable[[Any], float], sampler: Callable[[np.random.Generator], tuple[Any, np.ndarray]] | None,
             project: Callable[[Any, np.ndarray], Any], *, sense: str = "sup", starts: int, budget: int, seed: int,
             describe: Callable[[Any], dict] = lambda point: {"point": repr(point)}, initial: Sequence = (),
             method: str = "Nelder-Mead", level: dict | None = None, exact: bool = False,
             neighbours: Callable[[Any], Sequence] | None = None) -> Tightness:
    """Best value of ``objective(project(case, z))`` from ``starts`` random starts plus ``initial``.

    ``sampler(rng) -> (case, z0)`` draws a start (a discrete case and unconstrained parameters);
    ``initial`` is a list of given ``(case, z0)`` starts (a property search's best examples). Each
    start is refined by ``scipy.optimize.minimize(method=method)`` (Nelder-Mead or L-BFGS-B with
    finite differences) with at most ``budget`` evaluations of the objective. With ``neighbours``
    (``case -> cases`` whose ``z`` has the same meaning), the end point is then tried on every
    neighbouring case and, where one is better, refined again there (one discrete step per start,
    so a start that drew a poor tree still reaches the best one). ``sense="sup"`` maximises,
    ``"inf"`` minimises; a non-finite value counts as the worst. The random starts use
    ``np.random.default_rng(seed)``, so the result is a function of the seed.
    """
    from scipy.optimize import minimize

    label_for(sense)
    if starts < 0 or budget < 1:
        raise ValueError(f"need starts >= 0 and budget >= 1, got starts={starts}, budget={budget}")
    if method not in ("Nelder-Mead", "L-BFGS-B"):
        raise ValueError(f"method must be 'Nelder-Mead' or 'L-BFGS-B', got {method!r}")
    sign = -1.0 if sense == "sup" else 1.0
    rng = np.random.default_rng(seed)
    runs = list(initial) + [sampler(rng) for _ in range(starts)] if sampler is not None else list(initial)
    if not runs:
        raise ValueError("optimise needs at least one start (starts > 0 with a sampler, or initial starts)")
    best = {"value": math.nan, "case": None, "z": None}
    evaluations = 0

    def loss(case, z):
        nonlocal evaluations
        evaluations += 1
        v = _finite(objective(project(case, z)))
        if not math.isnan(v) and (math.isnan(best["value"]) or sign * v < sign * best["value"]):
            best.update(value=v, case=case, z=np.array(z, dtype=np.float64))
        return math.inf if math.isnan(v) else sign * v

    opts = {"maxfev": budget, "xatol": 1e-7, "fatol": 1e-12} if method == "Nelder-Mead" else {"maxfun": budget}
    for case, z0 in runs:
        end = minimize(lambda z, c=case: loss(c, z), np.asarray(z0, dtype=np.float64), method=method, options=opts)
        if neighbours is not None:
            tried = [(loss(c, end.x), k, c) for k, c in enumerate(neighbours(case))]
            if tried and min(tried)[0] < end.fun:
                step = min(tried)[2]
                minimize(lambda z, c=step: loss(c, z), end.x, method=method, options=opts)
    if best["z"] is None:
        raise NoFiniteValue(f"the objective was not finite at any of the {evaluations} points the optimiser evaluated")
    point = project(best["case"], best["z"])
    how = (f"scipy {method} from {len(runs) - len(initial)} random starts (seed {seed})"
           + (", each followed by one step to the best neighbouring discrete case" if neighbours else "")
           + (f" and {len(initial)} given starts" if initial else "")
           + f", at most {budget} evaluations each, in an unconstrained parameterisation projected into the assumptions")
    return Tightness(value=float(best["value"]), sense=sense, witness=describe(point), optimiser=how,
                     starts=len(runs), evaluations=evaluations, seed=seed, level=dict(level or {}), exact=exact,
                     point=point)


def _level_text(level: dict) -> str:
    return ", ".join(f"{k} {v:g}" if isinstance(v, (int, float)) else f"{k} {v}" for k, v in level.items())


def report_tightness(ctx, res, table: Sequence[Tightness], *, quantity: str, parameter: str, claimed: float,
                     name: str, reading: str, closer: str = "") -> None:
    """Add the tightness table of one inequality to the tier result ``res`` (in place).

    ``table``: one :class:`Tightness` per level of the assumption's ``parameter`` (its level dict
    has the key ``parameter``); ``quantity`` names what was optimised (``"sup I(x_h;x_h') /
    bound"``), ``claimed`` is its claimed limit (1: the claim holds iff sup <= 1, or inf >= 1).
    Adds one Number per level (value, label, witness in the note), the Numbers of the search
    (starts, evaluations), a Finding (kind *stricter criterion*: how close the bound comes; its
    verdict FAILs only if an optimum breaks the claim, which then also FAILs the tier with the
    witness as its counterexample) and a figure of the best value against the parameter.
    """
    from sim.verdict import Finding, FindingKind, Number, Outcome, Verdict

    if not table:
        raise ValueError(f"{ctx.claim.id}: an empty tightness table for {quantity}")
    sense = table[0].sense
    broken = [t for t in table if (t.value > claimed if sense == "sup" else t.value < claimed)]
    for t in table:
        res.numbers.append(Number(f"tightness: {quantity} at {_level_text(t.level)}", t.value, seed=t.seed,
                                  note=f"{t.label}; witness: {json.dumps(t.witness)}"))
    res.numbers += [Number(f"tightness: optimiser starts per level ({quantity})", table[0].starts,
                           note=table[0].optimiser),
                    Number(f"tightness: objective evaluations, all levels ({quantity})",
                           sum(t.evaluations for t in table))]
    values = ", ".join(f"{t.value:.4g} ({_level_text(t.level)})" for t in table)
    detail = f"{quantity}: {values}; {table[0].label}" + (f"; {closer}" if closer else "")
    extreme = max(table, key=lambda t: t.value) if sense == "sup" else min(table, key=lambda t: t.value)
    res.findings.append(Finding(
        FindingKind.STRICTER, reading, Verdict.FAIL if broken else Verdict.PASS,
        detail if not broken else f"an optimum breaks the claim: {detail}",
        numbers=tuple(Number(f"{quantity} at {_level_text(t.level)}", t.value, seed=t.seed, note=t.label)
                      for t in table),
        witness={"level": extreme.level, "value": extreme.value, **extreme.witness}))
    if broken and res.counterexample is None:
        worst = broken[0]
        res.counterexample = {"found by": f"tightness optimisation ({worst.optimiser})", "level": worst.level,
                              quantity: worst.value, **worst.witness}
        res.verdict, res.conclusion = Verdict.FAIL, Outcome.VIOLATED
    res.figures.append(_tightness_figure(ctx, table, parameter, quantity, claimed, f"tightness-{name}"))


class BracketMismatch(RuntimeError):
    """An optimiser's value lies beyond a certified bound on the same extreme: one of the two
    computations is wrong, so neither may be reported (the tier is an ERROR, never a verdict)."""


def report_certified_bracket(ctx, res, table: Sequence[Tightness], certified: Sequence[tuple[float, float]], *,
                             quantity: str, parameter: str, claimed: float, name: str, reading: str) -> None:
    """Add a certified tightness bracket to the tier result ``res`` (in place): per level, the best value
    found by optimisation (``table``, :func:`optimise`; a lower bound on a supremum) and the certified
    bound from a branch-and-bound on the same domain (``certified``, ``(lower, upper)`` as
    :class:`theory.certified.Certificate` ``.bracket`` gives it), with the gap between them.

    An independent check: the optimiser's value must not exceed the certified upper bound (for a
    supremum; nor fall below the certified lower bound for an infimum) by more than
    :data:`BRACKET_ROUNDOFF`; if it does, :class:`BracketMismatch` is raised (the tier is an ERROR)."""
    from sim.verdict import Finding, FindingKind, Number, Verdict

    if len(table) != len(certified) or not table:
        raise ValueError(f"{ctx.claim.id}: {len(table)} optimised values for {len(certified)} certified bounds")
    sense = table[0].sense
    rows = []
    for t, (lo, hi) in zip(table, certified):
        bound = hi if sense == "sup" else lo
        beyond = t.value - bound if sense == "sup" else bound - t.value
        if not beyond <= BRACKET_ROUNDOFF * max(1.0, abs(bound)):
            raise BracketMismatch(f"{quantity} at {_level_text(t.level)}: the optimiser's {t.value!r} lies beyond the "
                                  f"certified {'upper' if sense == 'sup' else 'lower'} bound {bound!r}")
        gap = abs(bound - t.value)
        rows.append((t, bound, gap))
        level = _level_text(t.level)
        res.numbers += [Number(f"certified tightness: {quantity} at {level}: best optimised", t.value, seed=t.seed,
                               kind="property", note=f"{t.label}; witness: {json.dumps(t.witness)}"),
                        Number(f"certified tightness: {quantity} at {level}: certified "
                               f"{'upper' if sense == 'sup' else 'lower'} bound", bound, kind="certified",
                               note="branch-and-bound with rigorous enclosures on the same domain"),
                        Number(f"certified tightness: {quantity} at {level}: gap", gap, kind="certified",
                               note="certified bound minus the optimised value: how much of the extreme is unknown")]
    detail = "; ".join(f"[{t.value:.6g}, {b:.6g}] at {_level_text(t.level)} (gap {g:.2g})" if sense == "sup" else
                       f"[{b:.6g}, {t.value:.6g}] at {_level_text(t.level)} (gap {g:.2g})" for t, b, g in rows)
    broken = [t for t, b, _ in rows if (b > claimed if sense == "sup" else b < claimed)]
    res.findings.append(Finding(
        FindingKind.STRICTER, reading, Verdict.PASS if not broken else Verdict.INCONCLUSIVE,
        f"{quantity}: {detail}; the optimiser's value is a lower end found by search, the certified bound a proof"
        + ("" if not broken else f"; the certified bound passes the claimed {claimed:g} at "
           + ", ".join(_level_text(t.level) for t in broken)),
        numbers=tuple(Number(f"{quantity} at {_level_text(t.level)}: certified bound", b, kind="certified")
                      for t, b, _ in rows)))
    res.figures.append(_tightness_figure(ctx, table, parameter, quantity, claimed, f"certified-{name}",
                                         certified=[b for _, b, _ in rows]))


def _tightness_figure(ctx, table, parameter: str, quantity: str, claimed: float, name: str, *, certified=None):
    """The optimised extreme per level against the claimed limit (and the certified bound, when given)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xs = [float(t.level[parameter]) for t in table]
    fig, ax = plt.subplots(figsize=(4.6, 3.6))
    ax.plot(xs, [t.value for t in table], "o-", label=table[0].label)
    if certified is not None:
        ax.plot(xs, certified, "v--", label="certified bound (branch-and-bound)")
    ax.axhline(claimed, color="k", ls=":" if certified is not None else "--", lw=1, label="claimed limit")
    if all(x > 0 for x in xs) and max(xs) / min(xs) > 20:
        ax.set_xscale("log")
    ax.set_xlabel(parameter)
    ax.set_ylabel(quantity)
    ax.set_title(f"{ctx.claim.id}: {'certified tightness' if certified is not None else 'tightness'}")
    ax.legend(fontsize=7)
    return ctx.save_figure(fig, name)
