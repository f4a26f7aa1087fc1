"""Claims of Gibson, Cui & Reddy, *Distinct mechanisms underlying in-context learning in
transformers* (seed 004). Trained claims; the tier that decides them is issue #6."""
from __future__ import annotations

from .base import Claim, Source

_PENDING = "trained sweeps not built yet (issue #6); decided by the trained tier (quick: the switch; paper: thresholds)"

G_1 = Claim(
    id="G.1",
    title="Four strategies: memorisation for few training chains, in-context bigram for many",
    source=Source("G", "Sec. 3", "phases G1, G2, M1, M2; thresholds K1*, K2*"),
    statement=("On K training chains (C = 10 states), a trained 2-layer transformer (attention + MLP per layer) sits "
               "nearest to an M-strategy (posterior-weighted mixture over the K chains) for small K and to G2 "
               "(in-context bigram) for large K, out of distribution; threshold K1* (third-party notes: K1* ≈ 94, "
               "K2* ≈ 7000 at width 64)."),
    assumptions=(), checks={}, settings={}, pending=_PENDING,
)

G_2 = Claim(
    id="G.2",
    title="Scaling laws of the transition times",
    source=Source("G", "Sec. 4-5", "tau_2Gen ~ N / log N;  Delta tau_K ~ (K2* - K)^-gamma, gamma ≈ 2"),
    statement="G1 -> G2 transition time tau ~ N / log N in the sequence length N; G2 -> M2 delay ~ (K2* - K)^-2.",
    assumptions=(), checks={}, settings={}, pending=_PENDING,
)

CLAIMS = [G_1, G_2]
