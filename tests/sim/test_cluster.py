"""sim.cluster and `run --executor`: every training job a task of a Dask cluster (a LocalCluster on
127.0.0.1 here, never another address), the numbers those of a local run; a worker killed mid-run
costs nothing but time; a driver killed mid-claim resumes job by job; a full disk is an
environment error with the --resume command."""
from __future__ import annotations

import errno
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from sim.cli import EXIT_OK, EXIT_USAGE, main
from sim.cluster import ExecutorError, check_executor

distributed = pytest.importorskip("distributed")

#: N.K1 and E.1 (two homes, both trained tiers on the grid runner) at a budget of seconds.
REDUCED = '''
import dataclasses

from sim.papers.markov.claims.edelman import E_1
from sim.papers.nichani.claims.trained import N_K1

K1 = {**N_K1.settings["quick"], "S": 5, "Ts": (8, 32), "seeds": 2, "seeds_start": 2, "seeds_step": 1,
      "steps1": 60, "steps2": 60, "batch": 64, "n_eval": 1024, "n_fit": 256, "n_prior_draws": 200}
E1 = {**E_1.settings["quick"], "seeds": (0, 1), "steps": 120, "n_eval": 32, "eval_every": 40, "eval_log_points": 0}
CLAIMS = [dataclasses.replace(N_K1, id="R.K1", settings={"quick": K1}),
          dataclasses.replace(E_1, id="R.E1", settings={"quick": E1})]
'''

#: What may differ between two runs of the same configuration: wall-clock times, where things ran, the
#: jobs counts (trained here or reused from the run folder).
TIMING = {"elapsed_s", "seconds", "timing", "train_seconds", "created", "jobs", "finished", "worker", "setup_seconds",
          "eval_seconds"}


def numbers_of(path: Path) -> list:
    """A run's claims without what may differ between two runs of one configuration (:data:`TIMING`),
    the run folder's path written OUT (a stored counterexample's file is in it)."""
    def strip(x):
        if isinstance(x, dict):
            return {k: strip(v) for k, v in x.items() if k not in TIMING}
        if isinstance(x, list):
            return [strip(v) for v in x]
        if isinstance(x, str):  # a reading's detail quotes a run's wall time
            return re.sub(r"'train_seconds': [0-9.e+-]+", "'train_seconds': -", x.replace(str(path), "OUT"))
        return x
    return strip(json.loads((path / "results.json").read_text())["claims"])


@pytest.fixture(scope="module")
def plugin(tmp_path_factory):
    path = tmp_path_factory.mktemp("reduced") / "reduced_claims.py"
    path.write_text(textwrap.dedent(REDUCED))
    from sim import claims as registry

    saved = (dict(registry._EXTRA), dict(registry._ORIGIN), dict(registry._DIGESTS))
    yield path
    for store, old in zip((registry._EXTRA, registry._ORIGIN, registry._DIGESTS), saved):
        store.clear()
        store.update(old)


def run(plugin, out, *extra) -> int:
    return main(["run", "--plugin", str(plugin), "--claims", "R.*", "--jobs", "1", "--no-progress", "--out", str(out),
                 *map(str, extra)])


@pytest.fixture(scope="module")
def reference(plugin, tmp_path_factory):
    """The reduced claims run locally, one job after another (--workers 1)."""
    out = tmp_path_factory.mktemp("local") / "run"
    assert run(plugin, out, "--workers", "1") in (EXIT_OK, 1)
    return out


def test_dask_local_gives_the_numbers_of_a_local_run(plugin, reference, tmp_path):
    out = tmp_path / "dask"
    assert run(plugin, out, "--executor", "dask-local", "--workers", "2") in (EXIT_OK, 1)
    assert numbers_of(out) == numbers_of(reference)
    doc = json.loads((out / "results.json").read_text())
    assert {c["id"]: c["jobs"] for c in doc["claims"]} == {"R.K1": {"trained": 4, "reused": 0},
                                                          "R.E1": {"trained": 2, "reused": 0}}


def test_the_plan_lists_exactly_the_jobs_a_run_trains(plugin, reference):
    from sim import claims as registry
    from sim.plan import plan_claims

    rows = plan_claims(registry.select("R.*"), "quick")
    for row in rows:
        recorded = {p.stem for p in (reference / "jobs" / row.claim / "runs").glob("*.json")}
        assert {j.id for j in row.cap} == {j.id for j in row.first} == recorded, row.claim


def test_a_worker_killed_mid_run_costs_only_time(plugin, reference, tmp_path):
    """One of the LocalCluster's two workers is killed once the first job has finished: the scheduler
    gives its tasks to the other (and to the worker its nanny restarts), and the numbers are the same."""
    from sim.claims import jobs as jobs_module

    out = tmp_path / "killed"
    killed = []

    def kill_one_worker():
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and not killed:
            if list((out / "jobs").glob("*/runs/*.json")) and jobs_module._CLIENTS:
                client = next(iter(jobs_module._CLIENTS.values()))
                pids = sorted(client.run(os.getpid).values())
                os.kill(pids[0], signal.SIGKILL)
                killed.append(pids[0])
                return
            time.sleep(0.05)

    thread = threading.Thread(target=kill_one_worker, daemon=True)
    thread.start()
    assert run(plugin, out, "--executor", "dask-local", "--workers", "2") in (EXIT_OK, 1)
    thread.join(timeout=5)
    assert killed, "no worker was killed: the run finished before its first job did"
    assert numbers_of(out) == numbers_of(reference)


def test_a_driver_killed_mid_claim_resumes_job_by_job(plugin, reference, tmp_path):
    """SIGKILL of the driver once R.K1's first job is recorded; --resume trains only what is missing
    (the finished jobs' records are not rewritten) and ends with the numbers of an uninterrupted run."""
    out = tmp_path / "killed-driver"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.Popen([sys.executable, "-m", "sim", "run", "--plugin", str(plugin), "--claims", "R.K1",
                             "--jobs", "1", "--workers", "1", "--no-progress", "--out", str(out)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    records = out / "jobs" / "R.K1" / "runs"
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and proc.poll() is None and not list(records.glob("*.json")):
            time.sleep(0.02)
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL, "the run finished before it could be killed"
    done = {p.name: p.stat().st_mtime_ns for p in records.glob("*.json")}
    assert 0 < len(done) < 4 and not (out / "results.json").exists()
    assert main(["run", "--plugin", str(plugin), "--resume", "--out", str(out), "--no-progress", "--workers", "1"]) in (
        EXIT_OK, 1)
    assert {p.name: p.stat().st_mtime_ns for p in records.glob("*.json") if p.name in done} == done
    doc = json.loads((out / "results.json").read_text())
    (k1,) = doc["claims"]
    assert k1["jobs"] == {"trained": 4 - len(done), "reused": len(done)}
    assert doc["jobs"] == {"trained": 4 - len(done), "reused": len(done)}
    other_pattern = [{k: v for k, v in c.items() if k != "config_hash"} for c in numbers_of(reference)
                     if c["id"] == "R.K1"]  # the reference ran --claims 'R.*': another configuration hash
    assert [{k: v for k, v in c.items() if k != "config_hash"} for c in numbers_of(out)] == other_pattern
    assert f"{len(done)} reused" in (out / "report.md").read_text()


def test_a_full_disk_mid_run_exits_2_naming_the_file_and_the_resume_command(plugin, reference, tmp_path,
                                                                           monkeypatch, capsys):
    import sim.sweep

    out = tmp_path / "full"
    real = sim.sweep.atomic_write_text
    writes = []

    def fills_up(path, text):
        writes.append(path)
        if len(writes) > 1:  # the first job's record fits, the second does not
            raise OSError(errno.ENOSPC, "No space left on device")
        real(path, text)

    monkeypatch.setattr(sim.sweep, "atomic_write_text", fills_up)
    assert run(plugin, out, "--workers", "1") == EXIT_USAGE
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and err[0].startswith("icl-verify quick-seed0")  # the header, then one line
    assert "No space left on device" in err[1] and str(writes[1]) in err[1]
    assert f"icl-verify run --resume --out {out}" in err[1]
    monkeypatch.setattr(sim.sweep, "atomic_write_text", real)
    assert main(["run", "--plugin", str(plugin), "--resume", "--out", str(out), "--no-progress", "--workers", "1"]) in (
        EXIT_OK, 1)
    assert numbers_of(out) == numbers_of(reference)
    assert json.loads((out / "results.json").read_text())["jobs"]["reused"] == 1


# ------------------------------------------------------------------------------ the options --
@pytest.mark.parametrize("executor, address, message", [
    ("dask", None, "--executor dask needs --address"),
    ("dask", "10.0.0.5:8786", "is not a scheduler address"),
    ("dask", "tcp://host:99999", "is not a scheduler address"),
    ("local", "tcp://127.0.0.1:8786", "--address goes with --executor dask"),
    ("dask-local", "tcp://127.0.0.1:8786", "--address goes with --executor dask"),
])
def test_executor_options_that_do_not_go_together_are_refused(executor, address, message):
    with pytest.raises(ExecutorError, match=message):
        check_executor(executor, address, None)
    check_executor("dask", "tcp://127.0.0.1:8786", None)  # the form is all it checks (nothing is contacted)


def test_a_missing_dask_is_a_usage_error_before_any_work(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "distributed", None)  # `import distributed` raises ImportError
    code = main(["run", "--claims", "W.L1", "--executor", "dask-local", "--out", str(tmp_path / "x")])
    err = capsys.readouterr().err
    assert code == EXIT_USAGE and err.count("\n") == 1 and "pip install 'icl-causal-verify[cluster]'" in err
    assert not (tmp_path / "x").exists()


def test_an_unreachable_scheduler_is_a_usage_error_naming_it(tmp_path, capsys):
    import socket

    with socket.socket() as s:  # a port on 127.0.0.1 that nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    address = f"tcp://127.0.0.1:{port}"
    import dask

    with dask.config.set({"distributed.comm.timeouts.connect": "2s"}):
        code = main(["run", "--claims", "W.L1", "--executor", "dask", "--address", address, "--no-progress",
                     "--out", str(tmp_path / "x")])
    err = capsys.readouterr().err
    last = err.strip().splitlines()[-1]
    assert code == EXIT_USAGE and last.startswith("icl-verify: error:") and address in last
    assert "quick-seed0" not in err  # said before the header line
    assert not (tmp_path / "x").exists()
