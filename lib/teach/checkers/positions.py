"""Checkers for chapter 6's coding exercises (the sinusoidal table and rotary embeddings).

Each `check_*` takes the learner's function and returns a `Verdict`: pass, or
the most likely mistake by name. Tests feed each checker the solution and one
wrong version per named mistake (tests/test_checkers_positions.py).

And the numbers and the prediction the chapter asks for on paper:
`check_pe_row` (exercise 3, one row of the table by hand),
`check_shortest_wavelength`, `check_longest_wavelength` and
`check_wavelength_ratio` (exercise 4), and `check_extrapolation_prediction`
against `extrapolation_outcome` (the "predict first" before the experiment past
the training length).
"""

from __future__ import annotations

import math

import torch

from lib.model.layers import sinusoidal_positional_encoding
from lib.teach.checkers._dtypes import with_exact_dtype
from lib.teach.checkers._predictions import prediction_verdict
from lib.teach.checkers._numbers import check_number, real_number, real_vector
from lib.teach.checking import NOT_IMPLEMENTED, Case, Mistake, Verdict, check_function
from lib.teach.exercises import CheckResult, check_answer

__all__ = ["check_sinusoidal_table", "check_apply_rope", "check_pe_row",
           "check_shortest_wavelength", "check_longest_wavelength", "check_wavelength_ratio",
           "extrapolation_outcome", "check_extrapolation_prediction", "EXTRAPOLATION_QUESTIONS"]

# (length, d_model): several widths, never d_model = 2 (one pair hides the layout mistakes).
_TABLE_SIZES = ((5, 4), (12, 8), (30, 6), (50, 16), (3, 64))


def _angles(positions: torch.Tensor, d_model: int, base: float = 10000.0, exponent_scale: float = 2.0):
    """positions / base^(scale·i / d_model) for pair i: (len(positions), d_model/2), float64."""
    i = torch.arange(d_model // 2, dtype=torch.float64)
    return positions.double()[:, None] / base ** (exponent_scale * i / d_model)


def _interleave(sin: torch.Tensor, cos: torch.Tensor) -> torch.Tensor:
    return torch.stack([sin, cos], dim=-1).flatten(-2).float()  # sin, cos, sin, cos, ...


def check_sinusoidal_table(sinusoidal_table) -> Verdict:
    """Chapter 6, exercise: `sinusoidal_table(length, d_model)`, the (length, d_model) float32
    table PE[pos, 2i] = sin(pos / 10000^(2i/d_model)), PE[pos, 2i+1] = cos(same angle)."""
    cases = [Case((length, d_model), label=f"length={length}, d_model={d_model}") for length, d_model in _TABLE_SIZES]

    def concatenated(length, d_model):
        angle = _angles(torch.arange(length), d_model)
        return torch.cat([torch.sin(angle), torch.cos(angle)], dim=-1).float()

    def swapped(length, d_model):
        angle = _angles(torch.arange(length), d_model)
        return _interleave(torch.cos(angle), torch.sin(angle))

    def pair_index_exponent(length, d_model):
        angle = _angles(torch.arange(length), d_model, exponent_scale=1.0)
        return _interleave(torch.sin(angle), torch.cos(angle))

    def base_1000(length, d_model):
        angle = _angles(torch.arange(length), d_model, base=1000.0)
        return _interleave(torch.sin(angle), torch.cos(angle))

    def doubled_two_i(length, d_model):
        angle = _angles(torch.arange(length), d_model, exponent_scale=4.0)
        return _interleave(torch.sin(angle), torch.cos(angle))

    def multiplied(length, d_model):
        i = torch.arange(d_model // 2, dtype=torch.float64)
        angle = torch.arange(length, dtype=torch.float64)[:, None] * 10000.0 ** (2 * i / d_model)
        return _interleave(torch.sin(angle), torch.cos(angle))

    def one_based(length, d_model):
        angle = _angles(torch.arange(1, length + 1), d_model)
        return _interleave(torch.sin(angle), torch.cos(angle))

    mistakes = [
        Mistake(
            "sines and cosines concatenated, not interleaved",
            "The sine of pair i goes to column 2i and its cosine to column 2i+1: "
            "did you put all sines first and all cosines after (torch.cat)? "
            "Fill pe[:, 0::2] and pe[:, 1::2] instead.",
            concatenated,
        ),
        Mistake(
            "sin and cos swapped",
            "Even columns hold sines, odd columns cosines: position 0 must be [0, 1, 0, 1, ...].",
            swapped,
        ),
        Mistake(
            "the exponent uses i where the formula has 2i",
            "With i the pair index the exponent is 2i/d_model, not i/d_model. "
            "torch.arange(0, d_model, 2) gives the values 2i directly.",
            pair_index_exponent,
        ),
        Mistake(
            "the exponent is 2·(2i)/d_model",
            "torch.arange(0, d_model, 2) already gives the values 2i: multiplying it by 2 again "
            "makes the exponent 4i/d_model.",
            doubled_two_i,
        ),
        Mistake(
            "the position multiplied by 10000^(2i/d_model) instead of divided",
            "The angle is pos / 10000^(2i/d_model): the frequencies fall from 1 to about 1/10000. "
            "Did you multiply, or drop the minus sign of 10000^(-2i/d_model)?",
            multiplied,
        ),
        Mistake(
            "base 1000 instead of 10000",
            "The wavelengths run from 2π to about 10000·2π: is your base 10000?",
            base_1000,
        ),
        Mistake(
            "positions counted from 1",
            "The first row is position 0 (all sines 0, all cosines 1): use torch.arange(length).",
            one_based,
        ),
    ]
    verdict = check_function(
        sinusoidal_table, sinusoidal_positional_encoding, cases, mistakes, name="sinusoidal_table"
    )
    return with_exact_dtype(verdict, sinusoidal_table, sinusoidal_positional_encoding, cases,
                            "sinusoidal_table", "return float32, as lib does (.float())")


def _rotate_pairs(x: torch.Tensor, *, first: int = 0, sign: float = 1.0, same_angle: bool = False,
                  exponent_scale: float = 2.0, halves: bool = False,
                  sin_signs: tuple[float, float] = (1.0, -1.0)) -> torch.Tensor:
    """Rotate pair i of the row at position p (axis -2) by sign · p · ω_i, in float64.

    Row-vector form, as in the chapter: [a, b] @ [[cos t, -sin t], [sin t, cos t]]
    = [a cos t + b sin t, -a sin t + b cos t]. ``sign=-1`` is RoFormer's (and
    LLaMA's) convention, [a cos t - b sin t, a sin t + b cos t]: the column-vector
    rotation R_p, the transpose of the chapter's M_p. With ``halves`` the pairs are
    (i, i + d_model/2) instead of (2i, 2i + 1). ``sin_signs`` other than (1, -1)
    give the slips whose two sine terms have the same sign (not a rotation).
    """
    n, d_model = x.shape[-2], x.shape[-1]
    positions = torch.arange(first, first + n, dtype=torch.float64)
    i = torch.arange(d_model // 2, dtype=torch.float64)
    omega = torch.ones_like(i) if same_angle else 10000.0 ** (-exponent_scale * i / d_model)
    t = sign * positions[:, None] * omega  # (n, d_model/2)
    x64 = x.double()
    a, b = (x64[..., : d_model // 2], x64[..., d_model // 2 :]) if halves else (x64[..., 0::2], x64[..., 1::2])
    s_a, s_b = sin_signs
    ra, rb = a * torch.cos(t) + s_a * b * torch.sin(t), s_b * a * torch.sin(t) + b * torch.cos(t)
    out = torch.cat([ra, rb], dim=-1) if halves else torch.stack([ra, rb], dim=-1).flatten(-2)
    return out.to(x.dtype)


def _roformer(x: torch.Tensor) -> torch.Tensor:
    """RoFormer's published rotation (eq. 34), the mirror image of the chapter's."""
    return _rotate_pairs(x, sign=-1.0)


def _rope_cases() -> list[Case]:
    g = torch.Generator().manual_seed(0)
    # (..., n, d_model), heads in the third; float32 and float64 (the result keeps x's dtype)
    shapes = (((6, 4), torch.float32), ((2, 10, 8), torch.float64),
              ((2, 3, 12, 16), torch.float32), ((1, 20, 6), torch.float64))
    return [Case((torch.randn(shape, generator=g, dtype=dtype),),
                 label=f"x {shape}, {str(dtype).replace('torch.', '')}") for shape, dtype in shapes]


_SAME_SIGN_HINT = (
    "Both sine terms carry the same sign, so the 2 × 2 block is not a rotation and lengths "
    "change. A rotation has one + and one -: [a cos θ + b sin θ, -a sin θ + b cos θ] "
    "(this chapter), or the mirror image [a cos θ - b sin θ, a sin θ + b cos θ] (RoFormer)."
)


_PAIRINGS = ("interleaved", "half", "either")


def _pairing_verdict(apply_rope, pairing: str) -> Verdict:
    """`check_apply_rope` for ``pairing="half"`` or ``"either"`` (the pretrained-model
    chapter): which of the four rotations (pairs (2i, 2i+1) or (i, i + d_model/2), either
    sign) `apply_rope` computes, and whether that is the one asked for."""
    cases = _rope_cases()
    found = _which_rotation(apply_rope, cases)
    if found is None:  # not a rotary embedding in either layout: the usual diagnosis
        return check_apply_rope(apply_rope)
    halves, sign = found
    wrong_dtype = with_exact_dtype(Verdict(True, ""), apply_rope,
                                   lambda x: _rotate_pairs(x, halves=halves, sign=sign), cases,
                                   "apply_rope", "return x's dtype (.to(x.dtype))")
    if not wrong_dtype:
        return wrong_dtype
    layout = "(i, i + d_model/2), the half-split layout (Hugging Face's rotate_half)" if halves \
        else "(2i, 2i + 1), the interleaved layout (this course's, and GGUF's)"
    turn = "RoFormer's sign" if sign < 0 else "the chapter's M_p"
    if pairing == "either" or halves == (pairing == "half"):
        return Verdict(True, f"✓ apply_rope rotates the pairs {layout}, with {turn}, on all "
                       f"{len(cases)} test cases.")
    other = "(2i, 2i + 1)" if halves else "(i, i + d_model/2)"
    return Verdict(
        False,
        f"✗ apply_rope rotates the pairs {layout}; this check asks for {other}. Both are "
        "rotary embeddings, but a different function of x: weights laid out for one give wrong "
        "scores with the other, unless the rows of W_Q and W_K are permuted (per head, the "
        "interleaved order takes rows 0, d/2, 1, d/2 + 1, ... of the half-split order).",
        mistake="the other pairing convention",
    )


def _which_rotation(apply_rope, cases: list[Case]) -> tuple[bool, float] | None:
    """(halves, sign) of the rotation `apply_rope` computes on every case, or None: pairs
    (2i, 2i+1) or (i, i + d_model/2), turned with the chapter's M_p (+1) or RoFormer's (-1)."""
    for halves in (False, True):
        for sign in (1.0, -1.0):
            if check_function(apply_rope, lambda x, h=halves, s=sign: _rotate_pairs(x, halves=h, sign=s),
                              cases, name="apply_rope"):
                return halves, sign
    return None


_OTHER_LAYOUT_NOTE = (
    " This chapter pairs (2i, 2i + 1): both layouts are rotary embeddings (scores depend on the "
    "offset only), but they are different functions of x, so weights laid out for one give "
    "wrong scores with the other until the rows of W_Q and W_K are permuted (chapter 15 does "
    "it for a real model). The chapter's cells use (2i, 2i + 1): a row [0, 1, 0, 1, ...] "
    "becomes the sinusoidal table only with that pairing."
)


def check_apply_rope(apply_rope, pairing: str = "interleaved") -> Verdict:
    """Chapter 6, exercise: `apply_rope(x)`, rotary position embedding of x (..., n, d_model):
    the row at position p (0-based, axis -2) is multiplied by M_p, so that pair i
    (dimensions 2i, 2i+1) turns by p · ω_i with ω_i = 10000^(-2i/d_model).

    RoFormer's own formula turns the pairs the other way (its R_p is the transpose
    of M_p, because it multiplies column vectors). Scores then still depend on the
    offset only, so that convention is accepted, with a note saying which it is.
    The result must keep x's dtype (the cases are float32 and float64).

    pairing: "interleaved" (chapter 6: pairs (2i, 2i+1)), "half" (pairs (i, i + d/2),
    Hugging Face's layout) or "either" (both accepted; the message says which one it
    is). With "interleaved", a correct rotation in the half-split layout is accepted too,
    and the verdict names the mismatch with the chapter's pairing (both are rotary
    embeddings; weights laid out for one need a row permutation for the other). With
    "half", a rotation in the interleaved layout fails as "the other pairing convention"
    (the pretrained-model chapter).
    """
    if pairing not in _PAIRINGS:
        raise ValueError(f"pairing: expected one of {_PAIRINGS}, got {pairing!r}")
    if pairing != "interleaved":
        return _pairing_verdict(apply_rope, pairing)
    mistakes = [
        Mistake(
            "the two sine terms have the same sign (not a rotation)",
            _SAME_SIGN_HINT,
            lambda x: _rotate_pairs(x, sin_signs=(-1.0, -1.0)),
        ),
        Mistake(
            "the two sine terms have the same sign (not a rotation)",
            _SAME_SIGN_HINT,
            lambda x: _rotate_pairs(x, sin_signs=(1.0, 1.0)),
        ),
        Mistake(
            "the same angle p for every pair",
            "Pair i turns by ω_i = 10000^(-2i/d_model) per position: its angle is p·ω_i, not p.",
            lambda x: _rotate_pairs(x, same_angle=True),
        ),
        Mistake(
            "positions counted from 1",
            "The first row is position 0 and is not rotated at all: use torch.arange(n).",
            lambda x: _rotate_pairs(x, first=1),
        ),
        Mistake(
            "the exponent uses i where the formula has 2i",
            "ω_i = 10000^(-2i/d_model) with i the pair index (0, 1, ..., d_model/2 - 1).",
            lambda x: _rotate_pairs(x, exponent_scale=1.0),
        ),
    ]
    cases = _rope_cases()
    verdict = check_function(apply_rope, _rotate_pairs, cases, mistakes, name="apply_rope")
    verdict = with_exact_dtype(verdict, apply_rope, _rotate_pairs, cases, "apply_rope",
                               "return x's dtype (.to(x.dtype))")
    if verdict or verdict.mistake is not None or NOT_IMPLEMENTED in verdict.message:
        return verdict
    if check_function(apply_rope, _roformer, cases, name="apply_rope"):
        return Verdict(
            True,
            f"✓ apply_rope matches RoFormer's convention on all {len(cases)} test cases: "
            "[a cos θ - b sin θ, a sin θ + b cos θ], each pair turned by -θ in this "
            "chapter's row-vector form. RoFormer's R_p is the transpose of the chapter's M_p "
            "(it multiplies column vectors); scores depend only on the offset either way. "
            "The chapter's cells use M_p: a row [0, 1, 0, 1, ...] turns into PE[p] with "
            "M_p, and into PE[-p] with yours.",
        )
    found = _which_rotation(apply_rope, cases)
    if found is not None and found[0]:  # the half-split layout: accepted, the mismatch named
        verdict = _pairing_verdict(apply_rope, "either")
        return Verdict(True, verdict.message + _OTHER_LAYOUT_NOTE) if verdict else verdict
    if _right_to_float32_only(apply_rope, cases):
        return Verdict(
            False,
            "✗ apply_rope is right to float32 precision only: on the float64 cases it differs "
            "from the reference by more than float64 rounding. Compute the angles in x's dtype "
            "(torch.arange(n, dtype=x.dtype), or float64), not in torch's default float32.",
            mistake="angles computed in float32",
        )
    return verdict


def _right_to_float32_only(fn, cases: list[Case]) -> bool:
    """True when `fn` agrees with the reference to 1e-5 on every case (so it fails only
    float64's tighter tolerance): the angles were computed in float32."""
    for case in cases:
        try:
            got = fn(*[a.clone() for a in case.args])
        except Exception:  # noqa: BLE001  (the verdict already reports it)
            return False
        want = _rotate_pairs(*case.args)
        if not isinstance(got, torch.Tensor) or got.shape != want.shape or got.dtype != want.dtype:
            return False
        if not torch.allclose(got, want, rtol=1e-5, atol=1e-5):
            return False
    return True


# ---------------------------------------------------------------------------
# On paper: a row of the table, the wavelengths


def _even_width(d_model) -> int:
    d = real_number("d_model", d_model)
    if d != int(d) or d < 2 or int(d) % 2:
        raise ValueError(f"d_model must be an even whole number >= 2, got {d_model}")
    return int(d)


def _pe_row(position: float, d_model: int, rate=lambda i, d: 10000.0 ** (-2 * i / d),
            degrees: bool = False, swapped: bool = False) -> list[float]:
    """[sin, cos] of position · rate(i) for each pair i, written out with math (not lib)."""
    row = []
    for i in range(d_model // 2):
        angle = position * rate(i, d_model)
        angle = math.radians(angle) if degrees else angle
        pair = [math.cos(angle), math.sin(angle)] if swapped else [math.sin(angle), math.cos(angle)]
        row += pair
    return row


def check_pe_row(my_row, position: int = 2, d_model: int = 4) -> CheckResult:
    """Chapter 6, exercise 3: PE(pos, 0 ... d_model-1) by hand, to four decimals.

    PE(pos, 2i) = sin(pos · 10000^(-2i/d_model)), PE(pos, 2i+1) = cos(the same angle).
    """
    d = _even_width(d_model)
    answer = None if my_row is None else real_vector("my_row", my_row, d)
    odd_own = lambda j, dd: 10000.0 ** (-j / dd)  # noqa: E731  each dimension its own index
    odd_row = [math.sin(position * odd_own(j, d)) if j % 2 == 0 else
               math.cos(position * odd_own(j, d)) for j in range(d)]
    return check_answer(answer, _pe_row(position, d), atol=1e-3, what="row of PE", slips={
        "sin and cos swapped": (
            _pe_row(position, d, swapped=True),
            "Even dimensions (0, 2, ...) take the sine, odd ones the cosine."),
        "the angle read in degrees": (
            _pe_row(position, d, degrees=True), "The angle is in radians: sin(2), not sin(2°)."),
        "the pair index i in the exponent, not 2i": (
            _pe_row(position, d, rate=lambda i, dd: 10000.0 ** (-i / dd)),
            "The exponent is 2i / d_model for pair i: what is it for dimensions 2 and 3?"),
        "each dimension's own index in the exponent": (
            odd_row,
            "Dimensions 2i and 2i + 1 share one angle: is the cosine's angle the sine's?"),
    })


def check_shortest_wavelength(my_wavelength, d_model: int = 64) -> CheckResult:
    """Chapter 6, exercise 4: the shortest wavelength, 2π (pair 0, ω_0 = 1)."""
    _even_width(d_model)
    return check_number(my_wavelength, 2 * math.pi, atol=5e-3, what="shortest wavelength",
                        name="my_wavelength", slips={
        "the frequency ω_0, not the wavelength": (
            1.0, "A wavelength is the distance 2π / ω over which the sine repeats."),
        "half a period, π": (math.pi, "sin repeats after 2π, not π."),
    })


def check_longest_wavelength(my_wavelength, d_model: int = 64) -> CheckResult:
    """Chapter 6, exercise 4: the longest wavelength, 2π · 10000^((d_model - 2)/d_model)."""
    d = _even_width(d_model)
    exact = 2 * math.pi * 10000 ** ((d - 2) / d)
    return check_number(my_wavelength, exact, atol=1.0, what="longest wavelength",
                        name="my_wavelength", slips={
        "2π · 10000: a pair d_model/2 that does not exist": (
            2 * math.pi * 10000, "The last pair is i = d_model/2 - 1: what is its 2i / d_model?"),
        "2π left out": (10000 ** ((d - 2) / d), "A wavelength is 2π / ω."),
    })


def check_wavelength_ratio(my_ratio, d_model: int = 64) -> CheckResult:
    """Chapter 6, exercise 4: the ratio of neighbouring wavelengths, 10000^(2/d_model)."""
    d = _even_width(d_model)
    exact = 10000 ** (2 / d)
    return check_number(my_ratio, exact, atol=5e-4, what="ratio of neighbouring wavelengths",
                        name="my_ratio", slips={
        "10000^(1/d_model): one dimension, not one pair": (
            10000 ** (1 / d), "Neighbouring wavelengths belong to pairs i and i + 1."),
        "the frequencies' ratio (upside down)": (
            1 / exact, "The longer wavelength over the shorter is above 1."),
    })


# ---------------------------------------------------------------------------
# Predict first: the models past the training length

EXTRAPOLATION_QUESTIONS = {
    "better at position 16": ("sinusoidal", "learned"),
    "gets the rule right past 15": ("sinusoidal", "learned", "both", "neither"),
    "predicts instead": ("random tokens", "tokens of the pattern"),
}


def extrapolation_outcome(runs: dict, right_above: float = 0.9) -> dict:
    """What the runs of chapter 6's experiment did, as answers to `EXTRAPOLATION_QUESTIONS`.

    ``runs``: {(positional, seed): PatternRun} for "sinusoidal" and "learned" on the
    same seeds. An answer holds on every seed, or the question's answer is
    "mixed": better at position 16 (``correct[15]``); the rule right past 15
    (accuracy over positions 16 on above ``right_above``); what the predictions
    past 15 are (more than half, or at most half, tokens of the pattern).
    """
    if not isinstance(runs, dict) or not runs:
        raise TypeError("runs must be a dict {(positional, seed): PatternRun}")
    seeds = sorted({seed for _, seed in runs})
    if set(runs) != {(p, s) for p in ("sinusoidal", "learned") for s in seeds}:
        raise ValueError("runs must hold 'sinusoidal' and 'learned' for the same seeds")

    def every(test) -> bool:
        return all(test(seed) for seed in seeds)

    at16 = {key: float(run.correct[15]) for key, run in runs.items()}
    if every(lambda s: at16["learned", s] > at16["sinusoidal", s]):
        better = "learned"
    elif every(lambda s: at16["sinusoidal", s] > at16["learned", s]):
        better = "sinusoidal"
    else:
        better = "mixed"
    right = [p for p in ("sinusoidal", "learned")
             if every(lambda s: runs[p, s].accuracy(16) > right_above)]
    rule = {0: "neither", 2: "both"}.get(len(right), right[0] if right else "neither")
    shares = [run.in_pattern_share() for run in runs.values()]
    instead = ("tokens of the pattern" if min(shares) > 0.5 else
               "random tokens" if max(shares) <= 0.5 else "mixed")
    return {"better at position 16": better, "gets the rule right past 15": rule,
            "predicts instead": instead}


def check_extrapolation_prediction(my_prediction: dict, outcome: dict) -> Verdict:
    """Chapter 6, prediction: the learner's answers to `EXTRAPOLATION_QUESTIONS`, against
    what the runs did (`extrapolation_outcome`)."""
    if not isinstance(my_prediction, dict):
        raise TypeError(f"my_prediction must be a dict, got {type(my_prediction).__name__}")
    if set(my_prediction) != set(EXTRAPOLATION_QUESTIONS):
        raise ValueError(f"my_prediction must have the keys {list(EXTRAPOLATION_QUESTIONS)}")
    missing = [q for q, options in EXTRAPOLATION_QUESTIONS.items()
               if my_prediction[q] not in options]
    if missing:
        return Verdict(False, "✗ prediction: not filled in yet. Answer "
                       + "; ".join(f"{q!r} with one of {EXTRAPOLATION_QUESTIONS[q]}"
                                   for q in missing) + ".")
    return prediction_verdict(my_prediction, outcome, EXTRAPOLATION_QUESTIONS, 28, 22)
