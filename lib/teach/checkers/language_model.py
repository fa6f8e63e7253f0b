"""Checkers for chapter 11's coding exercises (a language model, sampling, the sampling loop).

Each `check_*` takes the learner's function and returns a `Verdict`: pass, or
the most likely mistake by name. Tests feed each checker the solution and one
wrong version per named mistake (tests/test_checkers_language_model.py).
"""

from __future__ import annotations

import contextlib
import math

import torch
import torch.nn.functional as F

from lib.model.families import DecoderOnlyModel
from lib.teach.checkers._numbers import check_number
from lib.teach.checking import Case, Mistake, Verdict, check_function
from lib.train.generate import context_length
from lib.train.generate import sample_next as _sample_next
from lib.train.generate import sampler_refused as _sampler_refused

__all__ = [
    "check_sampling_probs", "check_causal_lm_loss", "check_sample_loop", "check_perplexity",
]


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

    Input classes that separate right from plausible-wrong code, each in the cases:
    temperatures below, at and above 1 (multiplied, ignored, applied after the softmax),
    top_k None, 1, some and |V| (off by one either way, k = 1 emptying a strict filter),
    logits tied at the k-th place (exactly k kept), negative logits (a 0 fill), B > 1
    (a softmax over the batch axis), float32 and float64 logits (the dtype is kept).
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
    """Chapter 11, exercise 1: `causal_lm_loss(logits, tokens)`.

    logits (B, L, |V|) = model(tokens), tokens (B, L) -> a 0-dimensional tensor in the
    logits' dtype, differentiable: the mean over the B × (L - 1) positions
    t = 0..L-2 of -log softmax(logits[:, t])[tokens[:, t + 1]], in nats.

    Input classes that separate right from plausible-wrong code, each in the cases:
    B = 1 and B > 1 (a softmax over the batch axis), L from 4 to 12 (dividing by L
    instead of L - 1, summing per sequence), |V| != L (the softmax over positions),
    token id 0 present (ignore_index=0), float32 and float64 logits (a dtype change
    either way), and logits that require grad: the result's gradient with respect to
    them is compared with the reference's (a detached or re-wrapped number is refused).
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
    if not callable(causal_lm_loss):
        raise TypeError(f"the checker needs your function itself, got {type(causal_lm_loss).__name__}")
    broken = _loss_contract(causal_lm_loss)
    if broken is not None:
        return broken
    return check_function(causal_lm_loss, _reference_lm_loss, _lm_loss_cases(), mistakes, name="causal_lm_loss")


def _loss_contract(causal_lm_loss) -> Verdict | None:
    """What the exercise promises beyond the value, checked on a result whose value is
    right: a 0-dimensional tensor, in the logits' dtype, with the reference's gradient
    with respect to the logits (so that backward() trains the model). Wrong values are
    left to `check_function`, which names their mistakes."""

    def refuse(case, mistake, hint):
        return Verdict(False, f"✗ causal_lm_loss ({case.label}): {mistake}.\n  {hint}", mistake=mistake)

    for case in _lm_loss_cases():
        logits, tokens = case.args
        logits = logits.clone().requires_grad_(True)
        try:
            got = causal_lm_loss(logits, tokens.clone())
        except Exception:  # noqa: BLE001  (reported by check_function)
            return None
        want = _reference_lm_loss(logits, tokens)
        if not isinstance(got, torch.Tensor) or got.numel() != 1 or got.is_complex():
            continue  # a Python number, or a wrong shape: check_function names it
        if not got.is_floating_point() or not torch.allclose(
                got.detach().to(want.dtype).reshape(()), want.detach(), rtol=1e-5, atol=1e-6):
            continue  # a wrong value
        if torch.finfo(got.dtype).eps > torch.finfo(logits.dtype).eps:
            continue  # coarser than the logits: check_function names it
        if got.dim() != 0:
            return refuse(case, "the loss is not 0-dimensional",
                          f"It has shape {tuple(got.shape)}; a loss is one number, shape (). "
                          "Did you keep a dimension (keepdim=True, a reshape, a [None])?")
        if got.dtype != logits.dtype:
            return refuse(case, "the loss is not in the logits' dtype",
                          f"The logits are {str(logits.dtype)[6:]}, the loss "
                          f"{str(got.dtype)[6:]}. Compute it from the logits as they are, "
                          "without .double() or .float().")
        if got.grad_fn is None:
            return refuse(case, "the loss has no autograd graph",
                          "backward() cannot reach the logits: did you call .detach(), or "
                          "build a new tensor (torch.tensor(...)) from a Python number? "
                          "Compute it with tensor operations on the logits.")
        (grad,) = torch.autograd.grad(got, logits, allow_unused=True)
        (grad_want,) = torch.autograd.grad(want, logits)
        if grad is None or not torch.allclose(grad, grad_want, rtol=1e-4, atol=1e-7):
            return refuse(case, "the gradient differs from the reference's",
                          "The value is right but its gradient with respect to the logits "
                          "is not: did part of the computation use a detached copy "
                          "(.detach(), .data, .item()) of the logits?")
    return None


# ---------------------------------------------------------------------------
# sample_loop(model, prompt, n_new, temperature, top_k, generator) -> (B, P + n_new) ids
# ---------------------------------------------------------------------------


class _LibSamplerUsed(Exception):
    """Raised when the learner's loop calls lib's sampler, which it is compared with."""


def _lib_sampler_refused():
    """lib's sampler refused by every route: `sample_next` and `generate` check a context
    variable on entry, so lib.sample_next, lib.train.sample_next and a name imported
    earlier all raise `_LibSamplerUsed` inside the block."""
    return _sampler_refused(_LibSamplerUsed)


def _seeded(fn, refuse_lib=False):
    """fn(model, prompt, n_new, temperature, top_k, generator), called with a fresh generator
    seeded from the case, the global RNG seeded too (so a draw that ignores the generator is
    reproducible, and recognisable), eval mode and no gradients."""

    def run(model, prompt, n_new, temperature, top_k, seed):
        generator = torch.Generator().manual_seed(seed)
        guard = _lib_sampler_refused() if refuse_lib else contextlib.nullcontext()
        with torch.random.fork_rng(devices=[]), torch.no_grad(), guard:
            torch.manual_seed(1000 + seed)
            return fn(model.eval(), prompt, n_new, temperature, top_k, generator)

    return run


def _loop_model(seed: int, vocab_size: int = 11, max_len: int = 6) -> DecoderOnlyModel:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = DecoderOnlyModel(vocab_size, d_model=16, n_heads=2, n_layers=1, d_ff=32,
                                 dropout=0.0, max_len=max_len)
    return model.eval()


def _loop_cases() -> list[Case]:
    """A tiny random model with max_len 6; prompts that fit, and runs that go past max_len
    (the context must be cropped); temperatures below, at and above 1; top_k None, 1, 2, 3."""
    g = torch.Generator().manual_seed(11)
    cases = []
    for B, P, n_new, temperature, top_k, seed in (
        (6, 3, 3, 0.5, None, 0),
        (6, 2, 9, 1.5, 3, 1),
        (5, 4, 7, 1.0, 2, 2),
        (4, 1, 6, 0.8, 1, 3),
        (8, 3, 10, 2.0, None, 4),
    ):
        model = _loop_model(seed)
        prompt = torch.randint(0, model.vocab_size, (B, P), generator=g)
        label = (f"prompt {(B, P)}, {n_new} new tokens (max_len 6), temperature {temperature}, "
                 f"top_k {top_k}")
        cases.append(Case((model, prompt, n_new, temperature, top_k, seed), label=label))
    return cases


def _reference_loop(model, prompt, n_new, temperature, top_k, generator):
    """lib's sampler in a loop, the context cropped to the model's last max_len tokens."""
    max_len = context_length(model)
    tokens = prompt
    for _ in range(n_new):
        logits = model(tokens[:, -max_len:])[:, -1]  # (B, |V|)
        next_id = _sample_next(logits, temperature, top_k, generator)  # (B,)
        tokens = torch.cat([tokens, next_id[:, None]], dim=1)
    return tokens


def _loop_variant(*, temperature="before", strict_top=False, fill=float("-inf"), draw="probs",
                  feed=True, crop="last", keep_prompt=True):
    """The loop with one thing changed, to reproduce a named mistake."""

    def run(model, prompt, n_new, t, top_k, generator):
        max_len = context_length(model)
        tokens = prompt
        for _ in range(n_new):
            source = tokens if feed else prompt
            context = {"last": source[:, -max_len:], "first": source[:, :max_len], "none": source}[crop]
            z = model(context)[:, -1].float()
            if temperature == "before":
                z = z / t
            if top_k is not None:
                kth = z.topk(top_k, dim=-1).values[:, -1:]
                z = z.masked_fill(z <= kth if strict_top else z < kth, fill)
            p = z.softmax(dim=-1)
            if temperature == "after":
                p = p / t
            if draw == "probs":
                next_id = torch.multinomial(p, 1, generator=generator)[:, 0]
            elif draw == "logits":
                next_id = torch.multinomial(z, 1, generator=generator)[:, 0]
            elif draw == "argmax":
                next_id = p.argmax(dim=-1)
            else:  # the global random state
                next_id = torch.multinomial(p, 1)[:, 0]
            tokens = torch.cat([tokens, next_id[:, None]], dim=1)
        return tokens if keep_prompt else tokens[:, prompt.shape[1]:]

    return run


def check_sample_loop(sample_loop) -> Verdict:
    """Chapter 11, exercise: `sample_loop(model, prompt, n_new, temperature, top_k, generator)`.

    model a `lib.DecoderOnlyModel`, prompt (B, P) int64 ids -> (B, P + n_new) int64: the
    prompt and n_new tokens, each drawn from the last position's logits: the context
    cropped to the model's last max_len tokens, logits divided by the temperature, all but
    the top_k largest set to -inf (ties with the k-th kept), softmax, then
    ``torch.multinomial(probs, 1, generator=generator)``, the draw `lib.sample_next` makes.
    The checker runs the learner's loop and lib's sampler in the same loop with generators
    seeded alike, so the same tokens come out; calling lib's sampler is refused by every
    route (lib.sample_next, lib.train.sample_next, lib.generate, a name imported earlier:
    `lib.train.generate.sampler_refused`).

    Input classes that separate right from plausible-wrong code, each in the cases:
    runs that stay within max_len and runs that go past it (no crop, the first max_len,
    max_len - 1), a one-token prompt, temperatures below, at and above 1, top_k None,
    1, 2 and 3, B > 1 drawn in one call (one draw per row, or the global generator,
    draw other tokens), and several steps (the token not fed back).
    """
    if not callable(sample_loop):
        raise TypeError(f"the checker needs your function itself, got {type(sample_loop).__name__}")
    mistakes = [
        Mistake(
            "temperature applied after the softmax (or not at all)",
            "Dividing the probabilities by T changes nothing once they are renormalised (and "
            "torch.multinomial renormalises): the temperature divides the *logits*, before the "
            "softmax. Did you apply it after the softmax, or forget it?",
            _loop_variant(temperature="after"),
        ),
        Mistake(
            "top-k keeps k - 1 tokens",
            "The k-th largest logit itself must stay: did you keep only logits strictly greater "
            "than it (> instead of >=)? With k = 1 nothing is left and the draw fails.",
            _loop_variant(strict_top=True),
        ),
        Mistake(
            "tokens outside the top k set to 0 instead of -inf",
            "A logit of 0 still gets probability e^0 / Σ after the softmax: did you fill the "
            "tokens outside the top k with 0 rather than float('-inf')?",
            _loop_variant(fill=0.0),
        ),
        Mistake(
            "sampled from the logits, not the probabilities",
            "torch.multinomial needs non-negative weights: logits are negative too, and -inf "
            "after the top-k filter. Did you pass the logits instead of their softmax?",
            _loop_variant(draw="logits"),
        ),
        Mistake(
            "the most probable token taken (greedy), not sampled",
            "argmax is greedy decoding: every run gives the same text, whatever the "
            "temperature. Draw with torch.multinomial(probs, 1, generator=generator).",
            _loop_variant(draw="argmax"),
        ),
        Mistake(
            "the generator not used",
            "Without generator=generator, torch.multinomial draws from the global random state, "
            "so a seeded run is not reproducible. Did you pass the generator to the draw?",
            _loop_variant(draw="global"),
        ),
        Mistake(
            "the sampled token is not fed back",
            "Each step must run the model on the prompt *and the tokens drawn so far*: did you "
            "keep computing the logits from the prompt alone?",
            _loop_variant(feed=False),
        ),
        Mistake(
            "the context is not cropped to max_len",
            "A learned positional table has max_len rows: once prompt + new tokens are longer, "
            "the model refuses the sequence. Keep the last max_len tokens, "
            "tokens[:, -max_len:] (lib.context_length(model) gives max_len).",
            _loop_variant(crop="none"),
        ),
        Mistake(
            "cropped to the first max_len tokens",
            "The next token depends on the most recent tokens: keep the *last* max_len, "
            "tokens[:, -max_len:], not tokens[:, :max_len].",
            _loop_variant(crop="first"),
        ),
        Mistake(
            "only the new tokens returned",
            "Return the prompt followed by the new tokens, shape (B, P + n_new), as "
            "lib.generate does.",
            _loop_variant(keep_prompt=False),
        ),
    ]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny matrices: one thread is over ten times faster than two
    try:
        return check_function(
            _seeded(sample_loop, refuse_lib=True),
            _seeded(_reference_loop),
            _loop_cases(),
            [Mistake(m.name, m.hint, _seeded(m.fn)) for m in mistakes],
            name="sample_loop",
        )
    finally:
        torch.set_num_threads(threads)


# ---------------------------------------------------------------------------
# exercise 4 (by hand): the perplexity of a model at `bits` bits per character
# ---------------------------------------------------------------------------


def check_perplexity(my_perplexity, bits: float = 1.5):
    """Chapter 11, exercise 4 (by hand): the perplexity at `bits` bits per character, 2^bits,
    to 0.01."""
    b = float(bits)
    return check_number(my_perplexity, 2.0 ** b, atol=5e-3, what="perplexity",
                        name="my_perplexity", slips={
        "e^bits: nats for bits": (math.exp(b), "Which base does a loss in bits use?"),
        "bits squared": (b ** 2, "Perplexity is an exponential of the loss, not a power of it."),
        "2 x bits": (2 * b, "Perplexity is an exponential of the loss, not a multiple of it."),
        "1 / 2^bits: a probability, not a perplexity": (
            2.0 ** -b, "A perplexity is at least 1: the number of equally likely choices."),
        "e^(bits x ln 2) taken as e^(bits / ln 2)": (
            math.exp(b / math.log(2)), "To turn bits into nats, multiply or divide by ln 2?"),
    })
