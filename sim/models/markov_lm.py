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

from .hooks import HookPoint

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
        if cfg.mlp:
            self.ln_mlp = nn.LayerNorm(w)
            self.fc = nn.Linear(w, cfg.mlp_ratio * w)
            self.proj = nn.Linear(cfg.mlp_ratio * w, w)
        else:
            self.ln_mlp = self.fc = self.proj = None

    def forward(self, h: Tensor, mask: Tensor) -> Tensor:
        B, T, w = h.shape
        x = self.ln_att(h)
        q = self.Wq(x).view(B, T, self.heads, self.e).transpose(1, 2) / math.sqrt(self.e)  # (B, nh, T, e)
        k = self.Wk(x).view(B, T, self.heads, self.e).transpose(1, 2)  # (B, nh, T, e)
        v = self.Wv(x).view(B, T, self.heads, self.e).transpose(1, 2)  # (B, nh, T, e)
        s = q @ k.transpose(-1, -2)  # (B, nh, T, T)
        if self.rel is not None:
            s = s + _relative_scores(q, self.drop(self.rel[:T]).view(T, self.heads, self.e))
        s = self.scores(s.masked_fill(mask, float("-inf")))  # (B, nh, T, T)
        a = self.pattern(torch.softmax(s, dim=-1))  # (B, nh, T, T)
        y = (self.drop(a) @ v).transpose(1, 2).reshape(B, T, w)  # (B, T, w)
        return self._finish(h, y)

    def _finish(self, h: Tensor, y: Tensor) -> Tensor:
        h = h + self.drop(self.Wo(y))
        if self.fc is not None:
            h = h + self.drop(self.proj(torch.relu(self.fc(self.ln_mlp(h)))))  # (B, T, w)
        return h

    def forward_token_only(self, h: Tensor, tokens: Tensor, table: Tensor) -> Tensor | None:
        """The same layer when its input is a function of the current token only
        (``h[b, t] = table[tokens[b, t]]``: the first layer with relative positions).

        Then ``q, k, v`` take ``C`` values and ``exp(score[t, j]) =
        exp(A[x_t, x_j]) exp(R[x_t, t - j])`` with ``A = Q K^T / sqrt(e)`` ``(C, C)`` and
        ``R[a, d] = Q_a . r_d / sqrt(e)`` ``(C, T)``, so the softmax sums are causal
        convolutions of the one-hot tokens with ``exp(R[a, .])``: a Toeplitz matmul with
        no ``T x T`` exponentials per sequence. Exact (same function and gradients as
        :meth:`forward`). Returns ``None`` when the shifted exponentials could underflow
        (then the caller takes the general path).
        """
        B, T = tokens.shape
        C, nh, e = table.shape[0], self.heads, self.e
        x = self.ln_att(table)  # (C, w)
        q = self.Wq(x).view(C, nh, e).transpose(0, 1) / math.sqrt(e)  # (nh, C, e)
        k = self.Wk(x).view(C, nh, e).transpose(0, 1)  # (nh, C, e)
        v = self.Wv(x).view(C, nh, e).transpose(0, 1)  # (nh, C, e)
        A = q @ k.transpose(-1, -2)  # (nh, C, C): [a, b] = q_a . k_b
        R = q @ self.rel[:T].view(T, nh, e).permute(1, 2, 0)  # (nh, C, T): [a, d] = q_a . r_d
        A = A - A.max(dim=-1, keepdim=True).values.detach()
        R = R - R.max(dim=-1, keepdim=True).values.detach()
        # the j = t term bounds each softmax sum from below: exp(A[a, a] + R[a, 0])
        if float((A.diagonal(dim1=-2, dim2=-1) + R[..., 0]).detach().min()) < -60.0:
            return None
        t = torch.arange(T, device=tokens.device)
        lag = t[:, None] - t[None, :]  # (T, T): t - j
        toeplitz = torch.exp(R)[..., lag.clamp(min=0)] * (lag >= 0)  # (nh, C, T, T): [a, t, j]
        onehot = F.one_hot(tokens, C).to(table.dtype)  # (B, T, C)
        conv = toeplitz.reshape(nh * C, T, T) @ onehot.transpose(0, 1).reshape(T, B * C)  # (nh*C, T, B*C)
        conv = conv.view(nh, C, T, B, C)  # [h, a, t, n, b] = sum_{j <= t, x_j = b} exp(R[a, t - j])
        idx = tokens.T.reshape(1, 1, T, B, 1).expand(nh, 1, T, B, C)
        sel = conv.gather(1, idx)[:, 0]  # (nh, T, B, C): a = x_t
        weights = torch.exp(A)[:, tokens.T] * sel  # (nh, T, B, C): sum over j with x_j = b of exp(score)
        y = (weights / weights.sum(-1, keepdim=True)) @ v.unsqueeze(1)  # (nh, T, B, e)
        return self._finish(h, y.permute(2, 1, 0, 3).reshape(B, T, nh * e))


def _relative_scores(q: Tensor, r: Tensor) -> Tensor:
    """``out[b, h, t, j] = q[b, h, t] . r[t - j, h]`` for ``j <= t`` (entries above the
    diagonal are finite garbage, masked by the caller); ``q`` ``(B, nh, T, e)``, ``r``
    ``(T, nh, e)``. One matmul against the offsets in reverse order, then the "skew"
    re-indexing (pad a column, view as ``(T + 1, T)``, drop the first row), no gather."""
    B, nh, T, e = q.shape
    m = q @ r.flip(0).permute(1, 2, 0)  # (B, nh, T, T): [t, c] = q_t . r_{T-1-c}
    padded = F.pad(m, (1, 0))  # (B, nh, T, T+1)
    return padded.reshape(B, nh, T + 1, T)[:, :, 1:, :]  # [t, j] = m[t, T-1-t+j] = q_t . r_{t-j}


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
        self.blocks = nn.ModuleList([_Block(cfg) for _ in range(cfg.layers)])
        self.ln_f = nn.LayerNorm(cfg.width)
        self.unembed = nn.Linear(cfg.width, cfg.vocab, bias=False)
        self.drop = nn.Dropout(cfg.dropout)
        self.resid = nn.ModuleList([HookPoint() for _ in range(cfg.layers + 1)])
        for l, block in enumerate(self.blocks, start=1):  # names layer{l}.scores / layer{l}.pattern
            self.add_module(f"layer{l}", nn.ModuleDict({"scores": block.scores, "pattern": block.pattern}))
        T = cfg.max_len
        t = torch.arange(T)
        self.register_buffer("mask", (t[None, :] > t[:, None]).view(1, 1, T, T), persistent=False)  # j > t
        #: Use the exact token-only form of the first layer when it applies (see _Block.forward_token_only).
        self.fast_first_layer = True
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
        if tokens.ndim != 2:
            raise ValueError(f"tokens must be (B, T), got shape {tuple(tokens.shape)}")
        B, T = tokens.shape
        if T > self.config.max_len:
            raise ValueError(f"sequence length {T} exceeds the model's max_len {self.config.max_len}")
        h = self.embed(tokens)  # (B, T, w)
        if self.pos is not None:
            h = h + self.pos[:T]
        h = self.resid[0](self.drop(h))
        mask = self.mask[..., :T, :T]
        for l, block in enumerate(self.blocks, start=1):
            out = None
            if l == 1 and self._token_only_ok(block):
                out = block.forward_token_only(h, tokens, self.embed.weight)
            h = self.resid[l](block(h, mask) if out is None else out)  # (B, T, w)
        return self.unembed(self.ln_f(h))  # (B, T, C)

    def _token_only_ok(self, block: _Block) -> bool:
        """The first layer sees token-only inputs (relative positions, no active dropout) and
        nobody reads or edits its attention through the hook points."""
        if not self.fast_first_layer or self.pos is not None or block.rel is None:
            return False
        if self.training and self.config.dropout > 0:
            return False
        hooks = (block.scores, block.pattern, self.resid[0])
        return not any(hp.caching or hp.hook_fn is not None for hp in hooks)

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
