"""Mixed precision on the CPU: the date task trained under bfloat16 autocast vs float32.

Introduced in the "Beyond the paper" chapter on efficient attention.

Under ``torch.autocast(device_type="cpu", dtype=torch.bfloat16)`` the matrix
products of the forward pass run in bfloat16 while the parameters, their
gradients and the optimizer's state stay float32 (the "master weights").
bfloat16 keeps float32's 8 exponent bits (range to about 3.4e38) and gives up
mantissa (8 bits against 24), so it rarely overflows where float16 (5 exponent
bits, largest finite value 65504) does; that is why bfloat16 needs no loss
scaling. ``torch.float16`` is accepted too (the chapter's Play section), and
this function does not scale the loss: small float16 gradients may round to 0.

The logits come out of the last matrix product already rounded to bfloat16;
casting them to float32 before the loss cannot restore what that rounding
lost, but keeps the log-sum-exp over the vocabulary and its log in float32.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field

import torch

from lib._checks import require_positive_int
from lib.train.data import make_batch
from lib.train.dates import DATE_VOCAB, make_date_split, sample_pairs
from lib.train.parallel import date_model_config
from lib.train.training import label_smoothed_nll

__all__ = ["PrecisionRun", "train_dates_mixed_precision"]


@dataclass
class PrecisionRun:
    """The loss of every step, the CPU seconds of training (``time.process_time``:
    this process, all its threads), and the model."""

    dtype: torch.dtype | None
    losses: list[float] = field(default_factory=list)
    seconds: float = 0.0
    model: torch.nn.Module | None = None


def train_dates_mixed_precision(
    steps: int, *, autocast_dtype: torch.dtype | None = None, batch_size: int = 64, seed: int = 0, lr: float = 2e-3
) -> PrecisionRun:
    """Train the small date model for ``steps`` steps, the forward pass under
    ``torch.autocast("cpu", dtype=autocast_dtype)`` (None: plain float32).

    Both runs start from the same weights and see the same batches, so their
    loss curves differ only through the arithmetic.
    """
    require_positive_int("steps", steps)
    require_positive_int("batch_size", batch_size)
    if autocast_dtype not in (None, torch.bfloat16, torch.float16):
        raise ValueError(f"autocast_dtype must be None, torch.bfloat16 or torch.float16, got {autocast_dtype!r}")
    torch.manual_seed(seed)
    model = date_model_config(dropout=0.1).build()
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.98), eps=1e-9)
    split, rng = make_date_split(seed=seed), random.Random(seed)
    run = PrecisionRun(dtype=autocast_dtype, model=model)
    model.train()
    start = time.process_time()  # CPU seconds: a busy machine inflates them far less than a wall clock
    for _ in range(steps):
        batch = make_batch(sample_pairs(split.train, batch_size, rng), DATE_VOCAB)
        with torch.autocast("cpu", dtype=autocast_dtype or torch.bfloat16, enabled=autocast_dtype is not None):
            logits = model(batch.src, batch.tgt_in, src_mask=batch.src_mask, tgt_mask=batch.tgt_mask)
            # logits are bfloat16 here; the loss's log-sum-exp and log run in float32
            loss = label_smoothed_nll(logits.float(), batch.tgt_out, 0.1, ignore_index=DATE_VOCAB.pad_id)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()  # outside autocast: gradients flow back in the dtypes of the forward pass
        optimizer.step()
        run.losses.append(loss.item())
    run.seconds = time.process_time() - start
    model.eval()
    return run
