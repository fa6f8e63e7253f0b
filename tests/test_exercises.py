"""Tests of lib/teach/exercises.py: chapter 3's answer checkers and the comparison table.

Expected values are worked by hand here (softmax of two or four scores), not
taken from the code under test.
"""

import math

import pytest
import torch

from lib import check_answer, check_attention, check_attention_weights, compare_table, text_table

# q k^T / sqrt(4) = [1, 0]: weights e/(e+1) and 1/(e+1); v = identity, so the output is the weights.
Q = [[2.0, 0.0, 0.0, 0.0]]
K = [[1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]]
V = [[1.0, 0.0], [0.0, 1.0]]
E = math.e / (math.e + 1)


def test_right_answer_accepted():
    result = check_attention(Q, K, V, [[E, 1 - E]])
    assert result.correct and bool(result)
    assert result.message.startswith("Right")
    assert result.wrong_entries == ()


def test_two_decimal_answer_accepted_within_atol():
    assert check_attention(Q, K, V, [[0.73, 0.27]]).correct
    assert not check_attention(Q, K, V, [[0.73, 0.27]], atol=1e-3).correct


def test_wrong_answer_rejected_and_entry_named():
    # the second entry forgets that the weights sum to one
    result = check_attention(Q, K, V, [[E, 0.5]])
    assert not result.correct and not bool(result)
    assert result.wrong_entries == ((0, 1),)
    assert "Wrong" in result.message and "entry 1 (0-based)" in result.message
    assert f"{1 - E:.4f}" not in result.message  # practice mode: the exact value stays hidden
    assert "0.5000" in result.message  # the learner's own value is quoted


def test_reveal_gives_the_exact_value():
    result = check_attention(Q, K, V, [[E, 0.5]], reveal=True)
    assert not result.correct and f"{1 - E:.4f}" in result.message
    weights = check_attention_weights(Q, K, [[E, 0.5]], reveal=True)
    assert f"{1 - E:.4f}" in weights.message
    assert f"{1 - E:.4f}" not in check_attention_weights(Q, K, [[E, 0.5]]).message


def test_forgetting_the_scale_is_caught():
    # without 1/sqrt(d_k) the scores are [2, 0]
    unscaled = math.exp(2) / (math.exp(2) + 1)
    result = check_attention(Q, K, V, [[unscaled, 1 - unscaled]])
    assert not result.correct
    assert result.wrong_entries == ((0, 0), (0, 1))


def test_uniform_example_exact():
    # equal scores: the output is the mean of the value rows, (2+4+6+8)/4 = 5 (chapter 3, Example 3)
    q = torch.ones(1, 4)
    k = torch.eye(4)
    v = torch.tensor([[2.0], [4.0], [6.0], [8.0]])
    assert check_attention(q, k, v, [[5.0]], atol=1e-9).correct
    assert not check_attention(q, k, v, [[5.1]]).correct


def test_weights_checker():
    assert check_attention_weights(Q, K, [[E, 1 - E]]).correct
    result = check_attention_weights(Q, K, [[0.5, 0.5]])
    assert not result.correct and result.wrong_entries == ((0, 0), (0, 1))


@pytest.mark.parametrize(
    "answer",
    [[[E, 1 - E, 0.0]], [[E], [1 - E]], [[[E, 1 - E]]]],
    ids=["too many columns", "transposed", "three dimensions"],
)
def test_bad_answer_shape_raises(answer):
    with pytest.raises(ValueError, match="shape"):
        check_attention(Q, K, V, answer)


def test_bad_qkv_shapes_raise():
    with pytest.raises(ValueError, match="d_k"):
        check_attention([[1.0, 0.0]], K, V, [[0.5, 0.5]])
    with pytest.raises(ValueError, match="same number of positions"):
        check_attention(Q, K, [[1.0, 0.0]], [[0.5]])
    with pytest.raises(ValueError, match="must have shape"):
        check_attention_weights(Q, K, [[0.5, 0.5, 0.0]])


def test_non_numeric_answer_raises_type_error():
    with pytest.raises(TypeError):
        check_attention(Q, K, V, "0.73, 0.27")


def test_compare_table_flags_rounding_errors():
    table = compare_table([[0.80, 0.75]], [[0.7967, 0.7448]])
    lines = table.splitlines()
    assert lines[2].endswith("rounds right")  # 0.7967 rounds to 0.80
    assert lines[3].endswith("OFF")  # 0.7448 rounds to 0.74, not 0.75
    assert "+0.0052" in lines[3]
    with pytest.raises(ValueError):
        compare_table([[1.0]], [[1.0, 2.0]])


def test_text_table_aligns_columns():
    lines = text_table(["a", "long"], [[1, 2], [333, 4]]).splitlines()
    assert len({len(line) for line in lines}) == 1
    with pytest.raises(ValueError):
        text_table(["a"], [[1, 2]])


def test_attention_steps_by_the_formula():
    # chapter 3, Example 1, row 2: scaled scores [sqrt 2, 1/sqrt 2, 1/sqrt 2]
    from lib import attention_steps

    steps = attention_steps([[1, 0], [0, 1], [1, 1]], [[1, 1], [0, 1], [1, 0]], [[0, 2], [1, 1], [2, 0]])
    assert steps.scores.tolist() == [[1, 0, 1], [1, 1, 0], [2, 1, 1]]
    big, small = math.exp(math.sqrt(2)), math.exp(1 / math.sqrt(2))
    w = [big / (big + 2 * small), small / (big + 2 * small)]
    assert steps.weights[2].tolist() == pytest.approx([w[0], w[1], w[1]], abs=1e-12)
    assert steps.output[2].tolist() == pytest.approx([w[1] + 2 * w[1], 2 * w[0] + w[1]], abs=1e-12)
    with pytest.raises(ValueError):
        attention_steps([[1, 0]], [[1, 0, 0]], [[1]])


# --- NaN and the named slips (review of 2026-11-24) --------------------------------------

# A hand example with d_k = 2: scores [[4, 0, 4], [5, 2, 6], [3, 2, 4]] (chapter 3's Example 1).
Q1 = [[2.0, 0.0], [2.0, 1.0], [1.0, 1.0]]
K1 = [[2.0, 1.0], [0.0, 2.0], [2.0, 2.0]]
V1 = [[0.0, 2.0], [1.0, 1.0], [2.0, 0.0]]
S1 = torch.tensor([[4.0, 0.0, 4.0], [5.0, 2.0, 6.0], [3.0, 2.0, 4.0]], dtype=torch.float64)  # by hand


def test_nan_answer_is_never_right():
    nan = float("nan")
    result = check_attention(Q1, K1, V1, [[nan, nan]] * 3)
    assert not result and len(result.wrong_entries) == 6 and "NaN" in result.message
    assert not check_attention_weights(Q1, K1, [[nan] * 3] * 3)
    assert not check_answer([[1.0, nan]], [[1.0, 2.0]])


@pytest.mark.parametrize(
    "weights, slip",
    [
        (torch.softmax(S1, dim=1), "no √d_k scaling"),
        (torch.softmax(S1 / 2, dim=1), "divided by d_k instead of √d_k"),
        (torch.softmax(S1 / math.sqrt(2), dim=0), "softmax down each column instead of along each row"),
    ],
)
def test_weight_slips_are_named(weights, slip):
    result = check_attention_weights(Q1, K1, weights.round(decimals=2))
    assert not result and result.slip == slip and slip in result.message
    out = check_attention(Q1, K1, V1, (weights @ torch.tensor(V1, dtype=torch.float64)).round(decimals=2))
    assert not out and out.slip == slip


def test_rounding_early_is_named():
    # row 2: exact weights 0.2840, 0.1397, 0.5763 -> [1.2923, 0.7077]; rounded first: [1.30, 0.70]
    result = check_attention(Q1[2:], K1, V1, [[1.30, 0.70]], atol=0.005)
    assert not result and result.slip == "weights rounded to two decimals before the last step"
    assert check_attention(Q1[2:], K1, V1, [[1.29, 0.71]], atol=0.005)


def test_check_answer():
    assert check_answer([2.379, 4.244], [[2.3790, 4.2438]])
    result = check_answer([[2.38, 4.30]], [[2.3790, 4.2438]])
    assert not result and result.wrong_entries == ((0, 1),) and "4.2438" not in result.message
    assert "4.2438" in check_answer([[2.38, 4.30]], [[2.3790, 4.2438]], reveal=True).message
    with pytest.raises(ValueError, match="shape"):
        check_answer([1.0, 2.0, 3.0], [[1.0, 2.0]])
    # a single number, as a float or a 0-d tensor
    assert check_answer(0.11, torch.tensor(0.1084), atol=0.03)
    assert not check_answer(0.33, torch.tensor(0.1084), atol=0.03)


# --- how a wrong entry is named (review of 2026-11-28, P3) --------------------------------


def test_a_single_number_is_not_given_an_index():
    result = check_answer(0.33, torch.tensor(0.1084), atol=0.03, what="weight")
    assert not result and result.wrong_entries == ((0, 0),)
    assert result.message.startswith("Wrong: the weight is off by more than 0.03.")
    assert "[0, 0]" not in result.message and "entries" not in result.message
    assert "row" not in result.message and "Your weight is 0.3300: recompute it" in result.message
    revealed = check_answer(0.33, 0.1084, atol=0.03, what="weight", reveal=True)
    assert "It is 0.3300; the exact value is 0.1084." in revealed.message
    nan = check_answer(float("nan"), 0.1084, what="weight")
    assert "It is NaN" in nan.message and "[0, 0]" not in nan.message


def test_a_single_row_names_its_entries_by_one_index():
    # a vector typed as a flat list or as one row: entry j, not [0, j]
    for answer in ([2.38, 4.30], [[2.38, 4.30]]):
        result = check_answer(answer, [[2.3790, 4.2438]], what="output row")
        assert "1 of 2 entries of the output row is off" in result.message
        assert "entry 1 (0-based)." in result.message and "Your entry 1 is 4.3000" in result.message
        assert "[0, 1]" not in result.message and "[row, column]" not in result.message
    both = check_answer([3.0, 2.0], [[-1.0, 2.0]], what="scores")
    assert "1 of 2" in both.message and "entry 0 (0-based)" in both.message
    two = check_answer([0.0, 0.0], [[-1.0, 2.0]], what="scores")
    assert "2 of 2 entries of the scores are off" in two.message and "entries 0, 1 (0-based)" in two.message
    nan = check_answer([1.0, float("nan")], [[1.0, 2.0]])
    assert "the first at entry 1:" in nan.message
    assert "Entry 1 is 4.3000; the exact value is 4.2438" in check_answer(
        [2.38, 4.30], [[2.3790, 4.2438]], reveal=True).message


def test_a_matrix_keeps_row_and_column():
    result = check_answer([[1.0, 2.0], [3.0, 5.0]], [[1.0, 2.0], [3.0, 4.0]], what="scores")
    assert "entry [1, 1] (0-based [row, column])" in result.message
    assert "Your entry [1, 1] is 5.0000" in result.message
    column = check_answer([[1.0], [5.0]], [[1.0], [4.0]])  # one column is still a matrix
    assert "[1, 0]" in column.message and "[row, column]" in column.message
