"""lib.train.corpus: the Shakespeare texts, split into training and validation by play."""

from __future__ import annotations

import pytest

import lib
from lib.train.corpus import VALIDATION_PLAYS, corpus_dir, load_corpus, load_works, split_by_play

HAVE_CORPUS = len(list(corpus_dir().glob("*_gut.txt"))) == 42
needs_corpus = pytest.mark.skipif(not HAVE_CORPUS, reason="run `make data` first")


@needs_corpus
def test_the_corpus():
    works = load_works()
    assert len(works) == 42 and list(works) == sorted(works)
    assert {"hamlet", "sonnets", "tempest"} <= set(works)
    total = sum(map(len, works.values()))
    assert 4_900_000 < total < 5_200_000  # about 5 MB
    assert all(text.isascii() and "Gutenberg" not in text for text in works.values())


@needs_corpus
def test_split_by_play_never_shares_a_play():
    corpus = load_corpus()
    assert tuple(corpus.validation) == VALIDATION_PLAYS  # the fixed list, in name order
    assert len(corpus.train) == 38 and not set(corpus.train) & set(corpus.validation)
    share = len(corpus.validation_text) / (len(corpus.train_text) + len(corpus.validation_text))
    assert 0.08 < share < 0.12  # about a tenth held out
    # No validation line longer than a stock phrase appears in the training text.
    lines = [ln.strip() for ln in corpus.validation["macbeth"].splitlines() if len(ln.strip()) > 60]
    assert lines and sum(ln in corpus.train_text for ln in lines) < 0.02 * len(lines)
    assert load_corpus().train_text == corpus.train_text  # deterministic
    assert "38 works" in repr(corpus) and "4 plays" in repr(corpus)


def test_split_by_play_on_a_small_folder(tmp_path):
    for name, text in {"a": "alpha\n", "b": "beta\n", "c": "gamma\n"}.items():
        (tmp_path / f"{name}_gut.txt").write_text(text)
    (tmp_path / "b_gut_f.txt").write_text("folio spelling, left out\n")
    works = load_works(tmp_path)
    assert works == {"a": "alpha\n", "b": "beta\n", "c": "gamma\n"}
    split = split_by_play(works, ("b",))
    assert split.train == {"a": "alpha\n", "c": "gamma\n"} and split.validation == {"b": "beta\n"}
    assert split.train_text == "alpha\n\n\ngamma\n"
    assert load_corpus(tmp_path, ("c",)).validation_text == "gamma\n"


def test_missing_data_names_the_fix(tmp_path, monkeypatch):
    with pytest.raises(FileNotFoundError, match=r"make data.*python -m lib\.course_data shakespeare"):
        load_works(tmp_path / "nowhere")
    monkeypatch.setenv("COURSE_DATA_DIR", str(tmp_path))
    assert corpus_dir() == tmp_path
    with pytest.raises(FileNotFoundError, match="make data"):
        load_corpus()


def test_bad_validation_lists():
    works = {"a": "x", "b": "y"}
    with pytest.raises(ValueError, match="validation: no work named 'hamlet'"):
        split_by_play(works, ("hamlet",))
    with pytest.raises(ValueError, match="validation: every work is held out"):
        split_by_play(works, ("a", "b"))
    with pytest.raises(TypeError, match="validation must be a sequence"):
        split_by_play(works, "a")
    with pytest.raises(ValueError, match="validation: no work is held out"):
        split_by_play(works, ())
    with pytest.raises(ValueError, match="validation: no work is held out"):
        load_corpus(validation=[])


def test_repr_counts_the_texts_the_chapters_use():
    split = split_by_play({"a": "alpha\n", "b": "beta\n", "c": "gamma\n"}, ("b",))
    # train_text is "alpha\n" + "\n\n" + "gamma\n": 6 + 2 + 6 = 14 characters
    assert "2 works, 14 characters" in repr(split) and "1 plays, 5 characters" in repr(split)


def test_exported_from_lib():
    assert lib.load_corpus is load_corpus and lib.VALIDATION_PLAYS == VALIDATION_PLAYS
