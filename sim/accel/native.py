"""Native (C) kernels for the CPU, built at first use and loaded with :mod:`ctypes`.

Some small-model training steps are dominated by many tiny matrix products that BLAS calls do
poorly on (Edelman et al.'s: head width 16, 100 positions). For those, ``csrc/`` holds plain C
(GCC/Clang vector extensions, no intrinsics, no Python or torch headers), which this module
compiles with the system's C compiler::

    $CC -O3 -march=native -fPIC -shared csrc/<name>.c -o <cache>/<name>-<hash>.so -lm

``<cache>`` is ``$ICL_VERIFY_CACHE`` or ``~/.cache/icl-causal-verify/native``; ``<hash>`` covers
the sources, the flags, the compiler and the CPU's feature flags, so a changed source or another
machine type gets its own build (a second or so). Builds from parallel processes do not
collide: each writes a private file and renames it into place.

Everything that uses a kernel keeps its PyTorch path and falls back to it, with one warning,
when there is no compiler or the build fails; ``ICL_VERIFY_NATIVE=0`` turns the kernels off.
Tests hold each kernel to its PyTorch path (``tests/sim/accel/test_native.py``).
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
import threading
import warnings
from pathlib import Path

import torch

__all__ = ["load", "enabled", "applies", "cache_dir", "NativeBuildWarning", "SUFFIXES"]

SOURCES = Path(__file__).parent / "csrc"
FLAGS = ("-O3", "-march=native", "-fPIC", "-shared", "-std=gnu11")

#: the entry-point suffix of each scalar type the kernels are built for
SUFFIXES = {torch.float32: "_f32", torch.float64: "_f64"}

_LOCK = threading.Lock()
_LOADED: dict[str, ctypes.CDLL | None] = {}


class NativeBuildWarning(RuntimeWarning):
    """A native kernel could not be built; the PyTorch path is used instead."""


def enabled() -> bool:
    """False when ``ICL_VERIFY_NATIVE`` is ``0`` (or ``false``/``no``/``off``), or when every
    accelerated path is off (:func:`sim.accel.enabled`)."""
    from sim.accel import enabled as accel_enabled

    return accel_enabled() and os.environ.get("ICL_VERIFY_NATIVE", "1").strip().lower() not in ("0", "false", "no", "off")


def applies(like: torch.Tensor) -> bool:
    """Whether the kernels serve tensors like ``like``: on the CPU, float32 or float64, at one torch
    thread (the kernels are single-threaded; with more threads PyTorch's own parallel kernels run)."""
    return like.device.type == "cpu" and like.dtype in SUFFIXES and torch.get_num_threads() == 1


def cache_dir() -> Path:
    """Where built libraries are kept: ``$ICL_VERIFY_CACHE``, else ``~/.cache/icl-causal-verify/native``."""
    return Path(os.environ.get("ICL_VERIFY_CACHE") or Path.home() / ".cache" / "icl-causal-verify" / "native")


def _cpu_flags() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):
                return line
    except OSError:
        pass
    return platform.processor()


def _build(name: str) -> Path:
    """Compile ``csrc/<name>.c`` (and the headers beside it) unless the cache holds this exact build."""
    compiler = os.environ.get("CC", "cc")
    if shutil.which(compiler) is None:
        raise FileNotFoundError(f"no C compiler {compiler!r} on PATH (set CC)")
    source = SOURCES / f"{name}.c"
    digest = hashlib.sha256()
    for part in sorted(SOURCES.glob("*.[ch]")):
        digest.update(part.name.encode() + part.read_bytes())
    digest.update(" ".join((compiler, *FLAGS, platform.machine(), _cpu_flags())).encode())
    target = cache_dir() / f"{name}-{digest.hexdigest()[:16]}.so"
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=".so", dir=target.parent)
    os.close(fd)
    try:
        done = subprocess.run([compiler, *FLAGS, str(source), "-o", tmp, "-lm"], capture_output=True, text=True,
                              timeout=300)
        if done.returncode != 0:
            raise RuntimeError(f"{compiler} failed on {source.name}:\n{done.stderr.strip()[-2000:]}")
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return target


def load(name: str, signatures: dict[str, list] | None = None) -> ctypes.CDLL | None:
    """The compiled ``csrc/<name>.c``, building it on first use; ``None`` (after one
    :class:`NativeBuildWarning`) when it cannot be built, or when native kernels are off.

    ``signatures`` maps entry points (without their ``_f32``/``_f64`` suffix) to ctypes argument
    types; each is set on both versions (once), with an ``int`` status as the return type. By
    convention a status is 0 on success, 1 for an input out of range and 2 when out of memory;
    ``csrc/token_attention.c`` adds 4 for exponentials that could underflow."""
    if not enabled():
        return None
    with _LOCK:
        if name not in _LOADED:
            try:
                _LOADED[name] = ctypes.CDLL(str(_build(name)))
            except (OSError, RuntimeError, subprocess.SubprocessError) as err:
                warnings.warn(f"native kernel {name!r} unavailable, using the PyTorch path: {err}",
                              NativeBuildWarning, stacklevel=2)
                _LOADED[name] = None
        lib = _LOADED[name]
        for entry, argtypes in (signatures or {}).items():
            for suffix in SUFFIXES.values():
                fn = getattr(lib, entry + suffix, None) if lib is not None else None
                if fn is not None and fn.argtypes is None:
                    fn.argtypes, fn.restype = argtypes, ctypes.c_int
        return lib
