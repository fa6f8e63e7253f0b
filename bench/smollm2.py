"""SmolLM2-135M-Instruct, greedy generation: `lib` against Hugging Face's LlamaForCausalLM,
the same weights (both loaded from the course's GGUF file), both with a KV cache.

Run:  .venv/bin/python bench/smollm2.py [--threads 2] [--repeats 3] [--new 128] [--batch 1 8]

The prompt is the chat prompt of the pretrained-model chapter ("What is the capital
of France?" in SmolLM2's chat template), repeated over the batch; 128 new tokens,
greedy, float32. `lib.generate` against ``model.generate(do_sample=False,
min_new_tokens=n, max_new_tokens=n)``, so both produce exactly n tokens (the
reference's EOS is masked by ``min_new_tokens``; the tokens are compared before the
first EOS). The runs are interleaved (lib, HF, lib, ...) so load from other
processes hits both alike; the figure is the best of ``--repeats``. Goal: lib/HF
time ratio <= 1.0.

Also printed: the peak resident memory of the process, and the bandwidth bound of
batch-1 decoding: each new token reads every weight once (538 MB in float32), so
tokens/s cannot exceed (measured copy bandwidth) / (bytes of weights). A measured
speed far below that bound means that something besides streaming the weights takes
the time: per-operation overhead, or reaching the memory (page-table walks).

Results, 2026-11-27 (x86_64 Intel Xeon, 2 cores, nothing else running unless noted).
"lib" is `lib.load_smollm2()` as the chapters use it: a `LlamaDecoder` whose blocks run
as one flat sequence of tensor operations when no hook watches them (`_block_step`: no
per-module checks, no hook-point or nn.Module calls), with `LlamaAttention`'s rotary
table computed once and the KV cache grown in place; the prompt's pass computes the last
position's logits only. "plain" is the same model with ``set_fast_attention(model,
False)``: every block through `ModernBlock.forward`, `GroupedQueryAttention` (rotary
tables per layer and step, ``torch.cat`` of the cache). Both give the same tokens, bit
for bit, and the same tokens as Hugging Face (asserted). Best of the interleaved rounds:

    run                                 batch  lib tok/s  plain tok/s  HF tok/s  lib/HF  plain/HF
    --threads 2 --repeats 3             1      20.1         16.9        18.9     0.94    1.12
                                        8      79.1         72.6        74.0     0.94    1.02
    --threads 2 --repeats 3             1      19.4         15.6        17.7     0.92    1.13
                                        8      83.1         70.3        90.9     1.09    1.29
    --threads 2 --repeats 3             1      19.9         17.6        17.5     0.88    1.00
                                        8      87.4         78.5        78.4     0.90    1.00
    --threads 2 --repeats 3 (a)         1      21.9         19.3        21.7     0.99    1.13
                                        8      91.9         77.0        72.8     0.79    0.95
    --threads 2 --repeats 5             1      20.4         16.0        16.3     0.80    1.02
                                        8      86.5         72.1        74.5     0.86    1.03
    --threads 1 --repeats 3             1      13.3         10.6        13.3     1.00    1.26
                                        8      48.4         44.6        47.2     0.98    1.06
    --threads 1 --repeats 3             1      15.8         14.3        14.8     0.94    1.04
                                        8      47.7         42.2        43.9     0.92    1.04

    (a) a test suite ran beside batch 1. Not in the table: a run while a notebook executed
    beside it, 1.07 at batch 1 and 0.88 at batch 8.
    The --repeats 5 run also printed lib/HF of each round (wall): batch 1 0.94 0.80 0.89
    0.72 0.83 (median 0.83), batch 8 1.08 0.94 0.80 0.84 0.80 (median 0.84).

Over the five two-thread runs lib/HF has a median of 0.92 at batch 1 (0.80-0.99) and 0.90
at batch 8 (0.79-1.09); on one thread 0.94-1.00 and 0.92-0.98. The goal (lib/HF <= 1.0)
holds in 13 of these 14 figures and in the median of every setting; a single run can
miss it by up to 9 %: on this shared virtual machine the same process pair varies by
10-20 % from run to run, far more than the gap being measured, so read a ratio only
beside its repeats. Before the flat block step (same machine, 2 threads, best of 3):
lib/HF 1.08 at batch 1 and 1.05 at batch 8; the 2026-11-25 runs on another machine gave
0.99 and 1.03. In-process timing of one decoding step (batch 1, ~40-100 cached
positions, median of 60 interleaved steps): 39.5 ms flat, 43.5 ms through the modules,
42.6 ms Hugging Face on two threads; 63.9 / 69.6 / 67.9 ms on one.

Peak resident memory 2.08-2.16 GB (lib's and Hugging Face's models, float32, in one
process). Weights 538 MB; copy bandwidth 13-24 GB/s on this machine (it varies with the
neighbours' load), so the batch-1 bound is 24-44 tokens/s and batch 1 runs at about half
of it. About three quarters of a one-thread step is the 211 matrix-vector products
(reading every weight once); the rest is some 1,300 small operations (norms, rotary,
cache, attention) and Python. Memory pages matter too: in one pair of processes,
``THP_MEM_ALLOC_ENABLE=1`` (PyTorch's allocator asks Linux for 2 MB pages) made both
models 18 % faster on one thread at batch 1 (11.7 -> 14.2 tokens/s); the bench run with it
(two threads) showed no gain over the runs above, so that is not a settled figure.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import time

import torch

import lib
from lib.model.llama import set_fast_attention


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def timed_both(fn):
    """(wall seconds, CPU seconds of this process, output)."""
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return time.perf_counter() - wall, time.process_time() - cpu, out


def copy_bandwidth(n_bytes: int = 256 * 2**20, repeats: int = 5) -> float:
    """Bytes per second of a large tensor copy (read + write counted once each)."""
    src = torch.empty(n_bytes // 4, dtype=torch.float32).uniform_()
    dst = torch.empty_like(src)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        dst.copy_(src)
        best = min(best, time.perf_counter() - start)
    return 2 * n_bytes / best


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--new", type=int, default=128)
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 8])
    args = parser.parse_args()
    os.environ["HF_HUB_OFFLINE"] = "1"
    torch.set_num_threads(args.threads)
    import transformers

    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    path = lib.smollm2_path()
    seconds_lib, (model, tokenizer) = timed(lambda: lib.load_smollm2())
    import transformers.modeling_gguf_pytorch_utils as hf_gguf

    hf_gguf.tqdm = lambda iterable, **kwargs: iterable  # no progress bar
    seconds_hf, reference = timed(lambda: transformers.AutoModelForCausalLM.from_pretrained(
        path.parent, gguf_file=path.name, dtype=torch.float32).eval())
    chat = tokenizer.apply_chat([{"role": "user", "content": "What is the capital of France?"}])
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, "
          f"{platform.machine()}, {args.threads} threads; prompt {len(chat)} tokens, "
          f"{args.new} new, best of {args.repeats}")
    print(f"load: lib {seconds_lib:.1f} s, Hugging Face {seconds_hf:.1f} s")
    print(f"load average before: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print("tokens/s from the best wall time, and from the best CPU time of the process "
          "(less sensitive to other processes); lib = the fast path (LlamaDecoder's flat "
          "block step, LlamaAttention), lib plain = the same model with "
          "set_fast_attention(False) (every block through ModernBlock.forward)")
    print(f"{'batch':>5}  {'lib tok/s':>9}  {'plain tok/s':>11}  {'HF tok/s':>9}  "
          f"{'lib/HF':>6}  {'plain/HF':>8}   (wall | CPU)")
    n = args.new
    for batch in args.batch:
        prompt = torch.tensor([chat] * batch)

        def lib_run(fast, steps=n):
            set_fast_attention(model, fast)
            return lib.generate(model, prompt, steps, greedy=True, use_cache=True)

        def hf_run(steps=n):
            return reference.generate(prompt, max_new_tokens=steps, min_new_tokens=steps,
                                      do_sample=False, use_cache=True)

        runs = {"lib": lambda: lib_run(True), "plain": lambda: lib_run(False), "hf": hf_run}
        with torch.no_grad():
            lib_run(True, 4), lib_run(False, 4), hf_run(4)  # short untimed runs: start-up costs
            best = {k: [float("inf"), float("inf")] for k in runs}
            rounds = {k: [] for k in runs}  # wall seconds of each round
            outs = {}
            for _ in range(args.repeats):  # interleaved: lib, plain, HF, lib, ...
                for name, fn in runs.items():
                    wall, cpu, outs[name] = timed_both(fn)
                    best[name] = [min(best[name][0], wall), min(best[name][1], cpu)]
                    rounds[name].append(wall)
        assert torch.equal(outs["lib"], outs["plain"]), "fast and plain paths differ"
        first = outs["lib"][0, len(chat):].tolist()
        # before the first EOS: min_new_tokens forbids the reference's EOS, not lib's
        end = first.index(tokenizer.eos_id) if tokenizer.eos_id in first else len(first)
        assert first[:end] == outs["hf"][0, len(chat):len(chat) + end].tolist(), "tokens differ"
        tokens = batch * n
        for i, kind in enumerate(("wall", "CPU")):
            rate = {k: tokens / best[k][i] for k in runs}
            print(f"{batch:>5}  {rate['lib']:>9.1f}  {rate['plain']:>11.1f}  {rate['hf']:>9.1f}  "
                  f"{best['lib'][i] / best['hf'][i]:>6.2f}  {best['plain'][i] / best['hf'][i]:>8.2f}"
                  f"   {kind}", flush=True)
        per_round = [a / b for a, b in zip(rounds["lib"], rounds["hf"])]  # lib, then HF
        print(f"{batch:>5}  lib/HF of each round (wall): "
              f"{' '.join(f'{r:.2f}' for r in per_round)}; median "
              f"{statistics.median(per_round):.2f}", flush=True)
    print(f"load average after: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    bandwidth = copy_bandwidth()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(f"peak resident memory {peak / 1e9:.2f} GB (both models in float32)")
    print(f"weights {weight_bytes / 1e6:.0f} MB; copy bandwidth {bandwidth / 1e9:.0f} GB/s; "
          f"batch-1 bound {bandwidth / weight_bytes:.0f} tokens/s")


if __name__ == "__main__":
    main()
