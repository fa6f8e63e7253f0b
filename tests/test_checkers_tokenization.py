"""The tokenization chapter's checkers: the solution passes, each named mistake is named.

Every wrong version here is written independently of the `Mistake` functions in
lib/teach/checkers/tokenization.py, the way a learner would write it.
"""

from __future__ import annotations

from collections import Counter, defaultdict

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
