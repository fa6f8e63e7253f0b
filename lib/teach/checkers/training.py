"""Checkers for chapter 8's coding exercises (training and decoding).

Each `check_*` takes the learner's function and returns a `Verdict`: pass, or
the most likely mistake by name. Tests feed each checker the solution and one
wrong version per named mistake (tests/test_checkers_training.py).

And the numbers of the chapter's questions: `check_peak_ratio` and
`check_peak_step` (a longer warm-up), `check_smoothed_floor` (the smallest
label-smoothed loss per token) and `check_smoothed_confidence` (the optimal
confidence when ε is spread over fewer classes).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from lib.teach.checkers._predictions import prediction_verdict
from lib.teach.checkers._numbers import check_number, real_number
from lib.teach.checking import Case, Mistake, Verdict, check_function
from lib.teach.exercises import CheckResult
from lib.train.training import noam_lr as _noam_lr

__all__ = [
    "check_noam_lr", "check_label_smoothed_loss", "check_beam_step",
    "check_warmup_prediction", "warmup_outcome", "WARMUP_SETTINGS",
    "check_greedy_decode", "check_train_step", "check_peak_ratio", "check_peak_step",
    "check_smoothed_floor", "check_smoothed_confidence",
]


# ---------------------------------------------------------------------------
# noam_lr(step, d_model, warmup_steps)
# ---------------------------------------------------------------------------


def _noam_cases() -> list[Case]:
    """Steps before, at and after the peak, for the base model and chapter 8's small one."""
    cases = []
    for d_model, warmup in ((512, 4000), (64, 200), (1024, 50)):
        for step in (1, 2, warmup // 2, warmup, warmup + 1, 5 * warmup):
            cases.append(Case((step, d_model, warmup), label=f"step {step}, d_model {d_model}, "
                              f"warmup {warmup}"))
    return cases


def _noam_formula(step, d_model, warmup, exponent=-1.5, pick=min, scale=True):
    value = pick(step**-0.5, step * warmup**exponent)
    return d_model**-0.5 * value if scale else value


def check_noam_lr(noam_lr) -> Verdict:
    """Chapter 8, exercise: `noam_lr(step, d_model, warmup_steps)`, steps counted from 1.

    lrate = d_model^(-0.5) · min(step^(-0.5), step · warmup_steps^(-1.5)); returns a
    Python float (a NumPy scalar or a 0-d tensor is refused, naming the type).

    Input classes that separate right from plausible-wrong code, each in the cases:
    step 1 and 2 (off-by-one counting), steps before, at and just after the peak
    (min against max, the rising term's exponent), long after it (the decay), and
    three values of d_model (the d_model^(-0.5) factor and its sign).
    """
    mistakes = [
        Mistake(
            "max instead of min",
            "The rate follows the *smaller* of the two terms: the linear rise before the "
            "warm-up ends, the step^(-0.5) decay after. Did you write max(...)?",
            lambda s, d, w: _noam_formula(s, d, w, pick=max),
        ),
        Mistake(
            "warmup_steps^(-0.5) in the rising term",
            "The rising term is step · warmup_steps^(-1.5), so that both terms meet at "
            "step = warmup_steps. Did you write warmup_steps**-0.5?",
            lambda s, d, w: _noam_formula(s, d, w, exponent=-0.5),
        ),
        Mistake(
            "the d_model^(-0.5) factor is missing",
            "The whole min(...) is scaled by d_model**-0.5: did you leave it out?",
            lambda s, d, w: _noam_formula(s, d, w, scale=False),
        ),
        Mistake(
            "steps counted from 0 (off by one)",
            "The formula counts steps from 1: step 1 is the first update. Did you add 1 to "
            "step (as LambdaLR's 0-based counter needs, but this function does not)?",
            lambda s, d, w: _noam_formula(s + 1, d, w),
        ),
        Mistake(
            "d_model^(+0.5) instead of d_model^(-0.5)",
            "A wider model takes *smaller* steps: did you multiply by sqrt(d_model) "
            "instead of dividing?",
            lambda s, d, w: d**0.5 * min(s**-0.5, s * w**-1.5),
        ),
    ]
    if not callable(noam_lr):
        raise TypeError(f"the checker needs your function itself, got {type(noam_lr).__name__}")

    def python_float(step, d_model, warmup_steps):
        rate = noam_lr(step, d_model, warmup_steps)
        if not isinstance(rate, float):  # np.float32, a 0-d tensor, an int
            raise TypeError(f"noam_lr must return a Python float, got {type(rate).__name__} "
                            f"{rate!r}: wrap the result in float(...)")
        return rate

    return check_function(python_float, _noam_lr, _noam_cases(), mistakes, name="noam_lr")


# ---------------------------------------------------------------------------
# label_smoothed_loss(logits, target, smoothing, pad_id)
# ---------------------------------------------------------------------------


def _smoothing_cases() -> list[Case]:
    """Random logits (..., V) with PAD targets scattered in; pad_id is not always 0."""
    g = torch.Generator().manual_seed(0)
    cases = []
    for shape, smoothing, pad_id, dtype, scale in (
        ((2, 5, 7), 0.1, 0, torch.float64, 2.0),  # (B, m, |V|)
        ((3, 4, 11), 0.2, 0, torch.float32, 2.0),
        ((6, 5), 0.1, 4, torch.float64, 2.0),  # (N, |V|), PAD is class 4
        ((2, 6, 9), 0.1, 0, torch.float32, 60.0),  # large logits: exp overflows
    ):
        logits = torch.randn(shape, generator=g, dtype=dtype) * scale
        V = shape[-1]
        target = torch.randint(0, V, shape[:-1], generator=g)
        target = torch.where(target == pad_id, (target + 1) % V, target)  # PAD only where set
        pad = torch.rand(shape[:-1], generator=g) < 0.3
        pad.view(-1)[0] = True
        pad.view(-1)[1] = False
        target = target.masked_fill(pad, pad_id)
        label = f"logits {shape}, smoothing {smoothing}, pad_id {pad_id}"
        cases.append(Case((logits, target, smoothing, pad_id), label=label))
    return cases


def _reference_smoothed(logits, target, smoothing, pad_id):
    return F.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), target.reshape(-1),
        ignore_index=pad_id, label_smoothing=smoothing,
    )


def _smoothed_terms(log_p, target, smoothing, pad_id, over=None):
    """Per-token losses and the PAD mask, for the mistakes below."""
    V = log_p.shape[-1]
    keep = target != pad_id
    nll = -log_p.gather(-1, target.unsqueeze(-1)).squeeze(-1)
    if over == "K-1":  # ε spread over the K - 1 wrong classes only
        rest = (-log_p.sum(-1) - nll) / (V - 1)
        return (1 - smoothing) * nll + smoothing * rest, keep
    return (1 - smoothing) * nll + smoothing * (-log_p.mean(-1)), keep


def _as_tensor(fn):
    """Accept a Python float as the learner's answer too."""

    def wrapped(logits, target, smoothing, pad_id):
        result = fn(logits, target, smoothing, pad_id)
        if isinstance(result, (int, float)) and not isinstance(result, bool):
            return torch.tensor(float(result), dtype=logits.dtype)
        return result

    return wrapped


class _CalledCrossEntropy(Exception):
    """Raised inside the learner's function when it calls F.cross_entropy."""


class _NoCrossEntropy(TorchFunctionMode):
    """Refuse ``F.cross_entropy`` (and so ``nn.CrossEntropyLoss``, which calls it)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is F.cross_entropy:
            raise _CalledCrossEntropy
        return func(*args, **(kwargs or {}))


def _calls_cross_entropy(fn, cases: list[Case]) -> bool:
    """True when `fn` calls F.cross_entropy on any case (other errors are left to the checker)."""
    for case in cases:
        try:
            with _NoCrossEntropy():
                fn(*case.args)
        except _CalledCrossEntropy:
            return True
        except Exception:  # NotImplementedError and the learner's bugs: reported later
            pass
    return False


def check_label_smoothed_loss(label_smoothed_loss) -> Verdict:
    """Chapter 8, exercise: `label_smoothed_loss(logits, target, smoothing, pad_id)`.

    logits (..., |V|) float, target (...) class ids; the mean over non-PAD
    tokens of H(q, p), q = (1 - smoothing)·one-hot + smoothing/|V|. Returns a
    0-d tensor, as ``F.cross_entropy(..., label_smoothing=, ignore_index=)``
    does; the exercise is to write it from the formula, so a function that
    calls ``F.cross_entropy`` or ``nn.CrossEntropyLoss`` is refused.

    Input classes that separate right from plausible-wrong code, each in the cases:
    3-D (B, m, |V|) and 2-D (N, |V|) logits (a wrong reduction axis); PAD targets
    scattered in, and a pad_id other than 0 (a PAD test against 0, PAD in the mean);
    two smoothing values and two vocabulary sizes (ε/|V| against ε/(|V| - 1));
    float32 and float64 (the dtype kept); logits of scale 60 whose exp overflows
    float32 (softmax-then-log, raw logits).
    """
    cases = _smoothing_cases()
    if callable(label_smoothed_loss) and _calls_cross_entropy(label_smoothed_loss, cases):
        return Verdict(
            False,
            "✗ label_smoothed_loss calls F.cross_entropy (or nn.CrossEntropyLoss), the "
            "reference itself.\n  Write it from the formula: log_softmax, -log p(y), the "
            "mean of -log p(k), and the PAD mask; compare with F.cross_entropy afterwards.",
            mistake="calls F.cross_entropy",
        )

    def k_minus_1(logits, target, smoothing, pad_id):
        per, keep = _smoothed_terms(logits.log_softmax(-1), target, smoothing, pad_id, "K-1")
        return per[keep].mean()

    def pad_included(logits, target, smoothing, pad_id):
        per, _ = _smoothed_terms(logits.log_softmax(-1), target, smoothing, pad_id)
        return per.mean()

    def pad_in_denominator(logits, target, smoothing, pad_id):
        per, keep = _smoothed_terms(logits.log_softmax(-1), target, smoothing, pad_id)
        return per[keep].sum() / keep.numel()

    def raw_logits(logits, target, smoothing, pad_id):
        per, keep = _smoothed_terms(logits, target, smoothing, pad_id)
        return per[keep].mean()

    def softmax_then_log(logits, target, smoothing, pad_id):
        per, keep = _smoothed_terms(logits.softmax(-1).log(), target, smoothing, pad_id)
        return per[keep].mean()

    mistakes = [
        Mistake(
            "smoothing spread over K - 1 classes instead of K",
            "The paper's (and PyTorch's) q gives every class, the true one included, "
            "smoothing/|V|: the true class gets 1 - ε + ε/|V|. Did you spread ε over the "
            "|V| - 1 wrong classes only?",
            k_minus_1,
        ),
        Mistake(
            "PAD positions not excluded",
            "PAD targets are not predictions: did you average the loss over every "
            "position, PAD ones included? Mask them with target != pad_id.",
            pad_included,
        ),
        Mistake(
            "the mean counts PAD positions",
            "The PAD losses are zeroed, but is the sum divided by the number of *all* "
            "positions? Divide by the number of non-PAD targets.",
            pad_in_denominator,
        ),
        Mistake(
            "log_softmax missing (raw logits used as log-probabilities)",
            "Logits are not log-probabilities: did you apply log_softmax(dim=-1) first?",
            raw_logits,
        ),
        Mistake(
            "softmax then log: -inf for large logits",
            "softmax(...).log() underflows to log(0) = -inf when logits are large: did "
            "you use logits.log_softmax(dim=-1), which subtracts the maximum first?",
            softmax_then_log,
        ),
    ]
    return check_function(
        _as_tensor(label_smoothed_loss), _reference_smoothed, cases, mistakes,
        name="label_smoothed_loss",
    )


# ---------------------------------------------------------------------------
# beam_step(scores, log_probs, beam_size)
# ---------------------------------------------------------------------------


def _beam_cases() -> list[Case]:
    """Running scores (B, beam_size) and next-token log-probs (B, beam_size, |V|)."""
    g = torch.Generator().manual_seed(0)
    cases = []
    for B, K, V, first, dtype in (
        (2, 3, 7, False, torch.float64),
        (1, 2, 5, False, torch.float32),
        (3, 4, 6, True, torch.float32),  # the first step: one live hypothesis, the rest -inf
        (2, 2, 9, False, torch.float64),
    ):
        scores = -3 * torch.rand(B, K, generator=g, dtype=dtype)
        if first:
            scores[:, 1:] = float("-inf")
            scores[:, 0] = 0.0
        log_probs = torch.randn(B, K, V, generator=g, dtype=dtype).log_softmax(-1)
        label = f"B {B}, beam_size {K}, |V| {V}" + (", first step" if first else "")
        cases.append(Case((scores, log_probs, K), label=label))
    return cases


def _reference_beam_step(scores, log_probs, beam_size):
    B, K, V = log_probs.shape
    candidates = (scores[..., None] + log_probs).reshape(B, K * V)  # (B, K·|V|)
    new_scores, flat = candidates.topk(beam_size, dim=-1)  # (B, beam_size)
    return new_scores, flat // V, flat % V


def check_beam_step(beam_step) -> Verdict:
    """Chapter 8, exercise: one step of beam search, `beam_step(scores, log_probs, beam_size)`.

    scores (B, beam_size): the running log-probability of each hypothesis;
    log_probs (B, beam_size, |V|): log p(next token | hypothesis). Returns
    (new_scores, parent, token), each (B, beam_size), best first: the
    ``beam_size`` best extensions over all beam_size·|V| candidates of a row,
    the hypothesis each extends (parent) and the token it adds. parent and
    token are int64 tensors (they index): a float parent fails, named.

    Input classes that separate right from plausible-wrong code, each in the cases:
    rows whose best extensions come from several parents (only hypothesis 0
    extended, each hypothesis's own best), running scores that differ between
    hypotheses (scores left out), |V| not a multiple of beam_size (parent and token
    from the wrong divisor), more than one row (a flattened batch).
    """

    def own_best(scores, log_probs, beam_size):
        best, token = (scores[..., None] + log_probs).max(dim=-1)  # (B, K)
        parent = torch.arange(scores.shape[1]).expand_as(token)
        return best, parent, token

    def no_running_score(scores, log_probs, beam_size):
        V = log_probs.shape[-1]
        values, flat = log_probs.reshape(log_probs.shape[0], -1).topk(beam_size, dim=-1)
        return values, flat // V, flat % V

    def wrong_divisor(scores, log_probs, beam_size):
        B, K, V = log_probs.shape
        values, flat = (scores[..., None] + log_probs).reshape(B, K * V).topk(beam_size, dim=-1)
        return values, flat // K, flat % K

    def swapped(scores, log_probs, beam_size):
        B, K, V = log_probs.shape
        values, flat = (scores[..., None] + log_probs).reshape(B, K * V).topk(beam_size, dim=-1)
        return values, flat % V, flat // V

    def float_parent(scores, log_probs, beam_size):
        B, K, V = log_probs.shape
        values, flat = (scores[..., None] + log_probs).reshape(B, K * V).topk(beam_size, dim=-1)
        return values, flat / V, flat % V

    mistakes = [
        Mistake(
            "parent is a float tensor (true division /)",
            "parent must be an integer (int64) tensor: it indexes the hypotheses "
            "(ys[parent]), and a float such as 1.857 cannot. Did you write flat / |V| "
            "(true division)? Use flat // |V| (or torch.div(flat, V, rounding_mode='floor')).",
            float_parent,
        ),
        Mistake(
            "top-k per hypothesis instead of over beam × vocabulary",
            "Each hypothesis took its own best token, so every hypothesis survives. Did "
            "you flatten (beam, vocabulary) to one axis before topk? The beam_size "
            "winners compete across all beam_size·|V| candidates of a row.",
            own_best,
        ),
        Mistake(
            "the running score is not added",
            "A candidate's score is its parent's score plus log p(token): did you add "
            "scores[..., None] to log_probs before choosing?",
            no_running_score,
        ),
        Mistake(
            "parent and token with the wrong divisor",
            "In the flattened (beam, vocabulary) axis, index = parent·|V| + token: did "
            "you divide by |V| = log_probs.shape[-1] (not by beam_size)?",
            wrong_divisor,
        ),
        Mistake(
            "parent and token swapped",
            "flat // |V| is the hypothesis (parent), flat % |V| the token: did you swap them?",
            swapped,
        ),
    ]
    return check_function(beam_step, _reference_beam_step, _beam_cases(), mistakes, name="beam_step")


# ---------------------------------------------------------------------------
# Prediction: warm-up × post-LN/pre-LN (the Play section's 2 × 2 table)
# ---------------------------------------------------------------------------

WARMUP_SETTINGS = (
    "post-LN, no warm-up", "post-LN, warm-up", "pre-LN, no warm-up", "pre-LN, warm-up",
)
OUTCOMES = ("learns", "stalls")


def warmup_outcome(last_losses: dict, learns_below: float = 2.75, stalls_above: float = 3.0) -> dict:
    """What each setting did on every seed: "learns", "stalls" or "differs between seeds".

    ``last_losses`` maps each of `WARMUP_SETTINGS` to the mean loss of its last 25
    steps, one value per seed. A setting learns if it ends below ``learns_below`` on
    every seed, stalls if it ends above ``stalls_above`` on every seed (the defaults are
    chapter 8's thresholds).
    """
    if set(last_losses) != set(WARMUP_SETTINGS):
        raise ValueError(f"last_losses must have the keys {WARMUP_SETTINGS}, got {sorted(last_losses)}")
    outcome = {}
    for setting, values in last_losses.items():
        values = [float(v) for v in values]
        if not values:
            raise ValueError(f"last_losses[{setting!r}] is empty: give one value per seed")
        if all(v < learns_below for v in values):
            outcome[setting] = "learns"
        elif all(v > stalls_above for v in values):
            outcome[setting] = "stalls"
        else:
            outcome[setting] = "differs between seeds"
    return outcome


def check_warmup_prediction(my_prediction: dict, outcome: dict) -> Verdict:
    """Chapter 8, prediction: the learner's "learns"/"stalls" for each of the four settings
    of the warm-up table, against what the runs did (`warmup_outcome`)."""
    if not isinstance(my_prediction, dict) or set(my_prediction) != set(WARMUP_SETTINGS):
        raise ValueError(f"my_prediction must have the keys {WARMUP_SETTINGS}")
    missing = [s for s in WARMUP_SETTINGS if my_prediction[s] not in OUTCOMES]
    if missing:
        return Verdict(
            False,
            "✗ prediction: not filled in yet. Write \"learns\" or \"stalls\" for: "
            + "; ".join(missing) + ".",
        )
    return prediction_verdict(my_prediction, outcome, dict.fromkeys(WARMUP_SETTINGS, OUTCOMES),
                              20, 7)


# ---------------------------------------------------------------------------
# greedy_decode(model, src, max_len, bos_id, eos_id, pad_id)
# ---------------------------------------------------------------------------

# Each case: (seed, |V|, B, n, pad_id, bos_id, eos_id, max_len, ends). The model is a
# random float64 lib.Transformer whose EOS logit is set so that row b emits EOS
# as its output token ends[b] (None: never): rows end at different steps, one
# case never finishes a row, two have BOS = PAD. The seeds were chosen so that
# every named mistake changes the output on at least one case.
_GREEDY_CASES = (
    (3, 9, 4, 7, 0, 1, 2, 10, (3, 1, 5, 2)),  # the date task's ids: PAD 0, BOS 1, EOS 2
    (1, 11, 3, 6, 0, 0, 3, 7, (2, None, 4)),  # BOS = PAD, as in Marian; one row never ends
    (2, 10, 4, 5, 4, 1, 0, 6, (4, 2, None, 1)),  # PAD is not 0, EOS is
    (3, 8, 2, 6, 5, 5, 2, 9, (3, 5)),  # BOS = PAD, again
)


class _EndsAt(torch.nn.Module):
    """A random encoder-decoder whose row b emits EOS as its output token ``ends[b]``."""

    def __init__(self, inner, eos_id: int, ends):
        super().__init__()
        self.inner, self.eos_id, self.ends = inner, eos_id, tuple(ends)

    def encode(self, src, src_mask=None):
        return self.inner.encode(src, src_mask=src_mask)

    def decode(self, tgt, memory, src_mask=None, tgt_mask=None, **kw):
        logits = self.inner.decode(tgt, memory, src_mask=src_mask, tgt_mask=tgt_mask, **kw)
        eos = torch.full(logits.shape[:2], -50.0, dtype=logits.dtype)  # (B, m)
        for b, end in enumerate(self.ends):
            if end is not None and end < logits.shape[1]:
                eos[b, end] = 50.0  # position `end` predicts output token `end`
        logits = logits.clone()
        logits[..., self.eos_id] = eos
        return logits

    def forward(self, src, tgt, src_mask=None, tgt_mask=None):
        return self.decode(tgt, self.encode(src, src_mask), src_mask=src_mask, tgt_mask=tgt_mask)


def _greedy_model(seed: int, vocab_size: int, eos_id: int, ends):
    from lib.model.transformer import TransformerConfig

    torch.manual_seed(seed)
    inner = TransformerConfig(
        src_vocab_size=vocab_size, tgt_vocab_size=vocab_size, d_model=16, n_heads=2,
        n_layers=2, d_ff=32, dropout=0.0, max_len=32,
    ).build().double().eval()
    return _EndsAt(inner, eos_id, ends).eval()


def _greedy_cases() -> list[Case]:
    cases = []
    for seed, V, B, n, pad_id, bos_id, eos_id, max_len, ends in _GREEDY_CASES:
        g = torch.Generator().manual_seed(seed)
        model = _greedy_model(seed, V, eos_id, ends)
        real = [i for i in range(V) if i not in (pad_id, bos_id, eos_id)]
        src = torch.tensor(real)[torch.randint(0, len(real), (B, n), generator=g)]
        for b in range(1, B):  # rows 1.. are padded on the right, by 1, 2, ... PAD
            src[b, n - min(b, n - 2):] = pad_id
        label = (f"B {B}, source length {n} (rows padded), pad_id {pad_id}, bos_id {bos_id}, "
                 f"eos_id {eos_id}, max_len {max_len}")
        cases.append(Case((model, src, max_len, bos_id, eos_id, pad_id), label=label))
    return cases


def _greedy_variant(model, src, max_len, bos_id, eos_id, pad_id, *, done_mask=True,
                    keep_bos=False, src_mask=True, tgt_pad_mask=False, early_stop=True,
                    causal=True):
    """The reference loop and each named mistake, by switching one thing off.

    ``src_mask``: True (both), False (neither), "encode" or "decode" (one of the two).
    """
    from lib.model.attention import causal_mask

    s_mask = (src != pad_id)[:, None, None, :] if src_mask else None
    e_mask = s_mask if src_mask in (True, "encode") else None
    d_mask = s_mask if src_mask in (True, "decode") else None
    with torch.no_grad():
        memory = model.encode(src, src_mask=e_mask)
        ys = torch.full((src.shape[0], 1), bos_id, dtype=torch.long)
        done = torch.zeros(src.shape[0], dtype=torch.bool)
        for _ in range(max_len):
            t = ys.shape[1]
            t_mask = causal_mask(t)[None, None] if causal else None
            if tgt_pad_mask:
                t_mask = t_mask & (ys != pad_id)[:, None, None, :]
            logits = model.decode(ys, memory, src_mask=d_mask, tgt_mask=t_mask)[:, -1]
            next_id = logits.argmax(-1)
            if done_mask:
                next_id = next_id.masked_fill(done, pad_id)
            ys = torch.cat([ys, next_id[:, None]], dim=1)
            done |= next_id == eos_id
            if early_stop and bool(done.all()):
                break
    return ys if keep_bos else ys[:, 1:]


def _reference_greedy(model, src, max_len, bos_id, eos_id, pad_id):
    from lib.train.decoding import greedy_decode

    return greedy_decode(model, src, max_len, bos_id, eos_id, pad_id)


def check_greedy_decode(greedy_decode) -> Verdict:
    """Chapter 8, exercise: `greedy_decode(model, src, max_len, bos_id, eos_id, pad_id)`.

    src (B, n) int64, PAD on the right -> (B, L) int64 without BOS, L <= max_len:
    each row's argmax tokens up to its EOS, PAD after it; the loop stops when
    every row has emitted EOS (or after max_len tokens). Checked on random
    float64 `lib.Transformer`s (rows that end at different steps, padded
    sources, BOS = PAD in two cases) against `lib.greedy_decode`.

    Input classes that separate right from plausible-wrong code, each in the cases:
    rows that end at different steps and one that never ends (the done-mask, the
    early stop, max_len); right-padded sources (the source mask, to encode and to
    decode); BOS = PAD (a target mask built from pad_id); pad_id and eos_id other
    than 0 and 2 (hard-coded ids).
    """
    mistakes = [
        Mistake(
            "no done-mask: tokens follow EOS",
            "A row that has emitted EOS is finished, but your rows go on after it. Did you "
            "keep a `done` vector and write pad_id (next_id.masked_fill(done, pad_id)) "
            "into the rows that are done?",
            lambda *a: _greedy_variant(*a, done_mask=False),
        ),
        Mistake(
            "BOS kept in the output",
            "The output starts one token late: did you return ys (BOS first)? The BOS is "
            "the decoder's first input, not part of the output: return ys[:, 1:].",
            lambda *a: _greedy_variant(*a, keep_bos=True),
        ),
        Mistake(
            "no source padding mask",
            "Only the padded sources come out differently: did you pass "
            "src_mask = (src != pad_id)[:, None, None, :] to model.encode *and* to "
            "model.decode (the cross-attention)?",
            lambda *a: _greedy_variant(*a, src_mask=False),
        ),
        Mistake(
            "no source padding mask",
            "Your source mask reaches model.encode but not model.decode, so the "
            "cross-attention still reads the padded positions. Did you pass src_mask to "
            "model.decode as well?",
            lambda *a: _greedy_variant(*a, src_mask="encode"),
        ),
        Mistake(
            "no source padding mask",
            "Your source mask reaches model.decode but not model.encode, so the encoder's "
            "self-attention still mixes the padded positions into the memory. Did you "
            "pass src_mask to model.encode as well?",
            lambda *a: _greedy_variant(*a, src_mask="decode"),
        ),
        Mistake(
            "target mask built from pad_id, which hides BOS when BOS = PAD",
            "Only the cases where bos_id == pad_id (as in Marian models) fail: a target "
            "mask `ys != pad_id` then hides the start token itself. While decoding, the "
            "prefix holds no padding the model must not see: did you use the causal "
            "mask alone?",
            lambda *a: _greedy_variant(*a, tgt_pad_mask=True),
        ),
        Mistake(
            "no causal mask on the decoder",
            "Did you call model.decode without tgt_mask? Earlier positions then see later "
            "ones, which training never allowed: pass causal_mask(t)[None, None].",
            lambda *a: _greedy_variant(*a, causal=False),
        ),
        Mistake(
            "no early stop: always max_len tokens",
            "Your output is longer than the reference's, with only PAD in the extra "
            "columns: did you stop the loop as soon as every row is done "
            "(`if done.all(): break`)?",
            lambda *a: _greedy_variant(*a, early_stop=False),
        ),
    ]
    return check_function(
        greedy_decode, _reference_greedy, _greedy_cases(), mistakes, name="greedy_decode"
    )


# ---------------------------------------------------------------------------
# train_step(model, batch, optimizer, smoothing, pad_id)
# ---------------------------------------------------------------------------

_STEP_VOCAB, _STEP_PAD, _STEP_BOS, _STEP_EOS = 12, 0, 1, 2


def _step_batches(seed: int, n_steps: int):
    """Padded batches of random id sequences (PAD 0, BOS 1, EOS 2), lengths 2 to 7."""
    from lib.train.data import batch_from_ids

    g = torch.Generator().manual_seed(seed)
    batches = []
    for _ in range(n_steps):
        rows = []
        for _ in range(2):  # source and target rows
            lengths = torch.randint(2, 8, (4,), generator=g).tolist()
            lengths[0] = 7  # the longest row: every other row is padded
            rows.append([torch.randint(3, _STEP_VOCAB, (k,), generator=g).tolist() for k in lengths])
        batches.append(batch_from_ids(rows[0], rows[1], _STEP_PAD, _STEP_BOS, _STEP_EOS))
    return batches


def _run_steps(step_fn):
    """Three steps of `step_fn` on a fresh float64 model and SGD (momentum): the losses it
    returned and the weights after each step, as one float64 vector each."""

    def run(seed, smoothing, n_steps=3):
        from lib.model.transformer import TransformerConfig

        torch.manual_seed(seed)
        model = TransformerConfig(
            src_vocab_size=_STEP_VOCAB, tgt_vocab_size=_STEP_VOCAB, d_model=16, n_heads=2,
            n_layers=1, d_ff=32, dropout=0.1, max_len=16,
        ).build().double()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
        losses, weights = [], []
        for step, batch in enumerate(_step_batches(seed, n_steps)):
            torch.manual_seed(1000 * seed + step)  # the same dropout masks for every version
            # The model arrives in eval mode, as after the chapter's loop evaluates: a
            # train_step must switch dropout on itself (model.train()).
            model.eval()
            loss = step_fn(model, batch, optimizer, smoothing, _STEP_PAD)
            if isinstance(loss, torch.Tensor):
                loss = loss.item()
            losses.append(loss)
            weights.append(torch.cat([p.detach().flatten() for p in model.parameters()]))
        return torch.tensor(losses, dtype=torch.float64), torch.stack(weights)

    return run


def _train_step_cases() -> list[Case]:
    return [Case((seed, smoothing), label=f"3 steps, seed {seed}, smoothing {smoothing}")
            for seed, smoothing in ((0, 0.1), (1, 0.2))]


def _reference_step(model, batch, optimizer, smoothing, pad_id):
    from lib.train.training import train_step

    return train_step(model, batch, optimizer, None, label_smoothing=smoothing, pad_id=pad_id)


def _step_variant(model, batch, optimizer, smoothing, pad_id, *, zero_grad="before",
                  target="tgt_out", reads="tgt_in", ignore_pad=True, train_mode=True):
    from lib.train.training import label_smoothed_nll

    if train_mode:
        model.train()
    logits = model(batch.src, getattr(batch, reads), src_mask=batch.src_mask,
                   tgt_mask=batch.tgt_mask)
    loss = label_smoothed_nll(logits, getattr(batch, target), smoothing,
                              ignore_index=pad_id if ignore_pad else None)
    if zero_grad == "before":
        optimizer.zero_grad()
    loss.backward()
    if zero_grad == "after backward":
        optimizer.zero_grad()
    optimizer.step()
    return loss.item()


def check_train_step(train_step) -> Verdict:
    """Chapter 8, exercise: one step of teacher forcing,
    `train_step(model, batch, optimizer, smoothing, pad_id) -> float`.

    The model reads ``batch.tgt_in`` (BOS + target) with the batch's masks; the loss
    is the label-smoothed cross-entropy against ``batch.tgt_out`` (target + EOS),
    PAD targets left out; then zero the gradients, backward, one optimizer step;
    return the loss as a float. Checked over three steps of a fresh float64 model
    (the losses returned and the weights after each step) against `lib.train_step`.

    Input classes that separate right from plausible-wrong code, each in the cases:
    - a model handed over in eval mode (before every step, as after the chapter's
      evaluation): a step without ``model.train()`` trains without dropout;
    - dropout on (p = 0.1) with the same random stream for every version;
    - padded targets (every batch has shorter rows), so PAD in the loss shows;
    - three steps with SGD momentum, so a missing or late ``zero_grad`` shows;
    - two seeds and two smoothing values (0.1, 0.2).
    """
    if not callable(train_step):
        raise TypeError(f"the checker needs your function itself, got {type(train_step).__name__}")
    mistakes = [
        Mistake(
            "no zero_grad: the gradients add up over steps",
            "The first step matches, the later ones do not: .backward() *adds* to .grad. "
            "Did you call optimizer.zero_grad() before loss.backward() in every step?",
            _run_steps(lambda *a: _step_variant(*a, zero_grad=None)),
        ),
        Mistake(
            "zero_grad between backward and step: no update",
            "The weights never change: optimizer.zero_grad() after loss.backward() erases "
            "the gradient before optimizer.step() can use it. Did you zero it too late?",
            _run_steps(lambda *a: _step_variant(*a, zero_grad="after backward")),
        ),
        Mistake(
            "loss against tgt_in: the shifted-in BOS is scored",
            "Position i must predict the *next* token, batch.tgt_out[:, i] (target + EOS). "
            "Did you score the logits against batch.tgt_in, which starts with the BOS the "
            "decoder was given?",
            _run_steps(lambda *a: _step_variant(*a, target="tgt_in")),
        ),
        Mistake(
            "the decoder reads tgt_out (the answer)",
            "The decoder's input is batch.tgt_in (BOS + target); batch.tgt_out is what it "
            "must predict. Did you feed it tgt_out, so that it can copy the answer?",
            _run_steps(lambda *a: _step_variant(*a, reads="tgt_out")),
        ),
        Mistake(
            "label smoothing over padding: PAD targets in the loss",
            "The PAD positions of tgt_out are not predictions, but your loss averages them "
            "in (smoothed, they are never 0). Did you leave out ignore_index=pad_id (or "
            "the mask target != pad_id)?",
            _run_steps(lambda *a: _step_variant(*a, ignore_pad=False)),
        ),
        Mistake(
            "model left in eval mode: no model.train()",
            "Your step trains without dropout: the model arrives in eval mode (the "
            "chapter's loop evaluates every 100 steps, and model.eval() stays on). Did you "
            "call model.train() at the start of the step?",
            _run_steps(lambda *a: _step_variant(*a, train_mode=False)),
        ),
    ]
    return check_function(
        _run_steps(train_step), _run_steps(_reference_step), _train_step_cases(), mistakes,
        name="train_step",
    )


# ---------------------------------------------------------------------------
# The questions' numbers
# ---------------------------------------------------------------------------


def _positive_int(name: str, value) -> int:
    value = real_number(name, value)
    if value != int(value) or value < 1:
        raise ValueError(f"{name} must be a positive whole number, got {value}")
    return int(value)


def _smoothing(smoothing, vocab_size, over=None) -> tuple[float, int, int]:
    eps = real_number("smoothing", smoothing)
    v = _positive_int("vocab_size", vocab_size)
    k = v if over is None else _positive_int("over", over)
    if not 0 < eps < 1 or not 2 <= k <= v:
        raise ValueError(f"need 0 < smoothing < 1 and 2 <= over <= vocab_size, got {smoothing}, "
                         f"{over}, {vocab_size}")
    return eps, v, k


def _not_answered(name: str, exact: float) -> CheckResult:
    """The verdict on a question the learner has not answered yet (its cell stores None)."""
    return CheckResult(False, f"Not answered yet: replace None in {name} with your number.",
                       torch.tensor([[float(exact)]], dtype=torch.float64))


def check_peak_ratio(my_ratio, warmup: int = 4000, new_warmup: int = 8000) -> CheckResult:
    """Chapter 8, question 6: the new peak over the old, (new_warmup / warmup)^(-1/2).

    The peak is d_model^(-0.5) · warmup^(-0.5), reached at step = warmup.
    """
    w, w2 = _positive_int("warmup", warmup), _positive_int("new_warmup", new_warmup)
    exact = math.sqrt(w / w2)
    if my_ratio is None:
        return _not_answered("my_ratio", exact)
    return check_number(my_ratio, exact, atol=5e-4, what="new peak over the old",
                        name="my_ratio", slips={
        "old over new (upside down)": (
            1 / exact, "Is the new peak higher or lower than the old one?"),
        "warmup^(-1) instead of warmup^(-0.5)": (
            w / w2, "At step = warmup, step · warmup^(-1.5) is warmup to which power?"),
        "the peak grows with the warm-up": (
            w2 / w, "A longer ramp at the same slope? Look at the rising term's slope."),
    })


def check_peak_step(my_step, warmup: int = 4000, new_warmup: int = 8000) -> CheckResult:
    """Chapter 8, question 6: the step of the new peak, the end of the new warm-up."""
    w, w2 = _positive_int("warmup", warmup), _positive_int("new_warmup", new_warmup)
    if my_step is None:
        return _not_answered("my_step", w2)
    return check_number(my_step, w2, atol=0.5, what="step of the new peak", name="my_step",
                        slips={
        "the old warm-up's end": (w, "Where do the rising and the falling terms meet now?"),
    })


def check_smoothed_floor(my_floor, smoothing: float = 0.1, vocab_size: int = 42) -> CheckResult:
    """Chapter 8, question 7: the smallest label-smoothed loss per token, in nats.

    It is H(q), the entropy of the target q = (1 - ε) one-hot + ε/|V| everywhere,
    reached when the prediction p equals q.
    """
    eps, v, _ = _smoothing(smoothing, vocab_size)
    top, rest = 1 - eps + eps / v, eps / v
    floor = -(top * math.log(top) + (v - 1) * rest * math.log(rest))
    spread = -((1 - eps) * math.log(1 - eps) + eps * math.log(eps / (v - 1)))
    if my_floor is None:
        return _not_answered("my_floor", floor)
    return check_number(my_floor, floor, atol=1e-3, what="smallest loss per token",
                        name="my_floor", slips={
        "0: no floor": (0.0, "Can a prediction make every term of -Σ q log p vanish when q "
                        "itself is not one-hot?"),
        "−log of the optimal confidence, not the entropy": (
            -math.log(top), "That is -ln q_y, the true class's loss at the optimum. Is the "
            "floor not the entropy -Σ q log q, over all |V| classes?"),
        "the true class's term only": (
            -top * math.log(top), "The other |V| - 1 classes have a target of ε/|V| too."),
        "-ln(1 - ε): the true class only, ε/|V| left out": (
            -math.log(1 - eps), "Every class, the true one included, gets ε/|V|."),
        "bits instead of nats": (floor / math.log(2), "The loss uses the natural log."),
        "ε spread over |V| - 1 classes": (
            spread, "lib's label_smoothed_nll spreads ε over all |V| classes, the true one "
            "included."),
    })


def check_smoothed_confidence(my_confidence, smoothing: float = 0.1, vocab_size: int = 42,
                              over: int = 40) -> CheckResult:
    """Chapter 8, question 9: the optimal confidence when ε is spread over `over` classes
    (|V| - 2, PAD and BOS left out): 1 - ε + ε / over, to six decimals."""
    eps, v, k = _smoothing(smoothing, vocab_size, over)
    if my_confidence is None:
        return _not_answered("my_confidence", 1 - eps + eps / k)
    return check_number(my_confidence, 1 - eps + eps / k, atol=5e-6, what="optimal confidence",
                        name="my_confidence", slips={
        "ε spread over all |V|": (
            1 - eps + eps / v, "That is the optimum of our own loss: which classes get ε here?"),
        "1 - ε": (1 - eps, "The true class is one of the classes that share ε."),
        "ε spread over |V| - 1": (
            1 - eps + eps / (v - 1), "How many classes are left without PAD and BOS?"),
    })
