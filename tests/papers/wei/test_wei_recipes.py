"""Tests of W's recipe as data (sim.papers.wei.recipes): settings override a base recipe field by field
under their prefix, W.P2's base is its budget, and a bad recipe is refused."""
import dataclasses

import pytest

from sim.papers.wei.recipes import W_P2_RECIPE, WRecipe


def test_from_settings_reads_prefixed_fields_over_the_base():
    s = {"trained_steps1": 7, "trained_lr2": 0.5, "trained_d": 3, "steps2": 99}  # trained_d, steps2: not read
    got = WRecipe.from_settings(s, "trained_", base=W_P2_RECIPE)
    assert got == dataclasses.replace(W_P2_RECIPE, steps1=7, lr2=0.5)
    assert WRecipe.from_settings(s, "trained_") == WRecipe(steps1=7, lr2=0.5)  # no base: the class defaults
    assert WRecipe.from_settings({"steps2": 99, "wL_init": "iid"}) == WRecipe(steps2=99, wL_init="iid")


def test_w_p2_base_is_its_former_default_budget():
    # W.P2's trained tier used to merge these four settings under its own; the base must give the same recipe
    old = {"trained_steps1": 300, "trained_batch1": 256, "trained_steps2": 300, "trained_batch2": 256}
    assert W_P2_RECIPE == WRecipe.from_settings(old, "trained_")
    assert W_P2_RECIPE != WRecipe()


@pytest.mark.parametrize("fields, match", [
    ({"wL_init": "diagonal"}, r"wL_init must be 'permutation' or 'iid', got 'diagonal'"),
    ({"batch2": 0}, r"steps must be >= 0 and batches >= 1"),
])
def test_bad_recipe_is_refused(fields, match):
    with pytest.raises(ValueError, match=match):
        WRecipe(**fields)
