"""lib.train.parallel: DDP over 2 local processes ends where one process does.

The reference is written here, independently of `lib.train.parallel`: a plain
loop over the same global batches that averages the two shards' losses, with
PyTorch's own SGD. The DDP run (2 processes, gloo, 127.0.0.1) must end with
parameters equal to it within 1e-6.
"""

from __future__ import annotations

import random

import pytest
import torch

import lib
from lib.train.parallel import date_model_config, train_data_parallel, train_single_process

STEPS, GLOBAL_BATCH = 3, 16


def _reference_state(steps, global_batch, shards, seed=0, lr=0.05):
    torch.manual_seed(seed)
    model = date_model_config().build()
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    split = lib.make_date_split(seed=seed)
    for step in range(steps):
        pairs = lib.sample_pairs(split.train, global_batch, random.Random(seed * 100_003 + step))
        size = global_batch // shards
        losses = []
        for r in range(shards):
            b = lib.make_batch(pairs[r * size:(r + 1) * size], lib.DATE_VOCAB)
            logits = model(b.src, b.tgt_in, src_mask=b.src_mask, tgt_mask=b.tgt_mask)
            target = b.tgt_out.reshape(-1)
            keep = target != lib.DATE_VOCAB.pad_id
            losses.append(torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1])[keep], target[keep]))
        optimizer.zero_grad()
        (sum(losses) / shards).backward()
        optimizer.step()
    return model.state_dict()


def _max_difference(a: dict, b: dict) -> float:
    assert a.keys() == b.keys()
    return max(float((a[k] - b[k]).abs().max()) for k in a)


@pytest.fixture(scope="module")
def ddp_run():
    return train_data_parallel(2, STEPS, GLOBAL_BATCH, threads_per_process=1)


def test_ddp_equals_one_process_on_the_same_global_batch(ddp_run):
    reference = _reference_state(STEPS, GLOBAL_BATCH, shards=2)
    assert _max_difference(ddp_run.state_dict, reference) < 1e-6
    assert len(ddp_run.losses) == STEPS


def test_single_process_helper_matches_the_reference():
    run = train_single_process(STEPS, GLOBAL_BATCH, shards=2)
    assert _max_difference(run.state_dict, _reference_state(STEPS, GLOBAL_BATCH, shards=2)) < 1e-6


def test_the_parameters_moved(ddp_run):
    torch.manual_seed(0)
    start = date_model_config().build().state_dict()
    assert _max_difference(ddp_run.state_dict, start) > 1e-4


@pytest.mark.parametrize(
    "args, kwargs, words",
    [
        ((0, 3, 16), {}, "world_size"),
        ((2, 0, 16), {}, "steps"),
        ((2, 3, 15), {}, "global_batch=15"),
        ((2, 3, 16), {"lr": float("nan")}, "lr"),
        ((-1, 3, 16), {}, "world_size"),
    ],
)
def test_bad_arguments_are_refused_before_any_process_starts(args, kwargs, words):
    with pytest.raises(ValueError, match=words):
        train_data_parallel(*args, **kwargs)


@pytest.mark.parametrize(
    "kwargs, error, words",
    [
        (dict(shards=0), ValueError, "shards"),
        (dict(shards=3), ValueError, "shards=3"),
        (dict(shards=2.0), TypeError, "shards"),
        (dict(lr=-1.0), ValueError, "lr"),
    ],
)
def test_single_process_names_its_bad_arguments(kwargs, error, words):
    with pytest.raises(error, match=words):
        train_single_process(STEPS, GLOBAL_BATCH, **kwargs)


def test_world_size_must_be_an_int():
    with pytest.raises(TypeError, match="world_size"):
        train_data_parallel(2.0, STEPS, GLOBAL_BATCH)


@pytest.mark.parametrize(
    "threads, error", [(0, ValueError), (-2, ValueError), (True, TypeError), (1.5, TypeError)]
)
def test_threads_per_process_is_checked_not_replaced_by_the_default(threads, error):
    with pytest.raises(error, match="threads_per_process"):
        train_data_parallel(2, STEPS, GLOBAL_BATCH, threads_per_process=threads)
