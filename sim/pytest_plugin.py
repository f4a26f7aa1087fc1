"""Claims as pytest tests: ``pytest --icl-verify 'W.L*,N.K3'``.

Registered through the ``pytest11`` entry point, so pytest loads this module in every
session of every project that installed the package. It is inert unless ``--icl-verify``
is given: loading it imports nothing of ``sim`` (no torch, no claims) and only adds the
options; the hooks that collect and run claims are registered by :func:`pytest_configure`
when the option is there.

With ``--icl-verify PATTERN`` pytest collects one item per selected claim and tier of the
profile (``icl-verify::W.L3[exact]``) and runs it through the project's own runner
(:func:`sim.runner.evaluate_claim`, one tier at a time). PASS passes; FAIL fails with the
tier's summary, counterexample and numbers; ERROR is a pytest error (at setup, with the
check's traceback); INCONCLUSIVE, ASSUMPTION_UNMET and NOT_RUN are skipped with their reason,
or fail with ``--icl-strict``. A claim with no tier in the profile is one skipped item that
names the profile deciding it. Node ids depend only on the options, so the items are the same
on every ``pytest -n`` (xdist) worker.
"""
from __future__ import annotations

import argparse
import dataclasses
import json

import pytest

_ROOT = "icl-verify"  # the node id "path" every item lives under: icl-verify::W.L3[exact]
_PROFILES = ("quick", "standard", "paper")  # checked against sim.claims.base.PROFILES by RunConfig
_SKIPPED = ("INCONCLUSIVE", "ASSUMPTION_UNMET", "NOT_RUN")


def pytest_addoption(parser) -> None:
    """Add the ``--icl-*`` options (the only thing this plugin does without ``--icl-verify``)."""
    group = parser.getgroup("icl-verify", "claims of icl-verify as tests (sim.pytest_plugin)")
    group.addoption("--icl-verify", default=None, metavar="PATTERN",
                    help="collect one test per claim and tier of the claims matching PATTERN (comma-separated globs "
                         "over claim ids, e.g. 'W.L*,N.K3'); without it this plugin does nothing")
    group.addoption("--icl-profile", default="quick", choices=_PROFILES,
                    help="profile the claims run in: quick, standard or paper (default quick)")
    group.addoption("--icl-seed", type=int, default=0, metavar="N", help="master seed (default 0)")
    group.addoption("--icl-prior", default=None, metavar="SPEC",
                    help="run the prior-dependent claims under this prior on transition matrices, e.g. "
                         "'dirichlet(alpha=0.1)' (as `icl-verify prior SPEC`); the other claims are skipped")
    group.addoption("--icl-plugin", action="append", default=[], metavar="FILE",
                    help="a Python file defining CLAIMS = [...] of your own claims (repeatable)")
    group.addoption("--icl-device", default="auto", choices=("auto", "cpu", "cuda"),
                    help="torch device for Monte Carlo and training (default auto: cuda when present)")
    group.addoption("--icl-corpus", default=None, metavar="DIR",
                    help="a counterexample corpus (as `icl-verify run --corpus DIR`): FAILs are stored there and the "
                         "property tiers replay it before any search (default: none)")
    group.addoption("--icl-strict", action="store_true",
                    help="fail (instead of skip) a tier that is INCONCLUSIVE, ASSUMPTION_UNMET or NOT_RUN")


def pytest_configure(config) -> None:
    """With ``--icl-verify PATTERN``, register the hooks that collect and run the matching claims."""
    pattern = config.getoption("icl_verify", None)
    if pattern is None:
        return
    config.pluginmanager.register(_ClaimSession(config, pattern), "icl-verify-claims")


class _ClaimSession:
    """Holds what the options chose (checked here, so a bad option is a usage error before any
    test runs, on the xdist controller as on each worker) and adds the items to the collection."""

    def __init__(self, config, pattern: str):
        from sim import cli
        from sim.files import RunError

        ns = argparse.Namespace(profile=config.getoption("icl_profile"), claims=pattern,
                                seed=config.getoption("icl_seed"), device=config.getoption("icl_device"), z=3.0)
        self.strict = bool(config.getoption("icl_strict"))
        self.prior = None
        invoked = config.invocation_params.dir
        try:
            cli._load_plugins([invoked / p for p in config.getoption("icl_plugin")])
            self.claims = cli._select(pattern)
            prior_spec = None
            if config.getoption("icl_prior") is not None:
                self.prior = _parse_prior(config.getoption("icl_prior"))
                prior_spec = self.prior.spec()
                if not any(c.prior_dependent for c in self.claims):
                    from sim import claims as registry

                    dep = [c.id for c in registry.all_claims() if c.prior_dependent]
                    raise cli._UserError(f"none of the claims matching {pattern!r} depends on the prior; "
                                         f"prior-dependent claims: {', '.join(dep)}")
            self.config = cli._make_config(ns, prior_spec=prior_spec)
        except (cli._UserError, RunError) as exc:
            raise pytest.UsageError(f"icl-verify: {exc}") from None
        self.corpus = None
        if config.getoption("icl_corpus") is not None:
            from sim.corpus import Corpus

            self.corpus = Corpus(invoked / config.getoption("icl_corpus"), self.config)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_make_collect_report(self, collector):
        """Add the ``icl-verify`` collector to what the session collects (after the test files),
        so its items are counted, listed by --collect-only and filtered by -k/-m/--deselect."""
        outcome = yield
        if isinstance(collector, pytest.Session):
            rep = outcome.get_result()
            if rep.passed:
                rep.result.append(Claims.from_parent(collector, name=_ROOT, nodeid=_ROOT, owner=self))

    def items(self, parent) -> list:
        profile, out = self.config.profile, []
        for claim in self.claims:
            if self.prior is not None and not claim.prior_dependent:
                reason = f"{claim.id} does not depend on the prior; run it without --icl-prior"
                out.append(ClaimItem.from_parent(parent, name=claim.id, owner=self, claim=claim, tier=None,
                                                 reason=reason))
                continue
            tiers = claim.tiers_for(profile)
            if not tiers:
                reason = claim.pending or (f"{claim.id} is not run in profile {profile!r}; it is decided by profile "
                                           f"{claim.decided_by!r} (--icl-profile {claim.decided_by})")
                out.append(ClaimItem.from_parent(parent, name=claim.id, owner=self, claim=claim, tier=None,
                                                 reason=reason))
                continue
            out += [ClaimItem.from_parent(parent, name=f"{claim.id}[{tier}]", owner=self, claim=claim, tier=tier,
                                          reason="") for tier in tiers]
        return out


def _parse_prior(spec: str):
    from sim.cli import _UserError
    from sim.priors import PriorError, parse_prior

    try:
        prior = parse_prior(spec)
    except PriorError as exc:
        raise _UserError(str(exc)) from None
    if prior.d == 1:
        raise _UserError(f"{prior.spec()} is a prior on 1 state: the claims have nothing to check; give d >= 2")
    return prior


def _tmp_dir(config, name: str):
    """A fresh folder for a tier's figures: pytest's tmp_path_factory (under its basetemp)."""
    factory = getattr(config, "_tmp_path_factory", None)  # set by pytest's tmpdir plugin
    if factory is None:  # run with -p no:tmpdir
        import tempfile
        from pathlib import Path

        return Path(tempfile.mkdtemp(prefix=f"{name}-"))
    return factory.mktemp(name, numbered=True)


class Claims(pytest.Collector):
    """The parent of the claim items (``icl-verify`` in node ids and in junit's classname)."""

    def __init__(self, *, owner: _ClaimSession, **kw):
        super().__init__(**kw)
        self.owner = owner

    def collect(self):
        """One :class:`ClaimItem` per selected claim and tier of the profile."""
        return self.owner.items(self)

    def reportinfo(self):
        """``(path, None, "")``: the items are reported at the ``icl-verify`` pseudo-path, not a file line."""
        return self.config.rootpath / _ROOT, None, ""


class ClaimItem(pytest.Item):
    """One tier of one claim (or, with ``tier=None``, a claim that is skipped as a whole)."""

    def __init__(self, *, owner: _ClaimSession, claim, tier: str | None, reason: str, **kw):
        super().__init__(**kw)
        self.owner, self.claim, self.tier, self.reason = owner, claim, tier, reason
        self.result = self.out_dir = None
        self.user_properties.append(("icl_claim", claim.id))
        if tier is not None:
            self.user_properties.append(("icl_tier", tier))

    def reportinfo(self):
        """``(path, 0, "<claim id> [<tier>]")``: where a failure's section says it happened."""
        # The domain heads a failure's section; it must not end the node id, or the terminal would print
        # its dots as "::" (icl-verify::W::L3[exact]).
        where = self.claim.id if self.tier is None else f"{self.claim.id} [{self.tier}]"
        return self.config.rootpath / _ROOT, 0, where

    def setup(self) -> None:
        """Run the tier here, so that a crashed check (ERROR) is a pytest error, not a failure."""
        if self.tier is None:
            return
        from sim.runner import evaluate_claim

        config = dataclasses.replace(self.owner.config, overrides={self.claim.id: {"tiers": (self.tier,)}})
        out_dir = _tmp_dir(self.config, f"icl-{self.claim.id}-{self.tier}")
        result = evaluate_claim(self.claim, config, out_dir, prior=self.owner.prior, corpus=self.owner.corpus)
        self.result = result.tiers[0]
        self.out_dir = out_dir
        if str(self.result.verdict) == "ERROR":
            pytest.fail(f"{self.claim.id} [{self.tier}]: ERROR: {self.result.summary}\n\n"
                        f"{self.result.error or ''}".rstrip(), pytrace=False)

    def runtest(self) -> None:
        """Turn the tier's verdict into a test outcome: PASS passes, FAIL fails with the counterexample,
        INCONCLUSIVE / ASSUMPTION_UNMET / NOT_RUN skip (fail under ``--icl-strict``)."""
        if self.tier is None:
            _skip(self.reason)
        res = self.result
        verdict = str(res.verdict)
        self.user_properties.append(("icl_verdict", verdict))
        if verdict == "PASS":
            return
        if verdict == "FAIL":
            pytest.fail(describe(self.claim, res, self.out_dir), pytrace=False)
        if verdict in _SKIPPED:
            if self.owner.strict:
                pytest.fail(f"{describe(self.claim, res, self.out_dir)}\n(--icl-strict fails {', '.join(_SKIPPED)})",
                            pytrace=False)
            reason = f"{self.claim.id} [{self.tier}]: {verdict}: {res.summary}"
            _skip(reason + (f" (would be decided by: {res.budget})" if res.budget else ""))
        pytest.fail(f"{self.claim.id} [{self.tier}]: unexpected verdict {verdict!r}", pytrace=False)


def _skip(reason: str):
    """pytest.skip, reported at the item (icl-verify:1) rather than at this line of the plugin."""
    exc = pytest.skip.Exception(reason)
    exc._use_item_location = True  # what pytest's own skip marks do; ignored where unknown
    raise exc


def describe(claim, res, out_dir=None) -> str:
    """The failure text of a tier: verdict and summary, the assumptions that did not hold, the
    counterexample (JSON) and the numbers."""
    from sim.verdict import to_jsonable

    lines = [f"{claim.id} [{res.tier}]: {res.verdict}: {res.summary}", f"claim: {claim.title}",
             f"source: {claim.source.cite()}"]
    broken = [a for a in res.assumptions if a.holds is not True]
    if broken:
        lines.append("assumptions not met:")
        lines += [f"  {a.name}: {'undecided' if a.holds is None else 'violated'}"
                  + (f" ({a.detail})" if a.detail else "") for a in broken]
    if res.counterexample:
        lines.append("counterexample:")
        lines.append(_json_lines(to_jsonable(res.counterexample)))
    if res.corpus:
        lines.append("counterexample corpus:")
        lines += [f"  {c['status']}: {c['file']}: {c['detail']}" for c in res.corpus]
    if res.numbers:
        lines.append("numbers:")
        lines += [f"  {n.name} = {n.format()}" + (f"  ({n.note})" if n.note else "") for n in res.numbers]
    failed = [f for f in res.findings if str(f.verdict) not in ("PASS",)]
    if failed:
        lines.append("findings (never deciding):")
        lines += [f"  {f.kind}: {f.verdict}: {f.reading}: {f.detail}" for f in failed]
    if res.budget:
        lines.append(f"would be decided by: {res.budget}")
    if res.figures:
        lines.append("figures: " + ", ".join(str(out_dir / f) if out_dir else f for f in res.figures))
    return "\n".join(lines)


def _json_lines(obj) -> str:
    """JSON, one top-level key a line (a matrix stays on its line), indented by two spaces."""
    dump = lambda v: json.dumps(v, allow_nan=False, default=str)  # noqa: E731
    if not isinstance(obj, dict) or not obj:
        return "  " + dump(obj)
    return "  {\n" + ",\n".join(f"    {dump(str(k))}: {dump(v)}" for k, v in obj.items()) + "\n  }"
