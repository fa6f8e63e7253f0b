"""Counting models of text: the n-gram baselines of chapter 11.

An n-gram model predicts token x_t from the n - 1 tokens before it, with the
counts of the training ids and add-α smoothing (no back-off):

    p(x_t | x_{t-n+1} ... x_{t-1}) = (c(x_{t-n+1} ... x_t) + α) / (c(x_{t-n+1} ... x_{t-1}) + α |V|)

where c counts occurrences in the training ids (a context is counted wherever it is
followed by a token, so the probabilities of each context sum to 1). n = 1 is the
unigram model (the empty context occurs len(train) times). Each n-gram is one
integer, its ids read as digits in base |V|, so counting is one `torch.unique`.
"""

from __future__ import annotations

import math

import torch

from lib._checks import require_number, require_positive_int, require_tensor

__all__ = ["ngram_nats", "ngram_token_nats"]


def _keys(ids: torch.Tensor, n: int, vocab_size: int) -> torch.Tensor:
    """The n-grams of ids as integers: ids[t - n + 1 .. t] in base |V|, for t >= n - 1."""
    keys = torch.zeros(ids.numel() - n + 1, dtype=torch.int64)
    for j in range(n):
        keys = keys * vocab_size + ids[j : ids.numel() - n + 1 + j]
    return keys


def _counts_of(keys: torch.Tensor, table: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """How often each key occurs in the counted table (sorted unique keys, counts)."""
    unique, counts = table
    if unique.numel() == 0:
        return torch.zeros_like(keys)
    at = torch.searchsorted(unique, keys).clamp(max=unique.numel() - 1)
    return torch.where(unique[at] == keys, counts[at], 0)


def _check_ids(name: str, ids: object, vocab_size: int) -> torch.Tensor:
    ids = require_tensor(name, ids)
    if ids.is_floating_point() or ids.dtype == torch.bool or ids.is_complex():
        raise TypeError(f"{name} must hold integer token ids, got dtype {ids.dtype}")
    if ids.dim() != 1:
        raise ValueError(f"{name} must be one sequence of ids, shape (N,), got {tuple(ids.shape)}")
    if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= vocab_size):
        raise ValueError(f"{name}: ids must lie in 0..{vocab_size - 1} (vocab_size={vocab_size})")
    return ids.long().cpu()


def ngram_nats(
    train_ids: torch.Tensor,
    eval_ids: torch.Tensor,
    n: int,
    vocab_size: int,
    alpha: float = 0.01,
) -> float:
    """Mean -ln p of every token of ``eval_ids`` that has n - 1 tokens before it, in nats.

    train_ids, eval_ids: (N,) integer ids below ``vocab_size``; the model is counted on
    ``train_ids`` only. ``alpha`` > 0 is added to every count (add-α smoothing), so an
    unseen n-gram keeps a small probability. Scored positions: t = n - 1 .. len - 1.
    """
    return -float(_log_probs(train_ids, eval_ids, n, vocab_size, alpha, rows=False).mean())


def ngram_token_nats(
    train_ids: torch.Tensor,
    eval_ids: torch.Tensor,
    n: int,
    vocab_size: int,
    alpha: float = 0.01,
) -> torch.Tensor:
    """-ln p of each token that has n - 1 tokens before it, one value per scored token.

    The per-token terms whose mean `ngram_nats` returns, so that a counting model can be
    scored on exactly the positions another model is scored on (chapter 11 compares it
    with the Transformer's per-position losses). eval_ids: (L,) or (B, L), each row scored
    on its own (a row's first n - 1 tokens are context only). Returns float64 of shape
    (L - n + 1,) or (B, L - n + 1): entry j is the token at index j + n - 1.
    """
    return -_log_probs(train_ids, eval_ids, n, vocab_size, alpha, rows=True)


def _log_probs(train_ids, eval_ids, n, vocab_size, alpha, rows):
    n = require_positive_int("n", n)
    vocab_size = require_positive_int("vocab_size", vocab_size)
    alpha = require_number("alpha", alpha, positive=True)
    if vocab_size ** n >= 2**62:
        raise ValueError(f"n: |V|^n = {vocab_size}^{n} does not fit in a 64-bit key; use a smaller n")
    train_ids = _check_ids("train_ids", train_ids, vocab_size)
    batched = rows and isinstance(eval_ids, torch.Tensor) and eval_ids.dim() == 2
    if batched:
        batch = [_check_ids("eval_ids", row, vocab_size) for row in eval_ids]
        if not batch:
            raise ValueError("eval_ids: no rows to score")
    else:
        batch = [_check_ids("eval_ids", eval_ids, vocab_size)]
    if train_ids.numel() < n:
        raise ValueError(f"train_ids: {train_ids.numel()} ids hold no {n}-gram")
    if batch[0].numel() < n:
        raise ValueError(f"eval_ids: {batch[0].numel()} ids hold no {n}-gram to score")
    full = _keys(train_ids, n, vocab_size)  # every n-gram of the training ids
    table = torch.unique(full, return_counts=True)  # sorted distinct n-grams, their counts
    # a context's count is the sum over the n-grams that start with it (sorted, so adjacent)
    contexts, group = torch.unique_consecutive(table[0] // vocab_size, return_inverse=True)
    context_counts = torch.zeros(contexts.numel(), dtype=torch.int64).index_add_(0, group, table[1])
    context_table = (contexts, context_counts)
    wanted = torch.stack([_keys(ids, n, vocab_size) for ids in batch])  # (B, L - n + 1)
    c_full = _counts_of(wanted, table).double()
    c_context = _counts_of(wanted // vocab_size, context_table).double()
    log_p = (c_full + alpha).log() - (c_context + alpha * vocab_size).log()
    return log_p if batched else log_p[0]
