"""Tests for lib/train/dates.py: the date task, its formats and split."""


import datetime
import random

import pytest
import torch

from lib import DATE_VOCAB, MONTHS, CharVocab, format_source, format_target, make_batch, make_date_split, sample_pairs


def test_formats_by_hand():
    d = datetime.date(2019, 3, 7)
    assert format_source(d) == "2019-03-07"
    assert format_source(d, zero_pad=False) == "2019-3-7"
    assert format_target(d) == "March 7, 2019"
    assert format_target(datetime.date(1950, 12, 31)) == "December 31, 1950"


def test_target_parses_back_to_the_source_date():
    # An independent reading of the target with datetime's own parser.
    for d in make_date_split(50, seed=3).held_out:
        assert datetime.datetime.strptime(format_target(d), "%B %d, %Y").date() == d
        assert datetime.date.fromisoformat(format_source(d)) == d


def test_split_is_disjoint_and_covers_every_date():
    split = make_date_split(500, first_year=2000, last_year=2003, seed=1)
    n_days = (datetime.date(2003, 12, 31) - datetime.date(2000, 1, 1)).days + 1
    assert n_days == 366 + 365 + 365 + 365
    assert len(split.held_out) == 500 and len(split.train) == n_days - 500
    assert not set(split.train) & set(split.held_out)
    assert len(set(split.train) | set(split.held_out)) == n_days
    # seeded: the same seed gives the same split, another seed another one
    assert make_date_split(500, 2000, 2003, seed=1) == split
    assert make_date_split(500, 2000, 2003, seed=2).held_out != split.held_out


def test_split_bad_arguments():
    with pytest.raises(ValueError):
        make_date_split(0)
    with pytest.raises(ValueError):
        make_date_split(10**6)
    with pytest.raises(ValueError):
        make_date_split(10, first_year=2010, last_year=2000)


def test_held_out_pairs_never_come_from_training_dates():
    split = make_date_split(300, seed=0)
    train_targets = {format_target(d) for d in split.train}
    held = sample_pairs(split.held_out, 500, random.Random(0))
    assert not {t for _, t in held} & train_targets


