"""A toy translation task generated in code: rewriting dates.

Introduced in chapter 8 (training).

The source is an ISO date, with or without its leading zeros, and the target
the same date written out in English:

    "2019-03-07"  ->  "March 7, 2019"
    "2019-3-7"    ->  "March 7, 2019"

The target puts the month first, then the day, then the year: the decoder has
to read the source in the order middle, end, start, which is what
cross-attention is for, and what its weights show once the model is trained.
Both sides vary in length (8-10 source and 11-18 target characters), so a
batch needs padding and the masks that hide it.
"""

from __future__ import annotations

import datetime
import random
from dataclasses import dataclass

from lib._checks import require_positive_int
from lib.train.data import CharVocab

__all__ = [
    "MONTHS",
    "DATE_VOCAB",
    "format_source",
    "format_target",
    "read_target",
    "DateSplit",
    "make_date_split",
    "sample_pairs",
]

MONTHS = (
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
)


def _date_characters() -> str:
    chars = set("0123456789-, ")
    for month in MONTHS:
        chars.update(month)
    return "".join(sorted(chars))


DATE_VOCAB = CharVocab(_date_characters())


def format_source(date: datetime.date, zero_pad: bool = True) -> str:
    """ISO form "2019-03-07", or without leading zeros "2019-3-7"."""
    if zero_pad:
        return date.isoformat()
    return f"{date.year}-{date.month}-{date.day}"


def format_target(date: datetime.date) -> str:
    """English long form, "March 7, 2019"."""
    return f"{MONTHS[date.month - 1]} {date.day}, {date.year}"


def read_target(text: str) -> tuple[int, int, int]:
    """(month, day, year) read back from a model's "March 7, 2019"-style output (chapter 8).

    Each field is 0 where the text has none: a month name that is not one of
    `MONTHS`, a day or a year without digits. A year with a digit missing reads as
    the digits there are ("205" gives 205). Used to quote what the model wrote for
    an input outside the task.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    name, _, rest = text.partition(" ")
    month = MONTHS.index(name) + 1 if name in MONTHS else 0
    day_text, _, year_text = rest.partition(",")
    day, year = (int(digits) if (digits := "".join(c for c in part if c.isdigit())) else 0
                 for part in (day_text, year_text))
    return month, day, year


@dataclass(frozen=True)
class DateSplit:
    """Disjoint sets of dates.

    ``train``: the dates to sample training pairs from; ``held_out``: dates of
    the training years that are never trained on (new combinations of a seen
    year, month and day); ``unseen_years``: every date of the years held out
    whole, in calendar order (a year the model never saw at all).
    """

    train: tuple[datetime.date, ...]
    held_out: tuple[datetime.date, ...]
    unseen_years: tuple[datetime.date, ...] = ()


def _check_years(first_year, last_year, held_out_years) -> tuple[int, ...]:
    for name, year in (("first_year", first_year), ("last_year", last_year)):
        if isinstance(year, bool) or not isinstance(year, int):
            raise TypeError(f"{name} must be an int, got {year!r}")
    if not 1 <= first_year <= last_year <= 9999:
        raise ValueError(
            f"need 1 <= first_year <= last_year <= 9999, got {first_year} and {last_year}"
        )
    if isinstance(held_out_years, (str, bytes)):
        raise TypeError(f"held_out_years must be a collection of ints, got {held_out_years!r}")
    years = tuple(held_out_years)
    for year in years:
        if isinstance(year, bool) or not isinstance(year, int):
            raise TypeError(f"held_out_years must hold ints, got {year!r}")
        if not first_year <= year <= last_year:
            raise ValueError(
                f"held-out year {year} lies outside [first_year, last_year] = "
                f"[{first_year}, {last_year}]"
            )
    if len(set(years)) != len(years):
        raise ValueError(f"held_out_years repeats a year: {years}")
    if len(years) == last_year - first_year + 1:
        raise ValueError("held_out_years holds out every year: no training dates are left")
    return years


def make_date_split(
    n_held_out: int = 1000,
    first_year: int = 1950,
    last_year: int = 2049,
    seed: int = 0,
    held_out_years=(),
) -> DateSplit:
    """Split every date of [first_year, last_year] three ways.

    The dates of ``held_out_years`` go, whole years at a time, to
    ``unseen_years``. The other dates are shuffled with ``seed`` and
    ``n_held_out`` of them go to ``held_out``, the rest to ``train``. No date is
    in two parts (asserted), so accuracy on ``held_out`` measures
    generalisation to new combinations of seen values, and accuracy on
    ``unseen_years`` generalisation to years never seen in training.
    With no ``held_out_years`` the split is the same as before they existed.
    """
    require_positive_int("n_held_out", n_held_out)
    years = set(_check_years(first_year, last_year, held_out_years))
    start, end = datetime.date(first_year, 1, 1), datetime.date(last_year, 12, 31)
    every = [start + datetime.timedelta(days=i) for i in range((end - start).days + 1)]
    dates = [d for d in every if d.year not in years]
    unseen = tuple(d for d in every if d.year in years)
    if n_held_out >= len(dates):
        raise ValueError(
            f"n_held_out={n_held_out} leaves no training dates out of {len(dates)}"
        )
    random.Random(seed).shuffle(dates)
    split = DateSplit(
        train=tuple(dates[n_held_out:]),
        held_out=tuple(dates[:n_held_out]),
        unseen_years=unseen,
    )
    train = set(split.train)
    assert not train & set(split.held_out), "train and held-out dates overlap"
    assert not train & set(split.unseen_years), "a held-out year is in train"
    return split


def sample_pairs(
    dates, n: int, rng: random.Random, replace: bool = True
) -> list[tuple[str, str]]:
    """``n`` (source, target) string pairs from ``dates``, drawn with ``rng``.

    ``replace=True`` draws each date independently (a training stream: dates
    repeat); ``replace=False`` draws ``n`` distinct dates (a test set: every
    date counts once; needs n <= len(dates)). Each source keeps its leading
    zeros with probability 1/2.
    """
    require_positive_int("n", n)
    if not isinstance(replace, bool):
        raise TypeError(f"replace must be a bool, got {replace!r}")
    dates = list(dates)
    if not dates:
        raise ValueError("dates is empty")
    if replace:
        picks = [rng.choice(dates) for _ in range(n)]
    else:
        if n > len(dates):
            raise ValueError(
                f"cannot draw n={n} distinct dates from {len(dates)} without replacement"
            )
        picks = rng.sample(dates, n)
    return [(format_source(d, zero_pad=rng.random() < 0.5), format_target(d)) for d in picks]
