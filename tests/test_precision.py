"""lib.train.precision: a few steps under bfloat16 autocast, and its bad arguments."""

from __future__ import annotations

import pytest
import torch

import lib


def test_bfloat16_and_float32_start_alike_and_learn():
    f32 = lib.train_dates_mixed_precision(6, batch_size=16)
    bf16 = lib.train_dates_mixed_precision(6, batch_size=16, autocast_dtype=torch.bfloat16)
    assert abs(f32.losses[0] - bf16.losses[0]) < 0.05  # same weights, same batch
    assert f32.losses[-1] < f32.losses[0] and bf16.losses[-1] < bf16.losses[0]
    assert all(p.dtype == torch.float32 for p in bf16.model.parameters())  # master weights


@pytest.mark.parametrize(
    "args, kwargs, error, words",
    [
        ((0,), {}, ValueError, "steps"),
        ((2,), {"batch_size": 0}, ValueError, "batch_size"),
        ((2,), {"autocast_dtype": torch.float64}, ValueError, "autocast_dtype"),
        ((2.5,), {}, TypeError, "steps"),
    ],
)
def test_bad_arguments_name_themselves(args, kwargs, error, words):
    with pytest.raises(error, match=words):
        lib.train_dates_mixed_precision(*args, **kwargs)
