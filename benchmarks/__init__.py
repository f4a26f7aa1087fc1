"""Benchmarks beside the code (DESIGN.md, Performance): each ``bench_<name>.py`` module
times the project's vectorised path against the obvious baseline in the same run and
checks that the two agree. Run ``python -m benchmarks`` (all) or
``python -m benchmarks theory`` (only ``bench_theory``) from the project root.

Benchmarks are not tests: nothing here asserts a timing.
"""
