"""Peak memory and time of three attention paths as the sequence grows (CPU).

    python bench/attention_memory.py            # n = 512 ... 8192
    python bench/attention_memory.py 512 1024   # chosen lengths

Paths, each on the same (B=1, h=4, n, d_k=64) float32 self-attention with a
causal mask, forward and backward:

- textbook: `lib.scaled_dot_product_attention` (builds the (n × n) weights);
- tiled:    `lib.tiled_attention` (online softmax, 128 × 128 blocks);
- torch:    `F.scaled_dot_product_attention(is_causal=True)`, PyTorch's own.

Peak memory is measured in a fresh process per (path, n): the growth of the
process's maximum resident set size (ru_maxrss) over the inputs it already
holds, so it counts every temporary the path makes, forward and backward.
Time is the median of 3 runs after a warm-up, measured in that same process.
The figures are printed, not asserted: this machine is shared and noisy.
"""

from __future__ import annotations

import json
import resource
import statistics
import subprocess
import sys
import time

PATHS = ("textbook", "tiled", "torch")
LENGTHS = (512, 1024, 2048, 4096, 8192)


def _measure(path: str, n: int) -> dict:
    import torch
    import torch.nn.functional as F

    import lib
    from lib.model.tiled import tiled_attention

    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 4, n, 64, requires_grad=True) for _ in range(3))
    causal = lib.causal_mask(n) if path == "textbook" else None

    def run():
        if path == "textbook":
            out, _ = lib.scaled_dot_product_attention(q, k, v, causal)
        elif path == "tiled":
            out = tiled_attention(q, k, v, causal=True, block_q=128, block_k=128)
        else:
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        out.sum().backward()
        q.grad = k.grad = v.grad = None

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    run()
    peak_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    times = []
    for _ in range(3):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return {"path": path, "n": n, "peak_mb": peak_mb, "seconds": statistics.median(times)}


def main(lengths) -> None:
    rows = []
    for n in lengths:
        for path in PATHS:
            done = subprocess.run(
                [sys.executable, __file__, "--one", path, str(n)], capture_output=True, text=True, check=True
            )
            rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
            r = rows[-1]
            print(f"n={n:5d} {path:9s} peak {r['peak_mb']:8.1f} MB  time {r['seconds'] * 1e3:9.1f} ms", flush=True)
    print("\nratios at each n (textbook / tiled memory; tiled / textbook and tiled / torch time):")
    for n in lengths:
        by = {r["path"]: r for r in rows if r["n"] == n}
        mem = by["textbook"]["peak_mb"] / max(by["tiled"]["peak_mb"], 1e-9)
        print(
            f"n={n:5d}  memory textbook/tiled {mem:6.1f}x   "
            f"time tiled/textbook {by['tiled']['seconds'] / by['textbook']['seconds']:5.2f}   "
            f"tiled/torch {by['tiled']['seconds'] / by['torch']['seconds']:5.2f}"
        )


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--one":
        print(json.dumps(_measure(sys.argv[2], int(sys.argv[3]))))
    else:
        main([int(a) for a in sys.argv[1:]] or LENGTHS)
