"""Mechanism probes for W's two-layer transformer (Wei et al., sections 3-5; claims W.E1, W.E2, W.P2).

Every probe reads a trained :class:`~sim.papers.wei.model.WeiTransformer` (or
:class:`~sim.papers.wei.model.WeiContinuous`) through its named hook points (``layer1.pattern``
``(B, K, H, L*H)``, ``layer2.pattern`` ``(B, H, H)``) or its parameters, and returns plain numbers
or numpy arrays. Indices are 0-based as in :mod:`sim.papers.wei.model`: context examples
``l = 0..L-1``, the target is example ``L``, layer-1 keys are flattened as ``n = l*H + h_j``.

Mechanisms are detection patterns (DESIGN principle 5): a mechanism gives a 0/1 pattern
matrix over (query, key), and a probe scores the attention mass on it.

- copier of example ``l``: ``P[h, l*H + h] = 1`` (head attends to the same position of
  example ``l``; W Theorem 1's ``w_H[0] >> w_H[!=0]``, ``w_L[k] >> w_L[!=k]``);
- the tree: ``P[h, pa(h)] = 1`` (layer-2 attention on the true parent).

Parameter probes compare the learned layer-2 form with ``log pi`` by *column* softmax,
which is blind to the column shifts ``W + 1 a^T`` that leave layer 2 unchanged (W
Proposition 1, claim W.P1); the row softmax is shown for contrast. Loss probes put the
model next to the Bayes-optimal predictor (the BMA predictive, W Lemma 1 / Theorem 1) and
the best structure-blind predictor (uniform attention over ``h' < h`` with the true pi).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from sim.models.hooks import run_with_cache

__all__ = [
    "copier_pattern",
    "tree_pattern",
    "pattern_mass",
    "layer1_attention",
    "CopierReport",
    "copier_report",
    "copier_probe",
    "kq_blocks",
    "learned_W",
    "BlockStructure",
    "block_structure",
    "column_softmax",
    "row_softmax",
    "column_softmax_error",
    "row_softmax_error",
    "ov_error",
    "bma_posterior_torch",
    "blind_attention",
    "prompt_losses",
    "bma_loss_on",
    "layer2_attention",
    "layer2_bma_tv",
    "parent_accuracy",
    "gap_closed",
]


# ---------------------------------------------------------------------------- patterns --
def copier_pattern(L: int, H: int, example: int) -> np.ndarray:
    """Copier detection pattern ``P[h, example*H + h] = 1``, shape ``(H, L*H)``.

    The layer-1 pattern of a head that copies ``x^{example}_h`` into the target's position
    ``h`` (W Theorem 1's head ``k = example`` as ``beta -> inf``).
    """
    if not 0 <= example < L:
        raise ValueError(f"example {example} is outside 0..{L - 1}")
    P = np.zeros((H, L * H))
    P[np.arange(H), example * H + np.arange(H)] = 1.0
    return P


def tree_pattern(parents) -> np.ndarray:
    """Tree detection pattern ``P[h, pa(h)] = 1`` (roots have an all-zero row).

    ``parents``: ``(H,)`` or ``(B, H)`` parent arrays (``-1`` for a root); returns
    ``(H, H)`` or ``(B, H, H)``.
    """
    par = np.asarray(parents)
    single = par.ndim == 1
    par = np.atleast_2d(par)
    B, H = par.shape
    P = np.zeros((B, H, H))
    b, h = np.nonzero(par >= 0)
    P[b, h, par[b, h]] = 1.0
    return P[0] if single else P


def pattern_mass(attn, pattern) -> np.ndarray:
    """Attention mass on a detection pattern, per query row: ``sum_n attn[..., q, n] P[..., q, n]``.

    ``attn`` and ``pattern`` broadcast against each other (e.g. ``(K, H, L*H)`` with
    ``(H, L*H)``); returns the array of row masses (last axis summed).
    """
    a = attn.detach().cpu().numpy() if isinstance(attn, Tensor) else np.asarray(attn)
    return (a * np.asarray(pattern)).sum(axis=-1)


# ------------------------------------------------------------------------ layer 1 probes --
def _dummy_input(model) -> Tensor:
    dev = model.W_OV.device
    if hasattr(model, "output"):  # discrete WeiTransformer
        return torch.zeros(1, model.L + 1, model.H, dtype=torch.long, device=dev)
    return torch.zeros(1, model.L + 1, model.H, model.d, dtype=model.W_OV.dtype, device=dev)


def layer1_attention(model) -> np.ndarray:
    """The layer-1 pattern ``A^k[h, n]`` of the target's queries, shape ``(K, H, L*H)``.

    Read from hook point ``layer1.pattern``; it does not depend on the tokens (RPE scores
    only), so one dummy prompt gives it.
    """
    with torch.no_grad():
        _, cache = run_with_cache(model, _dummy_input(model), names=["layer1.pattern"])
    return cache["layer1.pattern"][0].double().cpu().numpy()


@dataclass
class CopierReport:
    """Copier readout of every layer-1 head.

    Attributes
    ----------
    mass : ndarray, shape (K, L, H)
        ``mass[k, l, h] = A^k[h, l*H + h]``: head ``k``'s attention from target position
        ``h`` on the same position of example ``l``.
    example : ndarray of int, shape (K,)
        The example each head copies: ``argmax_l mean_h mass[k, l, h]``.
    score : ndarray, shape (K,)
        ``min_h mass[k, example[k], h]``: the mass on the same-position token of its
        example at the worst query position (the deciding copier score).
    mean_score : ndarray, shape (K,)
        The same, averaged over query positions.
    covered : list of int
        The examples copied by at least one head.
    """

    mass: np.ndarray
    example: np.ndarray
    score: np.ndarray
    mean_score: np.ndarray
    covered: list[int]
    L: int

    @property
    def n_covered(self) -> int:
        return len(self.covered)

    @property
    def all_covered(self) -> bool:
        return self.n_covered == self.L

    @property
    def min_score(self) -> float:
        return float(self.score.min())

    def as_dict(self) -> dict:
        """The report as plain data (scores rounded to 6 digits)."""
        return {"example_of_head": self.example.tolist(), "score_of_head": [round(float(v), 6) for v in self.score],
                "mean_score_of_head": [round(float(v), 6) for v in self.mean_score], "covered": self.covered,
                "n_covered": self.n_covered, "L": self.L}


def copier_report(model) -> CopierReport:
    """Copier score of each layer-1 head and which example it copies (W Theorem 1, Fig. 2).

    A head is a copier of example ``l`` when its attention from target position ``h``
    sits on ``x^l_h`` (the detection pattern :func:`copier_pattern`). The heads cover the
    context when every example ``0..L-1`` is some head's example.
    """
    A = layer1_attention(model)  # (K, H, L*H)
    K, H, LH = A.shape
    L = LH // H
    blocks = A.reshape(K, H, L, H)  # [k, h, l, h_j]
    hs = np.arange(H)
    mass = np.transpose(blocks[:, hs, :, hs], (1, 2, 0))  # (K, L, H): [k, l, h] = A^k[h, l*H + h]
    example = mass.mean(axis=2).argmax(axis=1)  # (K,)
    own = mass[np.arange(K), example]  # (K, H)
    return CopierReport(mass=mass, example=example, score=own.min(axis=1), mean_score=own.mean(axis=1),
                        covered=sorted({int(e) for e in example}), L=L)


def copier_probe(model) -> float:
    """Scalar time-to-mechanism probe: the smallest head copier score if the heads cover all
    ``L`` examples, else 0. Crossing a threshold (e.g. 0.9) means the copier mechanism formed."""
    rep = copier_report(model)
    return rep.min_score if rep.all_covered else 0.0


# ------------------------------------------------------------------------ layer 2 probes --
def kq_blocks(model) -> np.ndarray:
    """``W_KQ`` as blocks ``(K, K, d, d)``: ``blocks[i, j]`` pairs head ``i``'s key copy with head ``j``'s query copy."""
    K, d = model.K, model.d
    W = model.W_KQ.detach().double().cpu().numpy()
    return W.reshape(K, d, K, d).transpose(0, 2, 1, 3)


def learned_W(model, reading: str = "mean") -> np.ndarray:
    """The learned ``W_tf`` compared with ``log pi``.

    ``reading="mean"``: the mean of the ``K`` diagonal blocks of ``W_KQ`` (W's ``W_KQ =
    diag(W, ..., W)``; with one copier per example every diagonal block plays W's ``W``),
    shape ``(d, d)``. ``reading="per-head"``: the diagonal blocks, ``(K, d, d)``.
    Keys on the left: ``W[s, t]`` scores candidate token ``s`` against target token ``t``,
    as ``log pi[parent, child]``.
    """
    blocks = kq_blocks(model)
    diag = blocks[np.arange(model.K), np.arange(model.K)]  # (K, d, d)
    if reading == "mean":
        return diag.mean(axis=0)
    if reading == "per-head":
        return diag
    raise ValueError(f"reading must be 'mean' or 'per-head', got {reading!r}")


@dataclass
class BlockStructure:
    """Frobenius norms of ``W_KQ``'s blocks, after removing each block's column means.

    A column shift ``B + 1 a^T`` never changes layer-2 attention (the copies sum to 1), so
    the centred norm is the part that matters; raw norms are kept for reference.
    """

    diag_norm: float
    offdiag_norm: float
    diag_norm_raw: float
    offdiag_norm_raw: float

    @property
    def ratio(self) -> float:
        """Mean off-diagonal over mean diagonal centred norm (0 for W's block-diagonal ``W_KQ``)."""
        return self.offdiag_norm / self.diag_norm if self.diag_norm > 0 else float("inf")


def block_structure(model) -> BlockStructure:
    """Block structure of ``W_KQ`` (W Figs. 2-3: it learns ``diag(W, ..., W)``, off-diagonal blocks -> 0).

    Means over blocks of Frobenius norms; with ``K = 1`` the off-diagonal norms are 0.
    """
    blocks = kq_blocks(model)
    K = blocks.shape[0]
    centred = blocks - blocks.mean(axis=2, keepdims=True)  # remove column means (rows s averaged)
    norms, raw = np.linalg.norm(centred, axis=(2, 3)), np.linalg.norm(blocks, axis=(2, 3))  # (K, K)
    off = ~np.eye(K, dtype=bool)
    return BlockStructure(diag_norm=float(np.diag(norms).mean()),
                          offdiag_norm=float(norms[off].mean()) if K > 1 else 0.0,
                          diag_norm_raw=float(np.diag(raw).mean()),
                          offdiag_norm_raw=float(raw[off].mean()) if K > 1 else 0.0)


def _softmax(W, axis: int, what: str) -> np.ndarray:
    W = np.asarray(W, dtype=np.float64)
    top = W.max(axis=axis, keepdims=True)
    if not np.all(np.isfinite(top)):
        idx = int(np.argwhere(~np.isfinite(np.squeeze(top, axis=axis)))[0][0])
        raise ValueError(f"{what} {idx} has no finite entry (all -inf): its softmax is undefined")
    e = np.exp(W - top)
    return e / e.sum(axis=axis, keepdims=True)


def column_softmax(W) -> np.ndarray:
    """``sigma_col(W)[s, t] = exp(W[s, t]) / sum_s' exp(W[s', t])`` (softmax down each column).

    Invariant to column shifts ``W + 1 a^T`` (W Proposition 1); ``sigma_col(log pi)[s, t] =
    pi[s, t] / sum_s' pi[s', t]``. ``-inf`` entries (``log 0``) give 0.
    """
    return _softmax(W, 0, "column")


def row_softmax(W) -> np.ndarray:
    """``sigma_row(W)[s, t] = exp(W[s, t]) / sum_t' exp(W[s, t'])``; ``sigma_row(log pi) = pi``."""
    return _softmax(W, 1, "row")


def column_softmax_error(W, log_pi) -> float:
    """``(1/d) ||sigma_col(W) - sigma_col(log pi)||_1`` (entrywise L1; W section 5 reports 0.0278).

    The mean over the ``d`` columns of the L1 distance between column distributions (each in [0, 2]).
    """
    W, log_pi = np.asarray(W, dtype=np.float64), np.asarray(log_pi, dtype=np.float64)
    if W.shape != log_pi.shape or W.ndim != 2:
        raise ValueError(f"W {W.shape} and log pi {log_pi.shape} must be the same square shape")
    return float(np.abs(column_softmax(W) - column_softmax(log_pi)).sum() / W.shape[0])


def row_softmax_error(W, log_pi) -> float:
    """``(1/d) ||sigma_row(W) - pi||_1`` (W section 5 reports 0.350 next to the column error)."""
    W, log_pi = np.asarray(W, dtype=np.float64), np.asarray(log_pi, dtype=np.float64)
    if W.shape != log_pi.shape or W.ndim != 2:
        raise ValueError(f"W {W.shape} and log pi {log_pi.shape} must be the same square shape")
    return float(np.abs(row_softmax(W) - row_softmax(log_pi)).sum() / W.shape[0])


def ov_error(model, pi) -> float:
    """``(1/d) ||softmax_row(W_OV) - pi||_1``: how far ``sigma(W_OV)`` is from pi (W Theorem 1: ``sigma(W_OV) = pi``)."""
    P = row_softmax(model.W_OV.detach().double().cpu().numpy())
    pi = np.asarray(pi, dtype=np.float64)
    return float(np.abs(P - pi).sum() / pi.shape[0])


# ------------------------------------------------------------------- Bayes and baselines --
def bma_posterior_torch(context: Tensor, log_pi: Tensor) -> Tensor:
    """W Lemma 1 in torch: ``post[b, h, h'] = softmax_{h' < h} sum_l log pi[x^l_h', x^l_h]``.

    ``context`` ``(B, L, H)`` int64, ``log_pi`` ``(d, d)`` on the same device. Returns
    ``(B, H, H)``, strictly lower-triangular, row 0 all zeros (the same layout as the
    model's ``layer2.pattern``). Agrees with :func:`theory.bma_posterior_matrix`.
    """
    B, L, H = context.shape
    scores = log_pi[context[:, :, None, :], context[:, :, :, None]].sum(dim=1)  # (B, H, H): [b, h, h']
    earlier = torch.ones(H, H, dtype=torch.bool, device=context.device).tril(-1)
    scores = scores.masked_fill(~earlier, float("-inf"))
    post = torch.softmax(scores[:, 1:], dim=-1)  # (B, H-1, H)
    return torch.cat([post.new_zeros(B, 1, H), post], dim=1)


def blind_attention(H: int, device=None, dtype=torch.float64) -> Tensor:
    """Structure-blind attention ``1/h`` on every ``h' < h`` (row 0 zeros), ``(H, H)``."""
    earlier = torch.ones(H, H, dtype=dtype, device=device).tril(-1)
    earlier[1:] /= earlier[1:].sum(-1, keepdim=True)
    return earlier


def _mixture_nll(attn: Tensor, pi: Tensor, target: Tensor) -> Tensor:
    """Per-prompt mean over ``h = 1..H-1`` of ``-log sum_h' attn[h, h'] pi[x_h', x_h]``, ``(B,)``."""
    pred = attn[:, 1:] @ pi[target]  # (B, H-1, d)
    p = pred.gather(-1, target[:, 1:, None])[..., 0]  # (B, H-1)
    return -torch.log(p).mean(dim=1)


def prompt_losses(model, tokens: Tensor, pi, *, chunk: int = 512) -> dict[str, np.ndarray]:
    """Per-prompt cross-entropy (nats, mean over target positions ``h = 1..H-1``) of the model,
    the BMA predictive and the structure-blind predictor on the same prompts.

    - ``"model"``: the model's prediction of ``x^{L+1}_h``;
    - ``"bma"``: ``sum_h' P(pa(h) = h' | context) pi[x^{L+1}_h', .]`` (W Lemma 1 / Theorem 1, the
      Bayes-optimal predictor for the task; computed in float64);
    - ``"blind"``: ``(1/h) sum_{h' < h} pi[x^{L+1}_h', .]`` — uniform attention over the candidate
      parents with the true pi: the best predictor that ignores the context's structure.

    Returns arrays of shape ``(B,)``, so differences are paired and their standard errors honest.
    """
    dev = tokens.device
    pi_t = torch.as_tensor(np.asarray(pi, dtype=np.float64), device=dev)
    with np.errstate(divide="ignore"):
        log_pi = torch.as_tensor(np.log(np.asarray(pi, dtype=np.float64)), device=dev)
    L, H = model.L, model.H
    out = {"model": [], "bma": [], "blind": []}
    blind = blind_attention(H, device=dev)[None]
    with torch.no_grad():
        for start in range(0, tokens.shape[0], chunk):
            x = tokens[start:start + chunk]
            logp = model(x).double()  # (b, H-1, d)
            tgt = x[:, L]
            out["model"].append(-logp.gather(-1, tgt[:, 1:, None])[..., 0].mean(1))
            out["bma"].append(_mixture_nll(bma_posterior_torch(x[:, :L], log_pi), pi_t, tgt))
            out["blind"].append(_mixture_nll(blind.expand(x.shape[0], H, H), pi_t, tgt))
    return {k: torch.cat(v).cpu().numpy() for k, v in out.items()}


def bma_loss_on(tokens: Tensor, pi, examples, *, chunk: int = 512) -> np.ndarray:
    """Per-prompt cross-entropy (nats, mean over ``h = 1..H-1``) of BMA that reads only the context
    examples ``examples`` (indices into ``0..L-1``), the others dropped, ``(B,)``:
    ``-log sum_h' P(pa(h) = h' | x^S) pi[x^{L+1}_h', x^{L+1}_h]`` with ``S = examples`` (W Lemma 1 on
    ``|S|`` examples; float64). The Bayes-optimal predictor that sees those examples only: what a model
    whose first layer copies them, and nothing else, can reach at best (claim W.E3). ``tokens``
    ``(B, L+1, H)`` with the target last."""
    S = sorted(int(l) for l in examples)
    L = tokens.shape[1] - 1
    if not S or len(set(S)) != len(S) or S[0] < 0 or S[-1] >= L:
        raise ValueError(f"examples must be distinct indices in 0..{L - 1}, got {list(examples)}")
    dev = tokens.device
    pi_t = torch.as_tensor(np.asarray(pi, dtype=np.float64), device=dev)
    with np.errstate(divide="ignore"):
        log_pi = torch.as_tensor(np.log(np.asarray(pi, dtype=np.float64)), device=dev)
    idx = torch.as_tensor(S, device=dev)
    out = []
    for start in range(0, tokens.shape[0], chunk):
        x = tokens[start:start + chunk]
        out.append(_mixture_nll(bma_posterior_torch(x.index_select(1, idx), log_pi), pi_t, x[:, L]).cpu())
    return torch.cat(out).numpy()


def layer2_attention(model, inputs: Tensor, *, chunk: int = 512) -> np.ndarray:
    """The layer-2 pattern ``A(h, h')`` for every prompt, ``(B, H, H)`` (hook ``layer2.pattern``)."""
    rows = []
    with torch.no_grad():
        for start in range(0, inputs.shape[0], chunk):
            _, cache = run_with_cache(model, inputs[start:start + chunk], names=["layer2.pattern"])
            rows.append(cache["layer2.pattern"].double().cpu())
    return torch.cat(rows).numpy()


def layer2_bma_tv(model, tokens: Tensor, pi, *, chunk: int = 512) -> np.ndarray:
    """Per-prompt mean total variation between layer-2 attention and the BMA posterior.

    ``TV_h = (1/2) sum_{h' < h} |A(h, h') - P(pa(h) = h' | context)|`` averaged over
    ``h = 1..H-1``; returns ``(B,)`` (W Theorem 1: layer-2 attention -> BMA posterior).
    """
    with np.errstate(divide="ignore"):
        log_pi = torch.as_tensor(np.log(np.asarray(pi, dtype=np.float64)), device=tokens.device)
    A = layer2_attention(model, tokens, chunk=chunk)  # (B, H, H)
    post = []
    for start in range(0, tokens.shape[0], chunk):
        post.append(bma_posterior_torch(tokens[start:start + chunk, :model.L], log_pi).cpu())
    P = torch.cat(post).numpy()
    return 0.5 * np.abs(A - P)[:, 1:].sum(axis=-1).mean(axis=-1)


def parent_accuracy(attn, parents, start: int = 2) -> np.ndarray:
    """Per-prompt fraction of positions ``h >= start`` whose largest attention is on ``pa(h)``.

    ``attn`` ``(B, H, H)`` (layer-2 pattern or a posterior), ``parents`` ``(B, H)``. ``start=2``
    skips position 1, whose only candidate is 0.
    """
    a = np.asarray(attn)
    par = np.asarray(parents)
    pick = a[:, start:, :].argmax(axis=-1)  # (B, H-start)
    return (pick == par[:, start:]).mean(axis=1)


def gap_closed(model_loss: float, blind_loss: float, bma_loss: float) -> float:
    """Fraction of the gap between the structure-blind and the BMA loss the model closes:
    ``(blind - model) / (blind - bma)`` (1 = Bayes-optimal, 0 = no use of the structure)."""
    gap = blind_loss - bma_loss
    if not gap > 0:
        raise ValueError(f"the BMA loss {bma_loss} is not below the structure-blind loss {blind_loss}: "
                         "the gap-closed fraction is undefined")
    return (blind_loss - model_loss) / gap
