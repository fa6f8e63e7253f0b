"""Data-parallel training on one machine: `torch.distributed` with DistributedDataParallel.

Introduced in the "Beyond the paper" chapter on efficient attention and scaling out.

Each of ``world_size`` processes holds a full copy of the model and takes
``global_batch / world_size`` examples of every step's batch. After the
backward pass, DDP averages the gradients over the processes (an all-reduce,
here over the CPU "gloo" backend), so every copy takes the same optimizer step
and the copies stay identical. (DDP also broadcasts rank 0's parameters once, when
it wraps the model, and its buffers before every forward pass by default.)

That average is a *mean of per-process means*. When the processes' shards hold
different numbers of target tokens, it is not the mean over all tokens of the
global batch: `train_single_process` reproduces exactly what DDP computes, by
averaging the shards' losses the same way, and the chapter checks that both
end with the same parameters.

The processes meet at a rendezvous on 127.0.0.1 (a free port chosen here) and
stop when training ends; nothing listens on another address.
"""

from __future__ import annotations

import datetime
import os
import random
import socket
import tempfile
import time
from dataclasses import dataclass, field

import torch

from lib._checks import require_positive_int
from lib.model.transformer import TransformerConfig
from lib.train.data import make_batch
from lib.train.dates import DATE_VOCAB, make_date_split, sample_pairs
from lib.train.training import label_smoothed_nll

__all__ = ["ParallelRun", "date_model_config", "train_data_parallel", "train_single_process"]


def date_model_config(**overrides) -> TransformerConfig:
    """The chapter's small date model, with dropout 0 so that runs can be compared exactly."""
    fields = dict(
        src_vocab_size=len(DATE_VOCAB), tgt_vocab_size=len(DATE_VOCAB), d_model=64, n_heads=4,
        n_layers=2, d_ff=256, dropout=0.0, max_len=64,
    )
    fields.update(overrides)
    return TransformerConfig(**fields)


@dataclass
class ParallelRun:
    """What a run did: the final parameters, the loss of every step (as the run
    defines it) and the wall-clock seconds of the training steps (no start-up)."""

    world_size: int
    state_dict: dict
    losses: list[float] = field(default_factory=list)
    seconds: float = 0.0


def _batches(global_batch: int, steps: int, seed: int):
    """The same global batches for every process: the step number seeds the draw."""
    split = make_date_split(seed=seed)
    for step in range(steps):
        yield sample_pairs(split.train, global_batch, random.Random(seed * 100_003 + step))


def _optimizer(model: torch.nn.Module, lr: float) -> torch.optim.Optimizer:
    return torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)


def _shard_loss(model, pairs) -> torch.Tensor:
    batch = make_batch(pairs, DATE_VOCAB)
    logits = model(batch.src, batch.tgt_in, src_mask=batch.src_mask, tgt_mask=batch.tgt_mask)
    return label_smoothed_nll(logits, batch.tgt_out, 0.0, ignore_index=DATE_VOCAB.pad_id)


def _check(world_size, steps, global_batch, lr, name="world_size") -> None:
    require_positive_int(name, world_size)
    require_positive_int("steps", steps)
    require_positive_int("global_batch", global_batch)
    if global_batch % world_size:
        raise ValueError(
            f"global_batch={global_batch} does not split evenly over {name}={world_size}"
            + (" processes" if name == "world_size" else "")
        )
    if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not 0 < lr < float("inf"):
        raise ValueError(f"lr must be a positive finite number, got {lr!r}")


def train_single_process(
    steps: int, global_batch: int, *, shards: int = 1, seed: int = 0, lr: float = 0.05, **config
) -> ParallelRun:
    """What DDP over ``shards`` processes computes, done in one process.

    Each step's global batch is cut into ``shards`` equal parts as DDP would
    cut it; the loss is the mean of the parts' mean losses.
    """
    _check(shards, steps, global_batch, lr, name="shards")
    torch.manual_seed(seed)
    model = date_model_config(**config).build()
    optimizer = _optimizer(model, lr)
    run = ParallelRun(world_size=1, state_dict={})
    start = time.perf_counter()
    for pairs in _batches(global_batch, steps, seed):
        size = global_batch // shards
        loss = sum(_shard_loss(model, pairs[r * size:(r + 1) * size]) for r in range(shards)) / shards
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        run.losses.append(loss.item())
    run.seconds = time.perf_counter() - start
    run.state_dict = {k: v.detach().clone() for k, v in model.state_dict().items()}
    return run


def _worker(rank: int, world_size: int, port: int, spec: dict, result_path: str) -> None:
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    torch.set_num_threads(spec["threads"])
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size,
        timeout=datetime.timedelta(seconds=60),
    )
    try:
        torch.manual_seed(spec["seed"])  # the same start on every rank (DDP also broadcasts rank 0's)
        model = DistributedDataParallel(date_model_config(**spec["config"]).build())
        optimizer = _optimizer(model, spec["lr"])
        size = spec["global_batch"] // world_size
        losses = []
        dist.barrier()
        start = time.perf_counter()
        for pairs in _batches(spec["global_batch"], spec["steps"], spec["seed"]):
            loss = _shard_loss(model, pairs[rank * size:(rank + 1) * size])  # this rank's shard
            optimizer.zero_grad(set_to_none=True)
            loss.backward()  # DDP all-reduces (averages) the gradients here
            optimizer.step()
            mean = loss.detach().clone()
            dist.all_reduce(mean)  # the step's loss as DDP optimises it: the mean of the ranks'
            losses.append(mean.item() / world_size)
        dist.barrier()
        seconds = time.perf_counter() - start
        if rank == 0:
            state = {k: v.detach().clone() for k, v in model.module.state_dict().items()}
            torch.save({"state_dict": state, "losses": losses, "seconds": seconds}, result_path)
    finally:
        dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def train_data_parallel(
    world_size: int,
    steps: int,
    global_batch: int,
    *,
    seed: int = 0,
    lr: float = 0.05,
    threads_per_process: int | None = None,
    **config,
) -> ParallelRun:
    """Train the date model with DDP over ``world_size`` local processes (gloo backend).

    The processes are started with `torch.multiprocessing.spawn`, meet on a
    free port of 127.0.0.1 and exit when done; rank 0's parameters come back.
    ``threads_per_process`` defaults to the machine's cores shared out.
    """
    _check(world_size, steps, global_batch, lr)
    if threads_per_process is not None:  # 0 or False must not fall back to the default
        require_positive_int("threads_per_process", threads_per_process)
    threads = threads_per_process or max(1, (os.cpu_count() or 1) // world_size)
    spec = dict(steps=steps, global_batch=global_batch, seed=seed, lr=lr, threads=threads, config=config)
    with tempfile.TemporaryDirectory() as tmp:
        result_path = os.path.join(tmp, "rank0.pt")
        torch.multiprocessing.spawn(
            _worker, args=(world_size, _free_port(), spec, result_path), nprocs=world_size, join=True
        )
        result = torch.load(result_path)
    return ParallelRun(world_size, result["state_dict"], result["losses"], result["seconds"])
