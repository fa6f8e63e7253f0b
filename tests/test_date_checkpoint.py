"""The first page's live model (issue 35): chapter 8's date model shipped as a float16
checkpoint (lib/train/checkpoints/date_model.pt, written by tools/date_checkpoint.py),
pinned by SHA-256, refused when changed, and as good as its recipe says."""

from __future__ import annotations

import random
import re

import pytest
import torch
from conftest import assert_a_changed_byte_is_refused, assert_float16_copy, assert_shipped_and_pinned

import lib
from lib.widgets.dates import date_steps, rounded_model

INSIDE = (1953, 1966, 1979, 1987, 1994, 2008, 2016, 2025, 2031)  # chapter 8's unseen years
DATE_TEXT = re.compile(r"^(January|February|March|April|May|June|July|August|September|October"
                       r"|November|December) \d{1,2}, \d{4}$")


@pytest.fixture(scope="module")
def shipped():
    return lib.load_date_checkpoint()


def test_the_checkpoint_is_shipped_and_pinned():
    assert_shipped_and_pinned(lib.DATE_CHECKPOINT, lib.DATE_CHECKPOINT_SHA256)


def test_it_is_chapter_8s_model_in_eval_mode(shipped):
    model, recipe = shipped
    assert isinstance(model, lib.Transformer) and not model.training
    assert model.config == lib.date_model_config()
    assert sum(p.numel() for p in model.parameters()) == 241_536  # date_model_config's docstring
    assert recipe["function"] == "lib.date_model_run" and recipe["steps"] == 500
    assert all(p.dtype == torch.float32 for p in model.parameters())


def test_held_out_dates_come_out_right(shipped):
    """The recipe's recorded exact match is the model's: 200 of chapter 8's held-out test
    dates (its split, its test sample) decode exactly; the prose reads these figures."""
    model, recipe = shipped
    split = lib.make_date_split(n_held_out=1500, first_year=1950, last_year=2049, seed=0,
                                held_out_years=INSIDE + tuple(range(2040, 2050)))
    test = lib.sample_pairs(split.held_out[500:], 1000, random.Random(2), replace=False)[:200]
    score = lib.exact_match(rounded_model(model), test, lib.DATE_VOCAB, max_len=20)
    assert score >= 0.99 and recipe["exact_match_float16"]["held_out"] >= 0.99
    assert abs(score - recipe["exact_match_float16"]["held_out"]) <= 0.02


def test_outside_the_task_it_still_writes_a_date(shipped):
    """The intro says so: a word or an impossible date, made of known characters, still
    comes out as 'Month D, YYYY'."""
    model, _ = shipped
    twin = rounded_model(model)
    for source in ("hello", "2019-02-30", "2150-12-12", "0000-00-00"):
        output = date_steps(twin, source, lib.DATE_VOCAB)["output"]
        assert DATE_TEXT.match(output), (source, output)


def test_save_and_load_round_trip(tmp_path, shipped):
    model, recipe = shipped
    torch.manual_seed(3)
    fresh = lib.date_model_config().build().eval()
    path = tmp_path / "d.pt"
    digest = lib.save_date_checkpoint(fresh.state_dict(), {"seed": 3}, path)
    loaded, got = lib.load_date_checkpoint(path, digest)
    assert got == {"seed": 3}
    assert_float16_copy(fresh, loaded)
    assert_a_changed_byte_is_refused(lib.load_date_checkpoint, path, digest)


def test_bad_input_is_refused_before_anything_is_written(tmp_path):
    path = tmp_path / "d.pt"
    with pytest.raises(TypeError, match="state"):
        lib.save_date_checkpoint([], {}, path)
    with pytest.raises(TypeError, match="recipe"):
        lib.save_date_checkpoint(lib.date_model_config().build().state_dict(), "seed 1", path)
    other = lib.TransformerConfig(src_vocab_size=10, tgt_vocab_size=10, d_model=16, n_heads=2,
                                  n_layers=1, d_ff=32).build()
    with pytest.raises(RuntimeError):
        lib.save_date_checkpoint(other.state_dict(), {}, path)
    assert not path.exists()
    with pytest.raises(ValueError, match="sha256"):
        lib.load_date_checkpoint(lib.DATE_CHECKPOINT, "abc")
    with pytest.raises(FileNotFoundError, match="path"):
        lib.load_date_checkpoint(tmp_path / "missing.pt", "0" * 64)


def test_a_recipe_of_objects_is_refused(tmp_path):
    """torch.__version__ is a TorchVersion, which torch.load(weights_only=True) refuses:
    caught when saving, not when the page is built."""
    state = lib.date_model_config().build().state_dict()
    with pytest.raises(TypeError, match="recipe"):
        lib.save_date_checkpoint(state, {"torch": torch.__version__}, tmp_path / "d.pt")
