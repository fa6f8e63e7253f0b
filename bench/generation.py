"""Greedy generation with vs without the KV cache: tokens per second at 64, 256 and 1024 new tokens.

Run:  .venv/bin/python bench/generation.py [--threads 2] [--repeats 3]

The model has nanoGPT's CPU Shakespeare sizes (4 layers, 4 heads, d_model 128,
d_ff 512, |V| = 84; `lib.DecoderOnlyModel`, pre-LN), with a positional table long
enough for a 16-token prompt + 1024 new tokens. Its weights are random: the cost
of a step does not depend on them. One sequence (B = 1), as in interactive use.
The two paths are interleaved (cached, uncached, cached, ...) so load from other
processes hits both alike; the figure is the best of ``--repeats`` runs of each.
Goal: >= 5x at 256 new tokens. Both paths return the same tokens (checked here too).
"""

from __future__ import annotations

import argparse
import platform
import time

import torch

import lib


def timed(fn) -> tuple[float, torch.Tensor]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--lengths", type=int, nargs="+", default=[64, 256, 1024])
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    prompt_len = 16
    model = lib.DecoderOnlyModel(84, d_model=128, n_heads=4, n_layers=4, d_ff=512, dropout=0.0,
                                 norm_first=True, max_len=prompt_len + max(args.lengths)).eval()
    prompt = torch.randint(0, 84, (1, prompt_len), generator=torch.Generator().manual_seed(1))
    print(f"torch {torch.__version__}, {platform.machine()}, {args.threads} threads; "
          f"prompt {prompt_len} tokens, B = 1, best of {args.repeats}")
    print(f"{'new tokens':>10}  {'cached tok/s':>12}  {'uncached tok/s':>14}  {'speed-up':>8}")
    for n in args.lengths:
        best = {True: float("inf"), False: float("inf")}
        outs = {}
        for use_cache in (True, False):  # one untimed run each: one-time start-up costs
            lib.generate(model, prompt, n, greedy=True, use_cache=use_cache)
        for _ in range(args.repeats):
            for use_cache in (True, False):
                seconds, out = timed(lambda: lib.generate(model, prompt, n, greedy=True, use_cache=use_cache))
                best[use_cache] = min(best[use_cache], seconds)
                outs[use_cache] = out
        assert torch.equal(outs[True], outs[False]), "cached and uncached tokens differ"
        print(f"{n:>10}  {n / best[True]:>12.0f}  {n / best[False]:>14.0f}  {best[False] / best[True]:>7.1f}x",
              flush=True)


if __name__ == "__main__":
    main()
