"""sim.claims.jobs.run_jobs: a check's jobs on the grid runner, memoised per claim evaluation, in
order, the same numbers here and on a local pool."""
import numpy as np
import pytest

import sim.sweep
from sim.claims.base import Claim, Context, Source
from sim.claims.jobs import Cost, job_counts, job_id, planned_jobs, run_jobs
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
    # two run folders: in one, the second call would find the first's records and train nothing
    pool = run_jobs(context(tmp_path / "pool", workers=2, messages=messages), selftest_run, jobs, key=seed_key,
                    label="T.JOBS model")
    serial = run_jobs(context(tmp_path / "here", workers=1), selftest_run, jobs, key=seed_key, label="T.JOBS model")
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


# ------------------------------------------------------------------ records in the run folder --
def records(folder) -> list:
    return sorted(p.name for p in (folder / "runs").glob("*.json")) if (folder / "runs").is_dir() else []


def test_each_finished_job_is_recorded_and_a_fresh_evaluation_reuses_it_without_running_it(tmp_path, dispatched):
    jobs = [{"seed": s, "n": 2} for s in (1, 2)]
    first_ctx = context(tmp_path, workers=1)
    first = run_jobs(first_ctx, selftest_run, jobs, key=seed_key, label="T.JOBS model")
    assert len(records(tmp_path / "jobs" / "T.JOBS")) == 2
    assert job_counts(first_ctx.job_log) == {"trained": 2, "reused": 0}
    # another evaluation (a resumed run) in the same folder: nothing is dispatched, the results are equal
    again_ctx = context(tmp_path, workers=1)
    again = run_jobs(again_ctx, selftest_run, jobs + [{"seed": 3, "n": 2}], key=seed_key, label="T.JOBS model")
    assert [r["values"] for r in again[:2]] == [r["values"] for r in first]
    assert dispatched == [("serial", [1, 2]), ("serial", [3])]
    assert job_counts(again_ctx.job_log) == {"trained": 1, "reused": 2}
    assert job_counts([]) is None


def test_a_claim_finds_the_records_of_the_claims_it_reuses(tmp_path, dispatched):
    import dataclasses

    jobs = [{"seed": 4, "n": 1}]
    run_jobs(context(tmp_path, workers=1), selftest_run, jobs, key=seed_key, label="T.JOBS model")
    reuser = dataclasses.replace(CLAIM, id="T.REUSER", reuses=("T.JOBS",))
    ctx = Context(claim=reuser, profile="quick", seed=0, out_dir=tmp_path)
    run_jobs(ctx, selftest_run, jobs, key=seed_key, label="T.REUSER model")
    assert len(dispatched) == 1 and job_counts(ctx.job_log) == {"trained": 0, "reused": 1}


def test_a_damaged_record_is_trained_again(tmp_path, dispatched):
    jobs = [{"seed": 5, "n": 1}]
    run_jobs(context(tmp_path, workers=1), selftest_run, jobs, key=seed_key, label="T.JOBS model")
    (path,) = (tmp_path / "jobs" / "T.JOBS" / "runs").glob("*.json")
    path.write_text(path.read_text()[:40])
    run_jobs(context(tmp_path, workers=1), selftest_run, jobs, key=seed_key, label="T.JOBS model")
    assert [e for e, _ in dispatched] == ["serial", "serial"]


def test_job_ids_name_the_function_and_key_and_refuse_a_key_that_shows_an_address():
    assert job_id(selftest_run, ("a", 1)) == job_id("sim.sweep:selftest_run", ("a", 1))
    assert job_id(selftest_run, ("a", 1)) != job_id(selftest_run, ("a", 2))
    assert job_id(selftest_run, ("a", object())) is None


def test_planned_jobs_list_each_key_once_with_its_cost():
    cost = Cost.of("selftest", "sim.plan:selftest_timer", steps=[({"work": 10}, 5)], evals=[({"work": 1}, 0)])
    planned = planned_jobs(selftest_run, [{"seed": 1, "n": 1}, {"seed": 1, "n": 1}, {"seed": 2, "n": 1}],
                           key=seed_key, label="T", cost=lambda job: cost, batch=None)
    assert [p.id for p in planned] == [job_id(selftest_run, seed_key({"seed": s, "n": 1})) for s in (1, 2)]
    assert planned[0].cost.parts == (("step", (("work", 10),), 5),) and cost.steps == 5
    assert cost.describe() == "1 model x 5 steps"


def group_sum(group):
    """A batched job for the tests: each job's selftest values, all computed in one call."""
    return [selftest_run(job) for job in group["jobs"]]


def test_a_batched_family_trains_a_group_as_one_task_and_records_each_job(tmp_path, monkeypatch):
    calls = []
    real = sim.sweep.map_runs

    def spy(fn, params_list, **kw):
        calls.append([len(p["jobs"]) for p in params_list])
        return real(fn, params_list, **kw)

    monkeypatch.setattr(sim.sweep, "map_runs", spy)
    jobs = [{"seed": s, "n": 1, "T": T} for T in (1, 2) for s in (7, 8)]
    kw = dict(key=lambda j: (j["seed"], j["T"]), label="T.JOBS group", batch=group_sum,
              group=lambda j: j["T"], batch_on_cpu=True)
    ctx = context(tmp_path, workers=1)
    out = run_jobs(ctx, selftest_run, jobs, **kw)
    assert calls == [[2, 2]] and [r["values"] for r in out] == [selftest_run(j)["values"] for j in jobs]
    assert len(records(tmp_path / "jobs" / "T.JOBS")) == 4 and job_counts(ctx.job_log)["trained"] == 4
    # without batch_on_cpu, the CPU trains one job per task (each task is the job itself)
    calls.clear()
    monkeypatch.setattr(sim.sweep, "map_runs", lambda fn, params_list, **k: calls.append(params_list) or
                        real(fn, params_list, **k))
    run_jobs(context(tmp_path / "other", workers=1), selftest_run, jobs, **{**kw, "batch_on_cpu": False})
    assert [[p["seed"] for p in ps] for ps in calls] == [[7, 8, 7, 8]]


def test_a_full_disk_while_recording_a_job_is_an_environment_failure(tmp_path, monkeypatch):
    import errno

    from sim.files import RunEnvironmentError

    def full(path, text):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(sim.sweep, "atomic_write_text", full)
    with pytest.raises(RunEnvironmentError, match="No space left on device") as caught:
        run_jobs(context(tmp_path, workers=1), selftest_run, [{"seed": 1, "n": 1}], key=seed_key, label="T")
    assert "jobs" in caught.value.where


def test_a_lost_scheduler_is_an_environment_failure_naming_its_address(tmp_path, monkeypatch):
    from sim.claims.jobs import Execution
    from sim.files import RunEnvironmentError
    from sim.sweep import SchedulerLost

    def lost(fn, params_list, **kw):
        raise SchedulerLost("tcp://127.0.0.1:1", "CancelledError")

    monkeypatch.setattr(sim.sweep, "map_runs", lost)
    monkeypatch.setattr("sim.claims.jobs.dask_client", lambda address: object())
    ctx = Context(claim=CLAIM, profile="quick", seed=0, out_dir=tmp_path,
                  execution=Execution("dask", address="tcp://127.0.0.1:1"))
    with pytest.raises(RunEnvironmentError) as caught:
        run_jobs(ctx, selftest_run, [{"seed": 1, "n": 1}], key=seed_key, label="T")
    assert caught.value.where == "tcp://127.0.0.1:1" and "lost the Dask scheduler" in str(caught.value)


def test_an_execution_checks_its_kind_and_address():
    from sim.claims.jobs import Execution

    with pytest.raises(ValueError, match="unknown execution"):
        Execution("slurm")
    with pytest.raises(ValueError, match="address"):
        Execution("dask")
