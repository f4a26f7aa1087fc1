"""The claim registry: every catalogue entry of ``shared/CLAIMS.md`` as a :class:`~sim.claims.Claim`.

The built-in claims live in the paper homes (:mod:`sim.papers`): each home's ``claims``
module or package exports ``CLAIMS``; :func:`sim.papers.paper_homes` finds the homes (the
built-in ones in catalogue order, then any other folder holding claims). Users add their own
claims from a Python file (``--plugin FILE``, see :func:`load_plugin`) or from a package that
declares the entry point group ``icl_verify.claims``; both go through the same engine, reports
and CLI. The homes' commands (the Markov home's ``sweep``) are found the same way
(:func:`paper_commands`).
"""
from __future__ import annotations

import fnmatch
import hashlib
import importlib
import importlib.util
from pathlib import Path
from typing import Iterable

from sim.claims.base import Claim

__all__ = ["Claim", "all_claims", "get", "select", "load_plugin", "load_entry_points", "plugin_digests",
           "paper_commands", "UnknownClaimError"]

_EXTRA: dict[str, Claim] = {}
_ORIGIN: dict[str, str] = {}  # claim id -> where a user claim came from (plugin file or entry point)
_DIGESTS: dict[str, str] = {}  # plugin file -> sha256 of its content (part of a run's configuration)
_ENTRY_POINTS_LOADED = False


class UnknownClaimError(KeyError):
    """A claim id or ``--claims`` pattern that names no claim of the registry; the message lists the known ids."""

    def __str__(self):
        return str(self.args[0])


def _import_home_module(home: str, module: str, *, optional: bool = False):
    """``sim.papers.<home>.<module>``, or None when ``optional`` and the home has none. A module
    that fails to import raises ImportError naming the home and, where it can, its file and line."""
    import traceback

    import sim.papers  # the registry's discovery: its one import of the paper homes

    dotted = f"sim.papers.{home}.{module}"
    try:
        return importlib.import_module(dotted)
    except Exception as exc:
        if optional and isinstance(exc, ModuleNotFoundError) and exc.name == dotted:
            return None
        # the deepest frame inside the home says where it broke (a SyntaxError names its line itself)
        folders = [Path(entry) / home for entry in sim.papers.__path__]
        in_home = [f for f in traceback.extract_tb(exc.__traceback__)
                   if any(Path(f.filename).is_relative_to(folder) for folder in folders)]
        where = f" at {in_home[-1].filename}:{in_home[-1].lineno}" if in_home else ""
        raise ImportError(f"paper home {home!r} ({dotted}) failed to import{where}: "
                          f"{type(exc).__name__}: {exc}") from exc


def _builtin() -> list[Claim]:
    """The ``CLAIMS`` of every paper home (:func:`sim.papers.paper_homes`), home by home."""
    from sim.papers import paper_homes

    out: list[Claim] = []
    for name in paper_homes():
        module = _import_home_module(name, "claims")
        claims = getattr(module, "CLAIMS", None)
        if claims is None:
            raise ImportError(f"paper home {name!r}: {module.__file__} defines no CLAIMS list")
        out.extend(claims)
    return out


def all_claims() -> list[Claim]:
    """Built-in claims in catalogue order, then plugin claims in load order (installed
    packages' ``icl_verify.claims`` entry points are loaded on first use)."""
    global _ENTRY_POINTS_LOADED
    if not _ENTRY_POINTS_LOADED:
        _ENTRY_POINTS_LOADED = True
        load_entry_points()
    claims = _builtin()
    ids = [c.id for c in claims]
    dup = {i for i in ids if ids.count(i) > 1}
    if dup:
        raise RuntimeError(f"duplicate claim ids {sorted(dup)}")
    return claims + [c for c in _EXTRA.values() if c.id not in set(ids)]


def get(claim_id: str) -> Claim:
    """The claim with id ``claim_id``; :class:`UnknownClaimError` (listing the known ids) if there is none."""
    for c in all_claims():
        if c.id == claim_id:
            return c
    raise UnknownClaimError(f"unknown claim {claim_id!r}; known: {', '.join(c.id for c in all_claims())}")


def select(pattern: str = "*") -> list[Claim]:
    """Claims whose id matches any comma-separated glob in ``pattern`` (``W.*``, ``N.K3,W.L1``).

    A pattern that matches nothing is an error that lists the known ids.
    """
    claims = all_claims()
    pats = [p.strip() for p in pattern.split(",") if p.strip()]
    if not pats:
        raise UnknownClaimError(f"--claims {pattern!r} names no claim; give ids or globs such as 'W.*' or "
                                "'W.L1,N.K3' (leave --claims out to run them all)")
    chosen, seen = [], set()
    for p in pats:
        hits = [c for c in claims if fnmatch.fnmatchcase(c.id, p)]
        if not hits:
            raise UnknownClaimError(f"no claim matches {p!r}; known claims: {', '.join(c.id for c in claims)}")
        for c in hits:
            if c.id not in seen:
                seen.add(c.id)
                chosen.append(c)
    order = {c.id: k for k, c in enumerate(claims)}
    return sorted(chosen, key=lambda c: order[c.id])


def register(claims: Iterable[Claim], origin: str = "register()") -> list[Claim]:
    """Add user claims to the registry. An id may not clash with a built-in claim or with a
    user claim from elsewhere: the error names both sources (a silent replacement could hide
    a FAIL). Registering the same source again replaces its claims."""
    builtin_ids = {c.id for c in _builtin()}
    claims = list(claims)
    seen: dict[str, int] = {}
    for c in claims:
        if not isinstance(c, Claim):
            raise TypeError(f"expected sim.claims.Claim objects, got {type(c).__name__}")
        if c.id in builtin_ids:
            raise ValueError(f"claim id {c.id!r} from {origin} clashes with a built-in claim; choose another id")
        if c.id in seen:
            raise ValueError(f"claim id {c.id!r} appears twice in {origin}; ids must be unique")
        seen[c.id] = 1
        if c.id in _EXTRA and _ORIGIN.get(c.id) != origin:
            raise ValueError(f"claim id {c.id!r} from {origin} is already defined by {_ORIGIN.get(c.id)}; "
                             "choose another id")
    for c in claims:
        _EXTRA[c.id] = c
        _ORIGIN[c.id] = origin
    return claims


def load_plugin(path: str | Path) -> list[Claim]:
    """Load user claims from a Python file that defines ``CLAIMS = [Claim(...), ...]``."""
    from sim.files import call_user_code, load_user_file

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"claim plugin {path} " + ("is not a file" if path.exists() else "does not exist"))
    module = load_user_file(path, "plugin")
    claims = getattr(module, "CLAIMS", None)
    if claims is None:
        raise ValueError(f"claim plugin {path} defines no CLAIMS list")
    claims = call_user_code(list, claims, what="iterating its CLAIMS")  # a generator runs the user's code
    added = register(claims, origin=f"plugin {path}")
    _DIGESTS[str(path.resolve())] = hashlib.sha256(path.read_bytes()).hexdigest()
    return added


def plugin_digests() -> dict[str, str]:
    """``{plugin file: sha256 of its content}`` for every plugin loaded: part of a run's
    configuration, so an edited plugin never resumes from the old plugin's verdicts."""
    return dict(_DIGESTS)


def load_entry_points() -> list[Claim]:
    """Claims from installed packages declaring ``[project.entry-points."icl_verify.claims"]``."""
    from importlib.metadata import entry_points

    from sim.files import describe_exception

    added = []
    for ep in entry_points(group="icl_verify.claims"):
        origin = f"entry point {ep.name} = {ep.value}"
        try:
            obj = ep.load()
            found = list(obj() if callable(obj) else obj)
        except (Exception, SystemExit) as exc:  # an installed package's code: its failure is the user's input error
            raise ImportError(f"cannot load claims from the installed {origin}: {describe_exception(exc)}") from None
        added += register(found, origin=origin)
    return added


def paper_commands() -> list:
    """The :class:`sim.commands.Command` s the paper homes add to the command line: the
    ``COMMANDS`` of each home's ``commands`` module, where it has one (the Markov home's
    ``sweep``), in the homes' order."""
    from sim.papers import paper_homes

    out = []
    for name in paper_homes():
        module = _import_home_module(name, "commands", optional=True)
        if module is not None:
            out.extend(getattr(module, "COMMANDS", ()))
    return out
