"""Chapter 9's exercise checkers: a right answer passes, a stub is "not implemented",
and each named mistake, written out independently here, is recognised by name."""

import math

import pytest

import lib
from lib.teach.checking import NOT_IMPLEMENTED

# ---------------------------------------------------------------- self_attention_macs


def macs_solution(n, d_model):
    scores_and_sum = 2 * n * n * d_model  # S = Q K^T and alpha V
    projections = 4 * n * d_model * d_model  # W^Q, W^K, W^V, W^O
    return scores_and_sum + projections


def macs_stub(n, d_model):
    raise NotImplementedError  # your code here


def macs_no_projections(n, d_model):
    return n * d_model * n * 2


def macs_one_product(n, d_model):
    return n * n * d_model + 4 * n * d_model**2


def macs_no_output_projection(n, d_model):
    q = k = v = n * d_model * d_model
    return q + k + v + 2 * n * n * d_model


def macs_as_flops(n, d_model):
    return 2 * n * n * d_model * 2 + 8 * n * d_model**2


MACS_MISTAKES = [
    (macs_no_projections, "the projections are forgotten (only 2n²d)"),
    (macs_one_product, "only one of QKᵀ and αV is counted (n²d instead of 2n²d)"),
    (macs_no_output_projection, "W^O is forgotten (3nd² instead of 4nd²)"),
    (macs_as_flops, "FLOPs, not multiply-adds (twice the answer)"),
]


def test_macs_solution_passes():
    verdict = lib.check_self_attention_macs(macs_solution)
    assert verdict and verdict.mistake is None
    assert "✓" in str(verdict)


def test_macs_stub_is_not_implemented():
    verdict = lib.check_self_attention_macs(macs_stub)
    assert not verdict and NOT_IMPLEMENTED in str(verdict)


@pytest.mark.parametrize("wrong,name", MACS_MISTAKES, ids=[m[1] for m in MACS_MISTAKES])
def test_macs_mistakes_are_named(wrong, name):
    verdict = lib.check_self_attention_macs(wrong)
    assert not verdict
    assert verdict.mistake == name


def test_macs_other_errors_are_reported_not_named():
    verdict = lib.check_self_attention_macs(lambda n, d_model: 3 * n * d_model)
    assert not verdict and verdict.mistake is None and "differs" in str(verdict)


# -------------------------------------------------------------------- max_path_length


def path_solution(layer, n, k):
    if layer == "self-attention":
        return 1
    if layer == "recurrent":
        return n - 1
    if layer == "convolution":
        return math.ceil((n - 1) / (k - 1))
    if layer == "dilated":
        layers, seen = 0, 1
        while seen < n:
            layers, seen = layers + 1, seen * k
        return layers
    raise ValueError(layer)


def path_stub(layer, n, k):
    raise NotImplementedError  # your code here


def path_conv_like_recurrence(layer, n, k):
    if layer == "convolution":
        return n - 1
    return path_solution(layer, n, k)


def path_recurrent_off_by_one(layer, n, k):
    return n if layer == "recurrent" else path_solution(layer, n, k)


def path_conv_off_by_one(layer, n, k):
    if layer == "convolution":
        return math.ceil(n / (k - 1))
    return path_solution(layer, n, k)


def path_log_base_two(layer, n, k):
    if layer == "dilated":
        return math.ceil(math.log(n) / math.log(2))
    return path_solution(layer, n, k)


def path_float_log(layer, n, k):
    if layer == "dilated":
        return math.ceil(math.log(n) / math.log(k))
    return path_solution(layer, n, k)


def path_conv_floor(layer, n, k):
    if layer == "convolution":
        return math.floor((n - 1) / (k - 1))
    return path_solution(layer, n, k)


def path_dilated_strict(layer, n, k):
    if layer == "dilated":
        layers, seen = 0, 1
        while seen <= n:  # one layer too many when k**L == n
            layers, seen = layers + 1, seen * k
        return layers
    return path_solution(layer, n, k)


PATH_MISTAKES = [
    (path_conv_floor, "convolution: rounded down instead of up"),
    (path_dilated_strict, "dilated: k**L > n instead of k**L >= n"),
    (path_conv_like_recurrence, "a convolution stack counted like a recurrence (n - 1 layers)"),
    (path_recurrent_off_by_one, "recurrent: off by one (n steps instead of n - 1)"),
    (path_conv_off_by_one, "convolution: off by one (n / (k - 1) instead of (n - 1) / (k - 1))"),
    (path_log_base_two, "dilated: the logarithm in the wrong base"),
    (path_float_log, "dilated: a floating-point logarithm rounds the wrong way"),
]


def test_path_solution_passes():
    verdict = lib.check_max_path_length(path_solution)
    assert verdict and verdict.mistake is None


def test_path_stub_is_not_implemented():
    verdict = lib.check_max_path_length(path_stub)
    assert not verdict and NOT_IMPLEMENTED in str(verdict)


@pytest.mark.parametrize("wrong,name", PATH_MISTAKES, ids=[m[1] for m in PATH_MISTAKES])
def test_path_mistakes_are_named(wrong, name):
    verdict = lib.check_max_path_length(wrong)
    assert not verdict
    assert verdict.mistake == name


def test_path_reference_is_a_brute_force_that_agrees_with_the_formulas():
    """The checker's reference finds the answer by stacking real layers; the closed
    forms of Table 1 (with our exact counts) must agree with it on every case."""
    from lib.teach.checkers.complexity import _brute_force_path_length, _path_cases

    for case in _path_cases():
        assert _brute_force_path_length(*case.args) == path_solution(*case.args), case.label
