"""The one-line spec language that names priors (:func:`parse_prior`): parsed with :mod:`ast`,
never evaluated."""
from __future__ import annotations

import ast
import difflib
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from sim.priors.base import Prior, PriorError, PriorSpecError, _num
from sim.priors.families import Dirichlet, DoublyStochastic, Mixture, Point
from sim.priors.transforms import Banded, Floor, Sinkhorn, Sparse, Sticky, Symmetrize, lazy
from sim.priors.user import UserSampler

MAX_SPEC_CHARS, MAX_SPEC_DEPTH = 5_000, 32
#: Deepest syntax tree a spec may parse to (calls, lists, keywords and arithmetic nest; the
#: parser recurses once per level, so a spec such as ``1+1+...+1`` or ``----1`` is refused here).
MAX_SPEC_NODES_DEPTH = 4 * MAX_SPEC_DEPTH


# ------------------------------------------------------------------------- the spec language --
@dataclass(frozen=True)
class Param:
    """One parameter of a spec-language name: what it is called, the ``kind`` of value it takes
    (``prior``, ``number``, ``unit`` for ``[0, 1]``, ``positive``, ``size`` for a positive integer,
    ``count`` for a non-negative one, ``bool``, ``str``, ``numbers`` or ``matrix``), and its default
    when it is not ``required``."""

    name: str
    kind: str  # prior | number | unit | positive | size | count | bool | str | numbers | matrix
    required: bool = True
    default: Any = None
    help: str = ""


_KIND_WORDS = {
    "prior": "a prior such as dirichlet(alpha=1)",
    "positive": "a positive number",
    "unit": "a number in [0, 1]",
    "number": "a number",
    "size": "a positive integer",
    "count": "a non-negative integer",
    "bool": "True or False",
    "str": "a quoted string",
    "numbers": "a list of numbers such as [0.5, 0.5]",
    "matrix": "a matrix as a list of rows such as [[0.9, 0.1], [0.2, 0.8]]",
}


@dataclass(frozen=True)
class PriorSpec:
    """One name of the spec language: its parameters (positional order) and its builder."""

    name: str
    params: tuple[Param, ...]
    build: Callable[..., Prior]
    doc: str
    example: str
    variadic_priors: bool = False  # mixture(p1, p2, ..., weights=[...])

    def usage(self) -> str:
        """The name's call form for help texts, e.g. ``sticky(BASE, stay=0.7)``."""
        parts = ["PRIOR, PRIOR, ..."] if self.variadic_priors else []
        for p in self.params:
            if p.required and p.kind in ("prior", "matrix"):
                parts.append(p.name.upper())
            elif p.required and p.kind == "str":
                parts.append("'module:function'")
            else:
                parts.append(f"{p.name}={'...' if p.required else _default_text(p.default)}")
        return f"{self.name}({', '.join(parts)})"


def _default_text(v) -> str:
    if v is None:
        return "None"
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, (int, float)):
        return _num(v)
    return repr(v)


def _build_mixture(*priors, weights=None):
    if weights is None:
        weights = [1.0] * len(priors)
    if len(weights) != len(priors):
        raise PriorError(f"mixture: {len(priors)} priors but {len(weights)} weights; give one weight per prior")
    return Mixture(list(zip(weights, priors)))


def _build_sampler(target):
    return UserSampler(target)


def _bound(prior: Prior, d) -> Prior:
    return prior if d is None else prior.bind(d)


#: Every name of the spec language, by name: what :func:`parse_prior` accepts.
PRIORS: dict[str, PriorSpec] = {s.name: s for s in [
    PriorSpec("dirichlet", (Param("alpha", "positive"), Param("d", "size", False)),
              lambda alpha, d=None: Dirichlet(alpha, d),
              "rows i.i.d. Dirichlet(alpha 1_d)", "dirichlet(alpha=0.1)"),
    PriorSpec("floor", (Param("base", "prior"), Param("gamma", "unit")),
              lambda base, gamma: Floor(base, gamma),
              "gamma/d + (1 - gamma) * base: every entry >= gamma/d", "floor(dirichlet(alpha=1), gamma=0.3)"),
    PriorSpec("point", (Param("matrix", "matrix"),), lambda matrix: Point(matrix),
              "a point mass at one matrix", "point([[0.9, 0.1], [0.2, 0.8]])"),
    PriorSpec("symmetrize", (Param("base", "prior"),), lambda base: Symmetrize(base),
              "relabel each draw by a uniform random permutation", "symmetrize(point([[0.9, 0.1], [0.2, 0.8]]))"),
    PriorSpec("mixture", (Param("weights", "numbers", False),), _build_mixture,
              "draw from one of the priors, chosen with the given weights (default equal)",
              "mixture(dirichlet(alpha=1), point([[0.9, 0.1], [0.2, 0.8]]), weights=[0.5, 0.5])",
              variadic_priors=True),
    PriorSpec("sticky", (Param("base", "prior"), Param("stay", "unit", False, 0.7)),
              lambda base, stay=0.7: Sticky(base, stay),
              "stay * I + (1 - stay) * base", "sticky(dirichlet(alpha=1), stay=0.8)"),
    PriorSpec("lazy", (Param("base", "prior"),), lambda base: lazy(base),
              "the lazy chain (I + base) / 2, i.e. sticky(base, stay=0.5)", "lazy(dirichlet(alpha=1))"),
    PriorSpec("sparse", (Param("base", "prior"), Param("threshold", "unit")),
              lambda base, threshold: Sparse(base, threshold),
              "entries below threshold set to 0, rows renormalised", "sparse(dirichlet(alpha=0.5), threshold=0.1)"),
    PriorSpec("banded", (Param("base", "prior"), Param("width", "count", False, 1), Param("cyclic", "bool", False, False)),
              lambda base, width=1, cyclic=False: Banded(base, width, cyclic),
              "entries with |s - t| > width (around the ring if cyclic) set to 0, rows renormalised",
              "banded(dirichlet(alpha=1), width=1)"),
    PriorSpec("doubly_stochastic", (Param("k", "size", False, 3), Param("alpha", "positive", False, 1.0),
                                    Param("d", "size", False)),
              lambda k=3, alpha=1.0, d=None: DoublyStochastic(k, alpha, d),
              "Birkhoff: a Dirichlet(alpha)-weighted mix of k uniform random permutation matrices",
              "doubly_stochastic(k=3, d=4)"),
    PriorSpec("sinkhorn", (Param("base", "prior"),), lambda base: Sinkhorn(base),
              "Sinkhorn-Knopp scaling of each draw to a doubly stochastic matrix", "sinkhorn(dirichlet(alpha=1))"),
    PriorSpec("sampler", (Param("target", "str"),), _build_sampler,
              "your own function(rng, n) -> (n, d, d) array", "sampler('my_priors.py:draw')"),
]}


def spec_help() -> str:
    """The spec language in a few lines (for ``--help`` and error messages)."""
    lines = [f"  {s.usage():<58} {s.doc}" for s in PRIORS.values()]
    lines.append("  module:function | path/to/file.py:function".ljust(60) + " your own sampler (the whole spec)")
    return "\n".join(lines)


def _caret(text: str, col: int | None) -> str:
    if col is None:
        return ""
    return f"\n  {text}\n  {' ' * max(col - 1, 0)}^"


class _Parser:
    def __init__(self, text: str):
        self.text = text

    def fail(self, msg: str, node: ast.AST | None = None, col: int | None = None):
        if node is not None and hasattr(node, "col_offset"):
            col = node.col_offset + 1
        where = f" at column {col}" if col is not None else ""
        raise PriorSpecError(f"prior spec {self.text!r}{where}: {msg}{_caret(self.text, col)}")

    # -- values ----------------------------------------------------------------------------
    def number(self, node, what: str) -> float:
        v = self._number(node, what)
        if not np.isfinite(v):
            self.fail(f"{what} must be a finite number, got {_num(v) if not np.isnan(v) else 'nan'}", node)
        return v

    def _number(self, node, what: str) -> float:
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
            try:
                return float(node.value)
            except OverflowError:  # an integer literal beyond the float range
                self.fail(f"{what} must be a finite number, got an integer of {len(str(node.value))} digits", node)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            v = self._number(node.operand, what)
            return -v if isinstance(node.op, ast.USub) else v
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.Div)):
            a, b = self._number(node.left, what), self._number(node.right, what)
            if isinstance(node.op, ast.Div):
                if b == 0:
                    self.fail(f"{what}: division by zero", node)
                return a / b
            return a + b if isinstance(node.op, ast.Add) else a - b if isinstance(node.op, ast.Sub) else a * b
        self.fail(f"{what} must be a number, got {self.describe(node)}", node)

    def describe(self, node) -> str:
        if isinstance(node, ast.Constant):
            return f"the {type(node.value).__name__} {node.value!r}"
        if isinstance(node, (ast.List, ast.Tuple)):
            return "a list"
        if isinstance(node, ast.Call):
            return "a prior (a call)"
        if isinstance(node, ast.Name):
            hint = f" (a prior needs parentheses: {node.id}(...))" if node.id in PRIORS else ""
            return f"the bare name {node.id!r}{hint}"
        return f"an expression ({type(node).__name__})"

    def value(self, node, param: Param, fname: str):
        what = f"{fname}(): {param.name}"
        k = param.kind
        if k == "prior":
            if not isinstance(node, ast.Call):
                self.fail(f"{what} must be {_KIND_WORDS['prior']}, got {self.describe(node)}", node)
            return self.prior(node)
        if k in ("number", "positive", "unit"):
            v = self.number(node, what)
            if k == "positive" and not v > 0:
                self.fail(f"{what} must be a positive number, got {_num(v)}", node)
            if k == "unit" and not 0 <= v <= 1:
                self.fail(f"{what} must be a number in [0, 1], got {_num(v)}", node)
            return v
        if k in ("size", "count"):
            v = self.number(node, what)
            if not float(v).is_integer() or v < (1 if k == "size" else 0):
                self.fail(f"{what} must be {_KIND_WORDS[k]}, got {_num(v)}", node)
            return int(v)
        if k == "bool":
            if isinstance(node, ast.Constant) and isinstance(node.value, bool):
                return node.value
            if isinstance(node, ast.Name) and node.id.lower() in ("true", "false"):
                return node.id.lower() == "true"
            self.fail(f"{what} must be True or False, got {self.describe(node)}", node)
        if k == "str":
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                return node.value
            self.fail(f"{what} must be a quoted string such as 'my_priors.py:draw', got {self.describe(node)}", node)
        if k == "numbers":
            if not isinstance(node, (ast.List, ast.Tuple)):
                self.fail(f"{what} must be {_KIND_WORDS['numbers']}, got {self.describe(node)}", node)
            return [self.number(e, what) for e in node.elts]
        if k == "matrix":
            if not isinstance(node, (ast.List, ast.Tuple)) or not node.elts or \
                    not all(isinstance(r, (ast.List, ast.Tuple)) for r in node.elts):
                self.fail(f"{what} must be {_KIND_WORDS['matrix']}, got {self.describe(node)}", node)
            rows = [[self.number(e, what) for e in r.elts] for r in node.elts]
            if len({len(r) for r in rows}) != 1 or len(rows[0]) != len(rows):
                self.fail(f"{what} must be square: got rows of lengths {[len(r) for r in rows]}", node)
            return rows
        raise AssertionError(k)  # pragma: no cover

    # -- calls -----------------------------------------------------------------------------
    def prior(self, node) -> Prior:
        if not isinstance(node, ast.Call):
            self.fail(f"expected a prior such as dirichlet(alpha=0.1), got {self.describe(node)}", node)
        if not isinstance(node.func, ast.Name):
            self.fail("expected a prior name such as dirichlet(...) before the parenthesis", node)
        name = node.func.id
        sig = PRIORS.get(name)
        if sig is None:
            close = difflib.get_close_matches(name, list(PRIORS), n=1, cutoff=0.5)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            self.fail(f"unknown prior {name!r}{hint}; known priors: {', '.join(sorted(PRIORS))} "
                      "(or module:function / path/to/file.py:function for your own sampler)", node)
        usage = f" (usage: {sig.usage()})"
        args = list(node.args)
        for a in args:
            if isinstance(a, ast.Starred):
                self.fail(f"{name}(): *arguments are not part of the spec language{usage}", a)
        kwargs = {}
        for kw in node.keywords:
            if kw.arg is None:
                self.fail(f"{name}(): **arguments are not part of the spec language{usage}", kw.value)
            kwargs[kw.arg] = kw
        values: dict[str, Any] = {}
        priors: list[Prior] = []
        if sig.variadic_priors:
            while args and isinstance(args[0], ast.Call):
                priors.append(self.prior(args.pop(0)))
            if not priors:
                self.fail(f"{name}() needs at least one prior{usage}", node)
        params = list(sig.params)
        if len(args) > len(params):
            self.fail(f"{name}() takes at most {len(params)} positional argument(s) after its priors, got "
                      f"{len(args)}{usage}", args[len(params)])
        for p, a in zip(params, args):
            values[p.name] = self.value(a, p, name)
        known = {p.name: p for p in params}
        for key, kw in kwargs.items():
            if key not in known:
                close = difflib.get_close_matches(key, list(known), n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                takes = ", ".join(known) or "no keywords"
                self.fail(f"{name}() got an unknown keyword {key!r}{hint} ({name} takes: {takes}){usage}", kw.value)
            if key in values:
                self.fail(f"{name}() got {key!r} twice (positionally and by keyword){usage}", kw.value)
            values[key] = self.value(kw.value, known[key], name)
        for p in params:
            if p.required and p.name not in values:
                self.fail(f"{name}() is missing {p.name} ({_KIND_WORDS[p.kind]}){usage}", node)
        try:
            return sig.build(*priors, **values)
        except PriorSpecError:
            raise
        except PriorError as exc:
            self.fail(str(exc), node)


def parse_prior(spec: str) -> Prior:
    """Parse a one-line prior spec (see the module docstring for the grammar) into a :class:`~sim.priors.Prior`.

    ``module:function`` or ``path/to/file.py:function`` (the whole spec) loads a user's
    sampler. Never evaluates the text: it is parsed with :mod:`ast` and only the names in
    :data:`~sim.priors.spec.PRIORS` are built. Raises :class:`~sim.priors.PriorSpecError` saying what was expected and
    at which column.

    >>> parse_prior("floor(dirichlet(alpha=1), gamma=0.3)").spec()
    'floor(dirichlet(alpha=1), gamma=0.3)'
    """
    if not isinstance(spec, str):
        raise PriorSpecError(f"a prior spec must be a string, got {type(spec).__name__}")
    text = spec.strip()
    if not text:
        raise PriorSpecError(f"empty prior spec; expected e.g. dirichlet(alpha=0.1). Known priors: "
                             f"{', '.join(PRIORS)}, or path/to/file.py:function for your own sampler (icl-verify "
                             "prior --help says more)")
    if len(text) > MAX_SPEC_CHARS:
        raise PriorSpecError(f"prior spec of {len(text)} characters is longer than {MAX_SPEC_CHARS}; write a sampler "
                             "(path/to/file.py:function) for a prior that large")
    depth = max(np.cumsum([1 if c == "(" else -1 if c == ")" else 0 for c in text]), default=0)
    if depth > MAX_SPEC_DEPTH:
        raise PriorSpecError(f"prior spec nests {depth} levels of parentheses, more than {MAX_SPEC_DEPTH}")
    if "(" not in text and ":" in text:
        return UserSampler(text)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:  # bytes of another encoding, as Python keeps them in argv
        raise PriorSpecError(f"prior spec {text!r} at column {exc.start + 1}: a byte that is not UTF-8 text; a spec "
                             "is written in ASCII, e.g. dirichlet(alpha=0.1)") from None
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        col = exc.offset if exc.offset is not None else None
        raise PriorSpecError(f"malformed prior spec {text!r}" + (f" at column {col}" if col else "")
                             + f": {exc.msg}; expected e.g. floor(dirichlet(alpha=1), gamma=0.3)"
                             + _caret(text, col)) from None
    except (RecursionError, MemoryError):
        raise PriorSpecError(_too_deep(len(text))) from None
    depth = _tree_depth(tree)
    if depth > MAX_SPEC_NODES_DEPTH:
        raise PriorSpecError(_too_deep(depth))
    return _Parser(text).prior(tree.body)


def _too_deep(depth: int) -> str:
    return (f"prior spec nests its expressions {depth} levels deep, more than {MAX_SPEC_NODES_DEPTH} (calls, lists "
            "and arithmetic such as 1+1+...+1 or ----1); write each number as one literal")


def _tree_depth(tree: ast.AST) -> int:
    """How deeply the syntax tree nests, counted without recursion."""
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        if deepest > MAX_SPEC_NODES_DEPTH:
            break
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return deepest
