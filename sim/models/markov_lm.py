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
``(B, heads, T, T)`` (masked scores are ``-inf``), ``l = 1..layers``; ``resid{l}``
``(B, T, width)`` after layer ``l`` (``resid0`` = embeddings).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .fused_layers import AttentionSublayer, ExponentUnderflow, LogitLoss, TokenOnlyAttention
from .hooks import HookPoint
from .relative_attention import relative_attention_reference

__all__ = ["MarkovLMConfig", "MarkovLM"]


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
        return dataclasses.asdict(self)


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
        self.drop = nn.Dropout(cfg.dropout)
        #: Run the attention sublayer as one fused node (:class:`sim.models.fused_layers.AttentionSublayer`)
        #: when it has relative positions, nothing observes it and dropout is off.
        self.fused = True
        if cfg.mlp:
            self.ln_mlp = nn.LayerNorm(w)
            self.fc = nn.Linear(w, cfg.mlp_ratio * w)
            self.proj = nn.Linear(cfg.mlp_ratio * w, w)
        else:
            self.ln_mlp = self.fc = self.proj = None

    def forward(self, h: Tensor, mask: Tensor) -> Tensor:
        B, T, w = h.shape
        if self.rel is not None and self.fused and not self._observed() and not (self.training and self.drop.p > 0):
            ln = self.ln_att  # the whole sublayer in one autograd node (sim.models.fused_layers)
            h = AttentionSublayer.apply(h, ln.weight, ln.bias, self.Wq.weight, self.Wk.weight, self.Wv.weight,
                                        self.Wo.weight, self.rel, self.heads, ln.eps)
            return self._mlp(h)
        q, k, v = (z.view(B, T, self.heads, self.e).transpose(1, 2) for z in self._qkv(self.ln_att(h)))  # (B, nh, T, e)
        r = None if self.rel is None else self.drop(self.rel[:T]).view(T, self.heads, self.e)  # (T, nh, e)
        y = relative_attention_reference(q, k, v, r, mask, self.scores, self.pattern, self.drop)
        return self._finish(h, y.transpose(1, 2).reshape(B, T, w))

    def _qkv(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """``(q / sqrt(e), k, v)`` from one matmul with the three weights stacked (fewer, larger GEMMs)."""
        W = torch.cat([self.Wq.weight / math.sqrt(self.e), self.Wk.weight, self.Wv.weight])  # (3w, w)
        return F.linear(x, W).chunk(3, dim=-1)

    def _observed(self) -> bool:
        """Someone reads or edits this layer's scores or pattern through the hook points."""
        return any(hp.caching or hp.hook_fn is not None for hp in (self.scores, self.pattern))

    def _finish(self, h: Tensor, y: Tensor) -> Tensor:
        """Residual stream after the attention output ``y`` (heads concatenated, before ``W_O``)."""
        B, T, w = h.shape
        if self.training and self.drop.p > 0:
            h = h + self.drop(self.Wo(y))
        else:  # the residual add fused into the GEMM
            h = torch.addmm(h.reshape(B * T, w), y.reshape(B * T, w), self.Wo.weight.t()).view(B, T, w)
        return self._mlp(h)

    def _mlp(self, h: Tensor) -> Tensor:
        if self.fc is not None:
            h = h + self.drop(self.proj(torch.relu(self.fc(self.ln_mlp(h)))))  # (B, T, w)
        return h

    def forward_token_only(self, tokens: Tensor, table: Tensor) -> Tensor | None:
        """The same layer when its input is the token embedding alone (``h[b, t] = table[x_t]``:
        the first layer with relative positions and no active dropout), computed from ``C``-row
        tables by :class:`sim.models.fused_layers.TokenOnlyAttention` (exact: same function and
        gradients as :meth:`forward`). Returns ``None`` when its shifted exponentials could
        underflow; the caller then takes the general path."""
        B, T = tokens.shape
        ln = self.ln_att
        try:
            out = TokenOnlyAttention.apply(tokens, table, ln.weight, ln.bias, self.Wq.weight, self.Wk.weight,
                                           self.Wv.weight, self.Wo.weight, self.rel, self.heads, ln.eps)
        except ExponentUnderflow:
            return None
        return self._mlp(out.view(B, T, -1))


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
            self.add_module(f"layer{l}", nn.ModuleDict({"scores": block.scores, "pattern": block.pattern}))
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
        #: Use the exact token-only form of the first layer when it applies (see _Block.forward_token_only).
        self.fast_first_layer = True
        #: Compute :meth:`loss` with the fused head (sim.models.fused_layers.LogitLoss).
        self.fused_loss = True
        self.reset_parameters(generator)

    @torch.no_grad()
    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
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
        return self.unembed(self.ln_f(self._trunk(tokens)))  # (B, T, C)

    def _trunk(self, tokens: Tensor) -> Tensor:
        """The residual stream after the last layer, ``(B, T, width)``."""
        if tokens.ndim != 2:
            raise ValueError(f"tokens must be (B, T), got shape {tuple(tokens.shape)}")
        B, T = tokens.shape
        if T > self.config.max_len:
            raise ValueError(f"sequence length {T} exceeds the model's max_len {self.config.max_len}")
        h = self.blocks[0].forward_token_only(tokens, self.embed.weight) if self._token_only_ok() else None
        first = 2 if h is not None else 1  # the fast path did layer 1
        if h is None:
            h = self.embed.weight.index_select(0, tokens.reshape(-1)).view(B, T, -1)  # = embed(tokens), cheaper backward
            if self.pos is not None:
                h = h + self.pos[:T]
            h = self.resid[0](self.drop(h))
        else:
            h = self.resid[1](h)
        mask = self.mask[..., :T, :T]
        for l in range(first, len(self.blocks) + 1):
            h = self.resid[l](self.blocks[l - 1](h, mask))  # (B, T, w)
        return h

    def _token_only_ok(self) -> bool:
        """The first layer sees token-only inputs (relative positions, no active dropout) and
        nobody reads or edits its input or attention through the hook points."""
        block = self.blocks[0]
        if not self.fast_first_layer or self.pos is not None or block.rel is None:
            return False
        if self.training and self.config.dropout > 0:
            return False
        hooks = (block.scores, block.pattern, self.resid[0])
        return not any(hp.caching or hp.hook_fn is not None for hp in hooks)

    def loss(self, tokens: Tensor, targets: Tensor) -> Tensor:
        """Mean next-token cross-entropy over all positions: ``targets[b, t] = x_{t+1}``."""
        if self.fused_loss:  # final LayerNorm, unembedding and loss in one autograd node
            h = self._trunk(tokens)
            return LogitLoss.apply(h.reshape(-1, h.shape[-1]), self.ln_f.weight, self.ln_f.bias, self.unembed.weight,
                                   targets.reshape(-1), self.ln_f.eps)
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
