"""Chapter 17's checkers: the solution passes, a stub is "not implemented yet", and each
catalogued wrong solution (written here independently of the checker's own mistakes) is
refused, with the mistake named where the checker knows it."""

from __future__ import annotations

import pytest
import torch

import lib
from lib.teach.checking import NOT_IMPLEMENTED


def stub(*args):
    raise NotImplementedError


# ---------------------------------------------------------------- top-p
def top_p_solution(probs, p):
    sorted_p, _ = probs.sort(dim=-1, descending=True)
    before = sorted_p.cumsum(dim=-1) - sorted_p
    last = sorted_p.gather(-1, (before < p).sum(-1, keepdim=True) - 1)
    kept = torch.where(probs >= last, probs, torch.zeros_like(probs))
    return kept / kept.sum(dim=-1, keepdim=True)


def top_p_loop(probs, p):  # the same, row by row in Python: also right
    out = torch.zeros_like(probs)
    for r, row in enumerate(probs.tolist()):
        mass, last = 0.0, None
        for x in sorted(row, reverse=True):
            if mass < p:
                last = x
            mass += x
        kept = [x if x >= last else 0.0 for x in row]
        out[r] = torch.tensor(kept, dtype=probs.dtype) / sum(kept)
    return out


def top_p_drops_crossing(probs, p):
    out = torch.zeros_like(probs)
    for r, row in enumerate(probs.tolist()):
        order = sorted(range(len(row)), key=lambda i: -row[i])
        mass, keep = 0.0, [order[0]]
        for i in order[1:]:
            if mass + row[order[0]] + row[i] > p:
                break
            keep.append(i)
            mass += row[i]
        for i in keep:
            out[r, i] = row[i]
    return out / out.sum(-1, keepdim=True)


def top_p_unnormalised(probs, p):
    return torch.where(top_p_solution(probs, p) > 0, probs, torch.zeros_like(probs))


def top_p_exactly_sorted_prefix(probs, p):
    s, idx = probs.sort(dim=-1, descending=True, stable=True)
    keep = (s.cumsum(-1) - s) < p
    out = torch.zeros_like(probs).scatter(-1, idx, s * keep)
    return out / out.sum(-1, keepdim=True)


def top_p_float32(probs, p):
    return top_p_solution(probs.float(), p)


def top_p_ascending(probs, p):
    s, idx = probs.sort(dim=-1)
    keep = (s.cumsum(-1) - s) < p
    out = torch.zeros_like(probs).scatter(-1, idx, s * keep)
    return out / out.sum(-1, keepdim=True)


@pytest.mark.parametrize("fn", [top_p_solution, top_p_loop])
def test_top_p_solutions_pass(fn):
    assert lib.check_top_p(fn)


@pytest.mark.parametrize("fn, mistake", [
    (top_p_drops_crossing, "the token that crosses p dropped"),
    (top_p_unnormalised, "not renormalised"),
    (top_p_exactly_sorted_prefix, "a tie at the cut broken by position"),
    (top_p_float32, None),
    (top_p_ascending, None),
])
def test_top_p_wrong_solutions_refused(fn, mistake):
    verdict = lib.check_top_p(fn)
    assert not verdict
    if mistake:
        assert verdict.mistake == mistake and mistake in verdict.message


def test_top_p_stub():
    assert NOT_IMPLEMENTED in lib.check_top_p(stub).message


# ---------------------------------------------------------------- offset mask
def mask_solution(c, p):
    return torch.ones(c, p + c, dtype=torch.bool).tril(diagonal=p)


def mask_by_positions(c, p):  # also right: key j <= query position p + i
    return torch.arange(p + c)[None, :] <= (p + torch.arange(c))[:, None]


def mask_top_left(c, p):
    return torch.arange(p + c)[None, :] <= torch.arange(c)[:, None]


def mask_strict(c, p):
    return torch.arange(p + c)[None, :] < (p + torch.arange(c))[:, None]


def mask_square(c, p):
    return torch.tril(torch.ones(c, c)).bool()


def mask_float(c, p):
    return mask_solution(c, p).float()


def mask_inverted(c, p):
    return torch.arange(p + c)[None, :] > (p + torch.arange(c))[:, None]


@pytest.mark.parametrize("fn", [mask_solution, mask_by_positions])
def test_mask_solutions_pass(fn):
    assert lib.check_offset_causal_mask(fn)


@pytest.mark.parametrize("fn, mistake", [
    (mask_top_left, "top-left alignment (is_causal=True's)"),
    (mask_strict, "one key short"),
    (mask_square, "the mask of the chunk alone"),
    (mask_inverted, "True where masked"),
    (mask_float, None),
])
def test_mask_wrong_solutions_refused(fn, mistake):
    verdict = lib.check_offset_causal_mask(fn)
    assert not verdict
    if mistake:
        assert verdict.mistake == mistake


def test_mask_stub():
    assert NOT_IMPLEMENTED in lib.check_offset_causal_mask(stub).message


# ---------------------------------------------------------------- bytes per token
def bytes_solution(config, context, weight_bytes, kv_bytes):
    d, L, V = config.d_model, config.n_layers, config.vocab_size
    d_head = d // config.n_heads
    kv_width = config.n_kv_heads * d_head
    per_block = d * d + 2 * d * kv_width + d * d + 3 * d * config.d_ff + 2 * d
    weights = V * d + L * per_block + d + (0 if config.tie_embeddings else V * d)
    return weights * weight_bytes + 2 * L * kv_width * context * kv_bytes


def bytes_n_heads(config, context, weight_bytes, kv_bytes):
    wrong = lib.ModernConfig(**{**config.__dict__, "n_kv_heads": config.n_heads})
    return bytes_solution(config, 0, weight_bytes, kv_bytes) + (
        bytes_solution(wrong, context, 0, kv_bytes))


def bytes_no_norms(config, context, weight_bytes, kv_bytes):
    norms = (2 * config.n_layers + 1) * config.d_model
    return bytes_solution(config, context, weight_bytes, kv_bytes) - norms * weight_bytes


def bytes_no_cache(config, context, weight_bytes, kv_bytes):
    return bytes_solution(config, 0, weight_bytes, kv_bytes)


def bytes_tied_twice(config, context, weight_bytes, kv_bytes):
    extra = config.vocab_size * config.d_model if config.tie_embeddings else 0
    return bytes_solution(config, context, weight_bytes, kv_bytes) + extra * weight_bytes


def bytes_float(config, context, weight_bytes, kv_bytes):
    return float(bytes_solution(config, context, weight_bytes, kv_bytes))


def bytes_values_only(config, context, weight_bytes, kv_bytes):
    kv = config.n_layers * config.n_kv_heads * (config.d_model // config.n_heads) * context
    return bytes_solution(config, 0, weight_bytes, kv_bytes) + kv * kv_bytes


@pytest.mark.parametrize("fn", [bytes_solution])
def test_bytes_solution_passes(fn):
    assert lib.check_bytes_per_token(fn)


@pytest.mark.parametrize("fn, mistake", [
    (bytes_n_heads, "the query heads counted in the cache"),
    (bytes_no_cache, "the KV cache forgotten"),
    (bytes_tied_twice, "the tied head counted twice"),
    (bytes_values_only, "keys or values only"),
    (bytes_no_norms, None),
    (bytes_float, None),
])
def test_bytes_wrong_solutions_refused(fn, mistake):
    verdict = lib.check_bytes_per_token(fn)
    assert not verdict
    if mistake:
        assert verdict.mistake == mistake


def test_bytes_stub():
    assert NOT_IMPLEMENTED in lib.check_bytes_per_token(stub).message


def test_bytes_reference_is_smollm2s_real_size():
    """The reference's count for SmolLM2 is the 134,515,008 weights chapter 15 loads."""
    from lib.teach.checkers.generating import _real_bytes

    c = lib.ModernConfig(vocab_size=49152, d_model=576, n_layers=30, n_heads=9, n_kv_heads=3,
                         d_ff=1536, max_len=8192)
    assert _real_bytes(c, 0, 1, 1) == 134_515_008
    assert _real_bytes(c, 10, 0, 4) == 10 * 46_080
