"""Chapter 2's √d_k question at every d_k: is the damage the start or the step?

Run:  .venv/bin/python bench/sqrt_dk_factorial.py [--steps 300] [--seeds 0 1]

Under Adam, the unscaled layer (scores x W^Q · x W^K) is the scaled layer with
W^Q, W^K and the learning rate all c = d_k^(1/4) times larger
(tests/test_scaling.py checks it). So chapter 2's two runs differ in two things
at once: where the scores start (saturated or not) and how fast they move. This
script runs the 2×2 in the scaled parametrisation with `lib.retrieval_run`:

  A: unit start,      step lr      (the chapter's "scaled")
  B: saturated start, step c² lr   (the chapter's "unscaled", run as such)
  C: unit start,      step c lr    (init_scale 1, lr × c)
  D: saturated start, step c lr    (init_scale c, lr)

C and D take the same steps and differ only in the start. The chapter runs the
2×2 at d_k = 16 and 64; this script adds 256 and 1024 (about 2 CPU minutes on
one thread) and prints the mean of the last 20 steps per seed and CPU time.

Measured on the shared 2-core Xeon (torch 2.13, 43 CPU s), mean of the last 20 of 300 steps:

     d_k  seed |      A |      B |      C |      D | D / C
      16     0 |  6.946 | 15.670 |  4.446 | 22.334 |   5.0
      16     1 |  6.863 | 16.741 |  4.401 | 22.750 |   5.2
      64     0 |  1.378 | 13.270 |  0.371 | 25.233 |  68.0
      64     1 |  1.157 |  8.934 |  0.308 | 23.884 |  77.5
     256     0 |  0.228 |  8.136 |  0.043 | 27.790 | 647.1
     256     1 |  0.255 |  9.307 |  0.063 | 27.635 | 437.0
    1024     0 |  0.110 |  9.156 |  0.201 | 27.428 | 136.3
    1024     1 |  0.130 |  7.462 |  0.419 | 27.579 |  65.8

The saturated start does the damage at every d_k (D / C from 5 to 647); the faster
steps help (C < A, B < D) except at d_k = 1024, where C ends above A on both seeds.
"""

from __future__ import annotations

import argparse
import time

import lib


def final(losses: list[float]) -> float:
    return sum(losses[-20:]) / 20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--dims", type=int, nargs="+", default=[16, 64, 256, 1024])
    args = parser.parse_args()
    start = time.process_time()
    print(f"retrieval task, {args.steps} steps, mean loss of the last 20 steps")
    print(" d_k  seed |      A |      B |      C |      D | D / C")
    for d_k in args.dims:
        c = d_k ** 0.25
        for seed in args.seeds:
            runs = {
                "A": lib.retrieval_run(d_k, True, seed, steps=args.steps),
                "B": lib.retrieval_run(d_k, False, seed, steps=args.steps),
                "C": lib.retrieval_run(d_k, True, seed, steps=args.steps, lr=1e-3 * c),
                "D": lib.retrieval_run(d_k, True, seed, steps=args.steps, init_scale=c),
            }
            f = {k: final(v) for k, v in runs.items()}
            print(f"{d_k:4d}  {seed:4d} | " + " | ".join(f"{f[k]:6.3f}" for k in "ABCD")
                  + f" | {f['D'] / f['C']:5.1f}", flush=True)
    print(f"CPU time: {time.process_time() - start:.0f} s")


if __name__ == "__main__":
    main()
