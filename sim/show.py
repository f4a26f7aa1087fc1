"""The forms ``icl-verify show RUN --format ...`` prints a finished run in (besides text and LaTeX).

* ``md``: the claims table of report.md (claim, title, verdict as its headline, tiers, source),
  without the links into report.md, so it can be pasted into an issue or a paper's notes.
* ``json``: each claim's id, title, verdict, headline and *deciding number*.

The deciding number of a claim (also the number the LaTeX table prints): the first number of
its *deciding tier* that is not a search count (kind ``property``: "examples evaluated" says
how hard hypothesis looked, not what it found), or that tier's first number when all of them
are; the deciding tier is the last tier that ran whose verdict equals the claim's verdict
(tiers run from the cheapest to the most thorough, so the last agreeing one is the strongest
evidence for the verdict). A claim with no such tier (NOT_RUN, or ERROR before any tier
finished), or whose deciding tier reports no numbers, has none (``null``).
"""
from __future__ import annotations

import math
from typing import Any

__all__ = ["FORMATS", "deciding_tier", "deciding_number", "has_error", "number_text", "claims_summary", "render_json",
           "render_md", "render"]

FORMATS = ("text", "md", "json", "latex")


def deciding_tier(claim: dict) -> dict | None:
    """The last tier that ran whose verdict equals the claim's verdict, or None."""
    for t in reversed(claim.get("tiers") or []):
        if t.get("verdict") == claim.get("verdict") and t.get("verdict") != "NOT_RUN":
            return t
    return None


def deciding_number(claim: dict) -> dict | None:
    """The deciding tier's first number that is not a search count (see the module docstring), with
    ``tier`` added; or None."""
    t = deciding_tier(claim)
    if t is None or not t.get("numbers"):
        return None
    nums = t["numbers"]
    return {"tier": t["tier"], **next((n for n in nums if n.get("kind") != "property"), nums[0])}


def _as_float(x) -> float | None:
    """A number's value as a float (``"inf"``, ``"-inf"``, ``"nan"`` as results.json stores them), else None."""
    if isinstance(x, bool) or x is None:
        return None
    if isinstance(x, (int, float)):
        return float(x)
    if isinstance(x, str) and x.strip().lower() in ("inf", "-inf", "nan", "+inf"):
        return float(x)
    return None


def has_error(num: dict) -> bool:
    """Whether a number carries a non-zero standard error worth printing."""
    se = _as_float(num.get("stderr"))
    return se is not None and se != 0 and not math.isnan(se)


def number_text(num: dict | None) -> str:
    """``name = value ± stderr (n=…)`` in plain text; ``—`` for no number."""
    from sim.report import _fmt_num

    if num is None:
        return "—"
    err = f" ± {_fmt_num(num.get('stderr'))}" if has_error(num) else (" (exact)" if num.get("kind") == "exact" else "")
    n = f" (n={num['n']})" if num.get("n") is not None else ""
    return f"{num.get('name', '')} = {_fmt_num(num.get('value'))}{err}{n}"


def claims_summary(doc: dict) -> dict[str, Any]:
    """The JSON form: the run's id, profile, seed and verdict counts, and per claim its id, title,
    verdict, headline and deciding number (``{tier, name, value, stderr, n, kind, text}`` or null)."""
    cfg = doc.get("config") or {}
    claims = []
    for d in doc["claims"]:
        num = deciding_number(d)
        deciding = None if num is None else {
            **{k: num.get(k) for k in ("tier", "name", "value", "stderr", "n", "kind")}, "text": number_text(num)}
        claims.append({"id": d["id"], "title": d.get("title", ""), "verdict": d["verdict"],
                       "headline": d.get("headline") or d["verdict"], "deciding": deciding})
    return {"run_id": doc.get("run_id"), "profile": cfg.get("profile"), "seed": cfg.get("seed"),
            "summary": doc.get("summary", {}), "claims": claims}


def render_json(doc: dict) -> str:
    """The summary of :func:`claims_summary` as strict JSON."""
    from sim.files import dump_json
    from sim.verdict import to_jsonable

    return dump_json(to_jsonable(claims_summary(doc)))


def render_md(doc: dict) -> str:
    """A line naming the run, the claims table of report.md (one row per claim), the verdict counts."""
    from sim.report import _md, summary_table_markdown

    cfg = doc.get("config") or {}
    head = (f"**icl-verify run `{_md(doc.get('run_id'))}`**: profile {_md(cfg.get('profile'))}, "
            f"seed {cfg.get('seed')}, commit `{_md(doc.get('git_commit'))}`")
    counts = ", ".join(f"{k} {v}" for k, v in (doc.get("summary") or {}).items() if v)
    return "\n".join([head, "", summary_table_markdown(doc["claims"], links=False), "", f"Verdicts: {counts}"])


def render(doc: dict, fmt: str) -> str:
    """``doc`` (a results.json) in ``fmt`` (md or json; LaTeX is :func:`sim.latex.latex_table`, and
    the text form is the CLI's own)."""
    if fmt == "md":
        return render_md(doc)
    if fmt == "json":
        return render_json(doc)
    raise ValueError(f"unknown format {fmt!r}; known: {', '.join(FORMATS)}")
