"""A real parallel corpus with human word alignments: the Greek New Testament and an
English translation, verse by verse (the translation chapter).

Where it comes from. The wheel ``bible-alignments==0.4.2`` on PyPI (Clear Bible /
Biblica) ships, token by token,

- ``data/sources/SBLGNT.tsv``: the SBL Greek New Testament (SBLGNT, © 2010 Society
  of Biblical Literature and Logos Bible Software; licensed CC BY 4.0);
- ``data/eng/targets/BSB/nt_BSB.tsv``: the Berean Standard Bible's New Testament
  (BSB; public domain);
- ``data/eng/alignments/BSB/SBLGNT-BSB-manual.json``: word alignments between the
  two drawn by people ("process": "manual"; © Clear Bible, licensed CC BY 4.0).

``make data`` (or ``python tools/fetch_data.py``) downloads the wheel once with
``pip download --no-deps`` into ``data/downloads/`` and checks its SHA-256; the
package itself is never installed (it declares Python < 3.12 and heavy
dependencies). This module reads the three files straight out of the zip, checks
the SHA-256 again (a corrupt or substituted file is refused, never half-read),
and builds one `VersePair` per verse that has all three: Greek words, English
tokens and alignment links. Nothing here downloads.

The split is by book (`split_by_book`): the held-out books (`TEST_BOOKS`) are
never seen in training, not even a neighbouring verse.
"""

from __future__ import annotations

import csv
import io
import json
import os
import pathlib
import zipfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = [
    "ALIGNMENT_WHEEL",
    "ALIGNMENT_WHEEL_SHA256",
    "NT_BOOKS",
    "TEST_BOOKS",
    "VersePair",
    "VerseSplit",
    "alignment_wheel_path",
    "load_verse_pairs",
    "split_by_book",
]

ALIGNMENT_WHEEL = "bible_alignments-0.4.2-py3-none-any.whl"
# SHA-256 of the wheel as PyPI serves it (computed once, pinned here and in
# tools/fetch_data.py).
ALIGNMENT_WHEEL_SHA256 = "84f6b15e706657777824aac811567cb5cb2b38ad2b94497209f5f3c3f67b0984"
SOURCE_MEMBER = "data/sources/SBLGNT.tsv"
TARGET_MEMBER = "data/eng/targets/BSB/nt_BSB.tsv"
ALIGNMENT_MEMBER = "data/eng/alignments/BSB/SBLGNT-BSB-manual.json"
_ENV = "COURSE_ALIGNMENT_WHEEL"  # optional: the path of the wheel, wherever it is
_INSTALL_STEP = ("in a clone of the course run `make data`; anywhere else run "
                 "`python -m lib.course_data alignments` (the chapter's first cell does)")

# Book numbers 40-66 (the New Testament in the usual order).
NT_BOOKS = {
    40: "Matthew", 41: "Mark", 42: "Luke", 43: "John", 44: "Acts", 45: "Romans",
    46: "1 Corinthians", 47: "2 Corinthians", 48: "Galatians", 49: "Ephesians",
    50: "Philippians", 51: "Colossians", 52: "1 Thessalonians", 53: "2 Thessalonians",
    54: "1 Timothy", 55: "2 Timothy", 56: "Titus", 57: "Philemon", 58: "Hebrews",
    59: "James", 60: "1 Peter", 61: "2 Peter", 62: "1 John", 63: "2 John", 64: "3 John",
    65: "Jude", 66: "Revelation",
}
# Held out whole: two of Paul's letters and James (about 4% of the verses).
TEST_BOOKS = ("Philippians", "1 Thessalonians", "James")


@dataclass(frozen=True)
class VersePair:
    """One verse: Greek words, English tokens and the human alignment links.

    verse        "BBCCCVVV" (book, chapter, verse), e.g. "40001001" for Matthew 1:1
    source       the Greek words, in order
    target       the English tokens, in order (punctuation marks are tokens too)
    space_after  per English token: is it followed by a space in running text
    excluded     per English token: left out of alignment (punctuation)
    links        (i, j) pairs: Greek word i and English token j were aligned
    """

    verse: str
    source: tuple[str, ...]
    target: tuple[str, ...]
    space_after: tuple[bool, ...]
    excluded: tuple[bool, ...]
    links: frozenset[tuple[int, int]]

    def __post_init__(self):
        if not self.source or not self.target:
            side = "source (Greek)" if not self.source else "target (English)"
            raise ValueError(f"verse {self.verse}: the {side} side is empty")
        for name, words in (("source", self.source), ("target", self.target)):
            bad = [k for k, w in enumerate(words) if not isinstance(w, str) or not w.strip()]
            if bad:
                raise ValueError(f"verse {self.verse}: {name} word {bad[0]} is empty or not a str")
        n, m = len(self.source), len(self.target)
        if len(self.space_after) != m or len(self.excluded) != m:
            raise ValueError(
                f"verse {self.verse}: space_after ({len(self.space_after)}) and excluded "
                f"({len(self.excluded)}) must have one entry per target token ({m})"
            )
        for i, j in self.links:
            if not (0 <= i < n and 0 <= j < m):
                raise ValueError(
                    f"verse {self.verse}: link ({i}, {j}) is outside the verse "
                    f"({n} source words, {m} target tokens)"
                )

    @property
    def book(self) -> str:
        """The book's name, e.g. "Matthew"."""
        return NT_BOOKS[int(self.verse[:2])]

    @property
    def reference(self) -> str:
        """A reader's reference, e.g. "Matthew 1:1"."""
        return f"{self.book} {int(self.verse[2:5])}:{int(self.verse[5:8])}"

    @property
    def source_text(self) -> str:
        """The Greek verse as one string (words separated by single spaces)."""
        return " ".join(self.source)

    @property
    def target_text(self) -> str:
        """The English verse as running text (no space before punctuation)."""
        parts = []
        for word, space in zip(self.target, self.space_after):
            parts.append(word + (" " if space else ""))
        return "".join(parts).strip()

    @property
    def aligned_targets(self) -> list[int]:
        """The English tokens that take part in alignment (not punctuation)."""
        return [j for j, ex in enumerate(self.excluded) if not ex]


@dataclass(frozen=True)
class VerseSplit:
    """Verse pairs split by book: whole books on either side."""

    train: list[VersePair]
    test: list[VersePair]

    def __repr__(self) -> str:
        def books(pairs):
            return len({p.book for p in pairs})

        return (
            f"VerseSplit(train: {len(self.train):,} verses from {books(self.train)} books; "
            f"test: {len(self.test):,} verses from {books(self.test)} books)"
        )


def alignment_wheel_path() -> pathlib.Path:
    """Where the wheel is: ``$COURSE_ALIGNMENT_WHEEL`` if set, else ``downloads/`` +
    `ALIGNMENT_WHEEL` in the course's data folder (`lib.course_data.data_root`)."""
    if os.environ.get(_ENV):
        return pathlib.Path(os.environ[_ENV])
    from lib.course_data import data_root  # here, not at the top: see lib.course_data
    return data_root() / "downloads" / ALIGNMENT_WHEEL


def _read_tsv(archive: zipfile.ZipFile, member: str, path: pathlib.Path) -> list[dict]:
    try:
        raw = archive.read(member)
    except KeyError:
        raise ValueError(f"path: {path.name} has no {member}; {_INSTALL_STEP} again") from None
    return list(csv.DictReader(io.StringIO(raw.decode("utf-8")), delimiter="\t"))


def load_verse_pairs(
    path: str | os.PathLike | None = None, expected_sha256: str | None = ALIGNMENT_WHEEL_SHA256
) -> list[VersePair]:
    """Every New Testament verse with Greek, English and manual alignments, in order.

    path: the wheel (default: `alignment_wheel_path`). Its SHA-256 must equal
    ``expected_sha256`` (pass None to skip the check, e.g. for a test archive).
    Raises FileNotFoundError naming the install step when the wheel is missing,
    ValueError when it is corrupt, changed or lacks one of the three files.
    """
    path = pathlib.Path(path) if path is not None else alignment_wheel_path()
    if not path.is_file():
        raise FileNotFoundError(
            f"path: the aligned New Testament ({ALIGNMENT_WHEEL}) is not at {path}. "
            f"It is fetched once, at install time: {_INSTALL_STEP}."
        )
    if expected_sha256 is not None:
        from lib.course_data import sha256_file  # here, not at the top: see lib.course_data

        got = sha256_file(path)
        if got != expected_sha256:
            raise ValueError(
                f"path: SHA-256 mismatch for {path}: got {got}, expected {expected_sha256}. "
                f"The download is corrupt or not the pinned one: delete it and {_INSTALL_STEP}."
            )
    try:
        with zipfile.ZipFile(path) as archive:
            source_rows = _read_tsv(archive, SOURCE_MEMBER, path)
            target_rows = _read_tsv(archive, TARGET_MEMBER, path)
            try:
                records = json.loads(archive.read(ALIGNMENT_MEMBER))["records"]
            except KeyError:
                raise ValueError(
                    f"path: {path.name} has no {ALIGNMENT_MEMBER} (or it has no records); "
                    f"{_INSTALL_STEP} again"
                ) from None
    except zipfile.BadZipFile as err:
        raise ValueError(f"path: {path} is not a readable zip ({err}); {_INSTALL_STEP}") from err
    return build_verse_pairs(source_rows, target_rows, records)


def build_verse_pairs(
    source_rows: Iterable[dict], target_rows: Iterable[dict], records: Iterable[dict]
) -> list[VersePair]:
    """Assemble `VersePair`s from the three files' rows (see `load_verse_pairs`).

    source_rows: {"id": "nBBCCCVVVWWW", "text": ...}; target_rows: {"id",
    "source_verse", "text", "skip_space_after", "exclude"}; records: {"source": [ids],
    "target": [ids]}, each meaning every source id is linked to every target id.
    A verse is kept when it has Greek words, English tokens and at least one link.
    A link between tokens of two different verses (454 of the 189,927 in the file) is left out.
    Raises ValueError for a link to a token that no verse has (an unknown token).
    """
    source: dict[str, list[str]] = {}
    where: dict[str, tuple[str, int]] = {}  # token id -> (verse, index in the verse)
    for row in source_rows:
        tid = row["id"]
        verse = tid[1:9]
        words = source.setdefault(verse, [])
        where[tid] = (verse, len(words))
        words.append(row["text"])
    target: dict[str, list[tuple[str, bool, bool]]] = {}
    for row in target_rows:
        verse = row["source_verse"]
        tokens = target.setdefault(verse, [])
        where[row["id"]] = (verse, len(tokens))
        tokens.append((row["text"], row["skip_space_after"] != "y", row["exclude"] == "y"))
    links: dict[str, set[tuple[int, int]]] = {}
    for k, record in enumerate(records):
        ends = []
        for side in ("source", "target"):
            for tid in record[side]:
                if tid not in where:
                    raise ValueError(
                        f"records: record {k} links the unknown {side} token {tid!r} "
                        "(no verse has it)"
                    )
            ends.append([where[tid] for tid in record[side]])
        # A link between two verses (0.2% of them) cannot be a link inside one verse
        # pair: it is left out.
        for v, i in ends[0]:
            for w, j in ends[1]:
                if v == w:
                    links.setdefault(v, set()).add((i, j))
    out = []
    for verse in sorted(source):
        if verse not in target or not links.get(verse):
            continue
        words, spaces, excluded = zip(*target[verse])
        out.append(
            VersePair(verse, tuple(source[verse]), words, spaces, excluded, frozenset(links[verse]))
        )
    return out


def split_by_book(pairs: Sequence[VersePair], test_books: Sequence[str] = TEST_BOOKS) -> VerseSplit:
    """Put the books named in `test_books` aside, whole; the rest is for training."""
    if isinstance(test_books, str):
        raise TypeError("test_books must be a sequence of book names, got a single str")
    present = {p.book for p in pairs}
    unknown = [b for b in test_books if b not in present]
    if unknown:
        raise ValueError(
            f"test_books: no verses of {', '.join(map(repr, unknown))} "
            f"(books present: {', '.join(sorted(present))})"
        )
    held = set(test_books)
    if held == present:
        raise ValueError("test_books: every book is held out; nothing is left to train on")
    return VerseSplit(
        train=[p for p in pairs if p.book not in held],
        test=[p for p in pairs if p.book in held],
    )
