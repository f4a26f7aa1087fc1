"""Claims evaluated side by side in lanes (sim.lanes): the same numbers as one after another, the
trained claims first, and a lane that dies ends only its own claim."""
import json
import textwrap

import pytest

from sim import claims as registry
from sim.cli import EXIT_INTERNAL, EXIT_OK, main
from sim.corpus import Corpus
from sim.lanes import lane_order, picklable
from sim.runner import RunConfig

PLUGIN = '''
import os

from sim.claims.base import Claim, Source
from sim.verdict import Outcome, TierResult, Verdict


def _ok(ctx):
    value = float(ctx.rng("value").random())
    ctx.progress(f"value {value}")
    return TierResult("exact", Verdict.PASS, Outcome.HELD, f"held at {value!r}")


def _dies(ctx):
    os._exit(3)  # a lane killed mid-claim (out of memory, a signal)


def claim(cid, check):
    return Claim(id=cid, title="a user claim", source=Source("U", "Lemma 1"), statement="a statement",
                 assumptions=(), checks={"exact": check}, settings={"quick": {"tiers": ("exact",)}})


CLAIMS = [claim("U.A", _ok), claim("U.DIES", _dies), claim("U.B", _ok), claim("U.C", _ok)]
'''


@pytest.fixture
def plugin(tmp_path):
    path = tmp_path / "lane_plugin.py"
    path.write_text(textwrap.dedent(PLUGIN))
    saved = (dict(registry._EXTRA), dict(registry._ORIGIN), dict(registry._DIGESTS))
    yield path
    for store, old in zip((registry._EXTRA, registry._ORIGIN, registry._DIGESTS), saved):
        store.clear()
        store.update(old)


def _results(out):
    return {c["id"]: c for c in json.loads((out / "results.json").read_text())["claims"]}


def _without_timings(doc):
    if isinstance(doc, dict):
        return {k: _without_timings(v) for k, v in doc.items() if k not in ("elapsed_s", "seconds")}
    if isinstance(doc, list):
        return [_without_timings(v) for v in doc]
    return doc


def test_lanes_give_the_numbers_one_process_gives_and_a_dead_lane_ends_only_its_claim(tmp_path, plugin, capsys):
    """The same plugin claims with 1 and 2 jobs: the same results, claim for claim, in catalogue
    order; the claim whose lane dies is ERROR, naming the exit code, and the others still run."""
    runs = {}
    for jobs in (1, 2):
        out = tmp_path / f"jobs{jobs}"
        args = ["run", "--no-progress", "--plugin", str(plugin), "--claims", "U.A,U.B,U.C", "--out", str(out),
                "--jobs", str(jobs)]
        assert main(args) == EXIT_OK
        runs[jobs] = _results(out)
    assert list(runs[2]) == ["U.A", "U.B", "U.C"]
    assert _without_timings(runs[1]) == _without_timings(runs[2])

    out = tmp_path / "dies"
    code = main(["run", "--no-progress", "--plugin", str(plugin), "--claims", "U.*", "--out", str(out), "--jobs", "2"])
    assert code == EXIT_INTERNAL
    res = _results(out)
    assert [res[c]["verdict"] for c in ("U.A", "U.DIES", "U.B", "U.C")] == ["PASS", "ERROR", "PASS", "PASS"]
    assert "exit code 3" in res["U.DIES"]["tiers"][0]["summary"]
    same = {k: v for k, v in _without_timings(res["U.B"]).items() if k != "config_hash"}  # --claims differs
    assert same == {k: v for k, v in _without_timings(runs[1]["U.B"]).items() if k != "config_hash"}
    assert "U.DIES" in capsys.readouterr().err


def test_trained_claims_go_first_and_a_claim_follows_the_one_whose_models_it_reuses():
    claims = registry.all_claims()
    by_id = {c.id: c for c in claims}
    units = [[claims[k].id for k in unit] for unit in lane_order(claims, "quick")]
    order = [cid for unit in units for cid in unit]
    assert sorted(order) == sorted(c.id for c in claims)
    # a unit is a claim and the claims that reuse its models (N.K4 evaluates N.K1's, W.E3 and W.E4 read W.E1's
    # runs, G.3 and G.4 G.1's models, G.7 G.2's runs), each after one it reuses; every other claim is alone
    for unit in (["N.K1", "N.K4"], ["W.E1", "W.E3", "W.E4"], ["G.1", "G.3", "G.4"], ["G.2", "G.7"]):
        assert unit in units
    for unit in units:
        assert all(set(by_id[cid].reuses) & set(unit[:i]) for i, cid in enumerate(unit) if i), unit
        assert len(unit) == 1 or by_id[unit[0]].id in ("N.K1", "W.E1", "G.1", "G.2")
    # the units whose head trains in quick come first, in catalogue order, then the rest in catalogue order
    trained = [c.id for c in claims if "trained" in c.tiers_for("quick")]
    heads = [unit[0] for unit in units]
    first = [h for h in heads if h in trained]
    assert first and heads == first + [h for h in heads if h not in trained]
    assert first == [c.id for c in claims if c.id in first] and heads[len(first):] == [
        c.id for c in claims if c.id in heads[len(first):]]
    # without the claims they reuse in the run, the reusers are units of their own (they train the models)
    alone = [c for c in claims if c.id not in ("N.K1", "W.E1", "G.1", "G.2")]
    assert all(len(unit) == 1 for unit in lane_order(alone, "quick"))


def test_a_prior_that_cannot_be_sent_to_a_lane_is_evaluated_in_this_process():
    assert picklable({"alpha": 0.1})
    assert not picklable(lambda pi: pi)


def test_a_lanes_corpus_counts_and_warnings_join_the_runs():
    config = RunConfig()
    mine, lane = Corpus("/nonexistent/c", config), Corpus("/nonexistent/c", config)
    mine.counts["stored"] += 1
    mine.warnings.append("w1")
    lane.counts["stored"] += 2
    lane.counts["replayed, still fails"] = lane.counts.get("replayed, still fails", 0) + 1
    lane.warnings.extend(["w1", "w2"])
    mine.absorb(lane)
    assert mine.counts["stored"] == 3 and mine.warnings == ["w1", "w2"]
