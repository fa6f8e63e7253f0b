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


@dataclass(frozen=True)
class DateSplit:
    """Disjoint lists of dates: ``train`` to sample from, ``held_out`` to evaluate on."""

    train: tuple[datetime.date, ...]
    held_out: tuple[datetime.date, ...]


def make_date_split(
    n_held_out: int = 1000, first_year: int = 1950, last_year: int = 2049, seed: int = 0
) -> DateSplit:
    """Shuffle every date of [first_year, last_year] with ``seed`` and hold out ``n_held_out``.

    A date is either in ``train`` or in ``held_out``, never both (asserted), so
    held-out accuracy measures generalisation, not memory.
    """
    require_positive_int("n_held_out", n_held_out)
    if not (isinstance(first_year, int) and isinstance(last_year, int) and 1 <= first_year <= last_year <= 9999):
        raise ValueError(f"need 1 <= first_year <= last_year <= 9999, got {first_year} and {last_year}")
    start, end = datetime.date(first_year, 1, 1), datetime.date(last_year, 12, 31)
    dates = [start + datetime.timedelta(days=i) for i in range((end - start).days + 1)]
    if n_held_out >= len(dates):
        raise ValueError(f"n_held_out={n_held_out} leaves no training dates out of {len(dates)}")
    random.Random(seed).shuffle(dates)
    split = DateSplit(train=tuple(dates[n_held_out:]), held_out=tuple(dates[:n_held_out]))
    assert not set(split.train) & set(split.held_out), "train and held-out dates overlap"
    return split


def sample_pairs(dates, n: int, rng: random.Random) -> list[tuple[str, str]]:
    """``n`` (source, target) string pairs from ``dates``, drawn with ``rng``.

    Each source keeps its leading zeros with probability 1/2.
    """
    require_positive_int("n", n)
    if not dates:
        raise ValueError("dates is empty")
    picks = [rng.choice(dates) for _ in range(n)]
    return [(format_source(d, zero_pad=rng.random() < 0.5), format_target(d)) for d in picks]
