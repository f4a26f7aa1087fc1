"""A user's own sampler (``module:function`` or ``path/to/file.py:function``) as a prior, with a
time limit on each call."""
from __future__ import annotations

import difflib
import importlib
import re
from pathlib import Path
from typing import Callable

import numpy as np

from sim.files import UserCodeError, call_user_code, load_user_file
from sim.priors.base import Prior, PriorError, _check_d, validate_draws


# ------------------------------------------------------------------------ a user's sampler --
#: Seconds a user's sampler may take for one call before it is stopped (``ICL_VERIFY_SAMPLER_TIMEOUT``).
DEFAULT_SAMPLER_TIMEOUT = 120.0
#: The longest limit the timer takes (a year; 0 turns the limit off).
MAX_SAMPLER_TIMEOUT = 365 * 24 * 3600.0


def sampler_timeout() -> float:
    """The time limit for one call of a user's sampler: ``$ICL_VERIFY_SAMPLER_TIMEOUT`` seconds
    (default 120; 0 turns the limit off; at most :data:`MAX_SAMPLER_TIMEOUT`)."""
    import os

    text = os.environ.get("ICL_VERIFY_SAMPLER_TIMEOUT", "")
    try:
        value = float(text) if text.strip() else DEFAULT_SAMPLER_TIMEOUT
    except ValueError:
        raise PriorError(f"ICL_VERIFY_SAMPLER_TIMEOUT must be a number of seconds, got {text!r}") from None
    if not np.isfinite(value) or value < 0 or value > MAX_SAMPLER_TIMEOUT:
        raise PriorError(f"ICL_VERIFY_SAMPLER_TIMEOUT must be a number of seconds from 0 (no limit) to "
                         f"{MAX_SAMPLER_TIMEOUT:g}, got {text!r}")
    return value


class _SamplerTimeout(BaseException):
    """Raised inside a sampler that ran out of time: not an Exception, so that the boundary around
    user code (:func:`sim.files.call_user_code`) lets it through to :class:`_time_limit`."""


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
                raise _SamplerTimeout
            self.previous = signal.signal(signal.SIGALRM, expire)
            signal.setitimer(signal.ITIMER_REAL, self.seconds)
            self.armed = True
        return self

    def __exit__(self, exc_type, exc, tb):
        if self.armed:
            import signal

            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self.previous)
        if exc_type is not None and issubclass(exc_type, _SamplerTimeout):
            raise PriorError(f"{self.what} did not return within {self.seconds:g} s; make it faster or raise the "
                             "limit with ICL_VERIFY_SAMPLER_TIMEOUT=<seconds>") from None
        return False


class UserSampler(Prior):
    """A user's own sampler, ``module:function`` or ``path/to/file.py:function``.

    The function is called as ``function(rng, n)`` with a ``numpy.random.Generator`` and must
    return an array of shape ``(n, d, d)`` of row-stochastic matrices; ``d`` is read off a
    first probe draw (``n = 1``, seed 0) when the sampler is loaded, so a sampler that
    raises, exits, or returns something wrong (or more than
    :data:`~sim.priors.base.MAX_STATES` states) is reported before anything runs. Its draws pass
    the same check as every prior's (:func:`~sim.priors.base.validate_draws`).
    """

    def __init__(self, target: str, *, _fn: Callable | None = None):
        if not isinstance(target, str) or ":" not in target:
            raise PriorError(f"sampler: expected 'module:function' or 'path/to/file.py:function', got {target!r}")
        self.target = target.strip()
        self.fn = _fn if _fn is not None else _load_function(self.target)
        self.d = None
        probe = validate_draws(self._call(np.random.default_rng(0), 1), 1, None, f"sampler {self.target}")
        self.d = _check_d(int(probe.shape[1]))

    def _call(self, rng, n):
        what = f"sampler {self.target}"
        try:
            with _time_limit(sampler_timeout(), f"{what} (asked for n = {n} draws)"):
                return call_user_code(self.fn, rng, n, what=what, passthrough=(_SamplerTimeout,))
        except UserCodeError as exc:  # the user's code: report what it raised or that it exited, never a traceback
            raise PriorError(f"{exc} (when asked for n = {n} draws)") from None

    def _sample(self, rng, n):
        return self._call(rng, n)

    def spec(self):
        return f"sampler({self.target!r})"

    def bind(self, d):
        if _check_d(d) != self.d:
            raise PriorError(f"sampler {self.target} draws {self.d} x {self.d} matrices; cannot use it with d = {d}")
        return self


def _is_file(where: str) -> bool:
    try:
        return Path(where).is_file()
    except (OSError, ValueError):  # a name too long to be a path
        return False


def _load_function(target: str) -> Callable:
    where, _, fname = target.rpartition(":")
    if not where or not re.fullmatch(r"[A-Za-z_]\w*", fname or ""):
        raise PriorError(f"sampler: expected 'module:function' or 'path/to/file.py:function', got {target!r}")
    if where.endswith(".py") or "/" in where or "\\" in where or _is_file(where):
        try:
            module = load_user_file(Path(where), "sampler")
        except FileNotFoundError as exc:
            said = "is not a file" if "is not a file" in str(exc) else "does not exist"
            raise PriorError(f"sampler file {where} {said} (expected path/to/file.py:function)") from None
        except UserCodeError as exc:
            raise PriorError(f"sampler file {where} failed to load: {exc}") from None
    else:
        try:
            module = call_user_code(importlib.import_module, where, what="importing it")
        except UserCodeError as exc:
            raise PriorError(f"sampler module {where!r} cannot be imported: {exc}") from None
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
