"""Resolve ``--device auto|cpu|cuda`` once, with a clear error when CUDA is asked for but absent."""
from __future__ import annotations

DEVICES = ("auto", "cpu", "cuda")


class DeviceError(RuntimeError):
    """A ``--device`` that is not one of ``DEVICES``, or ``cuda`` when torch sees no CUDA device."""


def resolve_device(device: str = "auto") -> str:
    """``"auto"`` gives ``"cuda"`` when torch sees a GPU, else ``"cpu"``."""
    if device not in DEVICES:
        raise DeviceError(f"unknown device {device!r}; expected one of {', '.join(DEVICES)}")
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise DeviceError("--device cuda was requested but torch sees no CUDA device "
                          f"(torch {torch.__version__}); use --device cpu or auto")
    return device
