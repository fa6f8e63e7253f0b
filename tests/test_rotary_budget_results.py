"""lib/teach/rotary_budget_results.py, chapter 14's stored budget study (written by
bench/rotary_budget.py --write): the shape the chapter's cell reads, and values a trained
character model can have. Fast: it reads the file, it trains nothing."""

from __future__ import annotations

import math

from lib.teach.rotary_budget_results import RESULTS

SCHEMES = ("learned", "rotary", "none", "sinusoidal")
SEEDS = (0, 1)


def test_every_scheme_on_both_seeds_up_to_chapter_11s_budget():
    assert RESULTS["steps"] == 1500 and list(RESULTS["seeds"]) == list(SEEDS)
    assert set(RESULTS["curves"]) == {f"{s} {seed}" for s in SCHEMES for seed in SEEDS}
    for name, curve in RESULTS["curves"].items():
        steps = sorted(curve)
        assert all(isinstance(t, int) for t in steps), name
        assert steps[-1] == 1500 and 240 in steps and steps[0] <= 120, (name, steps)
        assert len(steps) >= 5, name
    # every run is scored at the same steps, so the curves can be compared point by point
    assert len({tuple(sorted(c)) for c in RESULTS["curves"].values()}) == 1


def test_the_recipe_is_chapter_14s():
    assert RESULTS["recipe"] == dict(batch=32, context=64, lr=3e-3, warmup=30)


def test_values_are_those_of_a_character_model_learning():
    uniform = math.log2(84)  # 6.39 bits per byte: a uniform guess over the 84 characters
    for name, curve in RESULTS["curves"].items():
        values = [curve[t] for t in sorted(curve)]
        assert all(2.0 < v < 4.6 < uniform for v in values), (name, values)
        assert values[-1] < values[0] - 0.3, name  # it learned along the run
    refs = RESULTS["references"]
    assert set(refs) == {"2-gram", "3-gram", "5-gram", "chapter 11 model"}
    assert 2.2 < refs["5-gram"] < refs["chapter 11 model"] < refs["3-gram"] < refs["2-gram"] < 3.9


def test_cpu_seconds_for_every_run():
    assert set(RESULTS["cpu_seconds"]) == set(RESULTS["curves"])
    assert all(t > 0 for t in RESULTS["cpu_seconds"].values())
