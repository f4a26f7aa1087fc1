"""Test-wide settings: hypothesis profiles and torch threading.

Hypothesis loads its built-in ``ci`` profile whenever a ``CI`` variable exists, and a
profile registered while another is active inherits from it; ours derive from the
default profile explicitly so local and CI runs search the same way.
"""
import os

import pytest
import torch
import torch.overrides
from hypothesis import HealthCheck, settings

settings.register_profile(
    "repo",
    parent=settings.get_profile("default"),
    max_examples=60,
    deadline=None,
    derandomize=True,  # reproducible in CI: a red run replays the same examples
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("thorough", parent=settings.get_profile("repo"), max_examples=600, derandomize=False)
settings.load_profile(os.environ.get("ICL_HYPOTHESIS_PROFILE", "repo"))

# parallel workers (pytest-xdist) next to each other spin-wait with >1 torch thread
torch.set_num_threads(1)


class _DeviceLog(torch.overrides.TorchFunctionMode):
    """Records the device of every tensor a torch function returns inside the block."""

    def __init__(self):
        super().__init__()
        self.devices = set()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor):
                self.devices.add(t.device.type)
        return out


@pytest.fixture
def device_log():
    """``with device_log() as mode: ...`` then ``mode.devices``: where the block's tensors live."""
    return _DeviceLog
