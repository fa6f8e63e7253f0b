"""Which kernel `lib.MultiHeadAttention`'s training path runs on the CPU (chapter 4, cell on the modes).

Chapter 4 says that with the pinned torch, the training path with dropout 0 runs the
fused `_scaled_dot_product_flash_attention_for_cpu` kernel (no m x n weights stored),
and with dropout > 0 the math path that builds them. PyTorch's profiler lists the aten
operators each forward pass calls; a torch upgrade that changes the dispatch fails here.
"""

import torch
from torch.profiler import ProfilerActivity, profile

import lib


def _aten_ops(dropout: float) -> set[str]:
    torch.manual_seed(0)
    layer = lib.MultiHeadAttention(d_model=16, n_heads=2, dropout=dropout).train()
    x = torch.randn(2, 5, 16)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        layer(x, x, x, mask=lib.causal_mask(5))
    return {event.key for event in prof.key_averages() if "attention" in event.key}


def test_training_without_dropout_runs_the_fused_cpu_kernel():
    ops = _aten_ops(0.0)
    assert "aten::_scaled_dot_product_flash_attention_for_cpu" in ops, ops
    assert "aten::_scaled_dot_product_attention_math" not in ops, ops


def test_training_with_dropout_runs_the_math_path():
    ops = _aten_ops(0.1)
    assert "aten::_scaled_dot_product_attention_math" in ops, ops
    assert "aten::_scaled_dot_product_flash_attention_for_cpu" not in ops, ops
