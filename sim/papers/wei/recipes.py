"""The W home's training recipe, as data: how W.E1, W.E2 (:mod:`~sim.papers.wei.claims.trained`) and W.P2's
trained tier (:mod:`~sim.papers.wei.claims.continuous_trained`) train W's two-layer transformer.

Wei et al. (How Transformers Learn Causal Structures In-Context, seed 000) give no training
recipe beyond the initialisation note of section 9 (line 255: "the middle entry of w^H starts
well above the others; the diagonal preference of w^L can be initialised at random"). The
recipe below was found here.

- Init: every parameter ``N(0, 0.02^2)``; the offset-0 entry of ``w_H`` starts ``wH0``
  above the others (W's note); ``w_L`` gets a random one-to-one preference: head ``k`` starts
  ``perm_bias`` above the rest on example ``sigma(k)``, ``sigma`` a uniformly random
  permutation (our reading of "the diagonal preference of w^L can be initialised at random").
  With ``wH0 = 8``, ``perm_bias = 2`` a head starts with about 0.45 (L = 10) or 0.78 (L = 3)
  of its mass on its example's same-position token; the probes report the initial value.
- Stage 1 (``steps1``): all parameters, Adam, cosine schedule, weight decay on ``W_KQ``
  only. The decay is what makes the heads commit: without it the loss is nearly flat
  along directions that blur the copies while ``W_KQ`` compensates, and Adam drifts there
  (copier score falling from 0.82 to 0.70 in our runs).
- Stage 2 (``steps2``): ``W_KQ`` and ``W_OV`` only, Adam, cosine, no decay, so ``W``
  converges to ``log pi`` without the decay's shrinkage.

Why not plain joint Adam from a small random start: the heads then stay spread over
several examples (copier score 0.1-0.4 after 3,000 steps at L = 10), and with an
i.i.d. random ``w_L`` the heads collide on the same examples and stay there (6 of 10
examples covered after 6,000 steps, with or without weight decay), so the mechanism
never completes. W.E1 therefore decides coverage only from the i.i.d. start (``paper`` profile).

- :class:`WRecipe`: the init and the two stages, defaults W.E1's; a claim's profile sets
  the budget (``steps1``, ``batch1``, ...) through :meth:`WRecipe.from_settings`.
- :data:`W_P2_RECIPE`: W.P2's trained tier (the continuous model, same recipe), with the
  shorter budget its settings start from (``trained_`` keys override it).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Mapping

__all__ = ["WRecipe", "WL_INITS", "W_P2_RECIPE"]

#: How ``w_L`` starts: a random one-to-one preference (the recipe) or i.i.d. like every other entry
WL_INITS = ("permutation", "iid")


@dataclass(frozen=True)
class WRecipe:
    """Init and two-stage schedule (module docstring). Frozen; saved with every result."""

    steps1: int = 400
    batch1: int = 256
    lr1: float = 1e-2
    wd1: float = 3e-3
    steps2: int = 500
    batch2: int = 512
    lr2: float = 2e-2
    wH0: float = 8.0
    perm_bias: float = 2.0
    init_scale: float = 0.02
    wL_init: str = "permutation"  # one of WL_INITS
    log_every: int = 50

    def __post_init__(self):
        if self.wL_init not in WL_INITS:
            raise ValueError(f"wL_init must be 'permutation' or 'iid', got {self.wL_init!r}")
        if min(self.steps1, self.steps2) < 0 or min(self.batch1, self.batch2) < 1:
            raise ValueError("steps must be >= 0 and batches >= 1")

    @classmethod
    def from_settings(cls, s: Mapping[str, Any], prefix: str = "", base: "WRecipe | None" = None) -> "WRecipe":
        """``base`` (default: this class's defaults) with every field ``f`` that ``s`` sets as
        ``prefix + f`` replaced; other keys of ``s`` are the claim's own and are not read."""
        names = {f.name for f in dataclasses.fields(cls)}
        fields = {k[len(prefix):]: v for k, v in s.items() if k.startswith(prefix) and k[len(prefix):] in names}
        return dataclasses.replace(base, **fields) if base is not None else cls(**fields)

    def config(self, seed: int):
        """The recipe as a :class:`~sim.train.TrainConfig` with data seed ``seed``: stage 1 trains every parameter
        (weight decay on ``W_KQ``), stage 2 ``W_KQ`` and ``W_OV``; a stage of 0 steps is left out."""
        from sim.train import Stage, TrainConfig

        stages = []
        if self.steps1:
            stages.append(Stage(self.steps1, self.lr1, schedule="cosine", weight_decay=self.wd1,
                                decay_params=("W_KQ",)))
        if self.steps2:
            stages.append(Stage(self.steps2, self.lr2, params=("W_KQ", "W_OV"), schedule="cosine"))
        return TrainConfig(stages=tuple(stages), seed=int(seed), log_every=self.log_every)

    def describe(self) -> str:
        """The recipe in one line for reports: init, then each stage's steps, batch, parameters and optimiser."""
        init = (f"offset-0 entry of w_H +{self.wH0:g}, w_L a random one-to-one preference +{self.perm_bias:g}"
                if self.wL_init == "permutation" else f"offset-0 entry of w_H +{self.wH0:g}, w_L i.i.d.")
        return (f"init N(0, {self.init_scale:g}^2), {init}; stage 1: {self.steps1} steps x {self.batch1} prompts, "
                f"all parameters, Adam lr {self.lr1:g} cosine, weight decay {self.wd1:g} on W_KQ; stage 2: "
                f"{self.steps2} steps x {self.batch2} prompts, W_KQ and W_OV, Adam lr {self.lr2:g} cosine")


#: W.P2's trained tier: W.E1's recipe with 300 + 300 steps of 256 prompts (its ``trained_`` settings override it).
W_P2_RECIPE = WRecipe(steps1=300, batch1=256, steps2=300, batch2=256)
