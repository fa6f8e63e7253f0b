"""lib.train.training.noam_lr against the paper's formula (section 5.3) and seed 004."""

import math

import pytest
import torch

import lib


def paper_lrate(step, d_model, warmup):
    return d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)


@pytest.mark.parametrize("step", [1, 100, 3999, 4000, 4001, 10000, 100000])
def test_noam_matches_formula(step):
    assert math.isclose(lib.noam_lr(step, 512, 4000), paper_lrate(step, 512, 4000), rel_tol=1e-12)


def test_noam_worked_values():
    # warm-up is linear: step 1 gives 1/(sqrt(512) * 4000**1.5)
    assert math.isclose(lib.noam_lr(1, 512, 4000), 1 / (math.sqrt(512) * 4000 ** 1.5))
    # the peak sits at step = warmup: 1/sqrt(512 * 4000) = 6.9877e-4
    assert math.isclose(lib.noam_lr(4000, 512, 4000), 6.9877e-4, rel_tol=1e-4)
    rates = [lib.noam_lr(s, 512, 4000) for s in range(1, 20001)]
    assert max(range(len(rates)), key=rates.__getitem__) + 1 == 4000
    # after the peak the rate decays as step^-0.5: four times the steps, half the rate
    assert math.isclose(lib.noam_lr(16000, 512, 4000), lib.noam_lr(4000, 512, 4000) / 2)


def test_noam_factor_scales_linearly():
    assert math.isclose(lib.noam_lr(123, 256, 400, factor=2.0), 2 * lib.noam_lr(123, 256, 400))


def test_noam_lambda_drives_lambdalr():
    param = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.Adam([param], lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lib.noam_lambda(512, 10))
    seen = []
    for _ in range(20):
        seen.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert seen == pytest.approx([paper_lrate(s, 512, 10) for s in range(1, 21)])


@pytest.mark.parametrize("step", [0, -3])
def test_noam_rejects_step_below_one(step):
    with pytest.raises(ValueError, match="step"):
        lib.noam_lr(step, 512, 4000)
