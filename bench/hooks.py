"""Cost of the hook points (chapter 16) when no hook is attached.

The same model instance runs with `lib`'s current forward methods (hook points in
place, none attached) and with the forward methods of `lib` just before the hook
points were added (commit ed6a948, read with ``git show``), interleaved, in one run.
Prints the median ratio hooked/plain per setting (1.00 = no cost) of the process's
CPU time on one thread and, for reference, the cost with hooks attached (run_with_cache).

    OMP_NUM_THREADS=2 python bench/hooks.py

`ModernDecoder` (chapters 14-16) had its hook points from the start; its "plain" forward
is `ModernBlock.forward` and `GroupedQueryAttention._output` with the hook logic taken
out (`_bare_block_forward`, `_bare_output` below). Every lib model calls a hook point
only while a hook is attached to it (tests/test_inspect.py checks that none is called
otherwise), so what remains is one look at each block's hook points per forward pass.

Measured 2026-11-27 (x86_64 Intel Xeon, one thread, machine otherwise idle), median
hooked/plain of 9 rounds (min-max across rounds):

    eval  tiny  (d 64, 2 layers, 8x64, ch 7)              0.86 (0.18-1.25), plain 9.1 ms
    train tiny                                            0.99 (0.61-1.44), plain 14.3 ms
    eval  small (d 128, 4 layers, 32x128, ch 11)          1.02 (0.98-1.09), plain 225 ms
    train small                                           0.99 (0.96-1.38), plain 646 ms
    eval  modern (d 64, 4 layers, GQA 4/2, 32x64, ch 14)  0.95 (0.81-1.09), plain 27.6 ms
    train modern                                          0.96 (0.81-1.36), plain 100 ms
    run_with_cache (every hook attached) / plain eval: 1.18, 0.81, 1.51

No cost is measurable: the medians straddle 1.00 and the rounds of one setting vary far
more (on this virtual machine the small settings' single rounds range over a factor of
two). The earlier measurement (another machine, 2026-11-24): 1.00 and 1.01 for the tiny
model's inference and training step, 1.01 for the small model's inference, 1.10 for
run_with_cache. SmolLM2's decoding (`lib.LlamaDecoder`) calls no hook point and no
sub-module at all while no hook is attached (bench/smollm2.py).
"""

from __future__ import annotations

import pathlib
import statistics
import subprocess
import sys
import time
import types

import torch

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import lib  # noqa: E402
from lib.model import attention, modern, transformer  # noqa: E402

BEFORE = "ed6a948"  # the last commit before the hook points were inserted


def _old_class(path: str, name: str):
    source = subprocess.run(["git", "show", f"{BEFORE}:{path}"], cwd=ROOT, check=True,
                            capture_output=True, text=True).stdout
    module = types.ModuleType(f"old_{name}")
    sys.modules[module.__name__] = module  # dataclasses look their module up
    exec(compile(source, f"{BEFORE}:{path}", "exec"), module.__dict__)  # noqa: S102
    return getattr(module, name)


def _bare_block_forward(self, x, cache=None):
    """`ModernBlock.forward` with no hook logic at all (it had hook points from the start)."""
    if self.norm_first:
        x = x + self.attn(self.norm1(x), cache)
        return x + self.mlp(self.norm2(x))
    x = self.norm1(x + self.attn(x, cache))
    return self.norm2(x + self.mlp(x))


def _bare_output(self, z):
    """`GroupedQueryAttention._output` without ``hook_z``."""
    B, _, T, _ = z.shape
    return self.w_o(z.transpose(1, 2).reshape(B, T, self.n_heads * self.d_head))


OLD = {
    (attention.MultiHeadAttention, "forward"): _old_class("lib/model/attention.py", "MultiHeadAttention").forward,
    (transformer.EncoderLayer, "forward"): _old_class("lib/model/transformer.py", "EncoderLayer").forward,
    (modern.ModernBlock, "forward"): _bare_block_forward,
    (modern.GroupedQueryAttention, "_output"): _bare_output,
}
NEW = {key: getattr(*key) for key in OLD}


def _use(methods):
    for (cls, attr), fn in methods.items():
        setattr(cls, attr, fn)


def _time(fn, reps):
    # CPU time of this process, not wall time: on a shared machine other processes'
    # work stretches wall time far more than it stretches our own CPU seconds.
    start = time.process_time()
    for _ in range(reps):
        fn()
    return (time.process_time() - start) / reps


def bench(label, model, step, reps, rounds=9):
    ratios = []
    for _ in range(rounds):
        _use(OLD)
        plain = _time(step, reps)
        _use(NEW)
        hooked = _time(step, reps)
        ratios.append(hooked / plain)
    _use(NEW)
    print(f"{label:<46} hooked/plain median {statistics.median(ratios):.3f} "
          f"(min {min(ratios):.3f}, max {max(ratios):.3f}), plain {plain * 1e3:.2f} ms")


def main():
    torch.manual_seed(0)
    torch.set_num_threads(1)  # one thread: less scheduling noise in the timings
    settings = [  # (label, d_model, heads, layers, d_ff, batch, length)
        ("tiny: d 64, 2 layers, batch 8x64 (ch 7)", 64, 4, 2, 256, 8, 64),
        ("small: d 128, 4 layers, batch 32x128 (ch 11)", 128, 4, 4, 512, 32, 128),
    ]
    settings += [  # today's decoder (chapter 14's rung "+ GQA"), rotary and grouped-query
        ("modern: d 64, 4 layers, GQA 4/2, batch 32x64 (ch 14)", 64, 4, 4, 192, 32, 64),
    ]
    for label, d, h, n, d_ff, B, T in settings:
        if label.startswith("modern"):
            model = lib.ModernConfig(vocab_size=65, d_model=d, n_layers=n, n_heads=h,
                                     n_kv_heads=h // 2, d_ff=d_ff, max_len=T).build()
        else:
            model = lib.DecoderOnlyModel(65, d_model=d, n_heads=h, n_layers=n, d_ff=d_ff,
                                         dropout=0.0, norm_first=True)
        x = torch.randint(0, 65, (B, T))
        model.eval()

        def infer():
            with torch.no_grad():
                model(x)

        bench(f"eval  {label}", model, infer, reps=20)
        model.train()
        opt = torch.optim.SGD(model.parameters(), lr=0.0)

        def train_step():
            opt.zero_grad()
            model(x).logsumexp(-1).mean().backward()

        bench(f"train {label}", model, train_step, reps=5)
        model.eval()
        with torch.no_grad():
            plain = _time(lambda: model(x), 20)
        cached = _time(lambda: lib.run_with_cache(model, x), 20)
        print(f"      run_with_cache (every hook attached) / plain eval forward: {cached / plain:.2f}")


if __name__ == "__main__":
    main()
