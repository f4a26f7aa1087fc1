"""sim.plan and `icl-verify plan`: each claim's jobs listed without training (the same jobs its check
trains), the unit costs measured once per machine and device (cached under $XDG_CACHE_HOME), the
estimate priced from them, and the ETA corrected as jobs finish."""
from __future__ import annotations

import dataclasses
import json
import textwrap
from pathlib import Path

import pytest

from sim import claims as registry
from sim.claims.jobs import Cost, PlannedJob
from sim.cli import EXIT_OK, EXIT_USAGE, main
from sim.plan import COUNTS, LINEAR_CAPS, Calibration, Eta, cache_dir, format_seconds, make_plan, plan_claims, schedule_wall

#: Claims whose trained tier declares its jobs with the selftest timer (milliseconds of numpy), one of
#: them decided sequentially, one trained tier that declares none, and one claim that reuses another's.
PLUGIN = '''
from sim.claims.base import Claim, Source
from sim.claims.jobs import Cost, planned_jobs, run_jobs
from sim.seeds import derive_seed
from sim.sweep import selftest_run
from sim.verdict import Outcome, TierResult, Verdict


def cost(job):
    return Cost.of("selftest", "sim.plan:selftest_timer", steps=[({"work": job["work"]}, job["steps"])],
                   evals=[({"work": 5}, 2)])


def job_args(ctx):
    s = ctx.settings
    # seeds of the run's, not of the claim's (as N.K1 and N.K4 share theirs), so P.REUSE can reuse P.FIXED's
    jobs = [{"seed": derive_seed(ctx.seed, "shared", s["work"], i), "n": 2, "work": s["work"], "steps": s["steps"]}
            for i in range(s["seeds"])]
    return {"fn": selftest_run, "jobs": jobs, "key": lambda j: ("selftest", j["seed"], j["n"]),
            "label": f"{ctx.claim.id} model", "cost": cost}


def check(ctx):
    runs = run_jobs(ctx, **job_args(ctx))
    return TierResult("trained", Verdict.PASS, Outcome.HELD, f"{len(runs)} models")


def jobs(ctx):
    return planned_jobs(**job_args(ctx))


def claim(cid, settings, with_jobs=True, reuses=()):
    return Claim(id=cid, title="a user claim", source=Source("U", "Fig. 1"), statement="s", assumptions=(),
                 checks={"trained": check}, jobs={"trained": jobs} if with_jobs else {}, reuses=reuses,
                 settings={p: {"tiers": ("trained",), **settings} for p in ("quick", "standard", "paper")})


CLAIMS = [claim("P.FIXED", {"seeds": 3, "work": 200, "steps": 40}),
          claim("P.SEQ", {"seeds": 6, "seeds_start": 2, "seeds_step": 2, "work": 100, "steps": 10}),
          claim("P.NONE", {"seeds": 1, "work": 1, "steps": 1}, with_jobs=False),
          claim("P.REUSE", {"seeds": 3, "work": 200, "steps": 40}, reuses=("P.FIXED",))]
'''


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "icl-causal-verify"


@pytest.fixture
def plugin(tmp_path):
    path = tmp_path / "plan_plugin.py"
    path.write_text(textwrap.dedent(PLUGIN))
    saved = (dict(registry._EXTRA), dict(registry._ORIGIN), dict(registry._DIGESTS))
    registry.load_plugin(path)
    yield path
    for store, old in zip((registry._EXTRA, registry._ORIGIN, registry._DIGESTS), saved):
        store.clear()
        store.update(old)


def test_the_cache_follows_xdg_cache_home(cache):
    assert cache_dir() == cache
    assert Calibration("cpu").path.parent == cache


def test_a_unit_is_timed_at_two_counts_and_read_back_from_the_cache(cache):
    cost = Cost.of("selftest", "sim.plan:selftest_timer", steps=[({"work": 300}, 1000)])
    cal = Calibration("cpu")
    cal.measure([cost, cost])
    assert cal.measured == 1 and cal.path.exists()
    (entry,) = cal.entries.values()
    assert entry["per_unit"] > 0 and entry["counts"] == list(COUNTS["step"])
    assert cal.seconds(cost) == pytest.approx(entry["fixed"] + 1000 * entry["per_unit"])
    again = Calibration("cpu")
    again.measure([cost])
    assert again.measured == 0 and again.entries == cal.entries
    doc = json.loads(cal.path.read_text())
    doc["stamp"]["torch"] = "0.0"  # another torch: the measurements are taken again
    cal.path.write_text(json.dumps(doc))
    assert Calibration("cpu").missing([cost])


def test_more_work_per_unit_costs_more(tmp_path):
    cal = Calibration("cpu", path=tmp_path / "cal.json")
    light = Cost.of("selftest", "sim.plan:selftest_timer", steps=[({"work": 20}, 100)])
    heavy = Cost.of("selftest", "sim.plan:selftest_timer", steps=[({"work": 2000}, 100)])
    cal.measure([light, heavy])
    assert cal.seconds(heavy) > 5 * cal.seconds(light) > 0


def test_many_models_and_long_blocks_are_timed_small_and_priced_along_their_line(monkeypatch, tmp_path):
    """A block of 96 models and 500 steps, in both of which the family declares its cost affine, is timed
    only at models {8, 16} and steps {10, 20}; on a clock that is affine in both (here exactly), the price
    along the bilinear function is the true cost. A field the family does not declare is timed as it is."""
    timed = []

    def clock(self, fn, unit, shape, count):  # seconds: 0.5 + count x (models x (0.01 + 0.002 x steps))
        timed.append((shape["models"], shape["eval_every"]))
        return 0.5 + count * shape["models"] * (0.01 + 0.002 * shape["eval_every"])

    monkeypatch.setattr(Calibration, "_clock", clock)

    def block(models, every, linear=("models", "eval_every")):
        return Cost.of("selftest", "sim.plan:selftest_timer", blocks=[({"models": models, "eval_every": every,
                                                                        "work": 1}, 7)],
                       block_steps=every, models=models, linear=linear)

    cal = Calibration("cpu", path=tmp_path / "cal.json")
    cal.measure([block(96, 500)])
    assert LINEAR_CAPS["models"] == 16 and LINEAR_CAPS["eval_every"] == 20
    assert set(timed) == {(8, 10), (8, 20), (16, 10), (16, 20)}
    (entry,) = cal.entries.values()
    assert entry["scaled"] == {"models": [8, 16], "eval_every": [10, 20]}
    assert cal.seconds(block(96, 500)) == pytest.approx(0.5 + 7 * 96 * (0.01 + 0.002 * 500))
    for small, seen in ((block(16, 5), {(16, 5)}), (block(40, 5, linear=("eval_every",)), {(40, 5)})):
        timed.clear()
        cal.measure([small])  # at or below the caps, or not declared affine: timed as declared
        assert set(timed) == seen and "scaled" not in cal.entries[Calibration.key("selftest", "block", small.parts[0][1])]


def test_the_wall_time_is_a_longest_first_schedule():
    assert schedule_wall([], 4) == 0
    assert schedule_wall([3, 3, 2, 2, 2], 2) == 7  # longest first: 3 + 2 + 2 and 3 + 2
    assert schedule_wall([10, 1, 1], 8) == 10  # never below the longest job
    assert schedule_wall([1.0] * 8, 2) == 4
    assert format_seconds(None) == "—" and format_seconds(30) == "30 s" and format_seconds(1200) == "20 min"
    assert format_seconds(3 * 3600) == "3.0 h"


def test_each_claim_lists_its_jobs_at_the_first_look_and_at_the_cap(plugin):
    rows = {r.claim: r for r in plan_claims(registry.select("P.*"), "quick")}
    assert [len(rows["P.FIXED"].first), len(rows["P.FIXED"].cap), rows["P.FIXED"].looks] == [3, 3, []]
    seq = rows["P.SEQ"]
    assert [len(seq.first), len(seq.cap), seq.looks] == [2, 6, [2, 6]]
    assert [j.id for j in seq.first] == [j.id for j in seq.cap[:2]]  # a later look adds seeds
    assert not rows["P.NONE"].estimated and "no estimate" in rows["P.NONE"].note
    assert rows["P.REUSE"].reused == {j.id for j in rows["P.FIXED"].cap}  # counted once


def test_a_plan_prices_the_jobs_and_says_what_it_cannot(plugin, cache):
    plan = make_plan(registry.select("P.*"), "quick", workers=2)
    job = plan.job_seconds(plan.rows[0].first[0])
    assert job > 0
    assert plan.claim_seconds(plan.rows[0]) == pytest.approx(3 * job)
    assert plan.claim_seconds(plan.rows[3]) == 0  # every job reused from P.FIXED
    assert plan.total_seconds("cap") > plan.total_seconds("first")
    assert plan.wall_seconds("first", workers=1) == pytest.approx(plan.total_seconds("first"))
    text = plan.render()
    for expected in ("P.FIXED", "P.SEQ", "2 -> 6 (seeds 2 -> 6)", "3 reused", "no estimate for: P.NONE",
                     "1 model x 40 steps", "wall time on 2 local workers"):
        assert expected in text, expected
    doc = plan.to_dict()
    assert doc["claims"][1]["jobs_first_look"] == 2 and doc["claims"][1]["jobs_at_cap"] == 6


def test_the_eta_is_the_plan_left_corrected_by_the_jobs_that_finished(plugin, cache):
    plan = make_plan(registry.select("P.FIXED,P.SEQ"), "quick", workers=1)
    now = [0.0]
    eta = Eta(plan, clock=lambda: now[0])
    total = plan.total_seconds("first")
    assert eta.seconds_left() == pytest.approx(total) and eta.factor == 1.0
    first = plan.rows[0].first[0]
    est = plan.job_seconds(first)
    eta.job_done({"claim": "P.FIXED", "id": first.id, "seconds": 3 * est})  # the machine is three times slower
    assert eta.factor == pytest.approx(3.0)
    assert eta.seconds_left() == pytest.approx(3 * (total - est))
    second = plan.rows[0].first[1]
    eta.job_done({"claim": "P.FIXED", "id": second.id, "seconds": 0.0, "reused": True})  # from the run folder
    assert eta.factor == pytest.approx(3.0)
    assert eta.seconds_left() == pytest.approx(3 * (total - 2 * est))
    eta.claim_done("P.SEQ")
    assert eta.seconds_left() == pytest.approx(3 * est)
    assert eta.text().startswith("ETA ~")
    now[0] += est  # the job in flight has run a third of its corrected estimate: the time left counts down
    assert eta.seconds_left() == pytest.approx(2 * est)
    now[0] += 5 * est  # and past it
    assert eta.seconds_left() == 0 and eta.text() == "ETA: past the estimate"


def test_plan_prints_a_table_and_totals(plugin, cache, capsys):
    assert main(["plan", "--plugin", str(plugin), "--claims", "P.*", "--jobs", "2"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "P.FIXED" in out and "total CPU time" in out and "wall time on 2 local workers" in out
    assert main(["plan", "--plugin", str(plugin), "--claims", "P.FIXED", "--workers", "8", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["workers"] == 8 and doc["cluster"] and doc["claims"][0]["jobs_at_cap"] == 3


@pytest.mark.parametrize("argv, message", [
    (["plan", "--jobs", "2", "--workers", "2"], "not allowed with argument"),
    (["plan", "--jobs", "0"], "positive integer"),
])
def test_plan_refuses_options_that_do_not_parse(argv, message, capsys):
    with pytest.raises(SystemExit) as caught:
        main(argv)
    assert caught.value.code == EXIT_USAGE and message in capsys.readouterr().err


def test_plan_refuses_an_unknown_claim_or_device_with_one_line(capsys, monkeypatch):
    assert main(["plan", "--claims", "NOPE.*"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "NOPE" in err
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    assert main(["plan", "--claims", "W.L1", "--device", "cuda"]) == EXIT_USAGE
    assert "cuda" in capsys.readouterr().err


def test_a_long_or_paper_run_prints_its_estimate_before_it_trains(plugin, cache, tmp_path, capsys):
    """--profile paper always says its estimate first; the quick profile only once the unit costs are
    cached (quick is minutes by design) and only when it is long."""
    argv = ["--plugin", str(plugin), "--claims", "P.FIXED", "--no-progress", "--workers", "1"]
    assert main(["run", *argv, "--profile", "paper", "--out", str(tmp_path / "paper")]) == EXIT_OK
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("icl-verify paper-seed0") and err[1].startswith("icl-verify: estimate: training")
    assert main(["run", *argv, "--out", str(tmp_path / "quick")]) == EXIT_OK
    assert "estimate" not in capsys.readouterr().err  # cached, but seconds: not said


# ------------------------------------------------------------ the claims of the paper homes --
class _Captured(Exception):
    pass


@pytest.mark.parametrize("claim_id, profile", [
    ("W.P2", "quick"), ("W.E1", "quick"), ("W.E2", "standard"), ("W.E3", "quick"), ("W.E4", "standard"),
    ("N.K1", "quick"), ("N.K4", "quick"), ("N.K9", "quick"), ("N.E", "standard"), ("G.1", "quick"), ("G.2", "quick"),
    ("G.3", "quick"), ("G.4", "quick"), ("G.5", "standard"), ("G.6", "standard"), ("G.7", "quick"), ("G.8", "standard"),
    ("E.1", "quick")])
def test_a_claims_plan_lists_the_jobs_its_check_trains_first(claim_id, profile, tmp_path, monkeypatch):
    """No second source of truth: the first jobs a trained tier hands the grid runner (stopped there,
    nothing is trained) are among its plan's jobs at the first look, by id."""
    import sim.claims.jobs as jobs_module
    from sim.plan import _look_context

    def stop(ctx, fn, jobs, label, done, *, ids, **kw):
        raise _Captured(ids)

    monkeypatch.setattr(jobs_module, "_map_jobs", stop)
    claim = registry.get(claim_id)
    (tier,) = claim.jobs
    (row,) = [r for r in plan_claims([claim], profile) if r.tier == tier]
    _, ctx = _look_context(claim, profile, 0, "cpu", None, 3.0, {}, tier)[0]
    ctx = dataclasses.replace(ctx, out_dir=tmp_path)
    if claim_id == "N.K9":  # a trained reading beside the Monte Carlo tier
        from sim.papers.nichani.claims.constructions_trained import n_k9_trained_tier as check
    else:
        check = claim.checks[tier]
    with pytest.raises(_Captured) as caught:
        check(ctx)
    trained_first = caught.value.args[0]
    assert trained_first and set(trained_first) <= {j.id for j in row.first}, claim_id
    assert all(j.cost is not None and j.cost.parts for j in row.cap)


def test_every_trained_tier_of_the_homes_declares_its_jobs():
    missing = [c.id for c in registry.all_claims() if "trained" in c.checks and "trained" not in c.jobs]
    assert not missing, f"trained tiers without a job description (Claim.jobs; the plan says no estimate): {missing}"
