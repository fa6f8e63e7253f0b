"""Looking inside a model: the activations at its hook points, where two models first
differ, and heads switched off (chapter 16, "Looking inside a trained model").

- `run_with_cache(model, *args, names=None)` runs the model once and returns its
  output and every `HookPoint`'s tensor by name (see `lib.model.hooks` for the names).
- `compare_layers(mine, reference, inputs)` runs two models on the same inputs,
  records every sub-module's output in the order the reference computes them, and
  names the first one that differs beyond a tolerance (None when the outputs agree).
- `ablate_heads(model, heads)` zeroes chosen heads' outputs (their ``hook_z`` slice)
  inside a ``with`` block: the zero-ablation of the induction-head experiments.
"""

from __future__ import annotations

import contextlib
import math
import numbers
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch
from torch import nn

from lib.model.hooks import HookPoint

__all__ = [
    "LayerDifference",
    "ablate_heads",
    "attention_hook",
    "compare_layers",
    "hook_names",
    "run_with_cache",
]


def _require_module(name: str, model) -> nn.Module:
    if not isinstance(model, nn.Module):
        raise TypeError(f"{name} must be a torch.nn.Module, got {type(model).__name__}")
    return model


def hook_names(model: nn.Module) -> list[str]:
    """The names of every `HookPoint` inside ``model``, in registration order."""
    _require_module("model", model)
    return [n for n, m in model.named_modules() if isinstance(m, HookPoint)]


def _selected(model: nn.Module, names) -> dict[str, HookPoint]:
    points = {n: m for n, m in model.named_modules() if isinstance(m, HookPoint)}
    if names is None:
        return points
    if callable(names):
        return {n: m for n, m in points.items() if names(n)}
    if isinstance(names, str):
        names = [names]
    try:
        names = list(names)
    except TypeError:
        raise TypeError(
            f"names must be None, a list of hook names or a function name -> bool, got {type(names).__name__}"
        ) from None
    unknown = [n for n in names if n not in points]
    if unknown:
        some = ", ".join(list(points)[:6])
        raise ValueError(
            f"names: no hook point called {unknown[0]!r} in this model (it has {len(points)}, e.g. {some})"
        )
    return {n: points[n] for n in names}


def run_with_cache(model: nn.Module, *args, names=None, grad: bool = False, **kwargs):
    """``model(*args, **kwargs)`` once, recording the tensors at its hook points.

    Returns ``(output, cache)``: ``cache`` maps each hook point's name (as in
    ``model.named_modules()``, e.g. ``"blocks.1.attn.hook_pattern"``) to the tensor
    that passed through it, detached. ``names``: None for every hook point, a list
    of names, or a function name -> bool. The hooks are removed afterwards, so the
    model runs its usual (fused) path again. ``grad=False`` runs under no_grad.
    """
    _require_module("model", model)
    points = _selected(model, names)
    cache: dict[str, torch.Tensor] = {}

    def store(name):
        def hook(module, inputs, output):
            cache[name] = output.detach()

        return hook

    handles = [p.register_forward_hook(store(n)) for n, p in points.items()]
    try:
        with torch.set_grad_enabled(grad):
            output = model(*args, **kwargs)
    finally:
        for h in handles:
            h.remove()
    return output, cache


# --------------------------------------------------------------------------- compare_layers


@dataclass(frozen=True)
class LayerDifference:
    """Where two models first part: the sub-module, by how much, and what matched before it."""

    name: str  # the sub-module (or hook point) whose output first differs, in the reference's order
    max_abs_diff: float  # largest |mine - reference| in that output (inf for a shape mismatch)
    scale: float  # largest |reference| in that output, for reading the difference
    atol: float
    matched: int  # how many outputs the reference computed before it, all equal
    detail: str = ""  # e.g. "shape (2, 5, 16) vs (2, 5, 8)"

    def __str__(self) -> str:
        what = self.detail or f"max |Δ| {self.max_abs_diff:.3g} (largest |value| {self.scale:.3g}, atol {self.atol:g})"
        return f"first difference at {self.name}: {what}; the {self.matched} outputs computed before it agree"

    __repr__ = __str__


def _first_tensor(value):
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, (tuple, list)) and value and isinstance(value[0], torch.Tensor):
        return value[0]
    return None


def _record(fn: Callable, args, kwargs, modules: dict[str, nn.Module]) -> tuple[list, object]:
    """Run fn, keeping every watched module's float output, in completion order (name#call)."""
    seen: list[tuple[str, torch.Tensor]] = []
    calls: dict[str, int] = {}

    def watch(name):
        def hook(module, inputs, output):
            t = _first_tensor(output)
            if t is None or not t.is_floating_point():
                return
            calls[name] = calls.get(name, 0) + 1
            key = name if calls[name] == 1 else f"{name} (call {calls[name]})"
            seen.append((key, t.detach().clone()))

        return hook

    handles = [m.register_forward_hook(watch(n)) for n, m in modules.items()]
    try:
        with torch.no_grad():
            out = fn(*args, **kwargs)
    finally:
        for h in handles:
            h.remove()
    return seen, out


def _watched(model, modules) -> dict[str, nn.Module]:
    if modules is not None:
        if isinstance(modules, nn.Module):
            return {n: m for n, m in modules.named_modules() if n}
        if isinstance(modules, dict) and all(isinstance(m, nn.Module) for m in modules.values()):
            return {f"{key}.{n}" if n else key: sub for key, m in modules.items()
                    for n, sub in m.named_modules()}
        raise TypeError("modules must be an nn.Module or a dict name -> nn.Module")
    if isinstance(model, nn.Module):
        return {n: m for n, m in model.named_modules() if n}
    return {}


def _differs(a: torch.Tensor, b: torch.Tensor, atol: float, rtol: float) -> bool:
    if a.shape != b.shape:
        return True
    return not bool(torch.allclose(a.to(b.dtype), b, atol=atol, rtol=rtol, equal_nan=False))


def _difference(name, got, want, atol, matched) -> LayerDifference:
    if got.shape != want.shape:
        return LayerDifference(name, math.inf, float(want.abs().max()) if want.numel() else 0.0, atol, matched,
                               f"shape {tuple(got.shape)} vs the reference's {tuple(want.shape)}")
    diff = (got.to(want.dtype) - want).abs()
    diff = torch.nan_to_num(diff, nan=math.inf)
    return LayerDifference(name, float(diff.max()), float(want.abs().max()), atol, matched)


def compare_layers(mine, reference, inputs, *, atol: float = 1e-5, rtol: float = 0.0, modules=None):
    """Run both models on ``inputs``; name the first sub-module whose output differs.

    mine, reference: ``nn.Module``s with the same sub-module names (a copy of a
    model with one change, or the learner's model built like `lib`'s), or two
    functions that call the same modules (then ``modules`` - an ``nn.Module`` or
    a dict name -> module - says which to watch, with their sub-modules). ``inputs``: a tensor, a tuple of
    positional arguments, or a dict of keyword arguments.

    Every watched module's (floating) output is recorded as it completes, so a
    sub-layer comes before the block that contains it; the reference's order is
    followed and the first output that is not within ``atol + rtol·|reference|`` of
    the reference's is reported as a `LayerDifference`. Returns None when the two
    final outputs agree. Both models run in eval mode (no dropout), without grad.
    """
    for arg, value in (("atol", atol), ("rtol", rtol)):
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not value >= 0 or math.isinf(value):
            raise ValueError(f"{arg} must be a finite number >= 0, got {value!r}")
    for arg, value in (("mine", mine), ("reference", reference)):
        if not callable(value):
            raise TypeError(f"{arg} must be a model (an nn.Module) or a function, got {type(value).__name__}")
    if isinstance(inputs, dict):
        args, kwargs = (), inputs
    elif isinstance(inputs, tuple):
        args, kwargs = inputs, {}
    elif isinstance(inputs, torch.Tensor):
        args, kwargs = (inputs,), {}
    else:
        raise TypeError(f"inputs must be a tensor, a tuple of arguments or a dict of keyword arguments, "
                        f"got {type(inputs).__name__}")
    models = [m for m in (mine, reference) if isinstance(m, nn.Module)]
    modes = [m.training for m in models]
    for m in models:
        m.eval()
    try:
        got, got_out = _record(mine, args, kwargs, _watched(mine, modules))
        want, want_out = _record(reference, args, kwargs, _watched(reference, modules))
    finally:
        for m, mode in zip(models, modes):
            m.train(mode)
    got_final, want_final = _first_tensor(got_out), _first_tensor(want_out)
    if got_final is None or want_final is None:
        raise TypeError("compare_layers: both models must return a tensor (or a tuple starting with one)")
    if not _differs(got_final, want_final, atol, rtol):
        return None
    mine_by_name = dict(got)
    for matched, (name, w) in enumerate(want):
        g = mine_by_name.get(name)
        if g is not None and _differs(g, w, atol, rtol):
            return _difference(name, g, w, atol, matched)
    return _difference("output", got_final, want_final, atol, len(want))


# --------------------------------------------------------------------------- heads


_ATTN_PATTERNS = ("blocks.{i}.attn.{hook}", "layers.{i}.self_attn.{hook}")


def attention_hook(model: nn.Module, layer: int, hook: str = "hook_z") -> str:
    """The name of block ``layer``'s attention hook point (``hook_z`` or ``hook_pattern``)
    in a model with ``blocks.{i}.attn`` (the modern decoder, chapter 16's models) or
    ``layers.{i}.self_attn`` (`lib.DecoderOnlyModel`)."""
    names = set(hook_names(model))
    for pattern in _ATTN_PATTERNS:
        name = pattern.format(i=layer, hook=hook)
        if name in names:
            return name
    raise ValueError(f"layer: this model has no attention hook {hook!r} in block {layer!r}")


@contextlib.contextmanager
def ablate_heads(model: nn.Module, heads: Iterable[tuple[int, int]], *,
                 mean_over: torch.Tensor | None = None):
    """Inside the ``with`` block, the listed (layer, head) pairs output zero.

    Each head's slice of ``hook_z`` (its output before W_O) is set to zero, so
    W_O receives nothing from it: zero-ablation. The hooks go when the block ends.

    mean_over  token ids (B, T): instead of zero, each head outputs its mean
               ``hook_z`` over these inputs (every sequence and position), an output
               the model does see in use (mean-ablation; chapter 16, section 5).
    """
    _require_module("model", model)
    by_layer: dict[int, list[int]] = {}
    for pair in heads:
        if (not isinstance(pair, (tuple, list)) or len(pair) != 2
                or not all(isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in pair)):
            raise TypeError(f"heads must hold (layer, head) pairs of ints, got {pair!r}")
        by_layer.setdefault(int(pair[0]), []).append(int(pair[1]))
    modules = dict(model.named_modules())
    targets = []
    for layer, hs in by_layer.items():
        name = attention_hook(model, layer, "hook_z")
        n_heads = getattr(modules[name.rsplit(".", 1)[0]], "n_heads", None)
        bad = [h for h in hs if h < 0 or (n_heads is not None and h >= n_heads)]
        if bad:
            raise ValueError(f"heads: layer {layer} has no head {bad[0]} (it has {n_heads})")
        targets.append((modules[name], sorted(set(hs))))
    means = [0.0] * len(targets)
    if mean_over is not None:
        if not isinstance(mean_over, torch.Tensor) or mean_over.dtype != torch.long \
                or mean_over.dim() != 2 or mean_over.numel() == 0:
            raise TypeError("mean_over: expected a non-empty int64 tensor of token ids (B, T)")
        seen: list = [None] * len(targets)

        def keep(i):
            def hook(module, inputs, z):
                seen[i] = z.detach().mean(dim=(0, 1))  # (h, d_head)
            return hook

        handles = [p.register_forward_hook(keep(i)) for i, (p, _) in enumerate(targets)]
        try:
            with torch.no_grad():
                model(mean_over)
        finally:
            for h in handles:
                h.remove()
        means = [m[hs] for m, (_, hs) in zip(seen, targets)]

    def replace(hs, value):
        def hook(module, inputs, z):  # z: (B, T, h, d_head)
            z = z.clone()
            z[:, :, hs, :] = value
            return z

        return hook

    handles = [p.register_forward_hook(replace(hs, m)) for (p, hs), m in zip(targets, means)]
    try:
        yield model
    finally:
        for h in handles:
            h.remove()
