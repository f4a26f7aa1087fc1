"""Files a run writes and reads: atomic writes, strict JSON, a run folder's ``run.json``; and a
user's Python file (a claim plugin, a prior sampler) loaded as a module.

Kept apart from the runner so that the report, the sweep, the corpus and the CLI can write
and read results without importing the runner (and the runner can call the report).

Every run file is read back through one loader, which checks its shape before any reader
sees it: :func:`read_results` (a finished run's ``results.json``: ``show``, ``diff``,
``list``, LaTeX), :func:`read_run_json` (``run.json``: ``--resume`` and every run into an
existing folder) and :func:`read_claim_result` (``results/<id>.json``: ``--resume``). A file
that is not what this tool writes is a :class:`RunFileError` naming the file and the key,
e.g. ``r/results.json: claims[2] (W.L1).tiers[0].numbers[1].value: expected a number, a
string, true/false or null, got a list``. The text itself goes through :func:`read_text`
(a regular file, at most a size limit, UTF-8) and :func:`parse_json` (strict JSON, at most
:data:`MAX_JSON_DEPTH` levels of nesting), which the graph files share.
"""
from __future__ import annotations

import errno
import hashlib
import importlib.util
import json
import os
import stat
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, Sequence

from sim.verdict import Verdict

__all__ = ["RUN_SCHEMA", "RESULTS_SCHEMA", "MAX_JSON_DEPTH", "MAX_RUN_FILE_BYTES", "RunError", "RunFileError",
           "RunEnvironmentError", "environment_failure", "UserCodeError", "JSONTextError", "dump_json",
           "atomic_write_text", "read_text", "parse_json", "json_depth", "read_run_json", "read_results",
           "read_claim_result", "check_results", "check_claim_result", "claim_counts", "load_user_file",
           "call_user_code", "describe_exception"]

#: Marks a folder as an icl-verify run (in its run.json): the only non-empty folder a run writes into.
RUN_SCHEMA = "icl-verify/run/v1"
#: The schema tag of a finished run's results.json (docs/results.md).
RESULTS_SCHEMA = "icl-verify/results/v1"
#: The deepest nesting of arrays and objects in a JSON file this tool reads (results.json, run.json,
#: results/<id>.json, graph files). Its own files nest about 12 deep; Python's recursion limit is 1000.
MAX_JSON_DEPTH = 64
#: The largest run file read back (a whole paper-profile results.json is a few MB).
MAX_RUN_FILE_BYTES = 256 * 2**20


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
    ``ENVIRONMENT_ERRNOS``, naming its file, else ``where``), else None: a bug or a check's own error."""
    if isinstance(exc, RunEnvironmentError):
        return exc
    if isinstance(exc, OSError) and exc.errno in ENVIRONMENT_ERRNOS:
        named = exc.filename if exc.filename is not None else where if where is not None else "the run folder"
        return RunEnvironmentError(str(named), exc.strerror or os.strerror(exc.errno))
    return None
class RunFileError(RunError, ValueError):
    """A run file (results.json, run.json or results/<id>.json) that cannot be read, or that is not
    what this tool writes; the message names the file and the key."""


class UserCodeError(ValueError):
    """A user's Python file or function (a claim plugin, a prior sampler) that raised or exited
    while it was loaded or called; the message names the file and the function."""


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
    not mkstemp's private 0600. Text that is not UTF-8 (a file name's bytes, as Python keeps
    them in a path the report names) is written with backslash escapes."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace") as fh:
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


def read_text(path: Path, *, max_bytes: int, what: str = "file") -> str:
    """The UTF-8 text of the regular file ``path``, at most ``max_bytes`` long.

    Raises ``FileNotFoundError`` when there is nothing at ``path`` (a dangling link included) and
    ``ValueError`` naming the path for a folder, a device or pipe (which could block or never
    end), a file larger than ``max_bytes``, one that cannot be read, and bytes that are not UTF-8."""
    path = Path(path)
    try:
        st = path.stat()
    except FileNotFoundError:
        raise FileNotFoundError(f"{path} does not exist") from None
    except (OSError, ValueError) as exc:  # a link loop, a name too long, a NUL byte
        raise ValueError(f"{path}: cannot read the {what} ({getattr(exc, 'strerror', None) or exc})") from None
    if stat.S_ISDIR(st.st_mode):
        raise ValueError(f"{path} is a folder, not a {what}")
    if not stat.S_ISREG(st.st_mode):
        raise ValueError(f"{path} is not a regular file (a device, pipe or socket), not a {what}")
    if st.st_size > max_bytes:
        raise ValueError(f"{path} is {_size(st.st_size)}, more than the {_size(max_bytes)} this tool reads as a {what}")
    try:
        with open(path, "rb") as fh:
            data = fh.read(max_bytes + 1)
    except OSError as exc:
        raise ValueError(f"{path}: cannot read the {what} ({exc.strerror or exc})") from None
    if len(data) > max_bytes:
        raise ValueError(f"{path} is more than the {_size(max_bytes)} this tool reads as a {what}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: byte {exc.start} is not UTF-8 text; the {what} must be UTF-8") from None


def _size(n: int) -> str:
    return f"{n} bytes" if n < 2**20 else f"{n / 2**20:.1f} MiB"


def json_depth(doc, limit: int | None = None) -> int:
    """How deeply ``doc`` nests lists and dicts (a scalar is 0, ``[]`` is 1), counted without
    recursion; with ``limit``, counting stops at the first level beyond it."""
    deepest, stack = 0, [(doc, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict):
            value = list(value.values())
        elif not isinstance(value, list):
            continue
        deepest = max(deepest, depth)
        if limit is not None and deepest > limit:
            return deepest
        stack.extend((v, depth + 1) for v in value if isinstance(v, (list, dict)))
    return deepest


class JSONTextError(ValueError):
    """Text that is not the JSON this tool reads; ``where`` is the file (or label), ``detail`` what is wrong."""

    def __init__(self, where: str, detail: str):
        super().__init__(f"{where}: {detail}")
        self.where, self.detail = where, detail


def parse_json(text: str, where: str, *, max_depth: int = MAX_JSON_DEPTH, strict: bool = True):
    """``text`` parsed as JSON, at most ``max_depth`` levels of arrays and objects deep; ``strict``
    refuses ``NaN`` and ``Infinity`` (this tool writes them as strings). :class:`JSONTextError`
    (a ValueError starting with ``where``, a file's path or a label) otherwise: the line and column
    of a syntax error, or the depth."""
    def refuse(name):
        raise ValueError(f"it holds {name}, which is not JSON (a value that is not finite is written as a string)")

    deep = f"nests arrays or objects more than {max_depth} levels deep"
    try:
        doc = json.loads(text, parse_constant=refuse if strict else None)
    except json.JSONDecodeError as exc:
        raise JSONTextError(where, f"line {exc.lineno}, column {exc.colno}: not JSON ({exc.msg})") from None
    except RecursionError:
        raise JSONTextError(where, deep) from None
    except ValueError as exc:  # NaN under strict, an integer of more than 4300 digits
        raise JSONTextError(where, f"not JSON this tool reads ({exc})") from None
    if json_depth(doc, max_depth) > max_depth:
        raise JSONTextError(where, deep)
    return doc


def _read_json_file(path: Path, what: str):
    """A run file's JSON (``FileNotFoundError`` when absent; RunFileError naming it otherwise)."""
    try:
        text = read_text(path, max_bytes=MAX_RUN_FILE_BYTES, what=what)
    except FileNotFoundError:
        raise
    except ValueError as exc:
        raise RunFileError(str(exc)) from None
    try:
        return parse_json(text, str(path))
    except JSONTextError as exc:
        raise RunFileError(f"{path} cannot be read as JSON ({exc.detail})") from None


# ------------------------------------------------------------------------------ shapes --
# A small schema language, so that every reader of a run file sees the shape it indexes:
# a _Kind (a scalar test), _List, _Map (str keys), _Obj (required and optional keys), _Either.
class _Shape(Exception):
    def __init__(self, where: str, problem: str):
        super().__init__(f"{where}: {problem}" if where else problem)


def _describe(v) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int) and abs(v) > sys.float_info.max:
        return f"an integer too large for a float ({len(str(abs(v)))} digits)"
    if isinstance(v, (int, float)):
        return f"the number {v!r}"
    if isinstance(v, str):
        return f"the string {v[:40]!r}" + ("..." if len(v) > 40 else "")
    return "a list" if isinstance(v, list) else "an object"


class _Kind:
    def __init__(self, name: str, test: Callable[[Any], bool]):
        self.name, self.test = name, test

    def check(self, v, where):
        if not self.test(v):
            raise _Shape(where, f"expected {self.name}, got {_describe(v)}")


def _is_number(v) -> bool:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    return abs(v) <= sys.float_info.max  # a float from strict JSON is finite; an integer may not fit one


_ANY = _Kind("any JSON value", lambda v: True)
_STR = _Kind("a string", lambda v: isinstance(v, str))
_INT = _Kind("an integer", lambda v: isinstance(v, int) and not isinstance(v, bool) and _is_number(v))
_NUM = _Kind("a number", _is_number)
_OPT_STR = _Kind("a string or null", lambda v: v is None or isinstance(v, str))
_OPT_NUM = _Kind("a number or null", lambda v: v is None or _is_number(v))
_OPT_BOOL = _Kind("true, false or null", lambda v: v is None or isinstance(v, bool))
#: A number's value, standard error, n, seed, tolerance: finite numbers, "inf"/"nan" strings, null.
_VALUE = _Kind("a number, a string, true/false or null",
                lambda v: v is None or isinstance(v, (str, bool)) or _is_number(v))
_VERDICT = _Kind(f"a verdict ({', '.join(v.value for v in Verdict)})",
                 lambda v: isinstance(v, str) and v in {x.value for x in Verdict})


class _List:
    def __init__(self, item, label: Callable[[Any], str | None] | None = None):
        self.item, self.label = item, label

    def check(self, v, where):
        if not isinstance(v, list):
            raise _Shape(where, f"expected a list, got {_describe(v)}")
        for k, x in enumerate(v):
            name = self.label(x) if self.label is not None and isinstance(x, dict) else None
            self.item.check(x, f"{where}[{k}]" + (f" ({name})" if isinstance(name, str) and name else ""))


class _Map:
    def __init__(self, value):
        self.value = value

    def check(self, v, where):
        if not isinstance(v, dict):
            raise _Shape(where, f"expected an object, got {_describe(v)}")
        for k, x in v.items():
            self.value.check(x, f"{where}.{k}" if where else k)


class _Obj:
    def __init__(self, required: dict, optional: dict | None = None):
        self.required, self.optional = required, optional or {}

    def check(self, v, where):
        if not isinstance(v, dict):
            raise _Shape(where, f"expected an object, got {_describe(v)}")
        for key, spec in self.required.items():
            if key not in v:
                raise _Shape(where, f"the key {key!r} is missing")
        for key, spec in (*self.required.items(), *self.optional.items()):
            if key in v:
                spec.check(v[key], f"{where}.{key}" if where else key)

    def extended(self, required: dict, optional: dict | None = None) -> "_Obj":
        opt = {k: s for k, s in self.optional.items() if k not in required}
        return _Obj({**self.required, **required}, {**opt, **(optional or {})})


class _Either:
    def __init__(self, *specs, name: str):
        self.specs, self.name = specs, name

    def check(self, v, where):
        for spec in self.specs:
            try:
                spec.check(v, where)
                return
            except _Shape:
                continue
        raise _Shape(where, f"expected {self.name}, got {_describe(v)}")


class _Null:
    def check(self, v, where):
        if v is not None:
            raise _Shape(where, f"expected null, got {_describe(v)}")


def _maybe(spec, name: str):
    return _Either(_Null(), spec, name=name)


def _claim_id(x) -> str | None:
    return x.get("id") if isinstance(x.get("id"), str) else None


_PAIR = _Kind("a [parent, child] pair of integers",
              lambda v: isinstance(v, list) and len(v) == 2 and all(isinstance(x, int) and not isinstance(x, bool)
                                                                    and 0 <= x < 2**31 for x in v))
_GRAPH = _Obj({"name": _STR, "nodes": _INT, "edges": _List(_PAIR)})
_NUMBER = _Obj({"name": _STR, "value": _VALUE},
               {"stderr": _VALUE, "n": _VALUE, "seed": _VALUE, "tolerance": _VALUE, "kind": _OPT_STR,
                "note": _OPT_STR, "df": _VALUE})
_FINDING = _Obj({"verdict": _STR, "detail": _STR},
                {"kind": _STR, "reading": _STR, "numbers": _List(_NUMBER), "counterexample": _ANY, "witness": _ANY})
_TIER = _Obj({"tier": _STR, "verdict": _STR},
             {"summary": _STR, "numbers": _List(_NUMBER), "findings": _List(_FINDING), "elapsed_s": _NUM,
              "counterexample": _ANY, "controls": _List(_ANY), "figures": _List(_STR), "error": _OPT_STR})
_CLAIM = _Obj({"id": _STR, "verdict": _STR, "tiers": _List(_TIER)},
              {"title": _STR, "source": _STR, "headline": _OPT_STR, "note": _STR, "decided_by": _STR,
               "tiers_supported": _List(_STR), "elapsed_s": _NUM, "graph": _maybe(_Map(_ANY), "an object or null"),
               "seed": _VALUE, "config_hash": _STR, "statement": _STR, "paper": _STR})
#: A claim as a run writes it to results/<id>.json: every key the reports index (the resumed run
#: renders it into report.md, report.html and junit.xml).
_FULL_NUMBER = _NUMBER.extended({"stderr": _VALUE, "n": _VALUE, "seed": _VALUE, "tolerance": _VALUE, "kind": _STR})
_FULL_FINDING = _FINDING.extended({"kind": _STR, "reading": _STR}, {"numbers": _List(_FULL_NUMBER)})
_FULL_TIER = _TIER.extended(
    {"verdict": _VERDICT, "summary": _STR, "elapsed_s": _NUM, "assumptions": _List(_Obj(
        {"name": _STR, "holds": _OPT_BOOL, "detail": _STR}, {"numbers": _List(_FULL_NUMBER)})),
     "numbers": _List(_FULL_NUMBER)},
    {"findings": _List(_FULL_FINDING), "readings": _List(_Map(_ANY)),
     "controls": _List(_Obj({"name": _STR, "mechanism": _STR, "verdict": _STR, "deciding": _STR})),
     "corpus": _List(_Obj({"status": _STR, "file": _STR, "detail": _STR})),
     "sequential": _maybe(_Obj({"seeds used": _ANY, "stop": _STR, "correction": _STR, "planned looks": _ANY,
                                "z per look": _NUM}, {"looks": _List(_Obj({"seeds": _ANY, "outcome": _ANY}))}),
                          "a sequential record or null"),
     "conclusion_without_assumptions": _OPT_STR, "budget": _OPT_STR})
_FULL_CLAIM = _CLAIM.extended(
    {"verdict": _VERDICT, "tiers": _List(_FULL_TIER), "title": _STR, "paper": _STR, "source": _STR, "statement": _STR,
     "tiers_supported": _List(_STR), "decided_by": _STR, "seed": _VALUE, "config_hash": _STR, "elapsed_s": _NUM,
     "note": _STR},
    {"primary_reading": _Either(_Kind("an empty object", lambda v: v == {}),
                                _Obj({"statement": _STR, "cite": _STR}, {"setting": _OPT_STR, "review": _OPT_STR}),
                                name="an empty object or one with statement and cite"),
     "graph": _maybe(_GRAPH.extended({}, {"settings": _Map(_ANY), "replaces": _OPT_STR, "size_note": _OPT_STR,
                                           "figure": _OPT_STR}), "a graph record or null")})
_CONFIG = _Obj({"profile": _STR, "seed": _INT, "device": _STR},
               {"claims": _STR, "z": _NUM, "prior": _OPT_STR, "graph": _maybe(_GRAPH, "a graph record or null"),
                "overrides": _Map(_Map(_ANY)), "plugins": _Map(_STR)})
_AUDIT = _Obj({"spec": _STR, "dims": _List(_INT), "n_draws": _INT, "seed": _INT, "graphs": _List(_Obj({"name": _STR})),
               "assumptions": _List(_Obj({"key": _STR, "name": _STR, "source": _STR, "status": _STR, "how": _STR,
                                          "findings": _List(_Obj({"status": _STR, "where": _STR, "summary": _STR})),
                                          "necessity": _STR, "necessity_detail": _STR}))},
              {"gamma_table": _List(_Obj({"d": _ANY, "gamma": _OPT_NUM, "limited_by": _OPT_STR},
                                         {"graph": _STR}))})
_RESULTS = _Obj({"schema": _STR, "run_id": _STR, "config": _CONFIG, "summary": _Map(_INT),
                 "claims": _List(_CLAIM, label=_claim_id)},
                {"complete": _ANY, "created": _OPT_STR, "config_hash": _OPT_STR, "prior": _OPT_STR,
                 "git_commit": _OPT_STR, "platform": _OPT_STR, "elapsed_s": _OPT_NUM, "versions": _Map(_ANY),
                 "findings": _List(_Map(_ANY)), "audit": _maybe(_AUDIT, "a prior audit or null"),
                 "seeds": _ANY})
#: run.json: what --resume reads the run's settings from (RunConfig.as_dict()).
_BUDGET = _Kind("an integer >= 0", lambda v: isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 2**63)
_RUN_CONFIG = _CONFIG.extended({"claims": _STR, "prior": _OPT_STR, "z": _NUM,
                                "overrides": _Map(_Obj({}, {"max_examples": _BUDGET})), "plugins": _Map(_STR)})
_RUN = _Obj({"run_id": _STR, "config": _RUN_CONFIG, "config_hash": _STR},
            {"schema": _STR, "started": _OPT_STR, "claims": _List(_STR)})


def _shape(doc, spec, path: Path, advice: str) -> None:
    try:
        spec.check(doc, "")
    except _Shape as exc:
        raise RunFileError(f"{path}: {exc}; {advice}") from None


_REWRITE = "it is not a file this tool wrote: rerun the claims to rewrite it"


def check_results(doc, path: Path) -> dict:
    """``doc`` (the parsed ``path``) if it has the shape of a finished run's results.json that
    ``show``, ``diff`` and ``list`` read (docs/results.md); else a :class:`RunFileError` naming
    ``path`` and the key. Keys a reader may go without are optional (runs written by earlier
    versions lack some); each claim id appears once."""
    if not isinstance(doc, dict) or doc.get("schema") != RESULTS_SCHEMA:
        raise RunFileError(f"{path} is not an icl-verify results file (schema {RESULTS_SCHEMA}); rerun the claims "
                           "to rewrite it")
    _shape(doc, _RESULTS, path, _REWRITE)
    seen = set()
    for k, c in enumerate(doc["claims"]):
        if c["id"] in seen:
            raise RunFileError(f"{path}: claims[{k}]: claim {c['id']} appears twice; {_REWRITE}")
        seen.add(c["id"])
    return doc


def check_claim_result(doc, path: Path) -> dict:
    """``doc`` (the parsed ``path``) if it is one claim's result as a run writes it to
    ``results/<id>.json`` (every key the reports render); else a :class:`RunFileError`."""
    _shape(doc, _FULL_CLAIM, path, "a resumed run evaluates that claim again")
    return doc


def read_results(run_dir: Path) -> dict:
    """The results.json of the finished run in ``run_dir``, its shape checked (:func:`check_results`).

    ``FileNotFoundError`` when ``run_dir`` is not a folder, or holds no results.json (an unfinished
    run: the message gives the command that resumes it); :class:`RunFileError` when the file cannot
    be read or has the wrong shape."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise FileNotFoundError(f"{run_dir} is not a folder (run folders are made by icl-verify run --out DIR; "
                                f"the default is reports/<run-id>)")
    path = run_dir / "results.json"
    if not path.exists() and not path.is_symlink():
        partial = sorted((run_dir / "results").glob("*.json")) if (run_dir / "results").is_dir() else []
        try:  # the plugins the run loaded must be loaded again to resume it
            run_doc = read_run_json(run_dir) or {}
        except RunError:
            run_doc = {}
        plugins = "".join(f" --plugin {p}" for p in run_doc.get("config", {}).get("plugins", {}))
        hint = (f" ({len(partial)} claims finished; resume with icl-verify run --resume --out {run_dir}{plugins})"
                if partial else "")
        raise FileNotFoundError(f"{run_dir} has no results.json: the run did not finish{hint}")
    try:
        doc = _read_json_file(path, "results file")
    except FileNotFoundError as exc:  # a dangling link
        raise RunFileError(f"{path}: {exc}") from None
    except RunFileError as exc:
        raise RunFileError(f"{exc}; rerun the claims to rewrite it") from None
    return check_results(doc, path)


def read_run_json(out_dir: Path) -> dict | None:
    """The run.json of an icl-verify run folder, its shape checked, or None when ``out_dir`` holds none.

    A run.json that does not parse, or that lacks a run's keys or has them of the wrong type, is
    a :class:`RunFileError` naming the file and the key: the folder is then neither a run nor
    free to use."""
    path = Path(out_dir) / "run.json"
    if not path.exists() and not path.is_symlink():
        return None
    advice = "nothing was written. Use another --out"
    try:
        doc = _read_json_file(path, "run.json")
    except FileNotFoundError as exc:
        raise RunFileError(f"{path}: {exc}; {advice}") from None
    except RunFileError as exc:
        raise RunFileError(f"{exc} (it is not a run's run.json); {advice}") from None
    if not isinstance(doc, dict) or not {"run_id", "config", "config_hash"} <= set(doc):
        raise RunFileError(f"{path} is not an icl-verify run.json (it lacks run_id, config or config_hash); {advice}")
    _shape(doc, _RUN, path, advice)
    return doc


def read_claim_result(path: Path) -> dict | None:
    """One claim's saved result (``results/<id>.json``), or None when it is absent. A file that
    cannot be read or is not a whole claim result is a :class:`RunFileError` (a resumed run
    evaluates that claim again)."""
    path = Path(path)
    if not path.exists() and not path.is_symlink():
        return None
    try:
        doc = _read_json_file(path, "claim result")
    except FileNotFoundError as exc:
        raise RunFileError(f"{path}: {exc}") from None
    return check_claim_result(doc, path)


def claim_counts(dicts: Sequence[dict]) -> dict[str, int]:
    """How many claims got each verdict (every verdict present, 0 when none)."""
    counts = {v.value: 0 for v in Verdict}
    for d in dicts:
        counts[d["verdict"]] += 1
    return counts


def load_user_file(path: Path, kind: str):
    """Run a user's Python file as a module named after its resolved path and ``kind`` (``plugin``,
    ``sampler``), registered in ``sys.modules`` so that pickling its functions works.

    Raises ``FileNotFoundError`` when there is no such file and :class:`UserCodeError` (saying what
    the file raised, or that it exited, in one line) when it cannot be run; the callers turn these
    into their own errors. A Ctrl-C while it runs still interrupts.
    """
    path = Path(path).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist" if not path.exists() else f"{path} is not a file")
    digest = hashlib.sha256(str(path.resolve()).encode("utf-8", "surrogateescape")).hexdigest()[:16]
    name = f"icl_verify_{kind}_{digest}"
    try:
        spec = importlib.util.spec_from_file_location(name, path)
    except (ValueError, OSError) as exc:
        raise UserCodeError(f"{path} cannot be loaded as Python ({exc})") from None
    if spec is None or spec.loader is None:
        raise UserCodeError(f"{path} cannot be loaded as Python (its name should end in .py)")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        call_user_code(spec.loader.exec_module, module, what="running it")
    except UserCodeError:
        sys.modules.pop(name, None)
        raise
    return module


#: The most characters of a user's error message repeated in ours (it stays one line).
_MAX_USER_MESSAGE = 300


def describe_exception(exc: BaseException) -> str:
    """What user code did, in one line: ``raised ValueError: bad row`` or ``called sys.exit(0)``."""
    try:
        if isinstance(exc, SystemExit):
            return f"called sys.exit({exc.code!r})"
        text = " ".join(str(exc).split())
    except Exception:  # an exception whose own str or repr raises
        text = "(its message cannot be printed)"
    if len(text) > _MAX_USER_MESSAGE:
        text = text[:_MAX_USER_MESSAGE - 3] + "..."
    return f"raised {type(exc).__name__}" + (f": {text}" if text else "")


def call_user_code(fn: Callable, *args, what: str, passthrough: tuple[type[BaseException], ...] = (), **kwargs):
    """``fn(*args, **kwargs)`` for a call into a user's code (a plugin's or sampler's file, a
    sampler): any exception, ``SystemExit`` (``sys.exit(0)`` too) and any other ``BaseException``
    the code raises become a :class:`UserCodeError` ``"<what> <what it did>"`` in one line.
    ``KeyboardInterrupt`` (a real Ctrl-C) and the types in ``passthrough`` (the caller's own, e.g. a
    time limit's) are not caught. A claim's own checks are not called through here: a check that
    crashes is that claim's ERROR in a complete report (:func:`sim.runner.evaluate_claim`)."""
    try:
        return fn(*args, **kwargs)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # the user's code: its failure is an input error, said in one line
        if isinstance(exc, passthrough):
            raise
        raise UserCodeError(f"{what} {describe_exception(exc)}") from None
