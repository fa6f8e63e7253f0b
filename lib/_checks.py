"""Input checks shared by the modules of `lib`.

Every public function of the course checks its inputs *before* computing, so a
mistake surfaces as a short `ValueError`/`TypeError` that names the shapes or
values at fault, instead of a NaN or a stack trace from deep inside torch.
"""

from __future__ import annotations

import torch


def shape(t: torch.Tensor) -> str:
    """A tensor's shape as a compact string, e.g. ``(2, 3, 4)``."""
    return "(" + ", ".join(str(s) for s in t.shape) + ")"


def require_tensor(name: str, t: object) -> torch.Tensor:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    return t


def require_float(name: str, t: object) -> torch.Tensor:
    t = require_tensor(name, t)
    if not t.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {t.dtype}")
    return t


def require_positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value <= 0:
        raise ValueError(f"{name} must be positive, got {value}")
    return value


def require_probability(name: str, p: object) -> float:
    if isinstance(p, bool) or not isinstance(p, (int, float)):
        raise TypeError(f"{name} must be a number, got {type(p).__name__}")
    if not 0.0 <= p < 1.0:
        raise ValueError(f"{name} must be in [0, 1), got {p}")
    return float(p)


def require_mask(mask: object, target: torch.Size, target_name: str) -> torch.Tensor:
    """Check that `mask` is a bool tensor that broadcasts to `target`.

    The course's masks say True where a query *may* attend. A float or 0/1
    integer mask is refused: the two conventions (1 = keep, or additive -inf)
    are the classic source of silent mask bugs.
    """
    mask = require_tensor("mask", mask)
    if mask.dtype != torch.bool:
        raise TypeError(
            f"mask must be a bool tensor (True = may attend), got dtype {mask.dtype}; "
            "convert a 0/1 mask with `mask.bool()`"
        )
    try:
        broadcast = torch.broadcast_shapes(mask.shape, target)
    except RuntimeError:
        broadcast = None
    if broadcast != target:
        raise ValueError(
            f"mask of shape {tuple(mask.shape)} does not broadcast to the "
            f"{target_name} shape {tuple(target)}"
        )
    return mask


def require_token_ids(name: str, ids: object, vocab_size: int) -> torch.Tensor:
    """Token ids must be an integer tensor with every value in [0, vocab_size)."""
    ids = require_tensor(name, ids)
    if ids.dtype not in (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8):
        raise TypeError(f"{name} must hold integer token ids, got dtype {ids.dtype}")
    if ids.dim() != 2:
        raise ValueError(f"{name} must have shape (batch, length), got {shape(ids)}")
    if ids.numel():
        lo, hi = int(ids.min()), int(ids.max())
        if lo < 0 or hi >= vocab_size:
            bad = lo if lo < 0 else hi
            raise ValueError(
                f"{name} holds token id {bad}, outside [0, {vocab_size}) "
                f"for a vocabulary of size {vocab_size}"
            )
    return ids
