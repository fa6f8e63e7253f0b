"""lib.date_model_run / start_date_model_run: chapter 8's date model trained with another seed."""

import random

import pytest
import torch

import lib
from lib import DATE_VOCAB, make_batch, sample_pairs


@pytest.fixture(scope="module")
def dates():
    return lib.make_date_split(n_held_out=1500, seed=0).train


@pytest.fixture
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _chapter_recipe(dates, seed, steps, label_smoothing=0.1):
    """Chapter 8's main training cell, written out (cells 25 and 28), for `steps` steps."""
    torch.manual_seed(seed)
    config = lib.TransformerConfig(
        src_vocab_size=42, tgt_vocab_size=42, d_model=64, n_heads=4, n_layers=2,
        d_ff=256, dropout=0.1, max_len=64)
    model = config.build()
    optimizer, scheduler = lib.noam_optimizer(model, d_model=64, warmup_steps=200, factor=0.5)
    rng = random.Random(seed)
    next_batch = lambda step: make_batch(sample_pairs(dates, 128, rng), DATE_VOCAB)  # noqa: E731
    lib.fit(model, next_batch, steps=steps, optimizer=optimizer, scheduler=scheduler,
            label_smoothing=label_smoothing, clip_norm=1.0)
    return model.state_dict()


def _equal(a, b):
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_the_run_is_the_chapters_recipe_bit_for_bit(dates, one_thread):
    for seed in (0, 1):
        assert _equal(lib.date_model_run(dates, seed, steps=3),
                      _chapter_recipe(dates, seed, 3))
    assert lib.date_model_config().build().count_parameters() == 241_536


def test_the_background_run_equals_the_run_here(dates, one_thread):
    pending = lib.start_date_model_run(dates, 1, steps=3)
    here = lib.date_model_run(dates, 1, steps=3)
    model = pending.result()
    assert pending.done() and not model.training
    assert _equal(model.state_dict(), here)
    assert pending.result() is model  # collected once
    other = lib.date_model_run(dates, 2, steps=3)
    assert not _equal(other, here)  # the seed matters


def test_bad_input_is_refused_before_training(dates):
    with pytest.raises(TypeError, match="seed"):
        lib.date_model_run(dates, "1")
    with pytest.raises(TypeError, match="seed"):
        lib.start_date_model_run(dates, 1.0)
    with pytest.raises(ValueError, match="steps"):
        lib.date_model_run(dates, 1, steps=0)
    with pytest.raises(TypeError, match="batch_size"):
        lib.date_model_run(dates, 1, batch_size=12.5)
    with pytest.raises(ValueError, match="dates"):
        lib.date_model_run([], 1)
    with pytest.raises(ValueError, match="dates"):
        lib.start_date_model_run([], 1)
    with pytest.raises(ValueError, match="steps"):  # in this process, before starting
        lib.start_date_model_run(dates, 1, steps=0)
    with pytest.raises(TypeError, match="warmup_steps"):
        lib.start_date_model_run(dates, 1, warmup_steps=2.0)
    with pytest.raises(TypeError, match="step"):  # a misspelt keyword
        lib.start_date_model_run(dates, 1, step=3)


def test_label_smoothing_is_an_argument(dates, one_thread):
    """Chapter 8 trains the recipe without smoothing too, to compare the confidence."""
    plain = lib.date_model_run(dates, 0, steps=3, label_smoothing=0.0)
    assert _equal(plain, _chapter_recipe(dates, 0, 3, label_smoothing=0.0))
    assert not _equal(plain, lib.date_model_run(dates, 0, steps=3))  # 0.1 by default
    pending = lib.start_date_model_run(dates, 0, steps=3, label_smoothing=0.0)
    assert _equal(pending.result().state_dict(), plain)


def test_bad_label_smoothing_is_refused_before_training(dates):
    for bad in (1.0, -0.1, float("nan")):
        with pytest.raises(ValueError, match="label_smoothing"):
            lib.date_model_run(dates, 1, label_smoothing=bad)
        with pytest.raises(ValueError, match="label_smoothing"):  # in this process
            lib.start_date_model_run(dates, 1, label_smoothing=bad)
    for bad in ("0.1", None, True):
        with pytest.raises(TypeError, match="label_smoothing"):
            lib.date_model_run(dates, 1, label_smoothing=bad)
        with pytest.raises(TypeError, match="label_smoothing"):
            lib.start_date_model_run(dates, 1, label_smoothing=bad)
