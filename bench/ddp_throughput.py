"""Throughput of data-parallel training on this CPU: 1 process against 2 (DDP, gloo).

    python bench/ddp_throughput.py                 # 40 steps, global batch 64
    python bench/ddp_throughput.py 100 128         # steps, global batch

Every run trains the efficient-attention chapter's date model on the same
global batches with one thread per process: one process without DDP
(`lib.train_single_process`), then `lib.train_data_parallel` over 1 and over 2
processes. Times cover the training steps only (not the start-up of the
processes); the figures are printed, not asserted, because this machine is
shared. The 2-process parameters are compared with the one-process run that
averages the two shards' mean losses, as in the chapter.
"""

from __future__ import annotations

import sys

import torch

import lib


def main(steps: int, global_batch: int) -> None:
    torch.set_num_threads(1)
    runs = {
        "1 process, no DDP": lib.train_single_process(steps, global_batch),
        "1 process, DDP": lib.train_data_parallel(1, steps, global_batch, threads_per_process=1),
        "2 processes, DDP": lib.train_data_parallel(2, steps, global_batch, threads_per_process=1),
    }
    base = runs["1 process, no DDP"].seconds
    for name, run in runs.items():
        rate = steps * global_batch / run.seconds
        print(f"{name:18s} {run.seconds:7.2f} s  {rate:7.1f} examples/s  speed-up {base / run.seconds:4.2f}x")
    reference = lib.train_single_process(steps, global_batch, shards=2).state_dict
    ddp = runs["2 processes, DDP"].state_dict
    difference = max(float((ddp[k] - reference[k]).abs().max()) for k in ddp)
    print(f"max |parameter difference|, 2-process DDP vs one process with 2 shards: {difference:.1e}")


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:]]
    main(*(args or [40, 64]))
