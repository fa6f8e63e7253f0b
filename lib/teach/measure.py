"""Measuring what a computation allocates: the largest tensor any operation makes.

Introduced in the "Beyond the paper" chapter on efficient attention, to show
that tiled attention never builds the (n × n) weights while the textbook path
does. A `TorchDispatchMode` sees every operation PyTorch dispatches (forward
and backward, inside autograd) and the tensors it returns; it does not see the
buffers a fused C++ kernel allocates inside itself. `allocated_peak_mb` does:
it reads the allocator's own events (torch.profiler with profile_memory=True).
"""

from __future__ import annotations

import torch
from torch.utils._python_dispatch import TorchDispatchMode

__all__ = ["ATTENTION_PATHS", "LargestTensor", "allocated_peak_mb", "measure_attention"]


class LargestTensor(TorchDispatchMode):
    """Records the largest tensor (by number of elements) any operation returns.

        with LargestTensor() as seen:
            out = f(x)
        seen.largest, seen.shape, seen.op   # elements, its shape, the operation

    Views count too (a view of a big tensor is as large as it); inputs made
    before the ``with`` block are not counted.
    """

    def __init__(self):
        super().__init__()
        self.largest = 0
        self.shape: tuple[int, ...] = ()
        self.op = ""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor) and t.numel() > self.largest:
                self.largest, self.shape, self.op = t.numel(), tuple(t.shape), str(func)
        return out


ATTENTION_PATHS = ("textbook", "tiled", "torch")


def _rss_kib(field: str) -> int | None:
    """VmRSS or VmHWM (peak) of this process in KiB, from /proc (Linux); None elsewhere."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def _reset_peak() -> bool:
    """Reset this process's peak resident set size to its current size (Linux ≥ 4.0)."""
    try:
        with open("/proc/self/clear_refs", "w") as clear:
            clear.write("5")
        return _rss_kib("VmHWM") is not None
    except OSError:
        return False


def allocated_peak_mb(fn) -> float:
    """Peak of the bytes the CPU allocator holds for tensors while ``fn()`` runs, in MiB.

    Every allocation and free during the call, also those inside fused C++
    kernels, comes from the profiler's memory events (profile_memory=True); the
    running sum of their sizes, in time order, peaks at the value returned.
    Memory allocated before the call and still held is not counted, nor is
    anything but tensors (Python objects, library code, the allocator's own
    slack), so the figure is the same on every run and every machine.
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    events = [e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"]
    live = peak = 0
    for e in sorted(events, key=lambda e: e.start_ns()):
        live += e.nbytes()  # negative for a free
        peak = max(peak, live)
    return peak / 2**20


def _measure_here(path: str, n: int, heads: int, d_k: int, block: int, repeats: int, threads: int) -> dict:
    """The body of `measure_attention`, run inside the fresh process."""
    import resource
    import statistics
    import sys
    import time

    import torch.nn.functional as F

    from lib.model.attention import causal_mask, scaled_dot_product_attention
    from lib.model.tiled import tiled_attention

    torch.set_num_threads(threads)
    torch.manual_seed(0)

    def inputs(length):
        q, k, v = (torch.randn(1, heads, length, d_k, requires_grad=True) for _ in range(3))
        return q, k, v, (causal_mask(length) if path == "textbook" else None)

    def attend(q, k, v, mask):
        if path == "textbook":
            out, _ = scaled_dot_product_attention(q, k, v, mask)
        elif path == "tiled":
            out = tiled_attention(q, k, v, causal=True, block_q=block, block_k=block)
        else:
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        out.sum().backward()
        q.grad = k.grad = v.grad = None

    # One-time costs (library code paged in, thread pools, allocator arenas) are
    # paid by a run at a tiny length first, so that the measured run counts the path.
    attend(*inputs(min(n, 32)))
    full = inputs(n)

    def run():
        attend(*full)

    if _reset_peak():  # Linux: the peak from here on, over what the process holds now
        before = _rss_kib("VmRSS")
        run()
        peak_mb = (_rss_kib("VmHWM") - before) / 1024
    else:  # elsewhere: growth of the lifetime peak (0 if importing peaked higher)
        unit = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: bytes on macOS, KiB on Linux
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        run()
        peak_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * unit / 2**20
    allocated_mb = allocated_peak_mb(run)
    times = []
    for _ in range(repeats):  # CPU seconds of this process: other programs on the machine do not count
        start = time.process_time()
        run()
        times.append(time.process_time() - start)
    return {
        "path": path, "n": n, "peak_mb": peak_mb, "allocated_mb": allocated_mb,
        "seconds": statistics.median(times),
    }


def measure_attention(
    path: str, n: int, *, heads: int = 4, d_k: int = 64, block: int = 128, repeats: int = 3,
    threads: int = 1,
) -> dict:
    """Peak memory and time of one causal self-attention path, forward and backward.

    ``path`` is ``"textbook"`` (`lib.scaled_dot_product_attention`, which builds
    the (n × n) weights), ``"tiled"`` (`lib.tiled_attention`, ``block`` × ``block``
    tiles) or ``"torch"`` (`F.scaled_dot_product_attention(is_causal=True)`), on
    float32 inputs of shape (1, heads, n, d_k).

    It runs in a fresh Python process with ``threads`` threads. A first run at
    a tiny length pays the one-time costs (library code paged in, thread pools,
    allocator arenas); then, at length ``n``:

    - ``allocated_mb``: the peak of the bytes allocated for tensors during one
      run, forward and backward, over what was allocated before it (the inputs
      are not counted), from the allocator's events (`allocated_peak_mb`): the
      same on every run and machine;
    - ``peak_mb``: the growth of the process's peak resident memory during the
      first run at ``n`` (on Linux the peak is reset first through
      /proc/self/clear_refs): what the operating system sees, allocator slack
      and pages touched included, so it moves a little from run to run;
    - ``seconds``: the median, over ``repeats`` further runs, of the CPU seconds the
      process spent (``time.process_time``, all its threads): a busy machine inflates
      it far less than a wall clock.

    Returns ``{"path", "n", "peak_mb", "allocated_mb", "seconds"}``.
    """
    import json
    import os
    import subprocess
    import sys

    if path not in ATTENTION_PATHS:
        raise ValueError(f"path must be one of {ATTENTION_PATHS}, got {path!r}")
    for name, value in (
        ("n", n), ("heads", heads), ("d_k", d_k), ("block", block), ("repeats", repeats), ("threads", threads)
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    code = (
        "import json, lib.teach.measure as m; "
        f"print(json.dumps(m._measure_here({path!r}, {n}, {heads}, {d_k}, {block}, {repeats}, {threads})))"
    )
    env = {**os.environ, "MPLBACKEND": "Agg", "OMP_NUM_THREADS": str(threads)}  # no notebook backend
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    if done.returncode:
        raise RuntimeError(f"measuring {path} at n={n} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])
