"""The API reference documents what each module's ``__all__`` lists (autodoc reads it in place of
the module's namespace), so every name there must exist and be listed once: a stale or misspelt
entry fails here in seconds instead of in the docs build."""
import importlib
import pkgutil

import pytest

import sim
import theory


def _module_names() -> list[str]:
    names = []
    for package in (theory, sim):
        names.append(package.__name__)
        names += [m.name for m in pkgutil.walk_packages(package.__path__, package.__name__ + ".")
                  if not m.name.endswith(".__main__")]  # running it is the CLI
    return names


def _all_problems(module) -> list[str]:
    listed = list(getattr(module, "__all__", ()))
    problems = [f"{n!r} is not defined" for n in listed if not hasattr(module, n)]
    problems += [f"{n!r} is listed twice" for n in sorted(set(listed)) if listed.count(n) > 1]
    return problems


@pytest.mark.parametrize("name", _module_names())
def test_every_name_in_all_exists_once(name):
    problems = _all_problems(importlib.import_module(name))
    assert not problems, f"{name}.__all__: " + "; ".join(problems)


def test_a_stale_or_repeated_entry_is_caught():
    module = type(sim)("fake")
    module.defined = 1
    module.__all__ = ["defined", "missing", "defined"]
    assert _all_problems(module) == ["'missing' is not defined", "'defined' is listed twice"]
