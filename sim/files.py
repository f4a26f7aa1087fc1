"""Files a run writes and reads: atomic writes, strict JSON, a run folder's ``run.json``; and a
user's Python file (a claim plugin, a prior sampler) loaded as a module.

Kept apart from the runner so that the report, the sweep, the corpus and the CLI can write
and read results without importing the runner (and the runner can call the report).
"""
from __future__ import annotations

import errno
import hashlib
import importlib.util
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Sequence

from sim.verdict import Verdict

__all__ = ["RUN_SCHEMA", "RunError", "RunEnvironmentError", "environment_failure", "dump_json", "atomic_write_text",
           "read_run_json", "claim_counts", "load_user_file"]

#: Marks a folder as an icl-verify run (in its run.json): the only non-empty folder a run writes into.
RUN_SCHEMA = "icl-verify/run/v1"


class RunError(RuntimeError):
    """A run could not start (bad configuration, a resume that does not match)."""


#: What an OSError's errno says when the machine, not the run, failed: a full disk or quota, a folder
#: that became read-only or unwritable.
ENVIRONMENT_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM})


class RunEnvironmentError(RunError):
    """The run's environment failed while it ran: a full disk, an output folder that became
    unwritable, a lost Dask scheduler. ``where`` names the file, folder or address; what had
    finished (claims, training jobs) is on disk, so ``--resume`` continues once it is fixed."""

    def __init__(self, where: str, detail: str):
        super().__init__(where, detail)
        self.where, self.detail = str(where), str(detail)

    def __str__(self) -> str:
        return f"{self.detail}: {self.where}"


def environment_failure(exc: BaseException, where: str | os.PathLike | None = None) -> RunEnvironmentError | None:
    """``exc`` as a :class:`RunEnvironmentError` when it is one (or an ``OSError`` whose errno is in
    :data:`ENVIRONMENT_ERRNOS`, naming its file, else ``where``), else None: a bug or a check's own error."""
    if isinstance(exc, RunEnvironmentError):
        return exc
    if isinstance(exc, OSError) and exc.errno in ENVIRONMENT_ERRNOS:
        named = exc.filename if exc.filename is not None else where if where is not None else "the run folder"
        return RunEnvironmentError(str(named), exc.strerror or os.strerror(exc.errno))
    return None


def dump_json(obj) -> str:
    """Strict JSON (no NaN or Infinity: ``to_jsonable`` writes them as strings first)."""
    return json.dumps(obj, indent=2, allow_nan=False)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so a reader (or a killed run) never sees half a file. An
    ``OSError`` (e.g. a full disk) names ``path`` when the system call named none.

    The file gets the usual permissions (0666 less the umask), like the figures beside it,
    not mkstemp's private 0600."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        if os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(exc, OSError) and exc.filename is None:
            exc.filename = str(path)  # a full disk fails the write, which names no file: say which
        raise


def read_run_json(out_dir: Path) -> dict | None:
    """The run.json of an icl-verify run folder, or None when ``out_dir`` holds none.

    A run.json that does not parse, or that lacks a run's keys, is an error: the folder is
    then neither a run nor free to use."""
    path = Path(out_dir) / "run.json"
    if not path.exists():
        return None
    try:
        doc = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RunError(f"{path} is not a run's run.json ({exc}); nothing was written. Use another --out") from None
    if not isinstance(doc, dict) or not {"run_id", "config", "config_hash"} <= set(doc):
        raise RunError(f"{path} is not an icl-verify run.json (it lacks run_id, config or config_hash); nothing was "
                       "written. Use another --out")
    return doc


def claim_counts(dicts: Sequence[dict]) -> dict[str, int]:
    """How many claims got each verdict (every verdict present, 0 when none)."""
    counts = {v.value: 0 for v in Verdict}
    for d in dicts:
        counts[d["verdict"]] += 1
    return counts


def load_user_file(path: Path, kind: str):
    """Run a user's Python file as a module named after its resolved path and ``kind`` (``plugin``,
    ``sampler``), registered in ``sys.modules`` so that pickling its functions works.

    Raises ``FileNotFoundError`` when there is no such file and ``ImportError`` (saying what the
    file raised, in one line) when it cannot be run; the callers turn these into their own errors.
    """
    path = Path(path).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist")
    digest = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:16]
    name = f"icl_verify_{kind}_{digest}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path} cannot be loaded as Python")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # the user's code: its error is an input error, said in one line
        sys.modules.pop(name, None)
        raise ImportError(f"running it raised {type(exc).__name__}: {exc}") from exc
    return module
