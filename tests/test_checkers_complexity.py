"""Chapter 9's exercise checkers: a right answer passes, a stub is "not implemented",
and each named mistake, written out independently here, is recognised by name."""

import math

import pytest

import lib
from lib.teach.checking import NOT_IMPLEMENTED

# ---------------------------------------------------------------- self_attention_macs


def macs_solution(n, d_model):
    scores_and_sum = 2 * n * n * d_model  # S = Q K^T and alpha V
    projections = 4 * n * d_model * d_model  # W^Q, W^K, W^V, W^O
    return scores_and_sum + projections


def macs_stub(n, d_model):
    raise NotImplementedError  # your code here


def macs_no_projections(n, d_model):
    return n * d_model * n * 2


def macs_one_product(n, d_model):
    return n * n * d_model + 4 * n * d_model**2


def macs_no_output_projection(n, d_model):
    q = k = v = n * d_model * d_model
    return q + k + v + 2 * n * n * d_model


def macs_as_flops(n, d_model):
    return 2 * n * n * d_model * 2 + 8 * n * d_model**2


MACS_MISTAKES = [
    (macs_no_projections, "the projections are forgotten (only 2n²d)"),
    (macs_one_product, "only one of QKᵀ and αV is counted (n²d instead of 2n²d)"),
    (macs_no_output_projection, "W^O is forgotten (3nd² instead of 4nd²)"),
    (macs_as_flops, "FLOPs, not multiply-adds (twice the answer)"),
]


def test_macs_solution_passes():
    verdict = lib.check_self_attention_macs(macs_solution)
    assert verdict and verdict.mistake is None
    assert "✓" in str(verdict)


def test_macs_stub_is_not_implemented():
    verdict = lib.check_self_attention_macs(macs_stub)
    assert not verdict and NOT_IMPLEMENTED in str(verdict)


@pytest.mark.parametrize("wrong,name", MACS_MISTAKES, ids=[m[1] for m in MACS_MISTAKES])
def test_macs_mistakes_are_named(wrong, name):
    verdict = lib.check_self_attention_macs(wrong)
    assert not verdict
    assert verdict.mistake == name


def test_macs_other_errors_are_reported_not_named():
    verdict = lib.check_self_attention_macs(lambda n, d_model: 3 * n * d_model)
    assert not verdict and verdict.mistake is None and "differs" in str(verdict)


# -------------------------------------------------------------------- max_path_length


def path_solution(layer, n, k):
    if layer == "self-attention":
        return 1
    if layer == "recurrent":
        return n - 1
    if layer == "convolution":
        return math.ceil((n - 1) / (k - 1))
    if layer == "dilated":
        layers, seen = 0, 1
        while seen < n:
            layers, seen = layers + 1, seen * k
        return layers
    raise ValueError(layer)


def path_stub(layer, n, k):
    raise NotImplementedError  # your code here


def path_conv_like_recurrence(layer, n, k):
    if layer == "convolution":
        return n - 1
    return path_solution(layer, n, k)


def path_recurrent_off_by_one(layer, n, k):
    return n if layer == "recurrent" else path_solution(layer, n, k)


def path_conv_off_by_one(layer, n, k):
    if layer == "convolution":
        return math.ceil(n / (k - 1))
    return path_solution(layer, n, k)


def path_log_base_two(layer, n, k):
    if layer == "dilated":
        return math.ceil(math.log(n) / math.log(2))
    return path_solution(layer, n, k)


def path_float_log(layer, n, k):
    if layer == "dilated":
        return math.ceil(math.log(n) / math.log(k))
    return path_solution(layer, n, k)


def path_conv_floor(layer, n, k):
    if layer == "convolution":
        return math.floor((n - 1) / (k - 1))
    return path_solution(layer, n, k)


def path_dilated_strict(layer, n, k):
    if layer == "dilated":
        layers, seen = 0, 1
        while seen <= n:  # one layer too many when k**L == n
            layers, seen = layers + 1, seen * k
        return layers
    return path_solution(layer, n, k)


PATH_MISTAKES = [
    (path_conv_floor, "convolution: rounded down instead of up"),
    (path_dilated_strict, "dilated: k**L > n instead of k**L >= n"),
    (path_conv_like_recurrence, "a convolution stack counted like a recurrence (n - 1 layers)"),
    (path_recurrent_off_by_one, "recurrent: off by one (n steps instead of n - 1)"),
    (path_conv_off_by_one, "convolution: off by one (n / (k - 1) instead of (n - 1) / (k - 1))"),
    (path_log_base_two, "dilated: the logarithm in the wrong base"),
    (path_float_log, "dilated: a floating-point logarithm rounds the wrong way"),
]


def test_path_solution_passes():
    verdict = lib.check_max_path_length(path_solution)
    assert verdict and verdict.mistake is None


def test_path_stub_is_not_implemented():
    verdict = lib.check_max_path_length(path_stub)
    assert not verdict and NOT_IMPLEMENTED in str(verdict)


@pytest.mark.parametrize("wrong,name", PATH_MISTAKES, ids=[m[1] for m in PATH_MISTAKES])
def test_path_mistakes_are_named(wrong, name):
    verdict = lib.check_max_path_length(wrong)
    assert not verdict
    assert verdict.mistake == name


def test_path_reference_is_a_brute_force_that_agrees_with_the_formulas():
    """The checker's reference finds the answer by stacking real layers; the closed
    forms of Table 1 (with our exact counts) must agree with it on every case."""
    from lib.teach.checkers.complexity import _brute_force_path_length, _path_cases

    for case in _path_cases():
        assert _brute_force_path_length(*case.args) == path_solution(*case.args), case.label


# --- by hand: restricted self-attention and a bidirectional RNN (numbers) --------------


import torch  # noqa: E402  (the by-hand references below)


def _window_layers_brute(n, r):
    """Layers of a centred window (|i - j| <= r/2) until position n - 1 hears position 0."""
    reached, layers = torch.zeros(n, dtype=torch.bool), 0
    reached[0] = True
    band = ((torch.arange(n)[:, None] - torch.arange(n)[None, :]).abs() <= r // 2).float()
    while not reached[-1]:
        reached = (band @ reached.float()) > 0
        layers += 1
    return layers


def _window_macs_brute(n, r, d):
    """Multiply-adds counted query by query: r scores of d terms, then r values of d features."""
    return sum(r * d + r * d for _ in range(n))


def test_window_checkers():
    macs, layers = _window_macs_brute(1024, 32, 512), _window_layers_brute(1024, 32)
    assert (macs, layers) == (33_554_432, 64)
    assert lib.check_window_macs(macs) and lib.check_window_layers(layers)
    assert lib.check_window_layers(_window_layers_brute(65, 16), n=65, r=16)
    for value, name in ((macs // 2, "QKᵀ only"),
                        (2 * 1024 * 1024 * 512, "full attention, 2n²d: the window left out"),
                        (macs + 4 * 1024 * 512 * 512, "the projections added")):
        verdict = lib.check_window_macs(value)
        assert not verdict and verdict.slip == name, (name, verdict.message)
    for value, name in ((32, "a reach of r per layer, not r/2"),
                        (1, "one layer, as in full attention"), (1023, "one position per layer")):
        verdict = lib.check_window_layers(value)
        assert not verdict and verdict.slip == name, (name, verdict.message)
    assert lib.check_window_macs(macs + 1).slip is None and not lib.check_window_macs(macs + 1)
    assert lib.check_window_layers(65).slip is None and not lib.check_window_layers(65)
    assert not lib.check_window_macs(float("nan")) and not lib.check_window_layers(float("nan"))


def _birnn(n):
    """(maximum path length, longest chain of recurrence steps) of a bidirectional RNN, by BFS.

    Nodes: input x_t, forward state f_t, backward state b_t, output o_t; a path's
    length counts the recurrence steps (f_{t-1} -> f_t, b_{t+1} -> b_t) it takes.
    """
    def steps_from(i):
        # 0-1 BFS over states: entering f_i or b_i from x_i is free, each recurrence costs 1
        import collections
        dist, queue = {("f", i): 0, ("b", i): 0}, collections.deque([("f", i), ("b", i)])
        while queue:
            kind, t = queue.popleft()
            nxt = t + 1 if kind == "f" else t - 1
            if 0 <= nxt < n and (kind, nxt) not in dist:
                dist[kind, nxt] = dist[kind, t] + 1
                queue.append((kind, nxt))
        return [min(dist.get(("f", t), n * n), dist.get(("b", t), n * n)) for t in range(n)]

    path = max(max(steps_from(0)), max(steps_from(n - 1)))
    chain = n  # f_0, f_1, ..., f_{n-1}: each needs the one before
    return path, chain


def test_birnn_checkers():
    path, chain = _birnn(1024)
    assert (path, chain) == (1023, 1024)
    assert lib.check_birnn_path(path) and lib.check_birnn_steps(chain)
    assert lib.check_birnn_path(_birnn(10)[0], n=10)
    for value, name in ((512, "the two directions meeting in the middle"),
                        (1, "one step: both directions see everything"),
                        (1024, "n steps: one too many")):
        verdict = lib.check_birnn_path(value)
        assert not verdict and verdict.slip == name, (name, verdict.message)
    for value, name in ((2048, "2n: the directions one after the other"), (512, "n/2"),
                        (1, "1, as in self-attention")):
        verdict = lib.check_birnn_steps(value)
        assert not verdict and verdict.slip == name, (name, verdict.message)
    assert lib.check_birnn_path(700).slip is None and not lib.check_birnn_steps(700)
    assert not lib.check_birnn_path(float("nan")) and not lib.check_birnn_steps(float("nan"))


@pytest.mark.parametrize("checker, name", [
    (lib.check_window_macs, "my_macs"), (lib.check_window_layers, "my_layers"),
    (lib.check_birnn_path, "my_path"), (lib.check_birnn_steps, "my_steps")])
@pytest.mark.parametrize("bad", ["64", False, [64]])  # None: not answered
def test_by_hand_checkers_refuse_what_is_not_a_number(checker, name, bad):
    with pytest.raises(TypeError, match=name):
        checker(bad)


def test_by_hand_checkers_refuse_bad_sizes():
    with pytest.raises(ValueError, match="r must be"):
        lib.check_window_layers(64, r=1)
    with pytest.raises(ValueError, match="n must be"):
        lib.check_birnn_path(1, n=2.5)
