"""An optional native decoding step for SmolLM2-like decoders (chapter 17: what one token costs).

At batch 1 a decoding step reads every weight once. On this course's 2-core machine the
four matrix-vector products of each block read the weights at about 0.8 of the
machine's measured read bandwidth; what keeps a token's time far above the bound is
everything between them: about 35 small tensor operations a block (RMSNorm, rotary, the
cache write, the attention of one query, SiLU * up, residual adds), each costing a few
microseconds of Python and PyTorch dispatch for a few hundred floats of arithmetic.
`native_decoding` compiles `native_step.cpp` (a C++ extension, built once with the
machine's C++ compiler through ``torch.utils.cpp_extension``, about a minute, then
cached) and makes a `lib.LlamaDecoder`'s batch-1 steps run every block in one call:
the same `torch.bmm` products, with the small operations as plain loops.

It is off unless asked for, because it needs a compiler and because its numbers agree
with the Python step to float32 rounding, not bit for bit (the sums of RMSNorm and of
the attention run in another order): greedy text can differ where two logits tie within
that rounding. Anything it does not compute (a hook, a replaced module, a bias, a
cache the step cannot extend in place, a dtype other than float32, a device other than
the CPU, gradients on) sends the step back to the Python path. Measured in
bench/smollm2_formats.py.
"""

from __future__ import annotations

from pathlib import Path

import torch

__all__ = ["native_decoding", "native_available"]

_SOURCE = Path(__file__).with_name("native_step.cpp")
_FLAGS = ["-O3", "-ffp-contract=off", "-fopenmp-simd"]
_module = None
_error: str | None = None


def _load():
    """The compiled extension, built on first use (cached by torch.utils.cpp_extension
    under TORCH_EXTENSIONS_DIR, default ~/.cache/torch_extensions), or None with the
    reason kept in ``_error``."""
    global _module, _error
    if _module is None and _error is None:
        try:
            from torch.utils import cpp_extension

            _module = cpp_extension.load(name="lib_native_step", sources=[str(_SOURCE)],
                                         extra_cflags=_FLAGS, verbose=False)
        except Exception as exc:  # no compiler, no ninja, a failed build: say which
            _error = f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1] if str(exc).strip() else ''}"
    return _module


def native_available() -> bool:
    """Can the native step be built here (compiling it on first call)?"""
    return _load() is not None


def native_decoding(model, on: bool = True):
    """Let `model` (a `lib.LlamaDecoder` with fused projections, as `lib.load_smollm2`
    returns it) run its batch-1 decoding steps through the native step (``on=True``), or
    stop (``on=False``). Raises RuntimeError, naming why, if the step cannot be built on
    this machine. Returns the model."""
    from lib.model.llama import LlamaDecoder

    if not isinstance(model, LlamaDecoder):
        raise TypeError(f"model: expected a lib.LlamaDecoder, got {type(model).__name__}")
    if not isinstance(on, bool):
        raise TypeError(f"on: expected True or False, got {on!r}")
    if on and _load() is None:
        raise RuntimeError(f"the native decoding step could not be built here ({_error}); "
                           "it needs a C++ compiler and ninja (pip install ninja)")
    model.__dict__["_native"] = on  # a flag, not the module: the model still deep-copies
    return model


def _step(module, plan, x: torch.Tensor, cache) -> torch.Tensor | None:
    """`plan`'s step (lib.model.llama._TokenPlan) through the native module, or None
    when this step cannot take it (then the Python plan runs it)."""
    if (torch.is_grad_enabled() or x.dtype != torch.float32 or x.device.type != "cpu"
            or not x.is_contiguous()):
        return None  # (the compiled step is for float32 on the CPU, without gradients)
    flat = plan.native_weights()
    if flat is None:
        return None
    caches = cache.self_attn
    keys, values = [], []
    t = caches[0].length
    for c in caches:
        room = c.room(1)
        if room is None or c.length != t or room[0].shape[0] != 1:
            return None
        keys.append(room[0])
        values.append(room[1])
    attn = plan.attns[0]
    cos, sin = attn.rope_table.pairs(t, attn.pairing, torch.float32, x.device)
    H, G, D, d_ff, eps = plan.shapes
    out = module.decode_step(x.reshape(-1), flat, keys, values, t, cos.reshape(-1),
                             sin.reshape(-1), H, G, D, d_ff, eps, attn.pairing == "interleaved")
    for c in caches:
        c.advance(1)
    return out.view(x.shape)

