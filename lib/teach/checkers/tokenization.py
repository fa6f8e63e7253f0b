"""Checkers for the tokenization chapter's coding exercises (see lib.teach.checking).

The two operations byte-pair encoding repeats: count the adjacent pairs of a
list of token ids, and merge every occurrence of one pair into a new id. The
references are `lib.train.bpe.count_pairs` and `lib.train.bpe.merge_pair`.
"""

from __future__ import annotations

import random
from collections import Counter

import torch

from lib.teach.exercises import CheckResult, not_answered
from lib.teach.checking import Case, Mistake, Verdict, check_function
from lib.train.bpe import count_pairs as _count_pairs_reference
from lib.train.bpe import merge_pair as _merge_reference

__all__ = [
    "check_count_pairs", "check_merge", "check_pairs_left", "check_merge_7", "check_lower_tokens",
]


def _contract(fn, cases: list[Case], name: str, result_ok) -> Verdict | None:
    """What the exercise's text promises beyond the values: the input list is left as it
    was, and the result has the stated type (``result_ok`` returns a message or None).
    Cases on which `fn` raises are left to `check_function`, which reports them."""
    for case in cases:
        args = [list(a) if isinstance(a, list) else a for a in case.args]
        try:
            result = fn(*args)
        except Exception:  # noqa: BLE001  (reported by check_function)
            continue
        if args[0] != case.args[0]:
            return Verdict(
                False,
                f"✗ {name} changed the list it was given ({case.label}): it became {args[0]!r}. "
                "Likely mistake: the input is modified in place.\n  The caller still needs "
                "`ids`: build a new list (or copy it first) instead of editing it?",
                mistake="the input list is modified",
            )
        problem = result_ok(result)
        if problem is not None:
            mistake, hint = problem
            return Verdict(False, f"✗ {name} ({case.label}): {mistake}.\n  {hint}", mistake=mistake)
    return None


def _counts_are_ints(result) -> tuple[str, str] | None:
    if isinstance(result, dict):
        bad = [v for v in result.values() if type(v) is not int]
        if bad:
            return ("the counts are not ints",
                    f"A count is {type(bad[0]).__name__} {bad[0]!r}; a count is a whole number. "
                    "Did you start from 0.0 or divide somewhere? Start from 0 and add 1.")
    return None


def _is_a_list(result) -> tuple[str, str] | None:
    if not isinstance(result, list):
        return ("the result is not a list",
                f"It is a {type(result).__name__}; the exercise asks for a new list of ids, "
                "as lib.merge_pair returns. Did you return a tuple, a tensor or nothing?")
    bad = [i for i in result if type(i) is not int]
    if bad:
        return ("the ids are not ints",
                f"An id is {type(bad[0]).__name__} {bad[0]!r}. Did you convert the ids?")
    return None


def _random_ids(rng: random.Random, n: int, alphabet: int) -> list[int]:
    return [rng.randrange(alphabet) for _ in range(n)]


def _count_cases() -> list[Case]:
    cases = [
        Case(([104, 105, 104, 105],), label="[104, 105, 104, 105] ('hihi')"),
        Case(([97, 97, 97, 98],), label="a run of three equal ids: [97, 97, 97, 98]"),
        Case(([5, 3, 3, 5, 9],), label="[5, 3, 3, 5, 9]: the last pair occurs once"),
        Case(([7],), label="a single id"),
        Case(([],), label="no ids"),
        Case(([256, 257, 256, 257, 1000, 12],), label="ids above 255: [256, 257, 256, 257, 1000, 12]"),
    ]
    rng = random.Random(0)
    for n, alphabet in ((20, 3), (40, 6), (15, 260)):
        cases.append(Case((_random_ids(rng, n, alphabet),), label=f"{n} random ids below {alphabet}"))
    return cases


def _count_last_pair_missed(ids):
    counts = {}
    for i in range(len(ids) - 2):
        counts[(ids[i], ids[i + 1])] = counts.get((ids[i], ids[i + 1]), 0) + 1
    return counts


def _count_without_overlaps(ids):
    counts = {}
    for pair in set(zip(ids, ids[1:])):
        i = n = 0
        while i < len(ids) - 1:
            if (ids[i], ids[i + 1]) == pair:
                n, i = n + 1, i + 2
            else:
                i += 1
        counts[pair] = n
    return counts


def _count_unordered(ids):
    counts = {}
    for a, b in zip(ids, ids[1:]):
        key = (min(a, b), max(a, b))
        counts[key] = counts.get(key, 0) + 1
    return counts


def _count_wrapping_around(ids):
    counts = {}
    for pair in zip(ids, ids[1:] + ids[:1]):
        counts[pair] = counts.get(pair, 0) + 1
    return counts


def check_count_pairs(count_pairs) -> Verdict:
    """Chapter 10, exercise 3: ``count_pairs(ids) -> {(a, b): count}`` over every adjacent pair.

    Input classes that separate right from plausible-wrong code, each in the cases:
    overlapping runs ([97, 97, 97]: non-overlapping stepping), a pair at the very start
    and at the very end, (a, b) and (b, a) both present (sorted or reversed pairs),
    empty and one-id lists, ids above 255 (a solution through ``bytes``), random lists
    over small alphabets (presence instead of counts); the input list must come back
    unchanged and the counts must be ints.
    """
    mistakes = [
        Mistake(
            "the last pair is missed",
            "A list of n ids has n − 1 adjacent pairs: does your loop reach (ids[-2], ids[-1])?",
            _count_last_pair_missed,
        ),
        Mistake(
            "overlapping pairs are counted once",
            "In [97, 97, 97] the pair (97, 97) occurs twice, at positions 0 and 1: count every "
            "position, as zip(ids, ids[1:]) does, not non-overlapping matches like str.count.",
            _count_without_overlaps,
        ),
        Mistake(
            "the order inside a pair is ignored",
            "(104, 105) ('hi') and (105, 104) ('ih') are different pairs: did you sort the pair?",
            _count_unordered,
        ),
        Mistake(
            "a pair wraps around from the last id to the first",
            "The text does not loop: pairs are (ids[i], ids[i + 1]) for i < len(ids) − 1 only.",
            _count_wrapping_around,
        ),
    ]
    cases = _count_cases()
    broken = _contract(count_pairs, cases, "count_pairs", _counts_are_ints)
    if broken is not None:
        return broken
    return check_function(count_pairs, _count_pairs_reference, cases, mistakes, name="count_pairs")


def _merge_cases() -> list[Case]:
    cases = [
        Case(([1, 2, 3, 1, 2], (1, 2), 9), label="[1, 2, 3, 1, 2], pair (1, 2): one at the very end"),
        Case(([7, 7, 7], (7, 7), 9), label="[7, 7, 7], pair (7, 7): an overlapping run"),
        Case(([7, 7, 7, 7, 7], (7, 7), 300), label="five 7s, pair (7, 7)"),
        Case(([5, 1, 2, 4, 1, 2, 6], (1, 2), 300), label="[5, 1, 2, 4, 1, 2, 6], pair (1, 2)"),
        Case(([3, 1, 3, 2], (1, 2), 9), label="no occurrence"),
        Case(([1, 2], (1, 2), 9), label="the whole list is the pair"),
        Case(([1], (1, 2), 9), label="a single id"),
        Case(([], (1, 2), 9), label="no ids"),
        Case(([11, 2, 1, 21, 1, 2], (1, 2), 300),
             label="[11, 2, 1, 21, 1, 2], pair (1, 2): ids of two digits"),
        Case(([256, 300, 256, 300, 5], (256, 300), 301), label="ids above 255, pair (256, 300)"),
    ]
    rng = random.Random(1)
    for n, alphabet in ((30, 3), (25, 5)):
        ids = _random_ids(rng, n, alphabet)
        cases.append(Case((ids, (ids[3], ids[4]), 256), label=f"{n} random ids below {alphabet}"))
    return cases


def _merge_from_the_right(ids, pair, new_id):
    out, i = [], len(ids) - 1
    while i >= 0:
        if i >= 1 and (ids[i - 1], ids[i]) == tuple(pair):
            out.append(new_id)
            i -= 2
        else:
            out.append(ids[i])
            i -= 1
    return out[::-1]


def _merge_first_only(ids, pair, new_id):
    for i in range(len(ids) - 1):
        if (ids[i], ids[i + 1]) == tuple(pair):
            return list(ids[:i]) + [new_id] + list(ids[i + 2:])
    return list(ids)


def _merge_not_at_the_end(ids, pair, new_id):
    out, i = [], 0
    while i < len(ids) - 2:
        if (ids[i], ids[i + 1]) == tuple(pair):
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out + list(ids[i:])


def _merge_keeps_second(ids, pair, new_id):
    out = []
    for i, token in enumerate(ids):
        out.append(new_id if i + 1 < len(ids) and (token, ids[i + 1]) == tuple(pair) else token)
    return out


def _merge_drops_last(ids, pair, new_id):
    out, i = [], 0
    while i < len(ids) - 1:
        if (ids[i], ids[i + 1]) == tuple(pair):
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def check_merge(merge) -> Verdict:
    """Chapter 10, exercise 4: ``merge(ids, pair, new_id) -> list``, every occurrence of
    `pair` replaced, left to right.

    Input classes that separate right from plausible-wrong code, each in the cases:
    overlapping runs of odd and even length (merging from the right, merging twice), a
    pair at the very end and the whole list being the pair, no occurrence, a single id
    and no ids, ids with two or more digits ([11, 2] with pair (1, 2): a replacement on
    the decimal text), ids above 255 (``bytes``), a first id that matches alone (matching
    on pair[0] only); the input list must come back unchanged, the result a list of ints.
    """
    mistakes = [
        Mistake(
            "an overlapping run is merged from the right",
            "BPE scans left to right: [7, 7, 7] with (7, 7) -> 9 gives [9, 7], not [7, 9].",
            _merge_from_the_right,
        ),
        Mistake(
            "only the first occurrence is merged",
            "Keep scanning after a merge: every occurrence of the pair becomes new_id.",
            _merge_first_only,
        ),
        Mistake(
            "a pair at the very end is not merged",
            "Does your loop look at position len(ids) − 2, the start of the last pair?",
            _merge_not_at_the_end,
        ),
        Mistake(
            "the second id of a merged pair is kept",
            "After writing new_id, skip both ids of the pair: step by 2, not by 1.",
            _merge_keeps_second,
        ),
        Mistake(
            "the last id is dropped",
            "When the loop stops before the last id and that id was not merged, append it too.",
            _merge_drops_last,
        ),
    ]
    cases = _merge_cases()
    broken = _contract(merge, cases, "merge", _is_a_list)
    if broken is not None:
        return broken
    return check_function(merge, _merge_reference, cases, mistakes, name="merge")


# ---------------------------------------------------------------------------
# exercise 1 by hand: the tiny corpus after its seven merges
# ---------------------------------------------------------------------------

_TINY = {"low": 5, "lower": 2, "newest": 6, "widest": 3}


def _tiny_state():
    """lib's BPE after 7 merges on the tiny corpus: (its tokenizer, {word: its token strings})."""
    from lib.train.bpe import BPETokenizer
    text = "\n".join(w for w, n in _TINY.items() for _ in range(n))
    bpe = BPETokenizer.train(text, 256 + 7)
    return bpe, {w: [bpe.vocab[i].decode() for i in bpe.encode(w)] for w in _TINY}


def _pair_counts(words: dict, weighted: bool = True) -> dict:
    counts: Counter = Counter()
    for w, tokens in words.items():
        for pair in zip(tokens, tokens[1:]):
            counts[pair] += _TINY[w] if weighted else 1
    return dict(counts)


def _verdict(ok: bool, value, expected, what: str, slips: dict) -> CheckResult:
    shown = torch.tensor([[0.0]])
    if ok:
        return CheckResult(True, f"Right: {value!r} is {what}.", shown)
    for slip, (slip_value, hint) in slips.items():
        if value == slip_value and slip_value != expected:
            return CheckResult(False, f"Wrong: {value!r} is not {what}. It is a classic slip: "
                               f"{slip}. {hint}", shown, ((0, 0),), slip)
    return CheckResult(False, f"Wrong: {value!r} is not {what}: redo the merges one by one.",
                       shown, ((0, 0),))


def _strings(name: str, value, length: int | None = None) -> tuple:
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise TypeError(f"{name} must be a list or tuple of strings, got {value!r}")
    if length is not None and len(value) != length:
        raise ValueError(f"{name} must have {length} strings, got {len(value)}")
    return tuple(value)


def check_pairs_left(my_pairs) -> CheckResult:
    """Chapter 10, exercise 1: {(a, b): count} of the pairs left after seven merges.
    ``None``: not answered yet."""
    if my_pairs is None:
        return not_answered(torch.tensor([[0.0]]))
    if not isinstance(my_pairs, dict):
        raise TypeError(f"my_pairs must be a dict {{(a, b): count}}, got {type(my_pairs).__name__}")
    pairs = {}
    for key, count in my_pairs.items():
        key = _strings(f"the key {key!r} of my_pairs", key, 2)
        if isinstance(count, bool) or not isinstance(count, int):
            raise TypeError(f"my_pairs[{key!r}] must be an int count, got {count!r}")
        pairs[key] = count
    _, words = _tiny_state()
    exact = _pair_counts(words)
    stale = {("w", "e") if k == ("low", "e") else k: n for k, n in exact.items()}
    return _verdict(pairs == exact, pairs, exact, "the pairs left with their counts", {
        "each word counted once, not by its frequency": (
            _pair_counts(words, weighted=False), "How many times is each word in the corpus?"),
        "w e where low e is": (stale, "After merge 3, what is lower made of?"),
        "d e where d est is": (
            {("d", "e") if k == ("d", "est") else k: n for k, n in exact.items()},
            "After merges 0 and 1, what follows d in widest?"),
    })


def check_merge_7(my_merge_7) -> CheckResult:
    """Chapter 10, exercise 1: merge 7 as a pair of token strings, e.g. ("a", "bc").
    ``None``: not answered yet."""
    if my_merge_7 is None:
        return not_answered(torch.tensor([[0.0]]))
    value = _strings("my_merge_7", my_merge_7, 2)
    bpe, words = _tiny_state()
    counts = _pair_counts(words)
    top = max(counts.values())
    tied = sorted((p for p, n in counts.items() if n == top),
                  key=lambda p: tuple(bpe.encode(t)[0] for t in p))
    exact = tied[0]
    return _verdict(value == exact, value, exact, "merge 7", {
        "the tie broken towards the largest pair (or the first met in the text)": (
            tied[-1], "Ties go to the smallest pair of ids: compare the first ids."),
        "d e: merges 0 and 1 forgotten": (
            ("d", "e"), "After merges 0 and 1, what follows d in widest?"),
        "a pair of count 2": (("e", "r"), "Which pairs occur 3 times?"),
    })


def check_lower_tokens(my_lower) -> CheckResult:
    """Chapter 10, exercise 1: *lower* after seven merges, as a list of token strings.
    ``None``: not answered yet."""
    if my_lower is None:
        return not_answered(torch.tensor([[0.0]]))
    value = _strings("my_lower", my_lower)
    _, words = _tiny_state()
    exact = tuple(words["lower"])
    return _verdict(value == exact, value, exact, "how lower is tokenized", {
        "er merged, though no merge made it": (
            ("low", "er"), "Which of the seven merges joins e and r?"),
        "the whole word, one token": (("lower",), "Which merge would make lower one token?"),
        "no merge applied": (tuple("lower"), "Merges 2 and 3 apply to lower too."),
        "lo w e r: merge 3 left out": (("lo", "w", "e", "r"), "What did merge 3 join?"),
    })
