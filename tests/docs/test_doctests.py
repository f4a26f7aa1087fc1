"""The examples in the docstrings of ``theory`` and ``sim`` run as written (doctest)."""
import doctest
import importlib
import pkgutil

import pytest

import sim
import theory


def _modules():
    for package in (theory, sim):
        yield package.__name__
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if not info.name.endswith(".__main__"):  # running it is the CLI
                yield info.name


def _examples():
    finder = doctest.DocTestFinder(exclude_empty=True)
    for name in _modules():
        module = importlib.import_module(name)
        for test in finder.find(module, name):
            if test.examples and test.name.startswith(name):
                yield pytest.param(test, id=test.name)


EXAMPLES = list(_examples())


def test_there_are_examples():
    assert len(EXAMPLES) >= 5


@pytest.mark.parametrize("test", EXAMPLES)
def test_docstring_example(test):
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    out = []
    result = runner.run(test, out=out.append)
    assert result.failed == 0, "".join(out)


def test_a_wrong_example_fails():
    wrong = doctest.DocTestParser().get_doctest(">>> 1 + 1\n3\n", {}, "wrong", "wrong.py", 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert runner.run(wrong, out=lambda s: None).failed == 1
