"""How many threads torch and the numerical libraries use: the one home for every limit a run sets.

The models here are small. On a 2-core CPU one intra-op torch thread is as fast as two when
the machine is idle, and many times faster when other processes compete for the cores
(sweep workers, pytest-xdist): torch's worker threads then spin-wait on each other. So checks
that train or evaluate small models on the CPU run them in :func:`torch_threads`, and every
worker process calls :func:`limit_process_threads` first.
"""
from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Iterator

__all__ = ["torch_threads", "limit_process_threads"]


@contextmanager
def torch_threads(n: int | None = 1) -> Iterator[None]:
    """Run a block with ``n`` intra-op torch threads, restored afterwards (also when the block
    raises); ``None`` leaves the setting alone (e.g. on a GPU)."""
    if n is None:
        yield
        return
    import torch

    old = torch.get_num_threads()
    torch.set_num_threads(int(n))
    try:
        yield
    finally:
        torch.set_num_threads(old)


def limit_process_threads() -> None:
    """One thread for OpenMP, MKL and OpenBLAS (read when a library loads, so set before) and
    for torch, for the rest of this worker process."""
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = "1"
    try:
        import torch
    except ImportError:  # a run function without torch
        return
    torch.set_num_threads(1)
