"""What the ``icl-verify`` commands share: the usage error, argument types, and the form of a
command a paper home adds to the command line.

A paper home offers commands of its own (the Markov home's ``sweep``) through a module
``commands.py`` that defines ``COMMANDS = [Command(...), ...]``; the claim registry finds them
(:func:`sim.claims.paper_commands`) as it finds the home's claims, so :mod:`sim.cli` imports no
paper home.
"""
from __future__ import annotations

import argparse
import math
from dataclasses import dataclass, field
from typing import Any, Callable

__all__ = ["EXIT_OK", "EXIT_FAIL", "EXIT_USAGE", "EXIT_INTERNAL", "UsageError", "Command", "nonneg_int", "positive_int",
           "positive_float"]

#: exit codes: every claim ran and none FAILed; a claim FAILed (or a run failed); usage or input error;
#: internal error (a crashed check, or a bug)
EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3


class UsageError(Exception):
    """A usage or input error: the CLI prints its one line and exits 2, having written nothing."""


@dataclass(frozen=True)
class Command:
    """A subcommand: ``icl-verify NAME ...``.

    ``parser`` holds the keyword arguments of ``add_parser`` (``help``, ``description``, ...);
    ``add_arguments(parser)`` declares its options, and ``run(args)`` does the work and returns
    the exit code (raising :class:`UsageError` for bad input).
    """

    name: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    parser: dict[str, Any] = field(default_factory=dict)


def nonneg_int(text: str) -> int:
    """An argparse type: ``text`` as an integer ``>= 0``, else an ``ArgumentTypeError`` naming it."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {v}")
    return v


def positive_int(text: str) -> int:
    """An argparse type: ``text`` as an integer ``>= 1``."""
    v = nonneg_int(text)
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {v}")
    return v


def positive_float(text: str) -> float:
    """An argparse type: ``text`` as a finite number ``> 0``."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not (math.isfinite(v) and v > 0):
        raise argparse.ArgumentTypeError(f"expected a positive finite number, got {text!r}")
    return v
