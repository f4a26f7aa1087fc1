"""The counterexample corpus: every FAIL's counterexample kept on disk and replayed first.

A corpus is a folder (``icl-verify run --corpus DIR``; default ``<run folder>/corpus``) that
any number of runs may share. It holds one JSON file per counterexample::

    <claim id>/<tier>-<12 hex digits of sha256 of the encoded inputs (or of the record)>.json

    { "schema": "icl-verify/corpus/v1", "claim", "tier", "title", "statement",
      "reading":    what the tier was checking (the property tier's ``what``),
      "prior":      the prior spec the inputs were drawn from, or null (the tool's own search space),
      "replayable": true when "inputs" decodes to the very input the check judged,
      "inputs":     the input, encoded by :func:`encode` (replayable entries only),
      "not_replayable_because": why not (otherwise),
      "record":     the counterexample as the report prints it,
      "found":      {"run_id", "profile", "seed" (master), "tier_seed", "date", "code_version"},
      "reproduce":  the command that finds it again (same seed, profile and prior),
      "fixed":      null, or {"run_id", "date", "code_version", "detail"} once a run found it no longer fails,
      "failed_again": set when a counterexample marked fixed failed again }

The property tier (:func:`sim.claims.base.property_tier`) replays the replayable entries of
its claim, drawn under the same prior, before any search (:meth:`Corpus.replay`); one that
still fails decides FAIL. Other tiers draw their inputs inside the check, so their FAILs are
kept as records only, reproduced by their seed (:meth:`Corpus.after_tier`). Nothing here
ever stops a run: a file that cannot be read or written is named in the tier's ``corpus``
notes and in :attr:`Corpus.warnings`.
"""
from __future__ import annotations

import copyreg
import enum
import functools
import hashlib
import json
import math
import re
import sys
import time
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, Callable

import numpy as np

__all__ = ["SCHEMA", "Corpus", "Entry", "Replayed", "NotEncodable", "CorpusFormatError", "encode", "decode",
           "REPLAYED", "FIXED", "STORED", "SKIPPED"]

SCHEMA = "icl-verify/corpus/v1"

# The status of one corpus note (a tier's ``corpus`` list: {"file", "status", "detail"}).
REPLAYED = "replayed, still fails"
FIXED = "fixed"
STORED = "stored"
SKIPPED = "skipped"

#: Classes an input may be an instance of, by top-level package: only ours are rebuilt from a file.
_OWN_PACKAGES = ("theory", "sim")
#: Nesting deeper than this is refused (a cycle, or not an input a strategy draws).
_MAX_DEPTH = 64
_TAGS = ("__tuple__", "__float__", "__ndarray__", "__numpy__", "__fraction__", "__dict__", "__object__", "__enum__")
_NONFINITE = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}
_FRACTION = re.compile(r"-?[0-9]+/[0-9]+")


class NotEncodable(ValueError):
    """An input that has no JSON form that decodes back to it (it is stored as a record only)."""


class CorpusFormatError(ValueError):
    """A corpus file, or its encoded inputs, is not what this module writes."""


# -- encoding ---------------------------------------------------------------------------------
def encode(obj, _depth: int = 0):
    """``obj`` as JSON types, such that ``decode(encode(obj))`` is an equal object of the same types.

    Plain JSON for ``None``, ``bool``, ``int``, ``str``, finite ``float``, ``list`` and ``dict``
    with ``str`` keys; a one-key tagged object for the rest::

        {"__float__": "inf" | "-inf" | "nan"}      {"__tuple__": [...]}      {"__fraction__": "1/3"}
        {"__ndarray__": {"dtype": "float64", "shape": [2, 2], "data": [[...], [...]]}}
            (bool, integer and float dtypes; float64 written with repr, so exact; non-finite as strings;
             "writeable": false for a read-only array)
        {"__numpy__": {"dtype": "int64", "value": 3}}            a numpy scalar
        {"__dict__": [[key, value], ...]}                         a dict with other keys (or a key that is a tag)
        {"__enum__": {"class": "module:Name", "value": ...}}
        {"__object__": {"class": "module:Name", "state": {...}, "slots": {...}}}
            an instance of a class of ``theory`` or ``sim``, by its pickle state (``__reduce_ex__(2)``),
            without ``functools.cached_property`` values (recomputed on use)

    Anything else (a set, a complex number, a class from another package) raises :class:`NotEncodable`.
    """
    if _depth > _MAX_DEPTH:
        raise NotEncodable(f"nested more than {_MAX_DEPTH} levels deep")
    down = _depth + 1
    if obj is None or type(obj) in (bool, str):
        return obj
    if isinstance(obj, enum.Enum):
        return {"__enum__": {"class": _class_name(type(obj)), "value": encode(obj.value, down)}}
    if isinstance(obj, np.generic):
        if obj.dtype.kind not in "biuf":
            raise NotEncodable(f"a numpy scalar of dtype {obj.dtype} has no exact JSON form")
        return {"__numpy__": {"dtype": obj.dtype.name, "value": encode(obj.item(), down)}}
    if type(obj) is int:
        return obj
    if type(obj) is float:
        if math.isfinite(obj):
            return obj  # json writes repr(obj): the shortest string that reads back to the same double
        return {"__float__": "nan" if math.isnan(obj) else ("inf" if obj > 0 else "-inf")}
    if type(obj) is Fraction:
        return {"__fraction__": f"{obj.numerator}/{obj.denominator}"}
    if type(obj) is tuple:
        return {"__tuple__": [encode(v, down) for v in obj]}
    if type(obj) is list:
        return [encode(v, down) for v in obj]
    if type(obj) is dict:
        if all(type(k) is str and k not in _TAGS for k in obj):
            return {k: encode(v, down) for k, v in obj.items()}
        return {"__dict__": [[encode(k, down), encode(v, down)] for k, v in obj.items()]}
    if type(obj) is np.ndarray:
        return {"__ndarray__": _encode_array(obj)}
    return {"__object__": _encode_object(obj, down)}


def _encode_array(arr: np.ndarray) -> dict:
    if arr.dtype.kind not in "biuf" or arr.dtype.fields is not None:
        raise NotEncodable(f"a numpy array of dtype {arr.dtype} has no exact JSON form")
    data = arr.tolist()  # Python floats of the same value: float16/32 widen exactly to float64
    if arr.dtype.kind == "f":
        data = _map_leaves(data, lambda x: x if math.isfinite(x) else encode(x)["__float__"])
    out = {"dtype": arr.dtype.name, "shape": list(arr.shape), "data": data}
    if not arr.flags.writeable:
        out["writeable"] = False
    return out


def _class_name(cls: type) -> str:
    if cls.__module__.split(".")[0] not in _OWN_PACKAGES:
        raise NotEncodable(f"{cls.__module__}.{cls.__qualname__} is not a class of {' or '.join(_OWN_PACKAGES)}: "
                           "only those are rebuilt from a corpus file")
    if "<locals>" in cls.__qualname__:
        raise NotEncodable(f"{cls.__qualname__} is defined inside a function and cannot be found again")
    return f"{cls.__module__}:{cls.__qualname__}"


def _encode_object(obj, depth: int) -> dict:
    cls = type(obj)
    name = _class_name(cls)
    try:
        reduced = obj.__reduce_ex__(2)
    except Exception as exc:  # noqa: BLE001 - the class refuses pickling: then it has no state to write either
        raise NotEncodable(f"{name} cannot be reduced to its state: {exc}") from None
    if (not isinstance(reduced, tuple) or reduced[0] is not copyreg.__newobj__ or reduced[1] != (cls,)
            or any(x is not None for x in reduced[3:])):
        raise NotEncodable(f"{name} is not rebuilt from its state alone (it needs constructor arguments or items)")
    state = reduced[2] if len(reduced) > 2 else None
    slots = None
    if isinstance(state, tuple) and len(state) == 2 and (state[0] is None or isinstance(state[0], dict)) \
            and isinstance(state[1], dict):
        state, slots = state
    if state is not None and not isinstance(state, dict) and not hasattr(obj, "__setstate__"):
        raise NotEncodable(f"{name} has a state of type {type(state).__name__} and no __setstate__")
    if isinstance(state, dict):  # cached values are recomputed from the rest on first use
        state = {k: v for k, v in state.items() if not isinstance(getattr(cls, k, None), functools.cached_property)}
    out = {"class": name}
    if state or not slots:  # a class with slots only (its __dict__ empty) writes no "state"
        out["state"] = encode(state, depth)
    if slots:
        out["slots"] = encode(slots, depth)
    return out


def _map_leaves(data, fn):
    if isinstance(data, list):
        return [_map_leaves(v, fn) for v in data]
    return fn(data)


# -- decoding ---------------------------------------------------------------------------------
def decode(doc, _depth: int = 0):
    """The object :func:`encode` wrote as ``doc``; :class:`CorpusFormatError` names what is wrong."""
    if _depth > _MAX_DEPTH + 1:
        raise CorpusFormatError(f"nested more than {_MAX_DEPTH} levels deep")
    down = _depth + 1
    if doc is None or type(doc) in (bool, int, float, str):
        return doc
    if isinstance(doc, list):
        return [decode(v, down) for v in doc]
    if not isinstance(doc, dict):
        raise CorpusFormatError(f"unexpected JSON value of type {type(doc).__name__}")
    tags = [k for k in doc if k in _TAGS]
    if not tags:
        return {k: decode(v, down) for k, v in doc.items()}
    if len(doc) != 1:
        raise CorpusFormatError(f"a tagged value ({tags[0]}) must have no other keys, got {sorted(doc)}")
    tag, body = tags[0], doc[tags[0]]
    try:
        if tag == "__float__":
            return _NONFINITE[body]
        if tag == "__tuple__":
            return tuple(decode(v, down) for v in _expect(body, list, tag))
        if tag == "__fraction__":
            if not isinstance(body, str) or not _FRACTION.fullmatch(body):
                raise CorpusFormatError(f"__fraction__ must be 'p/q', got {body!r}")
            return Fraction(body)
        if tag == "__dict__":
            return {decode(k, down): decode(v, down) for k, v in _expect(body, list, tag)}
        if tag == "__ndarray__":
            return _decode_array(_expect(body, dict, tag))
        if tag == "__numpy__":
            body = _expect(body, dict, tag)
            return _numeric_dtype(body.get("dtype")).type(decode(body.get("value"), down))
        if tag == "__enum__":
            body = _expect(body, dict, tag)
            cls = _own_class(body.get("class"))
            if not issubclass(cls, enum.Enum):
                raise CorpusFormatError(f"{body.get('class')} is not an enum")
            return cls(decode(body.get("value"), down))
        return _decode_object(_expect(body, dict, tag), down)
    except CorpusFormatError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as exc:
        raise CorpusFormatError(f"bad {tag} value: {type(exc).__name__}: {exc}") from None


def _expect(body, kind, tag):
    if not isinstance(body, kind):
        raise CorpusFormatError(f"{tag} expects a JSON {'array' if kind is list else 'object'}, got {body!r:.80}")
    return body


def _numeric_dtype(name) -> np.dtype:
    if not isinstance(name, str):
        raise CorpusFormatError(f"dtype must be a name such as 'float64', got {name!r}")
    try:
        dtype = np.dtype(name)
    except TypeError:
        raise CorpusFormatError(f"unknown dtype {name!r}") from None
    if dtype.kind not in "biuf" or dtype.fields is not None:
        raise CorpusFormatError(f"dtype {name!r} is not a bool, integer or float dtype")
    return dtype


def _decode_array(body: dict) -> np.ndarray:
    dtype = _numeric_dtype(body.get("dtype"))
    shape = body.get("shape")
    if not isinstance(shape, list) or not all(type(n) is int and n >= 0 for n in shape):
        raise CorpusFormatError(f"__ndarray__ shape must be a list of non-negative integers, got {shape!r}")
    data = body.get("data")
    if dtype.kind == "f":
        data = _map_leaves(data, lambda x: _NONFINITE[x] if isinstance(x, str) else x)
    arr = np.array(data, dtype=dtype)
    if arr.size != math.prod(shape):
        raise CorpusFormatError(f"__ndarray__ data has {arr.size} values, shape {shape} needs {math.prod(shape)}")
    arr = arr.reshape(shape)
    if body.get("writeable", True) is False:
        arr.setflags(write=False)
    return arr


def _own_class(name) -> type:
    """The class ``module:Qual.Name`` of ``theory`` or ``sim``, from a module already loaded.

    Decoding never imports what a corpus file names (an import runs code), nor rebuilds another
    package's objects; the claim that replays an input has loaded the classes its strategy draws."""
    module, sep, qual = name.partition(":") if isinstance(name, str) else ("", "", "")
    if not sep or module.split(".")[0] not in _OWN_PACKAGES:
        raise CorpusFormatError(f"class {name!r} is not a class of {' or '.join(_OWN_PACKAGES)}")
    obj = sys.modules.get(module)
    if obj is None:
        raise CorpusFormatError(f"class {name!r}: module {module} is not loaded (no claim that uses it has run)")
    for part in qual.split("."):
        obj = getattr(obj, part, None)
    if not isinstance(obj, type) or obj.__module__ != module:
        raise CorpusFormatError(f"class {name!r} does not exist (any more)")
    return obj


def _decode_object(body: dict, depth: int):
    cls = _own_class(body.get("class"))
    state, slots = decode(body.get("state"), depth), decode(body.get("slots"), depth)
    obj = cls.__new__(cls)
    if hasattr(obj, "__setstate__"):
        obj.__setstate__(state if slots is None else (state, slots))
        return obj
    if state is not None:
        if not isinstance(state, dict):
            raise CorpusFormatError(f"the state of {body['class']} must be an object")
        obj.__dict__.update(state)
    for key, value in (slots or {}).items():
        object.__setattr__(obj, key, value)
    return obj


def digest(encoded) -> str:
    """12 hex digits of the sha256 of ``encoded`` written canonically (sorted keys, no spaces)."""
    text = json.dumps(encoded, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


# -- the corpus folder ------------------------------------------------------------------------
@dataclass
class Entry:
    """One corpus file and its parsed content."""

    path: Path
    doc: dict

    @property
    def fixed(self) -> dict | None:
        return self.doc.get("fixed")


@dataclass
class Replayed:
    """A corpus input that still fails: the decoded input and the file it came from."""

    example: Any
    path: Path


class Corpus:
    """The corpus folder ``root`` as one run sees it (``config``: the run's :class:`sim.runner.RunConfig`).

    ``warnings`` collects, once each, what the person running should hear about: a folder that
    cannot be written, a file that cannot be read.
    """

    def __init__(self, root: Path, config):
        self.root = Path(root)
        self.run_id, self.profile, self.seed, self.prior = config.run_id, config.profile, config.seed, config.prior
        self._plugins, self._z = tuple(config.plugins), config.z
        #: What the person running should hear about, once each: a folder that cannot be written, a
        #: file that cannot be read.
        self.warnings: list[str] = []
        self.counts = {REPLAYED: 0, FIXED: 0, STORED: 0, SKIPPED: 0}
        self._self_replaying: set[tuple[str, str]] = set()
        self._version: dict | None = None

    # -- what the property tier calls ----------------------------------------------------------
    def replay(self, claim, tier: str, judge: Callable[[Any], str | None]) -> tuple[Replayed | None, list[dict]]:
        """Replay the entries of ``(claim, tier)`` drawn under this run's prior, in file-name order.

        ``judge(input)`` returns None when the input is still a counterexample (it meets every
        assumption and the conclusion fails on it), else why not. Returns the first that still
        fails (or None) and a note per entry. An entry that no longer fails is marked fixed in
        its file (kept, never deleted); one marked fixed that fails again is unmarked."""
        self._self_replaying.add((claim.id, tier))
        notes, first = [], None
        other_prior = 0
        for entry in self._entries(claim.id, tier, notes):
            if not entry.doc.get("replayable"):
                continue  # a record only: reproduced by its seed (after_tier), not replayed
            if entry.doc.get("prior") != self.prior:
                other_prior += 1
                continue
            try:
                example = decode(entry.doc["inputs"])
            except CorpusFormatError as exc:
                notes.append(self._note(entry.path, SKIPPED, f"its inputs cannot be decoded ({exc}); skipped",
                                        warn=True))
                continue
            try:
                why_not = judge(example)
            except Exception as exc:  # noqa: BLE001 - the check's own code on an old input: reported, never fatal
                notes.append(self._note(entry.path, SKIPPED, f"replaying it raised {type(exc).__name__}: {exc} "
                                        "(the check's inputs may have changed shape); skipped"))
                continue
            if why_not is None:
                detail = "replayed before any search: still a counterexample"
                if entry.fixed:
                    detail += f" (it had been marked fixed by run {entry.fixed.get('run_id')}; it fails again)"
                    detail += self._rewrite(entry, fixed=None, failed_again=self._stamp())
                if first is None:
                    first = Replayed(example, entry.path)
                    detail += "; it decides this tier"
                notes.append(self._note(entry.path, REPLAYED, detail))
            elif entry.fixed:
                notes.append(self._note(entry.path, FIXED, f"no longer fails: {why_not} (fixed since run "
                                        f"{entry.fixed.get('run_id')}, {entry.fixed.get('date')})"))
            else:
                extra = self._rewrite(entry, fixed={**self._stamp(), "detail": why_not})
                notes.append(self._note(entry.path, FIXED, f"no longer fails: {why_not}; kept, marked fixed by this "
                                        f"run{extra}"))
        if other_prior:
            prior = "the tool's own search space" if self.prior is None else f"the prior {self.prior}"
            notes.append(self._note(self.root / claim.id, SKIPPED, f"{other_prior} counterexample(s) drawn under "
                                    f"another prior were not replayed (this run draws from {prior})"))
        return first, notes

    def _reproduce(self, claim_id: str) -> str:
        """The command that finds the counterexample again: the same claim, profile, seed and
        prior, the plugin files the claim may come from, and a margin other than the default."""
        from sim.verdict import Z_DEFAULT

        command = f"icl-verify {'run' if self.prior is None else 'prior ' + _quote(self.prior)} --claims " \
                  f"{claim_id} --profile {self.profile} --seed {self.seed}"
        command += "".join(f" --plugin {_quote(str(p))}" for p in self._plugins)
        return command + (f" --z {self._z:g}" if self._z != Z_DEFAULT else "")

    def store(self, claim, tier: str, *, reading: str, record: dict, example: Any = None, replayable: bool = True,
              tier_seed: int | None = None) -> dict:
        """Write a FAIL's counterexample; returns the note for the tier. With ``replayable`` the
        ``example`` is encoded (an input with no JSON form is kept as a record only, saying why)."""
        from sim.verdict import to_jsonable

        why = None if replayable else "its inputs are drawn inside the check; its seed reproduces it"
        if replayable:
            try:
                inputs = encode(example)
            except (NotEncodable, RecursionError) as exc:
                why = f"its inputs have no JSON form ({exc})"
        doc: dict[str, Any] = {"schema": SCHEMA, "claim": claim.id, "tier": tier, "title": claim.title,
                               "statement": claim.statement, "reading": reading, "prior": self.prior,
                               "replayable": why is None}
        if why is None:
            doc["inputs"] = inputs
        else:
            doc["not_replayable_because"] = why
        doc["record"] = to_jsonable(record)
        doc["found"] = {**self._stamp(), "profile": self.profile, "seed": self.seed, "tier_seed": tier_seed}
        doc["reproduce"] = self._reproduce(claim.id)
        doc["fixed"] = None
        path = self.root / claim.id
        try:
            # The same input drawn under another prior is another entry: it is replayed only under its own.
            key = {"prior": self.prior, "inputs": doc["inputs"]} if why is None else {"prior": self.prior,
                                                                                     "record": doc["record"]}
            path = path / f"{tier}-{digest(key)}.json"
            if path.exists():
                return self._known(path, claim.id, tier)
            self._write(path, doc)
        except (OSError, TypeError, ValueError) as exc:  # TypeError, ValueError: a record that is not JSON
            return self._note(path, SKIPPED, f"could not be stored: {_why(exc)}", warn=True)
        kind = "replayable input" if why is None else f"record only, not replayable: {why}"
        return self._note(path, STORED, f"stored ({kind})")

    def _known(self, path: Path, claim_id: str, tier: str) -> dict:
        """The note for a counterexample found again that is already on file (unmarked fixed if it was)."""
        entry, problem = _read(path, claim_id, tier)
        if entry is None:
            return self._note(path, SKIPPED, f"malformed corpus file: {problem}; not replaced", warn=True)
        detail = f"already in the corpus (found by run {(entry.doc.get('found') or {}).get('run_id')})"
        if entry.fixed:
            detail += (f"; it had been marked fixed by run {entry.fixed.get('run_id')} and fails again"
                       + self._rewrite(entry, fixed=None, failed_again=self._stamp()))
        return self._note(path, STORED, detail)

    # -- what the runner calls after every tier --------------------------------------------------
    def after_tier(self, ctx, res) -> None:
        """Keep the corpus in step with a tier whose check does not replay it (every tier but the
        property tier of :func:`~sim.claims.base.property_tier`): a FAIL's counterexample is
        stored as a record; a PASS marks fixed the records this run's seed, profile and prior
        reproduce. Notes go to ``res.corpus``."""
        from sim.verdict import Verdict

        if (ctx.claim.id, res.tier) in self._self_replaying:
            return
        if res.verdict is Verdict.FAIL and res.counterexample:
            res.corpus.append(self.store(ctx.claim, res.tier, reading=ctx.claim.statement, record=res.counterexample,
                                         replayable=False, tier_seed=ctx.seed_for(res.tier)))
            return
        if res.verdict is not Verdict.PASS:
            return
        notes: list[dict] = []
        for entry in self._entries(ctx.claim.id, res.tier, notes):
            found = entry.doc.get("found") or {}
            same_run = (entry.doc.get("prior") == self.prior and found.get("seed") == self.seed
                        and found.get("profile") == self.profile)
            if entry.doc.get("replayable") or entry.fixed or not same_run:
                continue
            extra = self._rewrite(entry, fixed={**self._stamp(), "detail": "the tier PASSes with the seed that "
                                                "found it"})
            notes.append(self._note(entry.path, FIXED, "no longer fails: this tier PASSes with the seed, profile and "
                                    f"prior that found it; kept, marked fixed by this run{extra}"))
        res.corpus.extend(notes)

    # -- files -----------------------------------------------------------------------------------
    def _entries(self, claim_id: str, tier: str, notes: list) -> list[Entry]:
        folder = self.root / claim_id
        try:
            paths = sorted(folder.glob(f"{tier}-*.json")) if folder.is_dir() else []
        except OSError as exc:
            notes.append(self._note(folder, SKIPPED, f"cannot be listed: {_why(exc)}", warn=True))
            return []
        out = []
        for path in paths:
            entry, problem = _read(path, claim_id, tier)
            if entry is None:
                notes.append(self._note(path, SKIPPED, f"malformed corpus file: {problem}; skipped", warn=True))
            else:
                out.append(entry)
        return out

    def _rewrite(self, entry: Entry, **changes) -> str:
        """Update ``entry``'s file; "" when written, else a clause saying why not (never raises)."""
        entry.doc.update(changes)
        try:
            self._write(entry.path, entry.doc)
        except (OSError, TypeError, ValueError) as exc:
            self._warn(f"cannot update {entry.path}: {_why(exc)}")
            return f" (the file could not be updated: {_why(exc)})"
        return ""

    def _write(self, path: Path, doc: dict) -> None:
        from sim.files import atomic_write_text

        atomic_write_text(path, _dumps(doc) + "\n")

    def _stamp(self) -> dict:
        return {"run_id": self.run_id, "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "code_version": self.code_version}

    @property
    def code_version(self) -> dict:
        """``{"package": sim.__version__, "git": commit (+dirty) or "unknown"}`` (the commit as
        results.json's ``git_commit`` gives it)."""
        if self._version is None:
            from sim import __version__
            from sim.report import git_commit

            self._version = {"package": __version__, "git": git_commit() or "unknown"}
        return self._version

    def _note(self, path: Path, status: str, detail: str, *, warn: bool = False) -> dict:
        self.counts[status] += 1
        if warn:
            self._warn(f"{path}: {detail}")
        return {"file": str(path), "status": status, "detail": detail}

    def _warn(self, text: str) -> None:
        if text not in self.warnings:
            self.warnings.append(text)

    def absorb(self, other: "Corpus") -> None:
        """Add what another copy of this corpus counted and warned about (a claim evaluated in
        another process, :mod:`sim.lanes`, works on its own copy)."""
        for status, n in other.counts.items():
            self.counts[status] = self.counts.get(status, 0) + n
        for text in other.warnings:
            self._warn(text)

    def summary(self) -> str:
        """One line for the end of a run, e.g. "1 replayed, still fails; 1 stored" ("" when nothing happened)."""
        return "; ".join(f"{n} {status}" for status, n in self.counts.items() if n)


def _read(path: Path, claim_id: str, tier: str) -> tuple[Entry | None, str]:
    """The entry in ``path``, or None and what is wrong with the file."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        return None, f"cannot be read as JSON ({_why(exc)})"
    problem = _check_entry(doc, claim_id, tier)
    return (None, problem) if problem else (Entry(path, doc), "")


def _check_entry(doc, claim_id: str, tier: str) -> str:
    """What is wrong with a corpus file's content ("" when nothing is)."""
    if not isinstance(doc, dict):
        return "not a JSON object"
    if doc.get("schema") != SCHEMA:
        return f"schema is {doc.get('schema')!r}, not {SCHEMA!r}"
    if doc.get("claim") != claim_id or doc.get("tier") != tier:
        return f"it is for claim {doc.get('claim')!r}, tier {doc.get('tier')!r}, but lies in {claim_id}/{tier}-*"
    if not isinstance(doc.get("replayable"), bool):
        return "'replayable' must be true or false"
    if doc["replayable"] and "inputs" not in doc:
        return "a replayable entry has no 'inputs'"
    if doc.get("fixed") is not None and not isinstance(doc["fixed"], dict):
        return "'fixed' must be null or an object"
    if not isinstance(doc.get("found", {}), dict):
        return "'found' must be an object"
    return ""


def _dumps(obj, level: int = 0) -> str:
    """Strict JSON, indented, with every list of plain values on one line (a matrix one row a line)."""
    pad, inner = " " * (2 * level), " " * (2 * level + 2)
    if isinstance(obj, dict) and obj:
        items = [f"{inner}{json.dumps(str(k))}: {_dumps(v, level + 1)}" for k, v in obj.items()]
        return "{\n" + ",\n".join(items) + f"\n{pad}}}"
    if isinstance(obj, list) and any(isinstance(v, (dict, list)) for v in obj):
        return "[\n" + ",\n".join(inner + _dumps(v, level + 1) for v in obj) + f"\n{pad}]"
    return json.dumps(obj, allow_nan=False)


def _why(exc: BaseException) -> str:
    return getattr(exc, "strerror", None) or str(exc) or type(exc).__name__


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"
