"""Tests of N's recipes as data (sim.papers.nichani.recipes): N.E's paper profile reads back as N's recipe,
a claim's recipe setting takes the fields it leaves out from its defaults, and a bad setting is named."""
import pytest

from sim.papers.nichani.claims.experiments import N_E
from sim.papers.nichani.recipes import (FAST_RECIPE, K9_RECIPE_DEFAULTS, N_E_RECIPE_DEFAULTS, N_RECIPE, Recipe,
                                        recipe_from_settings)


def test_n_recipe_is_single_parent_py_and_the_paper_profile_reads_back_as_it():
    assert (N_RECIPE.optimizer, N_RECIPE.lr, N_RECIPE.steps, N_RECIPE.batch) == ("sgd", 1.0, 2**17, 1024)
    assert (N_RECIPE.schedule, N_RECIPE.init_scale, N_RECIPE.weight_decay) == ("cosine", 0.0, 0.0)
    assert recipe_from_settings(N_E.settings["paper"]["recipe"], N_E_RECIPE_DEFAULTS) == N_RECIPE
    assert FAST_RECIPE.optimizer == "adam" and FAST_RECIPE.init_scale == 0.0


def test_recipe_from_settings_fills_what_the_setting_leaves_out_and_casts():
    got = recipe_from_settings({"lr": 20, "steps": "2000", "batch": 128.0}, N_E_RECIPE_DEFAULTS)
    assert got == Recipe("N's recipe, quick", "sgd", 20.0, 2000, batch=128)
    assert isinstance(got.lr, float) and isinstance(got.steps, int) and isinstance(got.batch, int)
    k9 = recipe_from_settings({"lr": 0.05, "steps": 10}, K9_RECIPE_DEFAULTS)
    assert k9 == Recipe("k-head recipe", "adam", 0.05, 10, batch=512, schedule="cosine", init_scale=0.01)
    # the setting wins over the defaults, field by field
    assert recipe_from_settings({"lr": 1, "steps": 1, "init_scale": 0.1, "optimizer": "sgd"},
                                K9_RECIPE_DEFAULTS) == Recipe("k-head recipe", "sgd", 1.0, 1, batch=512, init_scale=0.1)


@pytest.mark.parametrize("setting, match", [
    ({"lr": 1.0, "step": 10}, r"N\.E setting 'recipe': unknown key\(s\) 'step'; a recipe has name, optimizer"),
    ({"steps": 10}, r"N\.E setting 'recipe': 'lr' missing"),
    ({"name": "x"}, r"'lr' and 'steps' missing"),
])
def test_recipe_from_settings_names_a_bad_setting(setting, match):
    with pytest.raises(ValueError, match=match):
        recipe_from_settings(setting, N_E_RECIPE_DEFAULTS, where="N.E setting 'recipe'")
