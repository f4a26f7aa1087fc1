"""Sphinx extension: the pages of the docs that are generated from the code.

- ``claim-table`` and ``claim`` directives: the claim catalogue, read from the claim registry
  (:func:`sim.claims.all_claims`) at build time, with each claim's verdict and findings in the
  release run (``release.py``). One page per claim is written under ``_generated/catalogue/``
  when the build starts, so a claim added to a paper home, or in a plugin file named by
  ``ICL_VERIFY_DOCS_PLUGINS`` (paths separated by ``os.pathsep``), gets its page on the next build.
- ``cli-reference``: every command, its usage and its options, from :func:`sim.cli.build_parser`.
- A check that every public module, class and function the API reference documents has a
  docstring (inherited ones count); a missing one is a warning, so ``-W`` fails the build.
"""
from __future__ import annotations

import argparse
import os
import shutil
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import directives
from sphinx import addnodes
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

import release

logger = logging.getLogger(__name__)
CATALOGUE_DIR = "_generated/catalogue"
PLUGINS_ENV = "ICL_VERIFY_DOCS_PLUGINS"


def _claims():
    from sim.claims import all_claims, load_plugin

    for path in filter(None, os.environ.get(PLUGINS_ENV, "").split(os.pathsep)):
        load_plugin(path)
    return all_claims()


def _page_name(claim_id: str) -> str:
    return f"{CATALOGUE_DIR}/{claim_id}"


def write_claim_pages(app) -> None:
    """One stub page per claim of the registry; the ``claim`` directive fills it at read time."""
    out = Path(app.srcdir) / CATALOGUE_DIR
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    for claim in _claims():
        (out / f"{claim.id}.md").write_text(f"```{{claim}} {claim.id}\n```\n")


def _para(*parts) -> nodes.paragraph:
    p = nodes.paragraph()
    for part in parts:
        p += part if isinstance(part, nodes.Node) else nodes.Text(str(part))
    return p


def _field(label: str, *parts) -> nodes.paragraph:
    return _para(nodes.strong(text=f"{label}: "), *parts)


def _doc_link(env, target: str, text: str) -> addnodes.pending_xref:
    ref = addnodes.pending_xref("", refdomain="std", reftype="doc", reftarget=f"/{target}",
                                refexplicit=True, refwarn=True, refdoc=env.docname)
    ref += nodes.inline(text=text)
    return ref


def _bullets(items) -> nodes.bullet_list:
    lst = nodes.bullet_list()
    for item in items:
        li = nodes.list_item()
        li += item if isinstance(item, nodes.Node) else _para(item)
        lst += li
    return lst


class ClaimDirective(SphinxDirective):
    """The page of one claim: the paper's statement, the formalization, assumptions, tiers per
    profile, the deciding profile, and the release run's verdict and findings."""

    required_arguments = 1

    def run(self):
        from sim.claims import get
        from sim.claims.base import PROFILES

        claim = get(self.arguments[0])
        summary = release.load(self.config.icl_release_summary)
        sec = nodes.section(ids=[nodes.make_id(f"claim-{claim.id}")])
        sec += nodes.title(text=f"{claim.id}: {claim.title}")
        sec += _field("Source", claim.source.cite() + (f": {claim.source.equation}" if claim.source.equation else ""))
        if claim.primary is not None:
            p = claim.primary
            sec += _field("The paper's statement (the reading that decides)", p.statement, f" [{p.cite()}]")
            if p.setting:
                sec += _field("Its setting", p.setting)
            if p.review:
                sec += _field("Why the checks decide this reading", p.review)
        sec += _field("Formalization checked", claim.statement)
        if claim.assumptions:
            sec += _field("Assumptions", "")
            sec += _bullets(claim.assumptions)
        sec += _field("Tiers", ", ".join(claim.tiers) or "none")
        rows = [f"{profile}: {', '.join(claim.tiers_for(profile)) or 'no tier (NOT_RUN)'}" for profile in PROFILES]
        sec += _bullets(rows)
        sec += _field("Deciding profile", claim.decided_by)
        if claim.pending:
            sec += _field("When not run", claim.pending)
        if claim.graph_input is not None:
            sec += _field("Takes a causal graph (run --graph)", claim.graph_input.form)
        sec += self._release(claim.id, summary)
        return [sec]

    def _release(self, claim_id: str, summary: dict) -> nodes.section:
        sec = nodes.section(ids=[nodes.make_id(f"claim-{claim_id}-release")])
        sec += nodes.title(text="In the release run")
        entry = summary["claims"].get(claim_id)
        if entry is None:
            sec += _para("Not in the release run ", nodes.literal(text=summary.get("run_id", "(none)")),
                         " (a claim added since, or a plugin's).")
            return sec
        sec += _field("Verdict", nodes.strong(text=entry["verdict"]),
                      f" in {summary['run_id']} (profile {summary['profile']}, master seed {summary['seed']}, "
                      f"commit {summary['git_commit'][:7]})")
        if entry["headline"] != entry["verdict"]:
            sec += _field("Headline", entry["headline"])
        if entry.get("note"):
            sec += _field("Note", entry["note"])
        if entry["findings"]:
            sec += _field("Findings (readings other than the paper's own, each with its own verdict)", "")
            sec += _bullets(
                _para(nodes.strong(text=f["verdict"]), f" [{f['tier']}, {f['kind']}] {f['reading']}: {f['detail']}")
                for f in entry["findings"])
        return sec


class ClaimTableDirective(SphinxDirective):
    """Every claim of the registry: id (linked to its page), source, release verdict, title."""

    def run(self):
        summary = release.load(self.config.icl_release_summary)
        claims = _claims()
        table = nodes.table()
        group = nodes.tgroup(cols=4)
        table += group
        for width in (8, 22, 12, 58):
            group += nodes.colspec(colwidth=width)
        head = nodes.thead()
        group += head
        head += self._row(["claim", "source", "verdict", "title"])
        body = nodes.tbody()
        group += body
        for claim in claims:
            verdict = summary["claims"].get(claim.id, {}).get("verdict", "—")
            body += self._row([_doc_link(self.env, _page_name(claim.id), claim.id), claim.source.cite(), verdict,
                               claim.title])
        toc = addnodes.toctree(parent=self.env.docname, entries=[(None, _page_name(c.id)) for c in claims],
                               includefiles=[_page_name(c.id) for c in claims], maxdepth=1, hidden=True, glob=False,
                               caption=None, titlesonly=True, numbered=0, includehidden=False)
        wrapper = nodes.compound(classes=["toctree-wrapper"])
        wrapper += toc
        return [table, wrapper]

    @staticmethod
    def _row(cells) -> nodes.row:
        row = nodes.row()
        for cell in cells:
            entry = nodes.entry()
            entry += _para(cell)
            row += entry
        return row


def _actions(parser: argparse.ArgumentParser):
    return [a for a in parser._actions if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))]


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


class CliReferenceDirective(SphinxDirective):
    """``icl-verify`` and each of its commands: usage, description, options, epilog."""

    option_spec = {"prog": directives.unchanged}

    def run(self):
        from sim.cli import build_parser

        parser = build_parser()
        out = [self._command(parser, parser.prog, None)]
        helps = {a.dest: a.help for a in parser._subparsers._group_actions[0]._choices_actions}
        for name, sub in _subcommands(parser).items():
            out.append(self._command(sub, f"{parser.prog} {name}", helps.get(name)))
        return out

    def _command(self, parser, prog: str, summary: str | None) -> nodes.section:
        sec = nodes.section(ids=[nodes.make_id(f"cli-{prog}")])
        sec += nodes.title(text=prog)
        if summary:
            sec += _para(summary[0].upper() + summary[1:] + ".")
        usage = parser.format_usage().removeprefix("usage: ").strip()
        sec += nodes.literal_block(usage, usage)
        if parser.description:
            for block in parser.description.split("\n\n"):
                sec += _para(block)
        items = nodes.definition_list()
        for action in _actions(parser):
            term = ", ".join(action.option_strings) or action.metavar or action.dest
            if action.option_strings and action.nargs != 0:
                term += " " + (action.metavar or action.dest.upper())
            text = action.help or ""
            if action.choices and not isinstance(action.choices, dict):
                text += f" (one of: {', '.join(map(str, action.choices))})"
            item = nodes.definition_list_item()
            item += nodes.term("", "", nodes.literal(text=term))
            definition = nodes.definition()
            definition += _para(text % {"default": action.default} if "%(default)" in text else text)
            item += definition
            items += item
        sec += items
        if parser.epilog:
            sec += nodes.literal_block(parser.epilog, parser.epilog)
        return sec


def check_docstring(app, what, name, obj, options, lines) -> None:
    """Warn (an error under -W) when a public module, class or function has no docstring."""
    if what not in ("module", "class", "exception", "function", "method"):
        return
    if any(part.startswith("_") for part in name.split(".")):
        return
    if not any(line.strip() for line in lines):
        logger.warning("public %s %s has no docstring", what, name, type="icl", subtype="docstring")


def public_bases(app, name, obj, options, bases) -> None:
    """Show a private base class (``_Transform``) as its own bases: a private name has no page,
    so "Bases:" would name a link target that does not exist."""

    def public(cls):
        if cls.__name__.startswith("_") and cls.__module__.split(".")[0] in ("sim", "theory"):
            return [b for base in cls.__bases__ for b in public(base)]
        return [cls]

    shown = [b for base in bases for b in public(base) if b is not object]
    bases[:] = list(dict.fromkeys(shown)) or [object]


def setup(app):
    app.add_config_value("icl_release_summary", "", "env")
    app.add_directive("claim", ClaimDirective)
    app.add_directive("claim-table", ClaimTableDirective)
    app.add_directive("cli-reference", CliReferenceDirective)
    app.connect("builder-inited", write_claim_pages)
    app.connect("autodoc-process-docstring", check_docstring, priority=100)
    app.connect("autodoc-process-bases", public_bases)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
