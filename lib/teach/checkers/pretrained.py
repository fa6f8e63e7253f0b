"""Checkers for the chapter "A real pretrained model": the learner's Q8_0 and Q4_1
block dequantizers.

Each takes a uint8 array of blocks (n_blocks, bytes per block), read-only like the
memory-mapped file, and returns float32 weights (n_blocks, 32). The checker

1. runs it on small seeded blocks (zero and subnormal scales, the int8 extremes,
   every four-bit value) and names the likely mistake when it differs from
   `lib.interop.gguf` ("forgot the minimum", "nibble order", a float16 scale...);
2. demands float32 exactly and the same bits as the reference (a dequantizer is
   exact arithmetic on float16 and small integers: there is nothing to round
   differently);
3. compares it bit for bit with the `gguf` package's ``gguf.quants.dequantize``
   (MIT; independent of `lib`) on every tensor of that type in SmolLM2's file.

Tests: tests/test_checkers_pretrained.py (the solution passes, each named mistake
is named).
"""

from __future__ import annotations

import functools

import numpy as np
import torch

from lib.interop.gguf import dequantize_q4_1 as _q4_1_reference
from lib.interop.gguf import dequantize_q8_0 as _q8_0_reference
from lib.teach.checking import Case, Mistake, Verdict, check_function

__all__ = ["check_dequantize_q8_0", "check_dequantize_q4_1"]


def _f16_bytes(values: np.ndarray) -> np.ndarray:
    return values.astype(np.float16).reshape(-1, 1).view(np.uint8)  # (n, 2)


def _scales(rng: np.random.Generator, n: int, low: float, high: float) -> np.ndarray:
    d = rng.uniform(low, high, n)
    d[0] = 0.0
    if n > 1:
        d[1] = 3e-6  # a float16 subnormal
    return d


def _q8_0_cases() -> list[Case]:
    rng = np.random.default_rng(0)
    cases = []
    for n in (1, 3, 17):
        d = _scales(rng, n, -0.05, 0.05)
        q = rng.integers(-128, 128, (n, 32)).astype(np.int8)
        q[0, :2] = (-128, 127)
        blocks = np.concatenate([_f16_bytes(d), q.view(np.uint8)], axis=1)
        blocks.setflags(write=False)  # like the memory-mapped file
        cases.append(Case((blocks,), label=f"{n} Q8_0 block{'s' * (n > 1)}"))
    return cases


def _q4_1_cases() -> list[Case]:
    rng = np.random.default_rng(1)
    cases = []
    for n in (1, 3, 17):
        d, m = _scales(rng, n, 0.001, 0.02), rng.uniform(-0.2, 0.0, n)
        q = rng.integers(0, 16, (n, 32)).astype(np.uint8)
        q[0, :16] = np.arange(16)  # every four-bit value
        packed = q[:, :16] | (q[:, 16:] << 4)
        blocks = np.concatenate([_f16_bytes(d), _f16_bytes(m), packed], axis=1)
        blocks.setflags(write=False)
        cases.append(Case((blocks,), label=f"{n} Q4_1 block{'s' * (n > 1)}"))
    return cases


def _half(blocks: np.ndarray, start: int) -> np.ndarray:
    return np.ascontiguousarray(blocks[:, start:start + 2]).view(np.float16)  # (n, 1)


def _q8(blocks, *, unsigned=False, f16=False, big_endian=False):
    raw = np.ascontiguousarray(blocks[:, :2])
    d = (raw[:, ::-1].copy() if big_endian else raw).view(np.float16)
    q = np.ascontiguousarray(blocks[:, 2:]).view(np.uint8 if unsigned else np.int8)
    if f16:
        return (d * q.astype(np.float16)).astype(np.float32)
    return d.astype(np.float32) * q.astype(np.float32)


def _nibbles(packed: np.ndarray, order: str) -> np.ndarray:
    low, high = packed & 0x0F, packed >> 4
    if order == "interleaved":  # byte j -> weights 2j, 2j + 1
        return np.stack([low, high], axis=-1).reshape(len(packed), 32)
    if order == "high first":
        return np.concatenate([high, low], axis=1)
    return np.concatenate([low, high], axis=1)


def _q4(blocks, *, order="low first", minimum=1.0, swap=False, f16=False, centred=False):
    d, m = _half(blocks, 0), _half(blocks, 2)
    if swap:
        d, m = m, d
    q = _nibbles(blocks[:, 4:], order)
    if centred:
        q = q.astype(np.int16) - 8
    if f16:
        return (d * q.astype(np.float16) + np.float16(minimum) * m).astype(np.float32)
    return d.astype(np.float32) * q.astype(np.float32) + np.float32(minimum) * m.astype(np.float32)


def _as_torch(fn):
    """`fn` with its numpy result turned into a tensor (same dtype), for `check_function`."""
    def wrapped(blocks):
        out = fn(blocks)
        return torch.from_numpy(np.array(out)) if isinstance(out, np.ndarray) else out
    return wrapped


_F16_HINT = ("The scale is stored as float16, but the product must be computed in float32, as "
             "llama.cpp does: convert d (and m) with .astype(np.float32) before multiplying.")

_Q8_0_MISTAKES = [
    Mistake("values read as unsigned bytes",
            "Bytes 2-33 are int8 (-128..127): view them with .view(np.int8) before converting; "
            "as uint8, every negative weight becomes a large positive one.",
            lambda b: _q8(b, unsigned=True)),
    Mistake("the scale kept in float16", _F16_HINT, lambda b: _q8(b, f16=True)),
    Mistake("the scale's bytes read big-endian",
            "GGUF is little-endian: bytes 0-1 are the float16 scale as .view(np.float16) reads "
            "them, without reversing.",
            lambda b: _q8(b, big_endian=True)),
]

_Q4_1_MISTAKES = [
    Mistake("forgot the minimum",
            "Q4_1 stores a minimum m (bytes 2-3) besides the scale: w = d·q + m. Without m every "
            "weight of a block is shifted.",
            lambda b: _q4(b, minimum=0.0)),
    Mistake("the minimum subtracted",
            "w = d·q + m: m is the block's smallest weight (usually negative), added, not "
            "subtracted.",
            lambda b: _q4(b, minimum=-1.0)),
    Mistake("nibble order",
            "Byte j holds weight j in its low four bits and weight j + 16 in its high four: "
            "all 16 low nibbles first, then the 16 high ones, not (low, high) byte by byte.",
            lambda b: _q4(b, order="interleaved")),
    Mistake("nibble order",
            "Byte j holds weight j in its LOW four bits (packed & 0x0F) and weight j + 16 in its "
            "high four (packed >> 4): low nibbles first.",
            lambda b: _q4(b, order="high first")),
    Mistake("scale and minimum swapped",
            "Bytes 0-1 are the scale d, bytes 2-3 the minimum m.",
            lambda b: _q4(b, swap=True)),
    Mistake("centred like Q4_0",
            "Q4_0 subtracts 8 from each value; Q4_1 does not, it adds the minimum m instead: "
            "w = d·q + m with q in 0..15.",
            lambda b: _q4(b, centred=True)),
    Mistake("the scale kept in float16", _F16_HINT, lambda b: _q4(b, f16=True)),
]


def _contract(fn, cases: list[Case], name: str, width: int) -> Verdict | None:
    """Beyond values: a numpy float32 array (n_blocks, 32), never NaN where the reference has
    a number, and the same bits as the reference."""
    reference = _q8_0_reference if width == 34 else _q4_1_reference
    for case in cases:
        blocks = case.args[0]
        got, want = fn(blocks), reference(blocks)
        if not isinstance(got, np.ndarray):
            return Verdict(False, f"✗ {name} returned a {type(got).__name__}; return a numpy "
                           "array, as lib.dequantize does.", mistake="not a numpy array")
        if got.dtype != np.float32:
            return Verdict(False, f"✗ {name} returned dtype {got.dtype} ({case.label}); expected "
                           "float32 exactly, as llama.cpp and gguf do: .astype(np.float32).",
                           mistake="a result of another dtype")
        if got.shape != want.shape:
            return Verdict(False, f"✗ {name} returned shape {got.shape} ({case.label}); expected "
                           f"{want.shape}: one row of 32 weights per block.",
                           mistake="wrong shape")
        if not np.array_equal(got.view(np.uint32), want.view(np.uint32)):
            bad = int((got.view(np.uint32) != want.view(np.uint32)).sum())
            return Verdict(False, f"✗ {name} is close but not bit-exact ({case.label}): {bad} "
                           "weights differ in their last bits. Compute d·q (+ m) in float32, "
                           "in that order, with nothing else in between.",
                           mistake="not bit-exact")
    return None


@functools.lru_cache(maxsize=2)
def _readers(path):
    """The file parsed twice: by `gguf` (the reference) and by `lib` (for the blocks)."""
    import gguf  # the independent reference (MIT)

    from lib.interop.gguf import read_gguf

    return gguf.GGUFReader(path), read_gguf(path)


def _against_file(fn, name: str, type_name: str, path) -> tuple[Verdict | None, int, int]:
    """Compare with gguf.quants on every tensor of `type_name` in the file."""
    import gguf

    from lib.interop.gguf import smollm2_path

    reader, mine = _readers(str(path if path is not None else smollm2_path()))
    n_tensors = n_blocks = 0
    for tensor in reader.tensors:
        if tensor.tensor_type.name != type_name:
            continue
        blocks = mine.tensors[tensor.name].blocks()
        got = np.asarray(fn(blocks))
        want = gguf.quants.dequantize(tensor.data, tensor.tensor_type).reshape(got.shape)
        if got.dtype != np.float32 or not np.array_equal(got.view(np.uint32), want.view(np.uint32)):
            return (Verdict(False, f"✗ {name} passes the small cases but differs from gguf's "
                            f"dequantizer on the file's tensor {tensor.name} "
                            f"({len(blocks):,} blocks).", mistake="differs on the file"),
                    n_tensors, n_blocks)
        n_tensors, n_blocks = n_tensors + 1, n_blocks + len(blocks)
    return None, n_tensors, n_blocks


def _check(fn, name: str, cases, mistakes, reference, width: int, type_name: str,
           on_file: bool, path) -> Verdict:
    mistakes = [Mistake(m.name, m.hint, _as_torch(m.fn)) for m in mistakes]
    verdict = check_function(_as_torch(fn), _as_torch(reference), cases, mistakes, name=name)
    if not verdict:
        return verdict
    wrong = _contract(fn, cases, name, width)
    if wrong is not None:
        return wrong
    if not on_file:
        return Verdict(True, f"✓ {name} equals lib's dequantizer bit for bit on all "
                       f"{len(cases)} test cases.")
    wrong, n_tensors, n_blocks = _against_file(fn, name, type_name, path)
    if wrong is not None:
        return wrong
    return Verdict(True, f"✓ {name} equals gguf's dequantizer bit for bit on every {type_name} "
                   f"tensor of the file ({n_tensors} tensors, {n_blocks:,} blocks) and on "
                   f"{len(cases)} small test cases.")


def check_dequantize_q8_0(dequantize_q8_0, on_file: bool = True, path=None) -> Verdict:
    """The chapter's exercise: `dequantize_q8_0(blocks)`, uint8 (n_blocks, 34) to float32
    (n_blocks, 32): w = d·q with d the float16 scale (bytes 0-1), q int8 (bytes 2-33).
    With `on_file`, also every Q8_0 tensor of SmolLM2's file against ``gguf``.

    Input classes that separate right from plausible-wrong code, each in the cases
    (1, 3 and 17 read-only blocks): a zero scale and a float16 subnormal scale (a
    scale value-converted or read from other bytes); the int8 extremes -128 and 127
    (values read unsigned, or one byte off); negative and positive scales (a
    big-endian scale); several blocks (the scale broadcast on the wrong axis, a
    flattened result); the result's dtype float32 exactly (float16/float64 refused)
    and shape (n_blocks, 32). Bit-for-bit comparison catches a float16 product.
    tests/test_checkers_catalogue_15_16.py feeds it 11 wrong solutions."""
    return _check(dequantize_q8_0, "dequantize_q8_0", _q8_0_cases(), _Q8_0_MISTAKES,
                  _q8_0_reference, 34, "Q8_0", on_file, path)


def check_dequantize_q4_1(dequantize_q4_1, on_file: bool = True, path=None) -> Verdict:
    """The chapter's exercise: `dequantize_q4_1(blocks)`, uint8 (n_blocks, 20) to float32
    (n_blocks, 32): w = d·q + m, d and m float16 (bytes 0-1, 2-3), q four bits (bytes 4-19,
    low nibbles = weights 0-15, high nibbles = weights 16-31). With `on_file`, also every
    Q4_1 tensor of SmolLM2's file against ``gguf``.

    Input classes, each in the cases (1, 3 and 17 read-only blocks): all sixteen
    four-bit values in one block, so that every nibble matters (nibble order, low
    nibbles twice, values centred like Q4_0, bytes signed before shifting); a zero
    and a subnormal scale beside negative minimums (minimum forgotten, subtracted,
    inside the product, swapped with the scale); bit-for-bit float32 (arithmetic in
    float16); dtype and shape exact. tests/test_checkers_catalogue_15_16.py feeds it
    11 wrong solutions."""
    return _check(dequantize_q4_1, "dequantize_q4_1", _q4_1_cases(), _Q4_1_MISTAKES,
                  _q4_1_reference, 20, "Q4_1", on_file, path)


def _weights(rows: int, cols: int) -> int:
    if any(not isinstance(x, int) or isinstance(x, bool) or x <= 0 or x % 32 for x in (cols,)) \
            or not isinstance(rows, int) or isinstance(rows, bool) or rows <= 0:
        raise ValueError(f"rows must be a positive integer and cols a positive multiple of 32, "
                         f"got {rows!r} and {cols!r}")
    return rows * cols


def _not_answered(name: str) -> Verdict:
    """The neutral verdict on the placeholder None: nothing right or wrong shown yet."""
    return Verdict(False, f"No answer yet: replace None in {name} with yours and run the cell.",
                   mistake="no answer yet")


def check_q4_1_bytes(my_q4_bytes, rows: int = 1536, cols: int = 576):
    """Chapter 15, exercise 3: Q4_1's bytes for a rows × cols matrix, 20 bytes per 32 weights
    (a float16 scale, a float16 minimum, 16 bytes of 4-bit values). None: no answer yet."""
    from lib.teach.checkers._numbers import check_number

    if my_q4_bytes is None:
        return _not_answered("my_q4_bytes")
    blocks = _weights(rows, cols) // 32
    return check_number(my_q4_bytes, 20 * blocks, atol=0.5, what="size in Q4_1, in bytes",
                        name="my_q4_bytes", slips={
        "4 bits exactly: the scale and minimum left out": (
            16 * blocks, "Each block of 32 also stores its own d and m."),
        "the scale only, no minimum": (18 * blocks, "Q4_1 stores w = d·q + m: two numbers."),
        "a float32 scale and minimum": (24 * blocks, "d and m are float16 in the file."),
        "bits, not bytes": (160 * blocks, "A byte is 8 bits."),
    })


def check_q4_1_bits(my_q4_bits):
    """Chapter 15, exercise 3: Q4_1's bits per weight, 20 · 8 / 32 = 5. None: no answer yet."""
    from lib.teach.checkers._numbers import check_number

    if my_q4_bits is None:
        return _not_answered("my_q4_bits")
    return check_number(my_q4_bits, 5.0, atol=1e-3, what="number of bits per weight in Q4_1",
                        name="my_q4_bits", slips={
        "4 bits exactly: the scale and minimum left out": (
            4.0, "Each block of 32 also stores its own d and m."),
        "the scale only, no minimum": (4.5, "Q4_1 stores w = d·q + m: two numbers."),
        "a float32 scale and minimum": (6.0, "d and m are float16 in the file."),
        "Q8_0's bits": (8.5, "Q8_0 is the embedding's format; ffn_up is Q4_1."),
    })


def check_f32_bytes(my_f32_bytes, rows: int = 1536, cols: int = 576):
    """Chapter 15, exercise 3: the same matrix in float32, 4 bytes a weight. None: no
    answer yet."""
    from lib.teach.checkers._numbers import check_number

    if my_f32_bytes is None:
        return _not_answered("my_f32_bytes")
    n = _weights(rows, cols)
    return check_number(my_f32_bytes, 4 * n, atol=0.5, what="size in float32, in bytes",
                        name="my_f32_bytes", slips={
        "bits, not bytes": (32 * n, "A byte is 8 bits."),
        "float16's 2 bytes": (2 * n, "float32 takes 4 bytes a number."),
        "one byte a weight": (n, "float32 takes 4 bytes a number."),
    })


__all__ += ["check_q4_1_bytes", "check_q4_1_bits", "check_f32_bytes"]


# ------------------------------------------- the prediction prompt on the rotary pairing

ROPE_PAIRING_CHOICES = {
    "a": "the same logits: the pairing is a choice of the code, the weights do not care",
    "b": "differences of float rounding (about 1e-4), the same predicted token everywhere",
    "c": "a small shift: logits move by less than 1, the predicted token stays the same "
         "at almost every position",
    "d": "another model: logits move by more than 1 and the predicted token changes at "
         "many positions",
}
"""The options of chapter 15's "Predict first" prompt: `lib` keeps the GGUF file's rows of
W_Q and W_K (laid out for the interleaved pairs) but rotates with Hugging Face's
half-split pairing. The chapter measures the answer on three prompts."""

_ROPE_PAIRING_SLIPS = {
    "a": ("the pairing taken for a convention of the code alone",
          "The rows of W_Q and W_K were trained for one pairing. Rotating features i and "
          "i + 32 together, where the file has 2i and 2i + 1, turns features of two "
          "different pairs into each other: every score between two different positions changes."),
    "b": ("a rounding effect",
          "Rounding differences come from adding the same numbers in another order. Here "
          "other numbers are rotated together, by other angles: the function itself changes."),
    "c": ("a small perturbation",
          "The wrong pairing is not a small error on a few features: it mixes features of "
          "different pairs in every query and key head of all 30 layers, and each layer "
          "reads the output of the one before."),
}


def check_rope_pairing_prediction(my_pairing_prediction) -> Verdict:
    """Chapter 15, "Predict first": one letter of `ROPE_PAIRING_CHOICES`. Right for "d"
    (the chapter measures a logit difference above 1 and changed predictions); for
    each other letter the slip it stands for, by name. None (the placeholder the
    chapter stores) is no prediction yet: a neutral reminder that gives nothing away."""
    if my_pairing_prediction is None:
        return Verdict(False, "No prediction yet: replace None with one letter, 'a' to 'd', "
                       "and run the cell.", mistake="no prediction yet")
    if not isinstance(my_pairing_prediction, str):
        raise TypeError(f"my_pairing_prediction must be one letter, 'a' to 'd', got "
                        f"{type(my_pairing_prediction).__name__} {my_pairing_prediction!r}")
    letter = my_pairing_prediction.strip().strip("()").lower()
    if letter not in ROPE_PAIRING_CHOICES:
        return Verdict(False, f"✗ my_pairing_prediction must be one of 'a', 'b', 'c', 'd', "
                       f"got {my_pairing_prediction!r}.", mistake="not one of the options")
    if letter == "d":
        return Verdict(True, f"✓ Right: ({letter}) {ROPE_PAIRING_CHOICES[letter]}. The next "
                       "cells measure it.")
    slip, hint = _ROPE_PAIRING_SLIPS[letter]
    return Verdict(False, f"✗ Not ({letter}) {ROPE_PAIRING_CHOICES[letter]}: a classic slip, "
                   f"{slip}. {hint}", mistake=slip)


__all__ += ["ROPE_PAIRING_CHOICES", "check_rope_pairing_prediction"]
