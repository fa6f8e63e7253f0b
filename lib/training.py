"""Training helpers: the paper's learning-rate schedule.

Introduced in chapter 7 (training).
"""

from __future__ import annotations

from lib._checks import require_positive_int

__all__ = ["noam_lr", "noam_lambda"]


def noam_lr(step: int, d_model: int, warmup_steps: int, factor: float = 1.0) -> float:
    """The paper's schedule (section 5.3, seed 004):

        lrate = factor · d_model^(-0.5) · min(step^(-0.5), step · warmup_steps^(-1.5))

    It rises linearly for ``warmup_steps`` steps, peaks at step = warmup_steps
    with factor · (d_model · warmup_steps)^(-0.5), then decays as step^(-0.5).
    Steps count from 1; step 0 has no defined rate and is refused.
    """
    require_positive_int("step", step)
    require_positive_int("d_model", d_model)
    require_positive_int("warmup_steps", warmup_steps)
    if factor <= 0:
        raise ValueError(f"factor must be positive, got {factor}")
    return factor * d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5)


def noam_lambda(d_model: int, warmup_steps: int, factor: float = 1.0):
    """A function for ``torch.optim.lr_scheduler.LambdaLR`` (with the optimizer's lr=1.0).

    LambdaLR counts steps from 0, the paper from 1: the lambda shifts by one.
    """
    require_positive_int("d_model", d_model)
    require_positive_int("warmup_steps", warmup_steps)
    return lambda step: noam_lr(step + 1, d_model, warmup_steps, factor)
