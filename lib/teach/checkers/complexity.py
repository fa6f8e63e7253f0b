"""Checkers for chapter 9's coding exercises (why self-attention; see lib.teach.checking).

- `check_self_attention_macs`: the multiply-adds of one self-attention layer,
  against PyTorch's FLOP counter run on `lib.MultiHeadAttention`;
- `check_max_path_length`: the paper's Table 1 path lengths, against a brute
  force on real layers (`lib.depends_on` on stacks from `lib.conv_stack`).

And the numbers of the exercises by hand: `check_window_macs` and
`check_window_layers` (restricted self-attention), `check_birnn_path` and
`check_birnn_steps` (a bidirectional RNN).

Tests feed each checker the solution and one wrong version per named mistake
(tests/test_checkers_complexity.py).
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from lib.model.attention import MultiHeadAttention
from lib.teach.checkers._numbers import check_number, real_number
from lib.teach.checking import Case, Mistake, Verdict, check_function
from lib.teach.complexity import conv_stack, depends_on
from lib.teach.exercises import CheckResult

__all__ = ["check_self_attention_macs", "check_max_path_length", "check_window_macs",
           "check_window_layers", "check_birnn_path", "check_birnn_steps"]


# ---------------------------------------------------------------------------
# Exercise 4: the multiply-adds of one self-attention layer
# ---------------------------------------------------------------------------


def _counted_attention_macs(n: int, d_model: int) -> int:
    """Multiply-adds PyTorch's FLOP counter sees in one `lib.MultiHeadAttention` call."""
    n_heads = 2 if d_model % 2 == 0 else 1
    layer = MultiHeadAttention(d_model, n_heads).eval()
    x = torch.zeros(1, n, d_model)
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        layer(x, x, x)
    return counter.get_total_flops() // 2  # the counter counts a multiply-add as 2 FLOPs


def _macs_cases() -> list[Case]:
    g = torch.Generator().manual_seed(9)
    cases = [Case((40, 512), label="n = 40, d_model = 512")]
    for _ in range(5):
        n = int(torch.randint(2, 200, (1,), generator=g))
        d_model = 2 * int(torch.randint(2, 64, (1,), generator=g))
        cases.append(Case((n, d_model), label=f"n = {n}, d_model = {d_model}"))
    cases.append(Case((7, 9), label="n = 7, d_model = 9 (odd)"))
    return cases


def check_self_attention_macs(self_attention_macs) -> Verdict:
    """Chapter 9, exercise 4: `self_attention_macs(n, d_model)`, an int, projections included.

    Input classes that separate right from plausible-wrong code, each in the cases:
    n < d_model and n > d_model (n and d exchanged in one term), n and d_model both
    varied over random draws (a constant or a term in n or d alone), an odd d_model
    (an assumed head count dividing it), and an exact int compared exactly (a float,
    or a count off by the n·d bias additions or the n² exponentials).
    """
    mistakes = [
        Mistake(
            "the projections are forgotten (only 2n²d)",
            "Q, K and V are not the input: each is x W, an (n × d) by (d × d) product. "
            "Did you count W^Q, W^K, W^V and W^O, n·d² each?",
            lambda n, d: 2 * n * n * d,
        ),
        Mistake(
            "only one of QKᵀ and αV is counted (n²d instead of 2n²d)",
            "There are two n × n products: the scores S = QKᵀ and the weighted sum αV. "
            "Did you count both, n²·d each?",
            lambda n, d: n * n * d + 4 * n * d * d,
        ),
        Mistake(
            "W^O is forgotten (3nd² instead of 4nd²)",
            "After the heads are concatenated, W^O mixes them: one more n·d² product. "
            "Did you count four projections?",
            lambda n, d: 2 * n * n * d + 3 * n * d * d,
        ),
        Mistake(
            "FLOPs, not multiply-adds (twice the answer)",
            "A FLOP counter counts a multiply and an add as 2; the exercise asks for "
            "multiply-adds. Did you double the count?",
            lambda n, d: 2 * (2 * n * n * d + 4 * n * d * d),
        ),
    ]
    return check_function(
        self_attention_macs, _counted_attention_macs, _macs_cases(), mistakes,
        name="self_attention_macs",
    )


# ---------------------------------------------------------------------------
# Exercise 5: maximum path lengths (Table 1)
# ---------------------------------------------------------------------------

LAYERS = ("self-attention", "recurrent", "convolution", "dilated")


def _connects(f, n: int, width: int = 2) -> bool:
    """Does output n-1 of f depend on input 0? (float64, fixed random input)"""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(1, n, width, generator=g, dtype=torch.float64)
    return depends_on(f, x, n - 1, 0)


def _brute_force_path_length(layer: str, n: int, k: int) -> int:
    """Layers (or recurrence steps) from input 0 to output n-1, found by trying.

    Convolutions: stack causal layers of width k (`conv_stack`) until output
    n-1 depends on input 0. Self-attention: the same with attention layers.
    Recurrence: unroll a GRU cell one position at a time and count the steps
    between the first state that depends on x_0 and the state at position n-1.
    """
    torch.manual_seed(0)
    width = 2
    if layer in ("convolution", "dilated"):
        for n_layers in range(1, 4 * n):
            stack = conv_stack(width, n_layers, k, dilated=layer == "dilated").double()
            if _connects(lambda t: stack(t.transpose(1, 2)).transpose(1, 2), n):
                return n_layers
    if layer == "self-attention":
        layers: list[nn.Module] = []
        for n_layers in range(1, 4 * n):
            layers.append(MultiHeadAttention(width, 1).eval().double())

            def stack(t, layers=tuple(layers)):
                for attention in layers:
                    t = attention(t, t, t)
                return t

            if _connects(stack, n):
                return n_layers
    if layer == "recurrent":
        cell = nn.GRUCell(width, width).double()

        def states(t):  # (1, n, width) -> every state h_0 ... h_{n-1}, (1, n, width)
            h, out = torch.zeros(1, width, dtype=t.dtype), []
            for i in range(t.shape[1]):
                h = cell(t[:, i], h)
                out.append(h)
            return torch.stack(out, dim=1)

        g = torch.Generator().manual_seed(0)
        x = torch.randn(1, n, width, generator=g, dtype=torch.float64)
        first = next(i for i in range(n) if depends_on(states, x, i, 0))
        return (n - 1) - first  # one application of the recurrence per step
    raise ValueError(f"layer must be one of {LAYERS}, got {layer!r}")


def _path_cases() -> list[Case]:
    triples = [
        ("self-attention", 12, 3),
        ("self-attention", 40, 5),
        ("recurrent", 12, 3),
        ("recurrent", 40, 5),
        ("convolution", 12, 3),
        ("convolution", 17, 5),
        ("convolution", 30, 4),
        ("convolution", 21, 3),
        ("convolution", 11, 4),  # (n - 1)/(k - 1) = 3.33: rounding to nearest gives 3, not 4
        ("convolution", 14, 5),  # 3.25
        ("dilated", 9, 3),
        ("dilated", 10, 3),
        ("dilated", 64, 4),
        ("dilated", 125, 5),
        ("dilated", 20, 2),
    ]
    return [Case(t, label=f"{t[0]}, n = {t[1]}, k = {t[2]}") for t in triples]


def _correct_path_length(layer: str, n: int, k: int) -> int:
    if layer == "self-attention":
        return 1
    if layer == "recurrent":
        return n - 1
    if layer == "convolution":
        return -(-(n - 1) // (k - 1))
    return next(L for L in range(n + 1) if k**L >= n)


def _with(layer_name: str, wrong):
    """The correct answer everywhere except for one layer type, where `wrong` answers."""
    return lambda layer, n, k: wrong(n, k) if layer == layer_name else _correct_path_length(layer, n, k)


def check_max_path_length(max_path_length) -> Verdict:
    """Chapter 9, exercise 5: `max_path_length(layer, n, k)`, an int (layers or steps).

    Input classes that separate right from plausible-wrong code, each in the cases:
    every layer type; convolutions whose (n - 1)/(k - 1) is whole (floor = ceil),
    has a fractional part of at least ½ and below ½ (round-to-nearest is right only
    on the first two), k = 3, 4, 5 (a reach of k, not k - 1, per layer); dilated
    stacks with n an exact power of k (9 = 3², 64 = 4³, 125 = 5³: k**L > n, and the
    float log, whose ceil overshoots) and n = a power plus one (10: covering n - 1);
    answers compared as exact ints (a bool or a float is refused).
    """
    mistakes = [
        Mistake(
            "a convolution stack counted like a recurrence (n - 1 layers)",
            "Each causal layer of kernel width k reaches k - 1 positions further back, not one. "
            "How many layers cover the n - 1 positions between the ends?",
            _with("convolution", lambda n, k: n - 1),
        ),
        Mistake(
            "recurrent: off by one (n steps instead of n - 1)",
            "From position 0 to position n - 1 there are n - 1 gaps, one recurrence "
            "step each. Did you count positions instead of the steps between them?",
            _with("recurrent", lambda n, k: n),
        ),
        Mistake(
            "convolution: off by one (n / (k - 1) instead of (n - 1) / (k - 1))",
            "L causal layers see 1 + L·(k - 1) positions, so they must cover n - 1 "
            "positions beyond the output's own. Did you divide n instead of n - 1?",
            _with("convolution", lambda n, k: -(-n // (k - 1))),
        ),
        Mistake(
            "convolution: rounded down instead of up",
            "(n - 1) / (k - 1) layers is rarely a whole number, and a partial layer still "
            "costs a layer: round up, -(-(n - 1) // (k - 1)), not (n - 1) // (k - 1).",
            _with("convolution", lambda n, k: (n - 1) // (k - 1)),
        ),
        Mistake(
            "convolution: rounded to the nearest layer, not up",
            "(n - 1) / (k - 1) = 3.33 layers still needs a fourth layer for the last third: "
            "round up, -(-(n - 1) // (k - 1)), not to the nearest whole number.",
            _with("convolution", lambda n, k: math.floor((n - 1) / (k - 1) + 0.5)),
        ),
        Mistake(
            "dilated: k**L > n instead of k**L >= n",
            "L layers see k**L positions, so they are enough as soon as k**L equals n. "
            "Stop at the smallest L with k**L >= n.",
            _with("dilated", lambda n, k: next(L for L in range(n + 1) if k**L > n)),
        ),
        Mistake(
            "dilated: the logarithm in the wrong base",
            "With dilations 1, k, k², ... L layers see k**L positions. "
            "Did you take log base 2 (or e) instead of log base k?",
            _with("dilated", lambda n, k: math.ceil(math.log2(n))),
        ),
        Mistake(
            "dilated: a floating-point logarithm rounds the wrong way",
            "math.log(9, 3) is 2.0000000000000004, so its ceil is 3. "
            "Count with integers: the smallest L with k**L >= n.",
            _with("dilated", lambda n, k: math.ceil(math.log(n, k))),
        ),
    ]
    return check_function(
        max_path_length, _brute_force_path_length, _path_cases(), mistakes,
        name="max_path_length",
    )


# ---------------------------------------------------------------------------
# By hand: restricted self-attention, a bidirectional RNN


def _size(name: str, value, least: int = 1) -> int:
    value = real_number(name, value)
    if value != int(value) or value < least:
        raise ValueError(f"{name} must be a whole number >= {least}, got {value}")
    return int(value)


def check_window_macs(my_macs, n: int = 1024, r: int = 32, d: int = 512) -> CheckResult:
    """Chapter 9, exercise 1: multiply-adds of QKᵀ and AV when each query sees r keys: 2nrd."""
    n, r, d = _size("n", n), _size("r", r), _size("d", d)
    return check_number(my_macs, 2 * n * r * d, atol=0.5, what="number of multiply-adds",
                        name="my_macs", slips={
        "QKᵀ only": (n * r * d, "The weighted sum AV also costs one multiply-add per key "
                     "and feature."),
        "full attention, 2n²d: the window left out": (
            2 * n * n * d, "Each query scores r keys, not all n."),
        "the projections added": (
            2 * n * r * d + 4 * n * d * d,
            "The question asks for the QKᵀ and AV part only."),
    })


def check_window_layers(my_layers, n: int = 1024, r: int = 32) -> CheckResult:
    """Chapter 9, exercise 1: layers of a centred window of r that connect 0 and n - 1:
    ⌈2(n - 1)/r⌉, each layer moving information r/2 positions."""
    n, r = _size("n", n, 2), _size("r", r, 2)
    exact = -(-2 * (n - 1) // r)
    return check_number(my_layers, exact, atol=0.5, what="number of layers",
                        name="my_layers", slips={
        "a reach of r per layer, not r/2": (
            -(-(n - 1) // r), "A centred window of r positions reaches how far to one side?"),
        "one layer, as in full attention": (
            1, "Position n - 1 is outside the window of position 0."),
        "one position per layer": (n - 1, "Each layer moves information by more than one "
                                   "position: how many?"),
    })


def check_birnn_path(my_path, n: int = 1024) -> CheckResult:
    """Chapter 9, exercise 3: the maximum path length of a bidirectional RNN, n - 1 steps."""
    n = _size("n", n, 2)
    return check_number(my_path, n - 1, atol=0.5, what="maximum path length",
                        name="my_path", slips={
        "the two directions meeting in the middle": (
            math.ceil((n - 1) / 2), "Does information travel through both recurrences at once? "
            "Each runs alone from one end to the other."),
        "one step: both directions see everything": (
            1, "A recurrence reaches position n - 1 from 0 one step at a time."),
        "n steps: one too many": (n, "How many steps lie between position 0 and position n - 1?"),
    })


def check_birnn_steps(my_steps, n: int = 1024) -> CheckResult:
    """Chapter 9, exercise 3: sequential operations of a bidirectional RNN, n (both directions
    run side by side)."""
    n = _size("n", n, 2)
    return check_number(my_steps, n, atol=0.5, what="number of sequential operations",
                        name="my_steps", slips={
        "2n: the directions one after the other": (
            2 * n, "The two recurrences do not depend on each other: can they run side by side?"),
        "n/2": (n / 2, "Each recurrence takes all n steps in order."),
        "1, as in self-attention": (1, "Step t of a recurrence needs step t - 1."),
    })
