"""The release run: what the docs, the README and ``reports/release/`` show of one finished run.

The claim catalogue and the README's verdict table both read ``docs/release/summary.json`` (a
trimmed copy of the run's ``results.json``), and ``reports/release/`` holds the run's own
``report.md``, ``results.json`` and the figures ``report.md`` links, so that a reader of the
repository can read a whole report without running anything. All three come from one run,
named with its commit, profile and seed, and are refreshed by one command::

    python docs/_ext/release.py reports/quick-seed0-<hash>

It rewrites ``summary.json``, the table between the ``verdicts`` markers of ``README.md`` and the
folder ``reports/release/``; ``tests/docs/test_readme.py`` fails while they disagree. To keep the
folder small enough to commit (about 2 MB), ``results.json`` is written without indentation (the
same JSON) and each figure is re-encoded with a 256-colour palette; ``report.html`` (the figures
embedded), ``junit.xml``, ``run.json`` and the per-claim files ``results/<id>.json`` (which
``results.json`` repeats) are left out.
"""
from __future__ import annotations

import json
import re
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SUMMARY = ROOT / "docs" / "release" / "summary.json"
README = ROOT / "README.md"
#: The release run's report, committed: report.md, results.json and the figures report.md links.
RELEASE_DIR = ROOT / "reports" / "release"
#: What the committed folder should stay under (a warning beyond it, not a refusal).
SIZE_LIMIT = 2_000_000
#: A figure link in report.md: ``![caption](figures/NAME.png)``, relative to the run folder.
FIGURE_LINK = re.compile(r"!\[[^\]]*\]\((figures/[^)\s]+\.png)\)")
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
    lines = [f"Release run [`{summary['run_id']}`](reports/release/report.md) (profile {summary['profile']}, master "
             f"seed {summary['seed']}, commit `{summary['git_commit'][:7]}`, {summary['created'][:10]}):", "",
             "| claim | verdict | what the report says beside it |", "|---|---|---|"]
    for cid, c in summary["claims"].items():
        extra = c["headline"].removeprefix(c["verdict"]).strip()
        if extra.startswith("(") and extra.endswith(")"):
            extra = extra[1:-1]
        if c["verdict"] == "NOT_RUN":  # the note says what decides it: "decided by the paper profile (...)"
            extra = c["note"].split(" (")[0].split(":")[0] or f"decided by the {c['decided_by']} profile"
        extra = extra.removeprefix("finding: ").removeprefix("findings: ").replace("|", "\\|")
        lines.append(f"| [{cid}](reports/release/report.md#{cid.lower().replace('.', '')}) | {c['verdict']} | {extra} |")
    return "\n".join(lines)


def readme_block(readme: str) -> str:
    """The text between the verdict markers of ``readme``."""
    try:
        a = readme.index(START) + len(START)
        b = readme.index(END, a)
    except ValueError:
        raise ReleaseError(f"README.md lacks the markers {START} ... {END}") from None
    return readme[a:b].strip("\n")


def linked_figures(report_md: str) -> list[str]:
    """The figures ``report_md`` links (``figures/NAME.png``), each once, in order of first mention."""
    return list(dict.fromkeys(FIGURE_LINK.findall(report_md)))


def _palette_png(src: Path, dest: Path) -> None:
    """``src`` re-encoded with a 256-colour palette (matplotlib's line plots and heat maps lose nothing
    a reader sees; the file shrinks about threefold)."""
    from PIL import Image

    with Image.open(src) as im:
        im.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(dest, optimize=True)


def release_folder(run_dir: Path, dest: Path) -> int:
    """Write ``dest`` afresh from the finished run in ``run_dir``: its ``report.md``, its
    ``results.json`` (without indentation) and the figures ``report.md`` links (palette PNGs), and
    nothing else. Returns the folder's size in bytes. Raises :class:`ReleaseError` naming a missing
    file; ``dest`` is replaced only once the new folder is whole."""
    run_dir, dest = Path(run_dir), Path(dest)
    try:
        report = (run_dir / "report.md").read_text(encoding="utf-8")
        results = json.loads((run_dir / "results.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ReleaseError(f"{run_dir}: cannot read its report.md and results.json ({exc})") from None
    figures = linked_figures(report)
    missing = [f for f in figures if not (run_dir / f).is_file()]
    if missing:
        raise ReleaseError(f"{run_dir / 'report.md'} links figures that are not in the run folder: {', '.join(missing)}")
    dest.parent.mkdir(parents=True, exist_ok=True)
    build = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    try:
        (build / "report.md").write_text(report, encoding="utf-8")
        (build / "results.json").write_text(json.dumps(results, separators=(",", ":"), ensure_ascii=False) + "\n",
                                            encoding="utf-8")
        for f in figures:
            (build / f).parent.mkdir(parents=True, exist_ok=True)
            _palette_png(run_dir / f, build / f)
        size = sum(p.stat().st_size for p in build.rglob("*") if p.is_file())
        old = dest.with_name(f".{dest.name}.old")
        shutil.rmtree(old, ignore_errors=True)
        if dest.exists():
            dest.rename(old)
        build.rename(dest)
        shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(build, ignore_errors=True)
        raise
    return size


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
    try:
        size = release_folder(Path(argv[0]), RELEASE_DIR)
    except ReleaseError as exc:
        print(f"release: {exc}", file=sys.stderr)
        return 2
    SUMMARY.write_text(json.dumps(summary, indent=1, ensure_ascii=False) + "\n")
    README.write_text(text.replace(old, verdict_table(summary), 1))
    print(f"wrote {SUMMARY.relative_to(ROOT)}, the verdict table of README.md and {RELEASE_DIR.relative_to(ROOT)}/ "
          f"({size / 1e6:.2f} MB) from {summary['run_id']}")
    if size > SIZE_LIMIT:
        print(f"release: warning: {RELEASE_DIR.relative_to(ROOT)}/ is {size / 1e6:.2f} MB, over the "
              f"{SIZE_LIMIT / 1e6:.0f} MB it should stay under", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
