"""What changed between two finished runs: ``icl-verify diff RUN_A RUN_B``.

:func:`diff_runs` compares two results.json documents (as :func:`sim.report.load_results`
returns them) and lists, in this order:

1. the claims whose verdict changed (A -> B), with both headlines; a change is *worse* when
   B's verdict is more severe in ``sim.verdict._SEVERITY``
   (ERROR > FAIL > ASSUMPTION_UNMET > INCONCLUSIVE > PASS). ``NOT_RUN`` (and any verdict
   this tool does not know) is outside that order: changes to or from it are listed but
   never worse;
2. the numbers that moved, for each number present in both runs under the same claim, tier
   and name (the k-th repeat of a name within a tier is matched to the k-th):

   - statistical numbers (kind ``montecarlo``, ``trained`` or ``property`` in either run):
     moved when ``|vA - vB| > z * sqrt(seA**2 + seB**2)``, and also beyond round-off
     (below), so that two numbers with zero standard error do not differ by float noise;
   - exact numbers (kind ``exact``, ``symbolic`` or ``certified``: a rigorous bound or a box count,
     the same at every seed): moved when
     ``|vA - vB| > 64 * eps * max(1, |vA|, |vB|)``, ``eps`` the float64 machine epsilon
     (``2**-52``);
   - values that are not finite numbers (``"inf"``, ``"-inf"``, ``"nan"`` as results.json
     stores them, other strings, booleans, null) are compared as strings: moved when the
     texts differ. A missing or non-numeric standard error counts as 0 and an ``"inf"``
     one as infinite (such a number never moves);
   - numbers of kind ``seed`` (the seed of one of the run's streams) are not compared: they
     record an input, and the header already says the master seed changed;
3. the claims present in only one run.

The configurations' profile, seed and prior are compared for a header line. Nothing is read
or written here: the CLI loads the documents and prints :func:`render_text` or
:func:`render_json`.
"""
from __future__ import annotations

import json
import math
import sys
from dataclasses import asdict, dataclass, field
from typing import Any

from sim.verdict import _SEVERITY, Z_DEFAULT, Verdict

__all__ = ["RunDiff", "VerdictChange", "MovedNumber", "OnlyIn", "MalformedRunError", "diff_runs",
           "render_text", "render_json", "ROUNDOFF_ULPS", "STATISTICAL_KINDS"]

#: Numbers whose standard error is statistical; the others (exact, symbolic, certified) are compared up to round-off.
STATISTICAL_KINDS = ("montecarlo", "trained", "property")
#: Round-off allowance for exact numbers, in units of float64 eps times ``max(1, |vA|, |vB|)``.
ROUNDOFF_ULPS = 64
_EPS = sys.float_info.epsilon
#: The verdicts ranked by severity; NOT_RUN is not ranked (a change to or from it is never worse).
_RANK = {v.value: i for i, v in enumerate(_SEVERITY) if v is not Verdict.NOT_RUN}
_CONFIG_KEYS = ("profile", "seed", "prior")


class MalformedRunError(ValueError):
    """A results document whose claims cannot be compared (not the shape results.json has);
    ``which`` is "A" or "B"."""

    def __init__(self, which: str, message: str):
        super().__init__(f"run {which}: {message}")
        self.which = which
        self.detail = message


@dataclass(frozen=True)
class VerdictChange:
    """A claim whose verdict differs between run A and run B: ``verdict_a -> verdict_b``, both
    headlines, the title (B's, else A's), and whether the change is ``worse`` (B's verdict more severe)."""

    id: str
    title: str
    verdict_a: str
    verdict_b: str
    headline_a: str
    headline_b: str
    worse: bool


@dataclass(frozen=True)
class MovedNumber:
    """A number of the same claim, tier and name that moved between the runs (the rules are in
    the module docstring): both values and standard errors as results.json stores them, and
    the test that listed it."""

    claim: str
    tier: str
    name: str
    kind: str
    value_a: Any
    value_b: Any
    stderr_a: Any
    stderr_b: Any
    #: ``|vA - vB|`` (None when the values were compared as strings)
    delta: float | None
    #: the change a number had to exceed to be listed (None when compared as strings)
    threshold: float | None
    #: ``|vA - vB|`` in combined standard errors (statistical numbers with a non-zero error; else None)
    sigmas: float | None
    #: "statistical", "round-off" or "text"
    test: str


@dataclass(frozen=True)
class OnlyIn:
    """A claim present in only one of the runs, with its title and verdict there."""

    id: str
    title: str
    verdict: str


@dataclass
class RunDiff:
    """What :func:`diff_runs` found between run A and run B (their run ids), compared at ``z``
    standard errors: configuration changes, verdict changes, moved numbers, and the claims in
    only one run."""

    run_a: str
    run_b: str
    z: float
    #: {key: (A's value, B's value)} for the profile, seed and prior that differ
    config_changes: dict = field(default_factory=dict)
    verdict_changes: list[VerdictChange] = field(default_factory=list)
    moved_numbers: list[MovedNumber] = field(default_factory=list)
    only_in_a: list[OnlyIn] = field(default_factory=list)
    only_in_b: list[OnlyIn] = field(default_factory=list)
    #: numbers compared (present in both runs under the same claim, tier and name)
    numbers_compared: int = 0

    @property
    def worse(self) -> list[VerdictChange]:
        """The verdict changes to a more severe verdict."""
        return [c for c in self.verdict_changes if c.worse]

    def as_dict(self) -> dict:
        """The JSON form :func:`render_json` prints: every field, ``config_changes`` as ``{key: {"a", "b"}}``,
        and ``worse`` as the list of claim ids."""
        return {
            "run_a": self.run_a, "run_b": self.run_b, "z": self.z,
            "config_changes": {k: {"a": a, "b": b} for k, (a, b) in self.config_changes.items()},
            "verdict_changes": [asdict(c) for c in self.verdict_changes],
            "moved_numbers": [asdict(m) for m in self.moved_numbers],
            "only_in_a": [asdict(o) for o in self.only_in_a],
            "only_in_b": [asdict(o) for o in self.only_in_b],
            "numbers_compared": self.numbers_compared,
            "worse": [c.id for c in self.worse],
        }


def is_worse(verdict_a: str, verdict_b: str) -> bool:
    """B's verdict is more severe than A's (both ranked; NOT_RUN and unknown verdicts never are)."""
    a, b = _RANK.get(verdict_a), _RANK.get(verdict_b)
    return a is not None and b is not None and b < a


def diff_runs(doc_a: dict, doc_b: dict, z: float = Z_DEFAULT) -> RunDiff:
    """Compare two results.json documents (see the module docstring for the rules).

    Raises :class:`MalformedRunError` when a document's claims do not have the results.json
    shape, and ``ValueError`` for a ``z`` that is not positive and finite."""
    if not (isinstance(z, (int, float)) and not isinstance(z, bool) and math.isfinite(z) and z > 0):
        raise ValueError(f"z must be a positive finite number, got {z!r}")
    claims_a, claims_b = _claims(doc_a, "A"), _claims(doc_b, "B")
    out = RunDiff(run_a=str(doc_a.get("run_id", "A")), run_b=str(doc_b.get("run_id", "B")), z=float(z))
    cfg_a, cfg_b = _config(doc_a), _config(doc_b)
    out.config_changes = {k: (cfg_a[k], cfg_b[k]) for k in _CONFIG_KEYS if cfg_a[k] != cfg_b[k]}
    for cid, ca in claims_a.items():
        cb = claims_b.get(cid)
        if cb is None:
            out.only_in_a.append(OnlyIn(cid, _text(ca.get("title")), _text(ca.get("verdict"))))
            continue
        va, vb = _text(ca.get("verdict")), _text(cb.get("verdict"))
        if va != vb:
            out.verdict_changes.append(VerdictChange(
                cid, _text(cb.get("title") or ca.get("title")), va, vb,
                _text(ca.get("headline") or va), _text(cb.get("headline") or vb), is_worse(va, vb)))
        moved, compared = _moved_numbers(cid, ca, cb, z)
        out.moved_numbers.extend(moved)
        out.numbers_compared += compared
    out.only_in_b = [OnlyIn(cid, _text(cb.get("title")), _text(cb.get("verdict")))
                     for cid, cb in claims_b.items() if cid not in claims_a]
    return out


def _claims(doc, which: str) -> dict[str, dict]:
    if not isinstance(doc, dict) or not isinstance(doc.get("claims"), list):
        raise MalformedRunError(which, "not a results document (no list of claims)")
    out: dict[str, dict] = {}
    for k, c in enumerate(doc["claims"]):
        if not isinstance(c, dict) or not isinstance(c.get("id"), str):
            raise MalformedRunError(which, f"claim #{k + 1} in results.json has no id")
        if c["id"] in out:
            raise MalformedRunError(which, f"claim {c['id']} appears twice in results.json")
        tiers = c.get("tiers", [])
        if not isinstance(tiers, list) or not all(
                isinstance(t, dict) and isinstance(t.get("numbers", []), list)
                and all(isinstance(n, dict) for n in t.get("numbers", [])) for t in tiers):
            raise MalformedRunError(which, f"claim {c['id']} has malformed tiers in results.json")
        out[c["id"]] = c
    return out


def _config(doc: dict) -> dict:
    cfg = doc.get("config") if isinstance(doc.get("config"), dict) else {}
    prior = cfg.get("prior", doc.get("prior"))
    return {"profile": cfg.get("profile"), "seed": cfg.get("seed"), "prior": prior}


def _text(x) -> str:
    return "" if x is None else str(x)


def _numbers_by_key(claim: dict) -> dict[tuple[str, str], dict]:
    out: dict[tuple[str, str], dict] = {}
    for t in claim.get("tiers", []):
        tier = _text(t.get("tier"))
        seen: dict[str, int] = {}
        for n in t.get("numbers", []):
            name = _text(n.get("name"))
            seen[name] = seen.get(name, 0) + 1
            key = name if seen[name] == 1 else f"{name} [{seen[name]}]"
            out.setdefault((tier, key), n)
    return out


def _finite(x) -> float | None:
    """``x`` as a float when it is a finite number (not a bool, not a string)."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def _stderr(x) -> float:
    if isinstance(x, str) and x.strip().lower() in ("inf", "+inf", "infinity"):
        return math.inf
    v = _finite(x)
    return abs(v) if v is not None else 0.0


def _moved_numbers(cid: str, ca: dict, cb: dict, z: float) -> tuple[list[MovedNumber], int]:
    na, nb = _numbers_by_key(ca), _numbers_by_key(cb)
    moved, compared = [], 0
    for key, a in na.items():
        b = nb.get(key)
        if b is None or "seed" in (a.get("kind"), b.get("kind")):
            continue  # a seed is a record of an input, not a measurement: the config's seed says it moved
        compared += 1
        tier, name = key
        kind_a, kind_b = _text(a.get("kind") or "exact"), _text(b.get("kind") or "exact")
        kind = kind_b if kind_a == kind_b else f"{kind_a}/{kind_b}"
        va, vb = a.get("value"), b.get("value")
        fa, fb = _finite(va), _finite(vb)
        common = dict(claim=cid, tier=tier, name=name, kind=kind, value_a=va, value_b=vb,
                      stderr_a=a.get("stderr"), stderr_b=b.get("stderr"))
        if fa is None or fb is None:
            if _as_string(va) != _as_string(vb):
                moved.append(MovedNumber(**common, delta=None, threshold=None, sigmas=None, test="text"))
            continue
        delta = abs(fa - fb)
        roundoff = ROUNDOFF_ULPS * _EPS * max(1.0, abs(fa), abs(fb))
        if kind_a in STATISTICAL_KINDS or kind_b in STATISTICAL_KINDS:
            se = math.hypot(_stderr(a.get("stderr")), _stderr(b.get("stderr")))
            threshold = max(z * se, roundoff)
            sigmas = delta / se if 0 < se < math.inf else None
            test = "statistical"
        else:
            threshold, sigmas, test = roundoff, None, "round-off"
        if delta > threshold:
            moved.append(MovedNumber(**common, delta=delta, threshold=threshold, sigmas=sigmas, test=test))
    return moved, compared


def _as_string(x) -> str:
    """How a value that is not a finite number is compared: its JSON text (so 1 and "1" differ)."""
    return json.dumps(x, sort_keys=True, default=str)


# ----------------------------------------------------------------------------- rendering

def _fmt(x) -> str:
    if isinstance(x, bool) or x is None:
        return json.dumps(x)
    if isinstance(x, int):
        return str(x)
    if isinstance(x, float):
        if not math.isfinite(x):
            return str(x)
        if x != 0 and (abs(x) < 1e-3 or abs(x) >= 1e5):
            return f"{x:.4e}"
        return f"{x:.6g}"
    return str(x)


def _setting(x) -> str:
    return "none" if x is None else _fmt(x)


def _with_se(value, stderr) -> str:
    se = _finite(stderr)
    if se:
        return f"{_fmt(value)} ± {_fmt(se)}"
    if isinstance(stderr, str):
        return f"{_fmt(value)} ± {stderr}"
    return _fmt(value)


def render_text(d: RunDiff) -> str:
    """The diff as a plain-text listing: header, verdict changes, moved numbers, claims in one run only."""
    lines = [f"A: {d.run_a}", f"B: {d.run_b}"]
    if d.config_changes:
        lines.append("configs differ: " + "; ".join(f"{k} {_setting(a)} -> {_setting(b)}"
                                                     for k, (a, b) in d.config_changes.items()))
    else:
        lines.append("configs agree on profile, seed and prior")
    lines.append("")
    lines.append(f"Verdicts changed ({len(d.verdict_changes)}):")
    for c in d.verdict_changes:
        mark = "  WORSE" if c.worse else ""
        lines.append(f"  {c.id}: {c.verdict_a} -> {c.verdict_b}{mark}  {c.title}".rstrip())
        lines.append(f"      A: {c.headline_a}")
        lines.append(f"      B: {c.headline_b}")
    if not d.verdict_changes:
        lines.append("  (none)")
    lines.append("")
    lines.append(f"Numbers moved ({len(d.moved_numbers)} of {d.numbers_compared} in both runs; "
                 f"statistical beyond {_fmt(d.z)} combined standard errors, exact beyond round-off):")
    for m in d.moved_numbers:
        if m.test == "text":
            why = "values differ"
        elif m.sigmas is not None:
            why = f"|Δ| = {_fmt(m.delta)} = {m.sigmas:.1f} combined s.e."
        elif m.test == "round-off":
            why = f"|Δ| = {_fmt(m.delta)} > {_fmt(m.threshold)} (round-off)"
        else:
            why = f"|Δ| = {_fmt(m.delta)}, no standard error"
        lines.append(f"  {m.claim} [{m.tier}] {m.name} ({m.kind}): "
                     f"{_with_se(m.value_a, m.stderr_a)} -> {_with_se(m.value_b, m.stderr_b)}  ({why})")
    if not d.moved_numbers:
        lines.append("  (none)")
    for label, items in (("Only in A", d.only_in_a), ("Only in B", d.only_in_b)):
        lines.append("")
        lines.append(f"{label} ({len(items)}):")
        for o in items:
            lines.append(f"  {o.id}: {o.verdict}  {o.title}".rstrip())
        if not items:
            lines.append("  (none)")
    if d.worse:
        lines.append("")
        lines.append(f"{len(d.worse)} verdict(s) got worse: {', '.join(c.id for c in d.worse)}")
    from sim.report import _printable

    return _printable("\n".join(lines))


def render_json(d: RunDiff) -> str:
    """The diff as strict JSON: verdict_changes, moved_numbers, only_in_a, only_in_b (and the header's facts)."""
    from sim.files import dump_json
    from sim.verdict import to_jsonable

    return dump_json(to_jsonable(d.as_dict()))

