"""Training benchmark for W's two-layer transformer, against a straightforward implementation
of the same model, measured in the same run.

Ours: :class:`sim.models.WeiTransformer`: layer 1 is computed only for the target's
queries, over the ``L*H`` context keys, and (its RPE scores not depending on the tokens)
once per batch; layer 2 is one batched bilinear form with a mask.

Baseline (:class:`NaiveWei`, below): the same parameters and the same function written the
obvious way: every head in a Python loop attends from all ``(L+1)*H`` prompt positions over
the whole prompt under a mask (keys restricted to the context examples), batched over
prompts; the target's rows are kept afterwards; layer 2 loops over target positions and
candidates.

Rows (``python -m benchmarks wei_training``):

1. ``throughput``: seconds per training step (forward, backward, Adam) and tokens per second
   (``B * (L+1) * H`` prompt tokens per step) at W's sizes (d=5, L=10, H=10, B=256) and at
   W's column-check sizes (d=20, L=3, H=50, B=64). Agreement: the two models' losses on one
   batch (float32).
2. ``time to mechanism``: seconds until the copier probe (every head >= 0.9 on its example's
   same-position token, all examples covered) crosses, training both models from the same
   init on the same batches with W.E1's recipe; agreement: the step at which each crossed.

CUDA is used when ``--device`` resolves to it (``ICL_BENCH_DEVICE=cuda``); the figures in
docs/benchmarks.md were measured on CPU.
"""
from __future__ import annotations

import math
import os
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from benchmarks.bench_theory import BenchRow
from sim.models.hooks import HookPoint

__all__ = ["NaiveWei", "naive_from", "bench_throughput", "bench_time_to_mechanism", "run"]


class NaiveWei(nn.Module):
    """W's model written straightforwardly (same parameters and output as ``WeiTransformer``, mixture reading).

    Hook points ``layer1.pattern`` (B, K, H, L*H) (target rows, context keys) and
    ``layer2.pattern`` (B, H, H), so the probes read it like the fast model.
    """

    output = "mixture"

    def __init__(self, w_H, w_L, W_KQ, W_OV):
        super().__init__()
        self.K, self.L = w_L.shape
        self.H = (w_H.shape[1] + 1) // 2
        self.d = W_OV.shape[0]
        self.w_H, self.w_L = nn.Parameter(w_H.detach().clone()), nn.Parameter(w_L.detach().clone())
        self.W_KQ, self.W_OV = nn.Parameter(W_KQ.detach().clone()), nn.Parameter(W_OV.detach().clone())
        self.layer1 = nn.ModuleDict({"pattern": HookPoint()})
        self.layer2 = nn.ModuleDict({"pattern": HookPoint()})

    def forward(self, tokens):
        B = tokens.shape[0]
        L, H, K, d = self.L, self.H, self.K, self.d
        T = (L + 1) * H
        dev = tokens.device
        x = F.one_hot(tokens.reshape(B, T), d).to(self.W_OV.dtype)  # (B, T, d), n = l*H + h
        ex = torch.arange(T, device=dev) // H  # example of each prompt position
        pos = torch.arange(T, device=dev) % H  # position inside its example
        keep = ex[None, :] < L  # (1, T): keys in the context examples only (never the target)
        copies, pats = [], []
        for k in range(K):  # one head at a time
            scores = self.w_H[k][pos[:, None] - pos[None, :] + H - 1]  # (T, T): inner-example offsets
            scores = scores + torch.cat([self.w_L[k], self.w_L.new_zeros(1)])[ex][None, :]  # + cross-example score
            scores = scores.masked_fill(~keep, float("-inf"))
            attn = torch.softmax(scores, dim=-1)  # (T, T): every query position of the prompt
            u = (attn @ x)[:, L * H:]  # (B, H, d): all rows computed, the target's kept
            copies.append(u)
            pats.append(attn[L * H:, :L * H])  # (H, L*H)
        self.layer1["pattern"](torch.stack(pats)[None].expand(B, -1, -1, -1))
        v = torch.cat(copies, dim=-1)  # (B, H, K*d)
        P = torch.softmax(self.W_OV, dim=-1)  # (d, d)
        target = tokens[:, L]  # (B, H)
        A = v.new_zeros(B, H, H)
        out = []
        for h in range(1, H):  # one target position at a time
            s = torch.stack([(v[:, hp] @ self.W_KQ * v[:, h]).sum(-1) for hp in range(h)], dim=1)  # (B, h)
            a = torch.softmax(s, dim=-1)
            A = A.index_put((torch.arange(B, device=dev)[:, None], torch.full((1, h), h, device=dev),
                             torch.arange(h, device=dev)[None, :]), a)
            out.append(torch.log((a[:, :, None] * P[target[:, :h]]).sum(1)))  # (B, d)
        self.layer2["pattern"](A)
        return torch.stack(out, dim=1)  # (B, H-1, d)

    def loss(self, tokens):
        logp = self(tokens)
        return -logp.gather(-1, tokens[:, self.L, 1:].unsqueeze(-1)).mean()


def naive_from(model) -> NaiveWei:
    """A :class:`NaiveWei` with a copy of ``model``'s parameters (same device)."""
    return NaiveWei(model.w_H, model.w_L, model.W_KQ, model.W_OV).to(model.W_OV.device)


def _device() -> str:
    from sim.device import resolve_device

    return resolve_device(os.environ.get("ICL_BENCH_DEVICE", "cpu"))


def _setup(d, L, H, seed, device):
    from sim.claims.inputs import DEFAULT_W_PRIOR
    from sim.papers.wei.recipes import WRecipe
    from sim.papers.wei.training import WTask, init_wei_model
    from sim.train import make_generator

    pi = DEFAULT_W_PRIOR.bind(d).sample(np.random.default_rng(seed), 1)[0]
    task = WTask(pi, L, H, device=device)
    recipe = WRecipe()
    model = init_wei_model(d, L, H, recipe, generator=make_generator(seed, device))
    return task, recipe, model


def _step_time(model, batches, repeats):
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    best = math.inf
    for _ in range(max(1, repeats)):
        t0 = time.perf_counter()
        for x in batches:
            loss = model.loss(x)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        if x.is_cuda:
            torch.cuda.synchronize()
        best = min(best, (time.perf_counter() - t0) / len(batches))
    return best


def bench_throughput(*, d=5, L=10, H=10, B=256, steps=5, repeats=3, seed=0) -> BenchRow:
    """Seconds per training step of both models on the same batches; ratio = baseline / ours."""
    from sim.train import make_generator

    device = _device()
    task, _, model = _setup(d, L, H, seed, device)
    naive = naive_from(model)
    gen = make_generator(seed + 1, device)
    batches = [task.draw(gen, B)[0] for _ in range(steps)]
    with torch.no_grad():
        diff = abs(float(model.loss(batches[0])) - float(naive.loss(batches[0])))
    t_ours = _step_time(model, batches, repeats)
    t_base = _step_time(naive, batches, repeats)
    tokens = B * (L + 1) * H
    return BenchRow(f"W training step (d={d}, L={L}, H={H}, B={B}, {device})", t_ours, t_base, diff, 1e-4,
                    note=f"{tokens / t_ours:,.0f} vs {tokens / t_base:,.0f} tokens/s")


def bench_time_to_mechanism(*, d=5, L=10, H=10, seed=0, threshold=0.9, log_every=10, max_steps=None,
                            batch=256) -> BenchRow:
    """Wall seconds until every head copies one example with mass >= ``threshold`` (all covered),
    both models trained from the same init on the same batches (W.E1's stage 1)."""
    from dataclasses import replace

    from sim.papers.wei.probes import copier_probe
    from sim.train import train

    device = _device()
    task, recipe, model = _setup(d, L, H, seed, device)
    recipe = replace(recipe, steps1=max_steps or recipe.steps1, batch1=batch, steps2=0, log_every=log_every)
    naive = naive_from(model)
    out = {}
    for name, m in (("ours", model), ("naive", naive)):
        log = train(m, task.sampler(recipe), recipe.config(seed + 2), device=device,
                    probes={"copier": copier_probe}, thresholds={"copier": threshold}, stop_when_crossed=True)
        crossed = log.crossed.get("copier")
        out[name] = (crossed["seconds"] if crossed else math.inf, crossed["step"] if crossed else None, log.seconds)
    (t_o, s_o, _), (t_b, s_b, _) = out["ours"], out["naive"]
    steps_differ = abs(s_o - s_b) if s_o is not None and s_b is not None else math.inf
    return BenchRow(f"W time to copier mechanism >= {threshold} (d={d}, L={L}, H={H}, B={batch}, {device})",
                    t_o, t_b, float(steps_differ), float(log_every),
                    note=f"crossed at step {s_o} (ours) / {s_b} (naive); |step difference| is the agreement")


def run(*, quick: bool = False, repeats: int = 3) -> list[BenchRow]:
    """All rows; ``quick`` shrinks sizes for a smoke run."""
    torch.manual_seed(0)
    if quick:
        return [bench_throughput(d=3, L=3, H=5, B=16, steps=2, repeats=1),
                bench_time_to_mechanism(d=3, L=3, H=5, batch=32, log_every=5, max_steps=200)]
    return [bench_throughput(repeats=repeats),
            bench_throughput(d=20, L=3, H=50, B=64, steps=3, repeats=repeats),
            bench_time_to_mechanism()]
