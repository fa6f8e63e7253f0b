"""Input checks shared by the modules of `lib`.

Every public function of the course checks its inputs *before* computing, so a
mistake surfaces as a short `ValueError`/`TypeError` that names the argument and
the shapes or values at fault, instead of a NaN or a stack trace from deep inside
torch.

Checks of shapes, dtypes and devices are free. Checks of *values* (are the token
ids inside the vocabulary?) read the tensor, which on a GPU forces the host to
wait for the device; they run once, at the public entry point (`Transformer.forward`,
`encode`, `decode`, the decoders, the loss), never inside every layer.
"""

from __future__ import annotations

import math
import sys

import torch
from torch import nn

# Integer dtypes accepted as token ids. The narrow ones (int8, int16, uint8) are
# converted to int64 by `TokenEmbedding`, since nn.Embedding indexes with int32/int64 only.
TOKEN_DTYPES = (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8)


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


def require_bool(name: str, value: object) -> bool:
    """A flag must be a real bool: ``bias="no"`` or ``norm_first=0`` would be silently truthy or falsy."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, got {value!r} ({type(value).__name__})")
    return value


def require_int(name: str, value: object, minimum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {value!r} ({type(value).__name__})")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {value}")
    return value


def require_positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value <= 0:
        raise ValueError(f"{name} must be positive, got {value}")
    return value


_LARGEST_FLOAT = sys.float_info.max


def require_number(name: str, value: object, minimum: float | None = None, positive: bool = False) -> float:
    """A finite real number (not a bool, not NaN or ±inf), optionally >= ``minimum`` or > 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number, got {value!r} ({type(value).__name__})")
    if isinstance(value, int) and abs(value) > _LARGEST_FLOAT:  # float() would raise OverflowError
        raise ValueError(f"{name} must be a finite number, got an int of {len(str(abs(value)))} digits, "
                         "beyond the largest float")
    if not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value}")
    if positive and value <= 0:
        raise ValueError(f"{name} must be positive, got {value}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return float(value)


def require_probability(name: str, p: object) -> float:
    if isinstance(p, bool) or not isinstance(p, (int, float)):
        raise TypeError(f"{name} must be a number, got {type(p).__name__}")
    if not 0.0 <= p < 1.0:  # also refuses NaN
        raise ValueError(f"{name} must be in [0, 1), got {p}")
    return float(p)


def require_device(name: str, device: object) -> torch.device:
    """A device to compute on: None (the CPU), a string such as ``"cpu"`` or ``"cuda:0"``,
    or a ``torch.device``. A misspelt name, or CUDA/MPS where this machine has none,
    is refused here rather than deep inside the first ``.to(device)``."""
    if device is None:
        return torch.device("cpu")
    if not isinstance(device, (str, torch.device)):
        raise TypeError(f"{name} must be a str or a torch.device (or None for the CPU), "
                        f"got {device!r} ({type(device).__name__})")
    try:
        parsed = torch.device(device)
    except RuntimeError:
        raise ValueError(f"{name} must name a device such as 'cpu' or 'cuda', got {device!r}") from None
    if parsed.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"{name} is {device!r} but CUDA is not available on this machine")
    if parsed.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError(f"{name} is {device!r} but MPS is not available on this machine")
    return parsed


def require_same_kind(**tensors: torch.Tensor) -> None:
    """Tensors that meet in one matmul must share dtype and device.

    torch would otherwise stop inside the computation with "expected both
    vectors to have same dtype" or "Expected all tensors to be on the same device".
    """
    (first, t0), *rest = tensors.items()
    for name, t in rest:
        if t.dtype != t0.dtype:
            raise TypeError(f"{first} and {name} must have the same dtype: {first} is {t0.dtype}, {name} is {t.dtype}")
        if t.device != t0.device:
            raise ValueError(
                f"{first} and {name} must be on the same device: {first} is on {t0.device}, {name} on {t.device}"
            )


def require_matches_module(name: str, t: torch.Tensor, module: nn.Module) -> None:
    """An input must have the dtype and device of the module's parameters.

    A float64 input to a float32 layer (or a CPU input to a CUDA model) would
    otherwise fail deep inside ``nn.Linear``; ``model.to(x)`` or ``x.to(...)`` fixes it.
    """
    p = next(module.parameters(), None)
    if p is None:
        return
    if t.is_floating_point() and t.dtype != p.dtype:
        raise TypeError(
            f"{name} has dtype {t.dtype} but {type(module).__name__}'s parameters are {p.dtype}; "
            f"convert one of them, e.g. module.to({t.dtype}) or {name}.to({p.dtype})"
        )
    if t.device != p.device:
        raise ValueError(
            f"{name} is on {t.device} but {type(module).__name__}'s parameters are on {p.device}; "
            f"move it with {name}.to({str(p.device)!r})"
        )


def require_mask(mask: object, target: torch.Size, target_name: str, device: torch.device | None = None,
                 name: str = "mask") -> torch.Tensor:
    """Check that `mask` is a bool tensor that broadcasts to `target` (on ``device``, if given).

    The course's masks say True where a query *may* attend. A float or 0/1
    integer mask is refused: the two conventions (1 = keep, or additive -inf)
    are the classic source of silent mask bugs.
    """
    mask = require_tensor(name, mask)
    if mask.dtype != torch.bool:
        raise TypeError(
            f"{name} must be a bool tensor (True = may attend), got dtype {mask.dtype}; "
            "convert a 0/1 mask with `mask.bool()`"
        )
    try:
        broadcast = torch.broadcast_shapes(mask.shape, target)
    except RuntimeError:
        broadcast = None
    if broadcast != target:
        raise ValueError(
            f"{name} of shape {tuple(mask.shape)} does not broadcast to the "
            f"{target_name} shape {tuple(target)}"
        )
    if device is not None and mask.device != device:
        raise ValueError(f"{name} is on {mask.device} but the scores are on {device}")
    return mask


def require_token_id(name: str, value: object, vocab_size: int | None = None) -> int:
    """One special token id (PAD, BOS, EOS): an int in [0, vocab_size)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int token id, got {value!r} ({type(value).__name__})")
    if value < 0 or (vocab_size is not None and value >= vocab_size):
        bound = f"[0, {vocab_size})" if vocab_size is not None else "[0, vocab_size)"
        raise ValueError(f"{name}={value} is outside {bound}: it is not a token of the vocabulary")
    return value


def require_token_ids(name: str, ids: object, vocab_size: int) -> torch.Tensor:
    """Token ids must be an integer tensor (B, L) with every value in [0, vocab_size).

    The range check reads the values (one device->host copy of min and max):
    call it once per public entry point. On the ``meta`` device, which holds
    shapes but no values, it checks the shape and dtype only.
    """
    ids = require_tensor(name, ids)
    if ids.dtype not in TOKEN_DTYPES:
        raise TypeError(
            f"{name} must hold integer token ids (int64, int32, int16, int8 or uint8), got dtype {ids.dtype}"
        )
    if ids.dim() != 2:
        raise ValueError(f"{name} must have shape (batch, length), got {shape(ids)}")
    if ids.numel() and ids.device.type != "meta":
        lo, hi = torch.stack([ids.min(), ids.max()]).tolist()  # one sync, not two
        if lo < 0 or hi >= vocab_size:
            bad = lo if lo < 0 else hi
            raise ValueError(
                f"{name} holds token id {bad}, outside [0, {vocab_size}) "
                f"for a vocabulary of size {vocab_size}"
            )
    return ids
