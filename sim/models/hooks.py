"""Named hook points, so probes read (or edit) attention scores and patterns without surgery.

A :class:`HookPoint` is an identity module placed on a tensor inside a model's ``forward``;
its name is its path in ``model.named_modules()`` (e.g. ``"layer1.pattern"``). Two helpers
drive them from outside:

- :func:`run_with_cache` runs the model once with caching on and returns
  ``(output, {name: tensor})``;
- :func:`run_with_hooks` runs it once with functions that may replace the tensor at
  named points (ablations, patching).

Both restore every hook point's state afterwards, also when the forward pass raises.
(The idea follows TransformerLens's ``HookPoint`` / ``run_with_cache``; this is a minimal
implementation written for this project.)
"""
from __future__ import annotations

from typing import Callable, Iterable

from torch import Tensor, nn

__all__ = ["HookPoint", "hook_points", "run_with_cache", "run_with_hooks"]

HookFn = Callable[[Tensor, "HookPoint"], "Tensor | None"]


class HookPoint(nn.Module):
    """Identity module that can remember its last input and apply an edit function.

    Attributes
    ----------
    caching : bool
        When true, ``forward`` stores its input in ``cached`` (detached if ``detach``).
    cached : Tensor or None
        The last input seen while caching was on.
    hook_fn : callable or None
        ``hook_fn(tensor, hook) -> tensor | None``; a returned tensor replaces the value
        that flows on (``None`` keeps it). Applied before caching, so the cache holds what
        the rest of the model saw.
    """

    def __init__(self) -> None:
        super().__init__()
        self.caching = False
        self.detach = True
        self.cached: Tensor | None = None
        self.hook_fn: HookFn | None = None

    def forward(self, x: Tensor) -> Tensor:
        """``x`` unchanged, or what ``hook_fn`` returns (same shape); cached when ``caching``."""
        if self.hook_fn is not None:
            y = self.hook_fn(x, self)
            if y is not None:
                if y.shape != x.shape:
                    raise ValueError(f"hook function changed the shape {tuple(x.shape)} -> {tuple(y.shape)}")
                x = y
        if self.caching:
            self.cached = x.detach() if self.detach else x
        return x

    def reset(self) -> None:
        """Caching off, cache and edit function cleared."""
        self.caching = False
        self.detach = True
        self.cached = None
        self.hook_fn = None


def hook_points(model: nn.Module) -> dict[str, HookPoint]:
    """``{name: HookPoint}`` for every hook point of ``model``, names as in ``named_modules``."""
    return {name: m for name, m in model.named_modules() if isinstance(m, HookPoint)}


def _select(points: dict[str, HookPoint], names: Iterable[str] | None) -> dict[str, HookPoint]:
    if names is None:
        return points
    names = list(names)
    unknown = [n for n in names if n not in points]
    if unknown:
        raise KeyError(f"unknown hook point(s) {unknown}; this model has {sorted(points)}")
    return {n: points[n] for n in names}


def run_with_cache(model: nn.Module, *inputs, names: Iterable[str] | None = None, detach: bool = True,
                   **kwargs) -> tuple[object, dict[str, Tensor]]:
    """Run ``model(*inputs, **kwargs)`` once and return ``(output, cache)``.

    ``cache[name]`` is the tensor that passed hook point ``name`` (all points, or only
    ``names``); a point the forward pass did not reach is absent from the cache.
    ``detach=False`` keeps the autograd graph (e.g. to differentiate a probe).
    """
    points = _select(hook_points(model), names)
    try:
        for hp in points.values():
            hp.caching, hp.detach, hp.cached = True, detach, None
        out = model(*inputs, **kwargs)
        cache = {n: hp.cached for n, hp in points.items() if hp.cached is not None}
    finally:
        for hp in points.values():
            hp.caching, hp.detach, hp.cached = False, True, None
    return out, cache


def run_with_hooks(model: nn.Module, *inputs, fwd_hooks: dict[str, HookFn], **kwargs):
    """Run ``model(*inputs, **kwargs)`` once with ``fwd_hooks[name]`` installed at each named point.

    Each function is called as ``fn(tensor, hook)`` and may return a replacement tensor of
    the same shape (or ``None`` to leave the value unchanged). The functions are removed
    afterwards.
    """
    points = _select(hook_points(model), fwd_hooks.keys())
    previous = {n: hp.hook_fn for n, hp in points.items()}
    try:
        for n, hp in points.items():
            hp.hook_fn = fwd_hooks[n]
        return model(*inputs, **kwargs)
    finally:
        for n, hp in points.items():
            hp.hook_fn = previous[n]
