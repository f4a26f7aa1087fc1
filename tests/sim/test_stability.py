"""benchmarks.stability: the verdict comparison across master seeds (the runs themselves are slow
and are not run here; their wiring is, with the subprocess replaced)."""
import json

import pytest

from benchmarks import stability


def _doc(verdicts: dict[str, str], used: dict[str, int] | None = None) -> dict:
    used = used or {}
    return {"claims": [{"id": c, "verdict": v, "tiers": [
        {"tier": "trained", "sequential": {"seeds used": used[c]} if c in used else None}]}
        for c, v in verdicts.items()]}


def test_same_verdict_everywhere_is_stable_and_a_pass_fail_flip_is_named():
    rows = stability.compare_runs({1: _doc({"A": "PASS", "B": "PASS", "C": "INCONCLUSIVE"}, {"A": 4}),
                                   2: _doc({"A": "PASS", "B": "FAIL", "C": "PASS"}, {"A": 8})})
    by = {r.claim: r for r in rows}
    assert by["A"].stable and by["A"].seeds_used == {1: "trained: 4", 2: "trained: 8"}
    assert not by["B"].stable and by["B"].flip
    assert not by["C"].stable and not by["C"].flip
    text = stability.render_markdown(rows, [1, 2], "quick", {1: 10.0, 2: 12.0})
    assert "NO: PASS/FAIL flip" in text and "| A | PASS (trained: 4 seeds) | PASS (trained: 8 seeds) | yes |" in text


def test_an_error_or_a_missing_claim_is_never_stable():
    rows = stability.compare_runs({1: _doc({"A": "ERROR", "B": "PASS"}), 2: _doc({"A": "ERROR"})})
    by = {r.claim: r for r in rows}
    assert not by["A"].stable and by["B"].verdicts[2] == "MISSING" and not by["B"].stable


@pytest.mark.parametrize("second, code", [("PASS", 0), ("FAIL", 1)])
def test_main_exits_1_when_a_claim_moves(tmp_path, monkeypatch, capsys, second, code):
    def fake_run(seed, args, out):
        (out / f"seed-{seed}").mkdir(parents=True)
        verdict = "PASS" if seed == 3 else second
        (out / f"seed-{seed}" / "results.json").write_text(json.dumps(_doc({"W.P2": verdict})))
        return seed, 1.0, 0

    monkeypatch.setattr(stability, "_run_one", fake_run)
    assert stability.main(["--seeds", "3", "4", "--out", str(tmp_path)]) == code
    assert (tmp_path / "stability.md").exists()
    saved = json.loads((tmp_path / "stability.json").read_text())
    assert saved["seeds"] == [3, 4] and saved["rows"][0]["stable"] is (code == 0)
