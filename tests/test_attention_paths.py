"""What the lib.MultiHeadAttention docstring and chapter 9 say about PyTorch's kernels
(torch 2.13, CPU): train mode without dropout runs a fused kernel that never makes a
(B, h, n, n) tensor of weights, with or without a bool mask (PyTorch turns a causal
mask into one (n, n) float mask for every head and sequence: O(n^2), but not the weights);
attention dropout, eval mode and a forced MATH backend build the weights. Observed with a
TorchDispatchMode that records every tensor an operation returns."""

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils._python_dispatch import TorchDispatchMode

import lib

N = 96  # longer than every other size here, so an (N, N) tensor can only be the weights


class FloatSquares(TorchDispatchMode):
    """Counts the tensors of the weights' size, (B, h, N, N) or more, that any operation returns."""

    def __init__(self):
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor) and tuple(t.shape[-2:]) == (N, N) and t.numel() >= 2 * 4 * N * N:
                self.count += 1
        return out


def holds_weights(layer, mask=None):
    torch.manual_seed(0)
    x = torch.randn(2, N, 16, requires_grad=True)
    with FloatSquares() as seen:
        layer(x, x, x, mask=mask).sum().backward()
    return seen.count > 0


@pytest.mark.parametrize("mask", [None, "causal"])
def test_train_mode_without_dropout_never_makes_the_weights(mask):
    layer = lib.MultiHeadAttention(16, 4).train()
    m = lib.causal_mask(N) if mask else None
    assert not holds_weights(layer, m)
    assert layer.attention_weights is None


def test_attention_dropout_makes_the_weights():
    assert holds_weights(lib.MultiHeadAttention(16, 4, dropout=0.1).train())


def test_a_forced_math_backend_makes_the_weights():
    with sdpa_kernel(SDPBackend.MATH):
        assert holds_weights(lib.MultiHeadAttention(16, 4).train())


def test_eval_mode_makes_and_keeps_the_weights():
    layer = lib.MultiHeadAttention(16, 4).eval()
    assert holds_weights(layer)
    assert layer.attention_weights.shape == (2, 4, N, N)
