"""Test-wide settings: hypothesis profiles and torch threading.

Hypothesis loads its built-in ``ci`` profile whenever a ``CI`` variable exists, and a
profile registered while another is active inherits from it; ours derive from the
default profile explicitly so local and CI runs search the same way.
"""
import os

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

try:  # parallel workers (pytest-xdist) next to each other spin-wait with >1 torch thread
    import torch

    torch.set_num_threads(1)
except ImportError:  # pragma: no cover - torch is a hard dependency; keep theory tests runnable
    pass
