"""Every registered claim names its primary reading: the paper's own statement, with the seed file
and the lines it is quoted from, and a formalization text that says which reading decides.

The seeds live in ``shared/seeds/`` beside the clone (``<repo>/../shared/seeds``); a user's clone
may not have them, and the seed-file checks are then skipped (the others still run).
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from sim.claims import all_claims

SEEDS = Path(__file__).resolve().parents[3].parent / "shared" / "seeds"
CLAIMS = all_claims()
#: "41", "41-43", or several of them separated by commas ("183, 253-258").
LINES = re.compile(r"^\s*\d+(\s*-\s*\d+)?(\s*,\s*\d+(\s*-\s*\d+)?)*\s*$")


def _ranges(lines: str) -> list[tuple[int, int]]:
    out = []
    for part in lines.split(","):
        lo, _, hi = part.strip().partition("-")
        out.append((int(lo), int(hi or lo)))
    return out


def _seed_file(seed: str) -> Path:
    found = sorted(SEEDS.glob(f"{seed}_*.txt"))
    assert len(found) == 1, f"seed {seed!r}: expected one file {SEEDS}/{seed}_*.txt, found {[p.name for p in found]}"
    return found[0]


def _need_seeds():
    if not SEEDS.is_dir():
        pytest.skip(f"the seed summaries are not beside this clone ({SEEDS} is absent): the seed files and line "
                    "numbers cannot be checked here (CI has shared/ beside the clone)")


def test_every_claim_has_a_primary_reading():
    missing = [c.id for c in CLAIMS if c.primary is None]
    assert not missing, f"claims without a primary reading (Claim.primary): {', '.join(missing)}"


def test_primary_readings_cite_well_formed_lines():
    bad = [f"{c.id}: {c.primary.lines!r}" for c in CLAIMS if c.primary is not None and
           (not LINES.match(c.primary.lines) or any(lo > hi or lo < 1 for lo, hi in _ranges(c.primary.lines)))]
    assert not bad, "line references must be 'N', 'N-M' or a comma list of them, increasing: " + "; ".join(bad)


def test_primary_readings_point_inside_an_existing_seed_file():
    _need_seeds()
    bad = []
    for c in CLAIMS:
        if c.primary is None:
            continue
        found = sorted(SEEDS.glob(f"{c.primary.seed}_*.txt"))
        if len(found) != 1:
            bad.append(f"{c.id}: seed {c.primary.seed!r} matches {len(found)} files in {SEEDS}")
            continue
        n = len(found[0].read_text(encoding="utf-8").splitlines())
        for lo, hi in _ranges(c.primary.lines) if LINES.match(c.primary.lines) else []:
            if hi > n:
                bad.append(f"{c.id}: lines {lo}-{hi} but {found[0].name} has {n} lines")
    assert not bad, "; ".join(bad)


def test_primary_lines_are_not_blank():
    """The cited lines hold text (not a blank line between paragraphs)."""
    _need_seeds()
    bad = []
    for c in CLAIMS:
        if c.primary is None or not LINES.match(c.primary.lines):
            continue
        text = _seed_file(c.primary.seed).read_text(encoding="utf-8").splitlines()
        for lo, hi in _ranges(c.primary.lines):
            if hi <= len(text) and not any(t.strip() for t in text[lo - 1:hi]):
                bad.append(f"{c.id}: seed {c.primary.seed} lines {lo}-{hi} are blank")
    assert not bad, "; ".join(bad)


#: How a statement names its deciding reading ("Primary reading: ...", "Deciding reading (...)", "Decided by").
DECIDES = re.compile(r"primary reading|deciding reading|\bdecides\b|\bdecided by\b", re.IGNORECASE)


def test_every_statement_says_which_reading_decides():
    """The formalization shown in the report names the deciding reading and what is reported beside it
    as findings (e.g. 'Primary reading: ...; reported as findings: ...')."""
    bad = [c.id for c in CLAIMS if c.primary is not None and
           not (DECIDES.search(c.statement) and "finding" in c.statement.lower())]
    assert not bad, (f"statements that do not say which reading decides and what is reported as findings "
                     f"('Primary reading: ...; reported as findings: ...'): {', '.join(bad)}")


def test_primary_readings_are_complete():
    bad = [c.id for c in CLAIMS if c.primary is not None and not (c.primary.setting and c.primary.review)]
    assert not bad, f"primary readings without the paper's setting or the review: {', '.join(bad)}"
