"""A user's own sampler (``module:function`` or ``path/to/file.py:function``) as a prior, with a
time limit on each call."""
from __future__ import annotations

import difflib
import importlib
import re
from pathlib import Path
from typing import Callable

import numpy as np

from sim.files import load_user_file
from sim.priors.base import Prior, PriorError, _check_d
from theory import TheoryError, validate_stochastic


# ------------------------------------------------------------------------ a user's sampler --
#: Seconds a user's sampler may take for one call before it is stopped (``ICL_VERIFY_SAMPLER_TIMEOUT``).
DEFAULT_SAMPLER_TIMEOUT = 120.0


def sampler_timeout() -> float:
    """The time limit for one call of a user's sampler: ``$ICL_VERIFY_SAMPLER_TIMEOUT`` seconds
    (default 120; 0 turns the limit off)."""
    import os

    text = os.environ.get("ICL_VERIFY_SAMPLER_TIMEOUT", "")
    try:
        value = float(text) if text.strip() else DEFAULT_SAMPLER_TIMEOUT
    except ValueError:
        raise PriorError(f"ICL_VERIFY_SAMPLER_TIMEOUT must be a number of seconds, got {text!r}") from None
    if not np.isfinite(value) or value < 0:
        raise PriorError(f"ICL_VERIFY_SAMPLER_TIMEOUT must be a non-negative number of seconds, got {text!r}")
    return value


class _time_limit:
    """Stop the code inside after ``seconds`` with a PriorError (SIGALRM: main thread on Unix;
    elsewhere, and with ``seconds == 0``, no limit)."""

    def __init__(self, seconds: float, what: str):
        self.seconds, self.what, self.armed = seconds, what, False

    def __enter__(self):
        import signal
        import threading

        if self.seconds > 0 and hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread():
            def expire(signum, frame):
                raise PriorError(f"{self.what} did not return within {self.seconds:g} s; make it faster or raise the "
                                 "limit with ICL_VERIFY_SAMPLER_TIMEOUT=<seconds>")
            self.previous = signal.signal(signal.SIGALRM, expire)
            signal.setitimer(signal.ITIMER_REAL, self.seconds)
            self.armed = True
        return self

    def __exit__(self, *exc):
        if self.armed:
            import signal

            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self.previous)
        return False

class UserSampler(Prior):
    """A user's own sampler, ``module:function`` or ``path/to/file.py:function``.

    The function is called as ``function(rng, n)`` with a ``numpy.random.Generator`` and must
    return an array of shape ``(n, d, d)`` of row-stochastic matrices; ``d`` is read off a
    first probe draw (``n = 1``, seed 0) when the sampler is loaded, so a sampler that
    raises or returns something wrong is reported before anything runs.
    """

    def __init__(self, target: str, *, _fn: Callable | None = None):
        if not isinstance(target, str) or ":" not in target:
            raise PriorError(f"sampler: expected 'module:function' or 'path/to/file.py:function', got {target!r}")
        self.target = target.strip()
        self.fn = _fn if _fn is not None else _load_function(self.target)
        self.d = None
        probe = self._call(np.random.default_rng(0), 1)
        if probe.ndim != 3 or probe.shape[0] != 1 or probe.shape[1] != probe.shape[2] or probe.shape[1] < 1:
            raise PriorError(f"sampler {self.target} returned shape {probe.shape} when asked for n = 1 draw; expected "
                             "(n, d, d): n square transition matrices")
        self.d = int(probe.shape[1])
        for k in range(probe.shape[0]):
            try:
                validate_stochastic(probe[k], name=f"draw {k} of sampler {self.target}")
            except TheoryError as exc:
                raise PriorError(str(exc)) from None

    def _call(self, rng, n) -> np.ndarray:
        try:
            with _time_limit(sampler_timeout(), f"sampler {self.target} (asked for n = {n} draws)"):
                out = self.fn(rng, n)
        except PriorError:
            raise
        except Exception as exc:  # the user's code: report what it raised, never a traceback
            raise PriorError(f"sampler {self.target} raised {type(exc).__name__}: {exc} "
                             f"(when asked for n = {n} draws)") from None
        try:
            return np.asarray(out, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise PriorError(f"sampler {self.target} returned {type(out).__name__}, not an array of numbers "
                             f"of shape (n, d, d): {exc}") from None

    def _sample(self, rng, n):
        return self._call(rng, n)

    def spec(self):
        return f"sampler({self.target!r})"

    def bind(self, d):
        if _check_d(d) != self.d:
            raise PriorError(f"sampler {self.target} draws {self.d} x {self.d} matrices; cannot use it with d = {d}")
        return self


def _load_function(target: str) -> Callable:
    where, _, fname = target.rpartition(":")
    if not where or not re.fullmatch(r"[A-Za-z_]\w*", fname or ""):
        raise PriorError(f"sampler: expected 'module:function' or 'path/to/file.py:function', got {target!r}")
    if where.endswith(".py") or "/" in where or "\\" in where:
        try:
            module = load_user_file(Path(where), "sampler")
        except FileNotFoundError:
            raise PriorError(f"sampler file {where} does not exist (expected path/to/file.py:function)") from None
        except ImportError as exc:
            raise PriorError(f"sampler file {where} failed to load: {exc}") from None
    else:
        try:
            module = importlib.import_module(where)
        except Exception as exc:
            raise PriorError(f"sampler module {where!r} cannot be imported: {type(exc).__name__}: {exc}") from None
    fn = getattr(module, fname, None)
    if fn is None:
        names = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_"))
        close = difflib.get_close_matches(fname, names, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        shown = ", ".join(names[:12]) + (f", ... ({len(names)} in all)" if len(names) > 12 else "")
        raise PriorError(f"sampler {where} has no function {fname!r}{hint} (its functions: {shown or 'none'})")
    if not callable(fn):
        raise PriorError(f"sampler {target}: {fname} is a {type(fn).__name__}, not a function")
    return fn
