"""Claims as objects, the context a check runs in, and the shared evaluation patterns.

A :class:`Claim` is small: catalogue id, source, the formalization it checks (in words),
named assumptions, the tiers it supports with one check function each, per-profile
settings, and ``params``: the formula under test (constants, bounds). ``params`` is what
a *variant* perturbs, so a test can hand the engine a deliberately wrong conclusion and
watch it FAIL, and ``Context.prior`` is what a user's prior replaces.
"""
from __future__ import annotations

import contextlib
import dataclasses
import random
import re
import tempfile
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from sim.seeds import derive_seed
from sim.verdict import Assumption, Number, Outcome, TierResult, Verdict, tier_verdict

__all__ = [
    "Source",
    "PrimaryReading",
    "GraphInput",
    "GraphFitError",
    "Claim",
    "Context",
    "TIERS",
    "PROFILES",
    "InstanceCheck",
    "summarize_instances",
    "search_counterexample",
    "per_case",
    "property_tier",
    "certified_tier",
    "matrices_strategy",
    "crash_result",
    "collect_claims",
]

TIERS = ("symbolic", "exact", "property", "certified", "montecarlo", "trained")
#: What a claim id may look like: it names ``results/<id>.json``, so no path may hide in it.
CLAIM_ID = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,63}")
PROFILES = ("quick", "standard", "paper")

TierFn = Callable[["Context"], TierResult]


def collect_claims(package: str, submodules: Sequence[str], order: Sequence[str]) -> list["Claim"]:
    """The ``CLAIMS`` of a paper package's submodules, in catalogue ``order`` (others after).

    A submodule that does not exist yet is skipped; any other import error is raised.
    """
    import importlib

    found = {}
    for name in submodules:
        try:
            mod = importlib.import_module(f"{package}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"{package}.{name}":
                continue
            raise
        for c in mod.CLAIMS:
            found[c.id] = c
    return [found[i] for i in order if i in found] + [c for i, c in found.items() if i not in order]


@dataclass(frozen=True)
class Source:
    """Where a claim comes from: the paper's catalogue letter (``W``, ``N``, ``G``, ``E``), the place in
    it (``"Lemma 3"``) and, optionally, the statement as the paper writes it."""

    paper: str  # catalogue letter: W, N, G, E
    where: str  # "Lemma 3", "Theorem 2", "Knowl 3 (Lemma 5.x)"
    equation: str = ""  # the statement as the paper writes it

    def cite(self) -> str:
        """``"<paper> <where>"``, e.g. ``"W Lemma 3"``."""
        return f"{self.paper} {self.where}"


@dataclass(frozen=True)
class PrimaryReading:
    """The paper's own statement, in its own scope and setting: the one reading that decides.

    ``statement`` quotes or closely paraphrases the seed (``shared/seeds/<seed>_*.txt``,
    ``lines``); ``setting`` says the scope the paper states it in (model, prior, regime);
    ``review`` says why the tier checks decide this reading and not a literal, stricter or
    transferred one. Everything else a claim measures is a :class:`~sim.verdict.Finding`.
    """

    statement: str
    seed: str  # "002": the seed file's number
    lines: str  # "41" or "41-43": where the statement is in that file
    setting: str = ""
    review: str = ""

    def __post_init__(self):
        if not self.statement or not self.seed or not self.lines:
            raise ValueError("a PrimaryReading needs the statement, its seed and its lines")

    def cite(self) -> str:
        """Where the statement is: ``"seed 002, line 41"`` or ``"seed 002, lines 41-43"``."""
        return f"seed {self.seed}, line{'s' if any(c in self.lines for c in '-,') else ''} {self.lines}"


class GraphFitError(ValueError):
    """A user's graph that does not fit a claim; the message names the claim, the node and the reason."""


@dataclass(frozen=True)
class GraphInput:
    """How a claim takes a user's causal graph in place of its own (``icl-verify run --graph``).

    ``settings`` maps each settings key that names the claim's graphs (a tuple of family names,
    or one name) to the settings key of the length they are built at. For the run the names
    become the user's graph alone (a :class:`theory.graphs.GivenGraph`, which the functions that
    resolve the names return as it is) and, unless ``fixed_length``, the length becomes the
    graph's: an integer ``T``, or the ``T`` of each ``(S, T)`` pair (one pair per ``S``). With
    ``fixed_length`` the graph must have the length the profile sets.

    ``form`` says what fits:

    - ``"tree"``: N's one-parent graphs on positions ``0..T-1`` (``T`` = the nodes): at most one
      parent each, and the last position, the query, a root;
    - ``"k-parent"``: Knowl 9's DAGs on ``0..T`` (``T`` = the nodes - 1): every non-root has
      exactly ``k`` parents, and the last node, the target, has ``k``.

    ``replaces`` says, in the report, what the graph replaces and what keeps the claim's own
    graphs; ``size_note`` why the graph has at most ``max_nodes`` nodes (what grows with them)
    or, with ``fixed_length``, why the length is the profile's.
    """

    settings: Mapping[str, str]
    form: str = "tree"
    k: int = 1
    max_nodes: int = 1000
    fixed_length: bool = False
    replaces: str = ""
    size_note: str = ""

    def __post_init__(self):
        if self.form not in ("tree", "k-parent"):
            raise ValueError(f"GraphInput form must be 'tree' or 'k-parent', got {self.form!r}")
        if not self.settings:
            raise ValueError("GraphInput needs the settings key of at least one graph")
        if self.k < 1 or (self.form == "tree" and self.k != 1):
            raise ValueError(f"GraphInput: k = {self.k} parents does not go with form {self.form!r}")
        object.__setattr__(self, "settings", MappingProxyType(dict(self.settings)))

    def length(self, n_nodes: int) -> int:
        """The claim's ``T`` for a graph of ``n_nodes`` nodes."""
        return n_nodes if self.form == "tree" else n_nodes - 1

    def check(self, claim_id: str, g, settings: Mapping[str, Any]) -> None:
        """Raise :class:`GraphFitError` unless the validated graph ``g`` fits (``settings``: the
        claim's settings in the run's profile, for ``fixed_length``)."""
        n = g.number_of_nodes()
        last = n - 1
        what = ("one-parent graphs (nodes 0..T-1, at most one parent each, the last one, the query, a root)"
                if self.form == "tree" else
                f"{self.k}-parent DAGs (nodes 0..T, every non-root exactly {self.k} parents, the last one, the target, "
                "too)")

        def refuse(reason: str, because: str = f"it takes {what}"):
            raise GraphFitError(f"{claim_id} does not take this graph: {reason}; {because}")

        if n > self.max_nodes:
            refuse(f"{n} nodes is too many", f"{self.size_note}, hence at most {self.max_nodes}")
        if n < (2 if self.form == "tree" else self.k + 1):
            refuse(f"{n} node{'s' if n != 1 else ''} is too few")
        for v in range(n):
            parents = sorted(g.predecessors(v))
            if self.form == "tree" and len(parents) > 1:
                refuse(f"node {v} has {len(parents)} parents {parents}")
            if self.form == "k-parent" and parents and len(parents) != self.k:
                refuse(f"node {v} has {len(parents)} parent{'s' if len(parents) != 1 else ''} {parents}, "
                       f"not {self.k}")
        if self.form == "tree" and g.in_degree(last) > 0:
            refuse(f"node {last}, the last, is the query and must be a root; it has parent "
                   f"{next(iter(g.predecessors(last)))}")
        if self.form == "k-parent" and g.in_degree(last) == 0:
            refuse(f"node {last}, the last, is the target and needs {self.k} parents; it has none")
        if self.fixed_length:
            for key in dict.fromkeys(self.settings.values()):
                if key in settings and int(settings[key]) != self.length(n):
                    refuse(f"{n} nodes, but it runs at {key} = {settings[key]}", f"the length is fixed: "
                           f"{self.size_note}")

    def overrides(self, given, settings: Mapping[str, Any]) -> dict[str, Any]:
        """The settings that put ``given`` (a :class:`theory.graphs.GivenGraph`) in place of the
        claim's graphs, for a profile whose settings are ``settings``."""
        out: dict[str, Any] = {}
        T = self.length(len(given.parent_sets))
        for names_key, length_key in self.settings.items():
            if names_key not in settings:
                continue
            out[names_key] = given if isinstance(settings[names_key], str) else (given,)
            length = settings.get(length_key)
            if self.fixed_length or length is None:
                continue
            if isinstance(length, (int, np.integer)):
                out[length_key] = T
            else:  # (S, T) pairs: every S at the graph's T
                out[length_key] = tuple((S, T) for S in dict.fromkeys(int(S) for S, _ in length))
        return out


@dataclass(frozen=True)
class Claim:
    """One catalogue entry made executable.

    ``checks`` maps a tier name to a function ``Context -> TierResult``; ``settings`` maps
    a profile name to that profile's settings (``settings[p]["tiers"]`` lists the tiers run
    in profile ``p``; a claim with no tier for the profile is NOT_RUN there, and the report
    names ``decided_by``).
    """

    id: str
    title: str
    source: Source
    statement: str
    assumptions: tuple[str, ...]
    checks: Mapping[str, TierFn]
    settings: Mapping[str, Mapping[str, Any]]
    decided_by: str = "quick"
    params: Mapping[str, Any] = field(default_factory=dict)
    prior_dependent: bool = False
    figures: tuple[str, ...] = ()
    #: Said in the report when no tier runs in the active profile (e.g. why, and where it is decided).
    pending: str = ""
    #: The paper's own statement that decides the verdict (see :class:`~sim.claims.base.PrimaryReading`).
    primary: PrimaryReading | None = None
    #: How a user's causal graph replaces the claim's own (``run --graph``); None: it takes none.
    graph_input: GraphInput | None = None
    #: Claims whose trained models this one reuses from its process's memory (N.K4 evaluates N.K1's):
    #: a run evaluates it after them, in the same process (:mod:`sim.lanes`).
    reuses: tuple[str, ...] = ()
    #: Per tier, ``Context -> list of sim.claims.jobs.PlannedJob``: the jobs the tier trains at the
    #: context's settings, built by the code its check builds them with but not trained (the cost
    #: plan, ``icl-verify plan``). A trained tier without one is listed with no estimate.
    jobs: Mapping[str, Callable[["Context"], list]] = field(default_factory=dict)

    def __post_init__(self):
        if not isinstance(self.id, str) or not CLAIM_ID.fullmatch(self.id):
            raise ValueError(f"claim id {self.id!r} is not valid: use letters, digits, '.', '_' and '-', starting "
                             "with a letter, at most 64 characters (it names files in the run folder)")
        unknown = set(self.checks) - set(TIERS)
        if unknown:
            raise ValueError(f"claim {self.id}: unknown tiers {sorted(unknown)}")
        if set(self.jobs) - set(self.checks):
            raise ValueError(f"claim {self.id}: jobs for tiers {sorted(set(self.jobs) - set(self.checks))} that have "
                             "no check")
        if self.decided_by not in PROFILES:
            raise ValueError(f"claim {self.id}: decided_by must be one of {PROFILES}")
        for p, s in self.settings.items():
            if p not in PROFILES:
                raise ValueError(f"claim {self.id}: settings for unknown profile {p!r}")
            bad = set(s.get("tiers", ())) - set(self.checks)
            if bad:
                raise ValueError(f"claim {self.id}: profile {p} runs tiers {sorted(bad)} that have no check")
        object.__setattr__(self, "params", MappingProxyType(dict(self.params)))

    @property
    def tiers(self) -> tuple[str, ...]:
        return tuple(t for t in TIERS if t in self.checks)

    def tiers_for(self, profile: str) -> tuple[str, ...]:
        """The tiers run in ``profile``, in the order of ``TIERS`` (empty: the claim is NOT_RUN there)."""
        s = self.settings.get(profile, {})
        return tuple(t for t in TIERS if t in s.get("tiers", ()))

    def variant(self, **params) -> "Claim":
        """The same claim with some of the formula under test replaced (for wrong-variant tests)."""
        unknown = set(params) - set(self.params)
        if unknown:
            raise KeyError(f"claim {self.id} has no params {sorted(unknown)}; known: {sorted(self.params)}")
        return dataclasses.replace(self, params={**self.params, **params})


@dataclass
class Context:
    """What a check runs with: settings of the active profile, seeds, device, output folder.

    Randomness is split by purpose: ``ctx.rng("pi")`` and ``ctx.rng("sequences")`` are
    independent streams derived from (master seed, claim id, purpose), so changing how
    many sequences one part draws does not shift the matrices another part draws, and a
    claim's numbers do not depend on which other claims ran before it.
    """

    claim: Claim
    profile: str
    seed: int
    out_dir: Path
    device: str = "cpu"
    prior: Any = None  # a sim.priors.Prior overriding the claim's default inputs
    z: float = 3.0
    #: ``progress(message)`` reports what the check is doing (the CLI shows it; a no-op by default).
    progress: Callable[[str], None] = lambda msg: None
    overrides: Mapping[str, Any] = field(default_factory=dict)
    # The counterexample corpus (a sim.corpus.Corpus, or None): the property tier replays it first.
    corpus: Any = None
    # Trained models kept for the claim's later looks (a sequential decision adds seeds; the
    # seeds it already trained are the same models): key -> object, see :meth:`memo`.
    memo_store: dict = field(default_factory=dict, repr=False, compare=False)
    #: Where the claim's training jobs run (a :class:`sim.claims.jobs.Execution`; None: this machine).
    execution: Any = None
    #: One entry per training job of this evaluation, trained or reused from the run folder
    #: (:func:`sim.claims.jobs.run_jobs`; shared by the looks of a sequential decision).
    job_log: list = field(default_factory=list, repr=False, compare=False)
    #: Called with ``{"claim", "id", "seconds"}`` as each training job finishes, and with ``"reused": True``
    #: for one taken from the run folder (the run's ETA).
    on_job: Callable[[dict], None] | None = field(default=None, repr=False, compare=False)

    @property
    def settings(self) -> Mapping[str, Any]:
        base = dict(self.claim.settings.get(self.profile, {}))
        base.update(self.overrides)
        return base

    @property
    def params(self) -> Mapping[str, Any]:
        return self.claim.params

    def seed_for(self, purpose: str) -> int:
        """A 32-bit seed for ``purpose``, reported next to the numbers it produced."""
        return derive_seed(self.seed, self.claim.id, purpose)

    def rng(self, purpose: str) -> np.random.Generator:
        """A numpy generator seeded with :meth:`seed_for` ``(purpose)``: one independent stream per purpose."""
        return np.random.default_rng(self.seed_for(purpose))

    def memo(self, key: Any, make: Callable[[], Any]) -> Any:
        """``make()`` once per ``key`` for this claim's evaluation (shared by the looks of a
        sequential decision, which reuse the seeds they already trained). ``key`` must name
        every input of ``make``: seeds, task, recipe and device."""
        if key not in self.memo_store:
            self.memo_store[key] = make()
        return self.memo_store[key]

    def figure_path(self, name: str) -> Path:
        """``<out_dir>/figures/<claim id>-<name>.png``, its folder created."""
        path = self.out_dir / "figures" / f"{self.claim.id}-{name}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    def save_figure(self, fig, name: str, *, tight: bool = True, dpi: int = 110) -> str:
        """Write ``fig`` to ``figures/<claim>-<name>.png``, close it, and return the path
        relative to the run folder (what a tier's ``figures`` lists)."""
        import matplotlib.pyplot as plt

        if tight:
            fig.tight_layout()
        path = self.figure_path(name)
        fig.savefig(path, dpi=dpi)
        plt.close(fig)
        return str(path.relative_to(self.out_dir))


# ---------------------------------------------------------------------------------------
# Pattern 1: a conclusion checked on many drawn instances (exact and Monte Carlo tiers).
# ---------------------------------------------------------------------------------------
@dataclass
class InstanceCheck:
    """One drawn instance: which assumptions held, the conclusion's status on it, its margin
    (positive = held by that much) and the full record to print as a counterexample."""

    assumptions: Mapping[str, bool]
    outcome: Outcome
    margin: float
    record: Mapping[str, Any]


def summarize_instances(tier: str, checks: Sequence[InstanceCheck], assumption_names: Sequence[str], *,
                        what: str, numbers: Sequence[Number] = (), budget: str = "") -> TierResult:
    """Turn per-instance checks into a tier result.

    The conclusion is VIOLATED if it fails on any instance whose assumptions all hold
    (the worst such instance is the counterexample), UNDECIDED if some instance is within
    the error, HELD otherwise. Instances that break an assumption are judged separately:
    the result says whether the conclusion still held on them.
    """
    if not checks:
        raise ValueError(f"{tier}: no instances were checked")
    n = len(checks)
    assumptions = []
    for name in assumption_names:
        bad = sum(1 for c in checks if not c.assumptions.get(name, True))
        detail = f"held on all {n} instances" if bad == 0 else f"failed on {bad} of {n} instances"
        assumptions.append(Assumption(name=name, holds=bad == 0, detail=detail))
    good = [c for c in checks if all(c.assumptions.values())]
    broken = [c for c in checks if not all(c.assumptions.values())]

    def status(group):
        if any(c.outcome is Outcome.VIOLATED for c in group):
            return Outcome.VIOLATED
        if any(c.outcome is Outcome.UNDECIDED for c in group):
            return Outcome.UNDECIDED
        return Outcome.HELD

    conclusion = status(good) if good else status(broken)
    counterexample = None
    if good and conclusion is Outcome.VIOLATED:
        worst = min((c for c in good if c.outcome is Outcome.VIOLATED), key=lambda c: c.margin)
        counterexample = dict(worst.record)
    without = None
    if broken:
        st = status(broken)
        nviol = sum(1 for c in broken if c.outcome is Outcome.VIOLATED)
        if st is Outcome.VIOLATED:
            worst = min((c for c in broken if c.outcome is Outcome.VIOLATED), key=lambda c: c.margin)
            without = (f"violated on {nviol} of {len(broken)} instances that break an assumption "
                       "(the assumption looks necessary)")
            if counterexample is None:
                counterexample = dict(worst.record)
        elif st is Outcome.UNDECIDED:
            without = f"undecided on some of the {len(broken)} instances that break an assumption"
        else:
            without = (f"held on all {len(broken)} instances that break an assumption "
                       "(the assumption did not look necessary on these inputs)")
    verdict = tier_verdict(assumptions, conclusion)
    if good and conclusion is Outcome.VIOLATED:
        verdict = Verdict.FAIL  # a counterexample that meets every assumption decides, whatever else was drawn
    judged = good or broken
    n_viol = sum(c.outcome is Outcome.VIOLATED for c in judged)
    summary = (f"{what}: {conclusion.value} — {n_viol} of {len(judged)} instances violate "
               f"(smallest margin {min(c.margin for c in judged):.3g})")
    if broken and good:
        summary += f"; {len(broken)} further instances break an assumption"
    elif broken:
        summary += " — every instance breaks an assumption"
    return TierResult(tier=tier, verdict=verdict, conclusion=conclusion, summary=summary,
                      assumptions=assumptions, numbers=list(numbers), counterexample=counterexample,
                      conclusion_without_assumptions=without,
                      budget=budget if conclusion is Outcome.UNDECIDED else "")


# ---------------------------------------------------------------------------------------
# Pattern 2: the property tier — hypothesis searches for a counterexample and shrinks it.
# ---------------------------------------------------------------------------------------
def search_counterexample(strategy, violates: Callable[[Any], bool], *, max_examples: int, seed: int,
                          observe: Callable[[Any], None] | None = None):
    """Search ``strategy`` for an input on which ``violates`` is true; shrink it.

    Returns ``(example, n_tried)`` with ``example=None`` when none was found within
    ``max_examples`` (``(None, 0)`` when that is 0). Reproducible: hypothesis draws from
    ``random.Random(seed)`` and uses no example database, independent of any hypothesis profile
    the caller loaded. ``observe(x)``, when given, runs on every input inside hypothesis's test
    (where ``hypothesis.target`` may be called) and switches on hypothesis's target phase, which
    mutates the inputs with the best targets.
    """
    from hypothesis import HealthCheck, Phase, find, settings
    from hypothesis.errors import NoSuchExample, Unsatisfiable

    if max_examples <= 0:  # a budget of nothing: hypothesis refuses it, and there is nothing to search
        return None, 0
    tried = 0

    def condition(x):
        nonlocal tried
        tried += 1
        if observe is not None:
            observe(x)
        return bool(violates(x))

    cfg = settings(
        settings.get_profile("default"),
        max_examples=max_examples,
        database=None,
        deadline=None,
        derandomize=False,
        phases=[Phase.generate, Phase.shrink] if observe is None else [Phase.generate, Phase.target, Phase.shrink],
        suppress_health_check=list(HealthCheck),
        report_multiple_bugs=False,
    )
    try:
        with _hypothesis_home_nowhere():
            example = find(strategy, condition, settings=cfg, random=random.Random(seed))
    except (NoSuchExample, Unsatisfiable):
        return None, tried
    return example, tried


@contextlib.contextmanager
def _hypothesis_home_nowhere():
    """Hypothesis's home folder moved, for one search, to a temporary folder removed after it.

    Even with ``database=None`` hypothesis writes caches (the constants it collects from code that
    is not installed, ``.hypothesis/constants/``) into its home, by default ``.hypothesis/`` in the
    current directory; a run writes nothing outside its folder. The home in force before (a test
    suite's, ``HYPOTHESIS_STORAGE_DIRECTORY``) is put back afterwards. The constants stay in
    hypothesis's memory, so a search draws the same inputs as with the cache on disk."""
    from hypothesis import configuration

    before = configuration.storage_directory(intent_to_write=False).home_directory
    with tempfile.TemporaryDirectory(prefix="icl-verify-hypothesis-") as home:
        configuration.set_hypothesis_home_dir(home)
        try:
            yield
        finally:
            configuration.set_hypothesis_home_dir(before)


def crash_result(tier: str, exc: BaseException) -> TierResult:
    """A check that raised: recorded as ERROR with its traceback, never as a verdict."""
    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return TierResult(tier=tier, verdict=Verdict.ERROR, conclusion=Outcome.UNDECIDED,
                      summary=f"the check crashed: {type(exc).__name__}: {exc}", error=tb)


def per_case(fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``fn(case)`` remembered for the last case (by identity): a property search asks for one
    case's values several times (assumptions, violation, margin, record) before it draws the next."""
    last: dict[str, Any] = {"case": None, "value": None}

    def cached(case):
        if last["case"] is not case:
            last["case"], last["value"] = case, fn(case)
        return last["value"]

    return cached


class _Climb:
    """Steers a property search toward the boundary of a claim and keeps the closest inputs.

    On every input that meets the assumptions it evaluates ``margin`` (smaller = closer to a
    violation), calls ``hypothesis.target(-margin)`` (it must run inside hypothesis's test, which
    :func:`search_counterexample`'s ``observe`` does) and keeps the ``keep`` inputs with the
    smallest margins (equal margins once)."""

    LABEL = "closeness to a violation (-margin)"

    def __init__(self, margin: Callable[[Any], float], meets: Callable[[Any], bool], keep: int):
        self.margin, self.meets, self.keep = margin, meets, keep
        self.best: list[tuple[float, Any]] = []
        self.evaluated = 0

    def observe(self, x) -> None:
        from hypothesis import target

        if not self.meets(x):
            return
        m = float(self.margin(x))
        self.evaluated += 1
        if not np.isfinite(m):
            return
        target(-m, label=self.LABEL)
        if any(abs(m - b) <= 1e-15 * max(1.0, abs(m)) for b, _ in self.best):
            return
        self.best = sorted(self.best + [(m, x)], key=lambda t: t[0])[:self.keep]


def _witness_text(rec: Mapping[str, Any]) -> str:
    import json

    from sim.verdict import to_jsonable

    return json.dumps(to_jsonable(dict(rec)), default=str)


def _polish_and_report(ctx: "Context", climb: _Climb, polish, margin, meets, violates, record, seed: int,
                       found) -> tuple[Any, list[Number]]:
    """Polish the closest inputs of a climbing search and report the closest approach.

    Returns ``(violation, numbers)``: a polished input that meets every assumption and violates the
    conclusion (None if there is none, or if the search ``found`` one already), and the Numbers of the
    closest approach (smallest margin, with its witness), the budget, the starts and the optimiser."""
    from sim.tightness import NoFiniteValue, optimise

    numbers: list[Number] = []
    closest = climb.best[0] if climb.best else None
    violation = None
    note_search = (f"hypothesis with hypothesis.target(-margin) on {climb.evaluated} inputs meeting every assumption; "
                   f"the {len(climb.best)} closest kept")
    if polish is not None and found is None and ctx.prior is None and climb.best:
        budget = int(ctx.settings.get("polish_budget", polish.budget))
        try:
            t = optimise(lambda x: float(margin(x)) if meets(x) else np.inf, None, polish.project, sense="inf",
                         starts=0, budget=budget, seed=seed, initial=[polish.lift(x) for _, x in climb.best],
                         describe=lambda x: {})
        except NoFiniteValue as exc:  # the projection left the assumptions everywhere: said, not hidden
            t = None
            note_search += f"; the polish found no point meeting every assumption ({exc}): check polish.project"
        if t is not None:
            numbers += [Number("closest approach: polish starts (closest examples of the search)", t.starts,
                               kind="property", seed=seed, note=t.optimiser),
                        Number("closest approach: polish evaluations", t.evaluations, kind="property", seed=seed,
                               note=f"budget {budget} evaluations per start (setting polish_budget)")]
            if t.value < closest[0]:
                closest = (t.value, t.point)
                note_search += f", then polished by {t.optimiser.split(' from ')[0]}"
            if meets(t.point) and violates(t.point):
                violation = t.point
    elif polish is not None and ctx.prior is not None:
        note_search += "; not polished: moving a draw of a user's prior may leave the prior's support"
    if closest is None:
        numbers.insert(0, Number("closest approach: smallest margin found (a violation iff < 0)", float("nan"),
                                 kind="property", seed=seed, note="no input meeting every assumption was evaluated"))
        return violation, numbers
    numbers.insert(0, Number("closest approach: smallest margin found (a violation iff < 0)", closest[0],
                             kind="property", seed=seed,
                             note=f"{note_search}; an upper bound on the infimum of the margin; witness: "
                                  f"{_witness_text(record(closest[1]))}"))
    numbers.insert(1, Number("closest approach: smallest margin of the search before polishing",
                             climb.best[0][0] if climb.best else float("nan"), kind="property", seed=seed))
    return violation, numbers


def property_tier(ctx: "Context", strategy, violates: Callable[[Any], bool], record: Callable[[Any], dict], *,
                  what: str, assumptions: Sequence[Assumption] = (),
                  assumptions_of: Callable[[Any], Mapping[str, bool]] | None = None,
                  margin: Callable[[Any], float] | None = None, polish=None) -> TierResult:
    """Run the property tier: replay the corpus, then search ``strategy`` for a violation of the
    conclusion and report the shrunk counterexample.

    First the counterexamples earlier FAILs left in the corpus (``ctx.corpus``, :mod:`sim.corpus`)
    are replayed: one that meets every assumption and still violates the conclusion decides FAIL
    and the search for such a counterexample is skipped; one that no longer does is reported as
    fixed. A counterexample the search finds is stored there. ``max_examples = 0`` replays only:
    with no replayed counterexample that still fails, the tier is INCONCLUSIVE (nothing searched).

    Without a user's prior the strategy is the tool's own search space: inputs that break
    an assumption (per ``assumptions_of``, when given) are skipped, since the lemma says
    nothing about them. With a prior (``ctx.prior``) its draws may break assumptions, so
    the budget is split into two searches: one for a counterexample that meets every
    assumption (a FAIL), one for a counterexample on draws that break some assumption
    (evidence that the assumption is necessary; ``violates`` should test there what the
    conclusion still claims). The result lists which assumptions failed on the draws.

    ``margin(x)``, when given, makes the search climb: a real number, smaller = closer to a
    violation, negative iff ``violates(x)`` on an input meeting every assumption (up to the
    claim's round-off), e.g. ``bound - LHS/RHS``. The search calls ``hypothesis.target(-margin)``
    on every input meeting the assumptions and keeps the ``polish_keep`` (setting, default 3)
    closest; with ``polish`` (a :class:`sim.tightness.Polish`) and no user's prior, they are then
    polished by a local scipy optimiser over their continuous parameters, projected back into the
    assumptions. A polished input that meets every assumption and violates the conclusion is a
    counterexample like any other (FAIL). Whether or not one is found, the result reports the
    closest approach (smallest margin, with its witness), the polish budget, starts and optimiser.
    """
    seed = ctx.seed_for("property")
    n_max = int(ctx.settings.get("max_examples", 100))
    replayed, notes = _replay_corpus(ctx, violates, assumptions_of)
    skipped = "; not searched: a counterexample from the corpus decided" if replayed is not None else ""
    if replayed is None and n_max <= 0:
        return TierResult("property", tier_verdict(assumptions, Outcome.UNDECIDED), Outcome.UNDECIDED,
                          f"{what}: not searched (search budget of 0 examples), and no counterexample from the "
                          "corpus still fails", assumptions=list(assumptions), corpus=notes,
                          numbers=[Number("examples evaluated (search and shrinking)", 0, kind="property", seed=seed,
                                          note="budget 0 generated examples")],
                          budget="a search budget of at least one example (setting max_examples; "
                                 "icl-verify run --budget N)")
    def meets(x):
        return assumptions_of is None or all(assumptions_of(x).values())

    climb = None if margin is None else _Climb(margin, meets, keep=max(1, int(ctx.settings.get("polish_keep", 3))))
    observe = None if climb is None else climb.observe
    if assumptions_of is None or ctx.prior is None:
        if replayed is not None:
            example, tried = replayed.example, 0
        else:
            example, tried = search_counterexample(strategy, lambda x: meets(x) and violates(x),
                                                   max_examples=n_max, seed=seed, observe=observe)
        searched = Number("examples evaluated (search and shrinking)", tried, kind="property", seed=seed,
                          note=f"budget {n_max} generated examples{skipped}")
        numbers = [searched]
        polished = None
        if climb is not None and replayed is None:
            polished, approach = _polish_and_report(ctx, climb, polish, margin, meets, violates, record, seed, example)
            numbers += approach
        outcome = Outcome.HELD if example is None and polished is None else Outcome.VIOLATED
        if replayed is not None:
            summary = f"{what}: counterexample replayed from the corpus {replayed.path} before any search"
        elif example is not None:
            summary = f"{what}: hypothesis found a counterexample after {tried} evaluations (shrunk)"
        elif polished is not None:
            example = polished
            summary = (f"{what}: counterexample found by polishing the search's closest examples with a local "
                       f"optimiser (after {tried} search evaluations)")
        else:
            summary = f"{what}: no counterexample in {tried} evaluations"
        cex = None if example is None else _counterexample(ctx, what, example, record, replayed, seed, notes)
        return TierResult("property", tier_verdict(assumptions, outcome), outcome, summary, numbers=numbers,
                          counterexample=cex, assumptions=list(assumptions), corpus=notes)

    failed: dict[str, int] = {}
    drawn = 0

    def status(x):
        nonlocal drawn
        st = dict(assumptions_of(x))
        drawn += 1
        for name, ok in st.items():
            failed[name] = failed.get(name, 0) + (not ok)
        return st

    half = max(1, n_max // 2) if n_max > 0 else 0
    if replayed is not None:
        valid_cex, tried_a = replayed.example, 0
    else:
        valid_cex, tried_a = search_counterexample(strategy, lambda x: all(status(x).values()) and violates(x),
                                                   max_examples=half, seed=seed, observe=observe)
    broken_cex, tried_b = search_counterexample(strategy, lambda x: not all(status(x).values()) and violates(x),
                                                max_examples=half, seed=seed + 1)
    numbers = [Number("evaluations: search among draws meeting every assumption", tried_a, kind="property",
                      seed=seed, note=f"budget {half}{skipped}"),
               Number("evaluations: search among draws breaking an assumption", tried_b, kind="property",
                      seed=seed + 1, note=f"budget {half}")]
    if climb is not None and replayed is None:  # under a user's prior: the closest approach, never polished
        numbers += _polish_and_report(ctx, climb, polish, margin, meets, violates, record, seed, valid_cex)[1]
    found = list(assumptions) + [
        Assumption(name, holds=(bad == 0), detail=f"held on all {drawn} draws" if bad == 0 else
                   f"failed on {bad} of {drawn} draws") for name, bad in failed.items()]
    without = None
    if broken_cex is not None:
        broken = [k for k, ok in assumptions_of(broken_cex).items() if not ok]
        without = (f"violated: the smallest counterexample found breaks {', '.join(broken)} "
                   "(the assumption looks necessary)")
    elif any(failed.values()):
        without = (f"no counterexample within the budget of {half} examples on draws that break an assumption "
                   "(the assumption did not look necessary for this prior)")
    if valid_cex is not None:
        summary = (f"{what}: counterexample meeting every assumption replayed from the corpus {replayed.path} "
                   "before any search" if replayed is not None else
                   f"{what}: counterexample meeting every assumption found after {tried_a} evaluations")
        return TierResult("property", Verdict.FAIL, Outcome.VIOLATED, summary, numbers=numbers,
                          counterexample=_counterexample(ctx, what, valid_cex, record, replayed, seed, notes),
                          assumptions=found, conclusion_without_assumptions=without, corpus=notes)
    outcome = Outcome.HELD
    verdict = tier_verdict(found, outcome)
    summary = f"{what}: no counterexample among draws meeting every assumption ({tried_a} evaluations)"
    if broken_cex is not None:
        summary += "; a counterexample on a draw that breaks an assumption"
    return TierResult("property", verdict, Outcome.VIOLATED if broken_cex is not None and verdict is
                      Verdict.ASSUMPTION_UNMET else outcome, summary, numbers=numbers,
                      counterexample=None if broken_cex is None else record(broken_cex), assumptions=found,
                      conclusion_without_assumptions=without, corpus=notes)


def _replay_corpus(ctx: "Context", violates, assumptions_of):
    """The corpus's counterexamples for this claim's property tier, replayed (``Corpus.replay``):
    one is still a counterexample when it meets every assumption and ``violates`` holds on it."""
    if ctx.corpus is None:
        return None, []

    def judge(x):
        if assumptions_of is not None:
            broken = sorted(name for name, ok in assumptions_of(x).items() if not ok)
            if broken:
                return f"it no longer meets {', '.join(broken)}"
        return None if violates(x) else "the conclusion holds on it"

    return ctx.corpus.replay(ctx.claim, "property", judge)


def _counterexample(ctx: "Context", what: str, example, record, replayed, seed: int, notes: list) -> dict:
    """The record of a FAIL's counterexample: marked when it came from the corpus, else stored there."""
    rec = record(example)
    if replayed is not None:
        return {**rec, "replayed from the corpus": str(replayed.path)}
    if ctx.corpus is not None:
        notes.append(ctx.corpus.store(ctx.claim, "property", reading=what, record=rec, example=example,
                                      tier_seed=seed))
    return rec


# ---------------------------------------------------------------------------------------
# Pattern 3: the certified tier — branch-and-bound with rigorous enclosures on a stated domain.
# ---------------------------------------------------------------------------------------
#: How a certificate's status reads as the tier's conclusion.
_CERTIFIED_OUTCOME = {"PROVED": Outcome.HELD, "COUNTEREXAMPLE": Outcome.VIOLATED, "UNDECIDED": Outcome.UNDECIDED,
                      "REFUSED": Outcome.UNDECIDED}


def certified_tier(ctx: "Context", inequalities: Sequence[Any], *, what: str, tight: Sequence[str] = (),
                   numbers: Sequence[Number] = ()) -> TierResult:
    """Run the certified tier: decide each :class:`theory.certified.Inequality` on its whole domain.

    First the corpus's certified counterexamples for this claim are replayed (:meth:`sim.corpus.Corpus.replay`):
    a stored point (an inequality's name and a box centre) that lies in that inequality's domain in this
    run and still violates it, by a rigorous enclosure at the point, decides FAIL before any search. Then
    :func:`theory.certified.certify` runs on each inequality, with the box budget ``certified_max_boxes``
    (setting, default 20000), the precision ``certified_precision`` (bits, default 53) and, for the names in
    ``tight``, the bracket on the extreme closed to ``certified_rel_gap`` (default 1e-3).

    The tier PASSes when every certificate is PROVED; it FAILs on a certified counterexample box (the first
    is the counterexample, and its centre goes to the corpus); otherwise it is INCONCLUSIVE, and its budget
    names the largest box left open (or why a domain was refused). Each certificate's record, its domain
    whole, is in the result's ``certificates``. Under a user's prior the tier is NOT_RUN: its domain is
    its own, and a prior does not change it."""
    from fractions import Fraction

    from theory.certified import Box, certify, round_down, round_up

    if ctx.prior is not None:
        return TierResult("certified", Verdict.NOT_RUN, Outcome.UNDECIDED,
                          f"{what}: not run under a user's prior: the certified tier proves the claim on its own stated "
                          "domain, which a prior does not change (run the claim without a prior to see it)",
                          numbers=list(numbers))
    s = ctx.settings
    max_boxes = int(s.get("certified_max_boxes", 20000))
    precision = int(s.get("certified_precision", 53))
    rel_gap = float(s.get("certified_rel_gap", 1e-3))
    by_name = {q.name: q for q in inequalities}
    if len(by_name) != len(inequalities):
        raise ValueError(f"{ctx.claim.id}: two certified inequalities share a name")

    def judge(example):
        name, point = example["inequality"], tuple(float(x) for x in example["point"])
        if name not in by_name:
            raise LookupError(f"this run checks no inequality named {name!r}")
        q = by_name[name]
        if not q.domain.contains(point) or any(r.covers(Box(point, point)) for r in q.domain.excluded):
            raise LookupError(f"the point lies outside this run's domain of {name!r}")
        lo, hi = q.enclose(Box(point, point))
        if q.sense == "<=":
            limit = round_up(Fraction(q.limit))
            broken = lo >= limit if q.strict else lo > limit
        else:
            limit = round_down(Fraction(q.limit))
            broken = hi <= limit if q.strict else hi < limit
        return None if broken else "the enclosure at the point no longer lies beyond the claimed limit"

    replayed, notes = (None, []) if ctx.corpus is None else ctx.corpus.replay(ctx.claim, "certified", judge)
    if replayed is not None:
        name = replayed.example["inequality"]
        return TierResult("certified", Verdict.FAIL, Outcome.VIOLATED,
                          f"{what}: a certified counterexample of {name!r} replayed from the corpus {replayed.path} "
                          "before any search", counterexample={"inequality": name, "point": replayed.example["point"],
                                                               "replayed from the corpus": str(replayed.path)},
                          corpus=notes, numbers=list(numbers))
    certs = []
    for q in inequalities:
        ctx.progress(f"{ctx.claim.id} [certified] {q.name}")
        certs.append(certify(q, max_boxes=max_boxes, precision=precision, tight=q.name in tight, rel_gap=rel_gap))
    res = TierResult("certified", Verdict.PASS, Outcome.HELD, "", numbers=list(numbers), corpus=notes,
                     certificates=[c.record() for c in certs])
    proved = [c for c in certs if c.status == "PROVED"]
    res.numbers[:0] = [Number("certificates PROVED", len(proved), n=len(certs), kind="certified",
                              note="; ".join(f"{c.name}: {c.status}" for c in certs))]
    res.numbers += [Number(f"{c.name}: boxes evaluated", c.boxes, kind="certified",
                           note=f"{c.certified} certified, {c.excluded} excluded, {c.open} open, precision "
                                f"{c.precision} bits, budget {c.max_boxes}") for c in certs]
    boxes, seconds = sum(c.boxes for c in certs), sum(c.seconds for c in certs)
    found = next((c for c in certs if c.status == "COUNTEREXAMPLE"), None)
    if found is not None:
        res.verdict, res.conclusion = Verdict.FAIL, Outcome.VIOLATED
        centre = tuple(found.counterexample["centre"].values())
        res.counterexample = {"inequality": found.name, "statement": found.statement, "domain": found.domain.text(),
                              **found.counterexample}
        res.summary = (f"{what}: a certified counterexample box for {found.name!r} (the claim fails at every point of "
                       f"it; centre {', '.join(f'{k} = {v:.6g}' for k, v in found.counterexample['centre'].items())})")
        if ctx.corpus is not None:
            res.corpus.append(ctx.corpus.store(ctx.claim, "certified", reading=f"{found.name}: {found.statement}",
                                               record=res.counterexample,
                                               example={"inequality": found.name, "point": list(centre)}))
        return res
    if len(proved) == len(certs):
        res.summary = (f"{what}: PROVED on every stated domain ({len(certs)} certificate{'s' if len(certs) != 1 else ''}, "
                       f"{boxes} box{'es' if boxes != 1 else ''}, {seconds:.1f} s)")
        return res
    res.verdict, res.conclusion = Verdict.INCONCLUSIVE, Outcome.UNDECIDED
    open_ = [c for c in certs if c.status != "PROVED"]
    res.summary = (f"{what}: {len(proved)} of {len(certs)} certificates PROVED; not decided: "
                   + "; ".join(f"{c.name} ({c.status}: {c.reason})" for c in open_))
    parts = []
    for c in open_:
        if c.status == "REFUSED":
            parts.append(f"{c.name}: a claim that handles the singular set (divides out the vanishing factor) or a "
                         "domain that excludes a neighbourhood of it")
        else:
            parts.append(f"{c.name}: a box budget above {c.max_boxes} (setting certified_max_boxes), or a smaller domain; "
                         f"largest box left open: {c.largest_open}")
    res.budget = "; ".join(parts)
    return res


def matrices_strategy(ctx: "Context", d_strategy, *, min_entry_fraction=None):
    """Transition matrices for the property tier: the user's prior when one is given,
    otherwise ``theory.strategies.stochastic_matrices`` (optionally with entries at least
    ``gamma / d`` for ``gamma`` drawn from ``min_entry_fraction``, a strategy over (0, 1])."""
    from hypothesis import strategies as st

    from theory.strategies import stochastic_matrices

    if ctx.prior is not None:
        if ctx.prior.d is not None:
            return ctx.prior.strategy()
        return d_strategy.flatmap(lambda d: ctx.prior.bind(d).strategy())
    if min_entry_fraction is None:
        return d_strategy.flatmap(stochastic_matrices)
    return st.tuples(d_strategy, min_entry_fraction).flatmap(
        lambda dg: stochastic_matrices(dg[0], min_entry=dg[1] / dg[0]))
