"""AdamW over one flat buffer: the same update as ``torch.optim.AdamW`` in a handful of operations.

For models as small as E's (5,408 parameters in 18 tensors), ``torch.optim.AdamW`` costs a
fixed 0.3–0.7 ms per step in Python and per-tensor bookkeeping, 5% of a training step at one
thread. :class:`FlatAdamW` copies the parameters into one flat tensor once and makes every
parameter, and its gradient, a view of a flat buffer; a step is then seven tensor operations::

    p <- p (1 - lr wd)                         (decoupled weight decay, wd per parameter group)
    m <- b1 m + (1 - b1) g,   v <- b2 v + (1 - b2) g^2
    p <- p - lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)

which is ``torch.optim.AdamW``'s update, operation for operation (tests hold the two to 1e-12 in
float64 over many steps). Autograd accumulates into the gradient views in place, so they stay
views; :meth:`FlatAdamW.zero_grad` zeroes the one buffer. The learning rate is fixed at
construction (``sim.markov_icl`` trains at a constant rate).
"""
from __future__ import annotations

import math
from collections.abc import Iterable

import torch
from torch import Tensor

__all__ = ["FlatAdamW"]


class FlatAdamW:
    """``FlatAdamW(groups, lr, betas=(0.9, 0.999), eps=1e-8)``; ``groups`` as for ``torch.optim``:
    dicts with ``"params"`` and optionally ``"weight_decay"`` (default 0), or an iterable of
    parameters (one group without decay). Every parameter must share one dtype and device; after
    construction each parameter and its ``.grad`` are views of this optimiser's flat buffers."""

    def __init__(self, groups: Iterable, lr: float, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8):
        groups = list(groups)
        if groups and isinstance(groups[0], Tensor):
            groups = [{"params": groups}]
        params = [p for g in groups for p in g["params"]]
        if not params:
            raise ValueError("FlatAdamW got no parameters")
        if len({id(p) for p in params}) != len(params):
            raise ValueError("a parameter appears in more than one group")
        kinds = {(p.dtype, p.device) for p in params}
        if len(kinds) != 1:
            raise ValueError(f"FlatAdamW needs one dtype and device for every parameter, got {sorted(map(str, kinds))}")
        if not lr > 0 or not 0 <= betas[0] < 1 or not 0 <= betas[1] < 1 or not eps >= 0:
            raise ValueError(f"need lr > 0, 0 <= betas < 1 and eps >= 0, got lr={lr}, betas={betas}, eps={eps}")
        dtype, device = kinds.pop()
        n = sum(p.numel() for p in params)
        self.flat = torch.empty(n, dtype=dtype, device=device)
        self.grad = torch.zeros(n, dtype=dtype, device=device)
        self.keep = torch.empty(n, dtype=dtype, device=device)  # 1 - lr wd, per element
        offset = 0
        for g in groups:
            wd = float(g.get("weight_decay", 0.0))
            for p in g["params"]:
                k = p.numel()
                self.flat[offset:offset + k].copy_(p.detach().reshape(-1))
                p.data = self.flat[offset:offset + k].view_as(p)
                p.grad = self.grad[offset:offset + k].view_as(p)
                self.keep[offset:offset + k] = 1.0 - lr * wd
                offset += k
        self.params = params
        self.lr, self.betas, self.eps, self.steps = lr, tuple(betas), eps, 0
        self.m = torch.zeros_like(self.flat)
        self.v = torch.zeros_like(self.flat)

    def zero_grad(self, set_to_none: bool = False) -> None:
        """Zero every gradient (``set_to_none`` is ignored: the gradients must stay views)."""
        self.grad.zero_()

    @torch.no_grad()
    def step(self) -> None:
        self.steps += 1
        b1, b2 = self.betas
        self.flat.mul_(self.keep)
        self.m.lerp_(self.grad, 1 - b1)
        self.v.mul_(b2).addcmul_(self.grad, self.grad, value=1 - b2)
        denom = (self.v.sqrt() / math.sqrt(1 - b2 ** self.steps)).add_(self.eps)
        self.flat.addcdiv_(self.m, denom, value=-self.lr / (1 - b1 ** self.steps))
