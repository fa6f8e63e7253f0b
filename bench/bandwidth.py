"""Memory bandwidth of this machine as a curve over buffer sizes (chapter 17).

Run:  .venv/bin/python bench/bandwidth.py [--threads 2] [--repeats 5] [--max-mib 4096]

For each buffer size (1 MiB to --max-mib, doubling) it times a read (``x.sum()``, bytes
read = the buffer) and a copy (``dst.copy_(src)``, bytes moved = read + write = 2 x the
buffer), best of --repeats after one warm-up each. Small buffers sit in the caches;
the plateau at the large sizes is the bound a batch-1 decoding step can hope for
(bytes read per token / bandwidth = the shortest time per token). Prints the load
average before and after: the machine is shared, and neighbours move the figures.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch


def best_seconds(fn, repeats: int) -> float:
    fn()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def curve(max_mib: int, repeats: int) -> list[tuple[int, float, float]]:
    rows, mib = [], 1
    while mib <= max_mib:
        n = mib * 2**20 // 4
        src = torch.empty(n, dtype=torch.float32).uniform_()
        dst = torch.empty_like(src)
        read = n * 4 / best_seconds(lambda: src.sum(), repeats)
        copy = 2 * n * 4 / best_seconds(lambda: dst.copy_(src), repeats)
        rows.append((mib, read / 1e9, copy / 1e9))
        print(f"{mib:>6} MiB  read {read / 1e9:6.1f} GB/s  copy {copy / 1e9:6.1f} GB/s", flush=True)
        del src, dst
        mib *= 2
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--max-mib", type=int, default=4096)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"{args.threads} threads, best of {args.repeats}; load average before: "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    rows = curve(args.max_mib, args.repeats)
    plateau = [r for r in rows if r[0] >= 256]
    if plateau:
        print(f"plateau (>= 256 MiB): read median {statistics.median(r[1] for r in plateau):.1f} "
              f"GB/s, copy median {statistics.median(r[2] for r in plateau):.1f} GB/s")
    print(f"load average after: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
