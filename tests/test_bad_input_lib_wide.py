"""Issue 34 item 6: bad input to `lib` gets a ValueError/TypeError naming the argument.

Each test fails on the code before the fix: an unknown device string used to reach
PyTorch (RuntimeError "Expected one of cpu, cuda, ..."), a huge int reached float()
(OverflowError), and a negative row or position in `cross_attention_ablation`
silently wrapped to the last one.
"""

import pytest
import torch

import lib
from lib import DATE_VOCAB
from lib.train.data import batch_from_ids

BAD_DEVICE = "gpu"


def _device_calls():
    pairs = [("2019-3-7", "March 7, 2019")]
    calls = {
        "causal_mask": lambda: lib.causal_mask(3, device=BAD_DEVICE),
        "make_batch": lambda: lib.make_batch(pairs, DATE_VOCAB, device=BAD_DEVICE),
        "batch_from_ids": lambda: batch_from_ids([[4, 5]], [[6]], 0, 1, 2, device=BAD_DEVICE),
        "Batch.to": lambda: lib.make_batch(pairs, DATE_VOCAB).to(BAD_DEVICE),
        "LMBatch.to": lambda: lib.LMBatch(torch.zeros(2, 5, dtype=torch.long)).to(BAD_DEVICE),
        "MaskedLMBatch.to": lambda: lib.MaskedLMBatch(
            torch.zeros(2, 5, dtype=torch.long), torch.full((2, 5), -100)).to(BAD_DEVICE),
    }
    # checked first: the empty batch would be refused too, but the device is named
    calls["make_translation_batch"] = lambda: lib.make_translation_batch([], device=BAD_DEVICE)
    # chapter 17's mask and the GGUF loaders (a path that does not exist: the device is
    # named before the file is opened)
    calls["offset_causal_mask"] = lambda: lib.offset_causal_mask(2, 3, device=BAD_DEVICE)
    calls["load_llama_gguf"] = lambda: lib.interop.llama_gguf.load_llama_gguf(
        "no-such-file.gguf", device=BAD_DEVICE)
    calls["load_smollm2"] = lambda: lib.interop.llama_gguf.load_smollm2(device=BAD_DEVICE)
    return calls


@pytest.mark.parametrize("call", list(_device_calls()))
def test_an_unknown_device_string_is_a_value_error_naming_device(call):
    with pytest.raises(ValueError, match=r"device must name a device such as 'cpu'"):
        _device_calls()[call]()


def test_a_device_of_the_wrong_type_is_a_type_error():
    with pytest.raises(TypeError, match="device must be a str or a torch.device"):
        lib.causal_mask(3, device=0.5)
    assert lib.causal_mask(2, device="cpu").tolist() == [[True, False], [True, True]]


HUGE = 10**400  # float(HUGE) raises OverflowError


@pytest.mark.parametrize("call, words", [
    (lambda: lib.retrieval_run(4, True, 0, steps=2, lr=HUGE), "lr must be a finite number"),
    (lambda: lib.check_score_variance(HUGE), "my_variance must be a number a float can hold"),
    (lambda: lib.check_score_divisor(4.0, sigma2=HUGE), "sigma2 must be a number a float can hold"),
    (lambda: lib.check_answer(HUGE, 1.0), "answer holds a number too large"),
    (lambda: lib.check_answer([1, HUGE], [1.0, 2.0]), "answer holds a number too large"),
    (lambda: lib.check_attention([[0.0, 0.0]], [[1.0, 0.0]], [[1.0, 1.0]], [[HUGE, 0]]),
     "answer holds a number too large"),
])
def test_a_huge_int_is_a_value_error_not_an_overflow(call, words):
    with pytest.raises(ValueError, match=words):
        call()


def _date_model():
    torch.manual_seed(0)
    return lib.TransformerConfig(
        src_vocab_size=len(DATE_VOCAB), tgt_vocab_size=len(DATE_VOCAB), d_model=16, n_heads=2, n_layers=1,
        d_ff=32, dropout=0.0, max_len=32).build()


@pytest.mark.parametrize("rows, hide, name", [
    (lambda s, t: [-1], lambda s: (), "rows"),
    (lambda s, t: [len(t) + 1], lambda s: (), "rows"),
    (lambda s, t: [0], lambda s: [-1], "hide"),
    (lambda s, t: [0], lambda s: [len(s)], "hide"),
])
def test_cross_attention_ablation_refuses_indices_that_would_wrap_or_overflow(rows, hide, name):
    with pytest.raises(ValueError, match=rf"{name}\(\) gave index"):
        lib.cross_attention_ablation(_date_model(), [("2019-3-7", "March 7, 2019")], DATE_VOCAB,
                                     rows=rows, hide=hide)


def test_cross_attention_ablation_takes_numpy_and_tensor_indices():
    np = pytest.importorskip("numpy")
    model = _date_model()
    pairs = [("2019-3-7", "March 7, 2019")]
    a = lib.cross_attention_ablation(model, pairs, DATE_VOCAB, rows=lambda s, t: [np.int64(0)],
                                     hide=lambda s: [torch.tensor(1)])
    b = lib.cross_attention_ablation(model, pairs, DATE_VOCAB, rows=lambda s, t: [0], hide=lambda s: [1])
    assert a == b
    with pytest.raises(TypeError, match=r"rows\(\) must give int indices"):
        lib.cross_attention_ablation(model, pairs, DATE_VOCAB, rows=lambda s, t: [0.0])


@pytest.mark.parametrize("call, error, words", [
    (lambda: lib.additive_score(torch.randn(3), torch.randn(4, 5, dtype=torch.float64),
                                torch.randn(6, 3), torch.randn(6, 5), torch.randn(6)),
     TypeError, "s and h must have the same dtype"),
    (lambda: lib.multiplicative_score(torch.randn(3), torch.randn(4, 3), torch.randn(3, 3).double()),
     TypeError, "s and w must have the same dtype"),
    (lambda: lib.attend(torch.randn(4), torch.randn(4, 2, dtype=torch.float64)),
     TypeError, "scores and h must have the same dtype"),
    (lambda: lib.attend(torch.randn(3, 4), torch.randn(2, 4, 5)), ValueError, "do not broadcast"),
])
def test_chapter_1_scores_refuse_mixed_dtypes_and_batches(call, error, words):
    # reviewer A's P6: these reached torch ("expected m1 and m2 to have the same dtype")
    with pytest.raises(error, match=words):
        call()


@pytest.mark.parametrize("cached", [False, True])
def test_decoder_only_model_refuses_empty_tokens_on_both_paths(cached):
    # review C, W1: the cached path returned (1, 0, |V|) logits for a (1, 0) input, the
    # uncached one raised "size must be positive, got 0", which names neither tokens nor the problem
    torch.manual_seed(0)
    model = lib.DecoderOnlyModel(11, d_model=8, n_heads=2, n_layers=2, d_ff=16, max_len=8).eval()
    empty = torch.zeros(1, 0, dtype=torch.long)
    kwargs = {}
    if cached:
        cache = lib.KVCache(len(model.layers))
        with torch.no_grad():
            model(torch.tensor([[1, 2, 3]]), cache=cache)
        kwargs["cache"] = cache
    with pytest.raises(ValueError, match="tokens: an empty sequence"):
        model(empty, **kwargs)
    if cached:
        assert cache.length == 3  # refused before the cache was touched
