"""Why divide by √d_k: what reaches W^Q and W^K, and what a short training run sees.

Introduced in chapter 2 (the mathematics of attention). The chapter first
measures the gradient *through the softmax* (with respect to its input z). What
trains W^Q and W^K is the gradient that reaches the queries q and the keys K:
`score_gradients` measures all three, scaled and unscaled. `retrieval_run`
trains W^Q and W^K on a small retrieval task, with or without the 1/√d_k, so
that the chapter can show what the difference does to learning.
"""

from __future__ import annotations

import math

import torch

from lib._checks import require_bool, require_int, require_number, require_positive_int

__all__ = ["score_gradients", "retrieval_run"]


def score_gradients(d_k: int, g: torch.Tensor, scaled: bool, generator: torch.Generator) -> dict:
    """Per-row gradient norms of L = Σ_j g_j softmax(z)_j, with z = q·k_j (/ √d_k if scaled).

    q (rows, d_k) and K (rows, n, d_k) have independent unit-variance entries; g
    (rows, n) is a fixed random upstream gradient. Returns the medians over the
    rows of |∂L/∂z|, |∂L/∂q| and |∂L/∂K| (keys: "z", "q", "k") and of the
    largest weight of a row ("top"). ∂L/∂W^Q is Σ_rows xᵀ ∂L/∂q, so |∂L/∂q| is
    what W^Q sees, row by row.
    """
    require_positive_int("d_k", d_k)
    require_bool("scaled", scaled)
    if not isinstance(g, torch.Tensor) or g.dim() != 2 or not g.is_floating_point():
        raise TypeError("g must be a float tensor of shape (rows, n)")
    rows, n = g.shape
    q = torch.randn(rows, d_k, generator=generator, dtype=g.dtype).requires_grad_()
    k = torch.randn(rows, n, d_k, generator=generator, dtype=g.dtype).requires_grad_()
    z = (k @ q[:, :, None])[..., 0] / (math.sqrt(d_k) if scaled else 1.0)  # (rows, n)
    z.retain_grad()
    p = z.softmax(dim=-1)
    (p * g).sum().backward()
    return {
        "z": z.grad.norm(dim=-1).median().item(),
        "q": q.grad.norm(dim=-1).median().item(),
        "k": k.grad.flatten(1).norm(dim=-1).median().item(),
        "top": p.detach().max(dim=-1).values.median().item(),
    }


def retrieval_run(
    d_k: int, scaled: bool, seed: int, steps: int = 300, d_model: int = 64, n_keys: int = 16,
    batch: int = 32, lr: float = 1e-3, init_scale: float = 1.0,
) -> list[float]:
    """Train W^Q, W^K on a retrieval task; return the loss at every step.

    Each example has n_keys random token vectors x_j (unit-variance entries,
    width d_model), random values v_j (width 16), and a query that is a noisy
    copy of one x_j (noise of variance 1). Scores are (x_q W^Q)·(x_j W^K),
    divided by √d_k if `scaled`; the output is Σ_j α_j v_j and the loss its
    squared distance to the matching key's value, so the gradient reaches the
    scores only through the softmax, as inside a Transformer. W^Q, W^K
    (d_model, d_k) start with N(0, init_scale²/d_model) entries (with
    init_scale = 1: unit-variance keys, and queries of variance 2, since the
    query is x_j plus noise), and Adam with learning rate `lr` updates them.
    For d_k > d_model (256 and 1024 in the chapter) the projections have rank
    at most d_model, which no real head uses.

    Under Adam, whose steps do not scale with the gradient, the unscaled run
    equals the scaled run with init_scale and lr both d_k^(1/4) times larger
    (tests/test_scaling.py); chapter 2 uses init_scale and lr to separate the
    saturated start from the larger steps. An output that averages the values uniformly has
    loss 16 × (15/16) = 15 on average; a perfect lookup has 0. Seeded: the same run
    gives the same losses on one machine (it runs on one thread).
    """
    for name, value in (("d_k", d_k), ("steps", steps), ("d_model", d_model),
                        ("n_keys", n_keys), ("batch", batch)):
        require_positive_int(name, value)
    require_int("seed", seed, minimum=0)
    require_bool("scaled", scaled)
    lr = require_number("lr", lr, positive=True)
    init_scale = require_number("init_scale", init_scale, positive=True)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the same losses whatever the machine's thread count
    try:
        return _retrieval_losses(d_k, scaled, seed, steps, d_model, n_keys, batch, lr, init_scale)
    finally:
        torch.set_num_threads(threads)


def _retrieval_losses(d_k, scaled, seed, steps, d_model, n_keys, batch, lr, init_scale) -> list[float]:
    g = torch.Generator().manual_seed(seed)
    std = init_scale / math.sqrt(d_model)
    w_q = (torch.randn(d_model, d_k, generator=g) * std).requires_grad_()
    w_k = (torch.randn(d_model, d_k, generator=g) * std).requires_grad_()
    optimizer = torch.optim.Adam([w_q, w_k], lr=lr)
    rows = torch.arange(batch)
    losses = []
    for _ in range(steps):
        x = torch.randn(batch, n_keys, d_model, generator=g)
        target = torch.randint(n_keys, (batch,), generator=g)
        query = x[rows, target] + torch.randn(batch, d_model, generator=g)  # (batch, d_model)
        values = torch.randn(batch, n_keys, 16, generator=g)
        scores = ((x @ w_k) @ (query @ w_q)[:, :, None])[..., 0]  # (batch, n_keys)
        if scaled:
            scores = scores / math.sqrt(d_k)
        output = (scores.softmax(dim=-1)[:, None, :] @ values)[:, 0]  # (batch, 16)
        loss = (output - values[rows, target]).pow(2).sum(dim=-1).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses
