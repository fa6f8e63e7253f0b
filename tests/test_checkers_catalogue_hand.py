"""Wrong answers for the five hand checkers that had fewer than three in the tests
(issue 34, item 3): chapter 5's FFN row and big-FFN count and share, chapter 7's
LayerNorm row, chapter 8's peak step and chapter 4's previous-word features.

The right answers are worked by hand here (in the comments), not computed by `lib`.
Each wrong answer is one a learner could plausibly give; where the checker has a name
for the mistake, the verdict must carry it. NaN is never right.
"""

from __future__ import annotations

import math

import pytest
import torch

import lib
from test_checkers_heads import _hand_layer_output

# chapter 5's worked example: FFN(x) = max(0, x W1 + b1) W2 + b2
W1, B1 = [[1.0, 1.0], [0.0, 1.0]], [-1.0, 1.0]
W2, B2 = [[1.0, 0.0], [2.0, 1.0]], [1.0, -1.0]
# x = [2, -1]: x W1 = [2, 1]; + b1 = [1, 2]; ReLU keeps it; @ W2 = [5, 2]; + b2 = [6, 1]
FFN_RIGHT = [6.0, 1.0]
FFN_WRONG = {
    "b_2 left out": ([5.0, 2.0], "b_2 left out"),
    "b_1 left out": ([5.0, 0.0], "b_1 left out"),  # relu([2, 1]) W2 + b2
    "W_1 by its columns": ([1.0, -1.0], "W_1 applied as a column-vector matrix"),
    "own: W_2 by its columns": ([2.0, 3.0], None),  # [1, 2] W2^T + b2
    "own: b_2 subtracted": ([4.0, 3.0], None),
    "own: the two outputs swapped": ([1.0, 6.0], None),
    "own: x read as [-1, 2]": ([5.0, 1.0], None),
    "NaN": ([float("nan"), 1.0], None),
}


def test_ffn_row_right_and_wrong():
    assert lib.check_ffn_row(FFN_RIGHT, W1, B1, W2, B2)
    assert lib.check_ffn_row(torch.tensor(FFN_RIGHT, dtype=torch.float64), W1, B1, W2, B2)
    for name, (answer, slip) in FFN_WRONG.items():
        verdict = lib.check_ffn_row(answer, W1, B1, W2, B2)
        assert not verdict, name
        if slip is not None:
            assert verdict.slip == slip, (name, verdict.slip)


# LayerNorm of (2, 4, 6, 8), no gain, bias or epsilon: mean 5, variance (9 + 1 + 1 + 9) / 4 = 5,
# so (x - 5) / sqrt(5) = (-3, -1, 1, 3) / 2.2360680
LN_RIGHT = [-1.3416, -0.4472, 0.4472, 1.3416]
LN_WRONG = {
    "not divided": ([-3.0, -1.0, 1.0, 3.0], "not divided by the standard deviation"),
    "divided by the variance": ([-0.6, -0.2, 0.2, 0.6], "divided by the variance"),
    "unbiased": ([-1.1619, -0.3873, 0.3873, 1.1619], "the unbiased variance (n - 1)"),
    "own: not centred, divided by the std": ([0.8944, 1.7889, 2.6833, 3.5777], None),
    "own: RMSNorm (no centring)": ([0.3651, 0.7303, 1.0954, 1.4606], None),
    "own: min-max scaled": ([0.0, 1 / 3, 2 / 3, 1.0], None),
    "own: one decimal": ([-1.3, -0.4, 0.4, 1.3], None),
    "NaN": ([float("nan"), -0.4472, 0.4472, 1.3416], None),
}


def test_layer_norm_row_right_and_wrong():
    assert lib.check_layer_norm_row(LN_RIGHT)
    for name, (answer, slip) in LN_WRONG.items():
        verdict = lib.check_layer_norm_row(answer)
        assert not verdict, name
        if slip is not None:
            assert verdict.slip == slip, (name, verdict.slip)


# d_model 1024, d_ff 4096, 16 heads: FFN 2 * 1024 * 4096 + 4096 + 1024 = 8,393,728; attention
# 4 * 1024^2 + 4 * 1024 = 4,198,400; two LayerNorms 4,096; the layer 12,596,224; share 0.66637
BIG_COUNT, BIG_SHARE = 8_393_728, 8_393_728 / 12_596_224
COUNT_WRONG = {
    "biases left out": (8_388_608, "biases left out"),
    "one bias only": (8_392_704, "one bias only"),
    "own: one matrix": (4_199_424, None),
    "own: both biases of width d_model": (8_390_656, None),
    "own: in millions": (8.39, None),
}
SHARE_WRONG = {
    "FFN over attention": (8_393_728 / 4_198_400, "FFN over attention"),
    "a decoder layer": (0.5, "a decoder layer's share"),
    "own: attention's share": (4_198_400 / 12_596_224, None),
    "own: a percentage": (66.64, None),
    "own: FFN over the whole model's layers (6)": (BIG_SHARE / 6, None),
}


def test_big_ffn_right_and_wrong():
    count, share = lib.check_big_ffn(BIG_COUNT, round(BIG_SHARE, 4))
    assert count and share
    for name, (answer, slip) in COUNT_WRONG.items():
        verdict = lib.check_big_ffn(answer, BIG_SHARE)[0]
        assert not verdict, name
        if slip is not None:
            assert verdict.slip == slip, (name, verdict.slip)
    for name, (answer, slip) in SHARE_WRONG.items():
        verdict = lib.check_big_ffn(BIG_COUNT, answer)[1]
        assert not verdict, name
        if slip is not None:
            assert verdict.slip == slip, (name, verdict.slip)
    assert not lib.check_big_ffn(float("nan"), float("nan"))[0]


# warm-up 4000 -> 8000: the new peak is where the new warm-up ends, step 8000
@pytest.mark.parametrize("answer, slip", [
    (4000, "the old warm-up's end"),
    (6000, None),  # own: half-way between
    (16000, None),  # own: twice the new warm-up
    (round(8000 * math.sqrt(2)), None),  # own: the sqrt(2) of the peak's height put on the step
    (0, None),  # own: the schedule's start
    (float("nan"), None),
])
def test_peak_step_wrong(answer, slip):
    verdict = lib.check_peak_step(answer)
    assert not verdict
    if slip is not None:
        assert verdict.slip == slip
    assert lib.check_peak_step(8000)


# chapter 4's hand-built layer: head 0 at "mat" (position 5) passes on the previous word,
# "the" = e_0, so features 0-3 are [1, 0, 0, 0]
@pytest.mark.parametrize("answer, slip", [
    ([-1.0, 0.0, 0.0, 0.0], "the word of 'mat' itself"),
    ([0.0, 0.0, 0.0, 1.0], "the word two back, 'on'"),
    ([0.0, 1.0, 0.0, 0.0], None),  # own: the right size on the wrong feature
    ([0.5, 0.0, 0.0, 0.5], None),  # own: an average of the previous word and 'on'
    ([0.0, 0.0, 0.0, 0.0], None),  # own: head 0 passes nothing on
    ([1.0, 0.0, 0.0, 1.0], None),  # own: both words added
])
def test_previous_word_wrong(answer, slip):
    out = _hand_layer_output()
    verdict = lib.check_previous_word(answer, out)
    assert not verdict
    assert verdict.slip == slip
    assert lib.check_previous_word([1.0, 0.0, 0.0, 0.0], out)
