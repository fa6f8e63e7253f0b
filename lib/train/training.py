"""Training helpers: the paper's learning-rate schedule, label smoothing and the training loop.

Introduced in chapter 8 (training). The loop also trains the other two model
families: a batch may carry its own loss (`LMBatch` for a decoder-only language
model, which chapter 11 trains; `MaskedLMBatch` for an encoder-only one, which no
chapter trains), or `train_step`/`fit` take a ``loss_fn(model, batch)``; a
`lib.Batch` keeps the encoder-decoder default.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable

import torch

from lib._checks import (
    require_device,
    require_float,
    require_int,
    require_number,
    require_positive_int,
    require_probability,
    require_tensor,
    shape,
)

__all__ = [
    "noam_lr", "noam_lambda", "label_smoothed_nll", "noam_optimizer", "FitResult", "train_step", "fit",
    "causal_lm_loss", "LMBatch", "MaskedLMBatch", "random_windows", "evaluation_windows", "lm_loss",
]


def noam_lr(step: int, d_model: int, warmup_steps: int, factor: float = 1.0) -> float:
    """The paper's schedule (section 5.3):

        lrate = factor · d_model^(-0.5) · min(step^(-0.5), step · warmup_steps^(-1.5))

    It rises linearly for ``warmup_steps`` steps, peaks at step = warmup_steps
    with factor · (d_model · warmup_steps)^(-0.5), then decays as step^(-0.5).
    Steps count from 1; step 0 has no defined rate and is refused.
    """
    require_positive_int("step", step)
    require_positive_int("d_model", d_model)
    require_positive_int("warmup_steps", warmup_steps)
    factor = require_number("factor", factor, positive=True)  # also refuses NaN and inf
    return factor * d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5)


def noam_lambda(d_model: int, warmup_steps: int, factor: float = 1.0):
    """A function for ``torch.optim.lr_scheduler.LambdaLR`` (with the optimizer's lr=1.0).

    LambdaLR counts steps from 0, the paper from 1: the lambda shifts by one.
    """
    require_positive_int("d_model", d_model)
    require_positive_int("warmup_steps", warmup_steps)
    require_number("factor", factor, positive=True)  # now, not at the scheduler's first step
    return lambda step: noam_lr(step + 1, d_model, warmup_steps, factor)


# ---------------------------------------------------------------------------
# The loss, the optimizer and the training loop.
# ---------------------------------------------------------------------------


def label_smoothed_nll(
    logits: torch.Tensor, target: torch.Tensor, label_smoothing: float = 0.1, ignore_index: int | None = None
) -> torch.Tensor:
    """Cross-entropy against the smoothed target distribution (paper, section 5.4).

    With |V| classes the target of a token whose true class is y is

        q(k) = (1 - ε_ls) · [k = y] + ε_ls / |V|,      ε_ls = ``label_smoothing``,

    and the loss is H(q, p) = -Σ_k q(k) log p(k), averaged over the tokens whose
    target is not ``ignore_index``. With ε_ls = 0 it is the ordinary negative
    log-likelihood. This is what ``nn.CrossEntropyLoss(label_smoothing=ε_ls,
    ignore_index=...)`` computes (the uniform part also covers the ignored class).

    logits (..., |V|) float, target (...) integer class ids.
    """
    require_float("logits", logits)
    require_tensor("target", target)
    label_smoothing = require_probability("label_smoothing", label_smoothing)
    if target.is_floating_point() or target.dtype == torch.bool:
        raise TypeError(f"target must hold integer class ids, got dtype {target.dtype}")
    if logits.shape[:-1] != target.shape:
        raise ValueError(
            f"logits (..., |V|) and target (...) must agree on the leading dimensions: "
            f"logits is {shape(logits)}, target is {shape(target)}"
        )
    if target.device != logits.device:
        raise ValueError(f"target is on {target.device} but logits are on {logits.device}")
    if ignore_index is not None:
        require_int("ignore_index", ignore_index)
    n_classes = logits.shape[-1]
    keep = torch.ones_like(target, dtype=torch.bool) if ignore_index is None else target != ignore_index
    safe_target = target.masked_fill(~keep, 0).long()
    if target.device.type != "meta":
        # Both value checks in one device->host copy.
        outside = keep & ((safe_target < 0) | (safe_target >= n_classes))
        n_kept, n_outside = torch.stack([keep.sum(), outside.sum()]).tolist()
        if n_outside:
            raise ValueError(
                f"target ids must lie in [0, {n_classes}) (|V| = logits.shape[-1]) or equal ignore_index"
            )
        if n_kept == 0:
            raise ValueError("every target equals ignore_index: there is nothing to average")
    log_p = logits.log_softmax(dim=-1)  # (..., |V|)
    nll = -log_p.gather(-1, safe_target.unsqueeze(-1)).squeeze(-1)  # (...)  -log p(y)
    uniform = -log_p.mean(dim=-1)  # (...)  -(1/|V|) Σ_k log p(k)
    per_token = (1.0 - label_smoothing) * nll + label_smoothing * uniform
    return (per_token * keep).sum() / keep.sum()


def noam_optimizer(
    model: torch.nn.Module, d_model: int, warmup_steps: int, factor: float = 1.0
) -> tuple[torch.optim.Adam, torch.optim.lr_scheduler.LambdaLR]:
    """The paper's optimizer (section 5.3): Adam with β1 = 0.9, β2 = 0.98, ε = 1e-9,
    its learning rate driven by `noam_lr` through a ``LambdaLR`` (base lr 1.0).

    Call ``scheduler.step()`` after each ``optimizer.step()``.
    """
    optimizer = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, noam_lambda(d_model, warmup_steps, factor))
    return optimizer, scheduler


def _model_device(model: torch.nn.Module) -> torch.device:
    """Where the model's parameters live (CPU for a model without parameters)."""
    p = next(model.parameters(), None)
    return p.device if p is not None else torch.device("cpu")


def train_step(
    model, batch, optimizer, scheduler=None, label_smoothing: float = 0.1, pad_id: int | None = None,
    clip_norm: float | None = None, loss_fn: Callable | None = None,
) -> float:
    """One optimisation step on one batch; returns the loss.

    The loss is, in this order of precedence:
    - ``loss_fn(model, batch)`` when given (any model family, any batch);
    - ``batch.loss(model)`` when the batch has its own loss (`LMBatch`,
      `MaskedLMBatch`: chapter 11 trains with `LMBatch`);
    - otherwise teacher forcing on a `lib.Batch` for an encoder-decoder: the
      model reads ``batch.tgt_in`` (BOS + target) and is scored with
      `label_smoothed_nll` on ``batch.tgt_out`` (target + EOS), PAD positions
      excluded (``pad_id`` defaults to the batch's own ``batch.pad_id``).
      ``label_smoothing`` and ``pad_id`` are used in this case only.
    The batch is moved to the model's device first (if it has ``.to``). With
    ``clip_norm`` the gradient's global norm is capped before the update (not in
    the paper; it tames the occasional loss spike of a small model).
    """
    if clip_norm is not None:
        require_number("clip_norm", clip_norm, positive=True)
    if hasattr(batch, "to"):
        batch = batch.to(_model_device(model))
    model.train()
    if loss_fn is not None:
        loss = loss_fn(model, batch)
    elif callable(getattr(batch, "loss", None)):
        loss = batch.loss(model)
    else:
        if pad_id is None:
            pad_id = getattr(batch, "pad_id", 0)
        logits = model(batch.src, batch.tgt_in, src_mask=batch.src_mask, tgt_mask=batch.tgt_mask)  # (B, m, |V|)
        loss = label_smoothed_nll(logits, batch.tgt_out, label_smoothing, ignore_index=pad_id)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    if clip_norm is not None:
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
    optimizer.step()
    if scheduler is not None:
        scheduler.step()
    return loss.item()


@dataclass
class FitResult:
    """What `fit` did: per-step ``losses`` and ``lrs``, the ``evals`` as (step, value)
    pairs, the ``steps`` run, the step at which ``target`` was first reached
    (None if never) and the wall-clock ``seconds`` (training and evaluation)."""

    losses: list[float] = field(default_factory=list)
    lrs: list[float] = field(default_factory=list)
    evals: list[tuple[int, float]] = field(default_factory=list)
    steps: int = 0
    reached_at: int | None = None
    seconds: float = 0.0


def fit(
    model: torch.nn.Module,
    next_batch: Callable[[int], object],
    steps: int,
    optimizer: torch.optim.Optimizer,
    scheduler=None,
    label_smoothing: float = 0.1,
    pad_id: int | None = None,
    evaluate: Callable[[], float] | None = None,
    eval_every: int = 0,
    target: float | None = None,
    log_every: int = 0,
    clip_norm: float | None = None,
    loss_fn: Callable | None = None,
) -> FitResult:
    """Train for at most ``steps`` steps; the course's one training loop (chapter 8).

    ``next_batch(step)`` returns the batch for step 1, 2, ... (a `lib.Batch`,
    moved to the model's device by `train_step`; its ``pad_id`` is the one
    ignored by the loss unless ``pad_id`` is given); every
    ``eval_every`` steps (and after the last) ``evaluate()`` is called, and
    training stops early once it returns at least ``target``. With
    ``log_every`` a line of progress is printed. Any model family trains here:
    the loss is chosen per batch as `train_step` says (``loss_fn``, the batch's
    own ``loss``, or the encoder-decoder default). ``label_smoothing`` and
    ``pad_id`` apply to the encoder-decoder default only: a ``loss_fn`` or a
    batch with its own loss (`LMBatch`, `MaskedLMBatch`) ignores them.
    """
    require_positive_int("steps", steps)
    require_probability("label_smoothing", label_smoothing)
    require_int("eval_every", eval_every, minimum=0)
    if clip_norm is not None:
        require_number("clip_norm", clip_norm, positive=True)
    if target is not None and evaluate is None:
        raise ValueError("a target needs an evaluate() function to compare against")
    result = FitResult()
    start = time.perf_counter()
    for step in range(1, steps + 1):
        result.lrs.append(optimizer.param_groups[0]["lr"])
        loss = train_step(
            model, next_batch(step), optimizer, scheduler, label_smoothing, pad_id, clip_norm, loss_fn
        )
        if not math.isfinite(loss):
            raise FloatingPointError(f"the loss became {loss} at step {step}")
        result.losses.append(loss)
        result.steps = step
        if log_every and step % log_every == 0:
            print(f"step {step:5d}  loss {loss:.4f}  lr {result.lrs[-1]:.2e}")
        if evaluate is not None and ((eval_every and step % eval_every == 0) or step == steps):
            value = float(evaluate())
            result.evals.append((step, value))
            if log_every:
                print(f"step {step:5d}  eval {value:.4f}")
            if target is not None and value >= target:
                result.reached_at = step
                break
    result.seconds = time.perf_counter() - start
    return result


# ---------------------------------------------------------------------------
# Language models (chapter 11): decoder-only and encoder-only batches and losses.
# ---------------------------------------------------------------------------


def causal_lm_loss(logits: torch.Tensor, tokens: torch.Tensor, ignore_index: int | None = None) -> torch.Tensor:
    """Next-token cross-entropy in nats per token: position t's logits predict token t + 1.

    logits (B, L, |V|) = model(tokens), tokens (B, L) integer ids, L >= 2. The last
    position has no next token and the first token is never a target, so the
    mean runs over the B × (L - 1) pairs (logits[:, t], tokens[:, t + 1]),
    skipping targets equal to ``ignore_index``.
    """
    require_float("logits", logits)
    require_tensor("tokens", tokens)
    if logits.dim() != 3 or tokens.dim() != 2 or logits.shape[:2] != tokens.shape:
        raise ValueError(
            f"logits must be (B, L, |V|) and tokens (B, L) with the same B and L: "
            f"logits is {shape(logits)}, tokens is {shape(tokens)}"
        )
    if tokens.shape[1] < 2:
        raise ValueError(f"tokens: a sequence of length {tokens.shape[1]} has no next token to predict (L >= 2)")
    return label_smoothed_nll(logits[:, :-1], tokens[:, 1:], 0.0, ignore_index=ignore_index)


@dataclass
class LMBatch:
    """Windows of text for a decoder-only language model: tokens (B, L + 1).

    The model reads ``tokens[:, :-1]`` and position t is scored on ``tokens[:, t + 1]``
    (`causal_lm_loss`); `train_step` calls `loss`.
    """

    tokens: torch.Tensor

    def to(self, device) -> "LMBatch":
        return LMBatch(self.tokens.to(require_device("device", device)))

    def loss(self, model) -> torch.Tensor:
        """Mean next-token cross-entropy (nats per token) of `model` on these windows."""
        inputs, targets = self.tokens[:, :-1], self.tokens[:, 1:]  # (B, L) each
        logits = model(inputs)  # (B, L, |V|)
        return label_smoothed_nll(logits, targets, 0.0)


@dataclass
class MaskedLMBatch:
    """An encoder-only (BERT-like) batch: ``tokens`` (B, L) with some positions replaced
    (e.g. by a [MASK] id) and ``targets`` (B, L): the original id at those positions,
    ``ignore_index`` (-100) elsewhere. The loss is cross-entropy at the masked positions."""

    tokens: torch.Tensor
    targets: torch.Tensor
    ignore_index: int = -100

    def to(self, device) -> "MaskedLMBatch":
        device = require_device("device", device)
        return MaskedLMBatch(self.tokens.to(device), self.targets.to(device), self.ignore_index)

    def loss(self, model) -> torch.Tensor:
        return label_smoothed_nll(model(self.tokens), self.targets, 0.0, ignore_index=self.ignore_index)


def _check_ids_1d(name: str, ids: torch.Tensor, context: int) -> None:
    require_tensor(name, ids)
    if ids.dim() != 1 or ids.is_floating_point() or ids.dtype == torch.bool:
        raise ValueError(f"{name} must be a 1-D tensor of integer token ids, got {shape(ids)} {ids.dtype}")
    require_positive_int("context", context)
    if ids.numel() < context + 1:
        raise ValueError(f"{name}: {ids.numel()} tokens are too few for windows of context + 1 = {context + 1}")


def random_windows(
    ids: torch.Tensor, context: int, batch_size: int, generator: torch.Generator | None = None
) -> LMBatch:
    """``batch_size`` windows of ``context + 1`` consecutive tokens at random offsets of
    ``ids`` (a 1-D tensor of the whole training text), as nanoGPT's ``get_batch`` draws them."""
    _check_ids_1d("ids", ids, context)
    require_positive_int("batch_size", batch_size)
    starts = torch.randint(0, ids.numel() - context, (batch_size,), generator=generator)
    return LMBatch(torch.stack([ids[s : s + context + 1] for s in starts.tolist()]))  # (B, context + 1)


def evaluation_windows(ids: torch.Tensor, context: int, n_windows: int | None = None) -> LMBatch:
    """Non-overlapping windows of ``context + 1`` tokens, evenly spread over ``ids``
    (all of them when ``n_windows`` is None): a fixed, reproducible validation set."""
    _check_ids_1d("ids", ids, context)
    available = (ids.numel() - 1) // context  # windows share one token at the borders
    n = available if n_windows is None else min(require_positive_int("n_windows", n_windows), available)
    starts = torch.linspace(0, available - 1, n).round().long() * context  # window k starts at k·context
    return LMBatch(torch.stack([ids[s : s + context + 1] for s in starts.tolist()]))


@torch.no_grad()
def lm_loss(model, batch: LMBatch, batch_size: int = 64) -> float:
    """Mean next-token cross-entropy (nats per token) of ``model`` over every window of
    ``batch``, in chunks of ``batch_size`` windows, in eval mode (restored afterwards)."""
    require_positive_int("batch_size", batch_size)
    was_training = model.training
    model.eval()
    batch = batch.to(_model_device(model))
    total, count = 0.0, 0
    for i in range(0, batch.tokens.shape[0], batch_size):
        chunk = LMBatch(batch.tokens[i : i + batch_size])
        n = chunk.tokens[:, 1:].numel()
        total += float(chunk.loss(model)) * n
        count += n
    model.train(was_training)
    return total / count
