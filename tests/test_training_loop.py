"""lib/train/training.py additions: the paper's Adam settings, train_step and fit."""

import random

import pytest
import torch

import lib
from lib import DATE_VOCAB, make_batch, make_date_split, sample_pairs
from lib import fit, noam_optimizer, train_step


def _small():
    torch.manual_seed(0)
    return lib.Transformer(len(DATE_VOCAB), len(DATE_VOCAB), d_model=16, n_heads=2, n_layers=1, d_ff=32, dropout=0.0, max_len=32)


def test_noam_optimizer_uses_the_papers_adam_and_schedule():
    model = _small()
    opt, sched = noam_optimizer(model, 16, 10, factor=2.0)
    group = opt.param_groups[0]
    assert group["betas"] == (0.9, 0.98) and group["eps"] == 1e-9
    seen = []
    for _ in range(15):
        seen.append(group["lr"])
        opt.step()
        sched.step()
    hand = [2.0 * 16 ** -0.5 * min(s ** -0.5, s * 10 ** -1.5) for s in range(1, 16)]
    assert all(abs(a - b) < 1e-12 for a, b in zip(seen, hand))


def test_fit_lowers_the_loss_and_logs_the_lr():
    model = _small()
    split = make_date_split(100, 2000, 2009)
    rng = random.Random(0)
    opt, sched = noam_optimizer(model, 16, 20)
    res = fit(model, lambda s: make_batch(sample_pairs(split.train, 32, rng), DATE_VOCAB), 60, opt, sched)
    assert res.steps == 60 and len(res.losses) == 60 and len(res.lrs) == 60
    assert abs(res.lrs[19] - 16 ** -0.5 * 20 ** -0.5) < 1e-12  # the peak, at step 20
    assert sum(res.losses[-10:]) / 10 < 0.7 * sum(res.losses[:10]) / 10


def test_fit_stops_at_the_target():
    model = _small()
    split = make_date_split(100, 2000, 2009)
    rng = random.Random(0)
    opt, sched = noam_optimizer(model, 16, 20)
    calls = iter([0.1, 0.5, 0.95, 0.99])
    res = fit(model, lambda s: make_batch(sample_pairs(split.train, 8, rng), DATE_VOCAB), 100, opt, sched,
              evaluate=lambda: next(calls), eval_every=5, target=0.9)
    assert res.reached_at == 15 and res.steps == 15
    assert res.evals == [(5, 0.1), (10, 0.5), (15, 0.95)]


def test_train_step_matches_cross_entropy_loss():
    model = _small()
    opt, _ = noam_optimizer(model, 16, 20)
    b = make_batch([("2019-03-07", "March 7, 2019"), ("2001-1-2", "January 2, 2001")], DATE_VOCAB)
    model.train()
    with torch.no_grad():
        logits = model(b.src, b.tgt_in, src_mask=b.src_mask, tgt_mask=b.tgt_mask)
    ref = torch.nn.CrossEntropyLoss(label_smoothing=0.1, ignore_index=0)(logits.flatten(0, 1), b.tgt_out.flatten())
    loss = train_step(model, b, opt, None, label_smoothing=0.1, pad_id=0)
    assert abs(loss - float(ref)) < 1e-5  # dropout is 0: the same forward pass


def test_fit_bad_arguments():
    model = _small()
    opt, sched = noam_optimizer(model, 16, 20)
    with pytest.raises(ValueError):
        fit(model, lambda s: None, 0, opt)
    with pytest.raises(ValueError, match="evaluate"):
        fit(model, lambda s: None, 5, opt, target=0.9)


@pytest.mark.parametrize("clip", [-1.0, 0.0, float("nan"), float("inf"), "1.0", True])
def test_fit_and_train_step_refuse_a_bad_clip_norm(clip):
    # clip_grad_norm_ silently accepts a negative or NaN max_norm; lib refuses it before
    # any step is taken (the weights are unchanged)
    model = _small()
    opt, sched = noam_optimizer(model, 16, 20)
    batch = make_batch([("2019-3-7", "March 7, 2019")], DATE_VOCAB)
    before = [p.detach().clone() for p in model.parameters()]
    error = TypeError if isinstance(clip, (str, bool)) else ValueError
    with pytest.raises(error, match="clip_norm"):
        fit(model, lambda s: batch, 2, opt, sched, clip_norm=clip)
    with pytest.raises(error, match="clip_norm"):
        train_step(model, batch, opt, sched, clip_norm=clip)
    assert all(torch.equal(p, q) for p, q in zip(before, model.parameters()))


def test_fit_refuses_a_bad_eval_every():
    model = _small()
    opt, _ = noam_optimizer(model, 16, 20)
    with pytest.raises(ValueError, match="eval_every"):
        fit(model, lambda s: None, 5, opt, evaluate=lambda: 1.0, eval_every=-1)
    with pytest.raises(TypeError, match="eval_every"):
        fit(model, lambda s: None, 5, opt, evaluate=lambda: 1.0, eval_every=2.5)
