"""README.md stays short, its verdict table is the release run's, and its links lead somewhere."""
import json
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


# -- reports/release/: the release run's own report, committed -------------------------------------
RELEASE_DIR = ROOT / "reports" / "release"


def _table_verdicts() -> dict[str, str]:
    """claim id -> verdict, as the README's table shows them."""
    rows = re.findall(r"^\| \[([^\]]+)\]\([^)]*\) \| ([A-Z_]+) \|", release.readme_block(README), flags=re.M)
    return dict(rows)


def test_the_committed_release_report_has_the_readme_tables_verdicts():
    results = json.loads((RELEASE_DIR / "results.json").read_text())
    summary = release.load()
    assert results["run_id"] == summary["run_id"] and results["git_commit"] == summary["git_commit"]
    assert {c["id"]: c["verdict"] for c in results["claims"]} == _table_verdicts()
    assert f"`{results['run_id']}`" in (RELEASE_DIR / "report.md").read_text().splitlines()[0]


def test_the_committed_release_report_is_whole_small_and_relative():
    report = (RELEASE_DIR / "report.md").read_text()
    figures = release.linked_figures(report)
    assert figures, "the release report links no figure"
    assert all((RELEASE_DIR / f).is_file() for f in figures)
    assert sorted(p.relative_to(RELEASE_DIR).as_posix() for p in RELEASE_DIR.rglob("*") if p.is_file()) == \
        sorted(["report.md", "results.json", *figures])
    assert sum(p.stat().st_size for p in RELEASE_DIR.rglob("*") if p.is_file()) <= release.SIZE_LIMIT
    # every claim the table links to has its anchor in the report
    for cid in _table_verdicts():
        assert f'<a id="{cid.lower().replace(".", "")}"></a>' in report, cid


def test_release_folder_copies_what_report_md_links_and_nothing_else(tmp_path):
    from sim.cli import main

    run = tmp_path / "run"
    assert main(["run", "--claims", "W.T1", "--out", str(run), "--no-progress", "--jobs", "1"]) == 0
    (run / "figures" / "unlinked.png").write_bytes((run / "figures" / "W.T1-tv-vs-L.png").read_bytes())
    dest = tmp_path / "repo" / "reports" / "release"
    dest.mkdir(parents=True)
    (dest / "stale.txt").write_text("from the previous release")
    size = release.release_folder(run, dest)
    files = sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file())
    assert files == sorted(["report.md", "results.json", *release.linked_figures((run / "report.md").read_text())])
    assert "figures/unlinked.png" not in files and size == sum((dest / f).stat().st_size for f in files)
    assert json.loads((dest / "results.json").read_text()) == json.loads((run / "results.json").read_text())
    assert (dest / "report.md").read_text() == (run / "report.md").read_text()
    # a figure the report links but the run lacks is named, and the old folder is left as it was
    (run / "figures" / "W.T1-tv-vs-L.png").unlink()
    before = (dest / "report.md").read_text()
    try:
        release.release_folder(run, dest)
    except release.ReleaseError as exc:
        assert "figures/W.T1-tv-vs-L.png" in str(exc)
    else:
        raise AssertionError("a missing figure was not refused")
    assert (dest / "report.md").read_text() == before
