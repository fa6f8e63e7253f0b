"""Peak memory and time of three attention paths as the sequence grows (CPU).

    python bench/attention_memory.py                  # n = 512 ... 8192, one thread
    python bench/attention_memory.py 512 1024         # chosen lengths
    python bench/attention_memory.py --threads 2 2048 # more threads per measurement

Paths, each on the same (B=1, h=4, n, d_k=64) float32 self-attention with a
causal mask, forward and backward:

- textbook: `lib.scaled_dot_product_attention` (builds the (n × n) weights);
- tiled:    `lib.tiled_attention` (online softmax, 128 × 128 blocks);
- torch:    `F.scaled_dot_product_attention(is_causal=True)`, PyTorch's own.

Each (path, n) is measured by `lib.measure_attention` in a fresh process, after
a first run at a tiny length has paid the one-time costs (library code paged in,
thread pools, allocator arenas): the peak of the bytes allocated for tensors
during one run, forward and backward (from the allocator's events: the same on
every machine), the growth of the peak resident memory (what the operating
system sees), and the median of 3 further runs' CPU seconds (``time.process_time``,
all the process's threads: a busy machine inflates it far less than a wall clock).
The figures are printed, not asserted. The efficient-attention chapter quotes them.
"""

from __future__ import annotations

import argparse

import lib

LENGTHS = (512, 1024, 2048, 4096, 8192)


def main(lengths, threads: int) -> None:
    rows = {}
    for n in lengths:
        for path in lib.ATTENTION_PATHS:
            r = rows[n, path] = lib.measure_attention(path, n, threads=threads)
            print(
                f"n={n:5d} {path:9s} allocated {r['allocated_mb']:8.1f} MiB  "
                f"resident {r['peak_mb']:8.1f} MiB  time {r['seconds'] * 1e3:9.1f} ms",
                flush=True,
            )
    print(
        f"\nratios at each n ({threads} thread(s); textbook / tiled allocated memory; "
        "tiled / textbook and tiled / torch time):"
    )
    for n in lengths:
        book, tiled, torch_ = (rows[n, p] for p in lib.ATTENTION_PATHS)
        print(
            f"n={n:5d}  memory textbook/tiled {book['allocated_mb'] / tiled['allocated_mb']:6.1f}x   "
            f"time tiled/textbook {tiled['seconds'] / book['seconds']:5.2f}   "
            f"tiled/torch {tiled['seconds'] / torch_['seconds']:5.2f}"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("lengths", nargs="*", type=int, default=list(LENGTHS))
    parser.add_argument("--threads", type=int, default=1, help="torch threads per measurement (default 1)")
    args = parser.parse_args()
    main(args.lengths, args.threads)
