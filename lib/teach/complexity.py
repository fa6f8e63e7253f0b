"""Counting the cost of a sequence layer: multiply-adds, sequential steps, path lengths.

`graph_depth` is introduced in chapter 1 (from RNNs to attention), which
compares the dependent steps of an RNN and of one self-attention layer with
it. Chapter 9 (why self-attention) uses the whole module to measure the
paper's Table 1 on three layers that all map n vectors of width d
(= d_model) to n vectors of width d:

    self-attention  `lib.MultiHeadAttention(d, h)`
    recurrent       ``nn.GRU(d, d)``
    convolutional   ``nn.Conv1d(d, d, k)``
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from lib._checks import require_bool, require_positive_int, require_tensor

__all__ = ["layer_macs", "graph_depth", "conv_stack", "depends_on"]


def layer_macs(kind: str, n: int, d: int, k: int = 3, with_projections: bool = True) -> int:
    """Multiply-adds of one layer's forward pass on one sequence of n vectors of width d.

    "attention": Q Kᵀ and weights × V cost n²·d each; the four projections
                 W^Q, W^K, W^V, W^O cost n·d² each (the paper's Table 1 keeps
                 only the n²·d term: pass ``with_projections=False``).
    "gru":       three gates, each with an input and a hidden d × d matrix: 6·n·d².
    "conv":      a kernel of width k, each tap a d × d matrix: k·n·d².
    Biases and nonlinearities (O(n·d)) are left out, as a FLOP counter does.
    """
    require_positive_int("n", n)
    require_positive_int("d", d)
    require_positive_int("k", k)
    require_bool("with_projections", with_projections)
    if kind == "attention":
        return 2 * n * n * d + (4 * n * d * d if with_projections else 0)
    if kind == "gru":
        return 6 * n * d * d
    if kind == "conv":
        return k * n * d * d
    raise ValueError(f"kind must be 'attention', 'gru' or 'conv', got {kind!r}")


def graph_depth(output: torch.Tensor) -> int:
    """Length of the longest chain of operations in the autograd graph behind ``output``.

    Every node is one recorded operation; operations on one chain must run one
    after the other, so this counts the sequential steps of the computation
    (the paper's "sequential operations", up to a constant per step).
    A leaf that requires grad (a parameter, an input with ``requires_grad=True``)
    is a node too, its ``AccumulateGrad``, and counts 1; constants (tensors
    without ``requires_grad``, Python numbers) count 0. For a leaf ``w`` with
    ``requires_grad=True``, ``graph_depth(w * 2)`` is 2 and
    ``graph_depth(torch.tanh(w * 2 + 1))`` is 4. Iterative, so deep graphs are
    fine.
    """
    require_tensor("output", output)
    if output.grad_fn is None:
        raise ValueError("output has no autograd graph: compute it from a tensor with requires_grad=True")
    depth: dict = {}
    stack = [(output.grad_fn, False)]
    while stack:
        node, children_done = stack.pop()
        if node in depth:
            continue
        children = [c for c, _ in node.next_functions if c is not None]
        if children_done:
            depth[node] = 1 + max((depth[c] for c in children), default=0)
        else:
            stack.append((node, True))
            stack.extend((c, False) for c in children if c not in depth)
    return depth[output.grad_fn]


def conv_stack(d: int, n_layers: int, k: int = 3, dilated: bool = False) -> nn.Sequential:
    """``n_layers`` causal ``Conv1d(d, d, k)``, each followed by a tanh; input and output (B, d, n).

    k is the kernel width. Causal: output position t sees inputs
    t - (k-1)·dilation, ..., t (the left side is zero-padded, so the length stays
    n). With contiguous kernels (dilation 1) L layers see 1 + L·(k - 1)
    positions; with ``dilated=True`` layer l (from 0) has dilation k**l and L
    layers see k**L positions, so covering n positions takes ceil(log_k n)
    layers. (WaveNet's stack, kernel 2 with the dilation doubling, is the case
    k = 2; ByteNet doubles the dilation with kernel 3, which also gives
    O(log n) layers, with base 2.)
    A tanh, not a ReLU, between layers: its slope is never zero in exact
    arithmetic, so `depends_on` sees every path (in floating point tanh' can
    still round to 0 for large inputs; see `depends_on`).
    """
    require_positive_int("d", d)
    require_positive_int("n_layers", n_layers)
    if isinstance(k, bool) or not isinstance(k, int) or k < 2:
        raise ValueError(f"k must be an int kernel width >= 2, got {k!r}")
    require_bool("dilated", dilated)
    layers: list[nn.Module] = []
    for layer in range(n_layers):
        dilation = k**layer if dilated else 1
        layers += [nn.ConstantPad1d(((k - 1) * dilation, 0), 0.0), nn.Conv1d(d, d, k, dilation=dilation), nn.Tanh()]
    return nn.Sequential(*layers)


def depends_on(f, x: torch.Tensor, out_pos: int, in_pos: int) -> bool:
    """Does output position ``out_pos`` of ``f(x)`` depend on input position ``in_pos``?

    x is (B, n, d); f maps it to (B, n, d) (when f returns a tuple, as
    ``nn.GRU`` does, its first element). The answer is read off the gradient
    ∂ f(x)[:, out_pos] / ∂ x[:, in_pos], computed in float64.

    Why float64: a gradient is a product of one factor per step, and in float32
    a long chain of small factors underflows to exactly 0. Through a 300-step
    GRU it does, and float32 would answer "no path" where there is one.
    float64 pushes that limit far out (down to about 1e-308) but cannot remove
    it: an exact zero means no path, or a gradient too small even for float64.
    A structural walk of the autograd graph cannot replace the gradient: a
    fused operation (``nn.GRU``, a masked softmax) is one node that links every
    input to every output, even where the true dependency is zero.

    f: an ``nn.Module`` (a float64 copy is used; the module is not changed) or
    a function of x, which must then compute in float64 (give it float64
    modules, e.g. ``copy.deepcopy(module).double()``).
    """
    require_tensor("x", x)
    if x.dim() != 3:
        raise ValueError(f"x must be (B, n, d), got shape {tuple(x.shape)}")
    if not x.is_floating_point():
        raise TypeError(f"x must be a floating-point tensor, got {x.dtype}")
    n = x.shape[1]
    for name, pos in (("out_pos", out_pos), ("in_pos", in_pos)):
        if isinstance(pos, bool) or not isinstance(pos, int) or not -n <= pos < n:
            raise ValueError(f"{name} must be an int position in [0, {n}), got {pos!r}")
    if isinstance(f, nn.Module):
        f = copy.deepcopy(f).double()
    elif not callable(f):
        raise TypeError(f"f must be an nn.Module or a function, got {type(f).__name__}")
    x = x.detach().to(torch.float64).requires_grad_(True)
    try:
        y = f(x)
    except (RuntimeError, TypeError, ValueError) as err:
        raise TypeError(
            "depends_on computes in float64: pass the module itself, or a function whose "
            f"modules are float64 (copy.deepcopy(module).double()). f raised: {err}"
        ) from err
    if isinstance(y, (tuple, list)):
        y = y[0]
    if not isinstance(y, torch.Tensor) or y.dtype != torch.float64:
        got = y.dtype if isinstance(y, torch.Tensor) else type(y).__name__
        raise TypeError(f"f must return a float64 tensor for a float64 input, got {got}")
    (grad,) = torch.autograd.grad(y[:, out_pos].sum(), x, allow_unused=True)
    return grad is not None and bool(grad[:, in_pos].abs().sum() > 0)
