"""Chapter 16's exercise checkers: the solution passes, a stub is "not implemented yet",
and each named mistake, written out independently here, is recognised by name."""

from __future__ import annotations

import torch

import lib
from lib.teach.checking import NOT_IMPLEMENTED


def stub(*args):
    raise NotImplementedError


# --- induction_score(pattern, length) --------------------------------------------


def induction_score(pattern, length):
    T = pattern.shape[-1]
    diagonal = torch.diagonal(pattern, offset=1 - length, dim1=2, dim2=3)  # queries length-1 .. T-1
    return diagonal[:, :, -length:].mean(dim=2).mean(dim=0)


def induction_score_loops(pattern, length):
    B, h, T, _ = pattern.shape
    total = torch.zeros(h, dtype=pattern.dtype)
    for q in range(T - length, T):
        total += pattern[:, :, q, q - length + 1].sum(0)
    return total / (B * length)


def offset_too_far(pattern, length):  # attends to the earlier copy of the query's own token
    T = pattern.shape[-1]
    return torch.stack([pattern[:, :, q, q - length] for q in range(T - length, T)], -1).mean((0, 2))


def offset_too_near(pattern, length):
    T = pattern.shape[-1]
    return torch.stack([pattern[:, :, q, q - length + 2] for q in range(T - length, T)], -1).mean((0, 2))


def over_heads(pattern, length):
    d = torch.diagonal(pattern, offset=1 - length, dim1=2, dim2=3)[:, :, -length:]
    return d.mean(dim=(1, 2))  # one number per sequence


def per_sequence_and_head(pattern, length):
    d = torch.diagonal(pattern, offset=1 - length, dim1=2, dim2=3)[:, :, -length:]
    return d.mean(dim=2)  # (B, h)


def whole_diagonal(pattern, length):
    return torch.diagonal(pattern, offset=1 - length, dim1=2, dim2=3).mean(dim=(0, 2))


def test_induction_score_solutions_pass():
    for fn in (induction_score, induction_score_loops):
        verdict = lib.check_induction_score(fn)
        assert verdict and verdict.mistake is None, verdict.message


def test_induction_score_stub():
    verdict = lib.check_induction_score(stub)
    assert not verdict and NOT_IMPLEMENTED in verdict.message


def test_induction_score_mistakes_named():
    for fn, name in (
        (offset_too_far, "diagonal offset off by one"),
        (offset_too_near, "diagonal offset off by one"),
        (over_heads, "averaged over the wrong axis"),
        (per_sequence_and_head, "averaged over the wrong axis"),
        (whole_diagonal, "included the first half"),
    ):
        verdict = lib.check_induction_score(fn)
        assert not verdict and verdict.mistake == name, (fn.__name__, verdict.message)


def test_induction_score_nan_and_dtype_never_pass():
    def with_nan(pattern, length):
        out = induction_score(pattern, length)
        out[0] = float("nan")
        return out

    def as_float16(pattern, length):
        return induction_score(pattern, length).half()

    assert not lib.check_induction_score(with_nan)
    assert not lib.check_induction_score(as_float16)


def test_induction_score_agrees_with_lib():
    g = torch.Generator().manual_seed(0)
    p = torch.randn(2, 3, 11, 11, generator=g).masked_fill(~torch.ones(11, 11).tril().bool(), -torch.inf)
    p = p.softmax(-1)
    torch.testing.assert_close(lib.induction_scores(p, 5), induction_score(p, 5))


# --- zero_head(z, head) ------------------------------------------------------------


def zero_head(z, head):
    out = z.clone()
    out[:, :, head, :] = 0
    return out


def zero_head_mask(z, head):
    keep = torch.ones(z.shape[2], dtype=z.dtype)
    keep[head] = 0
    return z * keep[:, None]


def zero_position(z, head):
    out = z.clone()
    out[:, head] = 0
    return out


def zero_feature(z, head):
    out = z.clone()
    out[..., head] = 0
    return out


def keep_only(z, head):
    out = torch.zeros_like(z)
    out[:, :, head] = z[:, :, head]
    return out


def in_place(z, head):
    z[:, :, head] = 0
    return z


def test_zero_head_solutions_pass():
    for fn in (zero_head, zero_head_mask):
        verdict = lib.check_zero_head(fn)
        assert verdict and verdict.mistake is None, verdict.message


def test_zero_head_stub():
    verdict = lib.check_zero_head(stub)
    assert not verdict and NOT_IMPLEMENTED in verdict.message


def test_zero_head_mistakes_named():
    for fn, name in ((zero_position, "zeroed a position instead of a head"),
                     (zero_feature, "zeroed a feature instead of a head"),
                     (keep_only, "zeroed every head but that one")):
        verdict = lib.check_zero_head(fn)
        assert not verdict and verdict.mistake == name, (fn.__name__, verdict.message)


def test_zero_head_in_place_refused():
    verdict = lib.check_zero_head(in_place)
    assert not verdict and "in place" in verdict.message
