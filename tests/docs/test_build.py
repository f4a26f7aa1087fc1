"""The docs site builds with no warning (``make docs-html`` runs sphinx-build with -W), and its
generated pages follow the code: a plugin claim gets its catalogue page, every command of the
argument parser its CLI section, every module of ``theory`` and ``sim`` its API page."""
import os
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import sim
import theory
from sim.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
TOY_PLUGIN = ROOT / "tests" / "sim" / "data" / "user_claims.py"


def _build_site(out: Path) -> Path:
    """The site built by the Makefile's docs target with the toy plugin's claims added."""
    env = dict(os.environ, ICL_VERIFY_DOCS_PLUGINS=str(TOY_PLUGIN), OMP_NUM_THREADS="1")
    proc = subprocess.run(["make", "--no-print-directory", "-C", str(ROOT), "docs-html",
                           f"BIN={Path(sys.executable).parent}", f"DOCS_OUT={out}"],
                          capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, f"the docs build failed (warnings are errors):\n{proc.stdout[-4000:]}\n" \
                                 f"{proc.stderr[-8000:]}"
    assert f"open {out}/index.html" in proc.stdout
    return out


@pytest.mark.slow
def test_the_site_builds_and_follows_the_code(tmp_path_factory):
    """One build (the pages are generated into docs/, so two builds at once would race), then
    what it must hold. Not under ``tmp_path``: the site's tutorials/report.html is not a run's
    report, which conftest parses as XML there."""
    site = _build_site(tmp_path_factory.mktemp("site"))
    _every_claim_has_a_catalogue_page(site)
    _every_command_and_option_is_in_the_cli_reference(site)
    _every_module_has_an_api_page(site)


def _every_claim_has_a_catalogue_page(site):
    from sim.claims import all_claims

    ids = [c.id for c in all_claims()] + ["USER.MEAN", "USER.ROWS"]  # the papers' claims and the plugin's
    for cid in ids:
        page = site / "_generated" / "catalogue" / f"{cid}.html"
        assert page.exists(), f"no catalogue page for {cid}"
    table = (site / "catalogue.html").read_text()
    assert all(f"{cid}.html" in table for cid in ids)
    wl1 = (site / "_generated" / "catalogue" / "W.L1.html").read_text()
    assert "In the release run" in wl1 and "PASS" in wl1
    assert "Not in the release run" in (site / "_generated" / "catalogue" / "USER.MEAN.html").read_text()


def _every_command_and_option_is_in_the_cli_reference(site):
    page = (site / "cli.html").read_text()
    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    for name, command in sub.choices.items():
        assert f"icl-verify {name}" in page
        for action in command._actions:
            for option in action.option_strings:
                assert option in page, f"{name} {option} missing from the CLI reference"


def _every_module_has_an_api_page(site):
    for package in (theory, sim):
        names = [package.__name__] + [m.name for m in pkgutil.walk_packages(package.__path__, package.__name__ + ".")
                                      if not m.name.endswith(".__main__")]
        for name in names:
            assert (site / "_generated" / "api" / f"{name}.html").exists(), f"no API page for {name}"


@pytest.mark.slow
def test_a_broken_reference_and_a_missing_docstring_fail_the_build(tmp_path):
    """The site's own settings (docs/conf.py, icl_docs) turn both into errors under -W."""
    src = tmp_path / "src"
    src.mkdir()
    (tmp_path / "fake_api.py").write_text(
        '"""A module with two faults."""\n\n'
        'def documented():\n    """See :func:`fake_api.nowhere`."""\n\n\n'
        'def undocumented():\n    pass\n')
    (src / "conf.py").write_text(
        f"import sys\nsys.path.insert(0, {str(tmp_path)!r})\n"
        f"__file__ = {str(ROOT / 'docs' / 'conf.py')!r}\n"
        f"exec(open(__file__).read(), globals())\n")
    (src / "index.md").write_text("# Fake\n\n```{eval-rst}\n.. automodule:: fake_api\n   :members:\n```\n")
    proc = subprocess.run([sys.executable, "-m", "sphinx", "-q", "-W", "--keep-going", "-b", "html", str(src),
                           str(tmp_path / "out")], capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert proc.returncode != 0
    assert "fake_api.nowhere" in proc.stderr and "reference target not found" in proc.stderr
    assert "public function fake_api.undocumented has no docstring" in proc.stderr
