"""Forward + backward time of lib.MultiHeadAttention vs nn.MultiheadAttention.

Run:  .venv/bin/python bench/attention.py [--repeats 15] [--dropout 0.0]

Both modules are in train mode with the same weights, self-attention on the
same input; torch's is called with need_weights=False, its fastest path.
Runs are interleaved (lib, torch, lib, torch, ...) so that load from other
processes on this shared machine hits both alike; the figure of merit is the
median of the per-pair ratios lib/torch. Goal: <= 1.2.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

import torch
from torch import nn

import lib

CONFIGS = [  # (B, L, d_model, n_heads)
    (32, 128, 512, 8),
    (8, 512, 512, 8),
    (1, 2048, 256, 4),
]


def step_time(fn, x) -> float:
    """Seconds for one forward + backward pass."""
    start = time.perf_counter()
    fn(x).square().mean().backward()
    return time.perf_counter() - start


def bench(B, L, d, h, repeats, dropout):
    torch.manual_seed(0)
    ours = lib.MultiHeadAttention(d, h, dropout=dropout).train()
    theirs = nn.MultiheadAttention(d, h, dropout=dropout, batch_first=True).train()
    lib.copy_mha_to_torch(ours, theirs)
    x = torch.randn(B, L, d, requires_grad=True)
    run_ours = lambda t: ours(t, t, t)
    run_theirs = lambda t: theirs(t, t, t, need_weights=False)[0]
    if dropout == 0.0:  # same function: check before timing it
        torch.testing.assert_close(run_ours(x), run_theirs(x), atol=1e-4, rtol=1e-4)
    for _ in range(2):  # warm-up
        step_time(run_ours, x), step_time(run_theirs, x)
    t_ours, t_theirs = [], []
    for _ in range(repeats):
        t_ours.append(step_time(run_ours, x))
        t_theirs.append(step_time(run_theirs, x))
    ratios = [a / b for a, b in zip(t_ours, t_theirs)]
    return statistics.median(t_ours), statistics.median(t_theirs), statistics.median(ratios)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--dropout", type=float, default=0.0)
    args = parser.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {platform.machine()}, "
          f"{platform.processor() or 'cpu'}; dropout={args.dropout}; median of {args.repeats} interleaved pairs")
    print(f"{'B':>3} {'L':>5} {'d':>4} {'h':>2} | {'lib ms':>8} {'torch ms':>9} | {'lib/torch':>9}")
    for B, L, d, h in CONFIGS:
        ours, theirs, ratio = bench(B, L, d, h, args.repeats, args.dropout)
        flag = "ok" if ratio <= 1.2 else "ABOVE GOAL 1.2"
        print(f"{B:>3} {L:>5} {d:>4} {h:>2} | {ours * 1e3:8.1f} {theirs * 1e3:9.1f} | {ratio:9.3f}  {flag}")


if __name__ == "__main__":
    main()
