"""The chapter 8 exercise checkers (lib/teach/checkers/training.py).

Each checker gets (a) a correct solution written here (must pass), (b) a stub
("not implemented yet"), and (c) for every mistake it names, a wrong
implementation written here independently, which must be recognised by name.
"""

import math

import pytest
import numpy as np
import torch

import lib
from lib.teach.checking import NOT_IMPLEMENTED


def stub(*args, **kwargs):
    raise NotImplementedError


def mistake_names(checker, solution):
    """The names a checker knows, read from its Verdicts on the wrong versions below."""
    return {checker(fn).mistake for fn in solution.values()}


# --- noam_lr ---------------------------------------------------------------------------------


def noam_ok(step, d_model, warmup_steps):
    return d_model ** -0.5 * min(step ** -0.5, step * warmup_steps ** -1.5)


NOAM_WRONG = {
    "max instead of min": lambda s, d, w: max(1 / math.sqrt(s), s / w**1.5) / math.sqrt(d),
    "warmup_steps^(-0.5) in the rising term": lambda s, d, w: min(1 / math.sqrt(s), s / math.sqrt(w))
    / math.sqrt(d),
    "the d_model^(-0.5) factor is missing": lambda s, d, w: min(1 / math.sqrt(s), s / w**1.5),
    "steps counted from 0 (off by one)": lambda s, d, w: noam_ok(s + 1, d, w),
    "d_model^(+0.5) instead of d_model^(-0.5)": lambda s, d, w: math.sqrt(d)
    * min(1 / math.sqrt(s), s / w**1.5),
}


def test_noam_checker_passes_solutions_and_reports_a_stub():
    assert lib.check_noam_lr(noam_ok)
    assert lib.check_noam_lr(lambda s, d, w: lib.noam_lr(s, d, w))
    # the prompt asks for a Python float: a 0-d tensor or a NumPy scalar is refused, named
    for wrap in (lambda x: torch.tensor(x, dtype=torch.float64), np.float32, np.float64):
        verdict = lib.check_noam_lr(lambda s, d, w, wrap=wrap: wrap(noam_ok(s, d, w)))
        if wrap is np.float64:  # a subclass of float: it is a Python float
            assert verdict
        else:
            assert not verdict and "must return a Python float" in verdict.message
    verdict = lib.check_noam_lr(stub)
    assert not verdict and NOT_IMPLEMENTED in verdict.message


@pytest.mark.parametrize("mistake", list(NOAM_WRONG))
def test_noam_checker_names_each_mistake(mistake):
    verdict = lib.check_noam_lr(NOAM_WRONG[mistake])
    assert not verdict and verdict.mistake == mistake
    assert "?" in verdict.message  # the hint is a question


def test_noam_checker_reports_an_unknown_bug_without_a_name():
    verdict = lib.check_noam_lr(lambda s, d, w: noam_ok(s, d, w) * 1.01)
    assert not verdict and verdict.mistake is None and "differs" in verdict.message


# --- label_smoothed_loss -----------------------------------------------------------------------


def smoothing_ok(logits, target, smoothing, pad_id):
    log_p = torch.log_softmax(logits, dim=-1)
    K = logits.shape[-1]
    q = torch.full_like(log_p, smoothing / K)
    q.scatter_add_(-1, target.unsqueeze(-1), torch.full_like(log_p[..., :1], 1 - smoothing))
    per_token = -(q * log_p).sum(-1)
    real = target != pad_id
    return per_token[real].mean()


def _per_token(log_p, target, eps, wrong_classes_only=False):
    K = log_p.shape[-1]
    onehot = torch.nn.functional.one_hot(target, K).to(log_p.dtype)
    if wrong_classes_only:
        q = onehot * (1 - eps) + (1 - onehot) * eps / (K - 1)
    else:
        q = onehot * (1 - eps) + eps / K
    return -(q * log_p).sum(-1)


SMOOTHING_WRONG = {
    "smoothing spread over K - 1 classes instead of K": lambda z, t, e, p: _per_token(
        z.log_softmax(-1), t, e, wrong_classes_only=True
    )[t != p].mean(),
    "PAD positions not excluded": lambda z, t, e, p: _per_token(z.log_softmax(-1), t, e).mean(),
    "the mean counts PAD positions": lambda z, t, e, p: torch.where(
        t != p, _per_token(z.log_softmax(-1), t, e), torch.zeros((), dtype=z.dtype)
    ).mean(),
    "log_softmax missing (raw logits used as log-probabilities)": lambda z, t, e, p: _per_token(
        z, t, e
    )[t != p].mean(),
    "softmax then log: -inf for large logits": lambda z, t, e, p: _per_token(
        torch.log(torch.softmax(z, -1)), t, e
    )[t != p].mean(),
}


def test_smoothing_checker_passes_solutions_and_reports_a_stub():
    assert lib.check_label_smoothed_loss(smoothing_ok)
    assert lib.check_label_smoothed_loss(
        lambda z, t, e, p: lib.label_smoothed_nll(z, t, e, ignore_index=p)
    )
    # a Python float is accepted as the answer too
    assert lib.check_label_smoothed_loss(lambda z, t, e, p: float(smoothing_ok(z, t, e, p)))
    verdict = lib.check_label_smoothed_loss(stub)
    assert not verdict and NOT_IMPLEMENTED in verdict.message


@pytest.mark.parametrize("mistake", list(SMOOTHING_WRONG))
def test_smoothing_checker_names_each_mistake(mistake):
    verdict = lib.check_label_smoothed_loss(SMOOTHING_WRONG[mistake])
    assert not verdict and verdict.mistake == mistake
    assert "?" in verdict.message


@pytest.mark.parametrize("call", ["functional", "module"])
def test_smoothing_checker_refuses_the_reference_call(call):
    def one_liner(z, t, e, p):
        flat, ids = z.reshape(-1, z.shape[-1]), t.reshape(-1)
        if call == "functional":
            return torch.nn.functional.cross_entropy(flat, ids, ignore_index=p, label_smoothing=e)
        return torch.nn.CrossEntropyLoss(ignore_index=p, label_smoothing=e)(flat, ids)

    verdict = lib.check_label_smoothed_loss(one_liner)
    assert not verdict and verdict.mistake == "calls F.cross_entropy"
    assert "from the formula" in verdict.message
    # the refusal does not leak: a solution written from the formula still passes after it
    assert lib.check_label_smoothed_loss(smoothing_ok)


def test_smoothing_checker_catches_a_hard_coded_pad_id():
    verdict = lib.check_label_smoothed_loss(lambda z, t, e, p: smoothing_ok(z, t, e, 0))
    assert not verdict


# --- beam_step -------------------------------------------------------------------------------


def beam_step_ok(scores, log_probs, beam_size):
    B, K, V = log_probs.shape
    total = scores.unsqueeze(-1) + log_probs  # (B, K, V)
    order = total.reshape(B, -1).argsort(dim=-1, descending=True)[:, :beam_size]
    new_scores = total.reshape(B, -1).gather(1, order)
    return new_scores, torch.div(order, V, rounding_mode="floor"), order - (order // V) * V


def _flat_top(scores, log_probs, beam_size):
    B, K, V = log_probs.shape
    return torch.topk((scores[:, :, None] + log_probs).flatten(1), beam_size, dim=1)


BEAM_WRONG = {
    "top-k per hypothesis instead of over beam × vocabulary": lambda s, lp, k: (
        (s[:, :, None] + lp).max(-1).values,
        torch.arange(k).repeat(s.shape[0], 1),
        (s[:, :, None] + lp).argmax(-1),
    ),
    "the running score is not added": lambda s, lp, k: (
        lp.flatten(1).topk(k, dim=1).values,
        lp.flatten(1).topk(k, dim=1).indices // lp.shape[-1],
        lp.flatten(1).topk(k, dim=1).indices % lp.shape[-1],
    ),
    "parent and token with the wrong divisor": lambda s, lp, k: (
        _flat_top(s, lp, k).values,
        _flat_top(s, lp, k).indices // k,
        _flat_top(s, lp, k).indices % k,
    ),
    "parent is a float tensor (true division /)": lambda s, lp, k: (
        _flat_top(s, lp, k).values,
        torch.true_divide(_flat_top(s, lp, k).indices, lp.shape[-1]),
        _flat_top(s, lp, k).indices % lp.shape[-1],
    ),
    "parent and token swapped": lambda s, lp, k: (
        _flat_top(s, lp, k).values,
        _flat_top(s, lp, k).indices % lp.shape[-1],
        _flat_top(s, lp, k).indices // lp.shape[-1],
    ),
}


def test_beam_step_checker_passes_a_solution_and_reports_a_stub():
    assert lib.check_beam_step(beam_step_ok)
    verdict = lib.check_beam_step(stub)
    assert not verdict and NOT_IMPLEMENTED in verdict.message


@pytest.mark.parametrize("mistake", list(BEAM_WRONG))
def test_beam_step_checker_names_each_mistake(mistake):
    verdict = lib.check_beam_step(BEAM_WRONG[mistake])
    assert not verdict and verdict.mistake == mistake
    assert "?" in verdict.message


def test_beam_step_checker_refuses_float_parents_naming_the_dtype():
    def floored_float(scores, log_probs, beam_size):  # right values, float dtype
        new, parent, token = beam_step_ok(scores, log_probs, beam_size)
        return new, parent.float(), token

    verdict = lib.check_beam_step(floored_float)
    assert not verdict and "int64" in verdict.message and "float" in verdict.message


def test_beam_step_checker_wants_the_best_first():
    def ascending(scores, log_probs, beam_size):
        new, parent, token = beam_step_ok(scores, log_probs, beam_size)
        return new.flip(-1), parent.flip(-1), token.flip(-1)

    assert not lib.check_beam_step(ascending)


def test_every_named_mistake_is_tested():
    assert mistake_names(lib.check_noam_lr, NOAM_WRONG) == set(NOAM_WRONG)
    assert mistake_names(lib.check_label_smoothed_loss, SMOOTHING_WRONG) == set(SMOOTHING_WRONG)
    assert mistake_names(lib.check_beam_step, BEAM_WRONG) == set(BEAM_WRONG)


# --- the warm-up prediction ------------------------------------------------------------------


def test_warmup_outcome_reads_every_seed():
    losses = {"post-LN, no warm-up": [3.3, 3.2], "post-LN, warm-up": [1.4, 1.8],
              "pre-LN, no warm-up": [1.1, 2.9], "pre-LN, warm-up": [1.2, 1.0]}
    assert lib.warmup_outcome(losses) == {
        "post-LN, no warm-up": "stalls", "post-LN, warm-up": "learns",
        "pre-LN, no warm-up": "differs between seeds", "pre-LN, warm-up": "learns"}
    with pytest.raises(ValueError, match="keys"):
        lib.warmup_outcome({"post-LN, no warm-up": [3.3]})
    with pytest.raises(ValueError, match="empty"):
        lib.warmup_outcome({**losses, "pre-LN, warm-up": []})


def test_warmup_prediction_checker():
    outcome = {"post-LN, no warm-up": "stalls", "post-LN, warm-up": "learns",
               "pre-LN, no warm-up": "learns", "pre-LN, warm-up": "learns"}
    blank = dict.fromkeys(outcome, "?")
    verdict = lib.check_warmup_prediction(blank, outcome)
    assert not verdict and "not filled in" in verdict.message
    assert lib.check_warmup_prediction(dict(outcome), outcome)
    all_learn = dict.fromkeys(outcome, "learns")
    verdict = lib.check_warmup_prediction(all_learn, outcome)
    assert not verdict and "1 of 4" in verdict.message
    with pytest.raises(ValueError, match="keys"):
        lib.check_warmup_prediction({"post-LN": "learns"}, outcome)


# --- greedy_decode (written here, per row and with hand-built masks) --------------------------


def _greedy(model, src, max_len, bos_id, eos_id, pad_id, *, done_mask=True, keep_bos=False,
            src_mask=True, pad_in_tgt_mask=False, causal=True, stop=True):
    B = src.shape[0]
    s_mask = (src != pad_id).view(B, 1, 1, -1) if src_mask else None
    with torch.no_grad():
        memory = model.encode(src, src_mask=s_mask)
        out = [[bos_id] for _ in range(B)]
        finished = [False] * B
        for _ in range(max_len):
            ys = torch.tensor(out)
            t = ys.shape[1]
            t_mask = None
            if causal:
                t_mask = torch.ones(t, t, dtype=torch.bool).tril().view(1, 1, t, t)
            if pad_in_tgt_mask:
                t_mask = t_mask & (ys != pad_id).view(B, 1, 1, t)
            last = model.decode(ys, memory, src_mask=s_mask, tgt_mask=t_mask)[:, -1]
            for b in range(B):
                token = int(last[b].argmax())
                if done_mask and finished[b]:
                    token = pad_id
                out[b].append(token)
                finished[b] = finished[b] or token == eos_id
            if stop and all(finished):
                break
    ys = torch.tensor(out)
    return ys if keep_bos else ys[:, 1:]


def greedy_ok(model, src, max_len, bos_id, eos_id, pad_id):
    return _greedy(model, src, max_len, bos_id, eos_id, pad_id)


GREEDY_WRONG = {
    "no done-mask: tokens follow EOS": lambda *a: _greedy(*a, done_mask=False),
    "BOS kept in the output": lambda *a: _greedy(*a, keep_bos=True),
    "no source padding mask": lambda *a: _greedy(*a, src_mask=False),
    "target mask built from pad_id, which hides BOS when BOS = PAD":
        lambda *a: _greedy(*a, pad_in_tgt_mask=True),
    "no causal mask on the decoder": lambda *a: _greedy(*a, causal=False),
    "no early stop: always max_len tokens": lambda *a: _greedy(*a, stop=False),
}


def test_greedy_checker_passes_solutions_and_reports_a_stub():
    assert lib.check_greedy_decode(greedy_ok)
    assert lib.check_greedy_decode(lambda m, s, n, b, e, p: lib.greedy_decode(m, s, n, b, e, p))
    verdict = lib.check_greedy_decode(stub)
    assert not verdict and NOT_IMPLEMENTED in verdict.message


@pytest.mark.parametrize("mistake", list(GREEDY_WRONG))
def test_greedy_checker_names_each_mistake(mistake):
    verdict = lib.check_greedy_decode(GREEDY_WRONG[mistake])
    assert not verdict and verdict.mistake == mistake
    assert "?" in verdict.message


def test_greedy_checker_wants_int64_ids():
    verdict = lib.check_greedy_decode(lambda *a: greedy_ok(*a).to(torch.int32))
    assert not verdict and "int64" in verdict.message


def test_greedy_checker_cases_separate_the_slips():
    """Rows end at different steps, one row never ends, BOS = PAD in some cases."""
    from lib.teach.checkers.training import _greedy_cases

    cases = _greedy_cases()
    assert any(case.args[3] == case.args[5] for case in cases)  # BOS = PAD
    assert any(case.args[3] != case.args[5] for case in cases)
    for case in cases:
        model, src, max_len, bos, eos, pad = case.args
        out = greedy_ok(*case.args)
        assert (src == pad).any()  # padded rows
        ends = [(row == eos).nonzero().flatten().tolist()[:1] for row in out]
        assert len({tuple(e) for e in ends}) > 1  # rows end at different steps


# --- train_step (written here from the definition, no lib step function) ----------------------


def _step(model, batch, optimizer, smoothing, pad_id, *, zero="before", target="tgt_out",
          reads="tgt_in", drop_pad=True):
    model.train()
    logits = model(batch.src, getattr(batch, reads), src_mask=batch.src_mask,
                   tgt_mask=batch.tgt_mask)
    gold = getattr(batch, target)
    loss = torch.nn.functional.cross_entropy(
        logits.flatten(0, 1), gold.flatten(), label_smoothing=smoothing,
        ignore_index=pad_id if drop_pad else -100)
    if zero == "before":
        optimizer.zero_grad()
    loss.backward()
    if zero == "late":
        optimizer.zero_grad()
    optimizer.step()
    return float(loss)


def train_step_ok(model, batch, optimizer, smoothing, pad_id):
    return _step(model, batch, optimizer, smoothing, pad_id)


STEP_WRONG = {
    "no zero_grad: the gradients add up over steps": lambda *a: _step(*a, zero=None),
    "zero_grad between backward and step: no update": lambda *a: _step(*a, zero="late"),
    "loss against tgt_in: the shifted-in BOS is scored": lambda *a: _step(*a, target="tgt_in"),
    "the decoder reads tgt_out (the answer)": lambda *a: _step(*a, reads="tgt_out"),
    "label smoothing over padding: PAD targets in the loss":
        lambda *a: _step(*a, drop_pad=False),
}


def test_train_step_checker_passes_solutions_and_reports_a_stub():
    assert lib.check_train_step(train_step_ok)

    def returns_the_tensor(model, batch, optimizer, smoothing, pad_id):
        model.train()
        logits = model(batch.src, batch.tgt_in, src_mask=batch.src_mask,
                       tgt_mask=batch.tgt_mask)
        loss = lib.label_smoothed_nll(logits, batch.tgt_out, smoothing, ignore_index=pad_id)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return loss  # a 0-d tensor is accepted as the loss

    assert lib.check_train_step(returns_the_tensor)
    verdict = lib.check_train_step(stub)
    assert not verdict and NOT_IMPLEMENTED in verdict.message


@pytest.mark.parametrize("mistake", list(STEP_WRONG))
def test_train_step_checker_names_each_mistake(mistake):
    verdict = lib.check_train_step(STEP_WRONG[mistake])
    assert not verdict and verdict.mistake == mistake
    assert "?" in verdict.message


def test_train_step_checker_refuses_a_step_without_an_update_or_a_nan():
    assert not lib.check_train_step(lambda m, b, o, s, p: 0.5)
    assert not lib.check_train_step(lambda *a: train_step_ok(*a) * float("nan"))


def test_every_new_named_mistake_is_tested():
    assert mistake_names(lib.check_greedy_decode, GREEDY_WRONG) == set(GREEDY_WRONG)
    assert mistake_names(lib.check_train_step, STEP_WRONG) == set(STEP_WRONG)


# --- the questions' numbers: a longer warm-up, the smoothed loss's floor and optimum ---------


def test_peak_checkers():
    # the peaks read off the schedule itself, step by step (noam_ok above, written here)
    old = max(noam_ok(s, 512, 4000) for s in range(1, 20_001))
    new_curve = [noam_ok(s, 512, 8000) for s in range(1, 20_001)]
    new = max(new_curve)
    step = new_curve.index(new) + 1
    assert step == 8000 and abs(new - 4.94e-4) < 5e-7
    assert lib.check_peak_ratio(new / old) and lib.check_peak_ratio(0.7071)
    assert lib.check_peak_step(step)
    for value, name in ((old / new, "old over new (upside down)"),
                        ((new / old) ** 2, "warmup^(-1) instead of warmup^(-0.5)"),
                        (2.0, "the peak grows with the warm-up")):
        verdict = lib.check_peak_ratio(value)
        assert not verdict and verdict.slip == name, (name, verdict.message)
    assert lib.check_peak_step(4000).slip == "the old warm-up's end"
    assert not lib.check_peak_ratio(0.8) and lib.check_peak_ratio(0.8).slip is None
    assert not lib.check_peak_step(6000) and lib.check_peak_step(6000).slip is None
    assert not lib.check_peak_ratio(float("nan")) and not lib.check_peak_step(float("nan"))


def _entropy(q):
    return float(-(q * q.log()).sum())


def _fitted_floor(smoothing, vocab_size, over=None, steps=3000):
    """The smallest loss and the best confidence, found by fitting free logits with Adam.

    ``over``: spread ε over the first `over` classes only (the true class, 0, among them).
    """
    k = vocab_size if over is None else over
    target = torch.zeros(vocab_size, dtype=torch.float64)
    target[:k] = smoothing / k
    target[0] += 1 - smoothing
    logits = torch.zeros(vocab_size, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.Adam([logits], lr=0.05)
    for _ in range(steps):
        opt.zero_grad()
        loss = -(target * torch.log_softmax(logits, -1)).sum()
        loss.backward()
        opt.step()
    return float(loss.detach()), float(torch.softmax(logits.detach(), -1)[0])


def test_smoothed_floor_checker():
    loss, _ = _fitted_floor(0.1, 42)
    q = torch.full((42,), 0.1 / 42, dtype=torch.float64)
    q[0] += 0.9
    assert abs(loss - _entropy(q)) < 1e-6 and abs(loss - 0.682) < 5e-4
    assert lib.check_smoothed_floor(loss) and lib.check_smoothed_floor(0.682)
    spread = torch.full((42,), 0.1 / 41, dtype=torch.float64)
    spread[0] = 0.9
    slips = {
        "0: no floor": 0.0,
        "−log of the optimal confidence, not the entropy": -math.log(float(q[0])),
        "the true class's term only": -float(q[0]) * math.log(float(q[0])),
        "-ln(1 - ε): the true class only, ε/|V| left out": -math.log(0.9),
        "bits instead of nats": float(-(q * q.log2()).sum()),
        "ε spread over |V| - 1 classes": _entropy(spread),
    }
    for name, value in slips.items():
        verdict = lib.check_smoothed_floor(value)
        assert not verdict and verdict.slip == name, (name, verdict.message)
    assert not lib.check_smoothed_floor(0.5) and lib.check_smoothed_floor(0.5).slip is None
    assert not lib.check_smoothed_floor(float("nan"))


def _best_confidence(smoothing, vocab_size, over):
    """The true class's probability that minimises -Σ target log p, ε spread over `over` classes.

    The minimiser is the target itself (Gibbs' inequality); checked here on 200 random
    distributions near it, none of which does better.
    """
    target = torch.zeros(vocab_size, dtype=torch.float64)
    target[:over] = smoothing / over
    target[0] += 1 - smoothing
    loss = lambda p: float(-(target * p.log()).sum())  # noqa: E731
    g = torch.Generator().manual_seed(0)
    for _ in range(200):
        p = (target + 1e-12).log() + 0.05 * torch.randn(vocab_size, generator=g, dtype=torch.float64)
        assert loss(torch.softmax(p, -1)) > loss(target + 1e-300)
    return float(target[0])


def test_smoothed_confidence_checker():
    confidence = _best_confidence(0.1, 42, 40)
    assert abs(confidence - 0.9025) < 1e-12
    assert lib.check_smoothed_confidence(0.9025) and lib.check_smoothed_confidence(confidence)
    _, fitted = _fitted_floor(0.1, 42)  # our own loss, by fitting free logits
    assert abs(fitted - _best_confidence(0.1, 42, 42)) < 1e-6
    for value, name in ((fitted, "ε spread over all |V|"), (0.9, "1 - ε"),
                        (_best_confidence(0.1, 42, 41), "ε spread over |V| - 1")):
        verdict = lib.check_smoothed_confidence(round(value, 6))
        assert not verdict and verdict.slip == name, (name, verdict.message)
    assert not lib.check_smoothed_confidence(0.95)
    assert lib.check_smoothed_confidence(0.95).slip is None
    assert not lib.check_smoothed_confidence(float("nan"))
    with pytest.raises(ValueError, match="smoothing"):
        lib.check_smoothed_confidence(0.9, smoothing=1.5)


@pytest.mark.parametrize("checker, name", [
    (lib.check_peak_ratio, "my_ratio"), (lib.check_peak_step, "my_step"),
    (lib.check_smoothed_floor, "my_floor"), (lib.check_smoothed_confidence, "my_confidence")])
@pytest.mark.parametrize("bad", ["0.682", True, [0.682]])
def test_question_checkers_refuse_what_is_not_a_number(checker, name, bad):
    with pytest.raises(TypeError, match=name):
        checker(bad)


@pytest.mark.parametrize("checker, name", [
    (lib.check_peak_ratio, "my_ratio"), (lib.check_peak_step, "my_step"),
    (lib.check_smoothed_floor, "my_floor"), (lib.check_smoothed_confidence, "my_confidence")])
def test_question_checkers_take_none_as_not_answered_yet(checker, name):
    """The chapter stores None in each answer cell: not right, no slip, says what to do."""
    verdict = checker(None)
    assert not verdict and verdict.slip is None
    assert "Not answered yet" in verdict.message and name in verdict.message


def test_warmup_outcome_defaults_are_the_chapters_thresholds():
    """Review 2026-11-28 (5-8) P8: the default learns_below was 2.5, the chapter's 2.75."""
    losses = {"post-LN, no warm-up": [3.3, 3.2], "post-LN, warm-up": [2.6, 2.7],
              "pre-LN, no warm-up": [1.1, 1.2], "pre-LN, warm-up": [1.2, 1.0]}
    assert lib.warmup_outcome(losses)["post-LN, warm-up"] == "learns"
    assert lib.warmup_outcome(losses) == lib.warmup_outcome(losses, learns_below=2.75,
                                                            stalls_above=3.0)


def test_warmup_prediction_leaves_out_a_setting_the_seeds_disagree_on():
    """Review 2026-11-28 (5-8) P8: no answer could match "differs between seeds"."""
    outcome = {"post-LN, no warm-up": "stalls", "post-LN, warm-up": "learns",
               "pre-LN, no warm-up": "differs between seeds", "pre-LN, warm-up": "learns"}
    mine = {"post-LN, no warm-up": "stalls", "post-LN, warm-up": "learns",
            "pre-LN, no warm-up": "stalls", "pre-LN, warm-up": "learns"}
    verdict = lib.check_warmup_prediction(mine, outcome)
    assert verdict and "3 predictions the runs settle" in verdict.message
    assert "not counted" in verdict.message
    wrong = {**mine, "post-LN, warm-up": "stalls"}
    verdict = lib.check_warmup_prediction(wrong, outcome)
    assert not verdict and "1 of 3 predictions the runs settle" in verdict.message
    unsettled = dict.fromkeys(outcome, "differs between seeds")
    assert not lib.check_warmup_prediction(mine, unsettled)
