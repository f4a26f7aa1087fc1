"""README.md stays short, its verdict table is the release run's, and its links lead somewhere."""
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "docs" / "_ext"))

import release  # noqa: E402

README = (ROOT / "README.md").read_text()
LINK = re.compile(r"\]\(([^)#\s]+)(#[^)]*)?\)")


def test_the_readme_is_short():
    assert len(README.splitlines()) <= 160


def test_the_verdict_table_is_the_release_runs():
    summary = release.load()
    assert summary["claims"], "docs/release/summary.json holds no claims"
    assert release.readme_block(README) == release.verdict_table(summary), \
        "README's verdict table differs from docs/release/summary.json: run python docs/_ext/release.py RUN_DIR"


def test_the_release_run_covers_the_catalogue():
    from sim.claims import all_claims

    summary = release.load()
    # the papers' claims (a plugin another test loaded in this process is not in a release run)
    assert list(summary["claims"]) == [c.id for c in all_claims() if c.source.paper in ("W", "N", "G", "E")]
    assert not summary["git_commit"].endswith("+dirty")


def test_a_changed_verdict_is_caught():
    summary = release.load()
    first = next(iter(summary["claims"]))
    summary["claims"][first] = dict(summary["claims"][first], verdict="FAIL", headline="FAIL")
    assert release.readme_block(README) != release.verdict_table(summary)


def test_relative_links_exist():
    missing = [target for target, _ in LINK.findall(README)
               if not target.startswith(("http://", "https://", "mailto:")) and not (ROOT / target).exists()]
    assert not missing, f"README links to files that do not exist: {missing}"


def test_the_prose_about_the_verdicts_matches_the_release_run():
    summary = release.load()["summary"]
    if "No claim FAILs" in README:
        assert summary["FAIL"] == 0 and summary["ERROR"] == 0
    if "INCONCLUSIVE in quick" in README:
        assert summary["INCONCLUSIVE"] >= 1
