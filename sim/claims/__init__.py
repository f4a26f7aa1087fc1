"""The claim registry: every catalogue entry of ``shared/CLAIMS.md`` as a :class:`Claim`.

One module per paper (``wei``, ``nichani``, ``gibson``, ``edelman``), each exporting
``CLAIMS``. Users add their own claims from a Python file (``--plugin FILE``, see
:func:`load_plugin`) or from a package that declares the entry point group
``icl_verify.claims``; both go through the same engine, reports and CLI.
"""
from __future__ import annotations

import fnmatch
import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Iterable

from .base import Claim

__all__ = ["Claim", "all_claims", "get", "select", "load_plugin", "UnknownClaimError"]

_PAPER_MODULES = ("wei", "nichani", "gibson", "edelman")
_EXTRA: dict[str, Claim] = {}


class UnknownClaimError(KeyError):
    def __str__(self):
        return str(self.args[0])


def _builtin() -> list[Claim]:
    out: list[Claim] = []
    for name in _PAPER_MODULES:
        try:
            mod = importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"{__name__}.{name}":  # module not written yet
                continue
            raise
        out.extend(mod.CLAIMS)
    return out


def all_claims() -> list[Claim]:
    """Built-in claims in catalogue order, then plugin claims in load order."""
    claims = _builtin()
    ids = [c.id for c in claims]
    dup = {i for i in ids if ids.count(i) > 1}
    if dup:
        raise RuntimeError(f"duplicate claim ids {sorted(dup)}")
    return claims + [c for c in _EXTRA.values() if c.id not in set(ids)]


def get(claim_id: str) -> Claim:
    for c in all_claims():
        if c.id == claim_id:
            return c
    raise UnknownClaimError(f"unknown claim {claim_id!r}; known: {', '.join(c.id for c in all_claims())}")


def select(pattern: str = "*") -> list[Claim]:
    """Claims whose id matches any comma-separated glob in ``pattern`` (``W.*``, ``N.K3,W.L1``).

    A pattern that matches nothing is an error that lists the known ids.
    """
    claims = all_claims()
    pats = [p.strip() for p in pattern.split(",") if p.strip()] or ["*"]
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


def register(claims: Iterable[Claim]) -> list[Claim]:
    """Add user claims to the registry (ids must not clash with built-in ones)."""
    builtin_ids = {c.id for c in _builtin()}
    added = []
    for c in claims:
        if not isinstance(c, Claim):
            raise TypeError(f"expected sim.claims.Claim objects, got {type(c).__name__}")
        if c.id in builtin_ids:
            raise ValueError(f"claim id {c.id!r} clashes with a built-in claim; choose another id")
        _EXTRA[c.id] = c
        added.append(c)
    return added


def load_plugin(path: str | Path) -> list[Claim]:
    """Load user claims from a Python file that defines ``CLAIMS = [Claim(...), ...]``."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"claim plugin {path} does not exist")
    name = f"icl_verify_plugin_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    claims = getattr(module, "CLAIMS", None)
    if claims is None:
        raise ValueError(f"claim plugin {path} defines no CLAIMS list")
    return register(claims)


def load_entry_points() -> list[Claim]:
    """Claims from installed packages declaring ``[project.entry-points."icl_verify.claims"]``."""
    from importlib.metadata import entry_points

    added = []
    for ep in entry_points(group="icl_verify.claims"):
        obj = ep.load()
        added += register(obj() if callable(obj) else obj)
    return added
