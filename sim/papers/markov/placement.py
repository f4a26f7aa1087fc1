"""Where a trained Markov-chain model stands among the strategies: the nearest one with its
paired error bar, and (G.1's reading) whether it is *placed* there in absolute terms.

One home for the reading, because two callers must compute it identically: a claim reads it
on a finished record, and a run (:func:`sim.papers.markov.task.train_markov`, setting
``stop_when_placed``) stops as soon as the same reading holds, so that the claim finds at the
run's last evaluation exactly the judgement that stopped it.
"""
from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np

from sim.verdict import Outcome, compare

__all__ = ["kl_per_sequence", "placement", "separations", "absolute_placement", "judge_end", "plateau_index",
           "ONE_POINT"]

#: The 1-point phases (seed 004: G1 and M1 pool unigram statistics), read as one plateau.
ONE_POINT = ("G1", "M1")


def kl_per_sequence(p: np.ndarray, logq: np.ndarray) -> np.ndarray:
    """``mean_t KL(p[i, t] || q[i, t])`` per sequence ``i`` (nats, ``0 log 0 = 0``); ``p``
    ``(n, T, C)`` probabilities, ``logq`` ``(n, T, C)`` log-probabilities. Shape ``(n,)``."""
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(p > 0, p * (np.log(np.where(p > 0, p, 1.0)) - logq), 0.0)
    return terms.sum(axis=2).mean(axis=1)


def placement(rec, which: str, phases: Sequence[str], index: int = -1,
              labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Nearest phase at evaluation ``index``: ``{"phase", "runner_up", "margin", "se", "kl"}``,
    ``margin = KL(runner-up) - KL(nearest)`` and ``se`` its paired standard error over the
    evaluation sequences."""
    labels = dict(labels or {p: p for p in phases})
    order = rec["pair_order"]
    kl = {p: float(rec["eval"][which][labels[p]][index]) for p in phases}
    ranked = sorted(phases, key=lambda p: kl[p])
    best, second = ranked[0], ranked[1]
    pse = rec["eval"][which]["pair_se"][index]
    se = float(pse[order.index(labels[second])][order.index(labels[best])])
    return {"phase": best, "runner_up": second, "margin": kl[second] - kl[best], "se": se, "kl": kl,
            "step": rec["steps"][index]}


def separations(sets: Mapping[str, tuple[Any, Mapping[str, np.ndarray], Any]]
                ) -> dict[str, dict[str, dict[str, tuple[float, float]]]]:
    """``{which: {a: {b: (mean KL(p_a || p_b), its standard error)}}}`` over the sequences of each
    evaluation set ``{which: (inputs, {strategy: predictions}, targets)}``: how far apart the
    strategies themselves are, measured as the model is (``p_b`` in the model's place). A
    strategy's zero probabilities are floored at 1e-300 (a finite, very large distance)."""
    out = {}
    for which, (_, preds, _) in sets.items():
        logs = {b: np.log(np.maximum(p, 1e-300)) for b, p in preds.items()}
        out[which] = {}
        for a in preds:
            row = {}
            for b in preds:
                if b != a:
                    kl = kl_per_sequence(preds[a], logs[b])
                    row[b] = (float(kl.mean()), float(kl.std(ddof=1) / math.sqrt(len(kl))) if len(kl) > 1 else 0.0)
            out[which][a] = row
    return out


def absolute_placement(rec, which: str, separations, phases: Sequence[str] | None = None, index: int = -1,
                       labels=None, group: Sequence[str] = (), z: float = 3.0) -> dict[str, Any]:
    """The nearest phase with its "none of the above" test.

    ``d = KL(s* || model)`` for the nearest strategy ``s*`` must stay below the radius
    ``r = 1/2 min_{j != s*} KL(s* || s_j)``: the model must approximate ``s*`` at least twice as
    well as any other strategy does, measured by the same functional ``KL(s* || .)``. (For a
    metric ``d(m, s*) < d(s*, s_j) / 2`` would make ``s*`` the unique nearest by the triangle
    inequality; the factor is that argument's, not a tuned constant.) ``close`` is
    ``compare(d, r)`` with the standard errors over the evaluation sequences (``d``'s and
    ``r``'s in quadrature). ``group``: strategies read as one phase (e.g. the 1-point pair):
    the radius then runs over strategies outside the group. ``phases``: the record's strategies
    (its ``pair_order``) unless given."""
    phases = tuple(rec["pair_order"]) if phases is None else tuple(phases)
    pl = placement(rec, which, phases, index, labels)
    labels = dict(labels or {p: p for p in phases})
    near = pl["phase"]
    d_se = float(rec["eval"][which][labels[near] + "_se"][index])
    inside = set(group) if near in group else {near}
    others = [(m, se) for other, (m, se) in separations[which][labels[near]].items()
              if other not in {labels[p] for p in inside} and other in {labels[p] for p in phases}]
    r, r_se = min(others)
    close = compare(pl["kl"][near], 0.5 * r, stderr=math.hypot(d_se, 0.5 * r_se), z=z, direction="<=")
    return {**pl, "d": pl["kl"][near], "d_se": d_se, "radius": 0.5 * r, "radius_se": 0.5 * r_se, "close": close}


def judge_end(pl: Mapping[str, Any], wanted: Sequence[str], z: float) -> Outcome:
    """One run placed (:func:`absolute_placement`): HELD if placed (close, and nearest with margin
    unless the runner-up is wanted too) at a wanted phase; VIOLATED if "none of the above" with
    margin or placed at any other phase (uniform plateau, G1, the other regime's strategy);
    UNDECIDED within the error."""
    close = compare(pl["d"], pl["radius"], stderr=math.hypot(pl["d_se"], pl["radius_se"]), z=z, direction="<=")
    if close is Outcome.VIOLATED:
        return Outcome.VIOLATED
    sure = pl["runner_up"] in wanted and pl["phase"] in wanted or \
        compare(pl["margin"], 0.0, stderr=pl["se"], z=z) is Outcome.HELD
    if close is Outcome.UNDECIDED or not sure:
        return Outcome.UNDECIDED
    return Outcome.HELD if pl["phase"] in wanted else Outcome.VIOLATED


def plateau_index(rec, which: str, one_point: Sequence[str] = ONE_POINT) -> int | None:
    """The evaluation in the middle of the run's 1-point plateau: among the longest stretch of
    consecutive evaluations at which the nearest strategy on set ``which`` (among the record's
    ``pair_order``) is one of ``one_point``, the middle one (the earlier of two). ``None`` when the
    model is never nearest a 1-point phase (or the record measures none)."""
    phases = tuple(rec["pair_order"])
    if not set(one_point) & set(phases):
        return None
    at = [placement(rec, which, phases, i)["phase"] in one_point for i in range(len(rec["steps"]))]
    best, start = None, None
    for i, flag in enumerate(at + [False]):
        if flag and start is None:
            start = i
        elif not flag and start is not None:
            if best is None or i - start > best[1] - best[0]:
                best = (start, i)
            start = None
    return None if best is None else (best[0] + best[1] - 1) // 2
