"""lib.save_lm_checkpoint / load_lm_checkpoint / lm_bits_per_byte for a character model:
chapter 15's character row is chapter 11's model, loaded only if it is the pinned file
and only with its own characters, and its bits per byte equal a computation written
here from plain `F.cross_entropy` on the model's logits."""

from __future__ import annotations

import hashlib

import pytest
import torch

import lib
from conftest import (assert_a_changed_byte_is_refused, assert_float16_copy,
                      assert_shipped_and_pinned)
from test_bpe_lm_checkpoint import independent_bits_per_ids

TEXT = ("Double, double toil and trouble;\nFire burn and cauldron bubble.\n" * 3
        + "Fair is foul, and foul is fair:\nHover through the fog and filthy air.\n")
CHARS = "".join(sorted(set(TEXT)))
CHAPTER_11 = dict(d_model=64, n_heads=4, n_layers=3, d_ff=256, dropout=0.0,
                  norm_first=True, max_len=64, positional="learned", activation="gelu",
                  scale_embedding=False)


def config(vocab_size):
    return dict(vocab_size=vocab_size, d_model=16, n_heads=2, n_layers=1, d_ff=32,
                dropout=0.0, norm_first=True, max_len=8, positional="learned",
                activation="gelu", scale_embedding=False)


@pytest.fixture()
def saved(tmp_path):
    torch.manual_seed(0)
    model = lib.DecoderOnlyModel(**config(len(CHARS)))
    path = tmp_path / "char_lm.pt"
    digest = lib.save_lm_checkpoint(model, config(len(CHARS)), CHARS,
                                    {"steps": 3, "torch": torch.__version__}, path)
    return model, path, digest


def test_round_trip_gives_float16_weights_the_characters_and_the_recipe(saved):
    model, path, digest = saved
    assert digest == hashlib.sha256(path.read_bytes()).hexdigest()
    loaded, chars, recipe = lib.load_lm_checkpoint(path, digest)
    assert chars == CHARS and isinstance(chars, str)
    assert recipe == {"steps": 3, "torch": str(torch.__version__)}
    assert not loaded.training
    assert_float16_copy(model, loaded)
    again, _, _ = lib.load_lm_checkpoint(path, digest, CHARS)  # the same characters
    assert torch.equal(again.head.weight, loaded.head.weight)


def test_a_changed_file_is_refused(saved):
    _, path, digest = saved
    assert_a_changed_byte_is_refused(lib.load_lm_checkpoint, path, digest)


def test_other_characters_are_refused(saved):
    _, path, digest = saved
    for other in (CHARS[:-1], CHARS[1:] + CHARS[0], CHARS.replace("a", "\u00e0")):
        with pytest.raises(ValueError, match="tokenizer: not the vocabulary"):
            lib.load_lm_checkpoint(path, digest, other)
    with pytest.raises(ValueError, match="against the stored characters"):
        lib.load_lm_checkpoint(path, digest, lib.BPETokenizer.train(TEXT, 260))


def test_bad_arguments(saved, tmp_path):
    model, path, digest = saved
    cfg = config(len(CHARS))
    with pytest.raises(ValueError, match="distinct characters"):
        lib.save_lm_checkpoint(model, cfg, CHARS + "a", {}, tmp_path / "x")
    with pytest.raises(ValueError, match="distinct characters"):
        lib.load_lm_checkpoint(path, digest, "")
    with pytest.raises(ValueError, match="vocab_size"):
        lib.save_lm_checkpoint(model, cfg, CHARS[:-1], {}, tmp_path / "x")
    with pytest.raises(ValueError, match="tokenizer"):
        lib.lm_bits_per_byte(model, CHARS[:-1], TEXT)
    with pytest.raises(ValueError, match="outside the vocabulary: 'Z'"):
        lib.lm_bits_per_byte(model, CHARS, TEXT + "Z")
    with pytest.raises(ValueError, match="context"):
        lib.lm_bits_per_byte(model, CHARS, TEXT, context="ab")


def test_bits_per_byte_equals_plain_cross_entropy(saved):
    model, _, _ = saved
    index = {c: i for i, c in enumerate(CHARS)}
    text = TEXT[:-3]
    assert len(text) % 8 != 0  # a tail that fills no window: scored too
    got = lib.lm_bits_per_byte(model, CHARS, text)
    want = independent_bits_per_ids(model, [index[c] for c in "\n" + text],
                                    len(text.encode("utf-8")), 8)
    assert got[1:] == want[1:] == (len(text), len(text))
    assert got[0] == pytest.approx(want[0], rel=1e-5)


@pytest.fixture(scope="module")
def shipped():
    corpus = lib.load_corpus()
    chars = "".join(sorted(set(corpus.train_text)))  # chapter 11's vocabulary
    model, stored, recipe = lib.load_lm_checkpoint(
        lib.CHAR_LM_CHECKPOINT, lib.CHAR_LM_CHECKPOINT_SHA256, chars)
    return corpus, model, stored, recipe


def test_the_shipped_model_is_chapter_11s_in_the_package(shipped):
    assert_shipped_and_pinned(lib.CHAR_LM_CHECKPOINT, lib.CHAR_LM_CHECKPOINT_SHA256)
    corpus, model, chars, recipe = shipped
    assert len(chars) == model.vocab_size == 84
    assert set(corpus.validation_text) <= set(chars)
    reference = lib.DecoderOnlyModel(84, **CHAPTER_11)  # chapter 11's constructor call
    assert {k: v.shape for k, v in model.state_dict().items()} == \
        {k: v.shape for k, v in reference.state_dict().items()}
    assert sum(p.numel() for p in model.parameters()) == 159_552
    assert recipe["steps"] == 1500 and recipe["batch"] == 32 and recipe["seed"] == 0
    assert [r["seed"] for r in recipe["results"]] == [0, 1]
    # chapter 11's validation: 1,000 windows of the four held-out plays, in its band
    valid = torch.tensor([chars.index(c) for c in corpus.validation_text])
    nats = lib.lm_loss(model, lib.evaluation_windows(valid, 64, n_windows=1000))
    assert 1.68 < nats < 1.80
    stored = recipe["results"][0]["character model nats, chapter 11's 1,000 windows"]
    assert nats == pytest.approx(stored, abs=2e-3)  # float16 weights: the same model


def test_the_shipped_model_on_macbeth_plain_cross_entropy(shipped):
    """The chapter's character row on a short span of the held-out play, recomputed."""
    corpus, model, chars, _ = shipped
    span = corpus.validation["macbeth"][:3_000]
    got = lib.lm_bits_per_byte(model, chars, span)
    want = independent_bits_per_ids(model, [chars.index(c) for c in "\n" + span],
                                    len(span.encode("utf-8")), 64)
    assert got[1:] == want[1:]
    assert got[0] == pytest.approx(want[0], rel=1e-5)
    assert 1.8 < got[0] < 3.5  # trained: far below a uniform log2(84) = 6.4 bits
