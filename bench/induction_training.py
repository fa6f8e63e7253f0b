"""Does an induction head grow in a two-layer attention-only model in a few CPU minutes?
(chapter 16, exercise 5)

Trains `lib.train_attention_only` on the course's Shakespeare characters (as chapter 11
prepares them) for each seed given and prints, at every checkpoint: layer 2's best
induction score and layer 1's best previous-token score on random lowercase characters
written twice (``probe_range`` = 'a'..'z'), the held-out loss at positions 1-8 and at
the last 32 positions, and the loss on the probe's two copies.

    OMP_NUM_THREADS=1 python bench/induction_training.py --seeds 0 1 --steps 1200
    OMP_NUM_THREADS=1 python bench/induction_training.py --repeat-fraction 1.0 --lr 1e-2 \
        --steps 2000

Measured (2026-11-25, one thread on a shared 2-core machine; d_model 64, 4 heads, batch
32, learned positions unless said; "ind" = layer 2's best induction score at init ->
highest over the run -> end; "prev" = layer 1's best previous-token score at the end;
held-out loss early / late at the end; probe = first-copy -> second-copy loss at the end):

| setting                                   | seed | ind                   | prev  | early / late  | probe        |
|-------------------------------------------|------|-----------------------|-------|---------------|--------------|
| plain text, ctx 128, lr 3e-3, 1200 steps  | 0    | 0.018 / 0.018 / 0.003 | 0.429 | 2.188 / 2.049 | 5.99 -> 6.07 |
| plain text, ctx 128, lr 3e-3, 1200 steps  | 1    | 0.018 / 0.018 / 0.004 | 0.302 | 2.312 / 2.131 | 5.84 -> 5.93 |
| repeat 0.5, 1200 steps                    | 0    | 0.018 / 0.018 / 0.003 | 0.466 | 2.197 / 2.059 | 5.92 -> 6.07 |
| repeat 0.5, rotary, 1200 steps            | 0    | 0.018 / 0.018 / 0.010 | 0.256 | 2.125 / 1.929 | 6.12 -> 6.14 |
| plain text, rotary, 1200 steps            | 0    | 0.018 / 0.018 / 0.005 | 0.283 | 2.211 / 1.929 | 6.19 -> 6.24 |
| repeat 1.0, rotary, 2000 steps            | 0    | 0.018 / 0.018 / 0.002 | 0.366 | 2.174 / 1.948 | 6.10 -> 6.12 |
| repeat 1.0, lr 1e-2, 2000 steps           | 0    | 0.018 / 0.018 / 0.005 | 0.623 | 2.079 / 1.897 | 6.22 -> 6.20 |
| repeat 1.0, lr 1e-2, ctx 64, 4000 steps   | 0    | 0.030 / 0.045 / 0.044 | 0.555 | 2.139 / 1.968 | 6.42 -> 6.01 |

(ctx 64 uses a probe of 24 characters per copy; the others 40.) No setting grew a layer-2
head above an induction score of 0.05; see the search log in the session report for the
synthetic checks. The 1200-step runs take about a minute of CPU time (50 s to 8 min of
wall time on the loaded machine); the 4000-step run, 8 min of wall time.
"""

from __future__ import annotations

import argparse
import pathlib
import sys

import torch

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import lib  # noqa: E402
from lib.train.corpus import load_corpus  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--steps", type=int, default=1200)
    ap.add_argument("--every", type=int, default=200)
    ap.add_argument("--context", type=int, default=128)
    ap.add_argument("--d-model", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--repeat-fraction", type=float, default=0.0)
    ap.add_argument("--position", default="learned", choices=["learned", "rotary"])
    ap.add_argument("--probe-length", type=int, default=40)
    args = ap.parse_args()
    torch.set_num_threads(1)
    corpus = load_corpus()
    chars = sorted(set(corpus.train_text))
    stoi = {c: i for i, c in enumerate(chars)}

    def encode(text):
        return torch.tensor([stoi[c] for c in text], dtype=torch.long)

    train_ids, valid_ids = encode(corpus.train_text), encode(corpus.validation_text)
    print(vars(args))
    for seed in args.seeds:
        run = lib.train_attention_only(
            train_ids, valid_ids, len(chars), seed=seed, steps=args.steps, every=args.every,
            context=args.context, d_model=args.d_model, n_heads=args.heads, lr=args.lr,
            repeat_fraction=args.repeat_fraction, position=args.position,
            probe_length=args.probe_length, probe_range=(stoi["a"], stoi["z"] + 1))
        ind = run.best_induction(1)
        print(f"seed {seed}: {run.seconds:.0f} s")
        for i, step in enumerate(run.steps):
            prev = float(run.previous[i][0].max())
            print(f"  step {step:5d}  ind {ind[i]:.3f}  prev {prev:.3f}  early "
                  f"{run.early_loss[i]:.3f}  late {run.late_loss[i]:.3f}  probe "
                  f"{run.first_half[i]:.2f} -> {run.second_half[i]:.2f}", flush=True)


if __name__ == "__main__":
    main()
