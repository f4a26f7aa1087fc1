"""Every bad input gets exit 2 and one line naming it (issue 49): one test per cause the issue
found, each failing on the code before the fix. The contract is in docs/inputs.md."""
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from .conftest import assert_finished_run, assert_input_error, run_cli, strict_json

PLUGIN = Path(__file__).resolve().parents[1] / "sim" / "data" / "user_claims.py"


def _view(run_dir):
    """What a run decided and measured, without its timings."""
    doc = strict_json(run_dir / "results.json")
    return [(d["id"], d["verdict"], d["seed"], d["headline"],
             [(t["tier"], t["verdict"], t["summary"], t["numbers"], t["counterexample"]) for t in d["tiers"]])
            for d in doc["claims"]]


# -- run --resume of a run made with --budget ----------------------------------------------------------
def test_a_run_made_with_budget_resumes_to_the_numbers_of_an_uninterrupted_run(tmp_path, monkeypatch):
    """Interrupted (Ctrl-C) after its first claim, a run made with --budget 5 resumes from its run.json
    alone and ends with the verdicts and numbers of the run that was never interrupted."""
    import sim.runner

    args = ["run", "--no-progress", "--claims", "W.P1,W.L1", "--budget", "5", "--seed", "3"]
    ref = run_cli([*args, "--out", "ref"], tmp_path, out_dir="ref")
    assert_finished_run(ref, tmp_path / "ref")
    evaluate, done = sim.runner.evaluate_claim, []

    def interrupted(claim, *a, **k):
        if done:  # Ctrl-C during the second claim
            raise KeyboardInterrupt
        done.append(claim.id)
        return evaluate(claim, *a, **k)
    monkeypatch.setattr(sim.runner, "evaluate_claim", interrupted)
    cut = run_cli([*args, "--out", "cut"], tmp_path, out_dir="cut")
    assert cut.code == 130 and "run --resume --out cut" in cut.err
    assert [p.stem for p in (tmp_path / "cut" / "results").iterdir()] == done
    assert not (tmp_path / "cut" / "results.json").exists()
    monkeypatch.setattr(sim.runner, "evaluate_claim", evaluate)
    resumed = run_cli(["run", "--no-progress", "--resume", "--out", "cut"], tmp_path, out_dir="cut")
    assert_finished_run(resumed, tmp_path / "cut")
    assert _view(tmp_path / "cut") == _view(tmp_path / "ref")
    saved = strict_json(tmp_path / "cut" / "run.json")["config"]["overrides"]
    assert saved == {"W.P1": {"max_examples": 5}, "W.L1": {"max_examples": 5}}
    again = run_cli(["run", "--no-progress", "--resume", "--out", "cut", "--budget", "6"], tmp_path)
    assert_input_error(again, "made with --budget 5", "not with --budget 6")


# -- user code cannot end the tool -----------------------------------------------------------------------
@pytest.mark.parametrize("body, said", [
    ("import sys\nsys.exit(0)\n", "called sys.exit(0)"),
    ("import sys\nsys.exit('my own words')\n", "called sys.exit('my own words')"),
    ("raise SystemExit(3)\n", "called sys.exit(3)"),
    ("def gen():\n    yield 1\n    raise SystemExit(0)\n\nCLAIMS = gen()\n", "iterating its CLAIMS called sys.exit(0)"),
], ids=["exit-0", "exit-message", "SystemExit-3", "CLAIMS-generator"])
def test_a_plugin_that_exits_is_an_input_error_naming_the_file(tmp_path, body, said):
    (tmp_path / "mine.py").write_text(body)
    res = run_cli(["run", "--no-progress", "--plugin", "mine.py", "--claims", "*", "--out", "o"], tmp_path)
    assert_input_error(res, "cannot load claim plugin mine.py", said)


@pytest.mark.parametrize("body, said", [
    ("def draw(rng, n):\n    raise SystemExit(0)\n", "sampler s.py:draw called sys.exit(0)"),
    ("import sys\n\ndef draw(rng, n):\n    sys.exit('bye')\n", "sampler s.py:draw called sys.exit('bye')"),
    ("import sys\nsys.exit(0)\n", "sampler file s.py failed to load: running it called sys.exit(0)"),
], ids=["raise-SystemExit", "exit-message", "exit-at-import"])
def test_a_sampler_that_exits_is_an_input_error_naming_the_file_and_function(tmp_path, body, said):
    (tmp_path / "s.py").write_text(body)
    res = run_cli(["prior", "s.py:draw", "--no-progress", "--claims", "W.L3", "--out", "o"], tmp_path)
    assert_input_error(res, said)


def test_a_check_that_exits_is_its_claims_error_in_a_complete_report(tmp_path):
    """The boundary's other side: a plugin's check that calls sys.exit is that claim's ERROR (exit 3),
    the report whole, as documented."""
    (tmp_path / "p.py").write_text(
        "import sys\nfrom sim.claims.base import Claim, Source\n\n"
        "def _bye(ctx):\n    sys.exit(0)\n\n"
        "CLAIMS = [Claim(id='U.BYE', title='t', source=Source('U', 'L1'), statement='s', assumptions=(),\n"
        "                checks={'exact': _bye}, settings={'quick': {'tiers': ('exact',)}})]\n")
    res = run_cli(["run", "--no-progress", "--plugin", "p.py", "--claims", "U.BYE", "--out", "o"], tmp_path,
                  out_dir="o")
    assert res.code == 3 and "U.BYE" in res.err and not res.new_paths
    assert strict_json(tmp_path / "o" / "results.json")["claims"][0]["verdict"] == "ERROR"


# -- nothing outside the run folder ----------------------------------------------------------------------
def test_a_run_with_a_property_tier_leaves_only_its_folder(tmp_path):
    """``cd $(mktemp -d) && icl-verify run --claims W.L1 --out out`` leaves only out/ (hypothesis wrote
    its constants cache to .hypothesis/ in the current folder)."""
    exe = Path(sys.executable).with_name("icl-verify")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "sim"]
    env = {k: v for k, v in os.environ.items() if k != "HYPOTHESIS_STORAGE_DIRECTORY"}
    r = subprocess.run(cmd + ["run", "--claims", "W.L1", "--budget", "20", "--out", "out", "--no-progress"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    assert not any(p.name == ".hypothesis" for p in (tmp_path / "out").rglob("*"))


def test_a_property_search_leaves_hypothesis_home_where_it_was(tmp_path):
    from hypothesis import configuration
    from hypothesis import strategies as st

    from sim.claims.base import search_counterexample

    before = configuration.storage_directory(intent_to_write=False).home_directory
    found, tried = search_counterexample(st.integers(0, 10), lambda x: x > 5, max_examples=50, seed=1)
    assert found == 6 and tried > 0
    assert configuration.storage_directory(intent_to_write=False).home_directory == before


# -- list skips a broken folder --------------------------------------------------------------------------
@pytest.mark.parametrize("content", ["[]", "null", '{"claims": "abc"}',
                                     '{"schema": "icl-verify/results/v1", "run_id": "r", "claims": [{}]}',
                                     '{"schema": "icl-verify/results/v1", "run_id": "r", "config": {"profile": '
                                     '"quick", "seed": 0, "device": "cpu"}, "summary": {}, "claims": [{"verdict": '
                                     '"PASS", "tiers": []}]}'], ids=["list", "null", "claims-text", "empty-claim", "no-id"])
def test_list_skips_a_malformed_results_file_with_a_warning(tmp_path, content):
    good = run_cli(["run", "--no-progress", "--claims", "N.K7", "--out", "reports/good"], tmp_path,
                   out_dir="reports/good")
    assert_finished_run(good, tmp_path / "reports" / "good")
    (tmp_path / "reports" / "bad").mkdir()
    (tmp_path / "reports" / "bad" / "results.json").write_text(content)
    res = run_cli(["list"], tmp_path)
    assert res.code == 0 and "Traceback" not in res.err
    assert res.err.count("\n") == 1 and "warning: skipping reports/bad" in res.err
    row = next(line for line in res.out.splitlines() if line.startswith("N.K7"))
    assert "PASS (quick-seed0-" in row


# -- options the code cannot use -------------------------------------------------------------------------
def test_prior_draws_below_two_is_refused_before_the_audit(tmp_path):
    res = run_cli(["prior", "dirichlet(alpha=1)", "--draws", "1", "--claims", "W.L3", "--out", "o"], tmp_path)
    assert_input_error(res, "--draws", "at least 2")


# -- run folders with the right schema tag and the wrong contents ----------------------------------------
def _finished(tmp_path, name="r"):
    res = run_cli(["run", "--no-progress", "--claims", "N.K7,W.P1", "--budget", "0", "--out", name], tmp_path,
                  out_dir=name)
    assert_finished_run(res, tmp_path / name)
    return tmp_path / name


def _edit(run_dir, change):
    path = run_dir / "results.json"
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))


BAD_CONTENTS = {  # the registry's order: W.P1, then N.K7
    "a claim without a verdict": (lambda d: d["claims"][1].pop("verdict"), "claims[1] (N.K7): the key 'verdict'"),
    "numbers that are not a list": (lambda d: d["claims"][0]["tiers"][0].update(numbers={"a": 1}),
                                    "claims[0] (W.P1).tiers[0].numbers: expected a list"),
    "a value too large for a float": (lambda d: d["claims"][0]["tiers"][0]["numbers"][0].update(value=10 ** 400),
                                      "value: expected a number, a string, true/false or null, got an integer too "
                                      "large for a float"),
    "an elapsed time as text": (lambda d: d["claims"][1].update(elapsed_s="1s"), "claims[1] (N.K7).elapsed_s"),
    "a commit that is a number": (lambda d: d.update(git_commit=12), "git_commit: expected a string or null"),
    "claims as a string": (lambda d: d.update(claims="abc"), "claims: expected a list"),
    "a claim twice": (lambda d: d["claims"].append(d["claims"][1]), "claim N.K7 appears twice"),
}


@pytest.mark.parametrize("what", BAD_CONTENTS)
def test_show_and_diff_refuse_a_results_file_of_the_wrong_shape_in_every_format(tmp_path, what):
    change, said = BAD_CONTENTS[what]
    good = _finished(tmp_path, "good")
    bad = _finished(tmp_path, "bad")
    _edit(bad, change)
    for fmt in ("text", "md", "json", "latex"):
        assert_input_error(run_cli(["show", "bad", "--format", fmt], tmp_path), "bad/results.json", said)
    assert_input_error(run_cli(["diff", "good", "bad"], tmp_path), "bad/results.json", said)
    assert_input_error(run_cli(["diff", "bad", "good", "--format", "json"], tmp_path), said)
    assert run_cli(["show", "good", "--format", "latex"], tmp_path).code == 0


@pytest.mark.parametrize("change, said", [
    (lambda c: c.update(seed="zero"), "config.seed: expected an integer"),
    (lambda c: c.update(seed=-1), "seed must be a non-negative integer"),
    (lambda c: c.update(profile="fast"), "unknown profile 'fast'"),
    (lambda c: c.update(overrides=[]), "config.overrides: expected an object"),
    (lambda c: c.pop("claims"), "config: the key 'claims' is missing"),
    (lambda c: c.update(claims=""), "run.json: config.claims: --claims '' names no claim"),
    (lambda c: c.update(z="3"), "config.z: expected a number"),
], ids=["seed-text", "seed-negative", "profile", "overrides", "no-claims", "claims-empty", "z-text"])
def test_resume_refuses_a_corrupt_run_json_naming_it_and_the_key(tmp_path, change, said):
    run = _finished(tmp_path)
    (run / "results.json").unlink()
    doc = json.loads((run / "run.json").read_text())
    change(doc["config"])
    (run / "run.json").write_text(json.dumps(doc))
    res = run_cli(["run", "--no-progress", "--resume", "--out", "r"], tmp_path)
    assert_input_error(res, "r/run.json", said)


@pytest.mark.parametrize("content", ['{"id": "W.P1"}', "[]", '{"id": "W.P1", "verdict": "PASS", "tiers": 3}'],
                         ids=["no-verdict", "list", "tiers-number"])
def test_resume_evaluates_again_a_claim_whose_saved_result_is_corrupt(tmp_path, content):
    run = _finished(tmp_path)
    before = _view(run)
    (run / "results.json").unlink()
    saved = json.loads((run / "results" / "W.P1.json").read_text())
    (run / "results" / "W.P1.json").write_text(content if content != "keep" else json.dumps(saved))
    res = run_cli(["run", "--no-progress", "--resume", "--out", "r"], tmp_path, out_dir="r")
    assert_finished_run(res, run)
    assert _view(run) == before


# -- deep nesting and odd bytes --------------------------------------------------------------------------
def test_deeply_nested_json_is_refused_with_the_limit(tmp_path):
    deep = "[" * 5000 + "]" * 5000
    (tmp_path / "g.json").write_text(deep)
    assert_input_error(run_cli(["run", "--graph", "g.json", "--claims", "N.K8", "--out", "o"], tmp_path),
                       "g.json", "more than 16 levels deep")
    assert_input_error(run_cli(["run", "--graph", deep, "--claims", "N.K8", "--out", "o"], tmp_path),
                       "more than 16 levels deep")
    run = _finished(tmp_path)
    _edit(run, lambda d: d["claims"][0]["tiers"][0].update(counterexample=json.loads("[" * 900 + "]" * 900)))
    assert_input_error(run_cli(["show", "r"], tmp_path), "r/results.json", "more than 64 levels deep")


@pytest.mark.parametrize("spec", ["dirichlet(alpha=" + "+".join(["1"] * 2400) + ")",
                                  "dirichlet(alpha=" + "-" * 4900 + "1)",
                                  "dirichlet(alpha=" + "(" * 30 + "1" + ")" * 30 + "+" + "+".join(["1"] * 200) + ")"],
                         ids=["sum", "minus", "parens-and-sum"])
def test_a_deeply_nested_prior_spec_is_refused(tmp_path, spec):
    assert_input_error(run_cli(["prior", spec, "--claims", "W.L3", "--out", "o"], tmp_path), "levels deep")


def test_a_file_name_that_is_not_utf8_reaches_the_reports_with_escapes(tmp_path):
    """A graph file's name labels the graph in figures and reports: matplotlib and the UTF-8 writer
    refused its bytes (N.K8's check crashed; the run ended with a UnicodeEncodeError after its work)."""
    from sim.files import atomic_write_text
    from sim.graphs import graph_from_spec

    name = os.fsdecode(b"g\xff.json")
    (tmp_path / name).write_text("[-1, 0, -1]")
    assert graph_from_spec(str(tmp_path / name)).graph["name"] == "g\\udcff.json"
    atomic_write_text(tmp_path / "r.md", f"ran on {name}")
    assert (tmp_path / "r.md").read_text() == "ran on g\\udcff.json"


def test_bytes_that_are_not_utf8_in_a_spec_are_named(tmp_path):
    spec = os.fsdecode(b"dirichlet(alpha=\xff)")
    assert_input_error(run_cli(["prior", spec, "--claims", "W.L3", "--out", "o"], tmp_path),
                       "column 17", "not UTF-8")


# -- refusals before the header, before the audit --------------------------------------------------------
@pytest.mark.parametrize("setup, said", [
    (lambda d: (d / "o").write_text("x"), "--out o is a file"),
    (lambda d: ((d / "o").mkdir(), (d / "o" / "notes.txt").write_text("mine")), "is not empty and is not an icl-verify"),
    (lambda d: ((d / "o").mkdir(), (d / "o" / ".icl-verify.lock").write_text(str(os.getppid()))), "another icl-verify run"),
], ids=["file", "foreign", "locked"])
@pytest.mark.parametrize("command", [["run", "--claims", "N.K7"], ["prior", "dirichlet(alpha=1)", "--claims", "W.L3"]],
                         ids=["run", "prior"])
def test_a_bad_out_folder_is_refused_before_the_header_and_the_audit(tmp_path, setup, said, command):
    setup(tmp_path)
    before = {p: p.read_bytes() if p.is_file() else None for p in (tmp_path / "o").rglob("*")} \
        if (tmp_path / "o").is_dir() else None
    res = run_cli([*command, "--out", "o", "--no-progress"], tmp_path)
    assert res.code == 2 and res.err.count("\n") == 1 and said in res.err, res
    assert res.out == "" and "Assumptions under prior" not in res.out
    if before is not None:
        assert {p: p.read_bytes() if p.is_file() else None for p in (tmp_path / "o").rglob("*")} == before


@pytest.mark.parametrize("value", ["x", "0", "-2", "1.5", "99999999999999999999999x"])
@pytest.mark.parametrize("command", [["run", "--claims", "N.K7"], ["prior", "dirichlet(alpha=1)", "--claims", "W.L3"]],
                         ids=["run", "prior"])
def test_a_bad_jobs_variable_is_refused_before_the_header(tmp_path, value, command):
    res = run_cli([*command, "--out", "o", "--no-progress"], tmp_path, env={"ICL_VERIFY_JOBS": value})
    assert_input_error(res, "ICL_VERIFY_JOBS")
    assert not (tmp_path / "o").exists()


# -- unchecked sizes from user code ----------------------------------------------------------------------
def test_a_sampler_with_too_many_states_is_refused_at_its_first_draw(tmp_path):
    (tmp_path / "big.py").write_text("import numpy as np\n\ndef draw(rng, n):\n    return np.full((n, 300, 300), 1 / 300)\n")
    res = run_cli(["prior", "big.py:draw", "--claims", "W.L3", "--out", "o"], tmp_path)
    assert_input_error(res, "sampler big.py:draw draws 300 x 300 matrices", "at most 256")


def test_huge_mixture_weights_are_equal_weights_and_leak_no_warning():
    from sim.priors import parse_prior

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        p = parse_prior("mixture(point([[0.9, 0.1], [0.2, 0.8]]), point([[0.5, 0.5], [0.5, 0.5]]), "
                        "weights=[1e308, 1e308])")
        assert np.allclose(p.weights, [0.5, 0.5])
        assert p.sample(np.random.default_rng(0), 200).shape == (200, 2, 2)
        with pytest.raises(Exception, match=r"row 0 sums to inf"):
            parse_prior("point([[1e308, 1e308], [0.5, 0.5]])")
