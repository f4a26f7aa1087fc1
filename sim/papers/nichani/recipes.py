"""The N home's training recipes for the full disentangled transformer, as data: what N.E
(:mod:`~sim.papers.nichani.claims.experiments`), N.K9's trained tier
(:mod:`~sim.papers.nichani.claims.constructions_trained`) and the benchmarks train with.

- :data:`N_RECIPE`: Nichani, Damian & Lee's recipe, from their reference code
  (``single_parent.py``; CLAIMS.md N.E): CatFormer heads [1, 1], all blocks from zero, plain
  gradient descent at learning rate 1, cosine decay over ``2**17`` steps, batch 1024, no weight
  decay (their notebooks run ``2**12``-``2**16`` steps).
- :data:`N_MANY_GRAPHS_RECIPE`: their ``many_graphs.ipynb`` (S = 3, 20 random graphs, each position a
  root w.p. 1/2): plain gradient descent at a constant lr 1 for ``2**14`` steps, batch 1024. N's
  two recipes are the only ones that decide N.E.
- :data:`FAST_RECIPE`: this project's faster recipe for the same model and task (Adam at
  lr 0.05, all blocks from zero, trained jointly, 1,500 steps): it tells a slow optimiser from
  a mechanism the model does not form.
- :func:`recipe_from_settings`: a :class:`Recipe` from a claim's settings (a dict of
  :class:`Recipe` fields), with the fields it leaves out from :data:`N_E_RECIPE_DEFAULTS`
  (N's algorithm) or :data:`K9_RECIPE_DEFAULTS` (Adam from a small random start, as N's
  ``multi_parent.ipynb`` trains the multi-parent model, with AdamW there).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping

if TYPE_CHECKING:
    from sim.train import Stage

__all__ = ["Recipe", "N_RECIPE", "N_MANY_GRAPHS_RECIPE", "FAST_RECIPE", "N_E_RECIPE_DEFAULTS", "K9_RECIPE_DEFAULTS", "recipe_from_settings"]


@dataclass(frozen=True)
class Recipe:
    """How a full disentangled model is trained: optimiser, learning rate, schedule, steps,
    batch, and the initial scale of the attention blocks (``0``: all zero, as N's code).
    The readout ``W_O`` starts at zero in every recipe (N's code)."""

    name: str
    optimizer: str  # sgd (plain gradient descent) | adam
    lr: float
    steps: int
    batch: int = 1024
    schedule: str = "cosine"
    init_scale: float = 0.0
    weight_decay: float = 0.0

    def stage(self) -> Stage:
        """The recipe as one :class:`~sim.train.Stage` of :func:`sim.train.train`."""
        from sim.train import Stage  # torch loads only when a model trains

        return Stage(self.steps, self.lr, optimizer=self.optimizer,
                     schedule=self.schedule, weight_decay=self.weight_decay)

    def describe(self) -> str:
        """The recipe in one line for reports: optimiser, learning rate, schedule, steps, batch, init."""
        init = "all blocks zero" if not self.init_scale else f"attention blocks N(0, {self.init_scale:g}^2), W_O zero"
        return (f"{self.name}: {'plain gradient descent' if self.optimizer == 'sgd' else 'Adam'}, lr {self.lr:g}, "
                f"{self.schedule} schedule over {self.steps} steps, batch {self.batch}, {init}"
                + (f", weight decay {self.weight_decay:g}" if self.weight_decay else ""))


#: N's ``single_parent.py``: CatFormer heads [1, 1] from zero, plain GD, lr 1, cosine over 2**17 steps.
N_RECIPE = Recipe("N's recipe (single_parent.py)", "sgd", lr=1.0, steps=2**17, batch=1024)

#: N's ``many_graphs.ipynb`` (the run behind N's 0.837 ± 0.054 on 20 random graphs at S = 3): plain GD at a
#: constant lr 1 for 2**14 steps, batch 1024 (its ``wd = 2e-4`` is defined but not passed to ``optax.sgd``).
N_MANY_GRAPHS_RECIPE = Recipe("N's recipe (many_graphs.ipynb)", "sgd", lr=1.0, steps=2**14, batch=1024,
                              schedule="constant")

#: This project's faster recipe for the same model and task (all blocks trained jointly).
FAST_RECIPE = Recipe("fast recipe", "adam", lr=0.05, steps=1500, batch=1024, init_scale=0.0)

#: The fields N.E's ``recipe`` setting may leave out: N's algorithm (plain GD from zero, cosine, batch 1024).
N_E_RECIPE_DEFAULTS = {"name": "N's recipe, quick", "optimizer": "sgd", "batch": 1024, "schedule": "cosine",
                       "init_scale": 0.0, "weight_decay": 0.0}

#: The fields N.K9's ``trained_recipe`` setting may leave out: Adam from a small random start.
K9_RECIPE_DEFAULTS = {"name": "k-head recipe", "optimizer": "adam", "batch": 512, "schedule": "cosine",
                      "init_scale": 0.01, "weight_decay": 0.0}

_REQUIRED = ("lr", "steps")  # no default: every recipe a claim runs names its own budget


def recipe_from_settings(r: Mapping[str, Any], defaults: Mapping[str, Any], *, where: str = "recipe") -> Recipe:
    """``Recipe(**{**defaults, **r})`` with ``lr``, ``init_scale``, ``weight_decay`` as floats and
    ``steps``, ``batch`` as ints; ``r`` must give ``lr`` and ``steps``.

    ``where`` names the setting in the errors (e.g. ``"N.E setting 'recipe'"``): a missing
    ``lr``/``steps`` or a key that is not a :class:`Recipe` field is a ``ValueError``.
    """
    fields = [f.name for f in dataclasses.fields(Recipe)]
    unknown = sorted(set(r) - set(fields))
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {', '.join(map(repr, unknown))}; a recipe has {', '.join(fields)}")
    missing = [k for k in _REQUIRED if k not in r]
    if missing:
        raise ValueError(f"{where}: {' and '.join(map(repr, missing))} missing (a recipe needs lr and steps)")
    v = {**defaults, **r}
    return Recipe(v["name"], v["optimizer"], float(v["lr"]), int(v["steps"]), batch=int(v["batch"]),
                  schedule=v["schedule"], init_scale=float(v["init_scale"]), weight_decay=float(v["weight_decay"]))
