"""`icl-verify diff RUN_A RUN_B`: verdict changes, moved numbers, claims in one run only, exit codes.

Every results.json here is built by hand, so exactly which verdicts and numbers changed is known."""
import json
import sys

import pytest

from sim.cli import main
from sim.diff import diff_runs, is_worse, render_json, render_text
from sim.report import SCHEMA
from sim.verdict import Z_DEFAULT

EPS = sys.float_info.epsilon


def num(name, value, stderr=0.0, kind="exact"):
    return {"name": name, "value": value, "stderr": stderr, "n": None, "seed": None, "tolerance": None,
            "kind": kind, "note": ""}


def claim(cid, verdict, tiers=(), headline=None):
    return {"id": cid, "title": f"title of {cid}", "verdict": verdict, "headline": headline or verdict,
            "tiers": [{"tier": t, "verdict": verdict, "summary": "", "numbers": list(ns), "findings": [],
                       "controls": [], "counterexample": None} for t, ns in tiers]}


def doc(claims, seed=0, profile="quick", prior=None):
    return {"schema": SCHEMA, "run_id": f"{profile}-seed{seed}-test", "complete": True,
            "config": {"profile": profile, "claims": "*", "seed": seed, "device": "cpu", "prior": prior, "z": 3.0,
                       "overrides": {}, "plugins": {}},
            "prior": prior, "summary": {}, "findings": [], "claims": claims}


def write(tmp_path, name, document):
    d = tmp_path / name
    d.mkdir()
    (d / "results.json").write_text(json.dumps(document))
    return d


def pair():
    """Runs A and B at different seeds. Known changes: X.1 PASS -> FAIL (worse), X.2 FAIL -> PASS,
    X.3 NOT_RUN -> FAIL (not worse); numbers: X.1 'mc moved' (7.1 combined s.e.), 'exact moved' (1e-9),
    'text moved' ("inf" -> 3); X.only_a in A only, X.only_b in B only."""
    a = doc([
        claim("X.1", "PASS", [
            ("montecarlo", [num("mc moved", 0.50, 0.01, "montecarlo"),       # |d| = 0.10 > 3 * 0.0141
                            num("mc steady", 0.50, 0.01, "montecarlo"),      # |d| = 0.02 < 3 * 0.0141
                            num("trained steady", 2.0, 0.5, "trained"),      # |d| = 1.0 < 3 * 0.707
                            num("prop zero se", 7, 0.0, "property")]),       # unchanged integer
            ("exact", [num("exact moved", 1.0),                              # |d| = 1e-9 >> 64 eps
                       num("exact roundoff", 1.0),                           # |d| = 8 eps < 64 eps
                       num("big roundoff", 1e6),                             # |d| = 1e6 * 16 eps < 64 eps * 1e6
                       num("still inf", "inf"),                              # "inf" both: unchanged
                       num("text moved", "inf")]),                           # "inf" -> 3: changed
        ], headline="PASS (finding: something)"),
        claim("X.2", "FAIL", [("exact", [num("gap", -0.25)])]),
        claim("X.3", "NOT_RUN"),
        claim("X.only_a", "PASS"),
    ], seed=0)
    b = doc([
        claim("X.1", "FAIL", [
            ("montecarlo", [num("mc moved", 0.60, 0.01, "montecarlo"),
                            num("mc steady", 0.52, 0.01, "montecarlo"),
                            num("trained steady", 3.0, 0.5, "trained"),
                            num("prop zero se", 7, 0.0, "property")]),
            ("exact", [num("exact moved", 1.0 + 1e-9),
                       num("exact roundoff", 1.0 + 8 * EPS),
                       num("big roundoff", 1e6 * (1 + 16 * EPS)),
                       num("still inf", "inf"),
                       num("text moved", 3)]),
        ]),
        claim("X.2", "FAIL", [("exact", [num("gap", -0.25)])]),
        claim("X.3", "FAIL"),
        claim("X.only_b", "INCONCLUSIVE"),
    ], seed=1)
    return a, b


def moved_keys(d):
    return {(m.claim, m.tier, m.name) for m in d.moved_numbers}


def test_lists_exactly_the_verdict_and_number_changes():
    a, b = pair()
    d = diff_runs(a, b, z=Z_DEFAULT)
    assert [(c.id, c.verdict_a, c.verdict_b, c.worse) for c in d.verdict_changes] == [
        ("X.1", "PASS", "FAIL", True), ("X.3", "NOT_RUN", "FAIL", False)]
    assert d.verdict_changes[0].headline_a == "PASS (finding: something)"
    assert d.verdict_changes[0].headline_b == "FAIL"
    assert moved_keys(d) == {("X.1", "montecarlo", "mc moved"), ("X.1", "exact", "exact moved"),
                             ("X.1", "exact", "text moved")}
    mc = next(m for m in d.moved_numbers if m.name == "mc moved")
    assert mc.test == "statistical" and mc.sigmas == pytest.approx(0.1 / (0.01 * 2 ** 0.5))
    assert mc.threshold == pytest.approx(3 * 0.01 * 2 ** 0.5)
    text = next(m for m in d.moved_numbers if m.name == "text moved")
    assert (text.test, text.value_a, text.value_b, text.delta) == ("text", "inf", 3, None)
    assert next(m for m in d.moved_numbers if m.name == "exact moved").test == "round-off"
    assert [o.id for o in d.only_in_a] == ["X.only_a"] and [o.id for o in d.only_in_b] == ["X.only_b"]
    assert d.only_in_b[0].verdict == "INCONCLUSIVE"
    assert d.numbers_compared == 10
    assert d.config_changes == {"seed": (0, 1)}
    assert [c.id for c in d.worse] == ["X.1"]


def test_z_sets_how_far_a_statistical_number_must_move():
    a, b = pair()
    assert ("X.1", "montecarlo", "mc moved") not in moved_keys(diff_runs(a, b, z=8.0))   # 7.07 s.e.
    assert ("X.1", "montecarlo", "mc steady") in moved_keys(diff_runs(a, b, z=1.0))     # 1.41 s.e.
    with pytest.raises(ValueError):
        diff_runs(a, b, z=0)


def test_statistical_numbers_without_error_still_ignore_round_off():
    a = doc([claim("X", "PASS", [("mc", [num("p", 0.3, 0.0, "property"), num("q", 0.3, 0.0, "montecarlo")])])])
    b = doc([claim("X", "PASS", [("mc", [num("p", 0.3 + 4 * EPS, 0.0, "property"),
                                         num("q", 0.31, 0.0, "montecarlo")])])])
    d = diff_runs(a, b)
    assert moved_keys(d) == {("X", "mc", "q")}
    assert "no standard error" in render_text(d)


def test_a_seed_record_is_not_a_moved_number():
    """Two master seeds give every stream another seed: that is the config's change, not a measurement's."""
    a = doc([claim("X", "PASS", [("exact", [num("seed (sequences)", 123, kind="seed"), num("v", 1.0)])])], seed=0)
    b = doc([claim("X", "PASS", [("exact", [num("seed (sequences)", 456, kind="seed"), num("v", 2.0)])])], seed=1)
    d = diff_runs(a, b)
    assert moved_keys(d) == {("X", "exact", "v")} and d.numbers_compared == 1


def test_an_infinite_standard_error_never_moves_and_nan_values_compare_as_text():
    a = doc([claim("X", "PASS", [("mc", [num("wide", 0.0, "inf", "montecarlo"), num("n", "nan"),
                                         num("m", "nan")])])])
    b = doc([claim("X", "PASS", [("mc", [num("wide", 5.0, 0.1, "montecarlo"), num("n", "nan"),
                                         num("m", 0.5)])])])
    assert moved_keys(diff_runs(a, b)) == {("X", "mc", "m")}


def test_repeated_names_in_a_tier_are_matched_in_order():
    a = doc([claim("X", "PASS", [("exact", [num("r", 1.0), num("r", 2.0)])])])
    b = doc([claim("X", "PASS", [("exact", [num("r", 1.0), num("r", 2.5)])])])
    assert moved_keys(diff_runs(a, b)) == {("X", "exact", "r [2]")}


@pytest.mark.parametrize("va,vb,worse", [
    ("PASS", "FAIL", True), ("INCONCLUSIVE", "ERROR", True), ("PASS", "INCONCLUSIVE", True),
    ("ASSUMPTION_UNMET", "FAIL", True), ("FAIL", "PASS", False), ("ERROR", "FAIL", False),
    ("PASS", "NOT_RUN", False), ("NOT_RUN", "ERROR", False), ("PASS", "PASS", False), ("PASS", "WEIRD", False)])
def test_worse_follows_the_severity_order(va, vb, worse):
    assert is_worse(va, vb) is worse


def test_text_lists_the_sections_in_order_and_exits_1_when_a_pass_became_a_fail(tmp_path, capsys):
    a, b = pair()
    ra, rb = write(tmp_path, "a", a), write(tmp_path, "b", b)
    assert main(["diff", str(ra), str(rb)]) == 1
    out = capsys.readouterr().out
    assert "configs differ: seed 0 -> 1" in out
    heads = [out.index(h) for h in ("Verdicts changed (2)", "Numbers moved (3 of 10", "Only in A (1)",
                                    "Only in B (1)")]
    assert heads == sorted(heads)
    assert "X.1: PASS -> FAIL  WORSE" in out and "A: PASS (finding: something)" in out
    assert "X.3: NOT_RUN -> FAIL  title" in out          # listed, never worse
    assert "mc steady" not in out and "exact roundoff" not in out and "big roundoff" not in out
    assert "1 verdict(s) got worse: X.1" in out


def test_exit_0_when_a_fail_became_a_pass(tmp_path, capsys):
    a = doc([claim("X.1", "FAIL", headline="FAIL"), claim("X.2", "PASS")])
    b = doc([claim("X.1", "PASS"), claim("X.2", "NOT_RUN")])
    assert main(["diff", str(write(tmp_path, "a", a)), str(write(tmp_path, "b", b))]) == 0
    out = capsys.readouterr().out
    assert "X.1: FAIL -> PASS" in out and "X.2: PASS -> NOT_RUN" in out and "WORSE" not in out
    assert "configs agree on profile, seed and prior" in out


def test_config_header_names_profile_and_prior_changes(tmp_path, capsys):
    a = doc([claim("X", "PASS")], profile="quick")
    b = doc([claim("X", "PASS")], profile="standard", prior="dirichlet(alpha=0.1)")
    assert main(["diff", str(write(tmp_path, "a", a)), str(write(tmp_path, "b", b))]) == 0
    assert "configs differ: profile quick -> standard; prior none -> dirichlet(alpha=0.1)" in capsys.readouterr().out


def test_json_format(tmp_path, capsys):
    a, b = pair()
    ra, rb = write(tmp_path, "a", a), write(tmp_path, "b", b)
    assert main(["diff", str(ra), str(rb), "--format", "json", "--z", "2.5"]) == 1
    out = json.loads(capsys.readouterr().out)  # strict: the "inf" values stay strings
    assert {"verdict_changes", "moved_numbers", "only_in_a", "only_in_b"} <= set(out)
    assert [c["id"] for c in out["verdict_changes"]] == ["X.1", "X.3"]
    assert {m["name"] for m in out["moved_numbers"]} == {"mc moved", "exact moved", "text moved"}
    assert out["only_in_a"][0]["id"] == "X.only_a" and out["only_in_b"][0]["id"] == "X.only_b"
    assert out["z"] == 2.5 and out["worse"] == ["X.1"]
    assert json.loads(render_json(diff_runs(a, b, z=2.5))) == out


def test_a_run_diffed_with_itself_is_empty(tmp_path, capsys):
    a, _ = pair()
    ra = write(tmp_path, "a", a)
    assert main(["diff", str(ra), str(ra)]) == 0
    out = capsys.readouterr().out
    assert out.count("(none)") == 4


def test_missing_folder_is_exit_2_with_one_line(tmp_path, capsys):
    ra = write(tmp_path, "a", pair()[0])
    assert main(["diff", str(ra), str(tmp_path / "nope")]) == 2
    cap = capsys.readouterr()
    assert cap.out == ""
    assert cap.err.count("\n") == 1 and "nope is not a folder" in cap.err and "Traceback" not in cap.err


@pytest.mark.parametrize("content,says", [
    ("{not json", "cannot be read as JSON"),
    (json.dumps({"schema": "other"}), "is not an icl-verify results file"),
    (json.dumps(doc([{"title": "no id"}])), "results.json: claims[0]: the key 'id' is missing"),
    (json.dumps(doc([{"id": "X", "verdict": "PASS", "tiers": [{"tier": "exact", "verdict": "PASS", "numbers": 3}]}])),
     "results.json: claims[0] (X).tiers[0].numbers: expected a list, got the number 3"),
])
def test_malformed_run_is_exit_2_with_one_line(tmp_path, capsys, content, says):
    ra = write(tmp_path, "a", pair()[0])
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "results.json").write_text(content)
    assert main(["diff", str(ra), str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and says in err and "Traceback" not in err
    if "claim" in says:
        assert str(bad) in err


def test_unfinished_run_is_exit_2(tmp_path, capsys):
    ra = write(tmp_path, "a", pair()[0])
    (tmp_path / "unfinished").mkdir()
    assert main(["diff", str(tmp_path / "unfinished"), str(ra)]) == 2
    assert "has no results.json" in capsys.readouterr().err


def test_bad_z_is_a_usage_error(tmp_path, capsys):
    ra = write(tmp_path, "a", pair()[0])
    with pytest.raises(SystemExit) as e:
        main(["diff", str(ra), str(ra), "--z", "-1"])
    assert e.value.code == 2
    assert "positive" in capsys.readouterr().err


def test_help_names_the_options(capsys):
    with pytest.raises(SystemExit) as e:
        main(["diff", "--help"])
    assert e.value.code == 0
    text = capsys.readouterr().out
    for word in ("RUN_A", "RUN_B", "--z", "--format", "exit codes"):
        assert word in text


def test_control_characters_in_titles_are_written_out():
    a = doc([claim("X", "PASS")])
    b = doc([claim("X", "FAIL", headline="FAIL \x1b[31mred")])
    assert "\\x1b[31mred" in render_text(diff_runs(a, b))


def test_the_combined_error_takes_each_runs_own_standard_error():
    """|0.25| against sqrt(0.01**2 + 0.1**2) = 0.1005: 2.49 combined s.e., inside z = 3, whichever run has the wide
    error bar; at z = 2 it moved, by that many s.e."""
    for se_a, se_b in ((0.01, 0.1), (0.1, 0.01)):
        a = doc([claim("X", "PASS", [("mc", [num("p", 0.50, se_a, "montecarlo")])])])
        b = doc([claim("X", "PASS", [("mc", [num("p", 0.75, se_b, "montecarlo")])])])
        assert moved_keys(diff_runs(a, b, z=3.0)) == set()
        m = diff_runs(a, b, z=2.0).moved_numbers
        assert len(m) == 1 and m[0].sigmas == pytest.approx(0.25 / 0.0101 ** 0.5)


def test_a_number_statistical_in_either_run_gets_the_statistical_test():
    # exact in A, Monte Carlo in B: 0.05 apart with s.e. 0.1 is noise, not a move beyond round-off
    a = doc([claim("X", "PASS", [("t", [num("p", 1.0, 0.0, "exact")])])])
    b = doc([claim("X", "PASS", [("t", [num("p", 1.05, 0.1, "montecarlo")])])])
    assert moved_keys(diff_runs(a, b)) == set() and diff_runs(a, b).numbers_compared == 1
    assert moved_keys(diff_runs(b, a)) == set()


def test_a_boolean_value_is_compared_as_text():
    """The module docstring: booleans are compared as strings, so true -> 1 moved and true -> true did not."""
    a = doc([claim("X", "PASS", [("exact", [num("flag", True), num("same", True)])])])
    b = doc([claim("X", "PASS", [("exact", [num("flag", 1), num("same", True)])])])
    moved = diff_runs(a, b).moved_numbers
    assert [(m.name, m.test) for m in moved] == [("flag", "text")]


def test_a_claim_only_in_one_run_is_listed_whatever_its_verdict():
    a = doc([claim("X", "PASS"), claim("A.nr", "NOT_RUN")])
    b = doc([claim("X", "PASS"), claim("B.nr", "NOT_RUN"), claim("B.err", "ERROR")])
    d = diff_runs(a, b)
    assert [(o.id, o.verdict) for o in d.only_in_a] == [("A.nr", "NOT_RUN")]
    assert [(o.id, o.verdict) for o in d.only_in_b] == [("B.nr", "NOT_RUN"), ("B.err", "ERROR")]


def test_the_header_compares_the_configurations_prior():
    a, b = doc([claim("X", "PASS")]), doc([claim("X", "PASS")])
    a["config"]["prior"], b["config"]["prior"] = "dirichlet(alpha=0.1)", "dirichlet(alpha=1)"
    del a["prior"], b["prior"]  # the config is where a run's prior is recorded
    assert diff_runs(a, b).config_changes == {"prior": ("dirichlet(alpha=0.1)", "dirichlet(alpha=1)")}
