"""Reports of a run: ``results.json`` (for machines), ``report.md`` (for reading),
``report.html`` (the same with figures, one self-contained file), ``junit.xml`` (for CI).

All four are rendered from the same list of claim dicts (the JSON form of
:class:`sim.verdict.ClaimResult`), so they cannot disagree. Every piece of text that comes
from a claim, a config or a counterexample is escaped before it reaches HTML or XML.
"""
from __future__ import annotations

import base64
import html
import json
import platform
import re
import subprocess
import time
from pathlib import Path
from typing import Any, Sequence
from xml.sax.saxutils import quoteattr

from sim.files import RESULTS_SCHEMA
from sim.verdict import Verdict, format_number

__all__ = ["write_reports", "summary_table", "summary_table_markdown", "all_findings", "SCHEMA", "package_versions",
           "git_commit", "load_results", "audit_text", "necessity_text", "gamma_summary"]

SCHEMA = RESULTS_SCHEMA

_BADGE = {
    "PASS": "#1a7f37", "FAIL": "#cf222e", "ASSUMPTION_UNMET": "#9a6700",
    "INCONCLUSIVE": "#6e7781", "NOT_RUN": "#8c959f", "ERROR": "#8250df",
}


def package_versions() -> dict[str, str]:
    """The versions of Python and of the packages a run's numbers depend on (``not installed`` when absent)."""
    from importlib import metadata

    out = {"python": platform.python_version()}
    for name in ("icl-causal-verify", "numpy", "scipy", "sympy", "torch", "networkx", "hypothesis", "matplotlib",
                 "python-flint"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def git_commit() -> str | None:
    """The commit of the checkout the code runs from (with ``+dirty`` when modified)."""
    root = Path(__file__).resolve().parent.parent
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                             timeout=5).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    if not sha:
        return None
    return sha + ("+dirty" if dirty else "")


def load_results(run_dir: Path) -> dict[str, Any]:
    """A finished run's results.json, its shape checked (:func:`sim.files.read_results`, the one
    loader of run files); ``FileNotFoundError`` (no such folder, or an unfinished run, with the
    resume command) or ``ValueError`` (:class:`sim.files.RunFileError`: not a results.json this tool
    wrote, naming the file and the key) otherwise."""
    from sim.files import read_results

    return read_results(run_dir)


def write_reports(out_dir: Path, config, dicts: Sequence[dict], *, elapsed_s: float, prior=None, audit=None) -> dict:
    """Write results.json, report.md, report.html and junit.xml. ``audit`` (the JSON form of a
    :class:`sim.audit.PriorAudit`) adds the assumptions table at the top of each report."""
    from sim.files import atomic_write_text, claim_counts, dump_json
    from sim.verdict import to_jsonable

    out_dir = Path(out_dir)
    doc = {
        "schema": SCHEMA,
        "run_id": config.run_id,
        "complete": True,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "config": config.as_dict(),
        "config_hash": config.digest(),
        "seeds": {"master": config.seed, "claims": {d["id"]: d["seed"] for d in dicts}},
        "prior": None if prior is None else getattr(prior, "spec", lambda: str(prior))(),
        "versions": package_versions(),
        "git_commit": git_commit(),
        "platform": platform.platform(),
        "elapsed_s": round(elapsed_s, 2),
        "summary": claim_counts(dicts),
        "jobs": jobs_summary(dicts),
        "findings": all_findings(dicts),
        "audit": audit,
        "claims": list(dicts),
    }
    atomic_write_text(out_dir / "results.json", dump_json(to_jsonable(doc)))
    atomic_write_text(out_dir / "report.md", render_markdown(doc))
    atomic_write_text(out_dir / "report.html", render_html(doc, out_dir))
    atomic_write_text(out_dir / "junit.xml", render_junit(doc))
    return doc


def jobs_summary(dicts: Sequence[dict]) -> dict[str, int] | None:
    """The run's training jobs (:func:`sim.claims.jobs.run_jobs`): how many were trained and how many
    reused from the run folder (an interrupted run's records), over every claim; None when none trained."""
    counted = [d["jobs"] for d in dicts if d.get("jobs")]
    if not counted:
        return None
    return {k: sum(c.get(k, 0) for c in counted) for k in ("trained", "reused")}


def jobs_text(jobs: dict | None) -> str:
    """``"12 trained, 4 reused from the run folder"``; empty without jobs."""
    if not jobs:
        return ""
    reused = f", {jobs['reused']} reused from the run folder (not trained again)" if jobs.get("reused") else ""
    return f"{jobs['trained']} trained{reused}"


def all_findings(dicts: Sequence[dict]) -> list[dict]:
    """Every finding of every claim, flattened with its claim and tier: the Findings table.

    Findings are the readings other than the paper's own statement (literal, stricter,
    another setting, the reference code, an unstated assumption); none of them decides a
    verdict, and each carries its own verdict and evidence."""
    out = []
    for d in dicts:
        for t in d.get("tiers", []):
            for f in t.get("findings", []):
                out.append({"claim": d["id"], "claim_verdict": d["verdict"], "tier": t["tier"], **f})
    return out


def _headline(d: dict) -> str:
    return d.get("headline") or d["verdict"]


def _not_run_reason(d: dict) -> str:
    """Why a claim has no tier results: decided by another profile, or (no tiers of its own) its note."""
    if not d.get("tiers_supported") and d.get("note"):
        return d["note"]
    return f"decided by {d.get('decided_by', 'another profile')}"


# -- terminal ------------------------------------------------------------------------------
def summary_table(dicts: Sequence[dict]) -> str:
    """The plain-text claims table the CLI prints after a run: claim, verdict, tiers, time, and the first
    summary that is not a PASS (findings said first), one row per result dict."""
    rows = [("claim", "verdict", "tiers", "time", "summary")]
    for d in dicts:
        tiers = " ".join(f"{t['tier']}:{t['verdict']}" for t in d["tiers"]) or f"({_not_run_reason(d)})"
        first = next((t.get("summary", "") for t in d["tiers"] if t["verdict"] != "PASS"), None)
        first = first or (d["tiers"][0].get("summary", "") if d["tiers"] else d.get("note", ""))
        findings = [f for t in d["tiers"] for f in t.get("findings", []) if f["verdict"] != "PASS"]
        if findings:  # the verdict stays the primary reading's; the findings are said beside it
            first = f"[{len(findings)} finding{'s' if len(findings) > 1 else ''}: {findings[0]['detail']}] {first}"
        elapsed = f"{d['elapsed_s']:.1f}s" if "elapsed_s" in d else "—"
        rows.append((d["id"], d["verdict"], tiers, elapsed, _clip(first, 90)))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = []
    for k, r in enumerate(rows):
        lines.append("  ".join(r[i].ljust(widths[i]) for i in range(4)) + "  " + r[4])
        if k == 0:
            lines.append("  ".join("-" * w for w in widths) + "  " + "-" * 7)
    return "\n".join(lines)


def _clip(text: str, n: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _fmt_num(x) -> str:
    if isinstance(x, str):
        return x
    if x is None:
        return "—"
    if isinstance(x, bool):
        return str(x)
    if isinstance(x, int):
        return str(x)
    if x != 0 and (abs(x) < 1e-3 or abs(x) >= 1e5):
        return f"{x:.4e}"
    return f"{x:.6g}"


def _number_rows(numbers: Sequence[dict]) -> list[list[str]]:
    rows = []
    for n in numbers:
        rows.append([n["name"], _fmt_num(n["value"]), _fmt_num(n["stderr"]) if n["stderr"] else "0 (exact)"
                     if n["kind"] == "exact" else "0 (certified)" if n["kind"] == "certified" else _fmt_num(n["stderr"]),
                     _fmt_num(n["n"]), _fmt_num(n["seed"]), _fmt_num(n["tolerance"]), n["kind"], n.get("note", "")])
    return rows


_NUM_HEAD = ["number", "value", "± (s.e.)", "n", "seed", "tolerance", "kind", "note"]
_CERT_HEAD = ["inequality", "status", "domain (whole)", "boxes", "precision", "time", "outcome"]
_CERT_INTRO = ("Certificates: each inequality decided on its whole stated domain by branch-and-bound with rigorous "
               "interval enclosures (python-flint arb balls). PROVED covers every box of the domain outside the "
               "exclusions it names; a counterexample box fails at every point of it.")


def _certificate_rows(certs: Sequence[dict]) -> list[list[str]]:
    """One row per certificate: the domain whole, its boxes, precision, time, and what decided it."""
    rows = []
    for c in certs:
        boxes = (f"{c.get('boxes evaluated')} evaluated: {c.get('boxes certified')} certified, "
                 f"{c.get('boxes excluded')} excluded, {c.get('boxes left open')} open; deepest split "
                 f"{c.get('deepest split')}; budget {c.get('box budget')}")
        outcome = []
        if c.get("bracket on the extreme"):
            lo, hi = c["bracket on the extreme"]
            outcome.append(f"extreme in [{_fmt_num(lo)}, {_fmt_num(hi)}]")
        if c.get("counterexample box"):
            outcome.append("counterexample box " + json.dumps(c["counterexample box"]))
        if c.get("largest open box"):
            outcome.append("largest open box " + json.dumps(c["largest open box"]))
        if c.get("reason"):
            outcome.append(c["reason"])
        rows.append([f"{c.get('inequality')}: {c.get('statement')}", str(c.get("status")), str(c.get("domain in words")),
                     boxes, f"{c.get('precision (bits)')} bits", f"{c.get('time (s, process)')} s (process)",
                     "; ".join(outcome) or "—"])
    return rows


_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def _printable(text) -> str:
    """``text`` with control characters written out (``\\x1b``): XML forbids them, terminals obey them."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", str(text))


# -- the user's graph (run --graph) ------------------------------------------------------------
_EDGES_SHOWN = 24


def _graph_header(doc: dict) -> str:
    """The run's ``--graph`` and the claims that ran on it, for the top of a report ('' without one)."""
    g = doc["config"].get("graph")
    if not g:
        return ""
    on = [d["id"] for d in doc["claims"] if d.get("graph")]
    return (f"Causal graph {g['name']} from --graph ({g['nodes']} nodes, {len(g['edges'])} edges), in place of the "
            f"own graphs of {', '.join(on) if on else 'no claim that ran'}; every other claim ran on its own.")


def _graph_line(d: dict) -> str:
    """A claim's line about the user's graph it ran on: the graph, the settings it replaced, why."""
    g = d["graph"]
    edges = [f"{p}->{c}" for p, c in g["edges"]]
    shown = ", ".join(edges[:_EDGES_SHOWN]) or "none"
    if len(edges) > _EDGES_SHOWN:
        shown += f", ... ({len(edges)} in all; results.json lists every one)"
    settings = ", ".join(f"{k} = {json.dumps(v)}" for k, v in g.get("settings", {}).items())
    line = f"ran on the user's graph {g['name']} ({g['nodes']} nodes; edges {shown})"
    if settings:
        line += f" with {settings}"
    if g.get("replaces"):
        line += f": in place of {g['replaces']}"
    return line + (f". Size: {g['size_note']}." if g.get("size_note") else ".")


# -- markdown -------------------------------------------------------------------------------
def _md(text) -> str:
    """Text from claims/configs in Markdown, safe in a renderer and readable in a terminal.

    Only what could start markup is escaped: ``<`` before a letter, ``/``, ``!`` or ``?`` (a
    tag, comment or declaration) and ``&`` before an entity name. ``I(x;y) <= b`` and ``->``
    stay as written."""
    text = re.sub(r"&(?=#?[A-Za-z0-9]+;)", "&amp;", _printable(text))
    return re.sub(r"<(?=[A-Za-z/!?])", "&lt;", text)


def _md_escape_cell(text: str) -> str:
    return _md(text).replace("|", "\\|").replace("\n", " ")


def summary_table_markdown(dicts: Sequence[dict], *, links: bool = True) -> str:
    """The claims table at the top of report.md: claim, title, verdict (the headline), tiers, source.

    ``links`` makes each claim id a link to its section of report.md (off for a table pasted elsewhere)."""
    out = ["| claim | title | verdict | tiers | source |", "|---|---|---|---|---|"]
    for d in dicts:
        tiers = ", ".join(f"{t['tier']} {t['verdict']}" for t in d["tiers"]) or _md_escape_cell(_not_run_reason(d))
        cid = f"[{d['id']}](#{_anchor(d['id'])})" if links else _md_escape_cell(d["id"])
        out.append(f"| {cid} | {_md_escape_cell(d.get('title', ''))} | **{_md_escape_cell(_headline(d))}** | "
                   f"{tiers} | {_md_escape_cell(d.get('source', ''))} |")
    return "\n".join(out)


def render_markdown(doc: dict) -> str:
    cfg = doc["config"]
    out = [f"# icl-verify report `{doc['run_id']}`", ""]
    out.append(f"Profile **{cfg['profile']}**, seed {cfg['seed']}, device {cfg['device']}, "
               f"claims {_md(cfg['claims'])}, z = {cfg['z']}" + (f", prior {_md(doc['prior'])}" if doc.get("prior") else "")
               + f". Commit `{doc['git_commit']}`, {doc['created']}, {doc['elapsed_s']} s.")
    out.append("")
    if _graph_header(doc):
        out += [_md(_graph_header(doc)), ""]
    out.append("Verdicts: " + ", ".join(f"{k} {v}" for k, v in doc["summary"].items() if v))
    out.append("")
    if doc.get("jobs"):
        out += [f"Training jobs: {jobs_text(doc['jobs'])}.", ""]
    if doc.get("audit"):
        out.extend(_md_audit(doc["audit"]))
    out.extend(summary_table_markdown(doc["claims"]).split("\n"))
    out.append("")
    out.extend(_md_findings(doc))
    for d in doc["claims"]:
        out.extend(_md_claim(d))
    out.append("---")
    out.append("Versions: " + ", ".join(f"{k} {v}" for k, v in doc["versions"].items()))
    return "\n".join(out) + "\n"


_STATUS_MD = {"holds": "holds", "fails": "**FAILS**", "undecided": "*undecided*"}
_NEC_TEXT = {"necessary": "looks **necessary**", "necessary jointly": "looks **necessary** (jointly with others)",
             "removable": "looks **removable**", "undecided": "undecided",
             "not tested": "not tested", "": "—"}


def _audit_worst(a: dict) -> dict | None:
    return next((f for st in ("fails", "undecided", "holds") for f in a["findings"] if f["status"] == st), None)


def _audit_number_text(n: dict) -> str:
    err = "" if not n.get("stderr") else f" ± {_fmt_num(n['stderr'])}"
    extra = ", ".join(x for x in ((f"n={n['n']}" if n.get("n") else ""), (f"seed {n['seed']}" if n.get("seed") is not None
                                                                            else ""), n.get("note") or "") if x)
    return f"{n['name']} = {_fmt_num(n['value'])}{err}" + (f" ({extra})" if extra else "")


def _md_audit(au: dict) -> list[str]:
    """The assumptions table (and the details behind it) at the top of report.md."""
    graphs = ", ".join(g["name"] for g in au["graphs"])
    out = ["## Assumptions under the prior", "",
           f"Prior `{_md(au['spec'])}`, audited at d = {', '.join(map(str, au['dims']))} "
           f"({au['n_draws']} draws per d, seed {au['seed']}, unless the prior is finite and decided exactly over its atoms); "
           f"graphs {_md(graphs)}. *how*: guaranteed = holds by the prior's construction, analytic = fails by it, "
           "exact = over every atom of a finite prior, estimated = from draws (error bars below). "
           "*necessary?*: for a broken assumption, whether a claim that ran found a counterexample to its conclusion on "
           "draws that break it (necessary) or none within the budget (removable).", ""]
    for note in au.get("notes", []):
        out += [f"> {_md(note)}", ""]
    out.append("| assumption | source | status | how | evidence (worst case) | feeds | necessary? |")
    out.append("|---|---|---|---|---|---|---|")
    ran = au.get("claims_run", {})
    for a in au["assumptions"]:
        w = _audit_worst(a)
        ev = "" if w is None else f"{w['where']}: {w['summary']}"
        feeds = ", ".join(f"{c} ({ran[c]})" if c in ran else c for c in a["feeds"])
        out.append(f"| {_md_escape_cell(a['key'] + ' ' + a['name'])} | {_md_escape_cell(a['source'])} | "
                   f"{_STATUS_MD.get(a['status'], a['status'])} | {_md_escape_cell(a['how'])} | {_md_escape_cell(ev)} | "
                   f"{_md_escape_cell(feeds)} | {_NEC_TEXT.get(a.get('necessity', ''), _md(a.get('necessity', '')))} |")
    out.append("")
    if au.get("gamma_table"):
        out += ["N's gamma is one constant for items 1, 2 and 4: the largest each allows, and their minimum.", "",
                "| d | graph | item 1 (lower bound) | item 2 (non-degeneracy) | item 4 (1 - r) | gamma | limited by |",
                "|---|---|---|---|---|---|---|"]
        for g in au["gamma_table"]:
            out.append(f"| {g['d']} | {_md_escape_cell(g['graph'])} | {_fmt_num(g['gamma_1'])} | {_fmt_num(g['gamma_2'])} | "
                       f"{_fmt_num(g['one_minus_r'])} | {_fmt_num(g['gamma'])}{' (estimated)' if g.get('estimated') else ''}"
                       f" | {_md_escape_cell(g['limited_by'])} |")
        out.append("")
    out += ["| graph | T | roots | root fraction r | max leaves | T_eff |", "|---|---|---|---|---|---|"]
    for g in au["graphs"]:
        out.append(f"| {_md_escape_cell(g['name'])} | {g['T']} | {g['n_roots']} | {_fmt_num(g['root_fraction'])} | "
                   f"{g['max_leaves']} | {_fmt_num(g['T_eff'])} |")
    out.append("")
    broken = [a for a in au["assumptions"] if a["status"] == "fails"]
    if broken:
        out += ["### Broken assumptions: necessary or removable?", ""]
        for a in broken:
            out.append(f"- **{_md(a['key'])} {_md(a['name'])}**: {_NEC_TEXT.get(a.get('necessity', ''), '')} — "
                       f"{_md(a.get('necessity_detail', ''))}")
            for e in a.get("evidence", []):
                out.append(f"  - {_md(e['claim'])} {_md(e['tier'])} ({_md(e['verdict'])}): {_md(e['outcome'])} — "
                           f"{_md(e['detail'])}")
                if e.get("counterexample"):
                    out.append(f"    counterexample: `{_md(_clip(json.dumps(e['counterexample']), 400))}`")
        out.append("")
    out += ["### Assumption details", ""]
    for a in au["assumptions"]:
        out.append(f"- **{_md(a['key'])} {_md(a['name'])}** ({_md(a['source'])}): {_md(a['statement'])}")
        for f in a["findings"]:
            out.append(f"  - {_md(f['where'])}: {_STATUS_MD.get(f['status'], f['status'])} ({_md(f['how'])}) — "
                       f"{_md(f['summary'])}")
            for n in f.get("numbers", []):
                out.append(f"    - {_md(_audit_number_text(n))}")
            if f.get("witness"):
                out.append(f"    - witness: `{_md(_clip(json.dumps(f['witness']), 400))}`")
    out.append("")
    return out


# -------------------------------------------------------------- the audit, for a terminal --
def audit_text(audit, width: int = 100) -> str:
    """The assumptions table of a prior audit (a :class:`sim.audit.PriorAudit` or its JSON form)
    for a terminal."""
    doc = audit.to_dict() if hasattr(audit, "to_dict") else audit
    dims = ", ".join(map(str, doc["dims"]))
    graphs = ", ".join(g["name"] for g in doc["graphs"])
    lines = [f"Assumptions under prior {doc['spec']}  (d = {dims}; {doc['n_draws']} draws per d unless exact; "
             f"seed {doc['seed']}; graphs {graphs})"]
    rows = [("assumption", "source", "status", "how", "necessary?", "evidence (worst case)")]
    for a in doc["assumptions"]:
        worst = next((f for st in ("fails", "undecided", "holds") for f in a["findings"] if f["status"] == st), None)
        ev = "" if worst is None else f"{worst['where']}: {worst['summary']}"
        rows.append((f"{a['key']} {a['name']}", a["source"], a["status"].upper() if a["status"] == "fails" else a["status"],
                     a["how"], a.get("necessity") or ("—" if a["status"] != "fails" else "(after the claims)"),
                     _clip(ev, width)))
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    for k, r in enumerate(rows):
        lines.append("  ".join(r[i].ljust(widths[i]) for i in range(5)) + "  " + r[5])
        if k == 0:
            lines.append("  ".join("-" * w for w in widths) + "  " + "-" * 8)
    if doc.get("gamma_table"):
        lines.append("N's gamma = min(item 1, item 2, 1 - r): " + gamma_summary(doc["gamma_table"]))
    return "\n".join(lines)


def gamma_summary(rows: Sequence[dict]) -> str:
    """One line: N's gamma per d (graphs with the same value merged), and what limits it."""
    by_d: dict[int, list[dict]] = {}
    for g in rows:
        by_d.setdefault(g["d"], []).append(g)
    parts = []
    for d, gs in by_d.items():
        vals = {(format_number(g["gamma"]) if g["gamma"] is not None else "—", g["limited_by"]) for g in gs}
        if len(vals) == 1:
            v, lim = vals.pop()
            parts.append(f"d={d}: {v}" + (f" (limited by {lim})" if lim else ""))
        else:
            parts.append(f"d={d}: " + ", ".join(f"{format_number(g['gamma'])} on {g['graph']} (limited by {g['limited_by']})"
                                                for g in gs))
    return "; ".join(parts)


def necessity_text(audit) -> str:
    """For a terminal: each broken assumption of a prior audit (or its JSON form), necessary or
    removable for the claims that ran."""
    doc = audit.to_dict() if hasattr(audit, "to_dict") else audit
    broken = [a for a in doc["assumptions"] if a["status"] == "fails"]
    if not broken:
        return "Every assumption holds (or is undecided) under this prior."
    lines = ["Broken assumptions — necessary or removable for the claims that ran:"]
    for a in broken:
        lines.append(f"  {a['key']} {a['name']}: {a['necessity'].upper()} — {a['necessity_detail']}")
    return "\n".join(lines)


_FINDINGS_INTRO = ("Each verdict above is decided by one reading: the paper's own statement, in its own scope and "
                   "setting. Every other reading is a finding, with its own verdict and evidence; a finding that "
                   "FAILs is not a FAIL of the paper.")


_CONTROLS_INTRO = ("Negative controls: models built on a wrong mechanism, put through this tier's own deciding "
                   "check. Each must FAIL; a control that does not makes the tier INCONCLUSIVE.")


def _md_findings(doc: dict) -> list[str]:
    findings = doc.get("findings") or all_findings(doc["claims"])
    if not findings:
        return []
    out = ["## Findings", "", _FINDINGS_INTRO, "",
           "| claim (verdict) | kind | reading | its verdict | evidence |", "|---|---|---|---|---|"]
    for f in findings:
        out.append(f"| [{f['claim']}](#{_anchor(f['claim'])}) ({f['claim_verdict']}) | {_md_escape_cell(f['kind'])} | "
                   f"{_md_escape_cell(f['reading'])} | **{f['verdict']}** | {_md_escape_cell(f['detail'])} |")
    out.append("")
    return out


def _finding_numbers(f: dict) -> str:
    return "; ".join(_audit_number_text(n) for n in f.get("numbers", []))


def _anchor(cid: str) -> str:
    return cid.lower().replace(".", "")


def _md_claim(d: dict) -> list[str]:
    # the explicit anchor: a code host's own heading ids would be the whole title, so #wl1 would lead nowhere
    out = [f'<a id="{_anchor(d["id"])}"></a>', "", f"## {_md(d['id'])} — {_md(d['title'])}", "", f"**Verdict: {d['verdict']}**  ·  source: {_md(d['source'])}  ·  "
           f"tiers: {', '.join(d['tiers_supported'])}  ·  decided by profile `{d['decided_by']}`  ·  "
           f"claim seed {d['seed']}", "", f"*Formalization checked:* {_md(d['statement'])}", ""]
    pr = d.get("primary_reading") or {}
    if pr:
        out += [f"*Primary reading (decides):* {_md(pr['statement'])} ({_md(pr['cite'])})"
                + (f" Setting: {_md(pr['setting'])}" if pr.get("setting") else ""), ""]
        if pr.get("review"):
            out += [f"*Review:* {_md(pr['review'])}", ""]
    if d.get("note"):
        out += [f"> {_md(d['note'])}", ""]
    if d.get("graph"):
        out += [f"*Causal graph:* {_md(_graph_line(d))}", ""]
        if d["graph"].get("figure"):
            out += [f"![{d['id']} user graph]({d['graph']['figure']})", ""]
    if d.get("jobs"):
        out += [f"*Training jobs:* {jobs_text(d['jobs'])}", ""]
    for t in d["tiers"]:
        out.append(f"### {t['tier']} — {t['verdict']} ({t['elapsed_s']:.1f} s)")
        out.append("")
        out.append(_md(t["summary"]))
        out.append("")
        if t["assumptions"]:
            out.append("Assumptions:")
            for a in t["assumptions"]:
                mark = {True: "holds", False: "FAILS", None: "undecided"}[a["holds"]]
                out.append(f"- {_md(a['name'])}: **{mark}** — {_md(a['detail'])}")
            out.append("")
        if t.get("conclusion_without_assumptions"):
            out += [f"Conclusion where an assumption fails: {_md(t['conclusion_without_assumptions'])}", ""]
        for r in t.get("readings", []):
            out.append(f"- criterion *{_md(r.get('name'))}*: **{_md(r.get('verdict', ''))}** — {_md(r.get('detail', ''))}")
        if t.get("readings"):
            out.append("")
        if t.get("findings"):
            out += ["Findings (other readings; they do not decide the verdict):", ""]
            for f in t["findings"]:
                out.append(f"- *{_md(f['kind'])}*: {_md(f['reading'])} — **{f['verdict']}**: {_md(f['detail'])}")
                if f.get("numbers"):
                    out.append(f"  - {_md(_finding_numbers(f))}")
                if f.get("counterexample"):
                    out.append(f"  - counterexample: `{_md(_clip(json.dumps(f['counterexample']), 600))}`")
                if f.get("witness"):
                    out.append(f"  - witness (in full): `{_md(json.dumps(f['witness']))}`")
            out.append("")
        if t.get("controls"):
            out += [_CONTROLS_INTRO, "", "| control | wrong mechanism | verdict | deciding number |", "|---|---|---|---|"]
            for c in t["controls"]:
                out.append("| " + " | ".join(_md_escape_cell(x) for x in (c["name"], c["mechanism"], c["verdict"],
                                                                             c["deciding"])) + " |")
            out.append("")
        if t.get("certificates"):
            out += [_CERT_INTRO, "", "| " + " | ".join(_CERT_HEAD) + " |", "|" + "---|" * len(_CERT_HEAD)]
            for row in _certificate_rows(t["certificates"]):
                out.append("| " + " | ".join(_md_escape_cell(c) for c in row) + " |")
            out.append("")
        if t["numbers"]:
            out.append("| " + " | ".join(_NUM_HEAD) + " |")
            out.append("|" + "---|" * len(_NUM_HEAD))
            for row in _number_rows(t["numbers"]):
                out.append("| " + " | ".join(_md_escape_cell(c) for c in row) + " |")
            out.append("")
        if t.get("counterexample"):
            out += ["Counterexample (in full):", "", "```json", json.dumps(t["counterexample"], indent=1), "```", ""]
        if t.get("corpus"):
            out += ["Counterexample corpus:", ""]
            out += [f"- {_md(c['status'])}: `{_md(c['file'])}` — {_md(c['detail'])}" for c in t["corpus"]] + [""]
        if t.get("sequential"):
            out += [f"Seeds: {_md(_sequential_line(t['sequential']))}", ""]
        if t.get("budget"):
            out += [f"What would decide it: {_md(t['budget'])}", ""]
        if t.get("error"):
            out += ["```", t["error"].rstrip(), "```", ""]
        for f in t.get("figures", []):
            out += [f"![{d['id']} {Path(f).stem}]({f})", ""]
    return out


# -- html -----------------------------------------------------------------------------------
_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#1f2328;line-height:1.45}
table{border-collapse:collapse;margin:.6em 0;font-size:.92em}td,th{border:1px solid #d0d7de;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f6f8fa}.badge{color:#fff;border-radius:4px;padding:1px 7px;font-weight:600;font-size:.85em}
pre{background:#f6f8fa;padding:.7em;overflow:auto;font-size:.85em}img{max-width:100%;border:1px solid #d0d7de;margin:.4em 0}
section.claim{border-top:2px solid #d0d7de;margin-top:1.6em}.muted{color:#57606a}
"""


def _badge(v: str) -> str:
    return f'<span class="badge" style="background:{_BADGE.get(v, "#57606a")}">{html.escape(v)}</span>'


def _e(x) -> str:
    return html.escape(_printable(x), quote=True)


def render_html(doc: dict, out_dir: Path) -> str:
    cfg = doc["config"]
    parts = ['<!DOCTYPE html>', '<html lang="en" xmlns="http://www.w3.org/1999/xhtml">', "<head>",
             '<meta charset="utf-8" />', f"<title>icl-verify report {_e(doc['run_id'])}</title>",
             f"<style>{_CSS}</style>", "</head>", "<body>",
             f"<h1>icl-verify report <code>{_e(doc['run_id'])}</code></h1>",
             f"<p>Profile <b>{_e(cfg['profile'])}</b>, seed {_e(cfg['seed'])}, device {_e(cfg['device'])}, claims "
             f"<code>{_e(cfg['claims'])}</code>, z = {_e(cfg['z'])}"
             + (f", prior <code>{_e(doc['prior'])}</code>" if doc.get("prior") else "")
             + f". Commit <code>{_e(doc['git_commit'])}</code>, {_e(doc['created'])}, {_e(doc['elapsed_s'])} s.</p>",
             "<p>" + " ".join(f"{_badge(k)} {v}" for k, v in doc["summary"].items() if v) + "</p>"]
    if doc.get("jobs"):
        parts.append(f"<p>Training jobs: {_e(jobs_text(doc['jobs']))}.</p>")
    if _graph_header(doc):
        parts.append(f"<p>{_e(_graph_header(doc))}</p>")
    if doc.get("audit"):
        parts.extend(_html_audit(doc["audit"]))
    parts.append("<table><tr><th>claim</th><th>title</th><th>verdict</th><th>tiers</th><th>source</th></tr>")
    for d in doc["claims"]:
        tiers = ", ".join(f"{_e(t['tier'])} {_e(t['verdict'])}" for t in d["tiers"]) or _e(_not_run_reason(d))
        note = _headline(d)[len(d["verdict"]):].strip()
        parts.append(f'<tr><td><a href="#{_e(_anchor(d["id"]))}">{_e(d["id"])}</a></td><td>{_e(d["title"])}</td>'
                     f"<td>{_badge(d['verdict'])}{' <small>' + _e(note) + '</small>' if note else ''}</td>"
                     f"<td>{tiers}</td><td>{_e(d['source'])}</td></tr>")
    parts.append("</table>")
    parts.extend(_html_findings(doc))
    for d in doc["claims"]:
        parts.extend(_html_claim(d, out_dir))
    parts.append('<p class="muted">Versions: ' + _e(", ".join(f"{k} {v}" for k, v in doc["versions"].items()))
                 + "</p>")
    parts += ["</body>", "</html>"]
    return "\n".join(parts) + "\n"


def _html_findings(doc: dict) -> list[str]:
    findings = doc.get("findings") or all_findings(doc["claims"])
    if not findings:
        return []
    out = ['<section id="findings"><h2>Findings</h2>', f"<p>{_e(_FINDINGS_INTRO)}</p>",
           "<table><tr><th>claim (verdict)</th><th>kind</th><th>reading</th><th>its verdict</th><th>evidence</th></tr>"]
    for f in findings:
        out.append(f'<tr><td><a href="#{_e(_anchor(f["claim"]))}">{_e(f["claim"])}</a> ({_e(f["claim_verdict"])})</td>'
                   f"<td>{_e(f['kind'])}</td><td>{_e(f['reading'])}</td><td>{_badge(f['verdict'])}</td>"
                   f"<td>{_e(f['detail'])}</td></tr>")
    out.append("</table></section>")
    return out


_STATUS_COLOR = {"holds": "#1a7f37", "fails": "#cf222e", "undecided": "#6e7781"}


def _html_audit(au: dict) -> list[str]:
    graphs = ", ".join(g["name"] for g in au["graphs"])
    out = ['<section class="audit" id="assumptions">', "<h2>Assumptions under the prior</h2>",
           f"<p>Prior <code>{_e(au['spec'])}</code>, audited at d = {_e(', '.join(map(str, au['dims'])))} "
           f"({_e(au['n_draws'])} draws per d, seed {_e(au['seed'])}, unless the prior is finite and decided exactly over "
           f"its atoms); graphs {_e(graphs)}. <i>how</i>: guaranteed = holds by the prior's construction, analytic = fails "
           "by it, exact = over every atom of a finite prior, estimated = from draws. <i>necessary?</i>: for a broken "
           "assumption, whether a claim that ran found a counterexample to its conclusion on draws that break it.</p>"]
    for note in au.get("notes", []):
        out.append(f'<p class="muted">{_e(note)}</p>')
    out.append("<table><tr><th>assumption</th><th>source</th><th>status</th><th>how</th><th>evidence (worst case)</th>"
               "<th>feeds</th><th>necessary?</th></tr>")
    ran = au.get("claims_run", {})
    for a in au["assumptions"]:
        w = _audit_worst(a)
        ev = "" if w is None else f"{w['where']}: {w['summary']}"
        feeds = ", ".join(f"{c} ({ran[c]})" if c in ran else c for c in a["feeds"])
        color = _STATUS_COLOR.get(a["status"], "#57606a")
        out.append(f"<tr><td>{_e(a['key'] + ' ' + a['name'])}</td><td>{_e(a['source'])}</td>"
                   f'<td><span class="badge" style="background:{color}">{_e(a["status"])}</span></td>'
                   f"<td>{_e(a['how'])}</td><td>{_e(ev)}</td><td>{_e(feeds)}</td>"
                   f"<td>{_e(a.get('necessity') or '—')}</td></tr>")
    out.append("</table>")
    if au.get("gamma_table"):
        out.append("<p>N's gamma is one constant for items 1, 2 and 4: the largest each allows, and their minimum.</p>")
        out.append("<table><tr><th>d</th><th>graph</th><th>item 1 (lower bound)</th><th>item 2 (non-degeneracy)</th>"
                   "<th>item 4 (1 - r)</th><th>gamma</th><th>limited by</th></tr>")
        for g in au["gamma_table"]:
            out.append(f"<tr><td>{_e(g['d'])}</td><td>{_e(g['graph'])}</td><td>{_e(_fmt_num(g['gamma_1']))}</td>"
                       f"<td>{_e(_fmt_num(g['gamma_2']))}</td><td>{_e(_fmt_num(g['one_minus_r']))}</td>"
                       f"<td>{_e(_fmt_num(g['gamma']))}{' (estimated)' if g.get('estimated') else ''}</td>"
                       f"<td>{_e(g['limited_by'])}</td></tr>")
        out.append("</table>")
    out.append("<table><tr><th>graph</th><th>T</th><th>roots</th><th>root fraction r</th><th>max leaves</th>"
               "<th>T_eff</th></tr>")
    for g in au["graphs"]:
        out.append(f"<tr><td>{_e(g['name'])}</td><td>{_e(g['T'])}</td><td>{_e(g['n_roots'])}</td>"
                   f"<td>{_e(_fmt_num(g['root_fraction']))}</td><td>{_e(g['max_leaves'])}</td>"
                   f"<td>{_e(_fmt_num(g['T_eff']))}</td></tr>")
    out.append("</table>")
    broken = [a for a in au["assumptions"] if a["status"] == "fails"]
    if broken:
        out.append("<h3>Broken assumptions: necessary or removable?</h3><ul>")
        for a in broken:
            out.append(f"<li><b>{_e(a['key'])} {_e(a['name'])}</b>: {_e(a.get('necessity') or '')} — "
                       f"{_e(a.get('necessity_detail', ''))}")
            if a.get("evidence"):
                out.append("<ul>")
                for e in a["evidence"]:
                    cex = (f"<pre>{_e(json.dumps(e['counterexample'], indent=1))}</pre>" if e.get("counterexample") else "")
                    out.append(f"<li>{_e(e['claim'])} {_e(e['tier'])} ({_e(e['verdict'])}): {_e(e['outcome'])} — "
                               f"{_e(e['detail'])}{cex}</li>")
                out.append("</ul>")
            out.append("</li>")
        out.append("</ul>")
    out.append("<details><summary>Assumption details (every number with its error bar and seed)</summary><ul>")
    for a in au["assumptions"]:
        out.append(f"<li><b>{_e(a['key'])} {_e(a['name'])}</b> ({_e(a['source'])}): {_e(a['statement'])}<ul>")
        for f in a["findings"]:
            nums = "".join(f"<li>{_e(_audit_number_text(n))}</li>" for n in f.get("numbers", []))
            wit = f"<li>witness: <code>{_e(_clip(json.dumps(f['witness']), 400))}</code></li>" if f.get("witness") else ""
            out.append(f"<li>{_e(f['where'])}: <b>{_e(f['status'])}</b> ({_e(f['how'])}) — {_e(f['summary'])}"
                       + (f"<ul>{nums}{wit}</ul>" if nums or wit else "") + "</li>")
        out.append("</ul></li>")
    out.append("</ul></details></section>")
    return out


def _html_claim(d: dict, out_dir: Path) -> list[str]:
    out = [f'<section class="claim" id="{_e(_anchor(d["id"]))}">',
           f"<h2>{_e(d['id'])} — {_e(d['title'])} {_badge(d['verdict'])}</h2>",
           f"<p class=\"muted\">source: {_e(d['source'])} · tiers: {_e(', '.join(d['tiers_supported']))} · decided by "
           f"profile <code>{_e(d['decided_by'])}</code> · claim seed {_e(d['seed'])}</p>",
           f"<p><i>Formalization checked:</i> {_e(d['statement'])}</p>"]
    pr = d.get("primary_reading") or {}
    if pr:
        out.append(f"<p><i>Primary reading (decides):</i> {_e(pr['statement'])} ({_e(pr['cite'])})"
                   + (f" Setting: {_e(pr['setting'])}" if pr.get("setting") else "") + "</p>")
        if pr.get("review"):
            out.append(f"<p><i>Review:</i> {_e(pr['review'])}</p>")
    if d.get("note"):
        out.append(f"<p><b>{_e(d['note'])}</b></p>")
    if d.get("graph"):
        out.append(f"<p><i>Causal graph:</i> {_e(_graph_line(d))}</p>")
        if d["graph"].get("figure"):
            out.append(_html_figure(d, d["graph"]["figure"], out_dir))
    if d.get("jobs"):
        out.append(f"<p><i>Training jobs:</i> {_e(jobs_text(d['jobs']))}</p>")
    for t in d["tiers"]:
        out.append(f"<h3>{_e(t['tier'])} {_badge(t['verdict'])} <span class=\"muted\">({t['elapsed_s']:.1f} s)</span></h3>")
        out.append(f"<p>{_e(t['summary'])}</p>")
        if t["assumptions"]:
            out.append("<ul>")
            for a in t["assumptions"]:
                mark = {True: "holds", False: "FAILS", None: "undecided"}[a["holds"]]
                out.append(f"<li>{_e(a['name'])}: <b>{mark}</b> — {_e(a['detail'])}</li>")
            out.append("</ul>")
        if t.get("conclusion_without_assumptions"):
            out.append(f"<p>Conclusion where an assumption fails: {_e(t['conclusion_without_assumptions'])}</p>")
        if t.get("readings"):
            out.append("<ul>" + "".join(f"<li>criterion <i>{_e(r.get('name'))}</i>: <b>{_e(r.get('verdict', ''))}</b> — "
                                         f"{_e(r.get('detail', ''))}</li>" for r in t["readings"]) + "</ul>")
        if t.get("findings"):
            items = []
            for f in t["findings"]:
                extra = _finding_numbers(f)
                cex = (f"<pre>{_e(json.dumps(f['counterexample'], indent=1))}</pre>" if f.get("counterexample") else "")
                if f.get("witness"):
                    cex += f"<p>witness (in full):</p><pre>{_e(json.dumps(f['witness'], indent=1))}</pre>"
                items.append(f"<li><i>{_e(f['kind'])}</i>: {_e(f['reading'])} {_badge(f['verdict'])} {_e(f['detail'])}"
                             + (f"<br/><small>{_e(extra)}</small>" if extra else "") + cex + "</li>")
            out.append("<p>Findings (other readings; they do not decide the verdict):</p><ul>" + "".join(items) + "</ul>")
        if t.get("controls"):
            out.append(f"<p>{_e(_CONTROLS_INTRO)}</p><table><tr><th>control</th><th>wrong mechanism</th><th>verdict</th>"
                       "<th>deciding number</th></tr>")
            for c in t["controls"]:
                out.append(f"<tr><td>{_e(c['name'])}</td><td>{_e(c['mechanism'])}</td><td>{_badge(c['verdict'])}</td>"
                           f"<td>{_e(c['deciding'])}</td></tr>")
            out.append("</table>")
        if t.get("certificates"):
            out.append(f"<p>{_e(_CERT_INTRO)}</p><table><tr>" + "".join(f"<th>{_e(h)}</th>" for h in _CERT_HEAD) + "</tr>")
            for row in _certificate_rows(t["certificates"]):
                out.append("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in row) + "</tr>")
            out.append("</table>")
        if t["numbers"]:
            out.append("<table><tr>" + "".join(f"<th>{_e(h)}</th>" for h in _NUM_HEAD) + "</tr>")
            for row in _number_rows(t["numbers"]):
                out.append("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in row) + "</tr>")
            out.append("</table>")
        if t.get("counterexample"):
            out.append("<p>Counterexample (in full):</p><pre>" + _e(json.dumps(t["counterexample"], indent=1)) + "</pre>")
        if t.get("corpus"):
            out.append("<p>Counterexample corpus:</p><ul>" + "".join(
                f"<li>{_e(c['status'])}: <code>{_e(c['file'])}</code> — {_e(c['detail'])}</li>" for c in t["corpus"])
                + "</ul>")
        if t.get("sequential"):
            out.append(f"<p>Seeds: {_e(_sequential_line(t['sequential']))}</p>")
        if t.get("budget"):
            out.append(f"<p>What would decide it: {_e(t['budget'])}</p>")
        if t.get("error"):
            out.append(f"<pre>{_e(t['error'])}</pre>")
        for f in t.get("figures", []):
            out.append(_html_figure(d, f, out_dir))
    out.append("</section>")
    return out


def _html_figure(d: dict, f: str, out_dir: Path) -> str:
    """The figure ``f`` (relative to the run folder) embedded in the page, or a note that it is missing."""
    path = Path(out_dir) / f
    if not path.exists():
        return f"<p class=\"muted\">figure {_e(f)} is missing</p>"
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return f'<img alt="{_e(d["id"] + " " + path.stem)}" src="data:image/png;base64,{data}" />'


# -- junit ----------------------------------------------------------------------------------
def _qa(text) -> str:
    return quoteattr(_printable(text))


def render_junit(doc: dict) -> str:
    claims = doc["claims"]
    fails = sum(d["verdict"] == "FAIL" for d in claims)
    errors = sum(d["verdict"] == "ERROR" for d in claims)
    skipped = sum(d["verdict"] in ("NOT_RUN", "INCONCLUSIVE", "ASSUMPTION_UNMET") for d in claims)
    lines = ['<?xml version="1.0" encoding="UTF-8"?>',
             f"<testsuites><testsuite name={_qa('icl-verify ' + doc['run_id'])} tests=\"{len(claims)}\" "
             f"failures=\"{fails}\" errors=\"{errors}\" skipped=\"{skipped}\" time=\"{doc['elapsed_s']}\">"]
    for d in claims:
        lines.append(f"<testcase classname={_qa('icl_verify.' + d['paper'])} name={_qa(d['id'])} "
                     f"time=\"{d['elapsed_s']}\">")
        msg = "; ".join(f"{t['tier']}: {t['summary']}" for t in d["tiers"]) or d.get("note", "")
        if d["verdict"] == Verdict.FAIL.value:
            cex = next((t.get("counterexample") for t in d["tiers"] if t.get("counterexample")), None)
            body = _e(json.dumps(cex, indent=1)) if cex else ""
            lines.append(f"<failure message={_qa(msg)}>{body}</failure>")
        elif d["verdict"] == Verdict.ERROR.value:
            err = next((t.get("error") for t in d["tiers"] if t.get("error")), "")
            lines.append(f"<error message={_qa(msg)}>{_e(err or '')}</error>")
        elif d["verdict"] != Verdict.PASS.value:
            lines.append(f"<skipped message={_qa(d['verdict'] + ': ' + msg)} />")
        if d.get("headline") and d["headline"] != d["verdict"]:
            lines.append(f"<system-out>{_e(d['headline'])}</system-out>")
        lines.append("</testcase>")
    lines.append("</testsuite></testsuites>")
    return "\n".join(lines) + "\n"


def _sequential_line(seq: dict) -> str:
    """How many seeds a sequential decision took, why it stopped, and its correction across looks."""
    looks = "; ".join(f"{lk['seeds']} seeds: {lk['outcome']}" for lk in seq.get("looks", []))
    return (f"{seq['seeds used']} training seeds, {seq['stop']} ({seq['correction']}: looks planned at "
            f"{seq['planned looks']}, each at z = {seq['z per look']:.3g}). Looks: {looks}")
