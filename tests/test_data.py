"""Tests for lib/train/data.py: the date task, its vocabulary, split and batches."""

import datetime
import random

import pytest
import torch

from lib import DATE_VOCAB, MONTHS, CharVocab, format_source, format_target, make_batch, make_date_split, sample_pairs


def test_vocab_special_ids_and_round_trip():
    v = DATE_VOCAB
    assert (v.pad_id, v.bos_id, v.eos_id) == (0, 1, 2)
    assert v.itos[:3] == ["<pad>", "<bos>", "<eos>"]
    text = "September 30, 2001"
    ids = v.encode(text, bos=True, eos=True)
    assert ids[0] == 1 and ids[-1] == 2 and len(ids) == len(text) + 2
    assert v.decode(ids) == text
    assert v.decode(ids + [0, 0]) == text
    assert v.decode([5, 2, 5]) == v.itos[5]  # stops at EOS
    # every month name and digit is encodable
    for m in MONTHS:
        v.encode(m)
    v.encode("0123456789-, ")


def test_unknown_character_is_a_clear_error():
    with pytest.raises(ValueError, match="outside the vocabulary"):
        DATE_VOCAB.encode("2019/03/07")
    with pytest.raises(ValueError, match="id 99"):
        DATE_VOCAB.decode([99])
    with pytest.raises(TypeError):
        DATE_VOCAB.encode(2019)
    with pytest.raises(ValueError, match="distinct"):
        CharVocab("aab")


def test_batch_shapes_values_and_masks():
    pairs = [("2019-3-7", "March 7, 2019"), ("2001-12-25", "December 25, 2001")]
    b = make_batch(pairs, DATE_VOCAB)
    assert b.src.shape == (2, 10) and b.tgt_in.shape == (2, 18) and b.tgt_out.shape == (2, 18)
    assert b.src_mask.shape == (2, 1, 1, 10) and b.tgt_mask.shape == (2, 1, 18, 18)
    assert b.src_mask.dtype == torch.bool and b.tgt_mask.dtype == torch.bool
    # first row: 8 source characters then 2 PAD; 13 target characters + BOS/EOS, then 4 PAD
    assert b.src_mask[0, 0, 0].tolist() == [True] * 8 + [False] * 2
    assert b.src[0, 8:].tolist() == [0, 0]
    assert b.tgt_in[0, 0] == 1 and b.tgt_out[0, 13] == 2 and b.tgt_out[0, 14:].tolist() == [0] * 4
    assert torch.equal(b.tgt_in[:, 1:14], b.tgt_out[:, :13])  # shifted by one
    assert b.n_tokens == 14 + 18
    # target mask: j <= i and key j is not PAD, written out element by element
    for r in range(2):
        for i in range(18):
            for j in range(18):
                expected = j <= i and int(b.tgt_in[r, j]) != 0
                assert bool(b.tgt_mask[r, 0, i, j]) == expected
    assert DATE_VOCAB.decode(b.tgt_out[1]) == "December 25, 2001"


def test_batch_bad_input():
    with pytest.raises(ValueError, match="at least one"):
        make_batch([], DATE_VOCAB)
    with pytest.raises(ValueError, match="two non-empty strings"):
        make_batch([("2019-03-07", "")], DATE_VOCAB)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        make_batch([("2019_03_07", "March 7, 2019")], DATE_VOCAB)
    with pytest.raises(TypeError):
        make_batch([("a", "b")], {"a": 1})


@pytest.mark.parametrize(
    "bad, error",
    [(0.0, TypeError), (torch.tensor(0), TypeError), (torch.tensor([0, 1]), TypeError),
     (None, TypeError), (True, TypeError), (-1, ValueError)],
)
def test_batch_from_ids_refuses_a_bad_special_id(bad, error):
    # A float or tensor pad_id used to build a batch whose masks compare against it
    # silently; every special id must be an int token id, named in the error.
    from lib.train.data import batch_from_ids
    for name in ("pad_id", "bos_id", "eos_id"):
        ids = {"pad_id": 0, "bos_id": 1, "eos_id": 2, name: bad}
        with pytest.raises(error, match=name):
            batch_from_ids([[3, 4]], [[5]], **ids)


def test_batch_from_ids_refuses_empty_or_unequal_rows():
    from lib.train.data import batch_from_ids

    with pytest.raises(ValueError, match="src_rows and tgt_rows"):
        batch_from_ids([], [], 0, 1, 2)
    with pytest.raises(ValueError, match="src_rows and tgt_rows"):
        batch_from_ids([[3]], [[4], [5]], 0, 1, 2)
