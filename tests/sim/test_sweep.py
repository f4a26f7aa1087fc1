"""Tests of sim.sweep: grids, run ids, per-run atomic records, resume, the local process pool
and a Dask LocalCluster (loopback only, dashboard off): identical results for the same seeds,
and a killed worker losing only its own run, which a resume finishes."""
import json

import pytest

from sim.sweep import SweepError, deterministic_part, grid, run_id, run_sweep

SELFTEST = "sim.sweep:selftest_run"
TINY = dict(C=3, K=2, N=8, width=8, steps=4, batch=4, n_eval=4, eval_every=2, eval_log_points=0,
            strategies=["uniform", "G1", "G2", "M1", "M2"])


def test_grid_is_the_cartesian_product_in_axis_order():
    g = grid({"N": 8}, K=[1, 4], seed=[0, 1, 2])
    assert len(g) == 6 and g[0] == {"N": 8, "K": 1, "seed": 0} and g[-1] == {"N": 8, "K": 4, "seed": 2}
    with pytest.raises(SweepError, match="axis 'K' must be a list"):
        grid(K=3)


def test_run_ids_are_stable_and_name_the_function():
    a = run_id(SELFTEST, {"seed": 1, "n": 2})
    assert a == run_id(SELFTEST, {"n": 2, "seed": 1}) and len(a) == 16
    assert a != run_id(SELFTEST, {"seed": 2, "n": 2})
    assert a != run_id("sim.papers.markov.task:run_markov", {"seed": 1, "n": 2})
    with pytest.raises(SweepError, match="cannot be imported by a worker"):
        run_sweep(lambda p: p, [{}], "unused", executor="serial")
    with pytest.raises(SweepError, match="unknown executor 'threads'"):
        run_sweep(SELFTEST, [{}], "unused", executor="threads")


def test_serial_sweep_writes_each_run_and_resumes(tmp_path):
    params = grid({"n": 3}, seed=[0, 1, 2])
    res = run_sweep(SELFTEST, params, tmp_path, executor="serial")
    assert res.complete and res.reused == 0 and not res.failed
    files = sorted(p.name for p in (tmp_path / "runs").glob("*.json"))
    assert files == sorted(f"{i}.json" for i in res.ids)
    rec = json.loads((tmp_path / "runs" / f"{res.ids[1]}.json").read_text())
    assert rec["params"] == params[1] and rec["result"]["torch_threads"] == 1
    again = run_sweep(SELFTEST, params + [{"n": 3, "seed": 3}], tmp_path, executor="serial")
    assert again.reused == 3 and again.complete
    assert again.results()[:3] == res.results()
    fresh = run_sweep(SELFTEST, params, tmp_path, executor="serial", resume=False)
    assert fresh.reused == 0


def test_a_damaged_record_is_recomputed(tmp_path):
    res = run_sweep(SELFTEST, [{"seed": 0}], tmp_path, executor="serial")
    (tmp_path / "runs" / f"{res.ids[0]}.json").write_text("{half a fi")
    again = run_sweep(SELFTEST, [{"seed": 0}], tmp_path, executor="serial")
    assert again.reused == 0 and again.complete and again.results() == res.results()


def test_local_pool_one_thread_each_and_a_killed_worker_loses_only_its_run(tmp_path):
    flag = tmp_path / "kill-me"
    flag.write_text("")
    params = grid({"n": 5}, seed=[0, 1, 2, 3])
    params[1]["crash_if"] = str(flag)
    params[1]["sleep"] = 0.2  # dies mid-sweep, while the other worker is busy
    res = run_sweep(SELFTEST, params, tmp_path / "sw", executor="local", workers=2)
    assert set(res.failed) == {res.ids[1]}
    assert "died (exit code 17)" in res.failed[res.ids[1]]
    assert all(res.ids[i] in res.records for i in (0, 2, 3))
    assert (tmp_path / "sw" / "failed" / f"{res.ids[1]}.json").exists()
    assert all(r["torch_threads"] == 1 for r in res.results() if r is not None)
    flag.unlink()
    again = run_sweep(SELFTEST, params, tmp_path / "sw", executor="local", workers=2)
    assert again.complete and again.reused == 3 and not again.failed
    assert not (tmp_path / "sw" / "failed" / f"{res.ids[1]}.json").exists()
    serial = run_sweep(SELFTEST, params, tmp_path / "serial", executor="serial")
    assert deterministic_part(again.results()) == deterministic_part(serial.results())


def test_local_pool_records_a_run_that_raises(tmp_path):
    res = run_sweep("sim.papers.markov.task:run_markov", [{"K": 0}], tmp_path, executor="local", workers=1)
    assert not res.complete and "K must be a positive integer" in next(iter(res.failed.values()))


# ------------------------------------------------------------------------------------- Dask ---
@pytest.fixture(scope="module")
def cluster():
    distributed = pytest.importorskip("distributed")
    import dask

    # one retry, so a task that keeps killing its worker fails fast (KilledWorker)
    with dask.config.set({"distributed.scheduler.allowed-failures": 1}):
        cl = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                      dashboard_address=None, worker_dashboard_address=None,
                                      scheduler_kwargs={"dashboard": False, "dashboard_address": "127.0.0.1:0"})
        try:
            yield cl
        finally:
            cl.close()


def _listening(pids):
    import psutil

    out = []
    for pid in pids:
        try:
            conns = psutil.Process(pid).net_connections(kind="inet")
        except psutil.NoSuchProcess:
            continue
        out += [c.laddr for c in conns if c.status == psutil.CONN_LISTEN]
    return out


def test_the_dask_cluster_listens_on_loopback_only(cluster):
    import psutil

    assert cluster.scheduler_address.startswith("tcp://127.0.0.1:")
    me = psutil.Process()
    addrs = _listening([me.pid] + [p.pid for p in me.children(recursive=True)])
    assert addrs, "expected the scheduler and workers to listen somewhere"
    assert {a.ip for a in addrs} == {"127.0.0.1"}, addrs


def test_local_and_dask_give_identical_training_runs(cluster, tmp_path):
    params = grid(TINY, seed=[0, 1])
    local = run_sweep("sim.papers.markov.task:run_markov", params, tmp_path / "local", executor="local", workers=2)
    remote = run_sweep("sim.papers.markov.task:run_markov", params, tmp_path / "dask", executor="dask",
                       address=cluster.scheduler_address)
    assert local.complete and remote.complete
    assert local.ids == remote.ids
    assert deterministic_part(local.results()) == deterministic_part(remote.results())
    assert all(r["timing"]["torch_threads"] == 1 for r in remote.results())
    assert local.results()[0]["eval"] != local.results()[1]["eval"]  # the seeds matter


def test_a_killed_dask_worker_loses_only_its_run_and_a_resume_finishes(cluster, tmp_path):
    flag = tmp_path / "kill-me"
    flag.write_text("")
    params = grid({"n": 3, "sleep": 0.3}, seed=[0, 1, 2, 3])
    params[0]["crash_if"] = str(flag)
    from distributed import Client

    with Client(cluster) as client:
        res = run_sweep(SELFTEST, params, tmp_path / "sw", executor="dask", client=client)
        assert set(res.failed) == {res.ids[0]}
        assert "KilledWorker" in res.failed[res.ids[0]]
        assert all(res.ids[i] in res.records for i in (1, 2, 3))
        flag.unlink()
        again = run_sweep(SELFTEST, params, tmp_path / "sw", executor="dask", client=client)
    assert again.complete and again.reused == 3
    serial = run_sweep(SELFTEST, params, tmp_path / "serial", executor="serial")
    assert deterministic_part(again.results()) == deterministic_part(serial.results())


def test_dask_without_an_address_is_a_clear_error(tmp_path):
    pytest.importorskip("distributed")
    with pytest.raises(SweepError, match="needs a scheduler address"):
        run_sweep(SELFTEST, [{"seed": 0}], tmp_path, executor="dask")


# ---------------------------------------------------------------- map_runs: in memory ---
def test_map_runs_returns_results_in_order_the_same_on_every_executor(tmp_path):
    from sim.sweep import map_runs

    params = [{"seed": s, "n": 3, "sleep": 0.2 if s == 0 else 0} for s in (0, 1, 2)]  # the first finishes last
    serial = map_runs(SELFTEST, params, executor="serial")
    local = map_runs(SELFTEST, params, executor="local", workers=2)
    assert [r["values"] for r in serial] == [r["values"] for r in local]
    assert serial[0]["values"] != serial[1]["values"] and all(r["torch_threads"] == 1 for r in local)
    assert not any(tmp_path.iterdir())  # nothing written
    assert map_runs(SELFTEST, [], executor="local") == []


def test_map_runs_raises_on_the_first_failed_run_with_its_traceback(tmp_path):
    from sim.sweep import map_runs

    flag = tmp_path / "crash"
    flag.write_text("")
    with pytest.raises(SweepError, match=r"(?s)run 2 of 2 .* failed:\n.*died"):
        map_runs(SELFTEST, [{"seed": 0}, {"seed": 1, "crash_if": str(flag)}], executor="local", workers=2)
    with pytest.raises(SweepError, match=r"(?s)run 1 of 1 .* failed:\n.*Traceback.*ValueError"):
        map_runs(SELFTEST, [{"seed": 0, "n": "not a number"}], executor="serial")
    with pytest.raises(SweepError, match="unknown executor"):
        map_runs(SELFTEST, [{}], executor="threads")


def test_kept_objects_come_back_to_the_driver_and_are_never_written(tmp_path):
    """A run returning ``Kept(record, objects)``: the record is written as any result, the objects
    (a numpy array here; trained weights in the Markov home) reach ``SweepResult.kept`` from a
    local worker, and a resumed sweep, which reads the records from disk, has none."""
    import numpy as np

    from sim.sweep import Kept, map_runs

    params = [{"seed": s, "n": 3, "keep": True} for s in (0, 1)]
    res = run_sweep(SELFTEST, params, tmp_path, executor="local", workers=2)
    assert res.complete and set(res.kept) == set(res.ids)
    for rid, rec in zip(res.ids, res.results()):
        assert isinstance(res.kept[rid]["values"], np.ndarray) and res.kept[rid]["values"].tolist() == rec["values"]
        on_disk = json.loads((tmp_path / "runs" / f"{rid}.json").read_text())
        assert on_disk["result"] == rec and "kept" not in json.dumps(on_disk)
    again = run_sweep(SELFTEST, params, tmp_path, executor="serial")
    assert again.reused == 2 and not again.kept and again.results() == res.results()
    out = map_runs(SELFTEST, params[:1], executor="serial")  # in memory: the Kept itself
    assert isinstance(out[0], Kept) and out[0].record["values"] == res.results()[0]["values"]


def test_grid_axes_override_the_base():
    """Each axis value is a grid point's parameter, even where ``base`` has a default of the same name (the Markov
    sweep command passes its preset, N included, as ``base`` and ``--N`` as an axis)."""
    g = grid({"n": 3, "seed": 99}, seed=[0, 1])
    assert g == [{"n": 3, "seed": 0}, {"n": 3, "seed": 1}]
    assert len({run_id(SELFTEST, p) for p in g}) == 2


def test_the_format_version_is_part_of_the_run_id(monkeypatch):
    """Records are found by id alone, so a new FORMAT must give new ids (stale records are then not reused)."""
    import sim.sweep

    before = run_id(SELFTEST, {"seed": 1})
    monkeypatch.setattr(sim.sweep, "FORMAT", sim.sweep.FORMAT + 1)
    assert run_id(SELFTEST, {"seed": 1}) != before


def test_a_record_for_other_params_is_not_reused(tmp_path):
    # a record under this id whose params are not this grid point's (copied in, or edited) must be recomputed
    res = run_sweep(SELFTEST, [{"seed": 0, "n": 2}], tmp_path, executor="serial")
    path = tmp_path / "runs" / f"{res.ids[0]}.json"
    rec = json.loads(path.read_text())
    rec["params"] = {"seed": 5, "n": 2}
    rec["result"]["values"] = [0.0, 0.0]
    path.write_text(json.dumps(rec))
    again = run_sweep(SELFTEST, [{"seed": 0, "n": 2}], tmp_path, executor="serial")
    assert again.reused == 0 and again.results() == res.results()


def test_deterministic_part_drops_the_wall_clock_fields_at_every_depth():
    rec = {"id": "x", "finished": "2026-01-01T00:00:00", "elapsed_s": 1.5, "worker": {"pid": 3},
           "result": {"values": [1, 2], "timing": {"s": 2}, "runs": [{"finished": "t", "elapsed_s": 2, "v": 7}]}}
    assert deterministic_part(rec) == {"id": "x", "result": {"values": [1, 2], "runs": [{"v": 7}]}}


def test_a_repeated_grid_point_is_one_run_and_one_reuse(tmp_path):
    """Duplicates run once, and a resume reuses that one record once."""
    params = [{"seed": 0, "n": 2}, {"seed": 0, "n": 2}]
    res = run_sweep(SELFTEST, params, tmp_path, executor="serial")
    assert res.ids[0] == res.ids[1] and len(list((tmp_path / "runs").glob("*.json"))) == 1
    again = run_sweep(SELFTEST, params, tmp_path, executor="serial")
    assert again.reused == 1 and again.reused_ids == {res.ids[0]} and again.complete
