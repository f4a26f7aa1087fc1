"""The verdict engine: numbers with their error bars, assumptions, conclusions, verdicts.

Semantics (``shared/CLAIMS.md``, "Verdicts"): every check separates assumptions from the
conclusion and returns

- ``PASS``: assumptions hold and the conclusion is verified with margin beyond the
  statistical error (``z`` standard errors, and beyond the float tolerance for exact
  numbers);
- ``FAIL``: assumptions hold and the conclusion is violated; the counterexample is kept
  in full so anyone can re-check it by hand;
- ``ASSUMPTION_UNMET``: some assumption fails; the conclusion is still evaluated and the
  result says whether it held there (i.e. whether the assumption looked necessary);
- ``INCONCLUSIVE``: the error bar straddles the threshold; the result says what budget
  would decide it.

Two statuses outside the four verdicts keep reports honest: ``NOT_RUN`` (the claim is
decided by another profile; the report names it) and ``ERROR`` (the check itself crashed;
the traceback is kept). Both are listed, never counted as a pass.
"""
from __future__ import annotations

import enum
import math
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Sequence

__all__ = [
    "Verdict",
    "Outcome",
    "Number",
    "NUMBER_KINDS",
    "Assumption",
    "FindingKind",
    "Finding",
    "Control",
    "TierResult",
    "ClaimResult",
    "Z_DEFAULT",
    "compare",
    "margin_multiplier",
    "welch_df",
    "tier_verdict",
    "combine_verdicts",
    "headline",
    "guard_with_controls",
    "to_jsonable",
    "format_number",
]

#: Standard errors of margin a PASS needs (two-sided 99.7 %).
Z_DEFAULT = 3.0


class Verdict(str, enum.Enum):
    """The verdict of a tier or a claim: the four verdicts and the two statuses of the module
    docstring; its value is its name, and it prints as its value (``str(Verdict.PASS) == "PASS"``)."""

    PASS = "PASS"
    FAIL = "FAIL"
    ASSUMPTION_UNMET = "ASSUMPTION_UNMET"
    INCONCLUSIVE = "INCONCLUSIVE"
    NOT_RUN = "NOT_RUN"
    ERROR = "ERROR"

    def __str__(self) -> str:
        return self.value


class Outcome(str, enum.Enum):
    """Status of a conclusion, decided with the error bars."""

    HELD = "held"
    VIOLATED = "violated"
    UNDECIDED = "undecided"

    def __str__(self) -> str:
        return self.value


#: What a :class:`Number` is: a measurement of one of the tiers' kinds (``certified``: a rigorous bound or
#: a count of a certificate's boxes), or ``seed``, a record of an input (a stream's seed) that
#: comparisons between runs leave out (:mod:`sim.diff`).
NUMBER_KINDS = ("exact", "montecarlo", "trained", "symbolic", "property", "certified", "seed")


@dataclass(frozen=True)
class Number:
    """One reported number with everything needed to judge it.

    ``stderr`` is the Monte Carlo standard error (or the seeds' standard error for trained
    numbers; ``0.0`` for exact values), ``n`` the sample size, ``seed`` the seed that
    produced it, ``tolerance`` the tolerance the check used with it. ``df`` is set when the
    standard error was estimated from few samples (``n - 1`` across ``n`` training seeds):
    margins on such a number use the Student-t quantile (:func:`margin_multiplier`), not ``z``.
    """

    name: str
    value: float
    stderr: float = 0.0
    n: int | None = None
    seed: int | None = None
    tolerance: float | None = None
    kind: str = "exact"  # exact | montecarlo | trained | symbolic | property | certified | seed (an input)
    note: str = ""
    df: float | None = None

    def __post_init__(self):
        if self.kind not in NUMBER_KINDS:
            raise ValueError(f"Number {self.name!r}: unknown kind {self.kind!r}")
        if self.stderr < 0 or (isinstance(self.stderr, float) and math.isnan(self.stderr)):
            raise ValueError(f"Number {self.name!r}: stderr must be >= 0, got {self.stderr}")
        if self.df is not None and self.df < 0:
            raise ValueError(f"Number {self.name!r}: df must be >= 0, got {self.df}")

    def format(self, digits: int = 4) -> str:
        """``value ± stderr, n=..., seed=..., tol=...``, each part only when set (no ``±`` for an exact number)."""
        v = format_number(self.value, digits)
        parts = [v if self.stderr == 0 else f"{v} ± {format_number(self.stderr, 2)}"]
        if self.n is not None:
            parts.append(f"n={self.n}")
        if self.seed is not None:
            parts.append(f"seed={self.seed}")
        if self.tolerance is not None:
            parts.append(f"tol={format_number(self.tolerance, 2)}")
        return ", ".join(parts)


def format_number(x: float, digits: int = 4) -> str:
    """``x`` for a reader: ``digits`` significant digits, scientific below 1e-3 and from 1e5."""
    if x is None:
        return "—"
    if isinstance(x, (int,)) and not isinstance(x, bool):
        return str(x)
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if math.isnan(x):
        return "nan"
    if x != 0 and (abs(x) < 1e-3 or abs(x) >= 1e5):
        return f"{x:.{digits - 1}e}"
    return f"{x:.{digits}g}"


@dataclass(frozen=True)
class Assumption:
    """A named check on the inputs. ``holds=None`` means it could not be decided."""

    name: str
    holds: bool | None
    detail: str = ""
    numbers: tuple[Number, ...] = ()


class FindingKind(str, enum.Enum):
    """What a finding reads instead of the paper's own statement (``shared/CLAIMS.md``: one
    reading decides; every other one is a finding, reported beside the verdict)."""

    LITERAL = "literal statement"  # the words taken literally where the paper means less ("equals" for "approximates")
    STRICTER = "stricter criterion"  # a test the paper does not make (per-position argmax, a fixed prefactor)
    OUTSIDE = "outside the paper's setting"  # another model, root law, output reading or regime
    REFERENCE_CODE = "reference code"  # what the authors' code does, where it differs from the paper
    UNSTATED = "unstated assumption"  # something the statement needs and the paper does not say

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Finding:
    """A reading other than the paper's own statement, with its own verdict and evidence.

    A finding never decides the claim's verdict: a FAIL here means "this other reading
    fails", reported beside the primary verdict (``PASS (finding: ...)``).
    ``reading`` says the reading in words; ``detail`` is the one line with the number that
    settles it (e.g. "the exact identity of step 3 fails on 15.7% ± 0.3% of prompts").
    """

    kind: FindingKind
    reading: str
    verdict: Verdict
    detail: str
    numbers: tuple[Number, ...] = ()
    counterexample: dict[str, Any] | None = None
    # The input that attains a reported extreme (a tightness optimum), in full; not a counterexample.
    witness: dict[str, Any] | None = None

    def __post_init__(self):
        object.__setattr__(self, "kind", FindingKind(self.kind))
        object.__setattr__(self, "verdict", Verdict(self.verdict))
        object.__setattr__(self, "numbers", tuple(self.numbers))
        if not self.reading or not self.detail:
            raise ValueError("a Finding needs the reading and the detail that settles it")


@dataclass(frozen=True)
class Control:
    """A negative control: a model built on a wrong mechanism, put through the claim's own
    deciding check. It must FAIL.

    ``name`` says what the model is ("prompt unigram: A1 = true adjacency, A2 = 0"),
    ``mechanism`` why it is wrong, ``verdict`` the deciding check's verdict on it, and
    ``deciding`` the one line with the number that decided it. A control that does not FAIL
    means the check cannot tell the paper's mechanism from a wrong one: the tier is then
    INCONCLUSIVE, never PASS (:func:`guard_with_controls`).
    """

    name: str
    mechanism: str
    verdict: Verdict
    deciding: str
    numbers: tuple[Number, ...] = ()

    def __post_init__(self):
        object.__setattr__(self, "verdict", Verdict(self.verdict))
        object.__setattr__(self, "numbers", tuple(self.numbers))
        if not self.name or not self.mechanism or not self.deciding:
            raise ValueError("a Control needs its name, its wrong mechanism and the deciding number")


@dataclass
class TierResult:
    """The evidence one tier produced for one claim."""

    tier: str
    verdict: Verdict
    conclusion: Outcome
    summary: str
    assumptions: list[Assumption] = field(default_factory=list)
    numbers: list[Number] = field(default_factory=list)
    counterexample: dict[str, Any] | None = None
    # When an assumption failed: did the conclusion still hold on the inputs that broke it?
    conclusion_without_assumptions: str | None = None
    figures: list[str] = field(default_factory=list)
    budget: str = ""  # what would decide an INCONCLUSIVE result
    # Criteria of the primary reading, reported one by one (each part of the deciding reading).
    readings: list[dict[str, Any]] = field(default_factory=list)
    # Other readings (literal, stricter, another setting, the reference code): never deciding.
    findings: list[Finding] = field(default_factory=list)
    # Negative controls: wrong mechanisms through the same deciding check; each must FAIL.
    controls: list[Control] = field(default_factory=list)
    # A trained tier decided sequentially over seeds: the looks, why it stopped (sim.sequential).
    sequential: dict[str, Any] | None = None
    # The counterexample corpus (sim.corpus): one {"file", "status", "detail"} per file replayed, stored or skipped.
    corpus: list[dict[str, Any]] = field(default_factory=list)
    # The certified tier's certificates (theory.certified.Certificate.record): each with its domain whole,
    # its status (PROVED, COUNTEREXAMPLE, UNDECIDED, REFUSED), boxes, precision and time.
    certificates: list[dict[str, Any]] = field(default_factory=list)
    elapsed_s: float = 0.0
    error: str | None = None


@dataclass
class ClaimResult:
    """Everything one claim's evaluation produced, as results.json stores it: the claim's identity
    (id, title, paper, source, statement), the tiers it supports and the profile that
    ``decided_by`` it, its combined ``verdict`` and ``headline``, one :class:`TierResult` per tier
    run, the claim's ``seed`` and the run's ``config_hash``."""

    id: str
    title: str
    paper: str
    source: str
    statement: str
    tiers_supported: list[str]
    decided_by: str
    verdict: Verdict
    tiers: list[TierResult]
    seed: int
    config_hash: str
    elapsed_s: float = 0.0
    note: str = ""
    # The paper's own statement, in its own scope and setting: the one reading that decides.
    primary_reading: dict[str, Any] = field(default_factory=dict)
    # The verdict with the failing findings beside it: "PASS (finding: ...)".
    headline: str = ""
    # The user's causal graph the claim ran on (``run --graph``): name, nodes, edges, the settings it
    # replaced, why, and its figure; None when it ran on its own graphs.
    graph: dict[str, Any] | None = None
    # The claim's training jobs (sim.claims.jobs.run_jobs): how many were trained here and how many
    # were reused from the run folder (an interrupted run's records); None when it trains nothing.
    jobs: dict[str, int] | None = None


def headline(verdict: Verdict, findings: Iterable[Finding]) -> str:
    """``verdict`` with the findings whose own reading does not PASS, e.g.
    ``PASS (finding: the exact identity of step 3 fails on 15.7% of prompts)``."""
    notes = [f.detail for f in findings if f.verdict in (Verdict.FAIL, Verdict.INCONCLUSIVE, Verdict.ERROR)]
    if not notes:
        return str(verdict)
    word = "finding" if len(notes) == 1 else "findings"
    return f"{verdict} ({word}: {'; '.join(notes)})"


def guard_with_controls(result: TierResult) -> TierResult:
    """A PASS stands only if every negative control FAILed the same check.

    A control that PASSes (or is undecided, or crashed) shows the check would also pass a
    wrong mechanism: the tier becomes INCONCLUSIVE, and its summary and budget say which
    control did not fail. Other verdicts are left as they are."""
    standing = [c for c in result.controls if c.verdict is not Verdict.FAIL]
    if result.verdict is not Verdict.PASS or not standing:
        return result
    names = "; ".join(f"{c.name} -> {c.verdict} ({c.deciding})" for c in standing)
    result.verdict = Verdict.INCONCLUSIVE
    result.conclusion = Outcome.UNDECIDED
    result.summary = (f"the check cannot tell this mechanism from a wrong one: {names}. "
                      f"Before the controls: PASS ({result.summary})")
    result.budget = "; ".join(x for x in (result.budget, "a criterion (or a budget) under which every control FAILs") if x)
    return result


def margin_multiplier(z: float, df: float | None = None) -> float:
    """How many standard errors a margin needs, at the one-sided level ``Phi(-z)``.

    ``z`` itself when the standard error is known well (Monte Carlo over many samples);
    the Student-t quantile ``t_{df}^{-1}(Phi(z))`` when it was estimated with ``df``
    degrees of freedom (``n - 1`` across ``n`` training seeds), so that few seeds give a
    wide margin and not a lucky one (at z = 3: 4.5 with 7 degrees of freedom, 236 with 1).
    ``df = 0`` (one sample, no estimate of the spread) needs an infinite margin.
    """
    if df is None:
        return float(z)
    if df < 0:
        raise ValueError(f"df must be >= 0, got {df}")
    if df == 0:
        return math.inf
    from scipy import stats

    return float(stats.t.isf(stats.norm.sf(z), df))


def welch_df(parts: Iterable[tuple[float, float | None]]) -> float | None:
    """Welch-Satterthwaite degrees of freedom of a sum of variance estimates.

    ``parts`` are ``(variance, df)``; ``df`` None marks a variance known well (Monte Carlo over
    many samples). ``nu = (sum v)^2 / sum_{df finite} v^2 / df``; None when no part has a finite
    ``df`` (the normal quantile applies), and ``0`` when the only finite-``df`` parts have none.
    """
    parts = [(float(v), df) for v, df in parts]
    total = sum(v for v, _ in parts)
    few = [(v, df) for v, df in parts if df is not None]
    if not few:
        return None
    if any(df == 0 for _, df in few):
        return 0.0
    denom = sum(v * v / df for v, df in few)
    if denom == 0.0:
        return None if total > 0 else float(min(df for _, df in few))
    return total * total / denom


def compare(value: float, threshold: float, *, stderr: float = 0.0, z: float = Z_DEFAULT,
            tol: float = 0.0, direction: str = ">=", df: float | None = None) -> Outcome:
    """Decide ``value >= threshold`` (or ``<=``) with margin beyond the error.

    HELD when the inequality holds by more than ``q * stderr + tol``; VIOLATED when it
    fails by more than that; UNDECIDED in between. ``q = z`` when ``df`` is None, else the
    Student-t quantile with ``df`` degrees of freedom at the same one-sided level
    (:func:`margin_multiplier`). ``tol`` is the float tolerance for exact numbers
    (round-off), ``stderr`` the statistical error.

    For a non-strict exact inequality that may hold with equality (e.g. the DPI), pass a
    round-off ``tol`` and read UNDECIDED as "equal within round-off": callers decide
    whether equality satisfies their conclusion.
    """
    if direction not in (">=", "<="):
        raise ValueError(f"direction must be '>=' or '<=', got {direction!r}")
    if any(isinstance(x, float) and math.isnan(x) for x in (value, threshold, stderr)):
        raise ValueError(f"compare got NaN (value={value}, threshold={threshold}, stderr={stderr})")
    diff = value - threshold if direction == ">=" else threshold - value
    q = margin_multiplier(z, df)
    if math.isinf(q):  # one sample: its spread is unknown, so nothing is beyond it
        return Outcome.UNDECIDED
    margin = q * stderr + tol
    if diff > margin:
        return Outcome.HELD
    if diff < -margin:
        return Outcome.VIOLATED
    return Outcome.UNDECIDED


def tier_verdict(assumptions: Sequence[Assumption], conclusion: Outcome) -> Verdict:
    """The verdict of one tier from its assumptions and its conclusion's status."""
    if any(a.holds is False for a in assumptions):
        return Verdict.ASSUMPTION_UNMET
    if any(a.holds is None for a in assumptions):
        return Verdict.INCONCLUSIVE
    return {
        Outcome.HELD: Verdict.PASS,
        Outcome.VIOLATED: Verdict.FAIL,
        Outcome.UNDECIDED: Verdict.INCONCLUSIVE,
    }[conclusion]


_SEVERITY = [Verdict.ERROR, Verdict.FAIL, Verdict.ASSUMPTION_UNMET, Verdict.INCONCLUSIVE, Verdict.PASS, Verdict.NOT_RUN]


def combine_verdicts(verdicts: Iterable[Verdict]) -> Verdict:
    """A claim's verdict from its tiers': the most severe one wins.

    Order: ERROR > FAIL > ASSUMPTION_UNMET > INCONCLUSIVE > PASS; NOT_RUN only when no tier ran.
    """
    vs = list(verdicts)
    if not vs:
        return Verdict.NOT_RUN
    return min(vs, key=_SEVERITY.index)


def to_jsonable(obj):
    """Dataclasses / enums / numpy scalars and arrays to plain JSON types (inf as strings)."""
    import numpy as np

    if isinstance(obj, enum.Enum):
        return obj.value
    if hasattr(obj, "__dataclass_fields__"):
        return {k: to_jsonable(v) for k, v in asdict(obj).items()}
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return to_jsonable(obj.tolist())
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (np.floating, float)):
        x = float(obj)
        if math.isinf(x):
            return "inf" if x > 0 else "-inf"
        if math.isnan(x):
            return "nan"
        return x
    if isinstance(obj, (np.bool_,)):
        return bool(obj)
    return obj
