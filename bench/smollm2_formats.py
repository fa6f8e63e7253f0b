"""SmolLM2-135M greedy decoding with its weights in float32, bfloat16 and int8 blocks
(`lib.quantize_int8`), and in float32 with lib's compiled step (`lib.native_decoding`,
left out with --no-native), against Hugging Face's float32 ``generate`` (chapter 17, item 5 of
issue 36).

Run:  .venv/bin/python bench/smollm2_formats.py [--threads 2] [--rounds 5] [--new 128]
          [--batch 1 8] [--block 32] [--bpb-chars 30000]

Per batch size, the runs are interleaved round by round (HF, lib float32, lib bfloat16,
lib int8, lib float32 native, HF, ...) so neighbours' load hits all alike; the figure is the MEDIAN over
--rounds of CPU seconds of this process (and wall seconds), with the load average
printed before and after. Printed per format: bytes read per token at batch 1 (weights
counted once + the KV cache at the mean context), tokens/s, lib/HF time ratio (goal:
<= 0.67 at batch 1 with bfloat16 or int8, <= 1.0 in float32), the achieved bandwidth
(bytes per token x tokens/s) as a fraction of the read plateau measured in the same run
(goal >= 0.5 at batch 1; also against a 1 GiB read measured in each round, right
after that round's runs, so that a neighbour's load moves both alike), and bits per
byte on the first --bpb-chars characters of the held-out Macbeth (bfloat16 within 0.01
of float32).
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import time

import torch

import lib
from bandwidth import best_seconds, curve  # bench/bandwidth.py, beside this script


def bits_per_byte(model, tokenizer, chars: int) -> float:
    span = lib.load_corpus().validation["macbeth"][:chars]
    ids = torch.tensor([0] + tokenizer.encode(span))
    windows = lib.evaluation_windows(ids, context=min(1024, len(ids) - 1))
    scored = windows.tokens[:, 1:].reshape(-1).tolist()
    n_bytes = len(tokenizer.decode(scored).encode("utf-8"))
    nats = lib.lm_loss(model, windows, batch_size=1)
    return nats * len(scored) / (n_bytes * math.log(2))


def read_bandwidth(buffer: torch.Tensor, repeats: int = 3) -> float:
    """Bytes per second of ``buffer.sum()``, the best of `repeats` (a read of the buffer)."""
    return buffer.numel() * buffer.element_size() / best_seconds(buffer.sum, repeats)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--new", type=int, default=128)
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--block", type=int, default=32)
    parser.add_argument("--bpb-chars", type=int, default=30_000)
    parser.add_argument("--bandwidth-mib", type=int, default=2048)
    parser.add_argument("--no-native", action="store_true",
                        help="leave out lib's compiled step (lib.native_decoding)")
    args = parser.parse_args()
    os.environ["HF_HUB_OFFLINE"] = "1"
    torch.set_num_threads(args.threads)
    import transformers

    transformers.logging.set_verbosity_error()
    path = lib.smollm2_path()
    model, tokenizer = lib.load_smollm2()
    reference = transformers.AutoModelForCausalLM.from_pretrained(
        path.parent, gguf_file=path.name, dtype=torch.float32).eval()
    formats = {"float32": model, "bfloat16": lib.load_smollm2(torch.bfloat16)[0],
               "int8": lib.quantize_int8(model, args.block)}
    if not args.no_native:  # float32 with the compiled step (lib.native_decoding)
        formats["f32 native"] = lib.native_decoding(lib.load_smollm2()[0])
    print(f"load average before: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    plateau = statistics.median(r[1] for r in curve(args.bandwidth_mib, 3) if r[0] >= min(256, args.bandwidth_mib)) * 1e9
    big = torch.empty(2**30 // 4).uniform_()  # 1 GiB, 32 times this CPU's L3
    chat = tokenizer.apply_chat([{"role": "user", "content": "What is the capital of France?"}])
    cfg = model.config
    n = args.new
    for batch in args.batch:
        prompt = torch.tensor([chat] * batch)
        runs = {"HF": lambda s=n: reference.generate(prompt, max_new_tokens=s, min_new_tokens=s,
                                                      do_sample=False)}
        for name, m in formats.items():
            runs[name] = lambda s=n, m=m: lib.generate(m, prompt, s, greedy=True)
        times = {k: [] for k in runs}
        reads = []  # the read bandwidth measured in each round, beside its runs
        with torch.no_grad():
            for fn in runs.values():
                fn(4)
            for _ in range(args.rounds):
                for name, fn in runs.items():
                    wall, cpu = time.perf_counter(), time.process_time()
                    fn()
                    times[name].append((time.process_time() - cpu, time.perf_counter() - wall))
                reads.append(read_bandwidth(big))
        hf = statistics.median(c for c, _ in times["HF"])
        print(f"batch {batch}: median of {args.rounds} rounds (CPU s of the process; wall)")
        for name in runs:
            cpu = statistics.median(c for c, _ in times[name])
            wall = statistics.median(w for _, w in times[name])
            line = f"  {name:>8}  {batch * n / wall:7.1f} tok/s wall  lib/HF CPU {cpu / hf:5.2f}"
            if name != "HF" and batch == 1:
                kv = 2 * cfg.n_layers * cfg.n_kv_heads * (cfg.d_model // cfg.n_heads) * (
                    len(chat) + n / 2) * (4 if "32" in name else 2)
                per_token = lib.weight_bytes(formats[name]) + kv
                # per round: achieved bytes/s over the read bandwidth of the same round
                fractions = [per_token * n / w / r for (_, w), r in zip(times[name], reads)]
                line += (f"  {per_token / 1e6:6.1f} MB/token  bandwidth {per_token * n / wall / 1e9:5.1f}"
                         f" GB/s = {per_token * n / wall / plateau:4.2f} of the plateau, "
                         f"{statistics.median(fractions):4.2f} of each round's read "
                         f"({min(fractions):.2f}-{max(fractions):.2f})")
            print(line, flush=True)
        if batch == 1:
            print(f"  read bandwidth in the rounds: "
                  f"{', '.join(f'{r / 1e9:.1f}' for r in reads)} GB/s", flush=True)
    print(f"read plateau {plateau / 1e9:.1f} GB/s; load average after: "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    for name, m in formats.items():
        if name == "f32 native":  # scoring runs whole windows, never the one-token step
            continue
        print(f"bits per byte, {args.bpb_chars:,d} characters of Macbeth, {name}: "
              f"{bits_per_byte(m, tokenizer, args.bpb_chars):.4f}", flush=True)


if __name__ == "__main__":
    main()
