"""The verdict on a predict-first table (chapters 6 and 8): the learner's answers against
what the runs did.

A question whose outcome is none of its answers ("differs between seeds", "mixed") is one
the runs do not settle: no prediction can match it, so it is shown and not counted.
"""

from __future__ import annotations

from lib.teach.checking import Verdict

__all__: list[str] = []


def prediction_verdict(mine: dict, outcome: dict, options: dict, width: int,
                       answer_width: int) -> Verdict:
    """Right when every prediction the runs settle matches them; one line per question.

    options: {question: the answers a learner may give}, in the order to show them.
    """
    questions = list(options)
    settled = [q for q in questions if outcome[q] in options[q]]
    wrong = [q for q in settled if mine[q] != outcome[q]]
    lines = [f"  {q:{width}s} you: {mine[q]:{answer_width}s} runs: {outcome[q]}"
             + ("" if q in settled else " (the runs do not settle it: not counted)")
             for q in questions]
    if not settled:
        return Verdict(False, "The runs settle none of the questions: nothing to compare.\n"
                       + "\n".join(lines))
    n, k = len(questions), len(settled)
    if not wrong:
        counted = f"{k} predictions the runs settle" if k < n else \
            f"{ {3: 'three', 4: 'four'}.get(n, n)} predictions"
        return Verdict(True, f"✓ all {counted} match the runs.\n" + "\n".join(lines))
    counted = f"{k} predictions the runs settle" if k < n else f"{n} predictions"
    return Verdict(False, f"✗ {len(wrong)} of {counted} differ from the runs.\n"
                   + "\n".join(lines))
