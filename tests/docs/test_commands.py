"""Every shell command shown in README.md and the docs pages works as written.

A page's ``sh`` blocks are its commands; a fenced block right after ``<!-- file: PATH -->`` is
a file the reader is asked to create. Each page runs in one bash session, in order, so files,
``cd`` and variables made earlier on the page persist: README.md and the pages about the
repository itself (``ROOT_PAGES``) in the repository root, a tutorial in a fresh empty folder
(so it may use nothing it does not create). The venv's
``bin`` is first on PATH, as after ``make setup``. Commands that are expensive by nature run at
a reduced budget from :data:`REDUCED`; ``make test`` (this suite) and ``make docs`` (built by
``test_build.py``) are not run again. Every ``icl-verify`` command shown is also parsed by the
real argument parser, the skipped and reduced ones included, so renaming a flag fails here.
"""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from sim.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^(`{3,}|~{3,})\s*(\S*)")
FILE_MARK = re.compile(r"^<!--\s*file:\s*(\S+)\s*-->\s*$")
PLACEHOLDER = re.compile(r"<[A-Za-z][\w-]*>")
TRAILING_COMMENT = re.compile(r"\s+#[^'\"]*$")  # ``cmd  # why``: the comment is not part of the command
FAILED = "@@icl-docs-command-failed"


@dataclass(frozen=True)
class Skip:
    """A command shown but not run here, and why."""

    reason: str


# (page, command as shown) -> the command run instead ({tmp}: a scratch folder), or Skip
REDUCED: dict[tuple[str, str], str | Skip] = {
    ("README.md", "make report"): "make report RUN_ARGS=\"--claims 'W.L1,N.K7' --out {tmp}/report\"",
    ("README.md", "make test"): Skip("it is this test suite"),
    ("README.md", "make docs"): Skip("tests/docs/test_build.py builds the docs with the same target"),
    ("docs/tutorials/report.md", "icl-verify run --profile quick"):
        "icl-verify run --profile quick --claims 'W.L1,N.K7' --out {tmp}/quick",
    ("docs/theory-and-sim.md", "icl-verify sweep --out sweeps/g1 --K 2,16,128,1024 --seeds 0,1,2 --set steps=1000"):
        "icl-verify sweep --out sweeps/g1 --K 2,1024 --seeds 0 --set steps=100 --workers 1",
    ("docs/theory-and-sim.md", "icl-verify sweep --out sweeps/e1 --preset edelman --seeds 0,1,2,3"):
        "icl-verify sweep --out sweeps/e1 --preset edelman --seeds 0 --set steps=100 --workers 1",
    ("docs/benchmarks.md", "make bench"): Skip("every benchmark at full size; the next command runs one"),
    ("docs/development.md", "make test"): Skip("it is this test suite"),
    ("docs/development.md", "make docs"): Skip("tests/docs/test_build.py builds the docs with the same target"),
    ("docs/development.md", "make mutate MUTATE_SCOPE='theory.markov.*'"):
        Skip("mutation testing runs the mirrored tests once per mutant: far beyond a test's budget"),
    ("docs/development.md", "make mutate-claims MUTATE_CLAIMS_SCOPE='sim.sequential.*'"):
        Skip("mutation testing runs the helpers' tests once per mutant: far beyond a test's budget"),
    ("docs/development.md", 'make report RUN_ARGS="--out reports/quick-release"'):
        "make report RUN_ARGS=\"--claims W.L1 --out {tmp}/release\"",
    # the paper profile: plans of one cheap claim, small runs, the cluster's commands on a LocalCluster
    ("docs/paper-profile.md", "icl-verify plan --profile paper"): "icl-verify plan --profile quick --claims N.K9",
    ("docs/paper-profile.md", "icl-verify plan --profile paper --claims 'W.E1,N.K1,N.K4' --jobs 4"):
        "icl-verify plan --profile quick --claims N.K9 --jobs 4",
    ("docs/paper-profile.md", "icl-verify run --profile paper --claims 'W.E1,N.K1,N.K4' --jobs 4 --out runs/paper"):
        "icl-verify run --claims 'W.L1,N.K7' --jobs 2 --out runs/paper",
    ("docs/paper-profile.md", "icl-verify plan --profile paper --device cuda"):
        "icl-verify plan --profile quick --claims N.K9 --device cpu",
    ("docs/paper-profile.md",
     "icl-verify run --profile paper --device cuda --claims 'N.E,N.K1,N.K4,W.E1' --out runs/paper-gpu"):
        Skip("needs a CUDA device; the tests marked cuda cover the GPU path"),
    ("docs/paper-profile.md", "pip install 'icl-causal-verify[cluster]' dask-jobqueue"):
        Skip("installs packages; the test environment has the cluster extra"),
    ("docs/paper-profile.md", "python start_cluster.py"): Skip("submits jobs to a SLURM queue"),
    ("docs/paper-profile.md", "icl-verify plan --profile paper --workers 64"):
        "icl-verify plan --profile quick --claims N.K9 --workers 64",
    ("docs/paper-profile.md",
     "icl-verify run --profile paper --executor dask --address tcp://10.0.0.5:8786 --out runs/paper-cluster"):
        "icl-verify run --claims W.L1 --executor dask-local --workers 1 --out runs/paper-cluster",
    ("docs/paper-profile.md",
     "icl-verify run --profile paper --claims 'N.K1,N.K4' --executor dask-local --workers 4 --out runs/paper-dask"):
        "icl-verify run --claims W.L1 --executor dask-local --workers 1 --out runs/paper-dask",
    ("docs/development.md", "python docs/_ext/release.py reports/quick-release"):
        Skip("it rewrites README.md, docs/release/summary.json and reports/release/; test_readme.py checks what it "
             "writes and runs its folder writer on a run of its own"),
}
# pages about the repository itself run in its root; tutorials run in an empty folder
ROOT_PAGES = {"README.md", "docs/development.md", "docs/benchmarks.md", "docs/mutation.md"}


@dataclass(frozen=True)
class Step:
    kind: str  # "cmd" or "file"
    text: str
    line: int
    path: str = ""


def pages() -> list[Path]:
    docs = [p for p in sorted((ROOT / "docs").rglob("*.md"))
            if not {"_build", "_generated", "release"} & set(p.relative_to(ROOT / "docs").parts)]
    return [ROOT / "README.md"] + docs


def steps(text: str) -> list[Step]:
    """The commands and files of a Markdown page, in order."""
    out: list[Step] = []
    lines = text.splitlines()
    i = 0
    pending_file = None
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            if lines[i].strip():
                fm = FILE_MARK.match(lines[i].strip())
                pending_file = fm.group(1) if fm else None
            i += 1
            continue
        fence, lang, start = m.group(1), m.group(2), i + 1
        body = []
        i += 1
        while i < len(lines) and not lines[i].startswith(fence):
            body.append(lines[i])
            i += 1
        i += 1  # the closing fence
        if pending_file:
            out.append(Step("file", "\n".join(body) + "\n", start, pending_file))
        elif lang == "sh":
            command, first = "", start
            for k, line in enumerate(body):
                if not command and (not line.strip() or line.lstrip().startswith("#")):
                    continue
                if not command:
                    first = start + k + 1
                command += line.strip()
                if command.endswith("\\"):
                    command = command[:-1].rstrip() + " "
                    continue
                out.append(Step("cmd", TRAILING_COMMENT.sub("", command), first))
                command = ""
        pending_file = None
    return out


def _page_id(page: Path) -> str:
    return str(page.relative_to(ROOT))


def _script(page: Path, tmp: Path) -> tuple[str, list[Step]]:
    lines, run = ["set -u"], []
    for step in steps(page.read_text()):
        if step.kind == "file":
            delimiter = "__ICL_DOCS_EOF__"
            lines.append(f"mkdir -p \"$(dirname {shlex.quote(step.path)})\"")
            lines.append(f"cat > {shlex.quote(step.path)} <<'{delimiter}'\n{step.text}{delimiter}")
            continue
        todo = REDUCED.get((_page_id(page), step.text), step.text)
        if isinstance(todo, Skip):
            continue
        run.append(step)
        lines.append(f"echo '>>> '{shlex.quote(step.text)}")
        lines.append(f"{{ {todo.format(tmp=tmp)}\n}} || {{ echo \"{FAILED} {len(run) - 1} rc=$?\"; exit 97; }}")
    return "\n".join(lines) + "\n", run


def _icl_argv(command: str) -> list[str] | None:
    """The arguments of an ``icl-verify`` command, up to the first pipe, redirection or separator."""
    try:
        tokens = shlex.split(command, comments=True)
    except ValueError:
        return None
    if not tokens or tokens[0] != "icl-verify":
        return None
    argv = []
    for t in tokens[1:]:
        if t in ("|", "||", "&&", ";", ">", ">>", "2>", "2>&1") or t.startswith((">", "|")):
            break
        argv.append(t)
    return argv


PAGES = pages()
ALL_STEPS = {_page_id(p): steps(p.read_text()) for p in PAGES}


def test_the_extractor_reads_commands_files_and_continuations():
    text = ("Intro\n\n```sh\n# a comment\nicl-verify list  # all claims\nicl-verify run --claims W.L1 \\\n  --budget 5\n```\n\n"
            "```text\nnot a command\n```\n\n<!-- file: a/b.py -->\n```python\nX = 1\n```\n\n```sh\nls a\n```\n")
    got = [(s.kind, s.text, s.path) for s in steps(text)]
    assert got == [("cmd", "icl-verify list", ""), ("cmd", "icl-verify run --claims W.L1 --budget 5", ""),
                   ("file", "X = 1\n", "a/b.py"), ("cmd", "ls a", "")]


def test_the_pages_show_commands():
    assert len(PAGES) >= 8
    assert sum(s.kind == "cmd" for s in ALL_STEPS["README.md"]) >= 3
    assert sum(s.kind == "cmd" for page in ALL_STEPS.values() for s in page) >= 15


def test_every_reduction_names_a_command_that_is_shown():
    shown = {(page, s.text) for page, page_steps in ALL_STEPS.items() for s in page_steps if s.kind == "cmd"}
    stale = [key for key in REDUCED if key not in shown]
    assert not stale, f"REDUCED names commands no page shows any more: {stale}"


def test_commands_are_written_to_be_run():
    bad = []
    for page, page_steps in ALL_STEPS.items():
        for s in page_steps:
            if s.kind == "cmd" and (s.text.startswith("$ ") or PLACEHOLDER.search(s.text)):
                bad.append(f"{page}:{s.line}: {s.text}")
            if s.kind == "file" and page in ROOT_PAGES:
                bad.append(f"{page}:{s.line}: this page runs in the repository root: a file would be written there")
    assert not bad, "commands with a prompt or a <placeholder>:\n" + "\n".join(bad)


@pytest.mark.parametrize("page", [p for p, s in ALL_STEPS.items() if any(x.kind == "cmd" for x in s)])
def test_every_icl_verify_command_parses(page):
    parser = build_parser()
    for s in ALL_STEPS[page]:
        argv = _icl_argv(s.text) if s.kind == "cmd" else None
        if argv is None or "--help" in argv or "-h" in argv:
            continue
        try:
            parser.parse_args(argv)
        except SystemExit:
            pytest.fail(f"{page}:{s.line}: `{s.text}` is refused by icl-verify's argument parser")


@pytest.mark.slow
@pytest.mark.parametrize("page", [p for p, s in ALL_STEPS.items() if any(x.kind == "cmd" for x in s)])
def test_page_commands_run_as_written(page, tmp_path):
    path = ROOT / page
    cwd = ROOT if page in ROOT_PAGES else tmp_path / "work"
    cwd.mkdir(exist_ok=True)
    script, run = _script(path, tmp_path)
    if not run:
        pytest.skip(f"{page}: every command is covered elsewhere")
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
               OMP_NUM_THREADS="1", MPLBACKEND="Agg")
    env.pop("VIRTUAL_ENV", None)
    proc = subprocess.run(["bash", "-c", script], cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        m = re.search(rf"{FAILED} (\d+) rc=(\d+)", proc.stdout)
        where = f"line {run[int(m.group(1))].line}: `{run[int(m.group(1))].text}` exited {m.group(2)}" if m else \
            f"the page's script exited {proc.returncode}"
        pytest.fail(f"{page}, {where}\n--- stdout (tail)\n{proc.stdout[-3000:]}\n--- stderr (tail)\n"
                    f"{proc.stderr[-3000:]}")
