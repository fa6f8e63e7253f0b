"""The checker engine (lib/teach/checking.py): dtypes exact for bool and integer results,
NaN never right, and a mistake that raises can be named.

The references here are written out by hand (torch.tril, a literal list), not taken
from the engine under test.
"""

import pytest
import torch

from lib.teach.checking import Case, Mistake, check_function


def _tril(n):
    return torch.ones(n, n, dtype=torch.bool).tril()


CASES = [Case((n,), label=f"n = {n}") for n in (2, 3)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64, torch.uint8])
def test_a_bool_result_in_another_dtype_fails_and_names_the_dtype(dtype):
    verdict = check_function(lambda n: _tril(n).to(dtype), _tril, CASES, name="mask")
    assert not verdict
    assert f"returned dtype {str(dtype).replace('torch.', '')}; expected bool" in verdict.message
    assert "the values are right" in verdict.message


def test_an_integer_result_must_keep_its_dtype():
    parents = lambda n: torch.arange(n) - 1  # noqa: E731  int64, like a `parent` array
    assert check_function(lambda n: torch.arange(n) - 1, parents, CASES, name="parent")
    for wrong in (torch.float32, torch.int32):
        verdict = check_function(lambda n: (torch.arange(n) - 1).to(wrong), parents, CASES, name="parent")
        assert not verdict and "expected int64" in verdict.message
    # a Python int result: a float is not an int
    count = [Case((3,))]
    assert check_function(lambda n: n * 2, lambda n: 6, count, name="count")
    verdict = check_function(lambda n: n * 2.0, lambda n: 6, count, name="count")
    assert not verdict and "float" in verdict.message


def test_a_named_mistake_for_the_wrong_dtype_wins_over_the_generic_message():
    float_mask = Mistake("0/1 float mask instead of bool", "dtype=torch.bool?", lambda n: _tril(n).float())
    verdict = check_function(lambda n: torch.ones(n, n).tril(), _tril, CASES, [float_mask], name="mask")
    assert verdict.mistake == "0/1 float mask instead of bool"


def test_nan_is_never_right_and_is_reported_as_nan():
    ref = lambda x: x * 2  # noqa: E731
    cases = [Case((torch.tensor([1.0, 2.0, 3.0]),))]
    verdict = check_function(lambda x: torch.full_like(x, float("nan")), ref, cases, name="f")
    assert not verdict and "NaN in 3 of 3 entries" in verdict.message
    assert "largest difference" not in verdict.message
    # even where the reference itself is NaN
    nan_ref = lambda x: x * float("nan")  # noqa: E731
    assert not check_function(lambda x: x * float("nan"), nan_ref, cases, name="f")
    # a float64 answer far off is reported with its size, not as NaN
    verdict = check_function(lambda x: x.double() * 1e300, ref, cases, name="f")
    assert not verdict and "NaN" not in verdict.message
    # a scalar NaN
    scalar = [Case((2.0,))]
    verdict = check_function(lambda x: float("nan"), lambda x: x / 4, scalar, name="f")
    assert not verdict and "returned NaN; expected 0.5" in verdict.message


def test_a_mistake_that_gives_nan_can_still_be_named():
    ref = lambda x: torch.softmax(x, -1)  # noqa: E731
    naive = lambda x: x.exp() / x.exp().sum(-1, keepdim=True)  # noqa: E731  0/0 on -1000
    cases = [Case((torch.tensor([[-1000.0, -1001.0], [0.0, 1.0]]),))]
    verdict = check_function(naive, ref, cases, [Mistake("no shift", "max?", naive)], name="softmax")
    assert verdict.mistake == "no shift"


def test_a_mistake_that_raises_the_same_exception_is_named():
    cases = [Case((torch.ones(3),)), Case((torch.ones(2, 3),))]
    ref = lambda x: x.sum(-1)  # noqa: E731

    def learner(x):
        return x @ torch.ones(2)  # right width only by accident: (3,) @ (2,) raises

    shape_slip = Mistake("matmul with the wrong width", "shape?", lambda x: x @ torch.ones(2))
    other = Mistake("raises something else", "?", lambda x: (_ for _ in ()).throw(ValueError("no")))
    verdict = check_function(learner, ref, cases, [other, shape_slip], name="f")
    assert verdict.mistake == "matmul with the wrong width"
    # without a matching mistake, the learner's error is reported with its inputs
    verdict = check_function(learner, ref, cases, [other], name="f")
    assert not verdict and verdict.mistake is None and "raised RuntimeError" in verdict.message


def test_a_right_float_answer_passes_in_another_float_dtype():
    cases = [Case((torch.tensor([1.0, 2.0]),))]
    assert check_function(lambda x: (x * 2).double(), lambda x: x * 2, cases, name="f")


def test_an_integer_result_is_compared_exactly_however_large():
    # 2 * 512 * 2048 + 2048 + 512 = 2,099,712 (the paper's FFN); one more is wrong, even
    # though it is within a relative 1e-6 of the right count
    count = [Case((512, 2048))]
    paper = lambda d, f: 2_099_712  # noqa: E731
    assert check_function(lambda d, f: 2 * d * f + f + d, paper, count, name="count")
    verdict = check_function(lambda d, f: 2 * d * f + f + d + 1, paper, count, name="count")
    assert not verdict and "returned 2099713; expected 2099712" in verdict.message
    # an integer tensor too: 2**40 + 1 is not 2**40
    big = lambda n: torch.full((n,), 2**40, dtype=torch.int64)  # noqa: E731
    verdict = check_function(lambda n: big(n) + 1, big, CASES, name="counts")
    assert not verdict and "entries differ" in verdict.message


def test_a_less_precise_float_result_fails_and_names_both_dtypes():
    # float64 in, float64 expected (as lib returns its input's dtype): x * 2 computed in
    # float32 has the right values to float32's precision, and is still not the answer
    cases = [Case((torch.tensor([0.1, 1 / 3, 2.0], dtype=torch.float64),))]
    double = lambda x: x * 2  # noqa: E731
    verdict = check_function(lambda x: x.float() * 2, double, cases, name="f")
    assert not verdict
    assert "returned float32; expected float64" in verdict.message
    assert "agree to float32's precision" in verdict.message
    assert "largest difference" not in verdict.message.split("float64.")[0]
    # wrong values as well: both are said, the dtype first
    verdict = check_function(lambda x: x.float() * 3, double, cases, name="f")
    assert not verdict and "returned float32; expected float64" in verdict.message
    assert "the values differ too: largest difference" in verdict.message
    # float16 for a float32 case is refused the same way, even when the values are exact
    halves = [Case((torch.tensor([0.5, 1.0, 2.0]),))]
    verdict = check_function(lambda x: x.half() * 2, double, halves, name="f")
    assert not verdict and "returned float16; expected float32" in verdict.message
