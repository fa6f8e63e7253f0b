"""Named hook points: places inside a model where a reader can look or intervene
(chapter 16, "Looking inside a trained model").

A `HookPoint` is an identity module. A model calls it on a tensor it computes
(``x = self.hook_resid_pre(x)``); with no hook attached it returns its input
unchanged, and `HookPoint.active` is False, so the model may skip work that only
a hook needs (materialising the attention weights when the fused kernel would
not). A forward hook registered on it (``point.register_forward_hook(fn)``,
PyTorch's own mechanism) sees the tensor and may return a replacement.

Names in every model of `lib` that has them (``model.named_modules()``):

    blocks.{i}.hook_resid_pre     (B, T, d_model)  the residual stream entering block i
    blocks.{i}.attn.hook_pattern  (B, h, T_q, T_k) attention weights, after softmax
    blocks.{i}.attn.hook_z        (B, T, h, d_head) each head's output, before W_O
    blocks.{i}.hook_attn_out      (B, T, d_model)  the attention sub-layer's output
    blocks.{i}.hook_mlp_out       (B, T, d_model)  the feed-forward sub-layer's output
    blocks.{i}.hook_resid_post    (B, T, d_model)  the residual stream leaving block i
"""

from __future__ import annotations

import torch
from torch import nn


class HookPoint(nn.Module):
    """Identity; forward hooks registered on it see (and may replace) the tensor."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x

    @property
    def active(self) -> bool:
        """True while at least one forward hook is registered here."""
        return bool(self._forward_hooks)
