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
- `row_probe`: for one decoder row per pair, its next-token probabilities
  and where its cross-attention looks (why one run stops the 2040s after "204").
- `date_fields`: where the year, the dashes, the month and the day sit in a
  source of the date task.
- `warmup_runs`: the Play section's table, post-LN and pre-LN with and without
  warm-up, each setting on several seeds; the runs are independent, so they run
  in parallel processes (one thread each: the same losses as one after another).
  `start_warmup_runs` starts them in the background and returns at once.
- `date_model_run`: the chapter's main date model trained with another seed
  (`start_date_model_run`: in a background process), to see which results
  depend on the seed.
- `background_workers`: how many background processes those `start_` functions
  keep working at once. They share one pool of that size, one CPU fewer than
  this process may use, so that the process that started them keeps a core
  for its own training (chapter 8's main model); their work waits its turn.
  Asked for a result, this process runs the jobs still queued itself rather
  than wait with a core idle.
"""

from __future__ import annotations

import contextlib
import inspect
import math
import multiprocessing
import operator
import os
import random
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import torch
from torch import nn

from lib._checks import require_bool, require_probability
from lib.model.attention import causal_mask
from lib.train.data import make_batch

__all__ = [
    "ScriptedModel",
    "BeamStep",
    "beam_trace",
    "cross_attention_maps",
    "cross_attention_ablation",
    "row_probe",
    "date_fields",
    "warmup_run",
    "warmup_runs",
    "start_warmup_runs",
    "PendingRuns",
    "background_workers",
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
    return _cross_weights(model, batch, layer)[0]  # (h, m, n)


def _cross_weights(model, batch, layer: int) -> torch.Tensor:
    """Cross-attention weights (B, h, m, n) of decoder layer ``layer`` on a batch."""
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
    B = batch.src.shape[0]
    q = attn.w_q(seen["query"]).view(B, -1, h, d_k).transpose(1, 2)  # (B, h, m, d_k)
    k = attn.w_k(seen["key"]).view(B, -1, h, d_k).transpose(1, 2)  # (B, h, n, d_k)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)  # (B, h, m, n)
    if seen["mask"] is not None:
        scores = scores.masked_fill(~seen["mask"], float("-inf"))
    return scores.softmax(dim=-1)  # (B, h, m, n)


@torch.no_grad()
def row_probe(
    model, pairs: Sequence[tuple[str, str]], vocab, row: Callable[[str, str], int],
    layer: int = -1,
) -> tuple[torch.Tensor, torch.Tensor]:
    """What one decoder row predicts, and where it looks, for each pair (chapter 8).

    ``row(source, target)`` names one decoder row per pair (row r predicts
    target[r]; r = len(target) predicts EOS). Under teacher forcing, returns
    ``probs`` (P, |V|), that row's next-token probabilities, and ``weights``
    (P, n), its cross-attention in decoder layer ``layer`` averaged over the
    heads, over source positions (n: the longest source; PAD columns get 0).
    """
    pairs = list(pairs)
    if not pairs:
        raise ValueError("pairs is empty: row_probe needs at least one (source, target) pair")
    rows = []
    for source, target in pairs:
        r = row(source, target)
        if isinstance(r, bool):
            raise TypeError(f"row() must give an int row, got the bool {r!r} for {target!r}")
        try:
            r = operator.index(r)  # an int, a NumPy int or a 0-d integer tensor
        except TypeError:
            raise TypeError(f"row() must give an int row, got {r!r} ({type(r).__name__}) "
                            f"for {target!r}") from None
        if not 0 <= r <= len(target):  # negative rows would wrap: refused
            raise ValueError(f"row() must give a row in [0, {len(target)}] for {target!r}, got {r!r}")
        rows.append(r)
    batch = make_batch(pairs, vocab)
    model.eval()
    logits = model(batch.src, batch.tgt_in, src_mask=batch.src_mask, tgt_mask=batch.tgt_mask)
    index = torch.arange(len(pairs)), torch.tensor(rows)
    probs = logits.softmax(dim=-1)[index]  # (P, |V|)
    weights = _cross_weights(model, batch, layer).mean(dim=1)[index]  # (P, n)
    return probs, weights


@torch.no_grad()
def cross_attention_ablation(
    model,
    pairs: Sequence[tuple[str, str]],
    vocab,
    rows: Callable[[str, str], Sequence[int]],
    hide: Callable[[str], Sequence[int]] = lambda source: (),
    all_rows: bool = False,
) -> float:
    """Accuracy of chosen decoder rows when chosen source positions are hidden.

    For each (source, target) pair, ``rows(source, target)`` names decoder
    rows (row r predicts target[r]; r = len(target) predicts EOS) and
    ``hide(source)`` source positions. Those rows' cross-attention, in every
    decoder layer, may not look at those positions; the encoder and the other
    rows see everything. Under teacher forcing, returns the fraction of the
    chosen rows whose most probable next token is the right one.

    What "hidden" does not cut: the chosen rows still read, through decoder
    self-attention, the states of earlier rows that saw the whole source. With
    ``all_rows=True`` the positions are hidden from every decoder row of the
    pair, which closes that indirect path (the encoder still mixes the source).
    """
    pairs = list(pairs)
    if not pairs:
        raise ValueError("pairs is empty: the ablation needs at least one (source, target) pair")
    require_bool("all_rows", all_rows)
    batch = make_batch(pairs, vocab)
    B, n = batch.src.shape
    m = batch.tgt_in.shape[1]
    cross = batch.src_mask.expand(B, 1, m, n).clone()  # (B, 1, m, n)
    chosen = torch.zeros(B, m, dtype=torch.bool)
    for b, (source, target) in enumerate(pairs):
        # Checked before use: a negative index would wrap to the last row or position.
        chosen_rows = [_index_in("rows", r, len(target) + 1, source) for r in rows(source, target)]
        hidden = [_index_in("hide", j, len(source), source) for j in hide(source)]
        for r in chosen_rows:
            chosen[b, r] = True
            for j in hidden:
                if all_rows:
                    cross[b, 0, :, j] = False
                else:
                    cross[b, 0, r, j] = False
    if not bool(chosen.any()):
        raise ValueError("rows() chose no decoder row")
    model.eval()
    memory = model.encode(batch.src, src_mask=batch.src_mask)
    logits = model.decode(batch.tgt_in, memory, src_mask=cross, tgt_mask=batch.tgt_mask)
    right = logits.argmax(-1) == batch.tgt_out  # (B, m)
    return float(right[chosen].float().mean())


def _index_in(name: str, value, size: int, source: str) -> int:
    """`value` as an index in 0..size-1 (an int, NumPy int or 0-d integer tensor); no wrapping."""
    try:
        index = operator.index(value)
    except TypeError:
        raise TypeError(f"{name}() must give int indices, got {value!r} ({type(value).__name__}) "
                        f"for source {source!r}") from None
    if not 0 <= index < size:
        raise ValueError(f"{name}() gave index {index} for source {source!r}: it must be in "
                         f"0..{size - 1} (negative indices are not allowed: they would wrap)")
    return index


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


def warmup_run(
    dates, norm_first: bool, warmup_steps: int, seed: int, steps: int = 150,
    lr: float = 4.4e-3, clip_norm: float | None = 1.0, batch_size: int = 64,
) -> list[float]:
    """One run of chapter 8's warm-up table; returns the loss of every step.

    A 6+6-layer `lib.Transformer` of the chapter's width (d_model 64, 4 heads,
    d_ff 256, dropout 0.1), post-LN or pre-LN (``norm_first``), trained on
    batches of ``batch_size`` date pairs drawn from ``dates`` with Adam
    (β = (0.9, 0.98), ε = 1e-9) at the constant rate ``lr``, ramped up linearly
    over the first ``warmup_steps`` steps (0: no warm-up), label smoothing 0.1
    and, like the chapter's main run, gradient clipping at ``clip_norm``.
    ``seed`` seeds the weights, the dropout and the batches.
    """
    from lib.model.transformer import TransformerConfig
    from lib.train.dates import DATE_VOCAB, sample_pairs
    from lib.train.training import fit

    if isinstance(warmup_steps, bool) or not isinstance(warmup_steps, int) or warmup_steps < 0:
        raise ValueError(f"warmup_steps must be an int >= 0, got {warmup_steps!r}")
    torch.manual_seed(seed)
    deep = TransformerConfig(
        src_vocab_size=len(DATE_VOCAB), tgt_vocab_size=len(DATE_VOCAB), d_model=64,
        n_heads=4, n_layers=6, d_ff=256, dropout=0.1, max_len=64, norm_first=norm_first,
    ).build()
    opt = torch.optim.Adam(deep.parameters(), lr=lr, betas=(0.9, 0.98), eps=1e-9)
    ramp = lambda i: min(1.0, (i + 1) / warmup_steps) if warmup_steps else 1.0  # noqa: E731
    sched = torch.optim.lr_scheduler.LambdaLR(opt, ramp)  # LambdaLR counts from 0
    rng = random.Random(seed)
    batches = lambda step: make_batch(sample_pairs(dates, batch_size, rng), DATE_VOCAB)  # noqa: E731
    return fit(deep, batches, steps, opt, sched, label_smoothing=0.1, clip_norm=clip_norm).losses


def _one_thread() -> None:
    torch.set_num_threads(1)


def background_workers() -> int:
    """How many background processes `start_warmup_runs` and `start_date_model_run`
    keep working at once: the CPUs this process may run on, less one for this
    process itself (which goes on with its own work, as chapter 8 trains its main
    model meanwhile), and at least one.

    With one more, every process gets less than a core: on 2 CPUs chapter 8 once
    ran five background runs beside its main training, which then took 18 minutes
    for 1.6 minutes of CPU time.
    """
    try:
        cpus = len(os.sched_getaffinity(0))  # the CPUs this process may use (Linux)
    except AttributeError:
        cpus = os.cpu_count() or 1
    return max(1, cpus - 1)


_BACKGROUND: ProcessPoolExecutor | None = None  # the start_ functions' shared pool


def _submit_background(fn, job):
    """Submit ``fn(job)`` to the shared pool of `background_workers` processes (one
    thread each), made on first use and again if it was shut down or broke. The
    work runs in the order it was submitted."""
    global _BACKGROUND
    for _ in range(2):
        if _BACKGROUND is None:
            context = multiprocessing.get_context("spawn")  # no fork of a threaded parent
            _BACKGROUND = ProcessPoolExecutor(background_workers(), mp_context=context,
                                              initializer=_one_thread)
        try:
            return _BACKGROUND.submit(fn, job)
        except RuntimeError:  # shut down, or broken (BrokenProcessPool is one)
            _BACKGROUND = None
    raise RuntimeError("could not start a background process")


def _run_one(job: tuple) -> list[float]:
    dates, norm_first, warmup_steps, seed, kw = job
    return warmup_run(dates, norm_first, warmup_steps, seed, **kw)


@contextlib.contextmanager
def _on_one_thread():
    """This process on one thread, as a background worker is (so that a run gives
    the same numbers, bit for bit); the thread count is restored afterwards."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def _run_here(fn, job):
    """A background job run in this process instead, as its worker runs it: on one
    thread, with torch's random state put back afterwards (the runs seed it)."""
    with _on_one_thread(), torch.random.fork_rng(devices=[]):
        return fn(job)


def _collect(futures: list, fn, jobs: list, here: dict) -> list:
    """The results of ``futures`` (of ``fn(jobs[i])``), in order. Rather than wait with
    a core idle, this process takes back the jobs still queued, latest first (the
    workers take the earliest), and runs them itself; ``here`` keeps those results,
    so that a wait interrupted and asked again loses nothing."""
    for i in reversed(range(len(futures))):
        if i not in here and (futures[i].cancelled() or futures[i].cancel()):
            here[i] = _run_here(fn, jobs[i])
    return [here[i] if i in here else f.result() for i, f in enumerate(futures)]


def _finished(futures: list, here: dict) -> bool:
    """Whether every job of `_collect` has its result (a job taken back is cancelled
    in the pool but finished here)."""
    return all(i in here or (f.done() and not f.cancelled()) for i, f in enumerate(futures))


def _table(names: list[str], n_seeds: int, losses: list) -> dict[str, list[list[float]]]:
    """The warm-up table from the runs' losses, in `_warmup_jobs`'s order."""
    return {name: losses[i * n_seeds:(i + 1) * n_seeds] for i, name in enumerate(names)}


class PendingRuns:
    """The warm-up table's runs, working in background processes (`start_warmup_runs`).

    ``result()`` returns the table as `warmup_runs` does: it runs here the runs no
    process has started yet (the same losses) and waits for the others;
    ``done()`` says whether all have finished.
    """

    def __init__(self, names: list[str], n_seeds: int, futures: list, pool,
                 jobs: list) -> None:
        self._names, self._n, self._futures, self._pool = names, n_seeds, futures, pool
        self._jobs, self._here = jobs, {}
        self._table: dict[str, list[list[float]]] | None = None

    def done(self) -> bool:
        return _finished(self._futures, self._here)

    def result(self) -> dict[str, list[list[float]]]:
        if self._table is None:
            losses = _collect(self._futures, _run_one, self._jobs, self._here)
            if self._pool is not None:
                self._pool.shutdown(wait=True)
            self._table = _table(self._names, self._n, losses)
        return self._table


def _warmup_jobs(dates, seeds, warmup_steps: int, kw: dict) -> tuple[list[str], list[tuple]]:
    seeds = list(seeds)
    if not seeds or not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds):
        raise ValueError(f"seeds must be a non-empty list of ints, got {seeds!r}")
    if isinstance(warmup_steps, bool) or not isinstance(warmup_steps, int) or warmup_steps < 1:
        raise ValueError(f"warmup_steps must be an int >= 1, got {warmup_steps!r}")
    settings = {
        "post-LN, no warm-up": (False, 0), "post-LN, warm-up": (False, warmup_steps),
        "pre-LN, no warm-up": (True, 0), "pre-LN, warm-up": (True, warmup_steps),
    }
    dates = list(dates)
    if not dates:
        raise ValueError("dates is empty: the runs need dates to draw batches from")
    jobs = [(dates, nf, w, seed, kw) for nf, w in settings.values() for seed in seeds]
    return list(settings), jobs


def _check_workers(workers, n_jobs: int) -> int:
    if workers is None:
        workers = min(n_jobs, os.cpu_count() or 1)
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be a positive int, got {workers!r}")
    return workers


def start_warmup_runs(
    dates, seeds: Sequence[int], warmup_steps: int = 100, workers: int | None = None, **kw
) -> PendingRuns:
    """Start the four settings of chapter 8's warm-up table in background processes.

    The same runs as `warmup_runs`, returned at once as a `PendingRuns` whose
    ``result()`` gives the table. Chapter 8 starts them before its main model
    trains on one thread, so that the other core works meanwhile. Each run uses
    one thread: the losses do not depend on what else runs. By default the runs
    join the queue of the pool `start_date_model_run` uses too
    (`background_workers` processes: one CPU is left to this process); given
    ``workers``, they get a pool of their own of that size. Other keywords go to
    `warmup_run`.
    """
    names, jobs = _warmup_jobs(dates, seeds, warmup_steps, kw)
    if workers is None:
        futures = [_submit_background(_run_one, job) for job in jobs]
        return PendingRuns(names, len(list(seeds)), futures, None, jobs)
    workers = _check_workers(workers, len(jobs))
    context = multiprocessing.get_context("spawn")  # no fork of a threaded parent
    pool = ProcessPoolExecutor(workers, mp_context=context, initializer=_one_thread)
    futures = [pool.submit(_run_one, job) for job in jobs]
    return PendingRuns(names, len(list(seeds)), futures, pool, jobs)


def warmup_runs(
    dates, seeds: Sequence[int], warmup_steps: int = 100, workers: int | None = None, **kw
) -> dict[str, list[list[float]]]:
    """The four settings of chapter 8's warm-up table, each on every seed.

    Returns {"post-LN, no warm-up": [losses of seed 0, losses of seed 1, ...],
    "post-LN, warm-up": ..., "pre-LN, no warm-up": ..., "pre-LN, warm-up": ...}.
    The runs are independent and each uses one thread, so they run in
    ``workers`` processes (default: as many as there are CPUs, at most the number
    of runs) and give the same losses as one after another; ``workers=1`` runs
    them here. Other keywords go to `warmup_run`.
    """
    names, jobs = _warmup_jobs(dates, seeds, warmup_steps, kw)
    workers = _check_workers(workers, len(jobs))
    if workers > 1:
        return start_warmup_runs(dates, seeds, warmup_steps, workers, **kw).result()
    with _on_one_thread():  # here, on one thread too, so that the losses are the same
        losses = [_run_one(job) for job in jobs]
    return _table(names, len(list(seeds)), losses)


def _check_date_run(dates, seed, steps, batch_size, warmup_steps, label_smoothing) -> list:
    """`date_model_run`'s arguments checked (before any training); returns the dates as a list."""
    for name, value in (("seed", seed), ("steps", steps), ("batch_size", batch_size),
                        ("warmup_steps", warmup_steps)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be an int, got {type(value).__name__}")
        if name != "seed" and value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")
    require_probability("label_smoothing", label_smoothing)  # a number in [0, 1)
    dates = list(dates)
    if not dates:
        raise ValueError("dates is empty: the run needs dates to draw batches from")
    return dates


def date_model_run(
    dates, seed: int, steps: int = 500, batch_size: int = 128, warmup_steps: int = 200,
    factor: float = 0.5, clip_norm: float | None = 1.0, label_smoothing: float = 0.1,
) -> dict[str, torch.Tensor]:
    """Chapter 8's main date model trained again with another ``seed``; returns its weights.

    The chapter's recipe: a `lib.Transformer` with d_model 64, 4 heads, 2 + 2
    layers, d_ff 256, dropout 0.1, max_len 64, built after
    ``torch.manual_seed(seed)``; `noam_optimizer` (warm-up ``warmup_steps``,
    ``factor``); batches of ``batch_size`` pairs drawn from ``dates`` with
    ``random.Random(seed)``; label smoothing ``label_smoothing`` (the chapter's
    0.1; chapter 8 also trains with 0, to compare the model's confidence) and
    gradient clipping at ``clip_norm``. Run on one thread, it gives the chapter's
    weights bit for bit for the chapter's seed. Returns the ``state_dict`` (load it
    into `date_model_config().build()`).
    """
    from lib.train.dates import DATE_VOCAB, sample_pairs
    from lib.train.training import fit, noam_optimizer

    dates = _check_date_run(dates, seed, steps, batch_size, warmup_steps, label_smoothing)
    torch.manual_seed(seed)
    model = date_model_config().build()
    optimizer, scheduler = noam_optimizer(model, d_model=64, warmup_steps=warmup_steps,
                                          factor=factor)
    rng = random.Random(seed)
    batches = lambda step: make_batch(sample_pairs(dates, batch_size, rng), DATE_VOCAB)  # noqa: E731
    fit(model, batches, steps=steps, optimizer=optimizer, scheduler=scheduler,
        label_smoothing=label_smoothing, clip_norm=clip_norm)
    return model.state_dict()


def date_model_config():
    """The configuration of chapter 8's date model (241,536 parameters)."""
    from lib.model.transformer import TransformerConfig
    from lib.train.dates import DATE_VOCAB

    return TransformerConfig(
        src_vocab_size=len(DATE_VOCAB), tgt_vocab_size=len(DATE_VOCAB), d_model=64,
        n_heads=4, n_layers=2, d_ff=256, dropout=0.1, max_len=64,
    )


class PendingModel:
    """A `date_model_run` working in a background process (`start_date_model_run`).

    ``result()`` returns the trained model, in eval mode: it trains it here if no
    process has started it yet (the same weights), else waits for it; ``done()``
    says whether it has finished.
    """

    def __init__(self, future, job: tuple) -> None:
        self._future, self._job, self._here, self._model = future, job, {}, None

    def done(self) -> bool:
        return _finished([self._future], self._here)

    def result(self) -> nn.Module:
        if self._model is None:
            state = _collect([self._future], _date_run, [self._job], self._here)[0]
            model = date_model_config().build()
            model.load_state_dict(state)
            self._model = model.eval()
        return self._model


def _date_run(job: tuple) -> dict[str, torch.Tensor]:
    dates, seed, kw = job
    return date_model_run(dates, seed, **kw)


def start_date_model_run(dates, seed: int, **kw) -> PendingModel:
    """Start `date_model_run` in a background process (one thread) and return at once.

    Chapter 8 starts its second seed this way before its main model trains, so
    that the other core works meanwhile; on one thread the weights do not depend
    on what else runs. The run joins the queue of a pool of `background_workers`
    processes shared with `start_warmup_runs` (work starts in the order it was
    submitted). Other keywords go to `date_model_run`.
    """
    bound = inspect.signature(date_model_run).bind(dates, seed, **kw)  # unknown keywords
    bound.apply_defaults()
    args = bound.arguments
    dates = _check_date_run(dates, seed, args["steps"], args["batch_size"],
                            args["warmup_steps"],
                            args["label_smoothing"])  # here, not in the background process
    job = (dates, seed, kw)
    return PendingModel(_submit_background(_date_run, job), job)
