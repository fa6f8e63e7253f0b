"""Chapter 4's exercise checkers: a right solution passes, a stub is "not implemented yet",
and every named mistake, written out independently here, is recognised by name."""

import math

import pytest
import torch

import lib
from lib.teach.checking import NOT_IMPLEMENTED


# split_heads --------------------------------------------------------------------------


def split_right(x, n_heads):
    B, n, d_model = x.shape
    return x.view(B, n, n_heads, d_model // n_heads).transpose(1, 2)


def split_no_transpose(x, n_heads):
    B, n, d_model = x.shape
    return x.view(B, n, n_heads, d_model // n_heads)


def split_straight_view(x, n_heads):
    B, n, d_model = x.shape
    return x.view(B, n_heads, n, d_model // n_heads)


def split_dims_swapped(x, n_heads):
    B, n, d_model = x.shape
    return x.view(B, n, d_model // n_heads, n_heads).transpose(2, 3).transpose(1, 2)


def split_stub(x, n_heads):
    raise NotImplementedError


def test_split_heads_right_passes():
    verdict = lib.check_split_heads(split_right)
    assert verdict and verdict.mistake is None, verdict.message


def test_split_heads_head_i_owns_a_block_of_features():
    x = torch.arange(2 * 3 * 8, dtype=torch.float64).view(2, 3, 8)
    heads = split_right(x, 4)  # d_k = 2
    assert heads.shape == (2, 4, 3, 2)
    assert torch.equal(heads[1, 2, 0], x[1, 0, 4:6])  # batch 1, head 2, position 0


def test_split_heads_stub():
    verdict = lib.check_split_heads(split_stub)
    assert not verdict and NOT_IMPLEMENTED in verdict.message


@pytest.mark.parametrize(
    "fn, mistake",
    [
        (split_no_transpose, "heads not moved next to the batch"),
        (split_straight_view, "reshaped straight to (B, h, n, d_k)"),
        (split_dims_swapped, "(h, d_k) in the wrong order"),
    ],
)
def test_split_heads_mistakes_named(fn, mistake):
    verdict = lib.check_split_heads(fn)
    assert not verdict and verdict.mistake == mistake, verdict.message


# multi_head_attention -----------------------------------------------------------------


def mha_generic(x_q, x_k, x_v, w_q, w_k, w_v, w_o, n_heads, mask=None, scale_by=None,
                keep=lambda m: m, transpose_back=True, with_w_o=True, divisor=None,
                softmax_dim=-1, fill=-math.inf, use_mask=True, add_mask=False,
                linear_habit=False):
    B, m, d_model = x_q.shape
    n, d_k = x_k.shape[1], d_model // n_heads
    if linear_habit:  # nn.Linear computes x W^T
        w_q, w_k, w_v, w_o = (w.t() for w in (w_q, w_k, w_v, w_o))
    q = (x_q @ w_q).view(B, m, n_heads, d_k).transpose(1, 2)
    k = (x_k @ w_k).view(B, n, n_heads, d_k).transpose(1, 2)
    v = (x_v @ w_v).view(B, n, n_heads, d_k).transpose(1, 2)
    scores = q @ k.transpose(-2, -1)
    scores = scores / (divisor if divisor is not None else math.sqrt(scale_by or d_k))
    if mask is not None and use_mask:
        if add_mask:
            scores = scores + mask.float().to(scores.dtype)
        else:
            scores = torch.where(keep(mask), scores, torch.full_like(scores, fill))
    heads = torch.softmax(scores, dim=softmax_dim) @ v
    if transpose_back:
        heads = heads.transpose(1, 2)
    concat = heads.contiguous().view(B, m, d_model)
    return concat @ w_o if with_w_o else concat


def mha_right(*args, mask=None):
    return mha_generic(*args, mask=mask)


def mha_right_1e9_fill(*args, mask=None):
    """A finite fill is fine while no query row is fully masked (none is here)."""
    return mha_generic(*args, mask=mask, fill=-1e9)


def mha_sqrt_d_model(*args, mask=None):
    return mha_generic(*args, mask=mask, scale_by=args[0].shape[-1])


def mha_unscaled(*args, mask=None):
    return mha_generic(*args, mask=mask, divisor=1.0)


def mha_divided_by_d_k(*args, mask=None):
    return mha_generic(*args, mask=mask, divisor=args[0].shape[-1] / args[7])


def mha_softmax_over_queries(*args, mask=None):
    return mha_generic(*args, mask=mask, softmax_dim=2)


def mha_mask_ignored(*args, mask=None):
    return mha_generic(*args, mask=mask, use_mask=False)


def mha_mask_inverted_1e9(*args, mask=None):
    return mha_generic(*args, mask=mask, keep=lambda m: ~m, fill=-1e9)


def mha_mask_added(*args, mask=None):
    return mha_generic(*args, mask=mask, add_mask=True)


def mha_linear_habit(*args, mask=None):
    return mha_generic(*args, mask=mask, linear_habit=True)


def mha_no_w_o(*args, mask=None):
    return mha_generic(*args, mask=mask, with_w_o=False)


def mha_no_transpose_back(*args, mask=None):
    return mha_generic(*args, mask=mask, transpose_back=False)


def mha_mask_inverted(*args, mask=None):
    return mha_generic(*args, mask=mask, keep=lambda m: ~m)


def mha_stub(*args, mask=None):
    raise NotImplementedError


@pytest.mark.parametrize("fn", [mha_right, mha_right_1e9_fill])
def test_multi_head_attention_right_passes(fn):
    verdict = lib.check_multi_head_attention(fn)
    assert verdict and verdict.mistake is None, verdict.message


def test_multi_head_attention_cases_separate_dtypes_and_masks():
    """float32 and float64; no mask, a causal (m, n) mask and a padding (B, 1, 1, n) mask."""
    from lib.teach.checkers.heads import _mha_cases

    cases = _mha_cases()
    assert {c.args[0].dtype for c in cases} == {torch.float32, torch.float64}
    masks = [c.kwargs["mask"] for c in cases]
    assert any(m is None for m in masks)
    assert any(m is not None and m.dim() == 2 for m in masks)
    padded = [m for m in masks if m is not None and m.dim() == 4]
    assert padded and all(m.dtype == torch.bool and not m.all() for m in padded)
    assert any(c.args[0].shape[1] != c.args[1].shape[1] for c in cases)  # m != n


def test_multi_head_attention_stub():
    verdict = lib.check_multi_head_attention(mha_stub)
    assert not verdict and NOT_IMPLEMENTED in verdict.message


@pytest.mark.parametrize(
    "fn, mistake",
    [
        (mha_sqrt_d_model, "scaled by √d_model instead of √d_k"),
        (mha_no_w_o, "W^O left out"),
        (mha_no_transpose_back, "heads concatenated without transposing back"),
        (mha_mask_inverted, "mask read the wrong way round"),
        (mha_unscaled, "no 1/√d_k scaling"),
        (mha_divided_by_d_k, "divided by d_k instead of √d_k"),
        (mha_softmax_over_queries, "softmax over the wrong axis"),
        (mha_mask_ignored, "mask not passed on"),
        (mha_mask_inverted_1e9, "mask read the wrong way round (with a -1e9 fill)"),
        (mha_mask_added, "the 0/1 mask added to the scores"),
        (mha_linear_habit, "weights used as x @ W.T"),
    ],
)
def test_multi_head_attention_mistakes_named(fn, mistake):
    verdict = lib.check_multi_head_attention(fn)
    assert not verdict and verdict.mistake == mistake, verdict.message


def test_multi_head_attention_reference_is_lib_module():
    """The checker's reference computes what lib.MultiHeadAttention computes."""
    torch.manual_seed(0)
    mha = lib.MultiHeadAttention(12, 3, bias=False).double().eval()
    x = torch.randn(2, 5, 12, dtype=torch.float64)
    mask = lib.causal_mask(5)
    ws = [layer.weight.T for layer in (mha.w_q, mha.w_k, mha.w_v, mha.w_o)]
    with torch.no_grad():
        torch.testing.assert_close(mha(x, x, x, mask=mask), mha_right(x, x, x, *ws, 3, mask=mask))


def test_multi_head_attention_nan_answer_is_reported_as_nan():
    """Review U3: an all-NaN answer was reported as 'largest difference 3.4e+38'."""
    def all_nan(*args, mask=None):
        return torch.full_like(mha_right(*args, mask=mask), float("nan"))

    verdict = lib.check_multi_head_attention(all_nan)
    assert not verdict and "NaN" in verdict.message and "3.4e+38" not in verdict.message


def test_wrong_float_dtype_is_named():
    """The checker core casts float results before comparing: a float64 result for float32
    input passed before."""
    from lib.teach.checkers._dtypes import WRONG_DTYPE

    verdict = lib.check_split_heads(lambda x, h: split_right(x, h).double())
    assert not verdict and verdict.mistake == WRONG_DTYPE and "float32" in verdict.message
    verdict = lib.check_multi_head_attention(lambda *a, mask=None: mha_right(*a, mask=mask).float())
    assert not verdict and verdict.mistake == WRONG_DTYPE and "float64" in verdict.message


# On paper: numbers, checked against torch's own layer and FlopCounterMode ----------------


def _torch_mha_params(d_model, n_heads):
    layer = torch.nn.MultiheadAttention(d_model, n_heads)  # W_q, W_k, W_v, W_o with biases
    return sum(p.numel() for p in layer.parameters())


def test_mha_parameters_checker():
    d = 768
    full = _torch_mha_params(d, 12)
    assert full == _torch_mha_params(d, 1) == 2_362_368
    assert lib.check_mha_parameters(full, 768, 12) and lib.check_mha_parameters(full, 768, 1)
    no_bias = sum(p.numel() for p in torch.nn.MultiheadAttention(d, 12, bias=False).parameters())
    proj = torch.nn.Linear(d, d)
    one = sum(p.numel() for p in proj.parameters())  # d^2 + d
    slips = {
        "biases left out": no_bias,
        "W^O left out": 3 * one,
        "W^O and the biases left out": 3 * proj.weight.numel(),
        "a full d_model × d_model W^Q, W^K, W^V per head": 12 * 3 * one + one,
        "one head's share": full / 12,
    }
    for name, value in slips.items():
        verdict = lib.check_mha_parameters(value, 768, 12)
        assert not verdict and verdict.slip == name, (name, verdict.message)
    scaled = lib.check_mha_parameters(full / 12, 768, 1, compared_with=12)
    assert not scaled and scaled.slip == "the count scaled with the number of heads"
    # with h = 1 the per-head slips are the right answer, so they are not named
    assert lib.check_mha_parameters(full / 12, 768, 1).slip is None
    assert not lib.check_mha_parameters(full + 1, 768, 12)
    assert lib.check_mha_parameters(full + 1, 768, 12).slip is None
    assert not lib.check_mha_parameters(float("nan"))
    with pytest.raises(ValueError, match="divisible"):
        lib.check_mha_parameters(full, 768, 5)


def _counted_flops(n, d_model, n_heads):
    from torch.utils.flop_counter import FlopCounterMode

    layer = torch.nn.MultiheadAttention(d_model, n_heads, bias=False, batch_first=True)
    x = torch.randn(1, n, d_model)
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        layer(x, x, x, need_weights=True)  # the plain path: every product is counted
    return counter.get_total_flops()


def test_attention_flops_checker():
    exact = _counted_flops(100, 512, 8)
    assert exact == 230_195_200
    assert lib.check_attention_flops(exact, 100, 512, 8)
    proj, mix = 4 * 2 * 100 * 512 * 512, 2 * 2 * 100 * 100 * 512  # 2 ops per multiply-add
    slips = {
        "multiply-adds, not operations": exact / 2,
        "the projections only": proj,
        "QKᵀ and αV only": mix,
        "W^O left out": proj * 3 / 4 + mix,
        "QKᵀ and αV of one head only": proj + mix / 8,
    }
    for name, value in slips.items():
        verdict = lib.check_attention_flops(value, 100, 512, 8)
        assert not verdict and verdict.slip == name, (name, verdict.message)
    assert lib.check_attention_flops(exact + 100, 100, 512, 8).slip is None
    assert not lib.check_attention_flops(float("nan"))


def test_flops_crossover_checker():
    d = 512
    # brute force: the first n where the n^2 term is at least the projections' term
    crossover = next(n for n in range(1, 10 * d) if 4 * n * n * d >= 8 * n * d * d)
    assert crossover == 1024
    assert lib.check_flops_crossover(crossover, d) and lib.check_flops_crossover(1025, d)
    assert lib.check_flops_crossover(512, d).slip == "n = d_model: the factors 8 and 4 dropped"
    assert lib.check_flops_crossover(256, d).slip == "8 and 4 swapped"
    wrong = lib.check_flops_crossover(2048, d)
    assert not wrong and wrong.slip is None
    assert not lib.check_flops_crossover(float("nan"), d)


def _hand_layer_output():
    """The chapter's hand-built layer on "the cat sat on the mat", in plain torch."""
    words = {"the": [1, 0, 0, 0], "cat": [0, 1, 0, 0], "sat": [0, 0, 1, 0], "on": [0, 0, 0, 1],
             "mat": [-1, 0, 0, 0]}
    t = math.pi / 4
    x = torch.tensor([words[w] + [math.cos(i * t), math.sin(i * t), 0, 0]
                      for i, w in enumerate(["the", "cat", "sat", "on", "the", "mat"])],
                     dtype=torch.float64)
    pos, word = x[:, 4:6], x[:, :4]
    back = torch.tensor([[math.cos(t), -math.sin(t)], [math.sin(t), math.cos(t)]],
                        dtype=torch.float64)
    q0, k0 = 6 * pos @ back, 6 * pos  # head 0: the position rotated one step back
    head0 = torch.softmax(q0 @ k0.T / 2, -1) @ x[:, 0:4]
    head1 = torch.softmax((6 * word) @ (6 * word).T / 2, -1) @ x[:, 4:8]
    return torch.cat([head0, head1], -1)[None]


def test_hand_layer_checkers():
    out = _hand_layer_output()
    assert torch.allclose(out[0, 5, :4], torch.tensor([1.0, 0, 0, 0], dtype=torch.float64),
                          atol=0.03)
    assert lib.check_previous_word([1, 0, 0, 0], out)
    assert lib.check_previous_word(torch.tensor([0.99, 0.0, 0.0, 0.0]), out)
    assert lib.check_previous_word([-1, 0, 0, 0], out).slip == "the word of 'mat' itself"
    assert lib.check_previous_word([0, 0, 0, 1], out).slip == "the word two back, 'on'"
    assert lib.check_previous_word([0, 1, 0, 0], out).slip is None
    assert not lib.check_previous_word([float("nan"), 0, 0, 0], out)
    assert lib.check_same_word_position([0, 0], out)
    assert lib.check_same_word_position([-1, 0], out).slip == "its own position only"
    assert lib.check_same_word_position([1, 0], out).slip == "the first 'the''s position only"
    assert not lib.check_same_word_position([0, 1], out)
    assert not lib.check_same_word_position([float("nan"), 0], out)
    with pytest.raises(ValueError, match="my_position"):
        lib.check_same_word_position([0, 0, 0], out)
    with pytest.raises(TypeError, match="output"):
        lib.check_same_word_position([0, 0], out[0])


@pytest.mark.parametrize("call, name", [
    (lambda v: lib.check_mha_parameters(v), "my_count"),
    (lambda v: lib.check_attention_flops(v), "my_flops"),
    (lambda v: lib.check_flops_crossover(v), "my_n"),
    (lambda v: lib.check_previous_word(v, _hand_layer_output()), "my_features"),
    (lambda v: lib.check_same_word_position(v, _hand_layer_output()), "my_position"),
])
@pytest.mark.parametrize("bad", ["1024", True, {"n": 1}])  # None: not answered
def test_heads_number_checkers_refuse_what_is_not_a_number(call, name, bad):
    with pytest.raises(TypeError, match=name):
        call(bad)
