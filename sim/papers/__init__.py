"""The paper homes: everything one paper's claims need, in one folder per paper.

Each home has the same roles, so a claim's statement, code and test are found the same way
for every paper:

- ``task.py``: the paper's task (samplers) and its exact or Bayes baselines;
- ``model.py``: the paper's transformer, one readable file per model family;
- ``probes.py``: reading a trained model's mechanism against the theory's;
- ``training.py`` / ``runs.py``: training recipes and the runs a trained claim asks for;
- ``claims/`` (or one file ``claims.py``): the checks only; its ``CLAIMS`` is what the registry
  (:mod:`sim.claims`) finds.

Homes: ``wei`` (Wei, Chen, He & Yang, ICLR 2026: claims W.*), ``nichani`` (Nichani, Damian &
Lee, ICML 2024: N.*), ``markov`` (in-context Markov chains: Gibson et al. G.*, Edelman et al.
E.*; G and E share the K-chain task). The generic machinery (claim, context, verdict,
runner, report, CLI, priors, audit, training loop, sweeps) lives outside and imports no
home; the registry's discovery, through :func:`paper_homes`, is the one exception. Adding a
paper: ``docs/architecture.md``.
"""
from __future__ import annotations

import keyword
from pathlib import Path

#: the built-in paper homes in catalogue order; each has a ``claims`` package exporting ``CLAIMS``
PAPERS = ("wei", "nichani", "markov")


def paper_homes() -> list[str]:
    """The names of the paper homes the registry imports, in order: :data:`PAPERS`, then every
    other folder on this package's ``__path__`` (all its entries) that holds a ``claims.py``
    or a ``claims/`` package, sorted by name.

    A home needs no ``__init__.py`` (it is then a namespace package), so a new paper home is
    one file, ``sim/papers/<name>/claims.py`` defining ``CLAIMS = [...]``. Folders whose name
    starts with ``.`` or ``_`` are not homes; a home whose name is not a Python identifier
    (``my-paper``) is an error, since ``sim.papers.<name>`` could not be imported.
    """
    found: set[str] = set()
    for entry in __path__:
        folder = Path(entry)
        if not folder.is_dir():
            continue
        for home in folder.iterdir():
            if home.name in PAPERS or home.name.startswith((".", "_")) or not home.is_dir():
                continue
            if not ((home / "claims.py").is_file() or (home / "claims" / "__init__.py").is_file()):
                continue
            if not home.name.isidentifier() or keyword.iskeyword(home.name):
                raise ValueError(f"paper home {home} holds claims but {home.name!r} is not a Python name: rename "
                                 "the folder (letters, digits and '_', not starting with a digit)")
            found.add(home.name)
    return [*PAPERS, *sorted(found)]
