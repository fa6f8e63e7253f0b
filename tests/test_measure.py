"""lib.teach.measure: the largest-tensor recorder and the fresh-process attention measurement."""

from __future__ import annotations

import pytest
import torch

import lib
from lib.teach.measure import LargestTensor, allocated_peak_mb, measure_attention


def test_largest_tensor_records_size_shape_and_operation():
    x = torch.randn(3, 4)
    with LargestTensor() as seen:
        y = x @ x.T  # (3, 3): 9 numbers
        z = torch.outer(torch.arange(5.0), torch.arange(6.0))  # (5, 6): 30 numbers
    assert (seen.largest, seen.shape) == (30, (5, 6)) and seen.op.startswith("aten.")
    assert y.shape == (3, 3) and z.shape == (5, 6)


def test_largest_tensor_sees_the_backward_pass():
    w = torch.randn(8, 1, requires_grad=True)
    with LargestTensor() as forward:
        loss = (torch.ones(1, 8) * w.sum()).sum()
    with LargestTensor() as backward:
        loss.backward()
    assert forward.largest == 8 and backward.largest == 8 and w.grad is not None


def test_measure_attention_in_a_fresh_process():
    r = measure_attention("tiled", 128, heads=1, d_k=8, block=32, repeats=1)
    assert r["path"] == "tiled" and r["n"] == 128
    assert r["peak_mb"] >= 0 and r["seconds"] > 0 and r["allocated_mb"] > 0


def test_allocated_peak_counts_tensors_alive_together():
    def two_buffers():
        a = torch.empty(1024 * 1024, dtype=torch.float32)  # 4 MiB
        b = torch.empty(512 * 1024, dtype=torch.float32)  # 2 MiB, while a is alive
        del a, b
        c = torch.empty(256 * 1024, dtype=torch.float32)  # 1 MiB, after both are freed
        return c

    assert allocated_peak_mb(two_buffers) == pytest.approx(6.0, abs=0.01)
    assert allocated_peak_mb(lambda: None) == 0


def test_allocated_memory_of_the_textbook_path_is_its_weights_and_more():
    n = 256
    textbook = measure_attention("textbook", n, heads=1, d_k=8, repeats=1)
    again = measure_attention("textbook", n, heads=1, d_k=8, repeats=1)
    tiled = measure_attention("tiled", n, heads=1, d_k=8, block=32, repeats=1)
    weights_mib = n * n * 4 / 2**20  # one (n × n) float32 matrix
    assert textbook["allocated_mb"] >= 3 * weights_mib  # scores, masked scores, weights
    assert textbook["allocated_mb"] == again["allocated_mb"]  # no start-up cost, no noise
    assert tiled["allocated_mb"] < weights_mib


def test_allocated_peak_refuses_what_it_cannot_call():
    with pytest.raises(TypeError, match="fn"):
        allocated_peak_mb(42)


@pytest.mark.parametrize(
    "args, kwargs, words",
    [
        (("fused", 128), {}, "path"),
        (("tiled", 0), {}, "n"),
        (("tiled", 128), {"block": -1}, "block"),
        (("tiled", 128), {"threads": 0}, "threads"),
        (("tiled", 128), {"repeats": True}, "repeats"),
    ],
)
def test_measure_attention_refuses_bad_arguments(args, kwargs, words):
    with pytest.raises(ValueError, match=words):
        measure_attention(*args, **kwargs)


def test_exported_from_lib():
    assert lib.measure_attention is measure_attention and lib.LargestTensor is LargestTensor
    assert lib.ATTENTION_PATHS == ("textbook", "tiled", "torch")
