"""Induction heads: measured in a trained model and grown in one trained here
(chapter 16, "Looking inside a trained model").

An induction head completes a pattern it has seen earlier in the context: at a
token A that occurred before as ``... A B ...``, it attends to the B that followed
the earlier A and copies it (Elhage et al. 2021; Olsson et al. 2022). It needs a
head in an earlier layer that writes, at each position, which token came just
before (a previous-token head): the induction head's key is that record.

The test bed is a block of random tokens repeated twice: on the first copy
nothing can be predicted, on the second copy everything can, by copying.

- `repeated_tokens` builds such batches;
- `half_losses` is the next-token loss on each copy;
- `early_late_losses` is the loss at a window's first and last positions (on held-out
  text: does the model predict late positions better than early ones?);
- `induction_scores` / `previous_token_scores` read every head's attention;
- `ablation_losses` zero-ablates heads (the top ones and random draws);
- `induction_ablation` is the causal test of a grown two-layer model (its induction
  heads, its other layer-2 heads, its layer 1);
- `AttentionOnlyModel` and `train_attention_only` train a two-layer model on the
  course's Shakespeare characters and record when heads form (chapter 16, section 5:
  with a passage written twice in every training window, a previous-token head and
  then an induction head form within a CPU minute; see `bench/induction_training.py`).
"""

from __future__ import annotations

import numbers
import time
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from lib._checks import require_positive_int
from lib.model.attention import MultiHeadAttention, causal_mask
from lib.model.hooks import HookPoint
from lib.model.modern import GroupedQueryAttention
from lib.model.inspect import ablate_heads, attention_hook, run_with_cache

__all__ = [
    "AttentionOnlyModel",
    "InductionRun",
    "ablation_losses",
    "early_late_losses",
    "induction_ablation",
    "half_losses",
    "repeat_probe",
    "induction_scores",
    "previous_token_scores",
    "repeated_tokens",
    "train_attention_only",
]


def _require_int(name, value, minimum=0):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")
    return int(value)


def repeated_tokens(batch: int, length: int, *, low: int, high: int, prefix: tuple[int, ...] = (),
                    seed: int = 0) -> torch.Tensor:
    """(batch, len(prefix) + 2·length) token ids: ``prefix``, then ``length`` random ids
    drawn uniformly from [low, high), then the same ``length`` ids again.

    SmolLM2's batches start with its BOS id (``prefix=(1,)``); the character model's
    have no prefix. Seeded: the same call gives the same batch.
    """
    batch = require_positive_int("batch", batch)
    length = require_positive_int("length", length)
    low, high = _require_int("low", low), _require_int("high", high)
    if high - low < 2:
        raise ValueError(f"high must exceed low by at least 2, got low={low}, high={high}")
    prefix = tuple(_require_int("prefix id", p) for p in prefix)
    g = torch.Generator().manual_seed(_require_int("seed", seed))
    block = torch.randint(low, high, (batch, length), generator=g)
    start = torch.tensor(prefix, dtype=torch.long).expand(batch, len(prefix))
    return torch.cat([start, block, block], dim=1)


def _check_pattern(pattern: torch.Tensor, length: int | None = None) -> None:
    if not isinstance(pattern, torch.Tensor) or not pattern.is_floating_point():
        raise TypeError(f"pattern must be a float tensor (B, h, T, T), got {type(pattern).__name__}")
    if pattern.dim() != 4 or pattern.shape[-1] != pattern.shape[-2]:
        raise ValueError(f"pattern must have shape (B, h, T, T), got {tuple(pattern.shape)}")
    if length is not None:
        require_positive_int("length", length)
        if 2 * length > pattern.shape[-1]:
            raise ValueError(f"length {length}: two copies do not fit in T = {pattern.shape[-1]}")


def induction_scores(pattern: torch.Tensor, length: int) -> torch.Tensor:
    """Each head's induction score, (h,): the mean attention from each token of the
    second copy to the token after its earlier occurrence.

    pattern (B, h, T, T) from sequences that end with two copies of ``length``
    tokens: query q in the second copy (q >= T - length) attends to key
    q - length + 1. Averaged over the batch and those ``length`` queries.
    """
    _check_pattern(pattern, length)
    T = pattern.shape[-1]
    diagonal = pattern.diagonal(offset=-(length - 1), dim1=-2, dim2=-1)  # (B, h, T - length + 1)
    return diagonal[..., -length:].mean(dim=(0, -1))  # queries T - length .. T - 1


def previous_token_scores(pattern: torch.Tensor, skip: int = 1) -> torch.Tensor:
    """Each head's previous-token score, (h,): mean attention from query q to key q - 1,
    over the batch and the queries q >= ``skip`` + 1 (``skip`` leading positions, e.g. a
    BOS that many heads rest on, are left out as queries)."""
    _check_pattern(pattern)
    skip = _require_int("skip", skip)
    return pattern.diagonal(offset=-1, dim1=-2, dim2=-1)[..., skip:].mean(dim=(0, -1))


def _per_token_loss(model, tokens):
    with torch.no_grad():
        logits = model(tokens)  # (B, T, V)
    return F.cross_entropy(logits[:, :-1].flatten(0, 1).float(), tokens[:, 1:].flatten(),
                           reduction="none").view(tokens.shape[0], -1)  # (B, T - 1)


def half_losses(model, tokens: torch.Tensor, length: int) -> tuple[float, float]:
    """Mean next-token loss (nats) on the first and on the second copy of ``tokens``
    (from `repeated_tokens`): predicting tokens 2..length of the first copy, and every
    token of the second copy after its first one (the predictions that copying helps)."""
    require_positive_int("length", length)
    T = tokens.shape[1]
    if 2 * length > T:
        raise ValueError(f"length {length}: two copies do not fit in {T} tokens")
    return _halves(_per_token_loss(model, tokens), length)


def early_late_losses(model, windows: torch.Tensor, *, early: int = 8,
                      late: int = 32) -> tuple[float, float]:
    """Mean next-token loss (nats) of ``model`` on ``windows`` (B, T) of token ids at the
    early and at the late positions: predicting tokens 1..``early`` and the last
    ``late`` tokens of each window (chapter 16, section 5: with a passage written twice
    the late positions can copy, the early ones cannot; `train_attention_only` records
    it at every checkpoint). Runs under `torch.no_grad`; put the model in eval mode
    first, and wrap the call in `lib.ablate_heads` to measure with heads switched off.
    """
    if (not isinstance(windows, torch.Tensor) or windows.is_floating_point()
            or windows.is_complex() or windows.dtype == torch.bool):
        got = windows.dtype if isinstance(windows, torch.Tensor) else type(windows).__name__
        raise TypeError(f"windows must be a tensor of integer token ids, got {got}")
    if windows.dim() != 2 or windows.shape[1] < 2:
        raise ValueError(f"windows must have shape (B, T >= 2), got {tuple(windows.shape)}")
    early, late = require_positive_int("early", early), require_positive_int("late", late)
    for name, n in (("early", early), ("late", late)):
        if n > windows.shape[1] - 1:
            raise ValueError(f"{name} = {n}: a window of T = {windows.shape[1]} tokens has "
                             f"only {windows.shape[1] - 1} predicted positions")
    loss = _per_token_loss(model, windows)  # (B, T - 1): loss[:, t] predicts token t + 1
    return float(loss[:, :early].mean()), float(loss[:, -late:].mean())


def _halves(loss: torch.Tensor, length: int) -> tuple[float, float]:
    T = loss.shape[1] + 1  # loss[:, t] predicts token t + 1
    first = loss[:, T - 2 * length: T - length - 1]  # targets T-2L+1 .. T-L-1
    second = loss[:, T - length:]  # targets T-L+1 .. T-1
    return float(first.mean()), float(second.mean())


def repeat_probe(model, tokens: torch.Tensor, length: int, skip: int = 1) -> dict:
    """One forward pass over `repeated_tokens` with every attention pattern cached.

    Returns {"first": loss on the first copy, "second": loss on the second copy (nats,
    as `half_losses`), "induction": (n_layers, h) `induction_scores`, "previous":
    (n_layers, h) `previous_token_scores` (``skip`` leading queries left out)}.
    """
    require_positive_int("length", length)
    if tokens.dim() != 2 or 2 * length > tokens.shape[1]:
        raise ValueError(f"tokens must be (B, T) with two copies of length {length}, got {tuple(tokens.shape)}")
    names = [n for n in _pattern_names(model)]
    logits, cache = run_with_cache(model, tokens, names=names)
    loss = F.cross_entropy(logits[:, :-1].flatten(0, 1).float(), tokens[:, 1:].flatten(),
                           reduction="none").view(tokens.shape[0], -1)
    first, second = _halves(loss, length)
    return {
        "first": first,
        "second": second,
        "induction": torch.stack([induction_scores(cache[n], length) for n in names]),
        "previous": torch.stack([previous_token_scores(cache[n], skip) for n in names]),
    }


def _pattern_names(model) -> list[str]:
    names, i = [], 0
    while True:
        try:
            names.append(attention_hook(model, i, "hook_pattern"))
        except ValueError:
            return names
        i += 1


def ablation_losses(model, tokens: torch.Tensor, length: int, heads, *, n_heads: int, n_layers: int,
                    draws: int = 5, seed: int = 0, exclude=()) -> dict:
    """Second-copy loss with no head ablated, with ``heads`` zero-ablated, and with as
    many heads drawn at random (``draws`` draws, never from ``heads`` or ``exclude``).

    Returns {"none": float, "top": float, "random": [float] * draws, "random_heads": [...]}.
    """
    heads = [tuple(h) for h in heads]
    draws = require_positive_int("draws", draws)
    _, base = half_losses(model, tokens, length)
    with ablate_heads(model, heads):
        _, top = half_losses(model, tokens, length)
    pool = [(i, j) for i in range(n_layers) for j in range(n_heads)
            if (i, j) not in set(heads) | {tuple(e) for e in exclude}]
    g = torch.Generator().manual_seed(_require_int("seed", seed))
    randoms, drawn = [], []
    for _ in range(draws):
        pick = [pool[int(i)] for i in torch.randperm(len(pool), generator=g)[: len(heads)]]
        with ablate_heads(model, pick):
            randoms.append(half_losses(model, tokens, length)[1])
        drawn.append(pick)
    return {"none": base, "top": top, "random": randoms, "random_heads": drawn}


def induction_ablation(model, tokens: torch.Tensor, length: int, threshold: float = 0.2) -> dict:
    """The causal test of chapter 16, section 5, on a two-layer `AttentionOnlyModel`.

    On ``tokens`` (from `repeated_tokens`, ``length`` per copy) finds layer 2's
    induction heads (induction score >= ``threshold``) and its other heads, and
    zero-ablates in turn: nothing, the induction heads, the other layer-2 heads, every
    head of layer 1 (which the induction heads' keys need). Returns
    {"none" | "induction" | "other" | "layer 1": {"heads": [(layer, head), ...],
    "first": loss on the first copy, "second": loss on the second copy}} (nats).
    """
    if not isinstance(model, AttentionOnlyModel) or model.n_layers != 2:
        raise TypeError(f"model must be a two-layer lib.AttentionOnlyModel, got {type(model).__name__}")
    if not 0.0 < threshold < 1.0:
        raise ValueError(f"threshold must be between 0 and 1, got {threshold!r}")
    probe = repeat_probe(model, tokens, length, skip=0)
    scores = probe["induction"][1]
    groups = {
        "none": [],
        "induction": [(1, h) for h in range(model.n_heads) if scores[h] >= threshold],
        "other": [(1, h) for h in range(model.n_heads) if scores[h] < threshold],
        "layer 1": [(0, h) for h in range(model.n_heads)],
    }
    out = {}
    for name, heads in groups.items():
        with ablate_heads(model, heads):
            first, second = half_losses(model, tokens, length)
        out[name] = {"heads": heads, "first": first, "second": second}
    return out


# --------------------------------------------------------------------------- the model grown here


class AttentionBlock(nn.Module):
    """Pre-LN attention with a residual connection, and no feed-forward network."""

    def __init__(self, d_model: int, n_heads: int, rotary: bool = False):
        super().__init__()
        self.norm = nn.LayerNorm(d_model)
        if rotary:  # causal, rotary queries and keys (chapter 6), one key/value head per head
            self.attn = GroupedQueryAttention(d_model, n_heads, n_heads, rope_base=10000.0)
        else:
            self.attn = MultiHeadAttention(d_model, n_heads, dropout=0.0, bias=False)
        self.rotary = rotary
        self.hook_resid_pre = HookPoint()
        self.hook_attn_out = HookPoint()
        self.hook_resid_post = HookPoint()

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = self.hook_resid_pre(x)
        y = self.norm(x)
        a = self.attn(y) if self.rotary else self.attn(y, y, y, mask)
        x = x + self.hook_attn_out(a)
        return self.hook_resid_post(x)


class AttentionOnlyModel(nn.Module):
    """A decoder of attention blocks only (Elhage et al. 2021's attention-only models).

    Token embedding + learned positions, ``n_layers`` `AttentionBlock`s
    (``blocks.{i}.attn`` with `lib.MultiHeadAttention`'s hook points), a final
    LayerNorm and an untied linear head. With no MLP, everything it predicts beyond
    what the current token alone suggests (the direct path from embedding to head) goes
    through attention: two layers are the fewest in which an induction head can form.
    """

    def __init__(self, vocab_size: int, d_model: int = 64, n_heads: int = 4, n_layers: int = 2,
                 max_len: int = 256, position: str = "learned"):
        super().__init__()
        self.vocab_size = require_positive_int("vocab_size", vocab_size)
        self.n_heads = require_positive_int("n_heads", n_heads)
        self.n_layers = require_positive_int("n_layers", n_layers)
        self.max_len = require_positive_int("max_len", max_len)
        if position not in ("learned", "rotary"):
            raise ValueError(f"position must be 'learned' or 'rotary', got {position!r}")
        self.position = position
        self.embed = nn.Embedding(vocab_size, d_model)
        self.pos = nn.Embedding(max_len, d_model) if position == "learned" else None
        self.blocks = nn.ModuleList(AttentionBlock(d_model, n_heads, position == "rotary")
                                    for _ in range(n_layers))
        self.final_norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size, bias=False)
        for emb in (self.embed, self.pos):
            if emb is not None:
                nn.init.normal_(emb.weight, std=0.02)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """tokens (B, T) -> logits (B, T, vocab_size), causal."""
        if tokens.dim() != 2 or tokens.shape[1] > self.max_len:
            raise ValueError(f"tokens must have shape (B, T <= {self.max_len}), got {tuple(tokens.shape)}")
        T = tokens.shape[1]
        x = self.embed(tokens)  # (B, T, d_model)
        if self.pos is not None:
            x = x + self.pos(torch.arange(T, device=tokens.device))
        mask = causal_mask(T, device=tokens.device)
        for block in self.blocks:
            x = block(x, mask)
        return self.head(self.final_norm(x))


def _write_twice(window: torch.Tensor, g: torch.Generator, low: int = 40, high: int = 64) -> None:
    """Copy a passage of ``low`` to ``high`` characters (its length drawn at random, capped
    at half the window) further on in the window, at a random place and distance, so that
    only matching content (not a fixed offset) finds the earlier copy."""
    T = window.numel()
    high = min(high, T // 2)
    low = min(low, high)
    length = int(torch.randint(low, high + 1, (1,), generator=g))
    start = int(torch.randint(0, T - 2 * length + 1, (1,), generator=g))
    copy_at = int(torch.randint(start + length, T - length + 1, (1,), generator=g))
    window[copy_at: copy_at + length] = window[start: start + length].clone()


@dataclass
class InductionRun:
    """What `train_attention_only` measured at each checkpoint (one entry per checkpoint)."""

    seed: int
    steps: list[int] = field(default_factory=list)
    train_loss: list[float] = field(default_factory=list)  # mean over the steps since the last checkpoint
    # held-out windows with a passage written twice (as the training windows): the loss
    # predicting positions 1..8 and the last 32 positions (`early_late_losses`)
    early_loss: list[float] = field(default_factory=list)
    late_loss: list[float] = field(default_factory=list)
    # the same on held-out plain text (no passage written twice)
    plain_early_loss: list[float] = field(default_factory=list)
    plain_late_loss: list[float] = field(default_factory=list)
    first_half: list[float] = field(default_factory=list)  # repeated random characters: first copy
    second_half: list[float] = field(default_factory=list)  # ... and second copy
    induction: list[torch.Tensor] = field(default_factory=list)  # (n_layers, h) per checkpoint
    previous: list[torch.Tensor] = field(default_factory=list)  # (n_layers, h) per checkpoint
    seconds: float = 0.0
    model: AttentionOnlyModel | None = None
    # the held-out windows measured at every checkpoint, (64, context) ids each: plain text,
    # and the same windows with a passage written twice (for `early_late_losses`)
    plain_windows: torch.Tensor | None = None
    repeat_windows: torch.Tensor | None = None

    def best_induction(self, layer: int = 1) -> list[float]:
        """The best head's induction score in ``layer`` at each checkpoint."""
        return [float(s[layer].max()) for s in self.induction]


def train_attention_only(train_ids: torch.Tensor, valid_ids: torch.Tensor, vocab_size: int, *,
                         seed: int = 0, steps: int = 2000, every: int = 100, context: int = 128,
                         batch_size: int = 32, d_model: int = 64, n_heads: int = 4, lr: float = 3e-3,
                         probe_length: int = 40, probe_batch: int = 32,
                         repeat_fraction: float = 1.0, repeat_length: tuple[int, int] = (40, 64),
                         position: str = "learned",
                         probe_range: tuple[int, int] | None = None) -> InductionRun:
    """Train a two-layer `AttentionOnlyModel` on characters; measure it every ``every`` steps.

    Random windows of ``context`` characters of ``train_ids``, AdamW (``lr``, constant
    after a linear warm-up over the first 10 % of the steps, at most 200). At each
    checkpoint: `early_late_losses` on 64 held-out windows of ``valid_ids``, each with a
    passage written twice as in training (``early_loss``, ``late_loss``) and as plain
    text (``plain_early_loss``, ``plain_late_loss``; the windows are kept on the run as
    ``repeat_windows`` and ``plain_windows``, to measure the trained model again), the two
    half losses on repeated random characters (`repeated_tokens`, ``probe_length`` per copy) and each head's
    induction and previous-token scores on them. ``repeat_fraction`` of each
    batch's windows hold a passage written twice (its length drawn from
    ``repeat_length`` = (shortest, longest) characters, its place and the distance
    between the copies at random), the rest plain text. ``probe_range``
    = (low, high) draws the probe's random characters from ids low .. high - 1 (e.g.
    the lowercase letters; default: the whole vocabulary). One thread's worth of work:
    the default 2,000 steps take 85-120 s on one core. With the defaults a layer-2
    induction head (score >= 0.2 on lowercase letters) formed within them on each of six
    seeds (chapter 16, section 5; bench/induction_training.py).
    """
    for name, ids in (("train_ids", train_ids), ("valid_ids", valid_ids)):
        if not isinstance(ids, torch.Tensor) or ids.dim() != 1 or ids.is_floating_point():
            raise TypeError(f"{name} must be a 1-d tensor of integer ids")
    steps, every = require_positive_int("steps", steps), require_positive_int("every", every)
    if not 0.0 <= repeat_fraction <= 1.0:
        raise ValueError(f"repeat_fraction must be between 0 and 1, got {repeat_fraction!r}")
    if (not isinstance(repeat_length, tuple) or len(repeat_length) != 2
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in repeat_length)
            or not 2 <= repeat_length[0] <= repeat_length[1] or 2 * repeat_length[1] > context):
        raise ValueError(f"repeat_length must be (shortest, longest) ints with 2 <= shortest <= "
                         f"longest and two copies of the longest fitting in context={context}, "
                         f"got {repeat_length!r}")
    if context < 8:
        raise ValueError(f"context must be at least 8 characters, got {context!r}")
    if 2 * probe_length > context:
        raise ValueError(f"probe_length {probe_length}: two copies must fit in context {context}")
    if probe_range is None:
        probe_range = (0, vocab_size)
    if (not isinstance(probe_range, tuple) or len(probe_range) != 2
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in probe_range)
            or not 0 <= probe_range[0] < probe_range[1] - 1 < vocab_size):
        raise ValueError(f"probe_range must be (low, high) ids with 0 <= low < high - 1 < "
                         f"vocab_size = {vocab_size}, got {probe_range!r}")
    start = time.perf_counter()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = AttentionOnlyModel(vocab_size, d_model, n_heads, 2, max_len=context, position=position)
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    warm = max(1, min(200, steps // 10))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warm))
    vg = torch.Generator().manual_seed(1234)
    starts = torch.randint(0, valid_ids.numel() - context - 1, (64,), generator=vg)
    valid = torch.stack([valid_ids[s: s + context] for s in starts.tolist()])
    valid_repeat = valid.clone()
    for row in valid_repeat:
        _write_twice(row, vg, *repeat_length)
    probe = repeated_tokens(probe_batch, probe_length, low=probe_range[0], high=probe_range[1],
                            seed=4321)
    run = InductionRun(seed=seed, plain_windows=valid, repeat_windows=valid_repeat)
    span = dict(early=8, late=min(32, context - 1))  # the last 32 positions, or all there are
    losses = []

    def measure(step):
        model.eval()
        plain = early_late_losses(model, valid, **span)
        r = repeat_probe(model, probe, probe_length, skip=0)
        a, b, ind, prev = r["first"], r["second"], r["induction"], r["previous"]
        run.steps.append(step)
        run.train_loss.append(sum(losses) / len(losses) if losses else float("nan"))
        run.plain_early_loss.append(plain[0])
        run.plain_late_loss.append(plain[1])
        early, late = early_late_losses(model, valid_repeat, **span)
        run.early_loss.append(early)
        run.late_loss.append(late)
        run.first_half.append(a)
        run.second_half.append(b)
        run.induction.append(ind)
        run.previous.append(prev)
        losses.clear()
        model.train()

    measure(0)
    model.train()
    for step in range(1, steps + 1):
        idx = torch.randint(0, train_ids.numel() - context - 1, (batch_size,), generator=g)
        x = torch.stack([train_ids[s: s + context] for s in idx.tolist()])
        for row in range(int(round(repeat_fraction * batch_size))):
            _write_twice(x[row], g, *repeat_length)
        logits = model(x)
        loss = F.cross_entropy(logits[:, :-1].flatten(0, 1), x[:, 1:].flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
        if step % every == 0 or step == steps:
            measure(step)
    model.eval()
    run.model = model
    run.seconds = time.perf_counter() - start
    return run
