"""Experiments on a trained model: what attention shows, what a masking ablation
shows, and a beam search that prints what it keeps.

Introduced in chapter 8 (training).

- `ScriptedModel`: a stand-in encoder-decoder whose next-token probabilities
  are a table you write, to watch a decoder on a case you know the answer to.
- `beam_trace`: beam search for one source, step by step, returning every
  step's hypotheses so a chapter can print them as a table.
- `cross_attention_maps`: one decoder layer's cross-attention weights, per
  head, for a (source, target) pair under teacher forcing.
- `cross_attention_ablation`: hide chosen source positions from the
  cross-attention of chosen decoder rows, and measure how often those rows
  still predict the right character. Attention weights say where a row looks;
  the ablation says what the row needs.
- `date_fields`: where the year, the dashes, the month and the day sit in a
  source of the date task.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import nn

from lib.model.attention import causal_mask
from lib.train.data import make_batch

__all__ = [
    "ScriptedModel",
    "BeamStep",
    "beam_trace",
    "cross_attention_maps",
    "cross_attention_ablation",
    "date_fields",
]


class ScriptedModel(nn.Module):
    """A fake encoder-decoder whose next-token distribution depends only on the prefix.

    ``table`` maps a prefix (a tuple of ids starting with BOS) to a dict
    {token id: probability}; a prefix not in the table gets ``default``
    (by default: ``eos_id`` with probability 1). The source is ignored. It has the two methods the
    decoders use, ``encode`` and ``decode``, with their keyword masks.
    """

    def __init__(self, table: dict, vocab_size: int, eos_id: int = 2, default=None):
        super().__init__()
        self.table = {tuple(k): dict(v) for k, v in table.items()}
        self.default = dict(default) if default is not None else {eos_id: 1.0}
        self.vocab_size = vocab_size
        self.eos_id = eos_id

    def encode(self, src, src_mask=None):
        return torch.zeros(src.shape[0], src.shape[1], 1)

    def decode(self, tgt, memory, src_mask=None, tgt_mask=None):
        B, m = tgt.shape
        logits = torch.full((B, m, self.vocab_size), float("-inf"))  # "never"
        for b in range(B):
            for t in range(m):
                prefix = tuple(tgt[b, : t + 1].tolist())
                for token, p in self.table.get(prefix, self.default).items():
                    logits[b, t, token] = math.log(p)
        return logits

    def forward(self, src, tgt, src_mask=None, tgt_mask=None):
        return self.decode(tgt, self.encode(src), src_mask=src_mask, tgt_mask=tgt_mask)


@dataclass(frozen=True)
class BeamStep:
    """One step of `beam_trace`: the hypotheses kept, best first.

    ``active`` and ``finished`` are lists of (tokens, log-probability) with
    tokens a tuple of ids (no BOS; a finished one ends with EOS).
    """

    step: int
    active: list
    finished: list


def _gnmt(length: int, alpha: float) -> float:
    """GNMT length penalty lp(Y) = ((5 + |Y|) / 6)^α (Wu et al. 2016)."""
    return ((5 + length) / 6) ** alpha


@torch.no_grad()
def beam_trace(
    model,
    src: torch.Tensor,
    beam_size: int,
    max_len: int,
    bos_id: int,
    eos_id: int,
    length_penalty: float = 0.0,
):
    """Beam search on ONE source (src (1, n)), written for reading, with its history.

    The same rules as `lib.beam_search`: at each step every active hypothesis
    is extended by every token and the candidates are ranked by
    log-probability. Of the best 2 × ``beam_size``, those ending in EOS move
    to ``finished`` (where they stay: active ones never evict them) and the
    best ``beam_size`` others form the next beam. The search stops when no
    active hypothesis can still beat the best finished one (an active score s
    can at best become s / lp(max_len)), or after ``max_len`` steps. The
    winner is the finished hypothesis with the best score / lp(|Y|) (GNMT
    penalty, |Y| counting EOS); an unfinished one only if nothing finished.

    Returns (best tokens, its log-probability, [BeamStep, ...]).
    """
    if src.dim() != 2 or src.shape[0] != 1:
        raise ValueError(f"beam_trace decodes one source: src must be (1, n), got {tuple(src.shape)}")
    model.eval()
    memory = model.encode(src, src_mask=None)
    active: list[tuple[tuple, float]] = [((), 0.0)]
    finished: list[tuple[tuple, float]] = []
    history = []

    def normalised(tokens, score):
        return score / _gnmt(len(tokens), length_penalty)

    for step in range(1, max_len + 1):
        tgt = torch.tensor([[bos_id, *tokens] for tokens, _ in active])  # (k, t)
        mask = causal_mask(tgt.shape[1])[None, None]
        log_p = model.decode(
            tgt, memory.expand(len(active), -1, -1), src_mask=None, tgt_mask=mask
        )[:, -1].log_softmax(-1)  # (k, |V|)
        candidates = [
            (tokens + (token,), score + float(log_p[i, token]))
            for i, (tokens, score) in enumerate(active)
            for token in range(log_p.shape[-1])
        ]
        candidates = [c for c in candidates if c[1] > float("-inf")]
        candidates.sort(key=lambda c: -c[1])
        active = []
        for tokens, score in candidates[: 2 * beam_size]:
            if tokens[-1] == eos_id:
                finished.append((tokens, score))
            elif len(active) < beam_size:
                active.append((tokens, score))
        finished.sort(key=lambda c: -normalised(*c))
        history.append(BeamStep(step, list(active), list(finished)))
        if not active:
            break
        bound = _gnmt(max_len, length_penalty)
        if finished and normalised(*finished[0]) >= active[0][1] / bound:
            break
    pool = finished or active
    best = max(pool, key=lambda c: normalised(*c))
    return best[0], best[1], history


def _mask_of(module_args: tuple, module_kwargs: dict):
    if "mask" in module_kwargs:
        return module_kwargs["mask"]
    return module_args[3] if len(module_args) > 3 else None


@torch.no_grad()
def cross_attention_maps(model, source: str, target: str, vocab, layer: int = -1) -> torch.Tensor:
    """Cross-attention weights (h, m, n) of decoder layer ``layer`` for one pair.

    Teacher forcing: the decoder reads BOS + target, so row r is the position
    that predicts target[r] (the last row predicts EOS); column j is source
    character j. The weights are recomputed from the layer's own projections
    (w_q, w_k) on the inputs it received, so this works whatever the layer
    records.
    """
    batch = make_batch([(source, target)], vocab)
    attn = model.decoder_layers[layer].cross_attn
    seen = {}

    def hook(module, args, kwargs, output):
        query = kwargs.get("query", args[0] if args else None)
        key = kwargs.get("key", args[1] if len(args) > 1 else None)
        seen.update(query=query, key=key, mask=_mask_of(args, kwargs))

    handle = attn.register_forward_hook(hook, with_kwargs=True)
    try:
        model.eval()
        model(batch.src, batch.tgt_in, src_mask=batch.src_mask, tgt_mask=batch.tgt_mask)
    finally:
        handle.remove()
    h, d_k = attn.n_heads, attn.d_k
    q = attn.w_q(seen["query"]).view(1, -1, h, d_k).transpose(1, 2)  # (1, h, m, d_k)
    k = attn.w_k(seen["key"]).view(1, -1, h, d_k).transpose(1, 2)  # (1, h, n, d_k)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)  # (1, h, m, n)
    if seen["mask"] is not None:
        scores = scores.masked_fill(~seen["mask"], float("-inf"))
    return scores.softmax(dim=-1)[0]  # (h, m, n)


@torch.no_grad()
def cross_attention_ablation(
    model,
    pairs: Sequence[tuple[str, str]],
    vocab,
    rows: Callable[[str, str], Sequence[int]],
    hide: Callable[[str], Sequence[int]] = lambda source: (),
) -> float:
    """Accuracy of chosen decoder rows when chosen source positions are hidden.

    For each (source, target) pair, ``rows(source, target)`` names decoder
    rows (row r predicts target[r]; r = len(target) predicts EOS) and
    ``hide(source)`` source positions. Those rows' cross-attention, in every
    decoder layer, may not look at those positions; the encoder and the other
    rows see everything. Under teacher forcing, returns the fraction of the
    chosen rows whose most probable next token is the right one.
    """
    batch = make_batch(list(pairs), vocab)
    B, n = batch.src.shape
    m = batch.tgt_in.shape[1]
    cross = batch.src_mask.expand(B, 1, m, n).clone()  # (B, 1, m, n)
    chosen = torch.zeros(B, m, dtype=torch.bool)
    for b, (source, target) in enumerate(pairs):
        for r in rows(source, target):
            chosen[b, r] = True
            for j in hide(source):
                cross[b, 0, r, j] = False
    if not bool(chosen.any()):
        raise ValueError("rows() chose no decoder row")
    model.eval()
    memory = model.encode(batch.src, src_mask=batch.src_mask)
    logits = model.decode(batch.tgt_in, memory, src_mask=cross, tgt_mask=batch.tgt_mask)
    right = logits.argmax(-1) == batch.tgt_out  # (B, m)
    return float(right[chosen].float().mean())


def date_fields(source: str) -> dict[str, list[int]]:
    """Source positions of the date task's fields: "2019-3-07" ->
    {"year": [0, 1, 2, 3], "dashes": [4, 6], "month": [5], "day": [7, 8]}."""
    first, last = source.index("-"), source.rindex("-")
    if first == last:
        raise ValueError(f"a date source has two dashes, got {source!r}")
    return {
        "year": list(range(first)),
        "dashes": [first, last],
        "month": list(range(first + 1, last)),
        "day": list(range(last + 1, len(source))),
    }
