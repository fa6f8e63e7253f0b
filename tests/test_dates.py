"""Tests for lib/train/dates.py: the date task, its formats and split."""


import datetime
import random

import pytest
import torch

import lib
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




def test_held_out_years_are_whole_years_never_in_train():
    split = make_date_split(200, 2000, 2009, seed=0, held_out_years=(2003, 2008))
    assert {d.year for d in split.unseen_years} == {2003, 2008}
    assert len(split.unseen_years) == 365 + 366  # 2008 is a leap year
    assert list(split.unseen_years) == sorted(split.unseen_years)  # calendar order
    assert not {d.year for d in split.train} & {2003, 2008}
    assert not {d.year for d in split.held_out} & {2003, 2008}
    n_days = (datetime.date(2009, 12, 31) - datetime.date(2000, 1, 1)).days + 1
    parts = [set(split.train), set(split.held_out), set(split.unseen_years)]
    assert sum(len(p) for p in parts) == n_days == len(set().union(*parts))
    assert len(split.held_out) == 200


def test_no_held_out_years_keeps_the_old_split():
    # The split without held-out years is the one chapters and bench used before.
    old = make_date_split(300, 1990, 1999, seed=4)
    assert old.unseen_years == ()
    assert make_date_split(300, 1990, 1999, seed=4, held_out_years=()) == old
    dates = [datetime.date(1990, 1, 1) + datetime.timedelta(days=i) for i in range(3652)]
    random.Random(4).shuffle(dates)
    assert old.held_out == tuple(dates[:300]) and old.train == tuple(dates[300:])


@pytest.mark.parametrize(
    "years, error",
    [((1949,), ValueError), ((2001, 2001), ValueError), (("2001",), TypeError),
     ("2001", TypeError), ((True,), TypeError), (range(2000, 2010), ValueError)],
)
def test_held_out_years_bad_arguments(years, error):
    with pytest.raises(error):
        make_date_split(10, 2000, 2009, held_out_years=years)


def test_sampling_without_replacement_gives_distinct_dates():
    split = make_date_split(500, 2000, 2003, seed=1)
    pairs = sample_pairs(split.held_out, 500, random.Random(0), replace=False)
    targets = [t for _, t in pairs]
    assert len(set(targets)) == 500  # every held-out date exactly once
    assert {t for t in targets} == {format_target(d) for d in split.held_out}
    with_replacement = sample_pairs(split.held_out, 500, random.Random(0))
    assert len({t for _, t in with_replacement}) < 500  # draws repeat (birthday problem)
    # Both formats occur, each source parses back to its target's date.
    assert any(len(s) == 10 for s, _ in pairs) and any(len(s) < 10 for s, _ in pairs)
    for s, t in pairs:
        y, m, d = map(int, s.split("-"))
        assert format_target(datetime.date(y, m, d)) == t


def test_sampling_without_replacement_bad_arguments():
    dates = make_date_split(10, 2000, 2000).held_out
    with pytest.raises(ValueError):
        sample_pairs(dates, 11, random.Random(0), replace=False)
    with pytest.raises(TypeError):
        sample_pairs(dates, 3, random.Random(0), replace="no")
    assert len(sample_pairs(dates, 10, random.Random(0), replace=False)) == 10


def test_read_target_reads_back_what_the_model_wrote():
    assert lib.read_target("November 1, 2019") == (11, 1, 2019)
    assert lib.read_target("December 12, 1550") == (12, 12, 1550)
    assert lib.read_target("Decem 1, 205") == (0, 1, 205)  # no month name, a digit missing
    assert lib.read_target("hello") == (0, 0, 0)
    with pytest.raises(TypeError, match="text"):
        lib.read_target(None)
