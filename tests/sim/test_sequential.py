"""Decisions across training seeds: Student-t margins, Welch-Satterthwaite degrees of freedom,
the seed schedule with its Bonferroni-over-looks correction, and the runner's sequential tier."""
import math

import numpy as np
import pytest
from scipy import stats

from sim.claims.base import Claim, Source
from sim.runner import RunConfig, evaluate_claim
from sim.sequential import SeedSchedule, SequentialRun, decide_sequentially, doubling_grid
from sim.verdict import Number, Outcome, TierResult, Verdict, compare, margin_multiplier, welch_df


def test_margin_multiplier_is_the_student_t_quantile_at_the_level_of_z():
    assert margin_multiplier(3.0) == 3.0
    assert margin_multiplier(3.0, 7) == pytest.approx(stats.t.ppf(stats.norm.cdf(3.0), 7), rel=1e-12)
    assert margin_multiplier(3.0, 1) > 200 and math.isinf(margin_multiplier(3.0, 0))
    # more degrees of freedom, a narrower margin, down to z itself
    qs = [margin_multiplier(3.0, df) for df in (1, 3, 7, 15, 1000)]
    assert qs == sorted(qs, reverse=True) and qs[-1] == pytest.approx(3.0, abs=0.01)
    with pytest.raises(ValueError, match=r"df must be >= 0, got -1"):
        margin_multiplier(3.0, -1)


def test_compare_with_few_seeds_widens_the_margin():
    """0.96 ± 0.02 against 0.9 is 3 s.e. above: HELD with a known error, undecided on 3 seeds."""
    assert compare(0.97, 0.9, stderr=0.02, z=3.0) is Outcome.HELD
    assert compare(0.97, 0.9, stderr=0.02, z=3.0, df=2) is Outcome.UNDECIDED
    assert compare(0.97, 0.9, stderr=0.002, z=3.0, df=2) is Outcome.HELD
    assert compare(0.5, 0.9, stderr=0.0, z=3.0, df=0) is Outcome.UNDECIDED  # one sample: spread unknown


def test_welch_df_matches_the_satterthwaite_formula():
    parts = [(0.04, 3), (0.01, 9), (0.02, None)]
    want = (0.07 ** 2) / (0.04 ** 2 / 3 + 0.01 ** 2 / 9)
    assert welch_df(parts) == pytest.approx(want, rel=1e-12)
    assert welch_df([(0.02, None)]) is None  # every part known well: the normal quantile
    assert welch_df([(0.0, 4), (0.0, None)]) == 4.0
    assert welch_df([(0.0, 0), (1.0, None)]) == 0.0
    # a dominant well-known part makes the degrees of freedom large, never smaller than the seeds'
    assert welch_df([(1e-6, 3), (1.0, None)]) > 1e5


def test_welch_t_interval_covers_at_its_level():
    """Coverage check by simulation: seeds' spread (n = 4) plus a well-known error; the one-sided
    Welch-t bound at level Phi(-2) is exceeded at about that rate (not the normal's higher rate)."""
    rng = np.random.default_rng(1)
    n, sd_seed, se_known, z, reps = 4, 1.0, 0.3, 2.0, 20000
    x = rng.normal(0, sd_seed, (reps, n)) + rng.normal(0, se_known, (reps, 1))
    m, s = x.mean(1), x.std(1, ddof=1) / math.sqrt(n)
    miss_t = miss_z = 0
    for mi, si in zip(m, s):
        df = welch_df([(si ** 2, n - 1), (se_known ** 2, None)])
        se = math.hypot(si, se_known)
        miss_t += mi > margin_multiplier(z, df) * se
        miss_z += mi > z * se
    level = stats.norm.sf(z)
    assert miss_t / reps < level * 1.25 and miss_z / reps > level * 1.5


def test_seed_schedule_sizes_and_bonferroni_z():
    sch = SeedSchedule(4, 4, 12)
    assert sch.sizes() == [4, 8, 12] and sch.looks == 3
    assert sch.z_look(3.0) == pytest.approx(stats.norm.isf(stats.norm.sf(3.0) / 3), rel=1e-12)
    assert SeedSchedule(5, 4, 12).sizes() == [5, 9, 12]
    assert SeedSchedule(8, 8, 8).z_look(3.0) == 3.0
    assert SeedSchedule.from_settings({"seeds": 6}).sizes() == [6]
    assert SeedSchedule.from_settings({"trained_seeds": 9, "trained_seeds_start": 3, "trained_seeds_step": 3},
                                      "trained_seeds").sizes() == [3, 6, 9]
    for bad in ((0, 1, 4), (5, 1, 4), (2, 0, 4)):
        with pytest.raises(ValueError):
            SeedSchedule(*bad)
    with pytest.raises(ValueError, match="seeds_start"):
        SeedSchedule.from_settings({"seeds": 6, "seeds_start": "many"})


def test_decide_sequentially_stops_at_the_first_decided_look():
    seen = []

    def decide(n, z):
        seen.append((n, z))
        return (Outcome.HELD if n >= 8 else Outcome.UNDECIDED), f"payload {n}", f"look {n}"

    payload, run = decide_sequentially(SeedSchedule(4, 4, 16), 3.0, decide)
    assert payload == "payload 8" and [n for n, _ in seen] == [4, 8] and run.seeds_used == 8
    assert all(z == pytest.approx(stats.norm.isf(stats.norm.sf(3.0) / 4)) for _, z in seen)
    assert "decided (held)" in run.stop_reason() and "Bonferroni" in run.line()
    payload, run = decide_sequentially(SeedSchedule(4, 4, 8), 3.0, lambda n, z: (Outcome.UNDECIDED, n, ""))
    assert payload == 8 and "cap of 8 seeds" in run.stop_reason() and run.outcome is Outcome.UNDECIDED
    rec = run.record()
    assert rec["planned looks"] == [4, 8] and [lk["seeds"] for lk in rec["looks"]] == [4, 8]


def _toy_claim(trained_counter: dict, effect: float) -> Claim:
    """A trained tier on synthetic per-seed values ``effect + N(0, 1)``: PASS when the mean is above 0
    beyond its Student-t margin. Each seed's value is 'trained' once (ctx.memo), whatever the look."""

    def check(ctx):
        seeds = ctx.settings["seeds"]
        n = len(seeds) if isinstance(seeds, tuple) else int(seeds)

        def train(k):
            trained_counter[k] = trained_counter.get(k, 0) + 1
            return effect + float(ctx.rng(f"seed/{k}").normal())

        vals = np.array([ctx.memo(("toy", k), lambda k=k: train(k)) for k in range(n)])
        num = Number("mean over seeds", float(vals.mean()), float(vals.std(ddof=1) / math.sqrt(n)), n=n,
                     kind="trained", df=n - 1)
        out = compare(num.value, 0.0, stderr=num.stderr, z=ctx.z, df=num.df)
        verdict = {Outcome.HELD: Verdict.PASS, Outcome.VIOLATED: Verdict.FAIL}.get(out, Verdict.INCONCLUSIVE)
        return TierResult("trained", verdict, out, f"{num.value:.3f} ± {num.stderr:.2g}", numbers=[num])

    settings = {"quick": {"tiers": ("trained",), "seeds": 32, "seeds_start": 4, "seeds_step": 4}}
    return Claim(id="TOY.SEQ", title="toy", source=Source("toy", "", ""), statement="mean > 0",
                 assumptions=(), checks={"trained": check}, settings=settings)


@pytest.mark.parametrize("effect, verdict", [(2.0, Verdict.PASS), (-2.0, Verdict.FAIL), (0.0, Verdict.INCONCLUSIVE)])
def test_runner_decides_a_trained_tier_sequentially_reusing_seeds(tmp_path, effect, verdict):
    counter = {}
    res = evaluate_claim(_toy_claim(counter, effect), RunConfig(profile="quick", seed=3), tmp_path)
    t = res.tiers[0]
    assert t.verdict is verdict, t.summary
    seq = t.sequential
    assert seq["correction"].startswith("Bonferroni") and seq["planned looks"] == list(range(4, 33, 4))
    used = seq["seeds used"]
    assert used == t.numbers[0].n and set(counter) == set(range(used)) and set(counter.values()) == {1}
    assert any(n.name == "training seeds the decision used" and n.value == used for n in t.numbers)
    if verdict is Verdict.INCONCLUSIVE:
        assert used == 32 and "cap of 32" in t.summary and "setting 'seeds'" in t.budget
    else:
        assert used < 32 and "decided" in seq["stop"]


@pytest.mark.parametrize("seeds", [6, tuple(range(6))])
def test_a_tier_without_a_schedule_runs_once_and_reports_its_seeds_as_one_look(tmp_path, seeds):
    """A fixed number of seeds (a count, or the seeds themselves as G.1 and E.1 name them) is one planned
    look: the report says how many seeds decided, as it does for a sequential decision."""
    counter = {}
    claim = _toy_claim(counter, 5.0)
    claim.settings["quick"] = {"tiers": ("trained",), "seeds": seeds}
    t = evaluate_claim(claim, RunConfig(profile="quick", seed=3), tmp_path).tiers[0]
    assert len(counter) == 6 and set(counter.values()) == {1}
    assert t.sequential["seeds used"] == 6 and t.sequential["planned looks"] == [6]
    assert t.sequential["stop"] == "stopped at look 1 of 1 with 6 seeds: decided (held)"
    assert t.sequential["z per look"] == 3.0
    assert any(n.name == "training seeds the decision used" and n.value == 6 for n in t.numbers)


def test_a_tier_that_names_no_seeds_gets_no_seed_record(tmp_path):
    claim = _toy_claim({}, 2.0)
    claim.checks["exact"] = claim.checks.pop("trained")
    claim.settings["quick"] = {"tiers": ("exact",), "seeds": 6}
    t = evaluate_claim(claim, RunConfig(profile="quick", seed=3), tmp_path).tiers[0]
    assert t.sequential is None


def test_the_report_says_how_many_seeds_and_why_it_stopped(tmp_path):
    from sim.report import write_reports
    from sim.verdict import to_jsonable

    cfg = RunConfig(profile="quick", seed=3)
    res = evaluate_claim(_toy_claim({}, 2.0), cfg, tmp_path)
    write_reports(tmp_path, cfg, [to_jsonable(res)], elapsed_s=1.0)
    md = (tmp_path / "report.md").read_text()
    html = (tmp_path / "report.html").read_text()
    line = next(ln for ln in md.splitlines() if ln.startswith("Seeds: "))
    assert "training seeds" in line and "decided (held)" in line and "Bonferroni over the planned looks" in line
    assert "Bonferroni over the planned looks" in html


def test_keys_that_follow_the_seeds_stay_off_when_zero(tmp_path):
    seen = []

    def check(ctx):
        seen.append((ctx.settings["seeds"], ctx.settings["col_seeds"], ctx.settings["other"]))
        return TierResult("trained", Verdict.INCONCLUSIVE, Outcome.UNDECIDED, "undecided")

    claim = Claim(id="TOY.ALSO", title="toy", source=Source("toy", "", ""), statement="-", assumptions=(),
                  checks={"trained": check},
                  settings={"quick": {"tiers": ("trained",), "seeds": 8, "seeds_start": 4, "seeds_step": 4,
                                      "seeds_also": ("col_seeds", "other"), "col_seeds": 0, "other": 3}})
    evaluate_claim(claim, RunConfig(profile="quick", seed=0), tmp_path)
    assert seen == [(4, 0, 4), (8, 0, 8)]


def test_a_key_that_follows_the_seeds_stops_at_its_own_cap(tmp_path):
    seen = []

    def check(ctx):
        seen.append((ctx.settings["seeds"], ctx.settings["col_seeds"]))
        return TierResult("trained", Verdict.INCONCLUSIVE, Outcome.UNDECIDED, "undecided")

    claim = Claim(id="TOY.CAP", title="toy", source=Source("toy", "", ""), statement="-", assumptions=(),
                  checks={"trained": check},
                  settings={"quick": {"tiers": ("trained",), "seeds": 12, "seeds_start": 4, "seeds_step": 4,
                                      "seeds_also": ("col_seeds",), "col_seeds": 1, "col_seeds_cap": 6}})
    evaluate_claim(claim, RunConfig(profile="quick", seed=0), tmp_path)
    assert seen == [(4, 4), (8, 6), (12, 6)]


def test_bonferroni_z_splits_the_one_sided_level_over_the_looks():
    """Each of m looks decides at Phi^{-1}(1 - Phi(-z)/m): z itself for one look, 3.2052 for two at z = 3 (the
    first count where the correction matters)."""
    from sim.sequential import bonferroni_z

    assert bonferroni_z(3.0, 1) == 3.0
    for m in (2, 3, 10):
        assert bonferroni_z(3.0, m) == pytest.approx(stats.norm.isf(stats.norm.sf(3.0) / m), rel=1e-15)
    assert bonferroni_z(3.0, 2) == pytest.approx(3.2052, abs=1e-4)


def test_seed_schedule_accepts_one_seed_and_a_step_of_one_and_says_what_it_refuses():
    """The bounds are inclusive: start = 1 and step = 1 are valid; the errors name the bound and the values."""
    assert SeedSchedule(1, 1, 3).sizes() == [1, 2, 3]
    with pytest.raises(ValueError, match=r"^seed schedule needs 1 <= start <= cap, got start=5, cap=4$"):
        SeedSchedule(5, 1, 4)
    with pytest.raises(ValueError, match=r"^seed schedule needs step >= 1, got 0$"):
        SeedSchedule(2, 0, 4)


def test_doubling_grid_doubles_the_largest_l_and_names_the_cap_it_refuses():
    """Doubling goes on while 2 L <= cap (8, 16 for cap 20; not a tripling), then the cap itself; the error
    names 'the cap' by default and the largest L of an unsorted grid, also when the cap passes a smaller L."""
    assert doubling_grid((4, 1), 20) == [1, 4, 8, 16, 20]
    assert doubling_grid((1, 4, 16), 16) == [1, 4, 16]  # a cap at the largest L adds nothing
    assert doubling_grid((3,), 12) == [3, 6, 12]  # a doubling onto the cap lists it once
    with pytest.raises(ValueError, match=r"^the cap = 40 is below the largest L of the grid \(48\)$"):
        doubling_grid((48, 1, 4), 40)


def test_a_sequential_run_reports_its_line_record_and_seed_number_exactly():
    """Held at the second of three looks (4, 8, 12 seeds) at z = 3: each look at the Bonferroni z
    Phi^{-1}(1 - Phi(-3)/3) = 3.32; the line, the record (with each look's own line) and the reported number
    say so in full."""
    lines = {4: "4 seeds: 0.1 ± 0.2", 8: "8 seeds: 0.9 ± 0.1"}
    payload, run = decide_sequentially(SeedSchedule(4, 4, 12), 3.0, lambda n, z: (
        Outcome.HELD if n >= 8 else Outcome.UNDECIDED, n, lines[n]))
    stop = "stopped at look 2 of 3 with 8 seeds: decided (held)"
    want = (f"{stop}. looks at 4, 8, 12 seeds; Bonferroni over the planned looks (3 looks): each at z = 3.32 for an "
            "overall one-sided level of Phi(-3). Looks: 4 seeds: undecided; 8 seeds: held")
    assert payload == 8 and run.line() == want
    rec = run.record()
    assert rec.pop("z per look") == pytest.approx(3.3201, abs=1e-4)
    assert rec == {"seeds used": 8, "stop": stop, "correction": "Bonferroni over the planned looks",
                   "planned looks": [4, 8, 12],
                   "looks": [{"seeds": 4, "outcome": "undecided", "line": lines[4]},
                             {"seeds": 8, "outcome": "held", "line": lines[8]}]}
    num = run.number()
    assert (num.name, num.value, num.kind, num.n, num.note) == ("training seeds the decision used", 8, "trained", 8,
                                                                want)


def test_a_schedule_describes_one_look_and_two_looks():
    """One look decides at z itself; two looks each at Phi^{-1}(1 - Phi(-3)/2) = 3.21."""
    assert SeedSchedule(6, 1, 6).describe(3.0) == "6 seeds, one look at z = 3"
    assert SeedSchedule(4, 4, 8).describe(3.0) == ("looks at 4, 8 seeds; Bonferroni over the planned looks (2 looks): "
                                                   "each at z = 3.21 for an overall one-sided level of Phi(-3)")


def test_a_run_without_looks_or_with_one_look_says_why_it_stopped():
    run = SequentialRun(SeedSchedule(4, 4, 8), 3.0)
    assert run.stop_reason() == "no look was made" and run.seeds_used == 0 and run.outcome is Outcome.UNDECIDED
    _, run = decide_sequentially(SeedSchedule(6, 1, 6), 3.0, lambda n, z: (Outcome.VIOLATED, n, ""))
    assert run.stop_reason() == "stopped at look 1 of 1 with 6 seeds: decided (violated)"  # the last look is the only


def test_decide_sequentially_refuses_a_z_with_no_finite_per_look_z():
    """At z = 40, Phi(-40) underflows to 0 and two looks have no finite z: an error before any look is made."""
    seen = []
    with pytest.raises(ValueError, match=r"^z=40.0 gives no finite per-look z over 2 looks$"):
        decide_sequentially(SeedSchedule(4, 4, 8), 40.0, lambda n, z: seen.append(n))
    assert seen == []
