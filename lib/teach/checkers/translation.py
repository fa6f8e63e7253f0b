"""Checkers for the translation chapter's coding exercises (see lib.teach.checking)."""

from __future__ import annotations

import torch

from lib.teach.checking import Case, Mistake, Verdict, check_function

__all__ = ["check_word_attention", "check_alignment_error_rate"]


def _pool(attn, tgt_word, src_word, target_mean: bool, source_sum: bool, transpose=False):
    """Word attention with the reference's pooling (mean rows, sum columns) or a variant."""
    m, n = attn.shape[-2:]
    tgt, src = torch.tensor(list(tgt_word)), torch.tensor(list(src_word))
    rows = torch.zeros(int(tgt[-1]) + 1, m, dtype=attn.dtype)
    rows[tgt, torch.arange(m)] = 1.0
    if target_mean:
        rows = rows / rows.sum(dim=1, keepdim=True)
    cols = torch.zeros(n, int(src[-1]) + 1, dtype=attn.dtype)
    cols[torch.arange(n), src] = 1.0
    if not source_sum:
        cols = cols / cols.sum(dim=0, keepdim=True)
    if transpose:  # the words of each side used on the other side's axis
        return cols.T @ attn.transpose(-2, -1) @ rows.T
    return rows @ attn @ cols


def _word_attention_reference(attn, tgt_word, src_word):
    return _pool(attn, tgt_word, src_word, target_mean=True, source_sum=True)


def _words(g: torch.Generator, n_words: int, max_pieces: int) -> list[int]:
    pieces = torch.randint(1, max_pieces + 1, (n_words,), generator=g).tolist()
    return [k for k, p in enumerate(pieces) for _ in range(p)]


def _word_attention_cases() -> list[Case]:
    g = torch.Generator().manual_seed(0)
    cases = []
    for n_tgt, n_src, lead, dtype in (
        (4, 5, (), torch.float64), (6, 3, (2,), torch.float64), (3, 7, (2, 3), torch.float64),
        (5, 4, (2,), torch.float32),  # the model's attention is float32
    ):
        tgt_word, src_word = _words(g, n_tgt, 3), _words(g, n_src, 3)
        scores = torch.randn(*lead, len(tgt_word), len(src_word), generator=g, dtype=torch.float64)
        scores = scores.to(dtype)
        label = (f"{n_tgt} target words in {len(tgt_word)} subwords, {n_src} source words in "
                 f"{len(src_word)}, {str(dtype).replace('torch.', '')}")
        cases.append(Case((scores.softmax(dim=-1), tgt_word, src_word), label=label))
    return cases


def check_word_attention(word_attention) -> Verdict:
    """Chapter 12, exercise 4: pool subword attention (..., m, n) into word attention (..., M, N).

    Input classes that separate right from plausible-wrong code, each in the cases:
    words of one, two and three subwords on both sides (first subword only, max, mean
    where a sum is due), m != n and M != N (transposed layouts), no, one and two leading
    dimensions (2-D-only code, leading dimensions summed away), float64 and float32
    attention (the dtype is kept exactly: float32 for float64 input is refused).
    """
    mistakes = [
        Mistake(
            "a target word's subword rows are added, not averaged",
            "A word of three subwords would weigh three times as much: each row of the result "
            "should still sum to 1, so take the mean over a target word's rows.",
            lambda a, t, s: _pool(a, t, s, target_mean=False, source_sum=True),
        ),
        Mistake(
            "a source word's subword columns are averaged, not added",
            "The attention a word receives is the total over its pieces: add the columns "
            "(averaging would make the row no longer sum to 1).",
            lambda a, t, s: _pool(a, t, s, target_mean=True, source_sum=False),
        ),
        Mistake(
            "only the source side is pooled",
            "Both sides are made of subwords: the result has one row per target word (M rows), "
            "not one per target subword.",
            lambda a, t, s: _pool(a, list(range(a.shape[-2])), s, target_mean=True, source_sum=True),
        ),
        Mistake(
            "the result is transposed (source words × target words)",
            "Keep the layout of attention: one row per target word, one column per source word.",
            lambda a, t, s: _pool(a, t, s, target_mean=True, source_sum=True, transpose=True),
        ),
    ]
    return check_function(
        word_attention, _word_attention_reference, _word_attention_cases(), mistakes, name="word_attention"
    )


def _aer_reference(predicted, sure, possible):
    a, s, p = set(predicted), set(sure), set(possible)
    return 1.0 - (len(a & s) + len(a & p)) / (len(a) + len(s))


def _aer_cases() -> list[Case]:
    g = torch.Generator().manual_seed(1)
    cases = []
    for n, m, k_pred, k_sure, k_extra in ((5, 6, 6, 5, 2), (8, 9, 9, 7, 4), (4, 4, 4, 4, 0), (6, 10, 10, 8, 3)):
        grid = [(i, j) for i in range(n) for j in range(m)]
        order = torch.randperm(len(grid), generator=g).tolist()
        sure = {grid[x] for x in order[:k_sure]}
        possible = sure | {grid[x] for x in order[k_sure:k_sure + k_extra]}
        # Predictions that hit some sure links, some possible-only links and some misses.
        pick = order[: k_sure // 2] + order[k_sure:k_sure + k_extra // 2] + order[-(k_pred // 2):]
        predicted = {grid[x] for x in pick}
        label = f"|A| = {len(predicted)}, |S| = {len(sure)}, |P| = {len(possible)}"
        cases.append(Case((predicted, sure, possible), label=label))
    return cases


def check_alignment_error_rate(alignment_error_rate) -> Verdict:
    """Chapter 12, exercise 5: AER = 1 − (|A ∩ S| + |A ∩ P|) / (|A| + |S|), a Python float.

    Input classes that separate right from plausible-wrong code, each in the cases:
    predictions hitting sure links, possible-only links and misses (|A ∩ S| twice,
    |S ∩ P|, P = S), |A| != |S| != |P| (the wrong denominator, 1 − precision,
    1 − recall), values that are not round at 3 decimals (rounding), non-square link
    grids (i and j exchanged), and P = S (the exercise by hand); the result must be a
    float (not a tensor, not an int from integer division).
    """
    if not callable(alignment_error_rate):
        raise TypeError(f"the checker needs your function itself, got {type(alignment_error_rate).__name__}")
    for case in _aer_cases():
        try:
            got = alignment_error_rate(*[set(a) for a in case.args])
        except Exception:  # noqa: BLE001  (reported by check_function)
            break
        if type(got) is not float:
            return Verdict(
                False,
                f"✗ alignment_error_rate ({case.label}): returned {type(got).__name__} {got!r}. "
                "Likely mistake: the AER is not a Python float.\n  Return a float, as "
                "lib.alignment_error_rate does: len() of sets are ints, and 1 - a / b is a float.",
                mistake="the AER is not a Python float",
            )
    mistakes = [
        Mistake(
            "possible links are ignored (|A ∩ S| counted twice)",
            "A predicted link that people marked as possible is not an error: the numerator is "
            "|A ∩ S| + |A ∩ P|.",
            lambda a, s, p: 1.0 - 2 * len(set(a) & set(s)) / (len(set(a)) + len(set(s))),
        ),
        Mistake(
            "the denominator uses |P| instead of |S|",
            "AER divides by |A| + |S|: possible links may be predicted but are never required.",
            lambda a, s, p: 1.0 - (len(set(a) & set(s)) + len(set(a) & set(p))) / (len(set(a)) + len(set(p))),
        ),
        Mistake(
            "this is 1 − precision",
            "Precision alone (|A ∩ P| / |A|) rewards predicting very few links: AER also counts the "
            "sure links that were missed, through |S| in the denominator.",
            lambda a, s, p: 1.0 - len(set(a) & set(p)) / len(set(a)),
        ),
        Mistake(
            "this is 1 − recall",
            "Recall alone (|A ∩ S| / |S|) rewards predicting every link: AER also counts wrong "
            "predictions, through |A| in the denominator.",
            lambda a, s, p: 1.0 - len(set(a) & set(s)) / len(set(s)),
        ),
        Mistake(
            "the agreement, not the error",
            "(|A ∩ S| + |A ∩ P|) / (|A| + |S|) is 1 for a perfect alignment: AER is one minus it.",
            lambda a, s, p: (len(set(a) & set(s)) + len(set(a) & set(p))) / (len(set(a)) + len(set(s))),
        ),
    ]
    return check_function(
        alignment_error_rate, _aer_reference, _aer_cases(), mistakes, name="alignment_error_rate"
    )


def check_alignment_answers(my_aers, reveal: bool = False) -> "CheckResult":
    """The translation chapter's exercises 1 and 2 by hand: ``my_aers`` is
    [AER of the head of exercise 1, AER of the diagonal of exercise 1, AER of the
    diagonal on 1 Thessalonians 5:16 (exercise 2)], with P = S. Right within
    0.005, or the likely slip by name; the values are not revealed."""
    from lib.teach.alignment import alignment_error_rate, diagonal_links
    from lib.teach.exercises import check_answer

    sure_1 = {(0, 0), (1, 1), (2, 3), (3, 2)}
    head_1 = {(0, 0), (1, 1), (2, 2), (3, 3)}
    sure_2 = {(1, 0), (0, 1), (0, 2), (0, 3)}  # πάντοτε χαίρετε / Rejoice at all times .
    diagonal_2 = diagonal_links(2, 5, targets=[0, 1, 2, 3])
    exact = [alignment_error_rate(head_1, sure_1), alignment_error_rate(diagonal_links(4, 4), sure_1),
             alignment_error_rate(diagonal_2, sure_2)]

    def sure_only(a, s):  # P ignored: only |A ∩ S| in the numerator
        return 1 - len(a & s) / (len(a) + len(s))

    no_half = {(min(j * 2 // 5, 1), j) for j in range(4)}  # i = ⌊j n / m⌋
    with_stop = diagonal_links(2, 5)  # the full stop given a link too
    slips = {
        "the possible links left out of the numerator": (
            [sure_only(head_1, sure_1), sure_only(diagonal_links(4, 4), sure_1),
             sure_only(diagonal_2, sure_2)],
            "With P = S every correct link counts twice in the numerator: |A ∩ S| + |A ∩ P|."),
        "the agreement, not the error": (
            [1 - v for v in exact],
            "(|A ∩ S| + |A ∩ P|) / (|A| + |S|) is the agreement; AER is one minus it."),
        "the diagonal without the half": (
            [exact[0], exact[1], alignment_error_rate(no_half, sure_2)],
            "The diagonal puts target word j on source word ⌊(j + ½) n / m⌋: the middle of "
            "its share of the source, not its start."),
        "the full stop given a link": (
            [exact[0], exact[1], alignment_error_rate(with_stop, sure_2)],
            "Punctuation is not aligned: the diagonal predicts links only for the four words."),
    }
    return check_answer(my_aers, exact, atol=0.005, what="AERs", reveal=reveal, slips=slips)


__all__ += ["check_alignment_answers"]
