"""Chapter 6's experiment: does a position encoding let a model use positions it never saw?

A small causal language model (`lib.DecoderOnlyModel`, two layers, d_model = 32)
learns sequences that repeat a random pattern of 5 tokens, on sequences of 16
tokens, and is tested on sequences of 64. From position 5 on, the next token is
always the one 5 positions back: a purely relative rule.

- `repeating(batch_size, length)`: a batch of such sequences.
- `train_pattern_model(positional, seed)`: trains the model with the given
  position encoding ("sinusoidal" or "learned") and returns a `PatternRun`.
- `PatternRun` holds the test batch, the predictions, the accuracy per position,
  and what the model predicts past the training length (the first token of the
  sequence? a token of the pattern?), and where its last layer attends.

Tests: tests/test_extrapolation.py.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import torch
from torch import nn

from lib.model.families import DecoderOnlyModel

__all__ = ["PatternRun", "dominant_period", "repeating", "train_pattern_model"]

VOCAB = 20  # token ids 1..19 in the patterns; 0 is never used


def repeating(batch_size: int, length: int, period: int = 5, vocab: int = VOCAB,
              generator: torch.Generator | None = None) -> torch.Tensor:
    """(batch_size, length) int64: a random pattern of `period` tokens (ids 1..vocab-1),
    repeated. Chapter 6."""
    for name, value in (("batch_size", batch_size), ("length", length), ("period", period),
                        ("vocab", vocab)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    if vocab < 2:
        raise ValueError(f"vocab must be at least 2 (id 0 is left out), got {vocab}")
    if period > length:
        raise ValueError(f"period must be at most length, got period={period} > length={length}: "
                         "the sequence would hold less than one copy of the pattern, and not repeat")
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator or None, got "
                        f"{type(generator).__name__}")
    pattern = torch.randint(1, int(vocab), (int(batch_size), int(period)), generator=generator)
    return pattern.repeat(1, int(length) // int(period) + 1)[:, : int(length)]  # (B, length)


@dataclass
class PatternRun:
    """One trained model and its test on longer sequences.

    ``test`` is (B, test_len); ``pred[:, j]`` is the model's prediction for the
    token at position j + 1 (so ``pred`` is (B, test_len - 1)); ``correct[j]``
    the share of sequences where it is right. ``last_attention`` is the last
    layer's attention weights on the test batch, (B, h, test_len - 1, test_len - 1).
    """

    positional: str
    seed: int
    train_len: int
    period: int
    final_loss: float
    model: nn.Module
    test: torch.Tensor
    pred: torch.Tensor
    correct: torch.Tensor
    last_attention: torch.Tensor

    @property
    def target_pos(self) -> torch.Tensor:
        """The position of each predicted token: 1, 2, ..., test_len - 1."""
        return torch.arange(1, self.test.shape[1])

    def accuracy(self, first: int, stop: int | None = None) -> float:
        """Mean accuracy over target positions first .. stop - 1 (to the end if stop is None)."""
        t = self.target_pos
        keep = (t >= first) & (t < (stop if stop is not None else t[-1] + 1))
        if not bool(keep.any()):
            raise ValueError(f"no target position in [{first}, {stop})")
        return float(self.correct[keep].mean())

    def _beyond(self, values: torch.Tensor) -> torch.Tensor:
        return values[:, self.train_len - 1 :]  # predictions of positions train_len ...

    def first_token_share(self) -> float:
        """Share of the predictions past the training length equal to the sequence's first token."""
        return float((self._beyond(self.pred) == self.test[:, :1]).double().mean())

    def in_pattern_share(self) -> float:
        """Share of the predictions past the training length that are one of the pattern's tokens."""
        pattern = self.test[:, : self.period]  # (B, period)
        hit = (self._beyond(self.pred)[:, :, None] == pattern[:, None, :]).any(-1)
        return float(hit.double().mean())

    def accuracy_where_first_is_right(self) -> tuple[float, float]:
        """Accuracy past the training length at positions ≡ 0 (mod period), where the
        first token is the right answer, and at the other positions."""
        t = self.target_pos
        beyond = t >= self.train_len
        at_multiple = beyond & (t % self.period == 0)
        return float(self.correct[at_multiple].mean()), float(self.correct[beyond & ~at_multiple].mean())

    def attention_row(self, query: int) -> torch.Tensor:
        """Last layer, every head: the weights of the query at position `query`, averaged
        over the test batch, (h, query + 1)."""
        if not isinstance(query, numbers.Integral) or not 0 <= query < self.last_attention.shape[-2]:
            raise ValueError(f"query must be an int in [0, {self.last_attention.shape[-2]}), got {query!r}")
        return self.last_attention[:, :, int(query), : int(query) + 1].mean(0)  # (h, query + 1)

    def attention_on_first(self, first_query: int | None = None) -> float:
        """Last layer: the largest (over heads) mean weight on position 0, over the queries
        past the training length (from position train_len - 1, which predicts train_len)."""
        q0 = self.train_len - 1 if first_query is None else first_query
        w = self.last_attention[:, :, q0:, 0].mean(dim=(0, 2))  # (h,)
        return float(w.max())


    def weight_on_first_by_query(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Last layer, past the training length: for each query (train_len - 1 on), the
        largest (over heads) mean weight on key 0. Returns (queries, weights), both 1-D."""
        q0 = self.train_len - 1
        w = self.last_attention[:, :, q0:, 0].mean(0).max(0).values  # (n_queries,)
        return torch.arange(q0, q0 + w.shape[0]), w

    def top_keys(self, first: int, stop: int | None = None) -> torch.Tensor:
        """For each query in first .. stop - 1: the key with the largest weight in the head
        whose largest weight is highest (weights averaged over the test batch), 1-D int64."""
        n = self.last_attention.shape[-2]
        stop = n if stop is None else stop
        if not 0 <= first < stop <= n:
            raise ValueError(f"need 0 <= first < stop <= {n}, got first={first}, stop={stop}")
        keys = []
        for q in range(first, stop):
            row = self.attention_row(q)  # (h, q + 1)
            keys.append(int(row[int(row.max(1).values.argmax())].argmax()))
        return torch.tensor(keys)

    def lookup(self, first: int, stop: int | None = None) -> tuple[float, float]:
        """Queries first .. stop - 1: the share whose top key (`top_keys`) lies in the
        first period (keys 0 .. period - 1), and the share whose top key holds the token
        to predict there ((query + 1) mod period, as every test sequence repeats)."""
        keys = self.top_keys(first, stop)
        queries = torch.arange(first, first + keys.shape[0])
        in_first = keys < self.period
        right = keys % self.period == (queries + 1) % self.period
        return float(in_first.double().mean()), float(right.double().mean())


def dominant_period(values: torch.Tensor, shortest: float = 3.0, longest: float = 24.0,
                    n: int = 4000) -> float:
    """The period (in samples) of the strongest sinusoid in `values` (1-D, mean removed),
    scanned on `n` periods from `shortest` to `longest`: a periodogram on a fine grid.
    Chapter 6: the rhythm of the sinusoidal model's weight on key 0."""
    if not isinstance(values, torch.Tensor) or values.dim() != 1 or values.numel() < 4:
        raise ValueError("values must be a 1-D tensor of at least 4 numbers")
    if not 2 <= shortest < longest:
        raise ValueError(f"need 2 <= shortest < longest, got {shortest}, {longest}")
    x = values.double() - values.double().mean()
    t = torch.arange(x.numel(), dtype=torch.float64)
    periods = torch.linspace(shortest, longest, n, dtype=torch.float64)
    angle = 2 * torch.pi * t[None, :] / periods[:, None]  # (n, len)
    power = (x * torch.cos(angle)).sum(1) ** 2 + (x * torch.sin(angle)).sum(1) ** 2
    return float(periods[int(power.argmax())])


def train_pattern_model(positional: str = "sinusoidal", seed: int = 0, *, steps: int = 300,
                        train_len: int = 16, test_len: int = 64, batch_size: int = 32,
                        test_batch: int = 256, period: int = 5) -> PatternRun:
    """Chapter 6: train `lib.DecoderOnlyModel` (2 layers, 2 heads, d_model 32, d_ff 64,
    no dropout, max_len 128) for `steps` Adam steps (lr 3e-3) on repeating sequences
    of `train_len` tokens, then test it on `test_batch` sequences of `test_len`.

    `seed` seeds the initialisation (torch.manual_seed) and the data generator.
    With ``positional="learned"`` rows train_len - 1 .. 127 of the table never get a
    gradient (the inputs are the first train_len - 1 tokens, positions 0 .. train_len - 2).
    It runs on one thread (and restores the thread count): the model is too small to
    gain from more, and one thread is fastest on a busy machine.
    """
    if positional not in ("sinusoidal", "learned"):
        raise ValueError(f"positional must be 'sinusoidal' or 'learned', got {positional!r}")
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    for name, value in (("steps", steps), ("train_len", train_len), ("test_len", test_len)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    if not period < train_len <= test_len <= 128:
        raise ValueError(f"need period < train_len <= test_len <= 128, got period={period}, "
                         f"train_len={train_len}, test_len={test_len}")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a model this small gains nothing from more threads
    try:
        return _train(positional, int(seed), int(steps), int(train_len), int(test_len),
                      int(batch_size), int(test_batch), int(period))
    finally:
        torch.set_num_threads(threads)


def _train(positional, seed, steps, train_len, test_len, batch_size, test_batch, period):
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    model = DecoderOnlyModel(vocab_size=VOCAB, d_model=32, n_heads=2, n_layers=2, d_ff=64,
                             dropout=0.0, max_len=128, positional=positional)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(steps):
        seq = repeating(batch_size, train_len, period, generator=g)
        logits = model(seq[:, :-1])  # (B, train_len - 1, VOCAB): predict tokens 1 ..
        loss = nn.functional.cross_entropy(logits.reshape(-1, VOCAB), seq[:, 1:].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    with torch.no_grad():
        test = repeating(test_batch, test_len, period, generator=g)
        pred = model(test[:, :-1]).argmax(-1)  # (B, test_len - 1)
        last_attention = model.layers[-1].self_attn.attention_weights.clone()
    correct = (pred == test[:, 1:]).double().mean(0)  # (test_len - 1,)
    return PatternRun(positional, seed, train_len, period, float(loss.detach()), model, test, pred,
                      correct, last_attention)
