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

Everything is character-level: one small vocabulary serves source and target,
with three special tokens PAD (0), BOS (1) and EOS (2).
"""

from __future__ import annotations

import datetime
import random
from dataclasses import dataclass

import torch

from lib._checks import require_positive_int, shape
from lib.model.attention import causal_mask, padding_mask

__all__ = [
    "PAD",
    "BOS",
    "EOS",
    "MONTHS",
    "CharVocab",
    "DATE_VOCAB",
    "format_source",
    "format_target",
    "DateSplit",
    "make_date_split",
    "sample_pairs",
    "Batch",
    "make_batch",
]

PAD, BOS, EOS = "<pad>", "<bos>", "<eos>"
MONTHS = (
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
)


class CharVocab:
    """Characters <-> integer ids, with PAD = 0, BOS = 1, EOS = 2 first.

    ``encode`` refuses a character the vocabulary does not hold (a ValueError
    naming it) instead of silently mapping it to some "unknown" id.
    """

    def __init__(self, characters: str):
        if not isinstance(characters, str) or not characters:
            raise ValueError("characters must be a non-empty string")
        if len(set(characters)) != len(characters):
            raise ValueError(f"characters must be distinct, got {characters!r}")
        self.itos: list[str] = [PAD, BOS, EOS, *characters]
        self.stoi: dict[str, int] = {s: i for i, s in enumerate(self.itos)}
        self.pad_id, self.bos_id, self.eos_id = 0, 1, 2

    def __len__(self) -> int:
        return len(self.itos)

    def __repr__(self) -> str:
        return f"CharVocab(size={len(self)}, characters={''.join(self.itos[3:])!r})"

    def encode(self, text: str, bos: bool = False, eos: bool = False) -> list[int]:
        """A string -> its list of ids, optionally framed by BOS and EOS."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        unknown = sorted({c for c in text if c not in self.stoi})
        if unknown:
            raise ValueError(f"text {text!r} holds characters outside the vocabulary: {unknown}")
        ids = [self.stoi[c] for c in text]
        return ([self.bos_id] if bos else []) + ids + ([self.eos_id] if eos else [])

    def decode(self, ids) -> str:
        """Ids -> string: skip PAD and BOS, stop at the first EOS."""
        if isinstance(ids, torch.Tensor):
            if ids.dim() != 1:
                raise ValueError(f"decode takes one sequence of shape (length,), got {shape(ids)}")
            ids = ids.tolist()
        out = []
        for i in ids:
            i = int(i)
            if not 0 <= i < len(self):
                raise ValueError(f"id {i} is outside [0, {len(self)}) for this vocabulary")
            if i == self.eos_id:
                break
            if i in (self.pad_id, self.bos_id):
                continue
            out.append(self.itos[i])
        return "".join(out)


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


@dataclass
class Batch:
    """One padded batch of a sequence-to-sequence task.

    src      (B, n)        source ids, PAD on the right
    tgt_in   (B, m)        BOS + target: what the decoder reads (teacher forcing)
    tgt_out  (B, m)        target + EOS: what it must predict, PAD on the right
    src_mask (B, 1, 1, n)  True on real source tokens (for encoder and cross-attention)
    tgt_mask (B, 1, m, m)  causal AND True on real target tokens
    """

    src: torch.Tensor
    tgt_in: torch.Tensor
    tgt_out: torch.Tensor
    src_mask: torch.Tensor
    tgt_mask: torch.Tensor

    @property
    def n_tokens(self) -> int:
        """Target tokens that count in the loss (everything but PAD)."""
        return int((self.tgt_out != 0).sum())


def _pad(rows: list[list[int]], pad_id: int) -> torch.Tensor:
    width = max(len(r) for r in rows)
    return torch.tensor([r + [pad_id] * (width - len(r)) for r in rows], dtype=torch.long)


def make_batch(pairs, vocab: CharVocab) -> Batch:
    """(source, target) string pairs -> a padded `Batch` with its masks.

    Raises ValueError for an empty list, a pair that is not two strings, an
    empty string or a character outside ``vocab``.
    """
    if not isinstance(vocab, CharVocab):
        raise TypeError(f"vocab must be a CharVocab, got {type(vocab).__name__}")
    pairs = list(pairs)
    if not pairs:
        raise ValueError("make_batch needs at least one (source, target) pair")
    for p in pairs:
        if not (isinstance(p, tuple) and len(p) == 2 and all(isinstance(s, str) and s for s in p)):
            raise ValueError(f"each pair must be two non-empty strings (source, target), got {p!r}")
    src = _pad([vocab.encode(s) for s, _ in pairs], vocab.pad_id)  # (B, n)
    tgt_in = _pad([vocab.encode(t, bos=True) for _, t in pairs], vocab.pad_id)  # (B, m)
    tgt_out = _pad([vocab.encode(t, eos=True) for _, t in pairs], vocab.pad_id)  # (B, m)
    src_mask = padding_mask(src, vocab.pad_id)  # (B, 1, 1, n)
    m = tgt_in.shape[1]
    tgt_mask = causal_mask(m)[None, None] & padding_mask(tgt_in, vocab.pad_id)  # (B, 1, m, m)
    return Batch(src, tgt_in, tgt_out, src_mask, tgt_mask)

