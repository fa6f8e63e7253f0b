"""Turning a trained encoder-decoder into output sequences: greedy decoding and beam search.

Introduced in chapter 8 (training).

Both functions work with any model that has the two halves of `lib.Transformer`:

    model.encode(src, src_mask)                   -> memory (B, n, d_model)
    model.decode(tgt, memory, src_mask, tgt_mask) -> logits (B, m, V)

They put the model in eval mode, run under ``torch.no_grad()`` and return ids
*without* the leading BOS, each row ending at its EOS and padded with
``pad_id`` after it (a row that never produced EOS within ``max_len`` is cut).
"""

from __future__ import annotations

import torch

from lib._checks import require_positive_int, require_tensor, shape
from lib.model.attention import causal_mask, padding_mask

__all__ = ["greedy_decode", "beam_search", "sequence_log_prob", "translate", "exact_match"]


def _check_src(src: torch.Tensor) -> torch.Tensor:
    require_tensor("src", src)
    if src.dim() != 2 or src.shape[0] == 0 or src.shape[1] == 0:
        raise ValueError(f"src must have shape (B, n) with B, n > 0, got {shape(src)}")
    if src.is_floating_point() or src.dtype == torch.bool:
        raise TypeError(f"src must hold integer token ids, got dtype {src.dtype}")
    return src


def _check_ids(**ids: int) -> None:
    for name, value in ids.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} must be a non-negative int token id, got {value!r}")


@torch.no_grad()
def greedy_decode(model, src, max_len: int, bos_id: int, eos_id: int, pad_id: int = 0) -> torch.Tensor:
    """At every step take the single most probable next token.

    src (B, n) source ids (PAD = ``pad_id`` on the right) -> (B, L) ids, L <= max_len.
    The whole batch advances together; a row that has emitted EOS only receives PAD.
    """
    _check_src(src)
    require_positive_int("max_len", max_len)
    _check_ids(bos_id=bos_id, eos_id=eos_id, pad_id=pad_id)
    model.eval()
    src_mask = padding_mask(src, pad_id)  # (B, 1, 1, n)
    memory = model.encode(src, src_mask)  # (B, n, d_model)
    B = src.shape[0]
    ys = torch.full((B, 1), bos_id, dtype=torch.long, device=src.device)  # (B, 1)
    done = torch.zeros(B, dtype=torch.bool, device=src.device)
    for _ in range(max_len):
        tgt_mask = causal_mask(ys.shape[1], device=src.device)[None, None]  # (1, 1, t, t)
        logits = model.decode(ys, memory, src_mask, tgt_mask)[:, -1]  # (B, V)
        next_id = logits.argmax(dim=-1).masked_fill(done, pad_id)  # (B,)
        ys = torch.cat([ys, next_id[:, None]], dim=1)
        done |= next_id == eos_id
        if bool(done.all()):
            break
    return ys[:, 1:]


@torch.no_grad()
def beam_search(
    model,
    src,
    beam_size: int,
    max_len: int,
    bos_id: int,
    eos_id: int,
    pad_id: int = 0,
    length_penalty: float = 0.0,
    return_scores: bool = False,
):
    """Keep the ``beam_size`` best partial outputs at every step, not just one.

    A hypothesis's score is its log-probability Σ_t log p(y_t | y_<t, x).
    All B × beam_size hypotheses are decoded as one batch. A finished
    hypothesis (it emitted EOS) keeps its score and its slot, padded with PAD.
    The search stops when every hypothesis is finished or after ``max_len`` steps.

    The winner of each row is the hypothesis with the highest
    score / length**length_penalty (length counts EOS): 0 (the default) compares
    raw log-probabilities, which favour short outputs; about 0.6-1.0 is the
    usual length normalisation. With beam_size = 1 this is greedy decoding.

    Returns (B, L) ids, and with ``return_scores`` also the (B,) raw log-probabilities.
    """
    _check_src(src)
    K = require_positive_int("beam_size", beam_size)
    require_positive_int("max_len", max_len)
    _check_ids(bos_id=bos_id, eos_id=eos_id, pad_id=pad_id)
    if isinstance(length_penalty, bool) or not isinstance(length_penalty, (int, float)) or length_penalty < 0:
        raise ValueError(f"length_penalty must be a number >= 0, got {length_penalty!r}")
    model.eval()
    device = src.device
    B = src.shape[0]
    src_mask = padding_mask(src, pad_id)  # (B, 1, 1, n)
    memory = model.encode(src, src_mask)  # (B, n, d_model)
    # Every source row is repeated K times: row b*K + k is hypothesis k of example b.
    memory = memory.repeat_interleave(K, dim=0)  # (B*K, n, d_model)
    src_mask = src_mask.repeat_interleave(K, dim=0)  # (B*K, 1, 1, n)

    ys = torch.full((B * K, 1), bos_id, dtype=torch.long, device=device)  # (B*K, 1)
    scores = torch.full((B, K), float("-inf"), device=device)
    scores[:, 0] = 0.0  # at the start only one hypothesis exists: the others must not be copies of it
    done = torch.zeros(B, K, dtype=torch.bool, device=device)
    lengths = torch.zeros(B, K, device=device)
    for _ in range(max_len):
        tgt_mask = causal_mask(ys.shape[1], device=device)[None, None]  # (1, 1, t, t)
        logits = model.decode(ys, memory, src_mask, tgt_mask)[:, -1]  # (B*K, V)
        log_p = logits.log_softmax(dim=-1).view(B, K, -1)  # (B, K, V)
        V = log_p.shape[-1]
        # A finished hypothesis can only be extended by PAD, at no cost.
        frozen = torch.full_like(log_p, float("-inf"))
        frozen[..., pad_id] = 0.0
        log_p = torch.where(done[..., None], frozen, log_p)
        candidates = (scores[..., None] + log_p).view(B, K * V)  # (B, K*V)
        scores, flat = candidates.topk(K, dim=-1)  # (B, K) each
        parent, token = flat // V, flat % V  # (B, K): which hypothesis, which next token
        rows = (parent + torch.arange(B, device=device)[:, None] * K).view(-1)  # (B*K,)
        ys = torch.cat([ys[rows], token.view(-1, 1)], dim=1)
        was_done = done.gather(1, parent)
        lengths = lengths.gather(1, parent) + (~was_done).float()
        done = was_done | (token == eos_id)
        if bool(done.all()):
            break
    normalised = scores / lengths.clamp(min=1.0) ** length_penalty if length_penalty else scores
    best = normalised.argmax(dim=-1)  # (B,)
    out = ys.view(B, K, -1)[torch.arange(B, device=device), best, 1:]  # (B, L)
    if return_scores:
        return out, scores.gather(1, best[:, None]).squeeze(1)
    return out


@torch.no_grad()
def sequence_log_prob(model, src, out, bos_id: int, eos_id: int, pad_id: int = 0) -> torch.Tensor:
    """log p(out | src) by teacher forcing: one forward pass, no search.

    out (B, L) as returned by the decoders (no BOS; tokens after EOS ignored).
    Used to check that beam search reports the scores of what it returns.
    """
    _check_src(src)
    model.eval()
    B = out.shape[0]
    tgt_in = torch.cat([torch.full((B, 1), bos_id, dtype=torch.long, device=out.device), out[:, :-1]], dim=1)
    src_mask = padding_mask(src, pad_id)
    tgt_mask = causal_mask(tgt_in.shape[1], device=out.device)[None, None]
    log_p = model.decode(tgt_in, model.encode(src, src_mask), src_mask, tgt_mask).log_softmax(-1)  # (B, L, V)
    token_lp = log_p.gather(-1, out[..., None]).squeeze(-1)  # (B, L)
    # Count every token up to and including the first EOS.
    is_eos = (out == eos_id).long()
    before_end = (is_eos.cumsum(dim=1) - is_eos) == 0  # (B, L)
    return (token_lp * before_end).sum(dim=1)


def translate(model, sources, vocab, max_len: int = 32, beam_size: int = 1, batch_size: int = 256, **beam_kw):
    """Strings in, strings out, with greedy decoding (beam_size 1) or beam search."""
    sources = list(sources)
    outputs = []
    for i in range(0, len(sources), batch_size):
        chunk = sources[i : i + batch_size]
        rows = [vocab.encode(s) for s in chunk]
        width = max(len(r) for r in rows)
        src = torch.tensor([r + [vocab.pad_id] * (width - len(r)) for r in rows], dtype=torch.long)
        ids = (
            greedy_decode(model, src, max_len, vocab.bos_id, vocab.eos_id, vocab.pad_id)
            if beam_size == 1 and not beam_kw
            else beam_search(model, src, beam_size, max_len, vocab.bos_id, vocab.eos_id, vocab.pad_id, **beam_kw)
        )
        outputs.extend(vocab.decode(row) for row in ids)
    return outputs


def exact_match(model, pairs, vocab, max_len: int = 32, beam_size: int = 1, **kw) -> float:
    """Fraction of (source, target) pairs whose decoded output equals the target exactly."""
    pairs = list(pairs)
    if not pairs:
        raise ValueError("exact_match needs at least one pair")
    outputs = translate(model, [s for s, _ in pairs], vocab, max_len, beam_size, **kw)
    return sum(o == t for o, (_, t) in zip(outputs, pairs)) / len(pairs)
