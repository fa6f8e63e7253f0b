"""Checkers for chapter 11's coding exercises (a language model, sampling).

Each `check_*` takes the learner's function and returns a `Verdict`: pass, or
the most likely mistake by name. Tests feed each checker the solution and one
wrong version per named mistake (tests/test_checkers_language_model.py).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from lib.teach.checking import Case, Mistake, Verdict, check_function

__all__ = ["check_sampling_probs", "check_causal_lm_loss"]


# ---------------------------------------------------------------------------
# sampling_probs(logits, temperature, top_k) -> (B, |V|) probabilities
# ---------------------------------------------------------------------------


def _sampling_cases() -> list[Case]:
    """Logits (B, |V|) without ties, temperatures below, at and above 1, top_k None/1/some/|V|;
    then two cases with logits tied at the k-th place (every tied logit is kept)."""
    g = torch.Generator().manual_seed(0)
    cases = []
    for B, V, temperature, top_k, dtype in (
        (3, 7, 0.5, None, torch.float64),
        (2, 10, 2.0, 3, torch.float64),
        (4, 6, 1.0, 2, torch.float32),
        (2, 9, 0.8, 1, torch.float64),
        (1, 5, 1.5, 5, torch.float32),
        (5, 12, 0.7, 4, torch.float32),
    ):
        # distinct logits, a few negative and a few large: no ties at the k-th place
        logits = (torch.randperm(V * B, generator=g).view(B, V).to(dtype) - V * B / 2) / 3
        label = f"logits {(B, V)}, temperature {temperature}, top_k {top_k}"
        cases.append(Case((logits, temperature, top_k), label=label))
    tied = torch.tensor([[2.0, 1.0, 1.0, 0.0], [0.5, 3.0, 0.5, -1.0]], dtype=torch.float64)
    cases.append(Case((tied, 0.5, 2), label="logits tied at the k-th place, top_k 2"))
    tied = torch.tensor([[1.0, 4.0, 2.0, 2.0, 2.0, -1.0]])  # float32: the k-th is tied thrice
    cases.append(Case((tied, 1.25, 3), label="logits tied at the k-th place, top_k 3"))
    return cases


def _reference_probs(logits, temperature, top_k):
    scaled = logits / temperature
    if top_k is not None:
        kth = scaled.topk(top_k, dim=-1).values[:, -1:]
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    return scaled.softmax(dim=-1)


def _keep_top(values, top_k, fill):
    if top_k is None:
        return values
    kth = values.topk(top_k, dim=-1).values[:, -1:]
    return values.masked_fill(values < kth, fill)


def _strictly_above_kth(logits, temperature, top_k):
    scaled = logits / temperature
    if top_k is None:
        return scaled.softmax(dim=-1)
    kth = scaled.topk(top_k, dim=-1).values[:, -1:]
    return scaled.masked_fill(scaled <= kth, float("-inf")).softmax(dim=-1)  # NaN rows for k = 1


def _exactly_k(logits, temperature, top_k):
    scaled = logits / temperature
    if top_k is None:
        return scaled.softmax(dim=-1)
    keep = torch.zeros_like(scaled, dtype=torch.bool).scatter(-1, scaled.topk(top_k, dim=-1).indices, True)
    return scaled.masked_fill(~keep, float("-inf")).softmax(dim=-1)


def _one_too_many(logits, temperature, top_k):
    if top_k is None or top_k == logits.shape[-1]:
        return _reference_probs(logits, temperature, top_k)
    return _reference_probs(logits, temperature, top_k + 1)


def check_sampling_probs(sampling_probs) -> Verdict:
    """Chapter 11, exercise: `sampling_probs(logits, temperature, top_k)`.

    logits (B, |V|), temperature > 0, top_k None or 1..|V| -> (B, |V|) the distribution
    the next token is drawn from: softmax(logits / temperature), restricted to the
    top_k largest logits of each row (the others get probability 0), rows summing to 1.
    A logit tied with the k-th largest is kept too, as `lib.sample_next` does.
    """
    mistakes = [
        Mistake(
            "multiplied by the temperature",
            "A temperature below 1 should sharpen the distribution: did you multiply the "
            "logits by the temperature instead of dividing by it?",
            lambda x, t, k: _reference_probs(x * t * t, t, k),
        ),
        Mistake(
            "probabilities divided by the temperature",
            "The temperature divides the *logits*, before the softmax; dividing the "
            "probabilities only rescales them (and they no longer sum to 1). Did you "
            "apply it after the softmax?",
            lambda x, t, k: _keep_top(x, k, float("-inf")).softmax(-1) / t,
        ),
        Mistake(
            "temperature ignored (or applied after the softmax, then renormalised)",
            "The temperature must change the distribution: divide the *logits* by it, before "
            "the softmax. Dividing the probabilities and renormalising cancels it out. Did you "
            "apply it to the probabilities, or forget it?",
            lambda x, t, k: _reference_probs(x, 1.0, k),
        ),
        Mistake(
            "tokens outside the top k set to 0 instead of -inf",
            "A logit of 0 still gets probability e^0 / Σ: did you fill the tokens outside the "
            "top k with 0 rather than -inf (float('-inf'))?",
            lambda x, t, k: _keep_top(x / t, k, 0.0).softmax(-1),
        ),
        Mistake(
            "top-k filter without renormalising",
            "After zeroing the probabilities outside the top k, the rest no longer sums to 1. "
            "Did you mask after the softmax and forget to divide by the new sum (or mask the "
            "logits with -inf before the softmax)?",
            lambda x, t, k: (x / t).softmax(-1) * (_keep_top(x / t, k, float("-inf")) > float("-inf")),
        ),
        Mistake(
            "kept the k smallest logits",
            "topk returns the *largest* values by default: did you pass largest=False, or "
            "compare with > where you meant <?",
            lambda x, t, k: (x / t).masked_fill(
                (x / t) > (-x / t).topk(k, dim=-1).values[:, -1:].neg(), float("-inf")
            ).softmax(-1) if k is not None else _reference_probs(x, t, k),
        ),
        Mistake(
            "one token too few kept (k - 1)",
            "The k-th largest logit itself must stay: did you keep only logits strictly "
            "greater than it (> instead of >=)?",
            _strictly_above_kth,
        ),
        Mistake(
            "one token too many kept (k + 1)",
            "Keep the k largest logits: the threshold is the k-th largest, "
            "topk(k).values[:, -1:], not the (k + 1)-th. Is your index off by one?",
            _one_too_many,
        ),
        Mistake(
            "exactly k tokens kept when the k-th logit is tied",
            "Every logit equal to the k-th largest keeps its probability (logits [2, 1, 1, 0] "
            "with k = 2 keep three tokens), as lib.sample_next does. Did you keep only the k "
            "indices topk returned (scatter), dropping the other tied ones?",
            _exactly_k,
        ),
    ]
    return check_function(sampling_probs, _reference_probs, _sampling_cases(), mistakes, name="sampling_probs")


# ---------------------------------------------------------------------------
# causal_lm_loss(logits, tokens) -> scalar, nats per token
# ---------------------------------------------------------------------------


def _lm_loss_cases() -> list[Case]:
    g = torch.Generator().manual_seed(1)
    cases = []
    for B, L, V, dtype in ((2, 6, 7, torch.float64), (3, 9, 11, torch.float32), (1, 4, 5, torch.float64),
                           (4, 12, 9, torch.float32)):
        logits = torch.randn(B, L, V, generator=g, dtype=dtype) * 2
        tokens = torch.randint(0, V, (B, L), generator=g)
        cases.append(Case((logits, tokens), label=f"logits {(B, L, V)}, tokens {(B, L)}"))
    return cases


def _reference_lm_loss(logits, tokens):
    V = logits.shape[-1]
    return F.cross_entropy(logits[:, :-1].reshape(-1, V), tokens[:, 1:].reshape(-1))


def check_causal_lm_loss(causal_lm_loss) -> Verdict:
    """Chapter 11, exercise: `causal_lm_loss(logits, tokens)`.

    logits (B, L, |V|) = model(tokens), tokens (B, L) -> a scalar tensor: the mean over
    the B × (L - 1) positions t = 0..L-2 of -log softmax(logits[:, t])[tokens[:, t + 1]],
    in nats.
    """
    V_of = lambda x: x.shape[-1]  # noqa: E731
    mistakes = [
        Mistake(
            "no shift: each position scored on its own token",
            "Position t's logits predict the *next* token, tokens[:, t + 1]. Did you compare "
            "logits[:, t] with tokens[:, t] (a model could then just copy its input)?",
            lambda x, y: F.cross_entropy(x.reshape(-1, V_of(x)), y.reshape(-1)),
        ),
        Mistake(
            "shifted the wrong way",
            "Drop the *last* position's logits and the *first* token: logits[:, :-1] against "
            "tokens[:, 1:]. Did you pair logits[:, 1:] with tokens[:, :-1]?",
            lambda x, y: F.cross_entropy(x[:, 1:].reshape(-1, V_of(x)), y[:, :-1].reshape(-1)),
        ),
        Mistake(
            "summed instead of averaged",
            "The loss is a mean per token (nats per character), so it does not grow with B or "
            "L. Did you sum the per-token losses?",
            lambda x, y: F.cross_entropy(x[:, :-1].reshape(-1, V_of(x)), y[:, 1:].reshape(-1), reduction="sum"),
        ),
        Mistake(
            "bits instead of nats",
            "Cross-entropy in PyTorch (and in this course's losses) uses the natural log. Did "
            "you use log2 (bits)? Divide by ln 2 only when you report bits per character.",
            lambda x, y: _reference_lm_loss(x, y) / math.log(2),
        ),
        Mistake(
            "softmax over the positions instead of the vocabulary",
            "The distribution is over the |V| possible tokens: the softmax runs over the last "
            "axis. Did you normalise over dim=1 (the positions)?",
            lambda x, y: -x.log_softmax(dim=1)[:, :-1].gather(-1, y[:, 1:, None]).mean(),
        ),
        Mistake(
            "the minus sign is missing",
            "A loss is a *negative* log-probability, so it is >= 0. Did you return the mean "
            "log-probability without the minus sign?",
            lambda x, y: -_reference_lm_loss(x, y),
        ),
        Mistake(
            "divided by B × L instead of B × (L - 1)",
            "Only L - 1 positions per sequence have a next token. Did you sum over those and "
            "divide by all B × L positions?",
            lambda x, y: _reference_lm_loss(x, y) * (y.shape[1] - 1) / y.shape[1],
        ),
        Mistake(
            "summed over each sequence, averaged over the batch",
            "The loss is a mean per token, not per sequence. Did you sum over the positions "
            "and then take the mean over the batch?",
            lambda x, y: _reference_lm_loss(x, y) * (y.shape[1] - 1),
        ),
        Mistake(
            "label smoothing",
            "This is the plain next-token loss: no label smoothing (chapter 8's lib.fit and "
            "label_smoothed_nll default to 0.1). Did you pass label_smoothing=0.1?",
            lambda x, y: F.cross_entropy(x[:, :-1].reshape(-1, V_of(x)), y[:, 1:].reshape(-1),
                                         label_smoothing=0.1),
        ),
        Mistake(
            "token 0 ignored as padding",
            "These windows have no padding: every next token counts, id 0 included. Did you "
            "pass ignore_index=0?",
            lambda x, y: F.cross_entropy(x[:, :-1].reshape(-1, V_of(x)), y[:, 1:].reshape(-1),
                                         ignore_index=0),
        ),
        Mistake(
            "computed in float32 on float64 input",
            "The loss must keep the logits' dtype (float64 in, float64 out). Did you convert "
            "with .float() or build a float32 tensor?",
            lambda x, y: _reference_lm_loss(x.float(), y),
        ),
        Mistake(
            "returned a Python number (.item())",
            "Return the loss as a 0-dimensional tensor: backward() needs the tensor, and a "
            "Python float has lost the graph. Did you call .item() or float()?",
            lambda x, y: _reference_lm_loss(x, y).item(),
        ),
    ]
    return check_function(causal_lm_loss, _reference_lm_loss, _lm_loss_cases(), mistakes, name="causal_lm_loss")
