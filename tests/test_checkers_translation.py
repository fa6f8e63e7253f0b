"""The translation chapter's checkers: the solution passes, each named mistake is named.

Every wrong version here is written independently of the `Mistake` functions in
lib/teach/checkers/translation.py, with loops, the way a learner might write it.
"""

from __future__ import annotations

import pytest
import torch

import lib
from lib.teach.checking import NOT_IMPLEMENTED


def _groups(word_of):
    groups = {}
    for position, word in enumerate(word_of):
        groups.setdefault(word, []).append(position)
    return [groups[w] for w in sorted(groups)]


def pool(attn, tgt_word, src_word, row_op="mean", col_op="sum", pool_rows=True):
    """Word attention with loops: row_op over a target word's rows, col_op over a
    source word's columns."""
    rows = _groups(tgt_word) if pool_rows else [[t] for t in range(attn.shape[-2])]
    cols = _groups(src_word)
    out = torch.zeros(*attn.shape[:-2], len(rows), len(cols), dtype=attn.dtype)
    for a, rs in enumerate(rows):
        for b, cs in enumerate(cols):
            block = attn[..., rs, :][..., :, cs]  # (..., |rs|, |cs|)
            per_row = block.sum(dim=-1) if col_op == "sum" else block.mean(dim=-1)
            out[..., a, b] = per_row.mean(dim=-1) if row_op == "mean" else per_row.sum(dim=-1)
    return out


def word_attention_solution(attn, tgt_word, src_word):
    return pool(attn, tgt_word, src_word)


def word_attention_stub(attn, tgt_word, src_word):
    raise NotImplementedError


WORD_MISTAKES = {
    "a target word's subword rows are added, not averaged":
        lambda a, t, s: pool(a, t, s, row_op="sum"),
    "a source word's subword columns are averaged, not added":
        lambda a, t, s: pool(a, t, s, col_op="mean"),
    "only the source side is pooled":
        lambda a, t, s: pool(a, t, s, pool_rows=False),
    "the result is transposed (source words × target words)":
        lambda a, t, s: pool(a, t, s).transpose(-2, -1),
}


def test_word_attention_solution_passes():
    verdict = lib.check_word_attention(word_attention_solution)
    assert verdict.passed, str(verdict)


def test_the_library_word_attention_passes_its_own_checker():
    assert lib.check_word_attention(lib.word_attention).passed


def test_word_attention_stub_is_not_implemented():
    verdict = lib.check_word_attention(word_attention_stub)
    assert not verdict.passed and NOT_IMPLEMENTED in str(verdict)


@pytest.mark.parametrize("name", sorted(WORD_MISTAKES))
def test_word_attention_mistake_is_named(name):
    verdict = lib.check_word_attention(WORD_MISTAKES[name])
    assert not verdict.passed
    assert verdict.mistake == name


def aer_solution(predicted, sure, possible):
    hits_sure = sum(1 for link in predicted if link in sure)
    hits_possible = sum(1 for link in predicted if link in possible)
    return 1 - (hits_sure + hits_possible) / (len(predicted) + len(sure))


def aer_stub(predicted, sure, possible):
    raise NotImplementedError


def _hits(a, b):
    return sum(1 for link in a if link in b)


AER_MISTAKES = {
    "possible links are ignored (|A ∩ S| counted twice)":
        lambda a, s, p: 1 - (_hits(a, s) * 2) / (len(a) + len(s)),
    "the denominator uses |P| instead of |S|":
        lambda a, s, p: 1 - (_hits(a, s) + _hits(a, p)) / (len(a) + len(p)),
    "this is 1 − precision":
        lambda a, s, p: 1 - _hits(a, p) / len(a),
    "this is 1 − recall":
        lambda a, s, p: 1 - _hits(a, s) / len(s),
    "the agreement, not the error":
        lambda a, s, p: (_hits(a, s) + _hits(a, p)) / (len(a) + len(s)),
}


def test_aer_solution_passes():
    verdict = lib.check_alignment_error_rate(aer_solution)
    assert verdict.passed, str(verdict)


def test_the_library_aer_passes_its_own_checker():
    assert lib.check_alignment_error_rate(lib.alignment_error_rate).passed


def test_aer_stub_is_not_implemented():
    verdict = lib.check_alignment_error_rate(aer_stub)
    assert not verdict.passed and NOT_IMPLEMENTED in str(verdict)


@pytest.mark.parametrize("name", sorted(AER_MISTAKES))
def test_aer_mistake_is_named(name):
    verdict = lib.check_alignment_error_rate(AER_MISTAKES[name])
    assert not verdict.passed
    assert verdict.mistake == name


def _matrices(attn, tgt_word, src_word, dtype):
    """A learner's pooling matrices built with a fixed dtype."""
    m, n = attn.shape[-2:]
    rows = torch.zeros(max(tgt_word) + 1, m, dtype=dtype)
    for t, w in enumerate(tgt_word):
        rows[w, t] = 1.0
    rows = rows / rows.sum(dim=1, keepdim=True)
    cols = torch.zeros(n, max(src_word) + 1, dtype=dtype)
    for s, w in enumerate(src_word):
        cols[s, w] = 1.0
    return rows @ attn @ cols


def test_word_attention_cases_include_float32_and_float64():
    # matrices fixed to float64 cannot multiply the model's float32 attention, and
    # torch.zeros' default float32 cannot multiply float64 attention
    assert lib.check_word_attention(
        lambda a, t, s: _matrices(a, t, s, a.dtype)).passed
    assert not lib.check_word_attention(
        lambda a, t, s: _matrices(a, t, s, torch.float64)).passed
    assert not lib.check_word_attention(
        lambda a, t, s: _matrices(a, t, s, torch.float32)).passed


def test_a_nan_answer_is_never_right():
    def nan_attention(attn, tgt_word, src_word):
        return pool(attn, tgt_word, src_word) * float("nan")

    assert not lib.check_word_attention(nan_attention).passed
    assert not lib.check_alignment_error_rate(lambda a, s, p: float("nan")).passed


# --- exercises 1 and 2 by hand: lib.check_alignment_answers -------------------------

def _aer_by_hand(a, s):
    """AER with P = S, from its definition: 1 - 2|A ∩ S| / (|A| + |S|)."""
    return 1 - 2 * len(a & s) / (len(a) + len(s))


def _exact_aers():
    s1 = {(0, 0), (1, 1), (2, 3), (3, 2)}
    head = {(0, 0), (1, 1), (2, 2), (3, 3)}
    diag1 = {(j, j) for j in range(4)}  # n = m = 4: i = floor(j + 1/2) = j
    s2 = {(1, 0), (0, 1), (0, 2), (0, 3)}
    diag2 = {(int((j + 0.5) * 2 / 5), j) for j in range(4)}
    return [_aer_by_hand(head, s1), _aer_by_hand(diag1, s1), _aer_by_hand(diag2, s2)]


def test_alignment_answers_right():
    exact = _exact_aers()
    assert exact == [0.5, 0.5, 0.75]  # the solution's figures
    assert lib.check_alignment_answers(exact).correct
    assert lib.check_alignment_answers([0.501, 0.499, 0.752]).correct  # two decimals


@pytest.mark.parametrize("answer, slip", [
    ([0.75, 0.75, 0.875], "the possible links left out of the numerator"),
    ([0.5, 0.5, 0.25], "the agreement, not the error"),
    ([0.5, 0.5, 0.5], "the diagonal without the half"),
    ([0.5, 0.5, 1 - 2 / 9], "the full stop given a link"),
])
def test_alignment_answers_name_the_slip(answer, slip):
    result = lib.check_alignment_answers(answer)
    assert not result.correct and result.slip == slip


def test_alignment_answers_wrong_nan_and_bad_input():
    result = lib.check_alignment_answers([0.6, 0.5, 0.75])
    assert not result.correct and result.slip is None and "0.5000" not in result.message
    assert not lib.check_alignment_answers([0.5, 0.5, float("nan")]).correct
    with pytest.raises(TypeError, match="answer"):
        lib.check_alignment_answers("0.5, 0.5, 0.75")
    with pytest.raises(ValueError, match="shape"):
        lib.check_alignment_answers([0.5, 0.5])
