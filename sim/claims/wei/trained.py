"""W's trained claims (W.E1, W.E2). The trained tier is issue #4; until it lands these entries
say so in every report instead of silently disappearing."""
from __future__ import annotations

from ..base import Claim, Source

_PENDING = "trained tier not built yet (issue #4); will be decided by the trained tier of the quick profile"

W_E1 = Claim(
    id="W.E1",
    title="Trained model: copier heads, block-diagonal W_KQ, W ≈ log pi by column softmax",
    source=Source("W", "Figs. 2-3, 6", "trained at L=10, H=10, d=5 (and d=20, H=50, L=3)"),
    statement=("Trained at L=10, H=10, d=5 (and d=20, H=50, L=3 for the column check): layer-1 heads become copiers "
               "of one example each; W_KQ block-diagonal; column-softmax error (1/d)||σ_col(W_tf) - σ_col(log pi)||_1 "
               "< 0.05 (W reports 0.0278, row-softmax error 0.350); σ(W_OV) ≈ pi; layer-2 attention ≈ BMA posterior; "
               "the loss closes most of the gap between a structure-blind predictor and the BMA loss."),
    assumptions=(), checks={}, settings={}, pending=_PENDING,
)

W_E2 = Claim(
    id="W.E2",
    title="Generalisation across the number of examples L",
    source=Source("W", "Fig. 5", "L in 1..20, d=10, H=15"),
    statement=("Training at small L generalises better to other test L'; for a fixed training L the loss falls as "
               "the test L' grows."),
    assumptions=(), checks={}, settings={}, pending=_PENDING,
)

CLAIMS = [W_E1, W_E2]
