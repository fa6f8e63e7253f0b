"""lib.save_lm_checkpoint / load_lm_checkpoint / lm_bits_per_byte: chapter 15's
BPE language model is loaded only if it is the pinned file and only with its own
tokenizer, and its bits per byte equal a computation written here from plain
`F.cross_entropy` on the model's logits."""

from __future__ import annotations

import hashlib
import math

import pytest
import torch
import torch.nn.functional as F

import lib
from conftest import (assert_a_changed_byte_is_refused, assert_float16_copy,
                      assert_shipped_and_pinned)

TEXT = ("Double, double toil and trouble;\nFire burn and cauldron bubble.\n" * 3
        + "Fair is foul, and foul is fair:\nHover through the fog and filthy air.\n")


def config(vocab_size):
    return dict(vocab_size=vocab_size, d_model=16, n_heads=2, n_layers=1, d_ff=32,
                dropout=0.0, norm_first=True, max_len=8, positional="learned",
                activation="gelu", scale_embedding=False)


@pytest.fixture(scope="module")
def tokenizer():
    return lib.BPETokenizer.train(TEXT, 256 + 20)


@pytest.fixture()
def saved(tmp_path, tokenizer):
    torch.manual_seed(0)
    model = lib.DecoderOnlyModel(**config(tokenizer.vocab_size))
    path = tmp_path / "bpe_lm.pt"
    digest = lib.save_lm_checkpoint(model, config(tokenizer.vocab_size), tokenizer,
                                        {"steps": 3, "torch": torch.__version__}, path)
    return model, path, digest


def test_round_trip_gives_float16_weights_the_tokenizer_and_the_recipe(saved, tokenizer):
    model, path, digest = saved
    assert digest == hashlib.sha256(path.read_bytes()).hexdigest()
    loaded, bpe, recipe = lib.load_lm_checkpoint(path, digest)
    assert recipe == {"steps": 3, "torch": str(torch.__version__)}
    assert not loaded.training
    assert bpe.merges == tokenizer.merges and bpe.pattern == tokenizer.pattern
    assert bpe.encode(TEXT) == tokenizer.encode(TEXT)
    assert_float16_copy(model, loaded)
    again, _, _ = lib.load_lm_checkpoint(path, digest, tokenizer)  # the same merges
    assert torch.equal(again.head.weight, loaded.head.weight)


def test_a_changed_file_is_refused(saved):
    _, path, digest = saved
    assert_a_changed_byte_is_refused(lib.load_lm_checkpoint, path, digest)


def test_another_vocabulary_is_refused(saved, tokenizer):
    _, path, digest = saved
    fewer = lib.BPETokenizer(tokenizer.merges[:-1])  # one merge short
    with pytest.raises(ValueError, match="tokenizer: not the vocabulary"):
        lib.load_lm_checkpoint(path, digest, fewer)
    other = lib.BPETokenizer.train("something else entirely, other text " * 5, 276)
    with pytest.raises(ValueError, match="tokenizer"):
        lib.load_lm_checkpoint(path, digest, other)


def test_bad_arguments(saved, tokenizer, tmp_path):
    model, path, digest = saved
    with pytest.raises(ValueError, match="sha256"):
        lib.load_lm_checkpoint(path, "abc")
    with pytest.raises(FileNotFoundError, match="path"):
        lib.load_lm_checkpoint(tmp_path / "none.pt", digest)
    with pytest.raises(TypeError, match="tokenizer"):
        lib.load_lm_checkpoint(path, digest, ["not", "a", "tokenizer"])
    cfg = config(tokenizer.vocab_size)
    with pytest.raises(TypeError, match="model"):
        lib.save_lm_checkpoint(torch.nn.Linear(2, 2), cfg, tokenizer, {}, tmp_path / "x")
    with pytest.raises(TypeError, match="tokenizer"):
        lib.save_lm_checkpoint(model, cfg, b"bpe", {}, tmp_path / "x")
    with pytest.raises(TypeError, match="recipe"):
        lib.save_lm_checkpoint(model, cfg, tokenizer, [], tmp_path / "x")
    with pytest.raises(ValueError, match="config"):
        lib.save_lm_checkpoint(model, {**cfg, "extra": 1}, tokenizer, {}, tmp_path / "x")
    with pytest.raises(ValueError, match="vocab_size"):
        lib.save_lm_checkpoint(model, cfg, lib.BPETokenizer(tokenizer.merges[:-1]), {},
                                   tmp_path / "x")
    with pytest.raises(TypeError, match="model"):
        lib.lm_bits_per_byte(torch.nn.Linear(2, 2), tokenizer, TEXT)
    with pytest.raises(ValueError, match="tokenizer"):
        lib.lm_bits_per_byte(model, lib.BPETokenizer(), TEXT)
    with pytest.raises(ValueError, match="context"):
        lib.lm_bits_per_byte(model, tokenizer, TEXT, context="two words")


def independent_bits_per_ids(model, ids, n_bytes, window):
    """Every token of `ids` after the first scored once with plain F.cross_entropy: the
    non-overlapping windows of window + 1 tokens, then the tail's tokens in the last
    window; the total in bits over `n_bytes`."""
    total, scored = 0.0, set()
    with torch.no_grad():
        starts = list(range(0, len(ids) - window, window))
        starts.append(len(ids) - window - 1)
        for start in starts:
            x = torch.tensor(ids[start:start + window + 1])
            logits = model(x[None, :-1])[0].double()  # (window, |V|)
            nats = F.cross_entropy(logits, x[1:], reduction="none")  # (window,)
            for t in range(window):
                if start + t + 1 not in scored:  # the target's index in ids
                    scored.add(start + t + 1)
                    total += float(nats[t])
    assert scored == set(range(1, len(ids)))
    return total / math.log(2) / n_bytes, len(scored), n_bytes


def independent_bits_per_byte(model, tokenizer, text, window):
    """The BPE tokens of a newline then `text`, scored by independent_bits_per_ids;
    bytes counted from the text itself."""
    ids = tokenizer.encode("\n") + tokenizer.encode(text)
    assert tokenizer.decode(ids) == "\n" + text
    return independent_bits_per_ids(model, ids, len(text.encode("utf-8")), window)


def test_bits_per_byte_equals_plain_cross_entropy(saved, tokenizer):
    model, _, _ = saved
    model.eval()
    text = TEXT + "Eye of newt, and toe of frog — ça va.\n"  # a non-ASCII byte or two
    got = lib.lm_bits_per_byte(model, tokenizer, text)
    want = independent_bits_per_byte(model, tokenizer, text, 8)
    assert got[1:] == want[1:]
    assert got[0] == pytest.approx(want[0], rel=1e-5)
    ids = tokenizer.encode("\n") + tokenizer.encode(text)
    assert (len(ids) - 1) % 8 != 0  # a tail that fills no window: scored too


def strided_bits_per_ids(model, ids, n_bytes, window, stride):
    """Every target ids[t] (t >= 1) scored one at a time from its own context: for
    t <= window all of ids[:t], else the window start k·stride with the smallest k
    whose window reaches t (but no later than the last window, len(ids) - window - 1)."""
    last = len(ids) - window - 1
    total = 0.0
    with torch.no_grad():
        for t in range(1, len(ids)):
            start = 0 if t <= window else min(-(-(t - window) // stride) * stride, last)
            x = torch.tensor(ids[start:t])
            assert 1 <= len(x) <= window and (t <= window or len(x) >= window - stride + 1)
            logits = model(x[None])[0, -1].double()
            total += float(F.cross_entropy(logits[None], torch.tensor([ids[t]])))
    return total / math.log(2) / n_bytes


def test_strided_bits_per_byte_scores_each_target_from_its_window(saved, tokenizer):
    """stride: overlapping windows, each target scored once with at least window - stride
    tokens of context after the first window; stride = window is the default scoring."""
    model, _, _ = saved
    model.eval()
    text = TEXT + "Eye of newt, and toe of frog — ça va.\n"
    ids = tokenizer.encode("\n") + tokenizer.encode(text)
    n_bytes = len(text.encode("utf-8"))
    for stride in (1, 3, 4, 7):
        got = lib.lm_bits_per_byte(model, tokenizer, text, stride=stride)
        assert got[1:] == (len(ids) - 1, n_bytes)
        assert got[0] == pytest.approx(strided_bits_per_ids(model, ids, n_bytes, 8, stride),
                                       rel=1e-6), stride
    plain = lib.lm_bits_per_byte(model, tokenizer, text)
    assert lib.lm_bits_per_byte(model, tokenizer, text, stride=8)[0] == pytest.approx(
        plain[0], rel=1e-6)
    assert lib.lm_bits_per_byte(model, tokenizer, text, stride=4)[0] != pytest.approx(
        plain[0], rel=1e-3)  # more context changes the score
    for bad, error in ((0, ValueError), (9, ValueError), (2.0, TypeError), (True, TypeError)):
        with pytest.raises(error, match="stride"):
            lib.lm_bits_per_byte(model, tokenizer, text, stride=bad)


@pytest.fixture(scope="module")
def shipped():
    corpus = lib.load_corpus()
    bpe = lib.BPETokenizer.train(corpus.train_text, 512)
    model, stored, recipe = lib.load_lm_checkpoint(
        lib.BPE_LM_CHECKPOINT, lib.BPE_LM_CHECKPOINT_SHA256, bpe)
    return corpus, model, stored, recipe


def test_the_shipped_model_is_the_pinned_file_in_the_package(shipped):
    assert_shipped_and_pinned(lib.BPE_LM_CHECKPOINT, lib.BPE_LM_CHECKPOINT_SHA256)
    _, model, stored, recipe = shipped
    assert stored.vocab_size == model.vocab_size == 512
    assert lib.context_length(model) == 64 and len(model.layers) == 3
    assert recipe["steps"] == 1500 and [r["seed"] for r in recipe["results"]] == [0, 1]


def test_the_shipped_model_on_macbeth_plain_cross_entropy(shipped):
    """The chapter's BPE row on a short span of the held-out play, recomputed here."""
    corpus, model, bpe, recipe = shipped
    span = corpus.validation["macbeth"][:3_000]
    got = lib.lm_bits_per_byte(model, bpe, span)
    want = independent_bits_per_byte(model, bpe, span, 64)
    assert got[1:] == want[1:]
    assert got[0] == pytest.approx(want[0], rel=1e-5)
    assert 1.5 < got[0] < 4.0  # trained: far below a uniform 9 bits per 1.9 bytes
