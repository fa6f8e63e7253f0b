"""Predict first: an answer cell that still holds the chapter's placeholder ``None`` gets a
prompt, never a verdict.

Every by-hand checker of chapters 1-13 is called with ``None``: the result is not right,
names no slip, and its message is `lib.teach.exercises.NOT_ANSWERED` exactly, with no "Right", "Wrong",
✓ or ✗ in it, and no number (it cannot give the answer away). Before this, ``None`` was
refused with a TypeError, and the chapters stored a wrong answer and its verdict instead.
Bad answers other than ``None`` are still refused (the chapters' checker tests).
"""

from __future__ import annotations

import re

import pytest
import torch

import lib
from lib.teach.exercises import NOT_ANSWERED

HAND_OUT = torch.zeros(1, 6, 8)  # the shape of chapter 4's hand-built layer's output

CHECKERS = {
    "check_answer": lambda a: lib.check_answer(a, [[1.0, 2.0]], slips={"s": ([[1.0, 0.0]], "h")}),
    "check_attention": lambda a: lib.check_attention([[1.0, 0.0]], [[1.0, 0.0], [0.0, 1.0]],
                                                     [[1.0, 2.0], [3.0, 4.0]], a),
    "check_attention_weights": lambda a: lib.check_attention_weights([[1.0, 0.0]],
                                                                     [[1.0, 0.0], [0.0, 1.0]], a),
    "check_score_variance": lib.check_score_variance,
    "check_score_divisor": lib.check_score_divisor,
    "check_mha_parameters": lambda a: lib.check_mha_parameters(a, compared_with=1),
    "check_attention_flops": lib.check_attention_flops,
    "check_flops_crossover": lib.check_flops_crossover,
    "check_previous_word": lambda a: lib.check_previous_word(a, HAND_OUT),
    "check_same_word_position": lambda a: lib.check_same_word_position(a, HAND_OUT),
    "check_pe_row": lib.check_pe_row,
    "check_shortest_wavelength": lib.check_shortest_wavelength,
    "check_longest_wavelength": lib.check_longest_wavelength,
    "check_wavelength_ratio": lib.check_wavelength_ratio,
    "check_window_macs": lib.check_window_macs,
    "check_window_layers": lib.check_window_layers,
    "check_birnn_path": lib.check_birnn_path,
    "check_birnn_steps": lib.check_birnn_steps,
    "check_pairs_left": lib.check_pairs_left,
    "check_merge_7": lib.check_merge_7,
    "check_lower_tokens": lib.check_lower_tokens,
    "check_perplexity": lib.check_perplexity,
    "check_ddp_token_weight": lib.check_ddp_token_weight,
}


@pytest.mark.parametrize("name", sorted(CHECKERS))
def test_none_is_not_answered_yet_with_no_verdict(name):
    result = CHECKERS[name](None)
    assert not result and result.slip is None
    assert result.message == NOT_ANSWERED
    assert not re.search(r"Right|Wrong|✓|✗|\d", result.message)


def test_the_prompt_says_what_to_do():
    assert NOT_ANSWERED.startswith("Not answered yet") and "None" in NOT_ANSWERED


def test_bad_settings_are_still_refused_before_none():
    """The placeholder does not hide a checker's own bad arguments."""
    with pytest.raises(ValueError, match="atol"):
        lib.check_answer(None, [1.0], atol=0)
    with pytest.raises(TypeError, match="slips"):
        lib.check_answer(None, [1.0], slips=[1.0])
    with pytest.raises(ValueError, match="d_k"):
        lib.check_attention([[1.0, 0.0]], [[1.0]], [[1.0]], None)
