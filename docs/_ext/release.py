"""The release run: a trimmed copy of a finished run's ``results.json`` that the docs show.

The claim catalogue and the README's verdict table both read ``docs/release/summary.json``, so
the verdicts a reader sees come from one run, named with its commit, profile and seed. To
refresh it after a release run::

    python docs/_ext/release.py reports/quick-seed0-<hash>

That rewrites ``summary.json`` and the table between the ``verdicts`` markers of ``README.md``;
``tests/docs/test_readme.py`` fails while the two disagree.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SUMMARY = ROOT / "docs" / "release" / "summary.json"
README = ROOT / "README.md"
START, END = "<!-- verdicts:start -->", "<!-- verdicts:end -->"


class ReleaseError(ValueError):
    """A run folder that cannot be a release run; the message names the file and why."""


def snapshot(run_dir: Path) -> dict:
    """The summary of the finished run in ``run_dir``: its identity, and per claim the verdict,
    headline, deciding number and findings (reading, kind, verdict, detail), numbers left out."""
    path = Path(run_dir) / "results.json"
    try:
        results = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ReleaseError(f"{path}: cannot be read as a run's results ({exc})") from None
    if not results.get("complete"):
        raise ReleaseError(f"{path}: the run did not finish; a release run must be complete")
    if str(results.get("git_commit", "")).endswith("+dirty"):
        raise ReleaseError(f"{path}: the run was made from a work tree with uncommitted changes "
                           f"({results['git_commit']}); run it from a clean clone")
    config = results["config"]
    findings: dict[str, list] = {}
    for f in results.get("findings", []):
        findings.setdefault(f["claim"], []).append(
            {key: f.get(key) for key in ("tier", "kind", "reading", "verdict", "detail")})
    claims = {}
    for entry in results["claims"]:
        claims[entry["id"]] = {
            "title": entry.get("title", ""),
            "verdict": entry["verdict"],
            "decided_by": entry.get("decided_by", ""),
            "headline": entry.get("headline", entry["verdict"]),
            "note": entry.get("note", ""),
            "findings": findings.get(entry["id"], []),
        }
    return {
        "run_id": results["run_id"],
        "git_commit": results["git_commit"],
        "created": results["created"],
        "profile": config["profile"],
        "seed": config["seed"],
        "elapsed_s": results.get("elapsed_s"),
        "summary": results["summary"],
        "versions": results.get("versions", {}),
        "claims": claims,
    }


def load(path: Path = SUMMARY) -> dict:
    """The committed release summary (an empty one when there is none yet)."""
    if not Path(path).exists():
        return {"claims": {}}
    return json.loads(Path(path).read_text())


def verdict_table(summary: dict) -> str:
    """The README's table: one row per claim of the release run, its verdict and its headline's findings."""
    lines = [f"Release run `{summary['run_id']}` (profile {summary['profile']}, master seed {summary['seed']}, "
             f"commit `{summary['git_commit'][:7]}`, {summary['created'][:10]}):", "",
             "| claim | verdict | what the report says beside it |", "|---|---|---|"]
    for cid, c in summary["claims"].items():
        extra = c["headline"].removeprefix(c["verdict"]).strip()
        if extra.startswith("(") and extra.endswith(")"):
            extra = extra[1:-1]
        if c["verdict"] == "NOT_RUN":  # the note says what decides it: "decided by the paper profile (...)"
            extra = c["note"].split(" (")[0].split(":")[0] or f"decided by the {c['decided_by']} profile"
        extra = extra.removeprefix("finding: ").removeprefix("findings: ").replace("|", "\\|")
        lines.append(f"| [{cid}](docs/catalogue.md) | {c['verdict']} | {extra} |")
    return "\n".join(lines)


def readme_block(readme: str) -> str:
    """The text between the verdict markers of ``readme``."""
    try:
        a = readme.index(START) + len(START)
        b = readme.index(END, a)
    except ValueError:
        raise ReleaseError(f"README.md lacks the markers {START} ... {END}") from None
    return readme[a:b].strip("\n")


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__)
        return 2
    try:
        summary = snapshot(Path(argv[0]))
        text = README.read_text()
        old = readme_block(text)
    except ReleaseError as exc:
        print(f"release: {exc}", file=sys.stderr)
        return 2
    SUMMARY.write_text(json.dumps(summary, indent=1, ensure_ascii=False) + "\n")
    README.write_text(text.replace(old, verdict_table(summary), 1))
    print(f"wrote {SUMMARY.relative_to(ROOT)} and the verdict table of README.md from {summary['run_id']}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
