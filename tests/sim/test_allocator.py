"""sim.allocator: a training step's freed activations are reused (few page faults); bad thresholds
are refused."""
import platform
import subprocess
import sys

import pytest

from sim.allocator import keep_freed_memory

# Training steps of E's main model (batch 64, block 100, width 16) in a fresh process: page faults
# per step once warm. Measured here: 9-20 with keep_freed_memory, about 485 without (and 39-137
# in the full training loop, where glibc's adaptive default depends on the allocation history).
_PROBE = """
import resource, torch
from sim.allocator import keep_freed_memory
from sim.models.markov_lm import MarkovLM, MarkovLMConfig
assert keep_freed_memory() and keep_freed_memory()  # idempotent
torch.set_num_threads(1)
model = MarkovLM(MarkovLMConfig(vocab=2, width=16, mlp=False, max_len=100), generator=torch.Generator().manual_seed(0))
opt = torch.optim.AdamW(model.parameters(), lr=5e-4)
x = torch.randint(0, 2, (64, 101), generator=torch.Generator().manual_seed(1))
def steps(n):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(n):
        opt.zero_grad(set_to_none=True)
        model.loss(x[:, :-1], x[:, 1:]).backward()
        opt.step()
    return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / n
steps(10)
print(steps(20))
"""


@pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc only")
def test_training_steps_reuse_their_memory():
    out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, check=True)
    assert float(out.stdout.split()[-1]) < 50.0


@pytest.mark.parametrize("bad", [0, -1, 2 ** 31])
def test_thresholds_out_of_range_are_refused(bad):
    with pytest.raises(ValueError, match="mmap_threshold must be in"):
        keep_freed_memory(mmap_threshold=bad)
