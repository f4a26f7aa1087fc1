"""The icl-verify command line: typed options, clear errors, exit codes, list/show."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from sim.cli import build_parser, main

PLUGIN = Path(__file__).parent / "data" / "user_claims.py"


def test_help_explains_each_option(capsys):
    with pytest.raises(SystemExit) as e:
        main(["run", "--help"])
    assert e.value.code == 0
    text = capsys.readouterr().out
    for opt in ("--profile", "--claims", "--seed", "--device", "--out", "--resume", "--plugin"):
        assert opt in text


def test_unknown_profile_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as e:
        main(["run", "--profile", "fast"])
    assert e.value.code == 2
    assert "invalid choice: 'fast'" in capsys.readouterr().err


def test_bad_seed_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as e:
        main(["run", "--seed", "-4"])
    assert e.value.code == 2
    assert "non-negative integer" in capsys.readouterr().err


def test_unknown_claim_lists_known_ids(capsys):
    assert main(["run", "--claims", "Q.NOPE", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "no claim matches 'Q.NOPE'" in err and "W.L2" in err


def test_cuda_requested_without_gpu_is_explained(capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    assert main(["run", "--device", "cuda", "--claims", "W.L2", "--no-progress"]) == 2
    assert "no CUDA device" in capsys.readouterr().err


def test_user_claim_runs_and_appears_in_report_and_list(tmp_path, capsys):
    out = tmp_path / "run"
    code = main(["run", "--plugin", str(PLUGIN), "--claims", "USER.MEAN,USER.ROWS", "--out", str(out),
                 "--no-progress"])
    assert code == 0
    doc = json.loads((out / "results.json").read_text())
    assert [c["id"] for c in doc["claims"]] == ["USER.MEAN", "USER.ROWS"]
    assert all(c["verdict"] == "PASS" for c in doc["claims"])
    assert "## USER.MEAN" in (out / "report.md").read_text()
    capsys.readouterr()
    assert main(["show", str(out)]) == 0
    assert "USER.MEAN" in capsys.readouterr().out
    assert main(["list", "--reports", str(tmp_path), "--plugin", str(PLUGIN)]) == 0
    listing = capsys.readouterr().out
    assert "USER.MEAN" in listing and "PASS" in listing


def test_a_failing_user_claim_exits_nonzero_with_counterexample(tmp_path):
    # the installed command, as a user runs it
    variant = tmp_path / "wrong.py"
    variant.write_text(
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('uc', {str(PLUGIN)!r})\n"
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
        "CLAIMS = [c.variant(offset=0.5).__class__(**{**c.__dict__, 'id': 'WRONG.MEAN', "
        "'params': {'offset': 0.5}}) for c in m.CLAIMS if c.id == 'USER.MEAN']\n")
    out = tmp_path / "run"
    r = subprocess.run([sys.executable, "-m", "sim", "run", "--plugin", str(variant), "--claims", "WRONG.*",
                        "--out", str(out), "--no-progress"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, r.stderr
    doc = json.loads((out / "results.json").read_text())
    assert doc["claims"][0]["verdict"] == "FAIL"
    assert doc["claims"][0]["tiers"][0]["counterexample"]["pi"]


def test_show_of_missing_run_is_clear(tmp_path, capsys):
    assert main(["show", str(tmp_path)]) == 2
    assert "no results.json" in capsys.readouterr().err


def test_parser_has_all_commands():
    sub = build_parser()._subparsers._group_actions[0].choices
    assert set(sub) >= {"list", "run", "show", "prior"}


def test_list_says_how_a_claim_without_tiers_is_decided(tmp_path, capsys):
    assert main(["list", "--reports", str(tmp_path)]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("N.K10"))
    assert "(pending)" not in row and "icl-verify prior" in row and "quick" not in row


def test_list_quotes_each_chosen_claims_primary_reading(tmp_path, capsys):
    from sim.claims import get

    assert main(["list", "--reports", str(tmp_path), "--claims", "W.L3"]) == 0
    out = capsys.readouterr().out
    primary = get("W.L3").primary
    rows = [line for line in out.splitlines() if line.startswith("W.")]
    assert len(rows) == 2 and primary.cite() in rows[0] and "quick" in rows[0]  # the table row, then the block
    assert f'{primary.cite()}: "{primary.statement}"' in out and primary.setting in out


def test_list_with_a_pattern_that_matches_nothing_is_one_line(tmp_path, capsys):
    assert main(["list", "--reports", str(tmp_path), "--claims", "Q.*"]) == 2
    err = capsys.readouterr().err
    assert "Q.*" in err and len(err.strip().splitlines()) == 1
