"""Test-wide settings: hypothesis profiles, torch threading, and claims evaluated in the test's process.

Hypothesis loads its built-in ``ci`` profile whenever a ``CI`` variable exists, and a
profile registered while another is active inherits from it; ours derive from the
default profile explicitly so local and CI runs search the same way.
"""
import os
import tempfile

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

# `icl-verify run` evaluates claims in worker processes (sim.lanes) by default. The tests run them in
# the test's own process (monkeypatched functions, pytest-xdist's cores), unless one asks for lanes
# with --jobs; subprocesses the tests start inherit this.
os.environ.setdefault("ICL_VERIFY_JOBS", "1")
# The cost plan's calibration cache (sim.plan, under $XDG_CACHE_HOME) goes to a scratch folder, never the
# user's ~/.cache; matplotlib keeps reading its font cache where it was.
os.environ.setdefault("MPLCONFIGDIR", os.path.join(os.environ.get("XDG_CACHE_HOME") or
                                                   os.path.join(os.path.expanduser("~"), ".cache"), "matplotlib"))
os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="icl-verify-test-cache-")


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


def _refuse_constant(name):
    raise ValueError(f"non-JSON constant {name}")


@pytest.fixture(autouse=True)
def _outputs_parse_strictly(request):
    """Every run a test writes under its ``tmp_path`` leaves outputs that strict parsers accept:
    ``results.json``/``run.json`` as JSON without NaN or Infinity, ``report.html`` and
    ``junit.xml`` as well-formed XML."""
    root = request.getfixturevalue("tmp_path") if "tmp_path" in request.fixturenames else None
    yield
    if root is None:
        return
    import json
    import xml.etree.ElementTree as ET

    for path in root.rglob("*"):
        if path.name == "results.json" and path.parent.joinpath("run.json").exists():  # a finished run
            for name in ("results.json", "run.json"):
                json.loads(path.parent.joinpath(name).read_text(), parse_constant=_refuse_constant)
        elif path.name == "junit.xml":
            ET.parse(path)
        elif path.name == "report.html":
            ET.fromstring(path.read_text().split("\n", 1)[1])  # past the doctype line


@pytest.fixture(autouse=True)
def _claim_registry_restored():
    """Claims a test registers (a plugin loaded through the CLI, ``register``) leave the registry
    when it ends, so no other test sees them, whatever order xdist runs the tests in."""
    import sim.claims as registry

    saved = {name: dict(getattr(registry, name)) for name in ("_EXTRA", "_ORIGIN", "_DIGESTS")}
    yield
    for name, content in saved.items():
        table = getattr(registry, name)
        table.clear()
        table.update(content)


_NUMPY_ERRORS = {"divide": "warn", "over": "warn", "under": "ignore", "invalid": "warn"}


@pytest.fixture(autouse=True)
def _numpy_floating_point_errors_at_their_defaults():
    """Every test starts with numpy's default floating-point error handling. ``dit`` (the
    information oracle) calls ``np.seterr(all="ignore")`` when it is imported, which silenced
    every later test's RuntimeWarning: a test that a function leaks no warning could not fail."""
    import numpy as np

    np.seterr(**_NUMPY_ERRORS)
    yield
