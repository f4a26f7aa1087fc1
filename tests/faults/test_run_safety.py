"""Output folders are owned, exit codes mean one thing, and no claim can take a run down."""
import json
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

import pytest

from sim.cli import EXIT_FAIL, EXIT_INTERNAL, EXIT_OK, EXIT_USAGE, main
from sim.runner import RunConfig, RunError, _FolderLock

from .conftest import strict_json

ONE_OK = 'CLAIMS = [claim("U.OK")]'


def _run(args, capsys=None):
    code = main(["run", "--no-progress", *map(str, args)])
    out = capsys.readouterr() if capsys else None
    return code, out


# -- data loss and mixing --------------------------------------------------------------------
def test_a_foreign_folder_is_refused_and_nothing_is_deleted(tmp_path, plugin, capsys):
    out = tmp_path / "x"
    (out / "figures").mkdir(parents=True)
    (out / "results").mkdir()
    (out / "figures" / "thesis.png").write_text("d")
    (out / "report.md").write_text("my notes")
    code, cap = _run(["--plugin", plugin(ONE_OK), "--claims", "U.OK", "--out", out], capsys)
    assert code == EXIT_USAGE
    assert "not an icl-verify run folder" in cap.err and "figures" in cap.err
    assert (out / "figures" / "thesis.png").read_text() == "d" and (out / "report.md").read_text() == "my notes"
    assert not (out / "run.json").exists()


def test_a_rerun_in_its_own_folder_removes_only_what_the_run_wrote(tmp_path, plugin, capsys):
    out = tmp_path / "run"
    p = plugin(ONE_OK)
    assert _run(["--plugin", p, "--claims", "U.OK", "--out", out])[0] == EXIT_OK
    (out / "figures").mkdir(exist_ok=True)
    (out / "figures" / "mine.png").write_text("keep")
    (out / "notes.txt").write_text("keep")
    assert _run(["--plugin", p, "--claims", "U.OK", "--out", out])[0] == EXIT_OK
    assert (out / "figures" / "mine.png").read_text() == "keep" and (out / "notes.txt").read_text() == "keep"
    assert strict_json(out / "results.json")["claims"][0]["id"] == "U.OK"


@pytest.mark.parametrize("where", ["file", "file/sub"])
def test_out_that_is_a_file_is_an_input_error(tmp_path, plugin, capsys, where):
    (tmp_path / "file").write_text("precious")
    code, cap = _run(["--plugin", plugin(ONE_OK), "--claims", "U.OK", "--out", tmp_path / where], capsys)
    assert code == EXIT_USAGE and "Traceback" not in cap.err
    assert (tmp_path / "file").read_text() == "precious"


def test_a_read_only_out_is_an_input_error_and_nothing_is_written(tmp_path, plugin, capsys, monkeypatch):
    # CI runs as root, for whom chmod 0555 does not stop a write: refuse the write the way a read-only folder does
    import pathlib

    def read_only(self, *a, **k):
        raise PermissionError(13, "Permission denied", str(self))
    monkeypatch.setattr(pathlib.Path, "touch", read_only)
    (tmp_path / "ro").mkdir()
    code, cap = _run(["--plugin", plugin(ONE_OK), "--claims", "U.OK", "--out", tmp_path / "ro"], capsys)
    assert code == EXIT_USAGE and "Traceback" not in cap.err
    assert "cannot write to --out" in cap.err and "Permission denied" in cap.err
    assert list((tmp_path / "ro").iterdir()) == []


def test_two_real_runs_in_one_folder_at_once_one_is_refused(tmp_path):
    """Two icl-verify processes on the same --out: the second is refused with exit 2 while the
    first holds the folder, and the first's results are whole."""
    slow = tmp_path / "slow.py"
    release = tmp_path / "release"  # the first run's check waits for it: no race with the second's start-up
    slow.write_text(PLUGIN_HEADER_SLOW.replace("RELEASE", str(release)))
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "sim", "run", "--plugin", str(slow), "--claims", "U.SLOW", "--out", str(out),
           "--no-progress"]
    first = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        lock = out / ".icl-verify.lock"
        for _ in range(1200):  # the first run holds the folder once its lock exists
            if lock.exists() or first.poll() is not None:
                break
            time.sleep(0.05)
        assert lock.exists(), first.stderr.read() if first.poll() is not None else "no lock after 60 s"
        second = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        assert second.returncode == EXIT_USAGE, second.stderr
        assert f"pid {first.pid}" in second.stderr and "Traceback" not in second.stderr
    finally:
        release.touch()
        rc = first.wait(timeout=120)
    assert rc == EXIT_OK
    doc = strict_json(out / "results.json")
    assert [c["id"] for c in doc["claims"]] == ["U.SLOW"] and doc["claims"][0]["verdict"] == "PASS"
    assert not lock.exists()


PLUGIN_HEADER_SLOW = """
import os
import time
from sim.claims.base import Claim, Source
from sim.verdict import Outcome, TierResult, Verdict

def _slow(ctx):
    for _ in range(1200):
        if os.path.exists("RELEASE"):
            break
        time.sleep(0.1)
    return TierResult("exact", Verdict.PASS, Outcome.HELD, "held after a while")

CLAIMS = [Claim(id="U.SLOW", title="slow", source=Source("U", "Lemma 1"), statement="s", assumptions=(),
                checks={"exact": _slow}, settings={"quick": {"tiers": ("exact",)}})]
"""


def test_a_second_run_in_the_same_folder_is_refused_while_the_first_holds_it(tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (tmp_path / ".icl-verify.lock").write_text(str(holder.pid))
        with pytest.raises(RunError, match=f"pid {holder.pid}"):
            with _FolderLock(tmp_path):
                pass
    finally:
        holder.kill()
        holder.wait()
    # its writer gone, the lock is stale and taken over
    with _FolderLock(tmp_path) as lock:
        assert lock.held and (tmp_path / ".icl-verify.lock").read_text() == str(os.getpid())
    assert not (tmp_path / ".icl-verify.lock").exists()


def test_a_claim_id_cannot_name_a_path(plugin, capsys):
    code, cap = _run(["--plugin", plugin('CLAIMS = [claim("../../../escaped")]'), "--claims", "*"], capsys)
    assert code == EXIT_USAGE and "is not valid" in cap.err


# -- exit codes ------------------------------------------------------------------------------
def test_exit_codes_mean_one_thing_each(tmp_path, plugin, capsys):
    body = 'CLAIMS = [claim("U.OK"), claim("U.BAD", _fail), claim("U.BOOM", lambda ctx: 1 / 0)]'
    p = plugin(body)
    assert _run(["--plugin", p, "--claims", "U.OK", "--out", tmp_path / "a"])[0] == EXIT_OK
    assert _run(["--plugin", p, "--claims", "U.OK,U.BAD", "--out", tmp_path / "b"])[0] == EXIT_FAIL
    assert _run(["--plugin", p, "--claims", "U.BAD,U.BOOM", "--out", tmp_path / "c"])[0] == EXIT_INTERNAL
    assert _run(["--plugin", p, "--claims", "U.NOPE", "--out", tmp_path / "d"])[0] == EXIT_USAGE


@pytest.mark.parametrize("returned", ["None", "{'verdict': 'PASS'}",
                                      "TierResult('exact', 'MAYBE', Outcome.HELD, 'x')", "SystemExit(0)"])
def test_a_misbehaving_check_is_its_claims_error_and_the_run_goes_on(tmp_path, plugin, capsys, returned):
    act = f"raise {returned}" if returned.startswith("SystemExit") else f"return {returned}"
    p = plugin(f"def _odd(ctx):\n    {act}\n\nCLAIMS = [claim('U.ODD', _odd), claim('U.OK')]\n")
    code, cap = _run(["--plugin", p, "--claims", "U.ODD,U.OK", "--out", tmp_path / "r"], capsys)
    assert code == EXIT_INTERNAL
    doc = strict_json(tmp_path / "r" / "results.json")
    verdicts = {d["id"]: d["verdict"] for d in doc["claims"]}
    assert verdicts == {"U.ODD": "ERROR", "U.OK": "PASS"}
    ET.parse(tmp_path / "r" / "junit.xml")


def test_an_internal_error_is_one_line_and_debug_shows_the_traceback(tmp_path, plugin, capsys, monkeypatch):
    import sim.report

    def broken(*a, **k):
        raise RuntimeError("disk on fire")
    monkeypatch.setattr(sim.report, "write_reports", broken)
    p = plugin(ONE_OK)
    code, cap = _run(["--plugin", p, "--claims", "U.OK", "--out", tmp_path / "r"], capsys)
    assert code == EXIT_INTERNAL and "disk on fire" in cap.err and "Traceback" not in cap.err
    with pytest.raises(RuntimeError):
        main(["--debug", "run", "--no-progress", "--plugin", str(p), "--claims", "U.OK", "--out", str(tmp_path / "s")])


# -- stale or ambiguous results --------------------------------------------------------------
def test_two_plugins_with_one_id_is_an_error_naming_both(tmp_path, plugin, capsys):
    a = plugin('CLAIMS = [claim("U.SAME", _fail)]', name="a.py")
    b = plugin('CLAIMS = [claim("U.SAME")]', name="b.py")
    code, cap = _run(["--plugin", a, "--plugin", b, "--claims", "U.SAME", "--out", tmp_path / "r"], capsys)
    assert code == EXIT_USAGE and "a.py" in cap.err and "b.py" in cap.err


def test_an_edited_plugin_is_a_new_configuration(tmp_path, plugin, capsys):
    p = plugin(ONE_OK)
    assert _run(["--plugin", p, "--claims", "U.OK", "--out", tmp_path / "r"])[0] == EXIT_OK
    plugin('CLAIMS = [claim("U.OK", _fail)]')  # same file, new code
    code, cap = _run(["--plugin", p, "--claims", "U.OK", "--out", tmp_path / "r", "--resume"], capsys)
    assert code == EXIT_USAGE and "different configuration" in cap.err


@pytest.mark.parametrize("pattern", ["", " , "])
def test_an_empty_claim_selection_is_an_error(plugin, capsys, pattern):
    code, cap = _run(["--claims", pattern], capsys)
    assert code == EXIT_USAGE and "names no claim" in cap.err


@pytest.mark.parametrize("z", ["inf", "nan", "-1", "0"])
def test_a_non_finite_z_is_refused(capsys, z):
    with pytest.raises(SystemExit) as exc:
        main(["run", "--z", z])
    assert exc.value.code == EXIT_USAGE
    with pytest.raises(RunError):
        RunConfig(z=float(z))


def test_resume_takes_its_settings_from_run_json_and_survives_a_corrupt_result(tmp_path, plugin, capsys):
    p = plugin('CLAIMS = [claim("U.OK"), claim("U.TWO")]')
    out = tmp_path / "r"
    assert _run(["--plugin", p, "--claims", "U.*", "--seed", "5", "--out", out])[0] == EXIT_OK
    (out / "results" / "U.TWO.json").write_text('{"id": "U.TW')  # cut short
    (out / "results.json").unlink()
    code, cap = _run(["--plugin", p, "--resume", "--out", out], capsys)  # exactly what `show` suggests
    assert code == EXIT_OK, cap.err
    doc = strict_json(out / "results.json")
    assert doc["config"]["seed"] == 5 and [d["id"] for d in doc["claims"]] == ["U.OK", "U.TWO"]
    code, cap = _run(["--plugin", p, "--resume", "--seed", "6", "--out", out], capsys)
    assert code == EXIT_USAGE and "--seed 5" in cap.err


def test_a_corrupt_run_json_is_an_input_error(tmp_path, plugin, capsys):
    out = tmp_path / "r"
    out.mkdir()
    (out / "run.json").write_text("{not json")
    code, cap = _run(["--plugin", plugin(ONE_OK), "--claims", "U.OK", "--out", out], capsys)
    assert code == EXIT_USAGE and "run.json" in cap.err
    code, cap = _run(["--plugin", plugin(ONE_OK), "--resume", "--out", out], capsys)
    assert code == EXIT_USAGE and "Traceback" not in cap.err


@pytest.mark.parametrize("content", ['{"schema": "icl-verify/results/v1", "cla', "[]", '{"a": 1}'])
def test_show_of_a_bad_results_file_is_an_input_error(tmp_path, capsys, content):
    (tmp_path / "results.json").write_text(content)
    assert main(["show", str(tmp_path)]) == EXIT_USAGE
    assert "Traceback" not in capsys.readouterr().err


def test_show_of_a_missing_folder_says_so(tmp_path, capsys):
    assert main(["show", str(tmp_path / "nowhere")]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "is not a folder" in err and "did not finish" not in err and "Traceback" not in err


def test_a_plugin_that_raises_at_import_is_an_input_error(plugin, capsys):
    code, cap = _run(["--plugin", plugin("raise RuntimeError('broken plugin')"), "--claims", "*"], capsys)
    assert code == EXIT_USAGE and "broken plugin" in cap.err and "Traceback" not in cap.err


# -- every output parses under strict parsers; control characters are written out -------------
def test_control_characters_and_markup_are_harmless_everywhere(tmp_path, plugin):
    p = plugin('CLAIMS = [claim("U.ESC", _fail, title="bell \\x07 escape \\x1b[31m <img src=x onerror=alert(1)> '
               'I(x;y) <= b")]')
    out = tmp_path / "r"
    assert _run(["--plugin", p, "--claims", "U.ESC", "--out", out])[0] == EXIT_FAIL
    html_text = (out / "report.html").read_text()
    ET.fromstring(html_text.split("\n", 1)[1])
    ET.parse(out / "junit.xml")
    strict_json(out / "results.json")
    strict_json(out / "run.json")
    md = (out / "report.md").read_text()
    assert "\x1b" not in md and "\\x1b" in md
    assert "<img" not in md and "&lt;img" in md
    assert "I(x;y) <= b" in md  # prose stays readable in a terminal


def test_reports_have_the_usual_file_modes(tmp_path, plugin):
    old = os.umask(0o022)
    try:
        assert _run(["--plugin", plugin(ONE_OK), "--claims", "U.OK", "--out", tmp_path / "r"])[0] == EXIT_OK
    finally:
        os.umask(old)
    for name in ("report.md", "report.html", "results.json", "junit.xml", "run.json", "results/U.OK.json"):
        assert (tmp_path / "r" / name).stat().st_mode & 0o777 == 0o644, name


# -- the entry-point group works -------------------------------------------------------------
def test_claims_from_an_installed_package_entry_point(tmp_path, monkeypatch, capsys):
    """An installed distribution (a dist-info folder on sys.path, as pip leaves it) declaring
    ``icl_verify.claims`` adds its claims to list and run."""
    from sim import claims as registry

    site = tmp_path / "site"
    (site / "my_claims").mkdir(parents=True)
    from .conftest import PLUGIN_HEADER
    (site / "my_claims" / "__init__.py").write_text(PLUGIN_HEADER + 'CLAIMS = [claim("U.EP")]\n')
    info = site / "my_claims-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: my-claims\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[icl_verify.claims]\nmine = my_claims:CLAIMS\n")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(registry, "_ENTRY_POINTS_LOADED", False)
    assert main(["list"]) == EXIT_OK
    assert "U.EP" in capsys.readouterr().out
    assert _run(["--claims", "U.EP", "--out", tmp_path / "r"])[0] == EXIT_OK
    assert json.loads((tmp_path / "r" / "results.json").read_text())["claims"][0]["id"] == "U.EP"
    sys.modules.pop("my_claims", None)


# -- sizes are checked before anything is allocated -------------------------------------------
@pytest.mark.parametrize("argv, said", [
    (["prior", "dirichlet(alpha=1)", "--d", "100000"], "at most 256"),
    (["prior", "dirichlet(alpha=1, d=100000)"], "at most 256"),
    (["prior", "doubly_stochastic(k=100000000, d=3)"], "more than 10000"),
    (["prior", "dirichlet(alpha=1)", "--graph", "chain:100000000"], "more than 100000"),
    (["prior", "mixture(" + ", ".join(["dirichlet(alpha=1)"] * 5000) + ")"], "longer than 5000"),
    (["prior", "floor(" * 40 + "dirichlet(alpha=1)" + ", gamma=0.1)" * 40], "nests 41 levels"),
])
def test_oversized_inputs_are_refused_with_the_limit(capsys, argv, said):
    assert main([*argv, "--no-progress", "--claims", "W.L3"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err


def test_a_sampler_that_never_returns_is_stopped_with_a_clear_error(tmp_path, capsys, monkeypatch):
    (tmp_path / "slow.py").write_text("import time\n\ndef draw(rng, n):\n    time.sleep(600)\n")
    monkeypatch.setenv("ICL_VERIFY_SAMPLER_TIMEOUT", "0.5")
    assert main(["prior", f"{tmp_path / 'slow.py'}:draw", "--no-progress", "--claims", "W.L3"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "did not return within 0.5 s" in err and "ICL_VERIFY_SAMPLER_TIMEOUT" in err


# -- SIGKILL anywhere, then --resume: the same results as an uninterrupted run -----------------
def test_sigkill_at_random_points_then_resume_matches_an_uninterrupted_run(tmp_path):
    """Kill the run at random moments (while claims run, between them, while the reports are
    written); ``run --resume --out DIR`` then ends with the verdicts and numbers of a run that
    was never interrupted."""
    import random
    import signal
    import time
    from pathlib import Path

    plugin = Path(__file__).resolve().parents[1] / "sim" / "data" / "user_claims.py"
    cli = [sys.executable, "-m", "sim", "run", "--no-progress"]
    common = ["--plugin", str(plugin), "--claims", "USER.*", "--seed", "4"]
    t0 = time.perf_counter()
    ref = subprocess.run(cli + common + ["--out", str(tmp_path / "ref")], capture_output=True, timeout=300)
    total = time.perf_counter() - t0
    assert ref.returncode in (0, 1), ref.stderr

    def view(path):
        doc = strict_json(path / "results.json")
        return [(d["id"], d["verdict"], d["seed"], [(t["tier"], t["verdict"], t["numbers"]) for t in d["tiers"]])
                for d in doc["claims"]]

    rng = random.Random(20261201)
    for k in range(3):
        out = tmp_path / f"killed{k}"
        proc = subprocess.Popen(cli + common + ["--out", str(out)], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.3, total))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        if not (out / "run.json").exists():  # killed before the run began: start it again
            resumed = subprocess.run(cli + common + ["--out", str(out)], capture_output=True, timeout=300)
        else:
            resumed = subprocess.run(cli + ["--plugin", str(plugin), "--resume", "--out", str(out)],
                                     capture_output=True, timeout=300)
        assert resumed.returncode == ref.returncode, resumed.stderr
        assert view(out) == view(tmp_path / "ref")


def test_shows_resume_hint_works_exactly_as_printed(tmp_path, plugin, capsys):
    p = plugin('CLAIMS = [claim("U.OK"), claim("U.TWO")]')
    out = tmp_path / "r"
    assert _run(["--plugin", p, "--claims", "U.*", "--seed", "2", "--out", out])[0] == EXIT_OK
    (out / "results.json").unlink()  # as a killed run leaves it
    assert main(["show", str(out)]) == EXIT_USAGE
    hint = capsys.readouterr().err.split("resume with ", 1)[1].rstrip(")\n")
    args = hint.split()[1:]  # drop the program name: "run --resume --out DIR --plugin FILE"
    assert main(args[:1] + ["--no-progress"] + args[1:]) == EXIT_OK
    assert strict_json(out / "results.json")["config"]["seed"] == 2


@pytest.mark.parametrize("argv", [["prior", "point([[1]])"], ["prior", "dirichlet(alpha=1)", "--d", "1"]])
def test_a_one_state_prior_is_refused_at_the_boundary(capsys, argv):
    assert main([*argv, "--no-progress", "--claims", "W.L3"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "1 state" in err and "Traceback" not in err


def test_ctrl_c_names_the_resume_command_only_once_a_run_folder_exists(tmp_path, plugin, capsys):
    p = plugin("def _stop(ctx):\n    raise KeyboardInterrupt\n\nCLAIMS = [claim('U.OK'), claim('U.STOP', _stop)]\n")
    assert _run(["--plugin", p, "--claims", "U.*", "--out", tmp_path / "r"])[0] == 130
    err = capsys.readouterr().err
    assert f"icl-verify run --resume --out {tmp_path / 'r'}" in err
    (tmp_path / "stop.py").write_text("def draw(rng, n):\n    raise KeyboardInterrupt\n")
    assert main(["prior", f"{tmp_path / 'stop.py'}:draw", "--no-progress", "--claims", "W.L3"]) == 130
    err = capsys.readouterr().err
    assert "interrupted" in err and "resume" not in err
