"""The tokenization chapter's checkers: the solution passes, each named mistake is named.

Every wrong version here is written independently of the `Mistake` functions in
lib/teach/checkers/tokenization.py, the way a learner would write it.
"""

from __future__ import annotations

from collections import Counter, defaultdict

import pytest

import lib


def count_pairs_solution(ids):
    return Counter(zip(ids, ids[1:]))


def count_pairs_stub(ids):
    raise NotImplementedError


def count_pairs_stops_early(ids):
    counts = defaultdict(int)
    for i in range(1, len(ids) - 1):  # off by one at the end
        counts[ids[i - 1], ids[i]] += 1
    return dict(counts)


def count_pairs_like_str_count(ids):
    text = "".join(chr(0x4E00 + i) for i in ids)  # one character per id, then str.count
    pairs = {(ids[i], ids[i + 1]) for i in range(len(ids) - 1)}
    return {p: text.count(chr(0x4E00 + p[0]) + chr(0x4E00 + p[1])) for p in pairs}


def count_pairs_sorted(ids):
    return dict(Counter(tuple(sorted(p)) for p in zip(ids, ids[1:])))


def count_pairs_rolled(ids):
    return dict(Counter((ids[i - 1], ids[i]) for i in range(len(ids))))  # i = 0 pairs the last with the first


def test_count_pairs_checker():
    assert lib.check_count_pairs(count_pairs_solution)
    verdict = lib.check_count_pairs(count_pairs_stub)
    assert not verdict and "not implemented yet" in str(verdict)
    expected = {
        count_pairs_stops_early: "the last pair is missed",
        count_pairs_like_str_count: "overlapping pairs are counted once",
        count_pairs_sorted: "the order inside a pair is ignored",
        count_pairs_rolled: "a pair wraps around from the last id to the first",
    }
    for wrong, name in expected.items():
        verdict = lib.check_count_pairs(wrong)
        assert not verdict and verdict.mistake == name, (wrong.__name__, str(verdict))


def merge_solution_indexed(ids, pair, new_id):
    out, i = [], 0
    while i < len(ids):
        if tuple(ids[i:i + 2]) == tuple(pair):
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def merge_stub(ids, pair, new_id):
    raise NotImplementedError


def merge_right_to_left(ids, pair, new_id):
    ids = list(ids)
    i = len(ids) - 2
    while i >= 0:
        if ids[i] == pair[0] and ids[i + 1] == pair[1]:
            ids[i:i + 2] = [new_id]
            i -= 2
        else:
            i -= 1
    return ids


def merge_once(ids, pair, new_id):
    ids = list(ids)
    for i in range(len(ids) - 1):
        if ids[i] == pair[0] and ids[i + 1] == pair[1]:
            del ids[i + 1]
            ids[i] = new_id
            break
    return ids


def merge_stops_before_last_pair(ids, pair, new_id):
    out = []
    i = 0
    for _ in range(len(ids)):
        if i >= len(ids):
            break
        if i + 2 < len(ids) and ids[i] == pair[0] and ids[i + 1] == pair[1]:
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def merge_steps_by_one(ids, pair, new_id):
    out = list(ids)
    for i in range(len(ids) - 1):
        if ids[i] == pair[0] and ids[i + 1] == pair[1]:
            out[i] = new_id
    return out


def merge_forgets_tail(ids, pair, new_id):
    out = []
    skip = False
    for a, b in zip(ids, ids[1:]):  # the last id is never visited on its own
        if skip:
            skip = False
            continue
        if (a, b) == tuple(pair):
            out.append(new_id)
            skip = True
        else:
            out.append(a)
    return out


def test_merge_checker():
    assert lib.check_merge(merge_solution_indexed)
    verdict = lib.check_merge(merge_stub)
    assert not verdict and "not implemented yet" in str(verdict)
    expected = {
        merge_right_to_left: "an overlapping run is merged from the right",
        merge_once: "only the first occurrence is merged",
        merge_stops_before_last_pair: "a pair at the very end is not merged",
        merge_steps_by_one: "the second id of a merged pair is kept",
        merge_forgets_tail: "the last id is dropped",
    }
    for wrong, name in expected.items():
        verdict = lib.check_merge(wrong)
        assert not verdict and verdict.mistake == name, (wrong.__name__, str(verdict))



def count_pairs_float_counts(ids):
    counts = defaultdict(float)
    for a, b in zip(ids, ids[1:]):
        counts[a, b] += 1.0
    return dict(counts)


def count_pairs_clears_input(ids):
    counts = Counter()
    while len(ids) > 1:
        counts[ids[0], ids[1]] += 1
        ids.pop(0)
    return dict(counts)


def merge_in_place(ids, pair, new_id):
    i = 0
    while i < len(ids) - 1:
        if (ids[i], ids[i + 1]) == tuple(pair):
            ids[i:i + 2] = [new_id]
        i += 1
    return ids


def merge_returns_tuple(ids, pair, new_id):
    return tuple(merge_solution_indexed(ids, pair, new_id))


def test_checkers_refuse_what_the_exercise_text_rules_out():
    cases = {
        (lib.check_count_pairs, count_pairs_float_counts): "the counts are not ints",
        (lib.check_count_pairs, count_pairs_clears_input): "the input list is modified",
        (lib.check_merge, merge_in_place): "the input list is modified",
        (lib.check_merge, merge_returns_tuple): "the result is not a list",
    }
    for (checker, wrong), name in cases.items():
        verdict = checker(wrong)
        assert not verdict and verdict.mistake == name, (wrong.__name__, str(verdict))


def test_checkers_never_accept_nan_or_none():
    assert not lib.check_count_pairs(lambda ids: {(a, b): float("nan") for a, b in zip(ids, ids[1:])})
    assert not lib.check_merge(lambda ids, pair, new_id: None)
    verdict = lib.check_merge(lambda ids, pair, new_id: [float(i) for i in merge_solution_indexed(ids, pair, new_id)])
    assert not verdict and verdict.mistake == "the ids are not ints"


# --- exercise 1 by hand: the tiny corpus after its seven merges -------------------------------


def _tiny_by_brute_force():
    """The textbook algorithm on {word: count}, written here: 7 merges, ties to the smallest
    pair of first bytes' ids; returns the words' tokens and the pair counts left."""
    words = {tuple("low"): 5, tuple("lower"): 2, tuple("newest"): 6, tuple("widest"): 3}
    for _ in range(7):
        counts = {}
        for w, n in words.items():
            for p in zip(w, w[1:]):
                counts[p] = counts.get(p, 0) + n
        top = max(counts.values())
        best = min((p for p in counts if counts[p] == top),
                   key=lambda p: (list(p[0].encode()), list(p[1].encode())))
        merged = {}
        for w, n in words.items():
            out, i = [], 0
            while i < len(w):
                if w[i:i + 2] == best:
                    out.append(w[i] + w[i + 1])
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            merged[tuple(out)] = n
        words = merged
    counts = {}
    for w, n in words.items():
        for p in zip(w, w[1:]):
            counts[p] = counts.get(p, 0) + n
    return words, counts


def test_tiny_corpus_checkers():
    words, left = _tiny_by_brute_force()
    assert left == {("low", "e"): 2, ("e", "r"): 2, ("w", "i"): 3, ("i", "d"): 3,
                    ("d", "est"): 3}
    assert lib.check_pairs_left(left) and lib.check_merge_7(("d", "est"))
    assert lib.check_merge_7(["d", "est"]) and lib.check_lower_tokens(["low", "e", "r"])
    assert ("low", "e", "r") in words
    once = {p: 1 for p in left}
    stale = {(("w", "e") if p == ("low", "e") else p): n for p, n in left.items()}
    no_es = {(("d", "e") if p == ("d", "est") else p): n for p, n in left.items()}
    for checker, value, name in (
        (lib.check_pairs_left, once, "each word counted once, not by its frequency"),
        (lib.check_pairs_left, stale, "w e where low e is"),
        (lib.check_pairs_left, no_es, "d e where d est is"),
        (lib.check_merge_7, ("w", "i"),
         "the tie broken towards the largest pair (or the first met in the text)"),
        (lib.check_merge_7, ("d", "e"), "d e: merges 0 and 1 forgotten"),
        (lib.check_merge_7, ("e", "r"), "a pair of count 2"),
        (lib.check_lower_tokens, ["low", "er"], "er merged, though no merge made it"),
        (lib.check_lower_tokens, ["lower"], "the whole word, one token"),
        (lib.check_lower_tokens, list("lower"), "no merge applied"),
        (lib.check_lower_tokens, ["lo", "w", "e", "r"], "lo w e r: merge 3 left out"),
    ):
        verdict = checker(value)
        assert not verdict and verdict.slip == name, (name, verdict.message)
    wrong = {**left, ("w", "i"): 2}
    assert not lib.check_pairs_left(wrong) and lib.check_pairs_left(wrong).slip is None
    assert not lib.check_merge_7(("i", "d")) and lib.check_merge_7(("i", "d")).slip is None
    assert not lib.check_lower_tokens(["l", "ow", "er"])
    for bad in ("d est", [100, 257], ("d",)):  # None: not answered
        with pytest.raises((TypeError, ValueError), match="my_merge_7"):
            lib.check_merge_7(bad)
    for bad in ("low e r", [259, 101, 114]):
        with pytest.raises(TypeError, match="my_lower"):
            lib.check_lower_tokens(bad)
    for bad in ([("low", "e")], {("low", "e"): 2.0}, {("low", "e"): float("nan")},
                {"low e": 2}, {("low", "e"): True}):
        with pytest.raises((TypeError, ValueError), match="my_pairs"):
            lib.check_pairs_left(bad)
