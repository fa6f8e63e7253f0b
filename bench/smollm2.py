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
speed far below that bound means the step is bound by per-operation overhead, not
by memory.

Results, 2026-11-25 (x86_64, 2 cores shared with other jobs). "lib" is the fast
path (`lib.model.llama.LlamaAttention`: rotary cos/sin from one table computed once,
KV cache grown in place), "plain" the same model with ``set_fast_attention(model,
False)`` (`GroupedQueryAttention`: rotary tables recomputed in every layer at every
step, ``torch.cat`` of the whole cache); both give the same tokens, bit for bit, and
the same tokens as Hugging Face (asserted).

    run (all 128 new tokens)          load avg   batch  lib tok/s  plain tok/s  HF tok/s  lib/HF  plain/HF
    --threads 2 --repeats 2, wall     3.0 -> 2.2   1      16.8       16.7        16.6     0.99    0.99
    --threads 2 --repeats 2, wall     3.0 -> 2.2   8      94.1       83.5        96.6     1.03    1.16
    --threads 2 --repeats 2, CPU      3.0 -> 2.2   1       8.7        8.6         8.6     0.99    1.00
    --threads 2 --repeats 2, CPU      3.0 -> 2.2   8      47.3       42.0        48.6     1.03    1.16
    --threads 1 --repeats 1, wall     6.2 -> 7.6   8      16.2       15.1        16.7     1.04    1.11
    --threads 1 --repeats 1, CPU      6.2 -> 7.6   8      66.2       62.1        68.8     1.04    1.11

    (previous session, before LlamaAttention, one run on a loaded machine:
     lib/HF 0.96 at batch 1, 1.20 at batch 8. An earlier two-thread run this
     session at load 8-11 gave wall ratios of 2.85 / 1.64 at batch 1 against CPU
     ratios of 1.01 / 0.94: at that load the wall times are noise.)

Peak resident memory 2.21 GB (lib's and Hugging Face's models, float32, in one
process). Weights 538 MB; copy bandwidth 45 GB/s at load 2 (10 GB/s at load 8),
so the batch-1 bound is 84 tokens/s: batch 1 runs at a fifth of it, bound by
per-operation overhead (hundreds of small operations a step), not by memory.
CPU tok/s at two threads counts both threads (and their spinning), hence about
half the wall figure. Batch 1: lib and HF are equal (0.99). Batch 8, both
settings agree: the fast path takes 6-11 % less time than the plain one and 3-4 % slower
than Hugging Face. Not the prefill: `lib.generate` takes the logits of every prompt
position (8 x 37 x 49152) where Hugging Face computes the last one only
(``logits_to_keep=1``), but that head costs 0.2 s of CPU of a 14.6 s run
(measured: prefill 0.97 s with every position's logits, 0.76 s with the last's),
1.4 %. The rest is not located yet (per-layer Python and checks, RMSNorm's six
operations, the interleaved rotary's strided slices and stack are candidates).
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
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
          "(less sensitive to other processes); lib = the fast path (LlamaAttention), "
          "lib plain = the same model with set_fast_attention(False) (ModernDecoder's "
          "attention: rotary tables per layer and step, torch.cat cache)")
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
            outs = {}
            for _ in range(args.repeats):  # interleaved: lib, plain, HF, lib, ...
                for name, fn in runs.items():
                    wall, cpu, outs[name] = timed_both(fn)
                    best[name] = [min(best[name][0], wall), min(best[name][1], cpu)]
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
    print(f"load average after: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    bandwidth = copy_bandwidth()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(f"peak resident memory {peak / 1e9:.2f} GB (both models in float32)")
    print(f"weights {weight_bytes / 1e6:.0f} MB; copy bandwidth {bandwidth / 1e9:.0f} GB/s; "
          f"batch-1 bound {bandwidth / weight_bytes:.0f} tokens/s")


if __name__ == "__main__":
    main()
