"""Train chapter 8's date model once and ship it for the first page (book/intro).

    OMP_NUM_THREADS=1 .venv/bin/python tools/date_checkpoint.py --seed 1

Trains `lib.date_model_run` (chapter 8's recipe, on chapter 8's training dates, one
thread) for the seed given, scores the float16-rounded model on chapter 8's three
test sets (1,000 held-out dates, 1,000 of the unseen inside
years, 1,000 of the 2040s; its samples, greedy exact match), and
writes lib/train/checkpoints/date_model.pt only if the held-out dates all but reach
1.0 (>= 0.99). Prints the file's SHA-256: pin it as DATE_CHECKPOINT_SHA256 in
lib/train/date_checkpoint.py.
"""

from __future__ import annotations

import argparse
import random
import pathlib
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

import lib  # noqa: E402
from lib.train.date_checkpoint import DATE_CHECKPOINT, save_date_checkpoint  # noqa: E402
from lib.widgets.dates import rounded_model  # noqa: E402

INSIDE = (1953, 1966, 1979, 1987, 1994, 2008, 2016, 2025, 2031)  # chapter 8's


def chapter_split():
    """Chapter 8's split of the 36,525 dates of 1950-2049 (its cell, same arguments)."""
    return lib.make_date_split(n_held_out=1500, first_year=1950, last_year=2049, seed=0,
                               held_out_years=INSIDE + tuple(range(2040, 2050)))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=pathlib.Path, default=DATE_CHECKPOINT)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    split = chapter_split()
    start = time.process_time()
    state = lib.date_model_run(split.train, seed=args.seed)
    seconds = time.process_time() - start
    model = lib.date_model_config().build()
    model.load_state_dict(state)
    rounded = rounded_model(model)
    inside = [d for d in split.unseen_years if d.year < 2040]
    beyond = [d for d in split.unseen_years if d.year >= 2040]
    sets = {"held_out": lib.sample_pairs(split.held_out[500:], 1000, random.Random(2), replace=False),
            "inside_years": lib.sample_pairs(inside, 1000, random.Random(3), replace=False),
            "2040s": lib.sample_pairs(beyond, 1000, random.Random(4), replace=False)}
    scores = {name: lib.exact_match(rounded, pairs, lib.DATE_VOCAB, max_len=20)
              for name, pairs in sets.items()}
    print(f"seed {args.seed}: {seconds:.0f} CPU s; float16 model exact match "
          + ", ".join(f"{k} {v:.3f}" for k, v in scores.items()))
    if scores["held_out"] < 0.99:
        print("held-out exact match below 0.99: not written")
        return 1
    recipe = {"seed": args.seed, "steps": 500, "function": "lib.date_model_run",
              "torch": str(torch.__version__), "cpu_seconds": round(seconds, 1),
              "exact_match_float16": {k: round(v, 4) for k, v in scores.items()}}
    print("SHA-256", save_date_checkpoint(state, recipe, args.out), args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
