"""Tests of the N placeholders (sim.claims.nichani.trained) and the N package's catalogue order."""
from sim.claims import get, select
from sim.runner import RunConfig, evaluate_claim
from sim.verdict import Verdict


def test_n_claims_are_registered_in_catalogue_order():
    assert [c.id for c in select("N.*")] == ["N.T", "N.K3", "N.K1", "N.K4", "N.K7", "N.K8", "N.K9", "N.K10", "N.E"]


def test_placeholders_are_not_run_and_say_where_they_are_decided(tmp_path):
    for cid, issue in (("N.K1", "#4"), ("N.K4", "#4"), ("N.E", "#4"), ("N.K10", "#5")):
        claim = get(cid)
        assert claim.checks == {} and claim.tiers == ()
        res = evaluate_claim(claim, RunConfig(profile="quick", seed=0), tmp_path)
        assert res.verdict is Verdict.NOT_RUN and issue in res.note and res.tiers == []
