"""Necessity from the claims: after the claims ran under a prior, whether each broken assumption
looks necessary (a counterexample to a conclusion on draws that break it) or removable (none
within the budget)."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from sim.audit.catalogue import ZERO
from sim.audit.checks import draw_stats
from sim.audit.records import ClaimEvidence, PriorAudit

__all__ = ["attach_results"]


def _keys_for(claim_id: str, name: str) -> list[str]:
    """Audit keys a claim's assumption name refers to, read from its words (the claim's paper
    picks W's per-draw form or N's a.s. form). Specific words win over ``gamma``, which many
    names mention only as the constant in their bound."""
    n = name.lower()
    paper = claim_id.split(".")[0].upper()
    keys: list[str] = []

    def add(w_key, n_key):
        if paper == "W":
            keys.append(w_key)
        elif paper == "N":
            keys.append(n_key)
        else:
            keys.extend(dict.fromkeys((w_key, n_key)))

    if "delta" in n or "marginal >" in n or "marginal ≥" in n:
        add("W.L3.delta", "W.L3.delta")
    if "i(x_h" in n or "mutual information" in n or "degenera" in n:
        add("W.L4.info", "N.K10.2")
    if "symmetr" in n:
        keys.append("N.K10.3a")
    if "uniform mean" in n or "e[pi]" in n:
        keys.append("N.K10.3b")
    if "irreducib" in n:
        keys.append("N.K2.irreducible")
    if "aperiod" in n:
        keys.append("N.K2.aperiodic")
    if "root fraction" in n or "non-root" in n:
        keys.append("N.K10.4")
    if "t_eff" in n or "effective length" in n:
        keys.append("N.K10.5")
    if not keys and ("gamma" in n or "min pi" in n or "lower bound" in n or "floor" in n):
        add("W.L3.gamma", "N.K10.1")
    return list(dict.fromkeys(keys))


def _examples_budget(t: dict) -> str:
    for num in t.get("numbers", []):
        if str(num.get("name", "")).startswith("examples evaluated"):
            return f"{num['value']} evaluations, {num.get('note', '')}".rstrip(", ")
    return ""


def _record_breaks(rec) -> set[str] | None:
    """The per-draw assumptions a counterexample record's ``pi`` breaks (``None`` without a valid ``pi``).

    Uses the record's own ``gamma`` / ``delta`` / ``I(x_h; x_pa)`` when it reports them (they
    belong to the instance's root law and tree); otherwise computes them from ``pi`` under
    the stationary root (the uniform root when the stationary law is not unique).
    """
    if not isinstance(rec, dict) or "pi" not in rec:
        return None
    try:
        P = np.array(rec["pi"], dtype=float)
        if P.ndim != 2 or P.shape[0] != P.shape[1] or not np.all(np.isfinite(P)) or np.any(P < 0) \
                or np.abs(P.sum(axis=1) - 1).max() > 1e-8:
            return None
    except (TypeError, ValueError):
        return None
    st = draw_stats(P[None], np.ones(1), exact=True)

    def number(*names):
        for nm in names:
            v = rec.get(nm)
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                return float(v)
        return None

    out = set()
    gamma = number("gamma")
    if (st.gamma[0] if gamma is None else gamma) <= 0:
        out |= {"W.L3.gamma", "N.K10.1"}
    delta = number("delta")
    if (st.delta[0] if delta is None else delta) <= 0:
        out.add("W.L3.delta")
    info = number("I(x_h; x_pa)", "I(x_h; x_pa(h))")
    if (not st.info[0]) if info is None else info <= 1e-12:
        out.add("W.L4.info")
    if not st.irreducible[0]:
        out.add("N.K2.irreducible")
    if not st.aperiodic[0]:
        out.add("N.K2.aperiodic")
    if st.unique[0] and st.B[0] <= ZERO:
        out.add("N.K10.2")
    return out


def _tier_evidence(claim_id: str, t: dict) -> list[tuple[str, ClaimEvidence]]:
    failed = [a["name"] for a in t.get("assumptions", []) if a.get("holds") is False]
    if not failed:
        return []
    cwa = (t.get("conclusion_without_assumptions") or "").strip()
    low = cwa.lower()
    named = [nm for nm in failed if nm in cwa]
    budget = _examples_budget(t)
    failed_keys = {k for nm in failed for k in _keys_for(claim_id, nm)}
    cex = t.get("counterexample")
    breaks = _record_breaks(cex) if low.startswith("violated") else None
    out = []
    for nm in failed:
        for key in _keys_for(claim_id, nm):
            jointly: list[str] = []
            record = None
            if low.startswith("violated"):
                if breaks is not None:
                    if key in breaks:
                        outcome, record = "counterexample", cex
                        other_keys = {k for x in failed if x != nm for k in _keys_for(claim_id, x)}
                        jointly = sorted((breaks & other_keys) - set(_keys_for(claim_id, nm)))
                        detail = (f"{cwa}; its pi breaks " + (f"this and {', '.join(jointly)}" if jointly else "only this")
                                  + " (of the assumptions this tier checks)")
                    elif breaks & failed_keys:
                        outcome = "inconclusive"
                        detail = f"the counterexample reported breaks {', '.join(sorted(breaks & failed_keys))}, not this one"
                    else:
                        outcome = "inconclusive"
                        detail = ("the counterexample reported meets every assumption this tier checks (a FAIL in "
                                  "substance), which says nothing about this assumption")
                elif named and nm not in named:
                    outcome, detail = "inconclusive", f"the search stopped at a counterexample that breaks {', '.join(named)}"
                else:
                    outcome, record, detail = "counterexample", cex, cwa
                    others = [x for x in (named or failed) if x != nm]
                    jointly = sorted({k for x in others for k in _keys_for(claim_id, x)} - set(_keys_for(claim_id, nm)))
            elif low.startswith("held") or low.startswith("no counterexample"):
                outcome, detail = "none", cwa + (f" [{budget}]" if budget else "")
            elif low.startswith("undecided"):
                outcome, detail = "inconclusive", cwa
            elif t.get("conclusion") == "violated" and cex:
                outcome = "inconclusive"
                detail = ("the tier found a counterexample on inputs that meet every assumption (a FAIL in substance), "
                          "which says nothing about this assumption")
            else:
                outcome, detail = "inconclusive", cwa or "the tier did not say whether the conclusion held where it failed"
            out.append((key, ClaimEvidence(claim_id, t["tier"], t["verdict"], outcome, f"{nm}: {detail}", record,
                                           jointly)))
    return out


def attach_results(audit: PriorAudit, dicts: Sequence[dict]) -> None:
    """Fill each broken assumption's necessity from the claims' results (JSON form)."""
    audit.claims_run = {d["id"]: d["verdict"] for d in dicts}
    by_key: dict[str, list[ClaimEvidence]] = {}
    for d in dicts:
        for t in d.get("tiers", []):
            for key, ev in _tier_evidence(d["id"], t):
                by_key.setdefault(key, []).append(ev)
            if t.get("verdict") == "ASSUMPTION_UNMET" and t.get("conclusion") == "violated" and t.get("counterexample"):
                failed_keys = {k for a in t.get("assumptions", []) if a.get("holds") is False
                               for k in _keys_for(d["id"], a["name"])}
                breaks = _record_breaks(t["counterexample"])
                if failed_keys and breaks is not None and not (breaks & failed_keys):
                    audit.notes.append(
                        f"{d['id']} {t['tier']}: its counterexample meets every assumption the tier checks (a FAIL in "
                        "substance), but the verdict is ASSUMPTION_UNMET because other draws broke an assumption; "
                        "read the counterexample in the claim's section")
    for a in audit.assumptions:
        a.evidence = by_key.get(a.key, [])
        if a.status != "fails":
            a.necessity, a.necessity_detail = "", ""
            continue
        cex = [e for e in a.evidence if e.outcome == "counterexample"]
        none = [e for e in a.evidence if e.outcome == "none"]
        if cex:
            alone = [e for e in cex if not e.jointly]

            def kind(e):
                return (f"{e.claim} {e.tier}" + (" (smallest found, shrunk)" if e.tier == "property" else " (worst instance)")
                        + (f" — also breaks {', '.join(e.jointly)}" if e.jointly else ""))

            if alone:
                a.necessity = "necessary"
                a.necessity_detail = ("counterexample to a conclusion on a draw that breaks only this one of the claim's "
                                      "assumptions: " + "; ".join(kind(e) for e in alone))
                rest = [e for e in cex if e.jointly]
                if rest:
                    a.necessity_detail += "; also jointly: " + "; ".join(kind(e) for e in rest)
            else:
                a.necessity = "necessary jointly"
                a.necessity_detail = ("counterexamples found only on draws that break it together with other assumptions: "
                                      + "; ".join(kind(e) for e in cex))
        elif none:
            a.necessity = "removable"
            a.necessity_detail = "no counterexample within the budget: " + "; ".join(
                f"{e.claim} {e.tier}: {e.detail.split(': ', 1)[-1]}" for e in none)
        elif a.evidence:
            a.necessity = "undecided"
            a.necessity_detail = "; ".join(f"{e.claim} {e.tier}: {e.detail}" for e in a.evidence)
        else:
            ran = [c for c in a.feeds if c in audit.claims_run]
            missing = [c for c in a.feeds if c not in audit.claims_run]
            a.necessity = "not tested"
            a.necessity_detail = ("no claim that ran drew inputs breaking it"
                                  + (f" (ran: {', '.join(ran)})" if ran else "")
                                  + (f"; claims it feeds that did not run or are not built yet: {', '.join(missing)}"
                                     if missing else ""))
