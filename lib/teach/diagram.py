"""Draw a `lib.Transformer` from its own module tree.

Introduced in chapter 7 (the encoder, the decoder and the model families).

Nothing here is a picture copied from the paper: the boxes are the model's
``named_children()``, their order is the order in which a forward pass calls
them (recorded with forward pre-hooks), and the counts are the modules' own
parameter counts. Change the model (pre-LN, more layers) and the drawing follows.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import torch
from matplotlib.patches import Circle, FancyArrowPatch, FancyBboxPatch
from torch import nn

from lib.model.transformer import Transformer

__all__ = ["module_call_order", "record_forward", "draw_architecture"]

_SKIP = (nn.Dropout, nn.Identity)  # called, but nothing to draw


def module_call_order(model: nn.Module, *inputs, **kwargs) -> list[str]:
    """Qualified names of ``model``'s sub-modules in the order ``model(*inputs, **kwargs)`` first calls them.

    Runs one forward pass under ``torch.no_grad()`` with a forward pre-hook on
    every sub-module; modules never called (e.g. a ModuleList container) are absent.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    order: list[str] = []
    handles = []
    for name, module in model.named_modules():
        if name:
            handles.append(module.register_forward_pre_hook(lambda m, a, name=name: order.append(name)))
    try:
        with torch.no_grad():
            model(*inputs, **kwargs)
    finally:
        for h in handles:
            h.remove()
    seen: dict[str, None] = {}
    for name in order:
        seen.setdefault(name, None)
    return list(seen)


def record_forward(model: nn.Module, *inputs, names=None, **kwargs) -> dict[str, dict]:
    """Run ``model(*inputs, **kwargs)`` once (no grad) and record what sub-modules saw.

    Returns {qualified name: {"args": positional inputs, "output": output,
    "weights": ``attention_weights`` for attention modules (eval mode), else None}}
    for every named sub-module (or only those in ``names``) that was called;
    a module called twice keeps its last call. Chapter 7 uses it to follow the
    masks and the memory through a model.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    seen: dict[str, dict] = {}

    def hook(module, args, output, name):
        weights = getattr(module, "attention_weights", None)
        seen[name] = {"args": args, "output": output, "weights": weights}

    handles = [
        module.register_forward_hook(lambda m, a, o, name=name: hook(m, a, o, name))
        for name, module in model.named_modules()
        if name and (names is None or name in names)
    ]
    try:
        with torch.no_grad():
            model(*inputs, **kwargs)
    finally:
        for h in handles:
            h.remove()
    return seen


def _n_params(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def _box(ax, x, y, w, h, text, color, fontsize=7.5):
    ax.add_patch(FancyBboxPatch((x - w / 2, y), w, h, boxstyle="round,pad=0.02,rounding_size=0.08",
                                facecolor=color, edgecolor="0.2", linewidth=1.0))
    ax.text(x, y + h / 2, text, ha="center", va="center", fontsize=fontsize)


def _arrow(ax, start, end, color="0.2", style="-|>", connection="arc3"):
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle=style, mutation_scale=10, color=color,
                                 linewidth=1.0, connectionstyle=connection))


_ADD = "⊕"  # marks a residual sum in a layer's list of drawn items
_ADD_H = 0.3  # height of a ⊕ row


def _is_sublayer(module: nn.Module) -> bool:
    return not isinstance(module, (nn.LayerNorm, *_SKIP))


def _with_adds(layer: nn.Module, names: list[str]) -> list[str]:
    """The layer's drawn children with a ⊕ after each sub-layer's residual sum.

    Post-LN: sub-layer, ⊕, norm (the norm takes the sum). Pre-LN: norm,
    sub-layer, ⊕ (the sum is the layer's output stream)."""
    items = []
    for name in names:
        items.append(name)
        if _is_sublayer(layer.get_submodule(name)):
            items.append(_ADD)
    return items


def _starts_group(layer: nn.Module, items: list[str], k: int) -> bool:
    """Does item k start a residual block? A post-LN block starts at its sub-layer,
    a pre-LN block at the LayerNorm in front of its sub-layer."""
    module = layer.get_submodule(items[k])
    if getattr(layer, "norm_first", False):
        return isinstance(module, nn.LayerNorm)
    return _is_sublayer(module)


def _residual(ax, x, w, start, y_add) -> None:
    """A ⊕ at height y_add on the main line, and the skip path from ``start`` around into it."""
    r = _ADD_H / 2
    cy = y_add + r
    ax.add_patch(Circle((x, cy), r * 0.8, facecolor="white", edgecolor="0.2", linewidth=1.0,
                        gid="residual-add"))
    ax.text(x, cy, "+", ha="center", va="center", fontsize=9)
    side = x + w / 2 + 0.12
    (sx, sy) = start
    ax.plot([sx, side, side], [sy, sy, cy], color="#2e75b6", linewidth=1.1, gid="residual-skip")
    ax.add_patch(FancyArrowPatch((side, cy), (x + r * 0.8, cy), arrowstyle="-|>", mutation_scale=9,
                                 color="#2e75b6", linewidth=1.1, gid="residual-skip-head"))


_COLORS = {"MultiHeadAttention": "#f4b183", "PositionwiseFeedForward": "#9dc3e6", "LayerNorm": "#ffe699",
           "TokenEmbedding": "#c5e0b4", "Linear": "#d9d9d9"}


def draw_architecture(model: Transformer, ax=None):
    """Draw ``model`` (a `lib.Transformer`) as two columns of boxes: encoder left, decoder right.

    Top-level children whose names start with ``src_`` or ``encoder`` go left,
    the others right; each column is ordered by the forward pass's call order.
    A ModuleList of layers is drawn as one frame holding its first layer's
    children (dropouts skipped), labelled "N ×". Each sub-layer (attention or
    FFN) sits in a residual connection: a blue skip path branches off the main
    line and joins it again at a ⊕ (patch gid ``"residual-add"``, skip lines
    gid ``"residual-skip"``). Post-LN: the path branches at the sub-layer's
    input and the ⊕ sits *before* the LayerNorm. Pre-LN: it branches before
    the LayerNorm and the ⊕ follows the sub-layer. The decoder's
    ``self_attn`` is labelled "masked (causal)", as `Transformer` is used
    throughout the course (the mask itself is an argument of the forward
    pass, not part of the module). The arrow from the encoder's top into
    every decoder layer's ``cross_attn`` is the memory.
    Returns the matplotlib Axes.
    """
    if not isinstance(model, Transformer):
        raise TypeError(f"model must be a lib.Transformer, got {type(model).__name__}")
    was_training = model.training
    model.eval()
    src = torch.zeros(1, 3, dtype=torch.long)
    tgt = torch.zeros(1, 2, dtype=torch.long)
    order = module_call_order(model, src, tgt)
    model.train(was_training)
    first_call = {name: i for i, name in enumerate(order)}

    def first_index(prefix: str) -> int:
        hits = [i for n, i in first_call.items() if n == prefix or n.startswith(prefix + ".")]
        return min(hits) if hits else len(order)

    children = [(n, m) for n, m in model.named_children() if not isinstance(m, _SKIP)]
    children.sort(key=lambda nm: first_index(nm[0]))
    columns = {"encoder": [], "decoder": []}
    for name, module in children:
        side = "encoder" if name.startswith(("src_", "encoder")) else "decoder"
        columns[side].append((name, module))

    if ax is None:
        _, ax = plt.subplots(figsize=(10, 9))
    w, h, gap = 3.0, 0.55, 0.35
    cross_targets, encoder_top = [], None
    for x, side in ((0.0, "encoder"), (4.4, "decoder")):
        y, previous_top = 0.0, None
        for name, module in columns[side]:
            if previous_top is not None:
                _arrow(ax, (x, previous_top), (x, y))
            if isinstance(module, nn.ModuleList):
                layer = module[0]
                inner = [n for n in order if n.startswith(f"{name}.0.") and n.count(".") == 2]
                inner = [n.split(".")[-1] for n in inner]
                items = _with_adds(layer, [n for n in inner if not isinstance(layer.get_submodule(n), _SKIP)])
                n_adds = items.count(_ADD)
                frame_h = (len(items) - n_adds) * (h + gap) + n_adds * (_ADD_H + gap) + gap + 0.6
                ax.add_patch(FancyBboxPatch((x - w / 2 - 0.25, y), w + 0.5, frame_h, boxstyle="round,pad=0.02",
                                            facecolor="#f2f2f2", edgecolor="0.4", linestyle="--"))
                left = side == "encoder"
                ax.text(x + (-1 if left else 1) * (w / 2 + 0.45), y + frame_h / 2, f"{len(module)} ×",
                        ha="right" if left else "left", va="center", fontsize=12)
                ax.text(x, y + frame_h - 0.35, f"{name}: {len(module)} × {type(layer).__name__}\n"
                        f"({_n_params(layer):,} params each)", ha="center", va="center", fontsize=8, style="italic")
                yy = y + gap
                group_start = None  # (x, y) where the current sub-layer's residual branches off
                for k, item in enumerate(items):
                    _arrow(ax, (x, yy - gap if k else y), (x, yy))
                    if item == _ADD:
                        _residual(ax, x, w, group_start, yy)
                        yy += _ADD_H + gap
                        continue
                    child = layer.get_submodule(item)
                    kind = type(child).__name__
                    if group_start is None or _starts_group(layer, items, k):
                        group_start = (x, yy - gap / 2)
                    label = f"{item}: {kind}\n{_n_params(child):,} params"
                    if side == "decoder" and item == "self_attn":
                        label = f"{item}: {kind}\nmasked (causal) · {_n_params(child):,} params"
                    _box(ax, x, yy, w, h, label, _COLORS.get(kind, "white"))
                    if item == "cross_attn":
                        cross_targets.append((x - w / 2, yy + h / 2))
                    yy += h + gap
                y_top = y + frame_h
            else:
                kind = type(module).__name__
                _box(ax, x, y, w, h, f"{name}: {kind}\n{_n_params(module):,} params", _COLORS.get(kind, "white"))
                y_top = y + h
            previous_top, y = y_top, y_top + gap
        if side == "encoder":
            encoder_top = (x, previous_top)
    # The memory: up out of the encoder, across, and into every decoder layer's cross-attention.
    mid_x, lift = (0.0 + 4.4) / 2, encoder_top[1] + 0.3
    for tx, ty in cross_targets:
        xs, ys = [encoder_top[0], encoder_top[0], mid_x, mid_x], [encoder_top[1], lift, lift, ty]
        ax.plot(xs, ys, color="#c55a11", linewidth=1.2)
        _arrow(ax, (mid_x, ty), (tx, ty), color="#c55a11")
    ax.text(mid_x + 0.08, lift + 0.1, "memory", color="#c55a11", fontsize=9, ha="center")
    ax.text(0.0, -0.45, "source tokens", ha="center", fontsize=9)
    ax.text(4.4, -0.45, "target tokens (shifted right)", ha="center", fontsize=9)
    ax.set_xlim(-2.5, 6.9)
    ax.set_ylim(-0.8, max(encoder_top[1] + 0.6, previous_top) + 0.3)
    ax.set_axis_off()
    return ax
