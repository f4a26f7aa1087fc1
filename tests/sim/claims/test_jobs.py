"""sim.claims.jobs.run_jobs: a check's jobs on the grid runner, memoised per claim evaluation, in
order, the same numbers here and on a local pool."""
import numpy as np
import pytest

import sim.sweep
from sim.claims.base import Claim, Context, Source
from sim.claims.jobs import run_jobs
from sim.sweep import selftest_run

CLAIM = Claim(id="T.JOBS", title="t", source=Source("T", "here"), statement="s", assumptions=(), checks={},
              settings={})


def context(tmp_path, *, workers: int, device: str = "cpu", messages: list | None = None) -> Context:
    return Context(claim=CLAIM, profile="quick", seed=0, out_dir=tmp_path, device=device,
                   overrides={"workers": workers}, progress=(messages.append if messages is not None else print))


def seed_key(job) -> tuple:
    return ("selftest", job["seed"], job["n"])


@pytest.fixture
def dispatched(monkeypatch):
    """Every ``map_runs`` call the helper makes: ``(executor, seeds of its jobs)``."""
    calls = []
    real = sim.sweep.map_runs

    def spy(fn, params_list, *, executor="local", **kw):
        calls.append((executor, [p["seed"] for p in params_list]))
        return real(fn, params_list, executor=executor, **kw)

    monkeypatch.setattr(sim.sweep, "map_runs", spy)
    return calls


def test_a_job_is_run_once_per_key_and_reused_by_a_later_call(tmp_path, dispatched):
    ctx = context(tmp_path, workers=1)
    jobs = [{"seed": 3, "n": 2}, {"seed": 4, "n": 2}, {"seed": 3, "n": 2}]  # the third repeats the first
    first = run_jobs(ctx, selftest_run, jobs, key=seed_key, label="T.JOBS model")
    assert dispatched == [("serial", [3, 4])]
    assert first[2] is first[0] and first[0]["values"] != first[1]["values"]
    again = run_jobs(ctx, selftest_run, jobs[:2] + [{"seed": 5, "n": 2}], key=seed_key, label="T.JOBS model")
    assert dispatched[1:] == [("serial", [5])]  # only the new job runs
    assert again[0] is first[0] and again[1] is first[1]
    assert run_jobs(ctx, selftest_run, [], key=seed_key, label="T.JOBS model") == [] and len(dispatched) == 2


def test_results_come_back_in_order_the_same_here_and_on_a_local_pool(tmp_path, dispatched):
    # the first job sleeps, so on the pool it finishes last
    jobs = [{"seed": s, "n": 3, "sleep": 0.3 if s == 0 else 0.0} for s in (0, 1, 2)]
    messages = []
    pool = run_jobs(context(tmp_path, workers=2, messages=messages), selftest_run, jobs, key=seed_key,
                    label="T.JOBS model")
    serial = run_jobs(context(tmp_path, workers=1), selftest_run, jobs, key=seed_key, label="T.JOBS model")
    assert [e for e, _ in dispatched] == ["local", "serial"]
    expected = [np.random.default_rng(s).normal(size=3).tolist() for s in (0, 1, 2)]
    assert [r["values"] for r in pool] == [r["values"] for r in serial] == expected
    assert all(r["torch_threads"] == 1 for r in pool)
    assert messages[0] == "T.JOBS model: 3 models on 2 worker processes"
    assert messages[-1] == "T.JOBS model: 3/3 models finished"


def test_off_the_cpu_jobs_run_here_each_with_its_own_progress(tmp_path, monkeypatch):
    seen = []

    def record(fn, params_list, *, executor="local", **kw):
        seen.extend(params_list)
        for p in params_list:
            p["progress"]("step 1/1")
        return [None] * len(params_list)

    monkeypatch.setattr(sim.sweep, "map_runs", record)
    messages = []
    run_jobs(context(tmp_path, workers=4, device="cuda", messages=messages), selftest_run,
             [{"seed": 1, "n": 1}, {"seed": 2, "n": 1}], key=seed_key, label="T.JOBS model")
    assert messages == ["T.JOBS model 1/2: step 1/1", "T.JOBS model 2/2: step 1/1"]
    assert all(callable(p["progress"]) for p in seen)
