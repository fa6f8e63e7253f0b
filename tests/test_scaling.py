"""lib/teach/scaling.py (chapter 2's sqrt(d_k) experiments), against hand-written autograd-free formulas."""

import math

import pytest
import torch

import lib


@pytest.mark.parametrize("scaled", [True, False])
def test_score_gradients_match_the_closed_form(scaled):
    d_k, g = 8, torch.randn(50, 5, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    out = lib.score_gradients(d_k, g, scaled, torch.Generator().manual_seed(2))
    # the same q and K, drawn again from the same generator state
    gen = torch.Generator().manual_seed(2)
    q = torch.randn(50, d_k, generator=gen, dtype=torch.float64)
    k = torch.randn(50, 5, d_k, generator=gen, dtype=torch.float64)
    c = math.sqrt(d_k) if scaled else 1.0
    z = torch.einsum("rnd,rd->rn", k, q) / c
    p = torch.exp(z - z.amax(-1, keepdim=True))
    p = p / p.sum(-1, keepdim=True)
    dz = p * g - p * (p * g).sum(-1, keepdim=True)  # (diag(p) - p p^T) g
    dq = torch.einsum("rn,rnd->rd", dz, k) / c
    dk = dz[:, :, None] * q[:, None, :] / c
    assert out["z"] == pytest.approx(dz.norm(dim=-1).median().item(), rel=1e-9)
    assert out["q"] == pytest.approx(dq.norm(dim=-1).median().item(), rel=1e-9)
    assert out["k"] == pytest.approx(dk.flatten(1).norm(dim=-1).median().item(), rel=1e-9)
    assert out["top"] == pytest.approx(p.max(-1).values.median().item(), rel=1e-9)


def test_retrieval_run_starts_near_a_uniform_average_when_scaled():
    losses = lib.retrieval_run(16, True, seed=0, steps=5)
    assert len(losses) == 5 and all(math.isfinite(x) for x in losses)
    assert 10 < losses[0] < 22  # a uniform average of the values has loss 15 on average
    assert torch.get_num_threads() >= 1  # the thread count is restored


@pytest.mark.parametrize(
    "kwargs, error",
    [(dict(d_k=0, scaled=True, seed=0), ValueError), (dict(d_k=4, scaled=1, seed=0), TypeError),
     (dict(d_k=4, scaled=True, seed=0, steps=0), ValueError)],
)
def test_retrieval_run_refuses_bad_input(kwargs, error):
    with pytest.raises(error):
        lib.retrieval_run(**kwargs)
