"""lib.start_warmup_runs: chapter 8's warm-up table started in background processes."""

import pytest

import lib


def _dates():
    return lib.make_date_split(n_held_out=1500, seed=0).train


def test_background_runs_equal_the_runs_in_turn():
    dates = _dates()
    pending = lib.start_warmup_runs(dates, [0, 1], warmup_steps=2, steps=2, workers=2)
    here = lib.warmup_runs(dates, [0, 1], warmup_steps=2, steps=2, workers=1)
    table = pending.result()
    assert pending.done()
    assert list(table) == ["post-LN, no warm-up", "post-LN, warm-up",
                           "pre-LN, no warm-up", "pre-LN, warm-up"]
    assert table == here  # the same losses, bit for bit, per setting and seed
    assert all(len(runs) == 2 and all(len(r) == 2 for r in runs) for runs in table.values())
    assert table["post-LN, no warm-up"][0] != table["post-LN, no warm-up"][1]  # seeds differ
    assert pending.result() is table  # collected once


def test_background_runs_refuse_bad_input_before_starting():
    dates = _dates()
    with pytest.raises(ValueError, match="seeds"):
        lib.start_warmup_runs(dates, [])
    with pytest.raises(ValueError, match="workers"):
        lib.start_warmup_runs(dates, [0], workers=0)
    with pytest.raises(ValueError, match="warmup_steps"):
        lib.start_warmup_runs(dates, [0], warmup_steps=0)
    with pytest.raises(ValueError, match="dates"):
        lib.start_warmup_runs([], [0])
