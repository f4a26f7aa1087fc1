"""Sphinx configuration of the icl-verify docs (``make docs``; the suite builds them with ``-W``).

Pages are Markdown (MyST). The API reference is generated from the docstrings (autodoc,
autosummary, numpydoc), the claim catalogue from the claim registry and the CLI reference from
the argument parser (both by ``_ext/icl_docs.py``), so none of them can drift from the code.
"""
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE / "_ext"))
# autodoc imports every module; keep torch to one thread beside the test workers
os.environ.setdefault("OMP_NUM_THREADS", "1")

project = "icl-verify"
author = "the icl-verify developers"
copyright = "2026, the icl-verify developers"

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "myst_parser",
    "icl_docs",
]

source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
exclude_patterns = ["_build", "release/*.md"]
templates_path = ["_templates"]
html_theme = "furo"
html_title = "icl-verify"
myst_enable_extensions = ["dollarmath", "deflist"]
myst_heading_anchors = 3

# Every cross-reference must resolve: a broken one is a warning, and the build runs with -W.
nitpicky = True
# Types from libraries we do not document (there is no network for intersphinx inventories):
# their names stay plain text instead of links.
nitpick_ignore_regex = [
    ("py:(class|obj|exc|data|func|meth|attr|mod)",
     r"(np|numpy|torch|scipy|sympy|sp|networkx|nx|hypothesis|matplotlib|dask|pathlib|os|typing|collections|"
     r"argparse|enum|abc|ast|ctypes|dataclasses|types|concurrent|_pytest|pytest|json|io|fractions)(\..*)?"),
    ("py:class", r"(Path|Tensor|Module|Generator|Parameter|ndarray|Enum|ABC|DiGraph|Fraction|Callable|Any|"
                 r"Mapping|Sequence|Iterable|Iterator|PathLike)"),
]

autosummary_generate = True
# undoc-members: a public name without a docstring is documented, so icl_docs can flag it
autodoc_default_options = {"members": True, "undoc-members": True, "show-inheritance": True}
autodoc_typehints = "none"
autodoc_inherit_docstrings = True
numpydoc_show_class_members = False
numpydoc_xref_param_type = False
# numpydoc's own validation is off: icl_docs checks that every public name has a docstring,
# inherited ones included (an override of a documented interface method needs none of its own)
numpydoc_validation_checks = set()

# The run whose verdicts the catalogue shows (written by _ext/release.py; see development.md)
icl_release_summary = str(HERE / "release" / "summary.json")
