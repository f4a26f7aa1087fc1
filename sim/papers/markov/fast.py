"""The Markov LM's accelerated loss and logits: the same function as
:class:`~sim.papers.markov.model.MarkovLM`, computed with the fused kernels of :mod:`sim.accel`.
The one place the accelerated paths are chosen.

:func:`training_loss` (the training step) and :func:`eval_logits` (the evaluations) run the
model's own parameters through

* the first layer, when its input is the token embedding alone (relative positions, no active
  dropout), from ``C``-row tables (:class:`sim.accel.fused_layers.TokenOnlyAttention`), unless its
  shifted exponentials could underflow;
* every other relative-position attention sublayer as one autograd node
  (:class:`sim.accel.fused_layers.AttentionSublayer`), dropout off;
* the final LayerNorm, unembedding and cross-entropy as one node
  (:class:`sim.accel.fused_layers.LogitLoss`),

and otherwise the model's plain modules. :meth:`MarkovLM.forward <sim.papers.markov.model.MarkovLM.forward>`
never takes these paths, so hook points and probes always observe the plain model; and a model
with a hook point set (an intervention training or evaluating through its hooks, e.g. G's task
injection) is run through its plain forward here too. With
``ICL_VERIFY_ACCEL=0`` (:func:`sim.accel.enabled`) both functions are the plain model's. Tests hold both to the plain
model's values and gradients in float64 (``tests/papers/markov/test_markov_model.py``); the gain
where a user waits is measured in ``benchmarks/bench_edelman.py`` and stated in docs/benchmarks.md.
"""
from __future__ import annotations

from torch import Tensor

from sim.accel import enabled
from sim.accel.fused_layers import AttentionSublayer, ExponentUnderflow, LogitLoss, TokenOnlyAttention
from sim.models.hooks import hook_points
from sim.papers.markov.model import MarkovLM, check_tokens

__all__ = ["training_loss", "eval_logits"]


def training_loss(model: MarkovLM, tokens: Tensor, targets: Tensor) -> Tensor:
    """``model.loss(tokens, targets)``: mean next-token cross-entropy, by the fused kernels when on."""
    if not _fused(model):
        return model.loss(tokens, targets)
    h = _trunk(model, tokens)
    return LogitLoss.apply(h.reshape(-1, h.shape[-1]), model.ln_f.weight, model.ln_f.bias, model.unembed.weight,
                           targets.reshape(-1), model.ln_f.eps)


def eval_logits(model: MarkovLM, tokens: Tensor) -> Tensor:
    """``model(tokens)``: logits ``(B, T, C)``, by the fused kernels when on (any other model, e.g.
    a hand-built control, is simply called)."""
    if not _fused(model):
        return model(tokens)
    return model.unembed(model.ln_f(_trunk(model, tokens)))


def _fused(model) -> bool:
    """The fused kernels apply: switched on, a :class:`MarkovLM`, and none of its hook points set."""
    return enabled() and isinstance(model, MarkovLM) and not any(
        hp.caching or hp.hook_fn is not None for hp in hook_points(model).values())


def _dropout_active(model: MarkovLM) -> bool:
    return model.training and model.config.dropout > 0


def _trunk(model: MarkovLM, tokens: Tensor) -> Tensor:
    """The residual stream after the last layer, as ``model._trunk`` computes it (hook points
    bypassed: these paths are for training and evaluation, not for probes)."""
    check_tokens(model, tokens)
    T = tokens.shape[1]
    h = _token_only_first_layer(model, tokens) if model.pos is None and not _dropout_active(model) else None
    first = 2 if h is not None else 1
    if h is None:
        h = model.embed_tokens(tokens)
    mask = model.mask[..., :T, :T]
    for block in list(model.blocks)[first - 1:]:
        if block.rel is not None and not _dropout_active(model):
            ln = block.ln_att  # the whole attention sublayer in one autograd node
            h = block._mlp(AttentionSublayer.apply(h, ln.weight, ln.bias, block.Wq.weight, block.Wk.weight,
                                                   block.Wv.weight, block.Wo.weight, block.rel, block.heads, ln.eps))
        else:
            h = block(h, mask)
    return h


def _token_only_first_layer(model: MarkovLM, tokens: Tensor) -> Tensor | None:
    """Layer 1 when its input is the token embedding alone (``h[b, t] = E[x_t]``), from ``C``-row
    tables; ``None`` when it does not apply or its shifted exponentials could underflow."""
    block = model.blocks[0]
    if block.rel is None:
        return None
    B, T = tokens.shape
    ln = block.ln_att
    try:
        out = TokenOnlyAttention.apply(tokens, model.embed.weight, ln.weight, ln.bias, block.Wq.weight,
                                       block.Wk.weight, block.Wv.weight, block.Wo.weight, block.rel, block.heads,
                                       ln.eps)
    except ExponentUnderflow:
        return None
    return block._mlp(out.view(B, T, -1))
