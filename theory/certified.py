"""Certified inequalities: branch-and-bound over boxes with rigorous enclosures.

A claim ``f(x) <= limit`` (or ``>=``) for every ``x`` of a box domain ``D`` is decided by
splitting ``D`` into boxes and bounding ``f`` on each with a rigorous enclosure (a caller-given
function of python-flint ``arb`` balls, :mod:`theory.intervals`). A box whose enclosure lies
strictly on the claimed side is *certified*; one whose enclosure lies strictly on the other side
is a *certified counterexample box*: the claim fails at every point of it; any other box is split
in two along its widest side (relative to ``D``'s) and both halves are bounded again. The result
(:class:`Certificate`) is one of

- ``PROVED``: every box of ``D`` outside its declared exclusions was certified; the certificate
  names ``D`` whole, the boxes, the precision and the time;
- ``COUNTEREXAMPLE``: a box on which the claim fails everywhere (its centre, a point of ``D``, is
  what a reader re-checks by hand);
- ``UNDECIDED``: the box budget ran out (the largest box left open is named) or a box could no
  longer be split at float resolution;
- ``REFUSED``: ``D`` meets a declared *singular set* (where both sides of the claim vanish, so no
  enclosure can close) that the claim does not handle and no exclusion removes.

**Singular sets** (``Domain.singular``). Where both sides of an inequality vanish (``pi`` of rank
one: every mutual information is 0) an enclosure of ``LHS - RHS`` straddles 0 on every box that
meets the set, however small. A claim handles such a set by bounding a reduced form in which the
vanishing factor is divided out exactly (the ``handling`` text says how, e.g. "both sides divided
by lam^2 > 0"); or the domain excludes a neighbourhood of it (``Domain.excluded``), and the
certificate says so. A singular set with neither is refused, and a box that meets it is never
certified, so such a domain can be UNDECIDED or REFUSED but never PROVED. A counterexample box
never meets a singular set (on it the reduced form is not the claim).

**Tightness** (``tight=True``). The same search then also brackets the extreme of ``f`` over the
certified part of ``D``: the largest upper end of the boxes still open is a certified upper bound
on ``sup f`` (a lower bound on ``inf f`` for ``>=``), and the best value at a box's centre (the
lower end of its point enclosure) a certified lower bound. Boxes are refined, most promising
first, until the two are within ``rel_gap`` or the budget runs out. A counterexample box ends the
search in either mode (the bracket is then only as narrow as the search had made it).

The box endpoints are floats; a domain's exact (rational) ends are rounded outward, so the boxes
cover ``D``. The search is deterministic: it uses no random numbers and stops on a box count, not
a clock, so its result does not depend on the machine.
"""
from __future__ import annotations

import heapq
import itertools
import math
import time
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Callable, Mapping, Sequence

import flint
from flint import arb

from .errors import TheoryError
from .intervals import Jet, bounds, lower, upper

__all__ = ["Box", "Region", "Domain", "Inequality", "Certificate", "certify", "two_state_domain", "STATUSES", "PRECISION",
           "round_down", "round_up"]

#: What a certificate can conclude (module docstring).
STATUSES = ("PROVED", "COUNTEREXAMPLE", "UNDECIDED", "REFUSED")
#: Default working precision of the balls, in bits (float64's 53: the radii carry every rounding error).
PRECISION = 53


def round_down(x) -> float:
    """The largest float ``<= x`` for an exact number ``x`` (int, float or Fraction)."""
    x = Fraction(x)
    f = float(x)
    return math.nextafter(f, -math.inf) if Fraction(f) > x else f


def round_up(x) -> float:
    """The smallest float ``>= x`` for an exact number ``x``."""
    x = Fraction(x)
    f = float(x)
    return math.nextafter(f, math.inf) if Fraction(f) < x else f


@dataclass(frozen=True)
class Box:
    """A box ``prod_i [lo_i, hi_i]`` with float ends (``lo_i <= hi_i``)."""

    lo: tuple[float, ...]
    hi: tuple[float, ...]

    def __post_init__(self):
        if len(self.lo) != len(self.hi) or any(not (a <= b) for a, b in zip(self.lo, self.hi)):
            raise TheoryError(f"a box needs lo <= hi in every coordinate, got {self.lo} and {self.hi}")

    def balls(self) -> tuple[arb, ...]:
        """One ball per coordinate, each containing its whole side."""
        return tuple(arb(a) if a == b else arb(a).union(arb(b)) for a, b in zip(self.lo, self.hi))

    def centre(self) -> tuple[float, ...]:
        """The midpoint of each side (a float between its ends)."""
        return tuple(_midpoint(a, b) for a, b in zip(self.lo, self.hi))

    def point(self) -> "Box":
        """The centre as a box of width 0."""
        c = self.centre()
        return Box(c, c)

    def split(self, scale: Sequence[float], logit: Sequence[bool] = (),
              smear: Sequence[float] | None = None) -> tuple["Box", "Box"] | None:
        """Two halves along the side with the largest ``smear`` (how much of the enclosure's width each
        side accounts for: ``|df/dx_i| (hi_i - lo_i)``, when known), else the side widest relative to
        ``scale`` (the domain's widths); None when no side can be split at float resolution. A side
        flagged in ``logit`` (inside ``(0, 1)``) is measured and halved on the logit scale, ``log(x / (1 -
        x))``, so that boxes shrink geometrically toward 0 and 1, where probabilities' logarithms are steep."""
        flags = tuple(logit) + (False,) * (len(self.lo) - len(logit))

        def width(i):
            if flags[i]:
                return (_logit(self.hi[i]) - _logit(self.lo[i])) / scale[i]
            return (self.hi[i] - self.lo[i]) / scale[i]

        def key(i):
            return (-smear[i] if smear is not None else 0.0, -width(i))

        for i in sorted(range(len(self.lo)), key=key):
            m = _logit_midpoint(self.lo[i], self.hi[i]) if flags[i] else _midpoint(self.lo[i], self.hi[i])
            if self.lo[i] < m < self.hi[i]:
                return (Box(self.lo, self.hi[:i] + (m,) + self.hi[i + 1:]),
                        Box(self.lo[:i] + (m,) + self.lo[i + 1:], self.hi))
        return None

    def volume(self, scale: Sequence[float]) -> float:
        """The box's share of a box of widths ``scale``."""
        return math.prod((b - a) / s for a, b, s in zip(self.lo, self.hi, scale))

    def record(self, names: Sequence[str]) -> dict[str, list[float]]:
        """``{name: [lo, hi]}`` per coordinate, as reports print a box."""
        return {n: [a, b] for n, a, b in zip(names, self.lo, self.hi)}


def _midpoint(a: float, b: float) -> float:
    m = a + (b - a) / 2
    return m if a <= m <= b else (a + b) / 2


def _logit(x: float) -> float:
    return math.log(x) - math.log1p(-x)


def _logit_midpoint(a: float, b: float) -> float:
    """The point halfway between ``a`` and ``b`` on the logit scale (any float strictly inside will do:
    the halves share it exactly, so they cover the box whatever its rounding)."""
    z = (_logit(a) + _logit(b)) / 2
    m = 1.0 / (1.0 + math.exp(-z))
    return m if a < m < b else _midpoint(a, b)


@dataclass(frozen=True)
class Region:
    """A part of a domain, told apart on boxes.

    ``meets(box)`` must be True for every box that meets the region (it may be True for one that
    does not: it errs towards "meets"); ``covers(box)`` must be False for every box that is not
    inside the region (it errs towards "not inside"). For a singular set, ``handling`` says how the
    claim deals with it ("" when it does not)."""

    description: str
    meets: Callable[[Box], bool]
    #: True only for a box that lies inside the region (the default: never sure).
    covers: Callable[[Box], bool] = lambda box: False
    handling: str = ""
    #: The coordinate to halve first in a box that meets an excluded region without lying in it (a
    #: region that is a slab across that coordinate), so that boxes reach it in a few halvings.
    across: int | None = None

    def record(self) -> dict[str, str]:
        """``{"set": description, "handling": ...}`` (no handling key when it has none)."""
        return {"set": self.description, **({"handling": self.handling} if self.handling else {})}


@dataclass(frozen=True)
class Domain:
    """A box domain: coordinates ``names`` with exact ends ``lower``, ``upper`` (ints, floats or
    Fractions), ``description`` (what it is in the claim's words: d, floor, root law, tree shapes,
    ...), the neighbourhoods ``excluded`` from the certificate and the ``singular`` sets it meets."""

    names: tuple[str, ...]
    lower: tuple[Any, ...]
    upper: tuple[Any, ...]
    description: Mapping[str, str]
    excluded: tuple[Region, ...] = ()
    singular: tuple[Region, ...] = ()
    #: Coordinates (probabilities inside (0, 1)) split on the logit scale (:meth:`Box.split`).
    logit: tuple[bool, ...] = ()
    #: Parts of the coordinate box that are not in the domain (a domain that is not a box in its
    #: coordinates): boxes inside them are dropped, and a counterexample box must not meet them.
    outside: tuple[Region, ...] = ()

    def __post_init__(self):
        if any(self.logit) and not all(0 < Fraction(a) < Fraction(b) < 1 for a, b, f in
                                       zip(self.lower, self.upper, self.logit) if f):
            raise TheoryError("a coordinate split on the logit scale must lie inside (0, 1)")
        if not (len(self.names) == len(self.lower) == len(self.upper)) or not self.names:
            raise TheoryError(f"a domain needs one lower and one upper end per coordinate, got names {self.names}, "
                              f"lower {self.lower}, upper {self.upper}")
        for n, a, b in zip(self.names, self.lower, self.upper):
            if not Fraction(a) < Fraction(b):
                raise TheoryError(f"domain coordinate {n}: lower end {a} is not below the upper end {b}")

    def box(self) -> Box:
        """The whole domain as a float box, rounded outward so that it covers the exact one."""
        return Box(tuple(round_down(a) for a in self.lower), tuple(round_up(b) for b in self.upper))

    def contains(self, point: Sequence[float]) -> bool:
        """Whether ``point`` lies in the exact domain (excluded neighbourhoods count as inside)."""
        inside = all(Fraction(a) <= Fraction(x) <= Fraction(b) for a, x, b in zip(self.lower, point, self.upper))
        pt = Box(tuple(point), tuple(point))
        return inside and not any(r.meets(pt) for r in self.outside)

    def sides(self) -> list[str]:
        """``"name in [lower, upper]"`` per coordinate, the ends exact."""
        return [f"{n} in [{_exact_text(a)}, {_exact_text(b)}]" for n, a, b in zip(self.names, self.lower, self.upper)]

    def text(self) -> str:
        """The domain in words, whole: its description, coordinates, exclusions and singular sets."""
        parts = [f"{k}: {v}" for k, v in self.description.items()] + ["; ".join(self.sides())]
        parts += [f"not in the domain: {r.description}" for r in self.outside]
        parts += [f"excluded: {r.description}" for r in self.excluded]
        parts += [f"singular set: {r.description} ({r.handling or 'not handled'})" for r in self.singular]
        return "; ".join(parts)

    def record(self) -> dict:
        """The domain whole, as a certificate's record gives it (``docs/results.md``, "A certificate")."""
        return {**{k: str(v) for k, v in self.description.items()}, "coordinates": self.sides(),
                **({"outside the coordinate box's domain": [r.description for r in self.outside]} if self.outside else {}),
                "excluded": [r.description for r in self.excluded] or "none",
                "singular sets": [r.record() for r in self.singular] or "none"}


def _exact_text(x) -> str:
    f = Fraction(x)
    return str(f.numerator) if f.denominator == 1 else (repr(float(f)) if Fraction(float(f)) == f else str(f))


@dataclass(frozen=True)
class Inequality:
    """``value(x) <= limit`` (``sense="<="``) or ``>= limit`` for every ``x`` of ``domain``.

    ``value(*balls)`` returns an enclosure of the quantity on the box the balls describe (one ball per
    coordinate): an ``arb`` or a pair of floats ``(lo, hi)`` (for an end at infinity). ``strict``: the
    claim is strict (a box touching the limit is not certified either way). ``describe(point)``
    (optional) turns a point into the claim's own input (a matrix, a tree) for the report."""

    name: str
    statement: str
    domain: Domain
    value: Callable[..., Any]
    limit: Any = 0
    sense: str = "<="
    strict: bool = False
    describe: Callable[[tuple[float, ...]], dict] | None = None
    #: Also bound ``value`` by its mean-value form (``value`` written with :class:`theory.intervals.Jet`'s
    #: operations), and keep the narrower of the two enclosures.
    centred: bool = False

    def __post_init__(self):
        if self.sense not in ("<=", ">="):
            raise TheoryError(f"inequality {self.name!r}: sense must be '<=' or '>=', got {self.sense!r}")

    def enclose(self, box: Box) -> tuple[float, float]:
        """The enclosure of ``value`` on ``box``, as floats rounded outward (``(-inf, inf)`` when it is
        not finite: a box where the formula breaks down is left open, never certified)."""
        try:
            return _finite_or_open(bounds(self.value(*box.balls())))
        except (ZeroDivisionError, ValueError, OverflowError):  # e.g. a log of a ball reaching 0
            return -math.inf, math.inf

    def enclose_centred(self, box: Box, lo: float, hi: float) -> tuple[float, float, tuple[float, ...] | None]:
        """``[lo, hi]`` (an enclosure on ``box``) narrowed by the mean-value form ``value(c) + sum_i
        g_i (x_i - c_i)``, ``c`` the centre and ``g_i`` the jet's enclosure of the ``i``-th partial
        derivative on the box (:class:`theory.intervals.Jet`); with each side's smear ``max |g_i| (hi_i -
        lo_i)`` (None when the jet could not be evaluated), which :meth:`Box.split` halves first."""
        if box.lo == box.hi:
            return lo, hi, None
        balls = box.balls()
        try:
            jet = self.value(*Jet.variables(balls))
            if not isinstance(jet, Jet):  # a value with an end at infinity: nothing to narrow
                return lo, hi, None
            centre = box.centre()
            mean_value = self.value(*(arb(c) for c in centre))
            for g, ball, c in zip(jet.g, balls, centre):
                mean_value += g * (ball - c)
            mlo, mhi = _finite_or_open(bounds(mean_value))
            smear = tuple(max(-lower(g), upper(g)) * (b - a) for g, a, b in zip(jet.g, box.lo, box.hi))
        except (ZeroDivisionError, ValueError, OverflowError):
            return lo, hi, None
        return max(lo, mlo), min(hi, mhi), smear


def _finite_or_open(lohi: tuple[float, float]) -> tuple[float, float]:
    lo, hi = lohi
    return (-math.inf, math.inf) if math.isnan(lo) or math.isnan(hi) else (lo, hi)


@dataclass
class Certificate:
    """The outcome of :func:`certify` on one :class:`Inequality` (module docstring).

    ``boxes``: enclosures evaluated (boxes and centre points); ``certified``, ``excluded``, ``open``:
    boxes that ended certified, inside an exclusion, or undecided; ``depth``: the most halvings of one
    box; ``seconds``: the process time of the search. ``bracket``: ``(lower, upper)``, certified bounds on
    the extreme of the value over the certified domain (``sup`` for ``<=``, ``inf`` for ``>=``; from the
    certified boxes alone when not ``tight``). ``counterexample`` and ``largest_open``: box records."""

    name: str
    statement: str
    status: str
    domain: Domain
    boxes: int
    certified: int
    excluded: int
    open: int
    depth: int
    precision: int
    seconds: float
    max_boxes: int
    bracket: tuple[float, float] = (math.nan, math.nan)
    counterexample: dict | None = None
    largest_open: dict | None = None
    reason: str = ""
    extras: dict = field(default_factory=dict)

    @property
    def proved(self) -> bool:
        return self.status == "PROVED"

    def record(self) -> dict:
        """Everything the report prints: the domain whole, the outcome, boxes, precision, time."""
        out = {"inequality": self.name, "statement": self.statement, "status": self.status,
               "domain": self.domain.record(), "domain in words": self.domain.text(), "boxes evaluated": self.boxes,
               "boxes certified": self.certified, "boxes excluded": self.excluded, "boxes left open": self.open,
               "deepest split": self.depth, "precision (bits)": self.precision,
               "time (s, process)": round(self.seconds, 4), "box budget": self.max_boxes}
        if not any(math.isnan(v) for v in self.bracket):
            out["bracket on the extreme"] = list(self.bracket)
        if self.counterexample is not None:
            out["counterexample box"] = self.counterexample
        if self.largest_open is not None:
            out["largest open box"] = self.largest_open
        if self.reason:
            out["reason"] = self.reason
        return {**out, **self.extras}


def certify(ineq: Inequality, *, max_boxes: int = 20000, precision: int = PRECISION, tight: bool = False,
            rel_gap: float = 1e-3) -> Certificate:
    """Decide ``ineq`` on its whole domain by branch-and-bound (module docstring).

    ``max_boxes`` caps the enclosures evaluated; ``precision`` is arb's working precision in bits;
    with ``tight`` the search goes on after the claim is decided, until the bracket on the extreme is
    within ``rel_gap`` (relative to ``max(1, |extreme|)``) or the budget is spent."""
    if max_boxes < 1:
        raise TheoryError(f"max_boxes must be >= 1, got {max_boxes}")
    start = time.process_time()
    old = flint.ctx.prec
    flint.ctx.prec = int(precision)
    try:
        cert = _search(ineq, max_boxes, tight, rel_gap)
    finally:
        flint.ctx.prec = old
    cert.precision, cert.seconds = int(precision), time.process_time() - start
    return cert


def _search(ineq: Inequality, max_boxes: int, tight: bool, rel_gap: float) -> Certificate:
    dom = ineq.domain
    root = dom.box()
    flags = tuple(dom.logit) + (False,) * (len(root.lo) - len(dom.logit))
    scale = [max((_logit(b) - _logit(a)) if f else (b - a), 1e-300) for a, b, f in zip(root.lo, root.hi, flags)]
    # internally always "g <= L": g = value for "<=", g = -value for ">="
    flip = -1.0 if ineq.sense == ">=" else 1.0
    limit = flip * Fraction(ineq.limit)
    L_lo, L_hi = round_down(limit), round_up(limit)

    def enclose(box, decided=lambda lo, hi: True):
        """``box``'s enclosure of ``g`` and the sides' smears (None when unknown); narrowed by the
        mean-value form (``ineq.centred``) unless the plain one already ``decided`` the box."""
        lo, hi = ineq.enclose(box)
        if flip < 0:
            lo, hi = -hi, -lo
        smear = None
        if ineq.centred and not decided(lo, hi):
            if flip > 0:
                lo, hi, smear = ineq.enclose_centred(box, lo, hi)
            else:
                nlo, nhi, smear = ineq.enclose_centred(box, -hi, -lo)
                lo, hi = -nhi, -nlo
        return lo, hi, smear

    unhandled = [r for r in dom.singular if not r.handling]
    stats = {"boxes": 0, "certified": 0, "excluded": 0, "depth": 0, "outside": 0}

    def result(status, open_=0, **kw):
        cert = Certificate(ineq.name, ineq.statement, status, dom, stats["boxes"], stats["certified"], stats["excluded"],
                           open_, stats["depth"], 0, 0.0, max_boxes, **kw)
        if dom.outside:
            cert.extras["boxes outside the domain"] = stats["outside"]
        return cert

    if unhandled and not dom.excluded and any(r.meets(root) for r in unhandled):
        names = "; ".join(r.description for r in unhandled)
        return result("REFUSED", reason=f"the domain meets the singular set ({names}), where both sides vanish and no "
                                        "enclosure can close, and the claim neither handles it nor excludes a "
                                        "neighbourhood of it")

    def certifiable(box, hi):
        ok = hi < L_lo if ineq.strict else hi <= L_lo
        return ok and not any(r.meets(box) for r in unhandled)

    def violating(box, lo):
        beyond = lo >= L_hi if ineq.strict else lo > L_hi
        return (beyond and not any(r.meets(box) for r in dom.singular) and not any(r.meets(box) for r in dom.outside)
                and dom.contains(box.centre()))

    best_low, best_point = -math.inf, None
    certified_top = -math.inf  # the largest upper end among certified boxes
    found = None  # the first certified counterexample box
    heap: list = []
    counter = itertools.count()
    unsplittable: list[tuple[Box, float, float]] = []

    def probe(box):
        """The centre's enclosure: its lower end is a certified lower bound on the extreme."""
        nonlocal best_low, best_point
        pt = box.point()
        if not dom.contains(pt.lo) or any(r.covers(pt) for r in dom.excluded):
            return
        stats["boxes"] += 1
        lo, _, _ = enclose(pt)
        if lo > best_low:
            best_low, best_point = lo, pt.lo

    def settle(hi):
        nonlocal certified_top
        stats["certified"] += 1
        certified_top = max(certified_top, hi)

    def push(box, depth):
        nonlocal found
        if any(r.covers(box) for r in dom.outside):
            stats["outside"] += 1
            return
        if any(r.covers(box) for r in dom.excluded):
            stats["excluded"] += 1
            return
        stats["boxes"] += 1
        stats["depth"] = max(stats["depth"], depth)
        lo, hi, smear = enclose(box, lambda lo, hi: (certifiable(box, hi) and (not tight or hi <= best_low))
                                or (found is None and violating(box, lo)))
        if found is None and violating(box, lo):
            found = (box, lo, hi)
            return
        if tight:
            probe(box)
        if certifiable(box, hi) and (not tight or hi <= best_low):  # tight: keep what may hold the extreme
            settle(hi)
            return
        # tight: the box that may hold the largest value first (it bounds the extreme); otherwise the box
        # nearest to failing everywhere first, so that a false claim's counterexample is found early
        heapq.heappush(heap, (-hi if tight else -lo, next(counter), depth, box, lo, hi, smear))

    push(root, 0)
    budget_spent = False
    while heap and found is None:
        if tight and heap[0][5] - best_low <= rel_gap * max(1.0, abs(best_low)):
            break
        if stats["boxes"] >= max_boxes:
            budget_spent = True
            break
        _, _, depth, box, lo, hi, smear = heapq.heappop(heap)
        if tight and hi <= best_low and certifiable(box, hi):
            settle(hi)
            continue
        axis = next((r.across for r in dom.excluded if r.across is not None and r.meets(box)), None)
        if axis is not None:
            smear = tuple(math.inf if i == axis else 0.0 for i in range(len(box.lo)))
        halves = box.split(scale, flags, smear)
        if halves is None:
            unsplittable.append((box, lo, hi))
            continue
        for half in halves:
            push(half, depth + 1)

    open_boxes = [(b, lo, hi) for _, _, _, b, lo, hi, _ in heap] + unsplittable
    if tight:  # what is left open is decided by its upper end
        for b, lo, hi in list(open_boxes):
            if found is None and certifiable(b, hi):
                settle(hi)
                open_boxes.remove((b, lo, hi))
    top = max([hi for _, _, hi in open_boxes] + [certified_top])
    low = best_low if tight else math.nan
    bracket = (low, top) if flip > 0 else (-top, -low)
    describe = ineq.describe or (lambda point: {})
    if found is not None:
        box, lo, hi = found
        centre = box.centre()
        rec = {"box": box.record(dom.names), "centre": dict(zip(dom.names, centre)),
               "enclosure of the value on the box": sorted([flip * lo, flip * hi]),
               "claimed": f"{ineq.sense} {ineq.limit}", **describe(centre)}
        return result("COUNTEREXAMPLE", len(open_boxes), bracket=bracket, counterexample=rec)
    extras = {}
    if best_point is not None:
        extras = {"best point": dict(zip(dom.names, best_point)),
                  **({"best point in the claim's terms": describe(best_point)} if ineq.describe else {})}
    if not open_boxes:
        return result("PROVED", bracket=bracket, extras=extras)
    box, lo, hi = max(open_boxes, key=lambda t: t[0].volume(scale))
    if budget_spent:
        reason = f"{len(open_boxes)} boxes left open after {stats['boxes']} enclosures (the budget is {max_boxes})"
    elif unsplittable:
        reason = f"{len(unsplittable)} boxes cannot be split further at float resolution"
    else:
        reason = f"the bracket on the extreme closed within {rel_gap:g}, with its upper end not below the limit"
    meets = [r.description for r in unhandled if r.meets(box)]
    return result("UNDECIDED", len(open_boxes), bracket=bracket, extras=extras, reason=reason,
                  largest_open={"box": box.record(dom.names), "share of the domain": box.volume(scale),
                                "enclosure of the value on the box": sorted([flip * lo, flip * hi]),
                                **({"meets the singular set": meets} if meets else {})})


# -- two-state domains ----------------------------------------------------------------------------
def _lam_bounds(box: Box) -> tuple[float, float]:
    """Bounds on ``lam = 1 - a - b`` over a box whose first two coordinates are ``a, b``."""
    from .intervals import lower, upper

    return lower(1 - arb(box.hi[0]) - arb(box.hi[1])), upper(1 - arb(box.lo[0]) - arb(box.lo[1]))


def two_state_domain(floor, description: Mapping[str, str], *, handling: str = "", exclude_below=None,
                     extra: Sequence[tuple[str, Any, Any, bool]] = (), coordinates: str = "a, b") -> Domain:
    """The two-state chains ``pi = [[1 - a, a], [b, 1 - b]]`` with every entry ``>= floor`` (an exact
    number, e.g. ``Fraction(1, 20)``), with ``extra`` coordinates ``(name, lower, upper, logit)`` after
    the chain's two.

    ``coordinates="a, b"``: ``a, b`` in ``[floor, 1 - floor]``, split on the logit scale.
    ``coordinates="lam, m"``: the second eigenvalue ``lam = 1 - a - b`` in ``[2 floor - 1, 1 - 2 floor]``
    and the stationary law's first entry ``m = mu_0 = b / (a + b)`` in ``[floor, 1 - floor]`` (``a = (1 -
    lam)(1 - m)``, ``b = (1 - lam) m``), where the points with an entry below the floor are outside the
    domain: the sets where ``lam`` is small are then boxes.

    Its singular set is ``lam = 0`` (``pi = 1 mu^T``, rank one: ``x_h`` is independent of its past, and
    every information and gradient signal vanishes). ``handling`` says how the claim deals with it;
    ``exclude_below`` (an exact ``eps > 0``) excludes the neighbourhood ``|lam| < eps`` instead, and
    the domain says so."""
    floor = Fraction(floor)
    if not 0 < floor < Fraction(1, 2):
        raise TheoryError(f"a two-state domain needs 0 < floor < 1/2, got {floor}")
    if coordinates not in ("a, b", "lam, m"):
        raise TheoryError(f"coordinates must be 'a, b' or 'lam, m', got {coordinates!r}")
    lam_of = _lam_bounds if coordinates == "a, b" else (lambda box: (box.lo[0], box.hi[0]))
    singular = Region("lam = 1 - a - b = 0 (pi = 1 mu^T has rank one)",
                      meets=lambda box: lam_of(box)[0] <= 0 <= lam_of(box)[1], handling=handling)
    excluded = ()
    if exclude_below is not None:
        eps = Fraction(exclude_below)
        lo, hi = -round_down(eps), round_down(eps)  # inside the float box (-eps, eps), so inside |lam| < eps
        excluded = (Region(f"|lam| = |1 - a - b| < {_exact_text(eps)} (pi within {_exact_text(eps)} of rank one in "
                           "its second eigenvalue)", meets=lambda box: lam_of(box)[1] > lo and lam_of(box)[0] < hi,
                           covers=lambda box: lo < lam_of(box)[0] and lam_of(box)[1] < hi,
                           across=0 if coordinates == "lam, m" else None),)
    described = {"d": "2", "pi": "[[1 - a, a], [b, 1 - b]], every entry >= " + _exact_text(floor), **description}
    if coordinates == "a, b":
        names = ("a = pi[0,1]", "b = pi[1,0]")
        lower, upper, logit, outside = (floor, floor), (1 - floor, 1 - floor), (True, True), ()
    else:
        names = ("lam = 1 - a - b", "m = mu_0 = b / (a + b)")
        lower, upper, logit = (2 * floor - 1, floor), (1 - 2 * floor, 1 - floor), (False, True)
        # conservative float tests: "meets" may say yes wrongly, "covers" never does
        low_up, low_down, high_down, high_up = round_up(floor), round_down(floor), round_down(1 - floor), round_up(1 - floor)

        def entries(box):  # bounds on a = (1 - lam)(1 - m) and b = (1 - lam) m over the box
            from .intervals import bounds as ends

            lam, m = box.balls()[:2]
            return ends((1 - lam) * (1 - m)), ends((1 - lam) * m)

        outside = (Region(f"points whose a = (1 - lam)(1 - m) or b = (1 - lam) m is outside [{_exact_text(floor)}, "
                          f"{_exact_text(1 - floor)}]",
                          meets=lambda box: any(lo < low_up or hi > high_down for lo, hi in entries(box)),
                          covers=lambda box: any(hi < low_down or lo > high_up for lo, hi in entries(box))),)
    names += tuple(e[0] for e in extra)
    return Domain(names, lower + tuple(e[1] for e in extra), upper + tuple(e[2] for e in extra), described,
                  excluded=excluded, singular=(singular,), logit=logit + tuple(e[3] for e in extra), outside=outside)
