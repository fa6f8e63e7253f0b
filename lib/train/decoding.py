"""Turning a trained encoder-decoder into output sequences: greedy decoding and beam search.

Introduced in chapter 8 (training).

Both functions work with any model that has the two halves of `lib.Transformer`:

    model.encode(src, src_mask=...)                       -> memory (B, n, d_model)
    model.decode(tgt, memory, src_mask=..., tgt_mask=...) -> logits (B, m, |V|)

They put the model in eval mode, run under ``torch.no_grad()``, work on the
model's device (``src`` is moved there) and return ids *without* the leading
BOS, each row ending at its EOS and padded with ``pad_id`` after it.

By default both re-run the decoder on the whole prefix at every step, so
producing L tokens costs O(L²) decoder work per sequence. ``greedy_decode(...,
use_cache=True)`` keeps a *KV cache* instead (`lib.KVCache`, chapter 11): the
keys and values of the prefix are computed once and each step runs the decoder
on the new token only, O(L) in all, with the same output tokens.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from lib._checks import (
    require_bool,
    require_number,
    require_positive_int,
    require_tensor,
    require_token_id,
    require_token_ids,
    shape,
)
from lib.model.attention import causal_mask, padding_mask
from lib.model.kv_cache import KVCache

__all__ = [
    "greedy_decode",
    "beam_search",
    "BeamSearchResult",
    "gnmt_length_penalty",
    "sequence_log_prob",
    "translate",
    "exact_match",
]


def _model_device(model) -> torch.device:
    p = next(model.parameters(), None) if hasattr(model, "parameters") else None
    return p.device if p is not None else torch.device("cpu")


def _target_vocab_size(model) -> int | None:
    """|V| of the model's output, if the model says (a `lib.Transformer` does)."""
    config = getattr(model, "config", None)
    return getattr(config, "tgt_vocab_size", None)


def _cache_layers(model) -> int:
    """The number of decoder layers of a model that can decode with a `lib.KVCache`."""
    layers = getattr(model, "decoder_layers", None)
    if layers is None or getattr(model, "config", None) is None:
        raise TypeError(f"use_cache=True needs a lib.Transformer, got {type(model).__name__}")
    return len(layers)


def _cache_layers_for(model, use_cache: bool, max_len: int) -> int:
    """With ``use_cache``: the decoder's layer count, once the model is known to take a
    `lib.KVCache` for ``max_len`` positions (else 0)."""
    require_bool("use_cache", use_cache)
    if not use_cache:
        return 0
    n_layers = _cache_layers(model)
    if max_len > model.config.max_len:
        raise ValueError(
            f"max_len: {max_len} target positions exceed the model's max_len={model.config.max_len}"
        )
    return n_layers


def _check_src(src: torch.Tensor) -> torch.Tensor:
    require_tensor("src", src)
    if src.dim() != 2 or src.shape[0] == 0 or src.shape[1] == 0:
        raise ValueError(f"src must have shape (B, n) with B, n > 0, got {shape(src)}")
    if src.is_floating_point() or src.dtype == torch.bool:
        raise TypeError(f"src must hold integer token ids, got dtype {src.dtype}")
    return src


def _check_ids(vocab_size: int | None, **ids: int) -> None:
    for name, value in ids.items():
        require_token_id(name, value, vocab_size)


def _check_logits_vocab(logits: torch.Tensor, **ids: int) -> None:
    """For a model that does not state its vocabulary: check the ids against the first logits."""
    _check_ids(logits.shape[-1], **ids)


@torch.no_grad()
def greedy_decode(
    model, src, max_len: int, bos_id: int, eos_id: int, pad_id: int = 0, use_cache: bool = False
) -> torch.Tensor:
    """At every step take the single most probable next token.

    src (B, n) source ids (PAD = ``pad_id`` on the right) -> (B, L) ids, L <= max_len.
    The whole batch advances together; a row that has emitted EOS only receives PAD.
    A row that never produced EOS within ``max_len`` tokens is returned cut at
    ``max_len`` (it has no EOS: check with ``(out == eos_id).any(dim=1)``).

    ``use_cache=True`` (a `lib.Transformer`; the cache is chapter 11's) feeds the decoder one new
    token per step and keeps the keys and values of the earlier ones in a
    `lib.KVCache`; the tokens are the same as without it. ``max_len`` must then
    fit the model's positional table (``model.config.max_len``).
    """
    _check_src(src)
    require_positive_int("max_len", max_len)
    n_layers = _cache_layers_for(model, use_cache, max_len)
    _check_ids(_target_vocab_size(model), bos_id=bos_id, eos_id=eos_id, pad_id=pad_id)
    model.eval()
    device = _model_device(model)
    src = src.to(device)
    src_mask = padding_mask(src, pad_id)  # (B, 1, 1, n)
    memory = model.encode(src, src_mask=src_mask)  # (B, n, d_model)
    B = src.shape[0]
    ys = torch.full((B, 1), bos_id, dtype=torch.long, device=device)  # (B, 1)
    done = torch.zeros(B, dtype=torch.bool, device=device)
    cache = KVCache(n_layers, cross_attention=True) if use_cache else None
    for _ in range(max_len):
        if cache is not None:  # only the newest token; the cache holds the others
            logits = model.decode(ys[:, -1:], memory, src_mask=src_mask, cache=cache)[:, -1]  # (B, |V|)
        else:
            tgt_mask = causal_mask(ys.shape[1], device=device)[None, None]  # (1, 1, t, t)
            logits = model.decode(ys, memory, src_mask=src_mask, tgt_mask=tgt_mask)[:, -1]  # (B, |V|)
        if ys.shape[1] == 1:
            _check_logits_vocab(logits, bos_id=bos_id, eos_id=eos_id, pad_id=pad_id)
        next_id = logits.argmax(dim=-1).masked_fill(done, pad_id)  # (B,)
        ys = torch.cat([ys, next_id[:, None]], dim=1)
        done |= next_id == eos_id
        if bool(done.all()):
            break
    return ys[:, 1:]


class BeamSearchResult(NamedTuple):
    """What `beam_search` returns with ``return_scores=True``.

    tokens   (B, L)  the chosen output of each row, without BOS, PAD after its end
    scores   (B,)    its raw log-probability Σ_t log p(y_t | y_<t, x) (not length-normalised)
    finished (B,)    bool: True if it ends with EOS; False if no hypothesis of that
                     row finished within ``max_len`` tokens (then ``tokens`` holds the
                     best unfinished one, ``max_len`` tokens long, no EOS)
    """

    tokens: torch.Tensor
    scores: torch.Tensor
    finished: torch.Tensor


def gnmt_length_penalty(length: int | float, alpha: float) -> float:
    """GNMT's length penalty lp(Y) = ((5 + |Y|) / 6)^α (Wu et al. 2016).

    Beam search ranks finished outputs by log p(Y | X) / lp(Y). Log-probabilities
    are negative and shrink with every token, so raw scores favour short outputs;
    lp grows with |Y| and undoes part of that. α = 0 gives lp = 1 (raw scores);
    the Transformer paper used α = 0.6.
    """
    return ((5.0 + length) / 6.0) ** alpha


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
    use_cache: bool = False,
):
    """Keep the ``beam_size`` best partial outputs at every step, not just one.

    A hypothesis Y's score is its log-probability log p(Y | X) = Σ_t log p(y_t | y_<t, X);
    finished outputs are compared by the normalised score log p(Y | X) / lp(Y), with
    GNMT's length penalty lp(Y) = ((5 + |Y|) / 6)^α, α = ``length_penalty``, |Y|
    counting the EOS (Wu et al. 2016, "Google's Neural Machine Translation System";
    see `gnmt_length_penalty`). α = 0 (the default) compares raw log-probabilities,
    which favour short outputs; the Transformer paper used α = 0.6 with beam_size 4.

    Each row of the batch keeps
    - a beam of ``beam_size`` *active* hypotheses (no EOS yet), all of the same
      length, so ranking them by raw or by normalised score is the same ranking;
    - its own list of *finished* hypotheses (they emitted EOS), which active
      ones never evict.
    At every step each active hypothesis is extended by every token and the top
    2 × beam_size candidates are taken. Those that end in EOS *and* rank within
    the top beam_size join the finished list (as in fairseq and Hugging Face's
    ``BeamHypotheses``; so with α = 0 a beam of 1 is exactly greedy decoding,
    while with α > 0 it can set the greedy EOS aside and return a longer output); the best
    ``beam_size`` candidates that do not end in EOS refill the beam (at most
    beam_size candidates end in EOS, one per parent, so the beam never runs short).

    A row stops when no active hypothesis can beat its best finished one: an
    active hypothesis of raw score s (s <= 0) can only lose log-probability, and
    its finished length is at most ``max_len``, so its normalised score can never
    exceed s / lp(max_len). The row stops once the best finished normalised
    score is >= that bound for every active hypothesis. The bound is exact in
    the sense that it is never wrong (no continuation can score above it, so the
    search never stops too early), but not tight for α > 0: it assumes the
    hypothesis could still reach ``max_len`` tokens at no further cost, so a
    row may run more steps than strictly needed. For α = 0 the bound is s itself.
    Otherwise the search stops after ``max_len`` tokens.

    The output of a row is its best finished hypothesis. A finished hypothesis is
    always preferred to an unfinished one, even one that reaches ``max_len`` with a
    higher score (Hugging Face compares both; both policies are in use). If none
    finished within ``max_len`` tokens, the output is the best active one
    (``max_len`` tokens, no EOS), and ``finished`` says so: an unfinished result
    is never passed off as finished.

    ``use_cache=True`` (a `lib.Transformer`) feeds the decoder only the newest token
    of each hypothesis and keeps the keys and values of the earlier ones in a
    `lib.KVCache`, which follows the hypotheses as they are reordered
    (``KVCache.reorder``); the result is the same as without it.

    All B × beam_size active hypotheses are decoded as one batch. A wider beam is not
    guaranteed to find a better output: beam search is not monotone in beam_size.

    Returns (B, L) ids (PAD after each row's end, L the longest returned row), or
    with ``return_scores=True`` a `BeamSearchResult(tokens, scores, finished)`.
    """
    _check_src(src)
    require_positive_int("beam_size", beam_size)
    require_positive_int("max_len", max_len)
    _check_ids(_target_vocab_size(model), bos_id=bos_id, eos_id=eos_id, pad_id=pad_id)
    alpha = require_number("length_penalty", length_penalty, minimum=0.0)
    require_bool("return_scores", return_scores)
    n_layers = _cache_layers_for(model, use_cache, max_len)
    model.eval()
    device = _model_device(model)
    src = src.to(device)
    B = src.shape[0]
    src_mask = padding_mask(src, pad_id)  # (B, 1, 1, n)
    memory = model.encode(src, src_mask=src_mask)  # (B, n, d_model)
    # Every source row is repeated beam_size times: row b*beam_size + k is hypothesis k of example b.
    memory = memory.repeat_interleave(beam_size, dim=0)  # (B*beam_size, n, d_model)
    src_mask = src_mask.repeat_interleave(beam_size, dim=0)  # (B*beam_size, 1, 1, n)

    ys = torch.full((B * beam_size, 1), bos_id, dtype=torch.long, device=device)  # active prefixes
    scores = torch.full((B, beam_size), float("-inf"), device=device)
    scores[:, 0] = 0.0  # at the start only one hypothesis exists: the others must not be copies of it
    finished: list[list[tuple[float, float, list[int]]]] = [[] for _ in range(B)]  # (normalised, raw, ids)
    row_done = [False] * B
    bound_lp = gnmt_length_penalty(max_len, alpha)  # the largest lp any hypothesis can reach
    cache = KVCache(n_layers, cross_attention=True) if use_cache else None

    for length in range(1, max_len + 1):  # length = |Y| of the candidates of this step
        if cache is not None:  # only the newest token; the cache holds the others
            logits = model.decode(ys[:, -1:], memory, src_mask=src_mask, cache=cache)[:, -1]
        else:
            tgt_mask = causal_mask(ys.shape[1], device=device)[None, None]  # (1, 1, t, t)
            logits = model.decode(ys, memory, src_mask=src_mask, tgt_mask=tgt_mask)[:, -1]  # (B*beam_size, |V|)
        if length == 1:
            _check_logits_vocab(logits, bos_id=bos_id, eos_id=eos_id, pad_id=pad_id)
        log_p = logits.float().log_softmax(dim=-1).view(B, beam_size, -1)  # (B, beam_size, |V|)
        V = log_p.shape[-1]
        candidates = (scores[..., None] + log_p).view(B, beam_size * V)  # (B, beam_size*|V|)
        n_cand = min(2 * beam_size, beam_size * V)
        cand_scores, flat = candidates.topk(n_cand, dim=-1)  # (B, n_cand), best first
        parent, token = flat // V, flat % V  # which hypothesis, which next token

        # The bookkeeping is per row, on the host (one copy per step).
        cand_scores_l, parent_l, token_l = cand_scores.tolist(), parent.tolist(), token.tolist()
        prefixes = ys[:, 1:].tolist()
        new_rows, new_tokens = [], []
        new_scores = torch.full((B, beam_size), float("-inf"))
        lp = gnmt_length_penalty(length, alpha)
        for b in range(B):
            kept = []
            if not row_done[b]:
                for rank, (s, k, tok) in enumerate(zip(cand_scores_l[b], parent_l[b], token_l[b])):
                    if s == float("-inf"):
                        break  # no more real candidates (only at the first steps, tiny |V|)
                    if tok == eos_id:
                        if rank < beam_size:  # an EOS ranked below the beam is dropped
                            finished[b].append((s / lp, s, prefixes[b * beam_size + k] + [tok]))
                    elif len(kept) < beam_size:
                        kept.append((s, k, tok))
            for j in range(beam_size):
                s, k, tok = kept[j] if j < len(kept) else (float("-inf"), 0, pad_id)  # dead slot
                new_rows.append(b * beam_size + k)
                new_tokens.append(tok)
                new_scores[b, j] = s
            # Can any active hypothesis still beat the best finished one? (see the docstring)
            best_active = kept[0][0] if kept else float("-inf")
            if finished[b] and max(f[0] for f in finished[b]) >= best_active / bound_lp:
                row_done[b] = True
            if not kept:
                row_done[b] = True
        rows = torch.tensor(new_rows, device=device)
        ys = torch.cat([ys[rows], torch.tensor(new_tokens, device=device)[:, None]], dim=1)
        if cache is not None:
            cache.reorder(rows)  # each surviving hypothesis takes its parent's keys and values
        scores = new_scores.to(device)
        if all(row_done):
            break

    out_rows, out_scores, out_finished = [], [], []
    active = ys[:, 1:].tolist()
    for b in range(B):
        if finished[b]:
            _, raw, ids = max(finished[b], key=lambda f: f[0])
            out_finished.append(True)
        else:  # nothing ended within max_len: the best active hypothesis, flagged unfinished
            raw, ids = float(scores[b, 0]), active[b * beam_size]
            out_finished.append(False)
        out_rows.append(ids)
        out_scores.append(raw)
    width = max(len(r) for r in out_rows)
    tokens = torch.tensor([r + [pad_id] * (width - len(r)) for r in out_rows], dtype=torch.long, device=device)
    if not return_scores:
        return tokens
    return BeamSearchResult(
        tokens,
        torch.tensor(out_scores, device=device),
        torch.tensor(out_finished, dtype=torch.bool, device=device),
    )


@torch.no_grad()
def sequence_log_prob(model, src, out, bos_id: int, eos_id: int, pad_id: int = 0) -> torch.Tensor:
    """log p(out | src) by teacher forcing: one forward pass, no search.

    src (B, n), out (B, L) integer ids as returned by the decoders (no BOS;
    tokens after the first EOS ignored) -> (B,) log-probabilities.
    Used to check that beam search reports the scores of what it returns.
    """
    _check_src(src)
    require_tensor("out", out)
    if out.dim() != 2 or out.shape[1] == 0:
        raise ValueError(f"out must have shape (B, L) with L > 0, got {shape(out)}")
    if out.is_floating_point() or out.dtype == torch.bool:
        raise TypeError(f"out must hold integer token ids, got dtype {out.dtype}")
    if out.shape[0] != src.shape[0]:
        raise ValueError(f"src {shape(src)} and out {shape(out)} must share the batch size B")
    vocab_size = _target_vocab_size(model)
    _check_ids(vocab_size, bos_id=bos_id, eos_id=eos_id, pad_id=pad_id)
    if vocab_size is not None:
        require_token_ids("out", out, vocab_size)
    model.eval()
    device = _model_device(model)
    src, out = src.to(device), out.to(device).long()
    B = out.shape[0]
    tgt_in = torch.cat([torch.full((B, 1), bos_id, dtype=torch.long, device=device), out[:, :-1]], dim=1)
    src_mask = padding_mask(src, pad_id)
    tgt_mask = causal_mask(tgt_in.shape[1], device=device)[None, None]
    memory = model.encode(src, src_mask=src_mask)
    logits = model.decode(tgt_in, memory, src_mask=src_mask, tgt_mask=tgt_mask)  # (B, L, |V|)
    log_p = logits.float().log_softmax(-1)
    if vocab_size is None:  # a model that does not state |V|: check against its logits
        require_token_ids("out", out, log_p.shape[-1])
    token_lp = log_p.gather(-1, out[..., None]).squeeze(-1)  # (B, L)
    # Count every token up to and including the first EOS.
    is_eos = (out == eos_id).long()
    before_end = (is_eos.cumsum(dim=1) - is_eos) == 0  # (B, L)
    return (token_lp * before_end).sum(dim=1)


def translate(model, sources, vocab, max_len: int = 32, beam_size: int = 1, batch_size: int = 256, **beam_kw):
    """Strings in, strings out, on the model's device.

    ``beam_size=1`` with no other keyword is `greedy_decode`; any other beam size,
    or any keyword (``length_penalty=...``, passed on), is `beam_search`. Its
    default length penalty is α = 0 (raw log-probabilities), not the paper's 0.6:
    pass ``length_penalty=0.6`` for the paper's decoder.
    """
    sources = list(sources)
    device = _model_device(model)
    outputs = []
    for i in range(0, len(sources), batch_size):
        chunk = sources[i : i + batch_size]
        rows = [vocab.encode(s) for s in chunk]
        width = max(len(r) for r in rows)
        src = torch.tensor([r + [vocab.pad_id] * (width - len(r)) for r in rows], dtype=torch.long, device=device)
        ids = (
            greedy_decode(model, src, max_len, vocab.bos_id, vocab.eos_id, vocab.pad_id)
            if beam_size == 1 and not beam_kw
            else beam_search(model, src, beam_size, max_len, vocab.bos_id, vocab.eos_id, vocab.pad_id, **beam_kw)
        )
        outputs.extend(vocab.decode(row) for row in ids.cpu())
    return outputs


def exact_match(model, pairs, vocab, max_len: int = 32, beam_size: int = 1, **kw) -> float:
    """Fraction of (source, target) pairs whose decoded output equals the target exactly
    (decoded by `translate`: greedy for beam_size 1, else beam search with α = 0 unless
    ``length_penalty`` is passed)."""
    pairs = list(pairs)
    if not pairs:
        raise ValueError("exact_match needs at least one pair")
    outputs = translate(model, [s for s, _ in pairs], vocab, max_len, beam_size, **kw)
    return sum(o == t for o, (_, t) in zip(outputs, pairs)) / len(pairs)
