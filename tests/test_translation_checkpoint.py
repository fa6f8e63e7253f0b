"""lib.save_translation_checkpoint / load_translation_checkpoint: the translation
chapter's committed longer run is loaded only if it is the pinned file and was
trained with the chapter's vocabularies."""

from __future__ import annotations

import hashlib

import pytest
import torch

import lib
from conftest import assert_shipped_and_pinned


@pytest.fixture(scope="module")
def vocabs():
    src = lib.train_subword_vocab(["ἐν ἀρχῇ ἦν ὁ λόγος", "καὶ ὁ λόγος"], 280)
    tgt = lib.train_subword_vocab(["In the beginning was the Word", "and the Word"], 280)
    return src, tgt


@pytest.fixture()
def saved(tmp_path, vocabs):
    torch.manual_seed(0)
    model = lib.Transformer(len(vocabs[0]), len(vocabs[1]), d_model=16, n_heads=2,
                            n_layers=1, d_ff=32, dropout=0.0)
    path = tmp_path / "run.pt"
    digest = lib.save_translation_checkpoint(model, *vocabs, {"epochs": 3}, path)
    return model, path, digest


def test_round_trip_gives_the_float16_weights_and_the_recipe(saved, vocabs):
    model, path, digest = saved
    assert digest == hashlib.sha256(path.read_bytes()).hexdigest()
    loaded, recipe = lib.load_translation_checkpoint(path, digest, *vocabs)
    assert recipe == {"epochs": 3} and not loaded.training
    for (name, a), (_, b) in zip(model.state_dict().items(), loaded.state_dict().items()):
        assert b.dtype == a.dtype, name
        assert torch.equal(a.to(torch.float16).to(a.dtype), b), name
    src = torch.tensor([[5, 6, 7]])
    tgt = torch.tensor([[1, 8]])
    model.eval()
    with torch.no_grad():
        assert torch.allclose(model(src, tgt), loaded(src, tgt), atol=1e-2)


def test_a_changed_file_is_refused(saved, vocabs):
    _, path, digest = saved
    data = bytearray(path.read_bytes())
    data[-10] ^= 1
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="SHA-256 mismatch"):
        lib.load_translation_checkpoint(path, digest, *vocabs)


def test_other_vocabularies_are_refused(saved, vocabs):
    _, path, digest = saved
    with pytest.raises(ValueError, match="src_vocab"):
        lib.load_translation_checkpoint(path, digest, vocabs[1], vocabs[1])
    with pytest.raises(ValueError, match="tgt_vocab"):
        lib.load_translation_checkpoint(path, digest, vocabs[0], vocabs[0])


def test_fingerprint_follows_the_merges(vocabs):
    src, tgt = vocabs
    assert lib.vocab_fingerprint(src) != lib.vocab_fingerprint(tgt)
    again = lib.train_subword_vocab(["ἐν ἀρχῇ ἦν ὁ λόγος", "καὶ ὁ λόγος"], 280)
    assert lib.vocab_fingerprint(again) == lib.vocab_fingerprint(src)


def test_bad_arguments(saved, vocabs, tmp_path):
    model, path, digest = saved
    with pytest.raises(ValueError, match="sha256"):
        lib.load_translation_checkpoint(path, "abc", *vocabs)
    with pytest.raises(FileNotFoundError, match="path"):
        lib.load_translation_checkpoint(tmp_path / "none.pt", digest, *vocabs)
    with pytest.raises(TypeError, match="model"):
        lib.save_translation_checkpoint(torch.nn.Linear(2, 2), *vocabs, {}, tmp_path / "x.pt")
    with pytest.raises(TypeError, match="recipe"):
        lib.save_translation_checkpoint(model, *vocabs, [], tmp_path / "x.pt")
    with pytest.raises(TypeError, match="vocab"):
        lib.vocab_fingerprint("not a vocabulary")


def test_a_recipe_with_torch_version_loads_with_weights_only(vocabs, tmp_path):
    """torch.__version__ is a str subclass that weights-only loading refuses: the
    recipe is stored as plain values (the bench script records the version)."""
    torch.manual_seed(0)
    model = lib.Transformer(len(vocabs[0]), len(vocabs[1]), d_model=16, n_heads=2,
                            n_layers=1, d_ff=32, dropout=0.0)
    recipe = {"torch": torch.__version__, "curve": [[5, 4.4, 4.3, 2.55, 16.5]]}
    digest = lib.save_translation_checkpoint(model, *vocabs, recipe, tmp_path / "r.pt")
    _, loaded = lib.load_translation_checkpoint(tmp_path / "r.pt", digest, *vocabs)
    assert loaded == {"torch": str(torch.__version__), "curve": [[5, 4.4, 4.3, 2.55, 16.5]]}
    assert type(loaded["torch"]) is str
    with pytest.raises(TypeError, match="recipe"):
        lib.save_translation_checkpoint(model, *vocabs, {"x": object()}, tmp_path / "y.pt")


def test_the_shipped_longer_run_is_the_pinned_file_and_loads():
    """The translation chapter's 40-epoch model: the committed file has the pinned hash,
    ships inside the package, and loads with the chapter's vocabularies."""
    path = lib.TRANSLATION_CHECKPOINT
    assert_shipped_and_pinned(path, lib.TRANSLATION_CHECKPOINT_SHA256)
    split = lib.split_by_book(lib.load_verse_pairs())
    src = lib.train_subword_vocab([p.source_text for p in split.train], 4000)
    tgt = lib.train_subword_vocab([p.target_text for p in split.train], 4000)
    model, recipe = lib.load_translation_checkpoint(path, lib.TRANSLATION_CHECKPOINT_SHA256,
                                                    src, tgt)
    assert recipe["epochs"] == 40 and recipe["dropout"] == 0.1
    assert [row[0] for row in recipe["curve"]] == list(range(5, 45, 5))
    assert model.count_parameters() == 2_462_848 and not model.training
