"""Attention before the Transformer: RNN encoder–decoders and their score functions.

Introduced in chapter 1 (from RNNs to attention).

An RNN encoder reads the source x_1..x_n one step at a time and leaves a
state h_j after each step. Sutskever et al. (2014) hand the decoder only the
last state, the *context vector* c = h_n. Bahdanau et al. (2014) and Luong
et al. (2015) let every decoder step look back at all the h_j instead: a score
e_j says how well h_j fits the decoder's state s, a softmax turns the scores
into weights, and the context is the weighted average of the h_j.

The weights follow the papers' column-vector formulas (W_s s, sᵀ W h_j): `w_s`
is (d_a, d_s), as W_s is. The states themselves are batch-first rows, as in the
rest of `lib`, so W_s s is computed as ``s @ w_s.T``. The papers number source
positions 1..n; tensors index them 0..n-1.

Shape notation (batch-first, like the rest of `lib`):
    B batch (any number of leading dimensions), n source positions,
    d_x input width, d_h encoder-state width, d_s decoder-state width,
    d_a width of the hidden layer inside the additive score.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from lib._checks import require_float, require_same_kind, shape

__all__ = [
    "additive_score",
    "multiplicative_score",
    "attend",
    "run_encoder",
    "bahdanau_step",
    "luong_step",
    "linear_readout_r2",
]

ScoreFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def _check_states(s: torch.Tensor, h: torch.Tensor) -> None:
    require_float("s", s)
    require_float("h", h)
    if s.dim() < 1 or h.dim() < 2:
        raise ValueError(
            f"s must be (..., d_s) and h must be (..., n, d_h); got s {shape(s)} and h {shape(h)}"
        )
    try:
        torch.broadcast_shapes(s.shape[:-1], h.shape[:-2])
    except RuntimeError:
        raise ValueError(f"the leading (batch) dimensions of s {shape(s)} and h {shape(h)} do not broadcast") from None


def additive_score(
    s: torch.Tensor,
    h: torch.Tensor,
    w_s: torch.Tensor,
    w_h: torch.Tensor,
    v: torch.Tensor,
    b: torch.Tensor | None = None,
) -> torch.Tensor:
    """Bahdanau's additive score e_j = vᵀ tanh(W_s s + W_h h_j + b), chapter 1.

    s: (..., d_s) a decoder state (in Bahdanau's model the *previous* one,
    s_{i-1}); h: (..., n, d_h) the encoder states; w_s: (d_a, d_s);
    w_h: (d_a, d_h); v: (d_a,); b: (d_a,) or None. Returns (..., n).

    The score is a one-hidden-layer MLP on the pair (s, h_j): the two inputs
    are *added* after their own projections, hence the name.
    """
    _check_states(s, h)
    for name, t in (("w_s", w_s), ("w_h", w_h), ("v", v)):
        require_float(name, t)
    if w_s.dim() != 2 or w_h.dim() != 2 or v.dim() != 1:
        raise ValueError(f"w_s, w_h must be matrices and v a vector; got {shape(w_s)}, {shape(w_h)}, {shape(v)}")
    d_a = v.shape[0]
    if w_s.shape != (d_a, s.shape[-1]) or w_h.shape != (d_a, h.shape[-1]):
        raise ValueError(
            f"with v of shape {shape(v)}, w_s must be (d_a={d_a}, d_s={s.shape[-1]}) and "
            f"w_h must be (d_a={d_a}, d_h={h.shape[-1]}); got w_s {shape(w_s)}, w_h {shape(w_h)}"
        )
    if b is not None and (require_float("b", b).shape != (d_a,)):
        raise ValueError(f"b must have shape ({d_a},), got {shape(b)}")
    require_same_kind(s=s, h=h, w_s=w_s, w_h=w_h, v=v, **({} if b is None else {"b": b}))
    hidden = (s @ w_s.T)[..., None, :] + h @ w_h.T  # (..., n, d_a)
    if b is not None:
        hidden = hidden + b
    return torch.tanh(hidden) @ v  # (..., n)


def multiplicative_score(s: torch.Tensor, h: torch.Tensor, w: torch.Tensor | None = None) -> torch.Tensor:
    """Luong's multiplicative score, chapter 1: e_j = sᵀ W h_j ("general"), or sᵀ h_j ("dot") when w is None.

    s: (..., d_s) a decoder state (in Luong's model the *current* one, s_t);
    h: (..., n, d_h) the encoder states; w: (d_s, d_h). Returns (..., n).
    The Transformer's score is the "dot" form divided by √d_k on the projected
    queries and keys, q = x W^Q and k = x W^K; on the token vectors themselves it
    is the "general" form with W = W^Q (W^K)ᵀ / √d_k, a matrix of rank at most d_k.
    """
    _check_states(s, h)
    _check_bilinear(s, h, w)
    require_same_kind(s=s, h=h, **({} if w is None else {"w": w}))
    left = s if w is None else s @ w  # (..., d_h)
    return (h @ left[..., :, None])[..., 0]  # (..., n)


def _check_bilinear(s: torch.Tensor, h: torch.Tensor, w: torch.Tensor | None) -> None:
    if w is None:
        if s.shape[-1] != h.shape[-1]:
            raise ValueError(
                f"the dot score needs d_s == d_h, got s {shape(s)} and h {shape(h)}; pass a matrix w (d_s, d_h)"
            )
    else:
        require_float("w", w)
        if w.shape != (s.shape[-1], h.shape[-1]):
            raise ValueError(f"w must be (d_s={s.shape[-1]}, d_h={h.shape[-1]}), got {shape(w)}")


def attend(scores: torch.Tensor, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Turn scores (..., n) into weights and a context, chapter 1.

    weights = softmax(scores) over the n source positions; context =
    Σ_j weights_j h_j, shape (..., d_h). Returns ``(context, weights)``.
    """
    require_float("scores", scores)
    require_float("h", h)
    if h.dim() < 2 or scores.shape[-1] != h.shape[-2]:
        raise ValueError(f"scores (..., n) and h (..., n, d_h) disagree on n: scores {shape(scores)}, h {shape(h)}")
    try:
        torch.broadcast_shapes(scores.shape[:-1], h.shape[:-2])
    except RuntimeError:
        raise ValueError(f"the leading (batch) dimensions of scores {shape(scores)} and h {shape(h)} "
                         "do not broadcast") from None
    require_same_kind(scores=scores, h=h)
    weights = scores.softmax(dim=-1)  # (..., n)
    context = (weights[..., None, :] @ h)[..., 0, :]  # (..., d_h)
    return context, weights


def run_encoder(cell: nn.RNNCellBase, x: torch.Tensor, h0: torch.Tensor | None = None) -> torch.Tensor:
    """Run an RNN cell over x (B, n, d_x), one step per position, chapter 1.

    Returns every state, (B, n, d_h); the last one, ``states[:, -1]``, is the
    Sutskever context vector. The Python loop is the point: step j cannot
    start before step j-1 has finished.
    """
    require_float("x", x)
    if x.dim() != 3 or x.shape[-1] != cell.input_size:
        raise ValueError(f"x must be (B, n, d_x={cell.input_size}), got {shape(x)}")
    state = h0 if h0 is not None else x.new_zeros(x.shape[0], cell.hidden_size)
    states = []
    for j in range(x.shape[1]):
        state = cell(x[:, j], state)  # (B, d_h)
        states.append(state)
    return torch.stack(states, dim=1)  # (B, n, d_h)


def _check_step(
    name: str, cell: object, y_prev: object, s_prev: object, h: object, score: object, *, cell_input: bool
) -> None:
    """The inputs of one decoder step (chapter 1), checked before the RNN cell or the score runs.

    cell_input: True when the cell reads [y_{i-1}; c_i] (Bahdanau), False when it reads y_{t-1} (Luong).
    """
    if not isinstance(cell, nn.RNNCellBase):
        raise TypeError(f"{name}: cell must be an nn.RNNCell, nn.GRUCell or nn.LSTMCell-like "
                        f"nn.RNNCellBase, got {type(cell).__name__}")
    if isinstance(cell, nn.LSTMCell):
        raise TypeError(f"{name}: cell must return one state (nn.RNNCell or nn.GRUCell); "
                        "nn.LSTMCell returns (h, c)")
    if not callable(score):
        raise TypeError(f"{name}: score must be a function score(s, h), got {type(score).__name__}")
    for arg, t in (("y_prev", y_prev), ("s_prev", s_prev), ("h", h)):
        require_float(arg, t)
    if y_prev.dim() != 2 or s_prev.dim() != 2 or h.dim() != 3:
        raise ValueError(
            f"{name}: y_prev must be (B, d_y), s_prev (B, d_s) and h (B, n, d_h); got y_prev "
            f"{shape(y_prev)}, s_prev {shape(s_prev)}, h {shape(h)}"
        )
    if not y_prev.shape[0] == s_prev.shape[0] == h.shape[0]:
        raise ValueError(
            f"{name}: y_prev, s_prev and h must share the batch size B; got y_prev "
            f"{shape(y_prev)}, s_prev {shape(s_prev)}, h {shape(h)}"
        )
    if s_prev.shape[1] != cell.hidden_size:
        raise ValueError(f"{name}: s_prev must be (B, d_s = cell.hidden_size = {cell.hidden_size}), "
                         f"got {shape(s_prev)}")
    d_in = y_prev.shape[1] + (h.shape[2] if cell_input else 0)
    if cell.input_size != d_in:
        what = "d_y + d_h = " + f"{y_prev.shape[1]} + {h.shape[2]}" if cell_input else "d_y"
        raise ValueError(
            f"{name}: the cell reads inputs of width {cell.input_size}, but {what} is {d_in} "
            f"(y_prev {shape(y_prev)}, h {shape(h)})"
        )


def bahdanau_step(
    cell: nn.RNNCellBase, y_prev: torch.Tensor, s_prev: torch.Tensor, h: torch.Tensor, score: ScoreFn
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One decoder step of Bahdanau et al. (2014), chapter 1: attend *before* the RNN step.

    1. Score every encoder state against the previous decoder state s_{i-1}.
    2. The context c_i is the weighted average of the encoder states.
    3. The RNN step reads [y_{i-1}; c_i] and gives the new state s_i.
    `cell` must take inputs of width d_y + d_h. Returns ``(s_i, c_i, weights)``.
    """
    _check_step("bahdanau_step", cell, y_prev, s_prev, h, score, cell_input=True)
    context, weights = attend(score(s_prev, h), h)  # (B, d_h), (B, n)
    s = cell(torch.cat([y_prev, context], dim=-1), s_prev)  # (B, d_s)
    return s, context, weights


def luong_step(
    cell: nn.RNNCellBase,
    y_prev: torch.Tensor,
    s_prev: torch.Tensor,
    h: torch.Tensor,
    score: ScoreFn,
    w_c: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One decoder step of Luong et al. (2015), chapter 1: attend *after* the RNN step.

    1. The RNN step reads y_{t-1} and gives the new state s_t.
    2. Score every encoder state against s_t; the context c_t is their weighted average.
    3. The attentional state h̃_t = tanh(W_c [c_t; s_t]) feeds the output softmax.
    w_c: (d_out, d_h + d_s). Returns ``(s_t, h̃_t, weights)``.
    """
    _check_step("luong_step", cell, y_prev, s_prev, h, score, cell_input=False)
    require_float("w_c", w_c)
    d_in = h.shape[-1] + cell.hidden_size
    if w_c.dim() != 2 or w_c.shape[1] != d_in:
        raise ValueError(
            f"w_c must be (d_out, d_h + d_s) = (d_out, {h.shape[-1]} + {cell.hidden_size}), "
            f"got {shape(w_c)}"
        )
    s = cell(y_prev, s_prev)  # (B, d_s)
    context, weights = attend(score(s, h), h)  # (B, d_h), (B, n)
    h_tilde = torch.tanh(torch.cat([context, s], dim=-1) @ w_c.T)  # (B, d_out)
    return s, h_tilde, weights


def linear_readout_r2(
    train_features: torch.Tensor,
    train_targets: torch.Tensor,
    test_features: torch.Tensor,
    test_targets: torch.Tensor,
) -> torch.Tensor:
    """How much of each target a linear map can read back from the features, chapter 1.

    Fits targets ≈ [features, 1] @ W by least squares on the training rows
    (one fit for all target columns), then returns, for every target column,
    R² = 1 - SSE / SST on the held-out test rows: a (q,) float64 tensor.
    1 means the features hold that target exactly; 0 means no better than
    predicting its mean. Features (N, p), targets (N, q). Needs more training
    rows than p + 1 (ValueError otherwise); a constant test target gets NaN.
    """
    for name, t in (("train_features", train_features), ("train_targets", train_targets),
                    ("test_features", test_features), ("test_targets", test_targets)):
        require_float(name, t)
        if t.dim() != 2:
            raise ValueError(f"{name} must be (rows, columns), got {shape(t)}")
    if train_features.shape[0] != train_targets.shape[0] or test_features.shape[0] != test_targets.shape[0]:
        raise ValueError(
            f"features and targets need the same number of rows: train {shape(train_features)} vs "
            f"{shape(train_targets)}, test {shape(test_features)} vs {shape(test_targets)}"
        )
    if train_features.shape[1] != test_features.shape[1] or train_targets.shape[1] != test_targets.shape[1]:
        raise ValueError(
            f"train and test must have the same columns: features {shape(train_features)} vs "
            f"{shape(test_features)}, targets {shape(train_targets)} vs {shape(test_targets)}"
        )

    n_train, p = train_features.shape
    if n_train <= p + 1:
        raise ValueError(
            f"the read-out fits {p} features and a bias from {n_train} training rows: it needs more "
            f"rows than p + 1 = {p + 1}, or it fits the training rows exactly and R² means nothing"
        )
    if test_features.shape[0] < 2:
        raise ValueError(f"R² needs at least 2 test rows, got {test_features.shape[0]}")

    def with_bias(f: torch.Tensor) -> torch.Tensor:
        return torch.cat([f, f.new_ones(f.shape[0], 1)], dim=1).double()  # (N, p + 1)

    w = torch.linalg.lstsq(with_bias(train_features), train_targets.double()).solution  # (p + 1, q)
    sse = (test_targets.double() - with_bias(test_features) @ w).pow(2).sum(dim=0)  # (q,)
    sst = (test_targets.double() - test_targets.double().mean(dim=0)).pow(2).sum(dim=0)  # (q,)
    # A constant test target has no variance to explain: R² is undefined (NaN), not -inf.
    return torch.where(sst > 0, 1.0 - sse / sst.clamp_min(torch.finfo(sst.dtype).tiny), torch.nan)
