"""Chapter 5's exercise checkers: the solution passes, a stub is "not implemented yet",
and each named mistake, written out independently here, is recognised by name."""

from __future__ import annotations

import pytest
import torch

import lib
from lib.teach.checking import NOT_IMPLEMENTED


def stub(*args):
    raise NotImplementedError


# --- feed_forward(x, w1, b1, w2, b2) ---------------------------------------------


def feed_forward(x, w1, b1, w2, b2):
    hidden = torch.clamp(x @ w1 + b1, min=0)
    return hidden @ w2 + b2


def no_relu(x, w1, b1, w2, b2):
    return torch.matmul(torch.matmul(x, w1) + b1, w2) + b2


def relu_twice(x, w1, b1, w2, b2):
    out = feed_forward(x, w1, b1, w2, b2)
    return out.clamp(min=0)


def relu_before_bias(x, w1, b1, w2, b2):
    hidden = torch.nn.functional.relu(x @ w1)
    return (hidden + b1) @ w2 + b2


def no_output_bias(x, w1, b1, w2, b2):
    return torch.nn.functional.relu(x @ w1 + b1) @ w2


def test_feed_forward_solution_passes():
    verdict = lib.check_feed_forward(feed_forward)
    assert verdict and verdict.mistake is None, verdict.message


def test_feed_forward_with_nn_linear_passes():
    def with_functional_linear(x, w1, b1, w2, b2):
        hidden = torch.relu(torch.nn.functional.linear(x, w1.T, b1))
        return torch.nn.functional.linear(hidden, w2.T, b2)

    assert lib.check_feed_forward(with_functional_linear)


def test_feed_forward_stub_is_not_implemented():
    verdict = lib.check_feed_forward(stub)
    assert not verdict and NOT_IMPLEMENTED in verdict.message


@pytest.mark.parametrize(
    "wrong, name",
    [
        (no_relu, "no ReLU"),
        (relu_twice, "a ReLU after the second layer too"),
        (relu_before_bias, "the ReLU before the bias b1"),
        (no_output_bias, "the output bias b2 left out"),
    ],
)
def test_feed_forward_mistakes_are_named(wrong, name):
    verdict = lib.check_feed_forward(wrong)
    assert not verdict
    assert verdict.mistake == name, verdict.message
    assert name in verdict.message and "?" in verdict.message


def test_feed_forward_transposed_weights_raise_and_are_reported():
    verdict = lib.check_feed_forward(lambda x, w1, b1, w2, b2: torch.relu(x @ w1.T + b1) @ w2.T + b2)
    assert not verdict and "raised RuntimeError" in verdict.message


def test_feed_forward_unrecognised_bug_gets_a_location():
    verdict = lib.check_feed_forward(lambda x, w1, b1, w2, b2: 2 * feed_forward(x, w1, b1, w2, b2))
    assert not verdict and verdict.mistake is None and "largest difference" in verdict.message


# --- ffn_parameter_count(d_model, d_ff) -------------------------------------------


def ffn_parameter_count(d_model, d_ff):
    return d_model * d_ff + d_ff + d_ff * d_model + d_model


def no_biases(d_model, d_ff):
    return d_model * d_ff * 2


def one_layer(d_model, d_ff):
    return (d_model + 1) * d_ff


def paper_ratio(d_model, d_ff):
    hidden = 4 * d_model
    return (d_model + 1) * hidden + (hidden + 1) * d_model


def both_biases_d_ff(d_model, d_ff):
    return (d_model + 1) * d_ff * 2


def test_parameter_count_solution_passes():
    assert lib.check_ffn_parameter_count(ffn_parameter_count)


def test_parameter_count_accepts_a_counted_module():
    def counted(d_model, d_ff):
        return sum(p.numel() for p in lib.PositionwiseFeedForward(d_model, d_ff).parameters())

    assert lib.check_ffn_parameter_count(counted)


def test_parameter_count_off_by_one_only_at_the_paper_size_fails():
    # 2 * 512 * 2048 + 2048 + 512 = 2,099,712; 2,099,713 is within a relative 1e-6 of it
    def off_by_one(d_model, d_ff):
        return ffn_parameter_count(d_model, d_ff) + (d_model == 512 and d_ff == 2048)

    assert ffn_parameter_count(512, 2048) == 2_099_712
    verdict = lib.check_ffn_parameter_count(off_by_one)
    assert not verdict and "returned 2099713; expected 2099712" in verdict.message


def test_parameter_count_stub_is_not_implemented():
    verdict = lib.check_ffn_parameter_count(stub)
    assert not verdict and NOT_IMPLEMENTED in verdict.message


@pytest.mark.parametrize(
    "wrong, name",
    [
        (no_biases, "the biases left out"),
        (one_layer, "only one of the two layers counted"),
        (paper_ratio, "d_ff taken as 4 d_model instead of the argument"),
        (both_biases_d_ff, "both biases given width d_ff"),
    ],
)
def test_parameter_count_mistakes_are_named(wrong, name):
    verdict = lib.check_ffn_parameter_count(wrong)
    assert not verdict
    assert verdict.mistake == name, verdict.message


def test_parameter_count_accepts_a_numpy_integer():
    """np.int64 is an integer: a count computed with numpy is right (it failed before, with
    a message showing two equal numbers)."""
    np = pytest.importorskip("numpy")

    def with_numpy(d_model, d_ff):
        return np.int64(2) * np.int64(d_model) * np.int64(d_ff) + np.int64(d_ff + d_model)

    verdict = lib.check_ffn_parameter_count(with_numpy)
    assert verdict and verdict.mistake is None, verdict.message


def test_parameter_count_wrapper_keeps_the_exercise_name():
    def off_by_one(d_model, d_ff):
        return ffn_parameter_count(d_model, d_ff) + 1

    verdict = lib.check_ffn_parameter_count(off_by_one)
    assert not verdict and "ffn_parameter_count" in verdict.message
    assert "off_by_one" not in verdict.message


def test_feed_forward_wrong_float_dtype_is_named():
    from lib.teach.checkers._dtypes import WRONG_DTYPE

    def as_float32(x, w1, b1, w2, b2):
        return (torch.relu(x @ w1 + b1) @ w2 + b2).float()

    verdict = lib.check_feed_forward(as_float32)
    assert not verdict and verdict.mistake == WRONG_DTYPE and "float64" in verdict.message


def test_checkers_leave_the_global_random_state_alone():
    """A chapter's later random draws must not depend on whether the reader ran a checker."""
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    lib.check_feed_forward(feed_forward)
    lib.check_ffn_parameter_count(ffn_parameter_count)
    torch.testing.assert_close(torch.rand(3), expected)
