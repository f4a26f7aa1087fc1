"""A small decoder transformer for next-token prediction on Markov-chain sequences
(claims G.1, G.2: Gibson, Cui & Reddy; E.1: Edelman et al.).

Model
-----
Tokens ``x_0 .. x_{T-1}`` in ``{0..C-1}``; the model predicts ``x_{t+1}`` from ``x_0..x_t`` at
every position ``t`` (autoregressive loss over all positions). Pre-LayerNorm blocks::

    h_0[t] = E[x_t] (+ P[t] with absolute positions)
    h <- h + W_O Att(LN(h))             per layer, ``heads`` heads of width ``width / heads``
    h <- h + MLP(LN(h))                 per layer, when ``mlp`` (ReLU, hidden ``mlp_ratio * width``)
    logits[t] = U LN(h_L[t])            (C,)

Attention scores of head ``i`` (causal, ``j <= t``), with ``e = width / heads``::

    absolute:  s[t, j] = q_t . k_j / sqrt(e)
    relative:  s[t, j] = (q_t . k_j + q_t . r_{t-j}) / sqrt(e)

``relative`` is the variant of Edelman et al.'s published code (``mingpt/model_rpe.py``,
github.com/EzraEdelman/Evolution-of-Statistical-Induction-Heads): one learned vector ``r_d``
per offset ``d = t - j`` and layer, added to the key seen by the query, no absolute
positions at all. Their ``Q, K, V`` and output projections have no bias; the MLP does; the
weights start ``N(0, 0.02^2)`` and the two output projections (attention and MLP) start
``N(0, out_std^2)`` (0.01 in their code). Written for this project from that description,
not copied.

Hook points (``sim.models.hooks``): ``layer{l}.scores`` and ``layer{l}.pattern``, shape
``(B, heads, T, T)`` (masked scores are ``-inf``), ``l = 1..layers``; ``layer{l}.attn_out``
``(B, T, width)``, what the attention sublayer adds to the residual stream (``W_O`` applied,
heads summed: G's task vector phi is ``layer2.attn_out``); ``layer{l}.mlp_out`` ``(B, T,
width)``, what the MLP adds (G's pair encoding is ``layer1.mlp_out``); ``resid{l}`` ``(B, T,
width)`` after layer ``l`` (``resid0`` = embeddings). Interventions (ablations, patching, task
injection) replace these tensors through the hooks; with no hook set the forward pass is the
one it always was, bit for bit.
"""
from __future__ import annotations

import dataclasses
import math
from contextlib import contextmanager
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from sim.models.hooks import HookPoint

__all__ = ["MarkovLMConfig", "MarkovLM", "TaskInjection", "relative_scores", "causal_attention"]


@dataclass(frozen=True)
class MarkovLMConfig:
    """Architecture of :class:`MarkovLM` (validated; hashed into sweep run ids through ``as_dict``)."""

    vocab: int = 10  # C, number of states
    max_len: int = 100  # longest input the model accepts (N)
    width: int = 64
    layers: int = 2
    heads: int = 1
    mlp: bool = True  # attention + MLP per layer (G); False: attention only (E's main configuration)
    mlp_ratio: int = 4
    positions: str = "relative"  # relative (E's code) | absolute (learned, added to the embedding)
    dropout: float = 0.0  # E's code trains with 0.1 everywhere
    init_std: float = 0.02
    out_std: float = 0.01  # output projections of attention and MLP (E's code)

    def __post_init__(self):
        for name in ("vocab", "max_len", "width", "layers", "heads", "mlp_ratio"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"MarkovLMConfig.{name} must be a positive integer, got {v!r}")
        if self.vocab < 2:
            raise ValueError(f"MarkovLMConfig.vocab must be >= 2 states, got {self.vocab}")
        if self.width % self.heads:
            raise ValueError(f"MarkovLMConfig.width ({self.width}) must be divisible by heads ({self.heads})")
        if self.positions not in ("relative", "absolute"):
            raise ValueError(f"MarkovLMConfig.positions must be 'relative' or 'absolute', got {self.positions!r}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"MarkovLMConfig.dropout must be in [0, 1), got {self.dropout}")
        if not (self.init_std > 0 and self.out_std > 0):
            raise ValueError("MarkovLMConfig.init_std and out_std must be positive")

    def as_dict(self) -> dict:
        """Every field as plain data."""
        return dataclasses.asdict(self)


def relative_scores(q: Tensor, r: Tensor) -> Tensor:
    """``out[b, h, t, j] = q[b, h, t] . r[t - j, h]`` for ``j <= t``; ``q`` ``(B, nh, T, e)``,
    ``r`` ``(T, nh, e)``. Entries above the diagonal are finite garbage, for the caller to mask.
    One matmul against the offsets in reverse order, then the skew view (pad a column, view
    as ``(T + 1, T)``, drop the first row)."""
    B, nh, T, e = q.shape
    m = q @ r.flip(0).permute(1, 2, 0)  # (B, nh, T, T): [t, c] = q_t . r_{T-1-c}
    padded = F.pad(m, (1, 0))  # (B, nh, T, T+1)
    return padded.reshape(B, nh, T + 1, T)[:, :, 1:, :]  # [t, j] = m[t, T-1-t+j] = q_t . r_{t-j}


def causal_attention(q: Tensor, k: Tensor, v: Tensor, r: Tensor | None, mask: Tensor,
                     scores_hook=None, pattern_hook=None, dropout=None) -> Tensor:
    """Causal softmax attention, with the relative term when ``r`` is given: ``q, k, v``
    ``(B, nh, T, e)`` (``q`` already divided by ``sqrt(e)``), ``r`` ``(T, nh, e)`` or ``None``,
    ``mask`` ``(1, 1, T, T)`` boolean, true above the diagonal::

        s[t, j] = q_t . k_j (+ q_t . r_{t-j}),  j <= t;   y_t = sum_j softmax_j(s)[t, j] v_j

    The hooks see the masked scores and the pattern ``(B, nh, T, T)``; ``dropout`` acts on the
    pattern. Returns ``y`` ``(B, nh, T, e)``."""
    s = q @ k.transpose(-1, -2)  # (B, nh, T, T)
    if r is not None:
        s = s + relative_scores(q, r)
    s = s.masked_fill(mask, float("-inf"))
    if scores_hook is not None:
        s = scores_hook(s)
    a = torch.softmax(s, dim=-1)
    if pattern_hook is not None:
        a = pattern_hook(a)
    if dropout is not None:
        a = dropout(a)
    return a @ v


class _Block(nn.Module):
    def __init__(self, cfg: MarkovLMConfig):
        super().__init__()
        w, self.heads = cfg.width, cfg.heads
        self.e = w // cfg.heads
        self.ln_att = nn.LayerNorm(w)
        self.Wq = nn.Linear(w, w, bias=False)
        self.Wk = nn.Linear(w, w, bias=False)
        self.Wv = nn.Linear(w, w, bias=False)
        self.Wo = nn.Linear(w, w, bias=False)
        self.rel = nn.Parameter(torch.zeros(cfg.max_len, w)) if cfg.positions == "relative" else None  # (T, w)
        self.scores = HookPoint()
        self.pattern = HookPoint()
        self.attn_out = HookPoint()
        self.mlp_out = HookPoint()
        self.drop = nn.Dropout(cfg.dropout)
        if cfg.mlp:
            self.ln_mlp = nn.LayerNorm(w)
            self.fc = nn.Linear(w, cfg.mlp_ratio * w)
            self.proj = nn.Linear(cfg.mlp_ratio * w, w)
        else:
            self.ln_mlp = self.fc = self.proj = None

    def forward(self, h: Tensor, mask: Tensor) -> Tensor:
        """The residual stream ``(B, T, w)`` after this block's attention (and MLP) sublayers."""
        B, T, w = h.shape
        q, k, v = (z.view(B, T, self.heads, self.e).transpose(1, 2) for z in self._qkv(self.ln_att(h)))  # (B, nh, T, e)
        r = None if self.rel is None else self.drop(self.rel[:T]).view(T, self.heads, self.e)  # (T, nh, e)
        y = causal_attention(q, k, v, r, mask, self.scores, self.pattern, self.drop)
        return self._finish(h, y.transpose(1, 2).reshape(B, T, w))

    def _qkv(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """``(q / sqrt(e), k, v)`` from one matmul with the three weights stacked (fewer, larger GEMMs)."""
        W = torch.cat([self.Wq.weight / math.sqrt(self.e), self.Wk.weight, self.Wv.weight])  # (3w, w)
        return F.linear(x, W).chunk(3, dim=-1)

    def _finish(self, h: Tensor, y: Tensor) -> Tensor:
        """Residual stream after the attention output ``y`` (heads concatenated, before ``W_O``)."""
        B, T, w = h.shape
        if self.training and self.drop.p > 0:
            h = h + self.attn_out(self.drop(self.Wo(y)))
        elif _active(self.attn_out):
            h = h + self.attn_out(self.Wo(y))  # (B, T, w)
        else:  # the residual add fused into the GEMM
            h = torch.addmm(h.reshape(B * T, w), y.reshape(B * T, w), self.Wo.weight.t()).view(B, T, w)
        return self._mlp(h)

    def _mlp(self, h: Tensor) -> Tensor:
        if self.fc is not None:
            h = h + self.mlp_out(self.drop(self.proj(torch.relu(self.fc(self.ln_mlp(h))))))  # (B, T, w)
        return h


def _active(hp: HookPoint) -> bool:
    """Whether a hook point reads or edits its tensor (else the fused path may skip it)."""
    return hp.caching or hp.hook_fn is not None


class MarkovLM(nn.Module):
    """Decoder transformer of the module docstring; ``forward(tokens (B, T)) -> logits (B, T, C)``.

    Parameters
    ----------
    config : MarkovLMConfig
    generator : torch.Generator, optional
        Draws the initial weights (reproducible per seed); default: torch's global generator.
    """

    def __init__(self, config: MarkovLMConfig, generator: torch.Generator | None = None):
        super().__init__()
        self.config = cfg = config
        self.embed = nn.Embedding(cfg.vocab, cfg.width)
        self.pos = nn.Parameter(torch.zeros(cfg.max_len, cfg.width)) if cfg.positions == "absolute" else None
        blocks = [_Block(cfg) for _ in range(cfg.layers)]
        resid = [HookPoint() for _ in range(cfg.layers + 1)]
        # hook points first, under the documented names (named_modules lists a module under the
        # first path that reaches it): layer{l}.scores, layer{l}.pattern, resid{l}
        for l, block in enumerate(blocks, start=1):
            self.add_module(f"layer{l}", nn.ModuleDict({"scores": block.scores, "pattern": block.pattern,
                                                        "attn_out": block.attn_out, "mlp_out": block.mlp_out}))
        for l, hp in enumerate(resid):
            self.add_module(f"resid{l}", hp)
        self.blocks = nn.ModuleList(blocks)
        self.ln_f = nn.LayerNorm(cfg.width)
        self.unembed = nn.Linear(cfg.width, cfg.vocab, bias=False)
        self.drop = nn.Dropout(cfg.dropout)
        self.resid = nn.ModuleList(resid)
        T = cfg.max_len
        t = torch.arange(T)
        self.register_buffer("mask", (t[None, :] > t[:, None]).view(1, 1, T, T), persistent=False)  # j > t
        self.reset_parameters(generator)

    @torch.no_grad()
    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        """Weights ``N(0, init_std^2)`` (the attention and MLP output projections ``N(0, out_std^2)``),
        biases 0, LayerNorms the identity; drawn from ``generator`` when given."""
        cfg = self.config
        for name, p in self.named_parameters():
            if name.endswith("bias") or ".ln_" in name or name.startswith("ln_"):
                continue
            std = cfg.out_std if name.endswith(("Wo.weight", "proj.weight")) else cfg.init_std
            p.normal_(0.0, std, generator=generator)
        for m in self.modules():
            if isinstance(m, nn.LayerNorm):
                m.weight.fill_(1.0)
                m.bias.zero_()
            elif isinstance(m, nn.Linear) and m.bias is not None:
                m.bias.zero_()

    def forward(self, tokens: Tensor) -> Tensor:
        """Next-token logits ``(B, T, C)`` for ``tokens`` ``(B, T)``."""
        return self.unembed(self.ln_f(self._trunk(tokens)))  # (B, T, C)

    def _trunk(self, tokens: Tensor) -> Tensor:
        """The residual stream after the last layer, ``(B, T, width)``."""
        check_tokens(self, tokens)
        T = tokens.shape[1]
        h = self.resid[0](self.embed_tokens(tokens))
        mask = self.mask[..., :T, :T]
        for l, block in enumerate(self.blocks, start=1):
            h = self.resid[l](block(h, mask))  # (B, T, w)
        return h

    def embed_tokens(self, tokens: Tensor) -> Tensor:
        """``h_0 = E[x_t] (+ P[t])``, dropout applied, ``(B, T, width)``."""
        B, T = tokens.shape
        h = self.embed.weight.index_select(0, tokens.reshape(-1)).view(B, T, -1)  # = embed(tokens), cheaper backward
        if self.pos is not None:
            h = h + self.pos[:T]
        return self.drop(h)

    def loss(self, tokens: Tensor, targets: Tensor) -> Tensor:
        """Mean next-token cross-entropy over all positions: ``targets[b, t] = x_{t+1}``."""
        logits = self(tokens)  # (B, T, C)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))

    def decay_groups(self) -> tuple[list[nn.Parameter], list[nn.Parameter]]:
        """``(decayed, not decayed)``: weight decay on the matrices of linear maps only
        (E's code: biases, LayerNorm, embeddings and position vectors are not decayed)."""
        decayed, rest = [], []
        for m in self.modules():
            for n, p in m.named_parameters(recurse=False):
                (decayed if isinstance(m, nn.Linear) and n == "weight" else rest).append(p)
        return decayed, rest


class TaskInjection(nn.Module):
    """G's task injection (G.5's speeding of memorisation; the form is this project's choice):
    a learned vector ``e_k`` per training chain, added at every position to the embeddings
    (hook point ``resid0``) of a sequence drawn from chain ``k``::

        h_0[b, t] <- h_0[b, t] + e_{k_b}    for the sequences with k_b >= 0 (k_b = -1: none)

    The model is told which chain it reads, so it can learn each chain's transitions before
    it can infer the chain from the context. ``table`` ``(K, width)`` starts ``N(0, std^2)``
    (the embeddings' scale) from ``generator``.
    """

    def __init__(self, K: int, width: int, *, generator: torch.Generator | None = None, std: float = 0.02):
        super().__init__()
        self.table = nn.Parameter(torch.empty(K, width))  # (K, w)
        with torch.no_grad():
            self.table.normal_(0.0, std, generator=generator)

    def vectors(self, chains: Tensor) -> Tensor:
        """``e_{k_b}`` for ``chains`` ``(B,)`` (``-1``: the zero vector), shape ``(B, 1, width)``."""
        on = (chains >= 0).to(self.table.dtype)  # (B,)
        return (self.table[chains.clamp(min=0)] * on[:, None])[:, None, :]  # (B, 1, w)

    @contextmanager
    def injecting(self, model: MarkovLM, chains: Tensor):
        """Within the block, ``model``'s forward passes add ``e_{k_b}`` at hook point ``resid0``
        (a hook set: the fused kernels step aside, :mod:`sim.papers.markov.fast`)."""
        hp = model.resid[0]
        previous = hp.hook_fn
        hp.hook_fn = lambda h, _hp: h + self.vectors(chains).to(h.dtype)  # (B, T, w)
        try:
            yield
        finally:
            hp.hook_fn = previous


def check_tokens(model: MarkovLM, tokens: Tensor) -> None:
    """``tokens`` must be ``(B, T)`` with ``T`` at most the model's ``max_len``."""
    if tokens.ndim != 2:
        raise ValueError(f"tokens must be (B, T), got shape {tuple(tokens.shape)}")
    if tokens.shape[1] > model.config.max_len:
        raise ValueError(f"sequence length {tokens.shape[1]} exceeds the model's max_len {model.config.max_len}")
