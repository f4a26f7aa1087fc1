"""sim.claims.base.property_tier: the property tier's search, its two searches under a user's prior,
the corpus replayed before any search, and the climb toward the boundary.

Each test pins the whole result of one path (verdict, conclusion, summary, numbers with their seeds
and budgets, assumptions, counterexample), so that a mutant of the tier's logic or of what it
reports fails here, not only in a claim's end-to-end test.
"""
import numpy as np
import pytest
from hypothesis import strategies as st

from sim.claims.base import Claim, Context, Source, property_tier
from sim.corpus import REPLAYED, STORED, Corpus
from sim.verdict import Assumption, Number, Outcome, Verdict

SEARCHED = "examples evaluated (search and shrinking)"
AMONG_MET = "evaluations: search among draws meeting every assumption"
AMONG_BROKEN = "evaluations: search among draws breaking an assumption"
CLOSEST = "closest approach: smallest margin found (a violation iff < 0)"
BEFORE_POLISH = "closest approach: smallest margin of the search before polishing"


def _claim(cid="T.P"):
    return Claim(id=cid, title="t", source=Source("T", "test"), statement="s", assumptions=(),
                 checks={"property": lambda ctx: None}, settings={"quick": {"tiers": ("property",)}})


def _ctx(tmp_path, max_examples=40, prior=None, corpus=None, **overrides):
    return Context(claim=_claim(), profile="quick", seed=0, out_dir=tmp_path, prior=prior,
                   overrides={"max_examples": max_examples, **overrides}, corpus=corpus)


def _corpus(tmp_path, prior=None):
    from sim.runner import RunConfig

    return Corpus(tmp_path / "corpus", RunConfig(prior=prior))


def _prior_ctx(tmp_path, max_examples=40):
    """A context under a real user's prior, with a corpus that records entries under it."""
    from sim.priors import parse_prior

    prior = parse_prior("dirichlet(alpha=0.3)")
    return _ctx(tmp_path, max_examples=max_examples, prior=prior, corpus=_corpus(tmp_path, prior.spec()))


def _integers():
    return st.integers(0, 1000)


def _record(x):
    return {"x": x}


class _Counted:
    """A predicate that counts its calls."""

    def __init__(self, fn):
        self.fn, self.calls = fn, 0

    def __call__(self, x):
        self.calls += 1
        return self.fn(x)


# -- without a user's prior: one search -------------------------------------------------------------
def test_a_counterexample_is_shrunk_and_reported_as_fail_with_its_budget_and_seed(tmp_path):
    ctx = _ctx(tmp_path)
    given = [Assumption("x is an integer", holds=True)]
    res = property_tier(ctx, _integers(), lambda x: x >= 37, _record, what="x < 37", assumptions=given)
    assert (res.tier, res.verdict, res.conclusion) == ("property", Verdict.FAIL, Outcome.VIOLATED)
    assert res.counterexample == {"x": 37}  # shrunk to the smallest violation
    [searched] = res.numbers
    assert searched == Number(SEARCHED, searched.value, kind="property", seed=ctx.seed_for("property"),
                              note="budget 40 generated examples")
    assert searched.value > 0
    assert res.summary == f"x < 37: hypothesis found a counterexample after {searched.value} evaluations (shrunk)"
    assert res.assumptions == given and res.corpus == [] and res.conclusion_without_assumptions is None


def test_without_a_violation_it_passes_and_skips_inputs_breaking_an_assumption(tmp_path):
    violates = _Counted(lambda x: x % 2 == 1)
    res = property_tier(_ctx(tmp_path), _integers(), violates, _record, what="x even",
                        assumptions_of=lambda x: {"x even": x % 2 == 0})
    assert (res.verdict, res.conclusion, res.counterexample) == (Verdict.PASS, Outcome.HELD, None)
    [searched] = res.numbers
    assert res.summary == f"x even: no counterexample in {searched.value} evaluations"
    assert 0 < violates.calls <= searched.value  # odd inputs break the assumption: never judged
    assert res.assumptions == []


def test_a_given_assumption_that_fails_makes_a_clean_search_assumption_unmet(tmp_path):
    res = property_tier(_ctx(tmp_path), _integers(), lambda x: False, _record, what="w",
                        assumptions=[Assumption("a", holds=False)])
    assert (res.verdict, res.conclusion) == (Verdict.ASSUMPTION_UNMET, Outcome.HELD)


def test_a_budget_of_zero_searches_nothing_and_is_inconclusive(tmp_path):
    ctx = _ctx(tmp_path, max_examples=0)
    given = [Assumption("a", holds=True)]
    violates = _Counted(lambda x: True)
    res = property_tier(ctx, _integers(), violates, _record, what="w", assumptions=given)
    assert (res.tier, res.verdict, res.conclusion, res.counterexample) == (
        "property", Verdict.INCONCLUSIVE, Outcome.UNDECIDED, None)
    assert violates.calls == 0
    assert res.summary == ("w: not searched (search budget of 0 examples), and no counterexample from the corpus "
                           "still fails")
    assert res.numbers == [Number(SEARCHED, 0, kind="property", seed=ctx.seed_for("property"),
                                  note="budget 0 generated examples")]
    assert res.budget == "a search budget of at least one example (setting max_examples; icl-verify run --budget N)"
    assert res.assumptions == given and res.corpus == []


def test_a_negative_budget_is_a_budget_of_zero(tmp_path):
    res = property_tier(_ctx(tmp_path, max_examples=-3), _integers(), lambda x: True, _record, what="w")
    assert res.verdict is Verdict.INCONCLUSIVE and res.numbers[0].value == 0


def test_the_budget_of_one_example_is_searched(tmp_path):
    res = property_tier(_ctx(tmp_path, max_examples=1), _integers(), lambda x: True, _record, what="w")
    assert res.verdict is Verdict.FAIL and res.numbers[0].note == "budget 1 generated examples"


def test_the_default_budget_is_100_examples(tmp_path):
    ctx = Context(claim=_claim(), profile="quick", seed=0, out_dir=tmp_path)
    res = property_tier(ctx, _integers(), lambda x: False, _record, what="w")
    assert res.numbers[0].note == "budget 100 generated examples" and res.numbers[0].value >= 100


def test_a_prior_without_assumptions_of_runs_one_search(tmp_path):
    res = property_tier(_ctx(tmp_path, prior=object()), _integers(), lambda x: x >= 10, _record, what="x < 10")
    assert (res.verdict, res.counterexample) == (Verdict.FAIL, {"x": 10})
    assert [n.name for n in res.numbers] == [SEARCHED]


# -- under a user's prior: a search on draws meeting every assumption, one on draws breaking one ----
def test_under_a_prior_fail_wins_when_a_counterexample_meets_every_assumption(tmp_path):
    ctx = _ctx(tmp_path, prior=object())
    res = property_tier(ctx, _integers(), lambda x: x >= 10, _record, what="x < 10",
                        assumptions_of=lambda x: {"x < 500": x < 500})
    assert (res.tier, res.verdict, res.conclusion, res.counterexample) == (
        "property", Verdict.FAIL, Outcome.VIOLATED, {"x": 10})
    [a] = res.assumptions  # what the draws showed, on a FAIL too
    assert (a.name, a.holds) == ("x < 500", False) and a.detail.startswith("failed on ")
    met, broken = res.numbers
    seed = ctx.seed_for("property")
    assert met == Number(AMONG_MET, met.value, kind="property", seed=seed, note="budget 20")
    assert broken == Number(AMONG_BROKEN, broken.value, kind="property", seed=seed + 1, note="budget 20")
    assert res.summary == f"x < 10: counterexample meeting every assumption found after {met.value} evaluations"
    assert res.conclusion_without_assumptions.startswith("violated: the smallest counterexample found breaks x < 500")


def test_under_a_prior_a_violation_only_off_the_assumptions_is_assumption_unmet(tmp_path):
    res = property_tier(_ctx(tmp_path, prior=object()), _integers(), lambda x: x >= 500, _record,
                        what="x < 500", assumptions_of=lambda x: {"x < 200": x < 200})
    assert (res.verdict, res.conclusion) == (Verdict.ASSUMPTION_UNMET, Outcome.VIOLATED)
    assert res.counterexample == {"x": 500}
    [a] = res.assumptions
    assert a.name == "x < 200" and a.holds is False and a.detail.startswith("failed on ")
    assert res.conclusion_without_assumptions == ("violated: the smallest counterexample found breaks x < 200 "
                                                  "(the assumption looks necessary)")
    met = res.numbers[0].value
    assert res.summary == (f"x < 500: no counterexample among draws meeting every assumption ({met} evaluations); "
                           "a counterexample on a draw that breaks an assumption")


def test_under_a_prior_every_draw_is_counted_in_the_assumptions_details(tmp_path):
    """No violation anywhere; one assumption always holds, one fails on the odd draws."""
    draws = []

    def assumptions_of(x):
        draws.append(x)
        return {"x <= 1000": True, "x even": x % 2 == 0}

    given = [Assumption("stated", holds=True)]
    res = property_tier(_ctx(tmp_path, prior=object()), _integers(), lambda x: False, _record, what="w",
                        assumptions=given, assumptions_of=assumptions_of)
    met, broken = (n.value for n in res.numbers)
    n, odd = len(draws), sum(x % 2 for x in draws)
    assert n == met + broken and 0 < odd < n
    assert [(a.name, a.holds, a.detail) for a in res.assumptions] == [
        ("stated", True, ""), ("x <= 1000", True, f"held on all {n} draws"),
        ("x even", False, f"failed on {odd} of {n} draws")]
    assert (res.verdict, res.conclusion, res.counterexample) == (Verdict.ASSUMPTION_UNMET, Outcome.HELD, None)
    assert res.conclusion_without_assumptions == (
        "no counterexample within the budget of 20 examples on draws that break an assumption "
        "(the assumption did not look necessary for this prior)")
    assert res.summary == f"w: no counterexample among draws meeting every assumption ({met} evaluations)"


def test_under_a_prior_where_every_assumption_holds_it_passes_with_nothing_said_without_them(tmp_path):
    res = property_tier(_ctx(tmp_path, prior=object()), _integers(), lambda x: False, _record, what="w",
                        assumptions_of=lambda x: {"always": True})
    assert (res.tier, res.verdict, res.conclusion, res.counterexample) == ("property", Verdict.PASS, Outcome.HELD, None)
    assert res.conclusion_without_assumptions is None
    assert res.numbers[1].value > 0  # the second search draws, and finds no draw breaking an assumption
    [a] = res.assumptions
    assert a.holds is True and a.detail.startswith("held on all ")


@pytest.mark.parametrize("max_examples, half", [(1, 1), (3, 1), (41, 20)])
def test_under_a_prior_the_budget_is_split_in_halves_of_at_least_one(tmp_path, max_examples, half):
    res = property_tier(_ctx(tmp_path, max_examples=max_examples, prior=object()), _integers(), lambda x: False,
                        _record, what="w", assumptions_of=lambda x: {"x even": x % 2 == 0})
    assert [n.note for n in res.numbers] == [f"budget {half}", f"budget {half}"]
    assert res.numbers[0].value <= half + 20  # a budget of generated examples (shrinking adds none here)


# -- the corpus: replayed before any search ---------------------------------------------------------
def test_a_stored_counterexample_is_replayed_before_any_search_and_decides(tmp_path):
    first = property_tier(_ctx(tmp_path, corpus=_corpus(tmp_path)), _integers(), lambda x: x >= 37, _record,
                          what="x < 37")
    [note] = first.corpus
    assert first.verdict is Verdict.FAIL and note["status"] == STORED
    [path] = (tmp_path / "corpus" / "T.P").glob("property-*.json")
    assert note["file"] == str(path)

    violates = _Counted(lambda x: x >= 37)
    ctx = _ctx(tmp_path, corpus=_corpus(tmp_path))
    again = property_tier(ctx, _integers(), violates, _record, what="x < 37")
    assert violates.calls == 1  # the replay's own judgement: no search
    assert (again.verdict, again.conclusion) == (Verdict.FAIL, Outcome.VIOLATED)
    assert again.counterexample == {"x": 37, "replayed from the corpus": str(path)}
    assert again.summary == f"x < 37: counterexample replayed from the corpus {path} before any search"
    assert again.numbers == [Number(SEARCHED, 0, kind="property", seed=ctx.seed_for("property"),
                                    note="budget 40 generated examples; not searched: a counterexample from the "
                                         "corpus decided")]
    assert [n["status"] for n in again.corpus] == [REPLAYED]


def test_a_replayed_counterexample_decides_even_with_a_budget_of_zero(tmp_path):
    property_tier(_ctx(tmp_path, corpus=_corpus(tmp_path)), _integers(), lambda x: x >= 37, _record, what="x < 37")
    res = property_tier(_ctx(tmp_path, max_examples=0, corpus=_corpus(tmp_path)), _integers(), lambda x: x >= 37,
                        _record, what="x < 37")
    assert res.verdict is Verdict.FAIL and res.counterexample["x"] == 37
    assert res.numbers[0].note == "budget 0 generated examples; not searched: a counterexample from the corpus decided"


def test_a_fixed_counterexample_lets_the_search_run_and_pass(tmp_path):
    property_tier(_ctx(tmp_path, corpus=_corpus(tmp_path)), _integers(), lambda x: x >= 37, _record, what="x < 37")
    res = property_tier(_ctx(tmp_path, corpus=_corpus(tmp_path)), _integers(), lambda x: x > 1000, _record,
                        what="x <= 1000")
    assert (res.verdict, res.counterexample) == (Verdict.PASS, None)
    assert res.numbers[0].value > 0 and res.numbers[0].note == "budget 40 generated examples"
    assert res.corpus[0]["status"] == "fixed"


def test_under_a_prior_a_stored_counterexample_is_replayed_and_only_the_other_search_runs(tmp_path):
    def run(violates):
        ctx = _prior_ctx(tmp_path)
        return ctx, property_tier(ctx, _integers(), violates, _record, what="x < 37",
                                  assumptions_of=lambda x: {"x < 500": x < 500}, margin=lambda x: 37 - x)

    _, first = run(lambda x: x >= 37)
    assert first.verdict is Verdict.FAIL and first.corpus[0]["status"] == STORED
    [path] = (tmp_path / "corpus" / "T.P").glob("property-*.json")
    ctx, res = run(lambda x: x >= 37)
    seed = ctx.seed_for("property")
    assert (res.tier, res.verdict, res.conclusion) == ("property", Verdict.FAIL, Outcome.VIOLATED)
    assert res.summary == (f"x < 37: counterexample meeting every assumption replayed from the corpus {path} "
                           "before any search")
    assert res.counterexample == {"x": 37, "replayed from the corpus": str(path)}
    met, broken = res.numbers  # replayed: no closest approach is reported
    assert met == Number(AMONG_MET, 0, kind="property", seed=seed,
                         note="budget 20; not searched: a counterexample from the corpus decided")
    assert broken.name == AMONG_BROKEN and broken.seed == seed + 1 and broken.value > 0
    assert [n["status"] for n in res.corpus] == [REPLAYED]


def test_under_a_prior_a_replay_with_a_budget_of_zero_searches_neither_half(tmp_path):
    def run(max_examples):
        return property_tier(_prior_ctx(tmp_path, max_examples), _integers(), lambda x: x >= 37, _record, what="x < 37",
                             assumptions_of=lambda x: {"x < 500": x < 500})

    assert run(40).verdict is Verdict.FAIL
    res = run(0)
    assert res.verdict is Verdict.FAIL and "replayed from the corpus" in res.summary
    assert [(n.value, n.note) for n in res.numbers] == [
        (0, "budget 0; not searched: a counterexample from the corpus decided"), (0, "budget 0")]


# -- the climb: a margin steers the search and the closest approach is reported ---------------------
def test_a_margin_reports_the_closest_approach_with_its_witness(tmp_path):
    ctx = _ctx(tmp_path)
    res = property_tier(ctx, _integers(), lambda x: x > 1000, _record, what="x <= 1000", margin=lambda x: 1000.5 - x)
    assert res.verdict is Verdict.PASS
    searched, closest, before = res.numbers
    seed = ctx.seed_for("property")
    assert searched.name == SEARCHED and searched.seed == seed
    assert (closest.name, closest.kind, closest.seed) == (CLOSEST, "property", seed)
    assert before == Number(BEFORE_POLISH, closest.value, kind="property", seed=seed)
    assert 0 < closest.value <= 500.5  # the targeted search climbs toward x = 1000
    assert closest.note.startswith("hypothesis with hypothesis.target(-margin) on ")
    assert "the 3 closest kept" in closest.note
    assert closest.note.endswith(f'witness: {{"x": {round(1000.5 - closest.value)}}}')


@pytest.mark.parametrize("keep, kept", [(1, 1), (0, 1), (-2, 1), (2, 2)])
def test_the_climb_keeps_polish_keep_inputs_and_at_least_one(tmp_path, keep, kept):
    res = property_tier(_ctx(tmp_path, polish_keep=keep), _integers(), lambda x: False, _record, what="w",
                        margin=lambda x: 1000.5 - x)
    assert f"the {kept} closest kept" in res.numbers[1].note


def test_the_margin_is_only_taken_on_inputs_meeting_every_assumption(tmp_path):
    seen = []

    def margin(x):
        seen.append(x)
        return 1000.5 - x

    property_tier(_ctx(tmp_path), _integers(), lambda x: False, _record, what="w",
                  assumptions_of=lambda x: {"x even": x % 2 == 0}, margin=margin)
    assert seen and all(x % 2 == 0 for x in seen)


def test_a_search_that_found_a_counterexample_still_reports_its_closest_approach(tmp_path):
    res = property_tier(_ctx(tmp_path), _integers(), lambda x: x >= 37, _record, what="x < 37",
                        margin=lambda x: 36.5 - x)
    assert res.verdict is Verdict.FAIL and res.counterexample == {"x": 37}
    assert [n.name for n in res.numbers] == [SEARCHED, CLOSEST, BEFORE_POLISH]
    assert res.numbers[1].value < 0


def test_a_replayed_counterexample_is_not_climbed(tmp_path):
    property_tier(_ctx(tmp_path, corpus=_corpus(tmp_path)), _integers(), lambda x: x >= 37, _record, what="x < 37")
    margin = _Counted(lambda x: 36.5 - x)
    res = property_tier(_ctx(tmp_path, corpus=_corpus(tmp_path)), _integers(), lambda x: x >= 37, _record,
                        what="x < 37", margin=margin)
    assert res.verdict is Verdict.FAIL and margin.calls == 0
    assert [n.name for n in res.numbers] == [SEARCHED]


def _window_polish():
    """Integers only reach the search; the polish moves them continuously (a float in [0, 1000])."""
    from sim.tightness import Polish

    return Polish(lift=lambda x: (None, np.array([float(x)])), project=lambda case, z: float(np.clip(z[0], 0, 1000)),
                  budget=200)


def test_a_violation_between_the_searchs_inputs_is_found_by_polishing(tmp_path):
    """The conclusion fails only on (50.51, 50.59), which no integer reaches: the polish finds it."""
    def margin(x):
        return abs(x - 50.55) - 0.04

    def violates(x):
        return margin(x) < 0

    ctx = _ctx(tmp_path, max_examples=60)
    res = property_tier(ctx, st.integers(0, 100), violates, _record, what="x outside (50.51, 50.59)",
                        margin=margin, polish=_window_polish())
    assert (res.verdict, res.conclusion) == (Verdict.FAIL, Outcome.VIOLATED)
    searched = res.numbers[0].value
    assert res.summary == ("x outside (50.51, 50.59): counterexample found by polishing the search's closest "
                           f"examples with a local optimiser (after {searched} search evaluations)")
    assert 50.51 < res.counterexample["x"] < 50.59
    assert res.numbers[1].name == CLOSEST and res.numbers[1].value < 0
    assert res.numbers[2].name == BEFORE_POLISH and res.numbers[2].value >= 0.41  # an integer: 0.55 - 0.04 or more


def test_a_polish_under_a_prior_is_not_run(tmp_path):
    def margin(x):
        return abs(x - 50.55) - 0.04

    res = property_tier(_ctx(tmp_path, prior=object()), st.integers(0, 100), lambda x: margin(x) < 0, _record,
                        what="w", assumptions_of=lambda x: {"always": True}, margin=margin, polish=_window_polish())
    assert res.verdict is Verdict.PASS
    closest = next(n for n in res.numbers if n.name == CLOSEST)
    assert closest.value >= 0.41 and "not polished: moving a draw of a user's prior" in closest.note


# -- seeds: the search is reproducible and its seeds are the ones reported -------------------------
class _Draws:
    """``violates`` that records every input it judges and never fires."""

    def __init__(self):
        self.seen = []

    def __call__(self, x):
        self.seen.append(x)
        return False


def test_the_search_draws_are_fixed_by_the_master_seed(tmp_path):
    def draws(seed):
        d = _Draws()
        ctx = Context(claim=_claim(), profile="quick", seed=seed, out_dir=tmp_path, overrides={"max_examples": 30})
        property_tier(ctx, st.integers(0, 10**9), d, _record, what="w")
        return d.seen

    assert draws(0) == draws(0) and draws(0) != draws(1)


def test_under_a_prior_each_search_draws_from_its_reported_seed(tmp_path):
    """The search on draws meeting every assumption uses seed s, the other s + 1, as the numbers say:
    each replays exactly with search_counterexample at that seed."""
    from sim.claims.base import search_counterexample

    def run():
        seen = []  # every draw of both searches: each one's assumptions are judged

        def status(x):
            seen.append(x)
            return {"x even": x % 2 == 0}

        ctx = _ctx(tmp_path, max_examples=30, prior=object())
        res = property_tier(ctx, st.integers(0, 10**9), lambda x: False, _record, what="w", assumptions_of=status)
        return ctx, res, seen

    ctx, res, seen = run()
    met, broken = res.numbers
    first, second = seen[:met.value], seen[met.value:]
    assert len(second) == broken.value
    for n, draws in ((met, first), (broken, second)):
        alone = []
        search_counterexample(st.integers(0, 10**9), lambda x: alone.append(x) or False, max_examples=15, seed=n.seed)
        assert alone == draws
    assert run()[2] == seen


def test_a_stored_counterexample_records_the_reading_and_the_tiers_seed(tmp_path):
    import json

    for prior in (None, object()):
        folder = tmp_path / ("own" if prior is None else "prior")
        ctx = _ctx(folder, prior=prior, corpus=_corpus(folder))
        property_tier(ctx, _integers(), lambda x: x >= 37, _record, what="x < 37",
                      assumptions_of=None if prior is None else (lambda x: {"x < 500": x < 500}))
        [path] = (folder / "corpus" / "T.P").glob("property-*.json")
        doc = json.loads(path.read_text())
        assert doc["reading"] == "x < 37" and doc["found"]["tier_seed"] == ctx.seed_for("property")


# -- the corpus's notes reach the result on every path ---------------------------------------------
def test_a_stored_input_that_now_breaks_an_assumption_is_marked_fixed_not_replayed(tmp_path):
    property_tier(_ctx(tmp_path, corpus=_corpus(tmp_path)), _integers(), lambda x: x >= 37, _record, what="x < 37")
    for budget in (0, 40):  # the notes are in the result with and without a search
        res = property_tier(_ctx(tmp_path, max_examples=budget, corpus=_corpus(tmp_path)), _integers(),
                            lambda x: x >= 37, _record, what="x < 37", assumptions_of=lambda x: {"x < 30": x < 30})
        assert res.verdict in (Verdict.INCONCLUSIVE if budget == 0 else Verdict.PASS,)
        [note] = res.corpus
        assert note["status"] == "fixed" and "it no longer meets x < 30" in note["detail"]


def test_under_a_prior_the_corpus_notes_reach_a_result_without_a_fail(tmp_path):
    property_tier(_ctx(tmp_path, corpus=_corpus(tmp_path)), _integers(), lambda x: x >= 37, _record, what="x < 37")
    res = property_tier(_prior_ctx(tmp_path, 20), _integers(), lambda x: False, _record, what="w", assumptions_of=lambda x: {"a": True})
    assert res.verdict is Verdict.PASS
    [note] = res.corpus  # the entry drawn without a prior is not replayed under one, and says so
    assert "drawn under another prior were not replayed" in note["detail"]


def test_under_a_prior_a_counterexample_breaking_two_assumptions_names_both(tmp_path):
    res = property_tier(_ctx(tmp_path, prior=object()), _integers(), lambda x: x >= 500, _record, what="w",
                        assumptions_of=lambda x: {"x < 200": x < 200, "x < 300": x < 300})
    assert res.conclusion_without_assumptions == ("violated: the smallest counterexample found breaks x < 200, "
                                                  "x < 300 (the assumption looks necessary)")


# -- the climb and the polish on each path ---------------------------------------------------------
def test_a_counterexample_found_by_the_search_is_not_polished(tmp_path):
    res = property_tier(_ctx(tmp_path), _integers(), lambda x: x >= 37, _record, what="x < 37",
                        margin=lambda x: 36.5 - x, polish=_window_polish())
    assert res.verdict is Verdict.FAIL and res.counterexample == {"x": 37}
    assert [n.name for n in res.numbers] == [SEARCHED, CLOSEST, BEFORE_POLISH]


def test_under_a_prior_the_closest_approach_follows_the_two_searches_with_their_seed(tmp_path):
    ctx = _ctx(tmp_path, prior=object())
    res = property_tier(ctx, _integers(), lambda x: False, _record, what="w",
                        assumptions_of=lambda x: {"x even": x % 2 == 0}, margin=lambda x: 1000.5 - x)
    assert [n.name for n in res.numbers] == [AMONG_MET, AMONG_BROKEN, CLOSEST, BEFORE_POLISH]
    assert {n.seed for n in res.numbers[2:]} == {ctx.seed_for("property")}
