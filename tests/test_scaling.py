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


@pytest.mark.parametrize("d_k", [16, 64])
def test_unscaled_run_is_the_scaled_run_with_init_and_lr_times_d_k_to_the_quarter(d_k):
    # Under Adam (steps independent of the gradient's scale), unscaled scores with
    # weights W equal scaled scores with weights c W, c = d_k ** 0.25, and a c times
    # larger learning rate moves c W as fast as W: the two runs are one run.
    c = d_k ** 0.25
    unscaled = lib.retrieval_run(d_k, False, seed=1, steps=40)
    same = lib.retrieval_run(d_k, True, seed=1, steps=40, init_scale=c, lr=1e-3 * c)
    scaled = lib.retrieval_run(d_k, True, seed=1, steps=40)
    assert same == pytest.approx(unscaled, rel=1e-3)
    assert scaled != pytest.approx(unscaled, rel=1e-2)  # the check can fail: scaled differs


def test_retrieval_run_init_scale_sets_the_start():
    wide = lib.retrieval_run(64, True, seed=0, steps=3, init_scale=8.0)
    narrow = lib.retrieval_run(64, True, seed=0, steps=3)
    assert wide[0] > narrow[0] + 5  # a saturated start is confidently wrong


@pytest.mark.parametrize(
    "kwargs, error, words",
    [(dict(seed=-1), ValueError, "seed must be at least 0, got -1"),
     (dict(seed=1.5), TypeError, "seed"),
     (dict(lr="1e-3"), TypeError, "lr"), (dict(lr=0.0), ValueError, "lr"),
     (dict(lr=float("nan")), ValueError, "lr"), (dict(init_scale=-1.0), ValueError, "init_scale")],
)
def test_retrieval_run_names_the_bad_argument(kwargs, error, words):
    with pytest.raises(error, match=words):
        lib.retrieval_run(**{"d_k": 4, "scaled": True, "seed": 0, "steps": 2, **kwargs})
