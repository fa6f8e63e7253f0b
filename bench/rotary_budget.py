"""Chapter 14: how rotary's gain depends on the training budget, with fair controls.

Run:  .venv/bin/python bench/rotary_budget.py [--steps 1500] [--seeds 0 1] [--processes 2]
      [--write]   (rewrites lib/teach/rotary_budget_results.py, which chapter 14 reads)

Chapter 14 trains each rung of its ladder for 240 steps (11% of one pass over the
training text). This script trains four position schemes of the ladder's '+ RMSNorm'
rung (same norm, feed-forward network, heads and biases; only the positions differ)
for chapter 11's budget of 1,500 steps with chapter 14's recipe (batch 32 x 64
characters, AdamW lr 3e-3, warm-up 30, cosine to 10% over the run, clipping 1, one
thread per run), and scores held-out bits per byte on chapter 14's 1,000 windows
along the way:

- learned:    a learned vector per position, added to the input (chapter 11, GPT-2);
- rotary:     the '+ rotary' rung (positions turn queries and keys);
- none:       no position signal but the causal mask (NoPE);
- sinusoidal: chapter 6's fixed table scaled by 1/sqrt(d_model/2), so its rows have the
              token rows' norm at initialisation (the unscaled table's are 5.7 times longer).

The points before the last are read along one 1,500-step run (the cosine is still
high there), not from runs whose schedule ends at that step; chapter 14's own
240-step runs are full budgets and sit beside them. Each (scheme, seed) run is seeded
and single-threaded, so --processes changes only the wall time. Timings are CPU
seconds of the training process (time.process_time), scoring excluded.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import math
import platform
import pprint
import time
from pathlib import Path

import torch

import lib
from lib.teach import modern_ladder as ladder
from lib.train.corpus import load_corpus

CONTEXT, BATCH, LR, WARMUP = 64, 32, 3e-3, 30
EVAL_AT = (60, 120, 240, 500, 750, 1000, 1250, 1500)
SCHEMES = ("learned", "rotary", "none", "sinusoidal")
RESULTS = Path(__file__).resolve().parent.parent / "lib" / "teach" / "rotary_budget_results.py"


def data():
    """Chapter 14's cell 4: characters, training ids, held-out windows and text."""
    corpus = load_corpus()
    chars = sorted(set(corpus.train_text))
    stoi = {c: i for i, c in enumerate(chars)}

    def encode(text):
        return torch.tensor([stoi[c] for c in text], dtype=torch.long)

    train_ids, valid_ids = encode(corpus.train_text), encode(corpus.validation_text)
    heldout = lib.evaluation_windows(valid_ids, CONTEXT, n_windows=1000)
    text = "".join(chars[i] for i in heldout.tokens[:, 1:].flatten().tolist())
    return chars, train_ids, valid_ids, heldout, text


def scheme_configs(vocab_size):
    """The four position schemes on the ladder's '+ RMSNorm' rung (rotary: '+ rotary')."""
    rungs = dict(ladder.ladder_configs(vocab_size, d_model=64, n_layers=3, n_heads=4,
                                       n_kv_heads=2, d_ff=256, max_len=CONTEXT))
    base = rungs["+ RMSNorm"]
    return {"learned": base, "rotary": rungs["+ rotary"],
            "none": dataclasses.replace(base, position="none"),
            "sinusoidal": dataclasses.replace(base, position="sinusoidal",
                                              position_scale=1 / math.sqrt(64 / 2))}


def run_one(scheme, seed, steps):
    torch.set_num_threads(1)
    chars, train_ids, _, heldout, text = data()
    config = scheme_configs(len(chars))[scheme]
    cpu = time.process_time()
    r = ladder.train_rung(scheme, config, train_ids, heldout, text, steps=steps,
                          batch_size=BATCH, seed=seed, lr=LR, warmup=WARMUP,
                          eval_at=[s for s in EVAL_AT if s <= steps])
    curve = [(s, round(b, 4)) for s, b in r.curve]
    print(f"{scheme} seed {seed}: {curve}", flush=True)  # as each run ends
    return scheme, seed, curve, time.process_time() - cpu


def references():
    """Chapter 11's counting models on its whole validation text (as chapter 11), and its
    shipped 1,500-step model on the same windows (bits per byte = bits per character:
    the text is ASCII)."""
    chars, train_ids, valid_ids, heldout, text = data()
    scored = heldout.tokens[:, 1:].flatten()
    out = {}
    for n in (2, 3, 5):
        nats = lib.ngram_nats(train_ids, valid_ids, n, len(chars), alpha=0.01)
        out[f"{n}-gram"] = round(nats / math.log(2), 4)
    model, _, _ = lib.load_lm_checkpoint(lib.CHAR_LM_CHECKPOINT, lib.CHAR_LM_CHECKPOINT_SHA256,
                                         "".join(chars))
    nats = ladder.heldout_nats(model, heldout)
    out["chapter 11 model"] = round(ladder.bits_per_byte(nats, text), 4)
    assert len(text.encode("utf-8")) == scored.numel()
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--schemes", nargs="+", default=list(SCHEMES), choices=SCHEMES)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--write", action="store_true",
                        help=f"write the results to {RESULTS.relative_to(RESULTS.parents[2])}")
    args = parser.parse_args()
    jobs = [(s, seed, args.steps) for seed in args.seeds for s in args.schemes]
    if args.processes > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(args.processes,
                                 mp_context=multiprocessing.get_context("spawn")) as pool:
            runs = list(pool.map(run_one, *zip(*jobs)))
    else:
        runs = [run_one(*job) for job in jobs]
    refs = references()
    curves = {f"{scheme} {seed}": dict(curve) for scheme, seed, curve, _ in runs}
    cpu = {f"{scheme} {seed}": round(t) for scheme, seed, _, t in runs}
    steps = sorted({s for c in curves.values() for s in c})
    print(f"held-out bits per byte along {args.steps}-step runs (chapter 14's recipe)")
    print(f"{'step':>5s} " + " ".join(f"{k:>13s}" for k in curves))
    for s in steps:
        print(f"{s:5d} " + " ".join(f"{c.get(s, float('nan')):13.3f}" for c in curves.values()))
    for seed in args.seeds:
        if f"learned {seed}" in curves and f"rotary {seed}" in curves:
            gap = [curves[f"learned {seed}"][s] - curves[f"rotary {seed}"][s] for s in steps]
            print(f"seed {seed}: learned - rotary: " + ", ".join(f"{g:.3f}" for g in gap))
    print("references (chapter 11):", refs)
    print("CPU seconds of each run:", cpu)
    if args.write:
        machine = f"{platform.processor() or platform.machine()}, {platform.system()}"
        try:
            for line in open("/proc/cpuinfo"):
                if line.startswith("model name"):
                    machine = line.split(":", 1)[1].strip()
                    break
        except OSError:
            pass
        payload = dict(date=datetime.date.today().isoformat(), machine=machine,
                       torch=torch.__version__, steps=args.steps, seeds=args.seeds,
                       recipe=dict(batch=BATCH, context=CONTEXT, lr=LR, warmup=WARMUP),
                       curves=curves, references=refs, cpu_seconds=cpu)
        RESULTS.write_text(
            '"""Written by bench/rotary_budget.py --write (do not edit): chapter 14\'s budget\n'
            'study. curves["<scheme> <seed>"] maps a step to held-out bits per byte."""\n\n'
            f"RESULTS = {pprint.pformat(payload, width=88, sort_dicts=False)}\n")
        print("wrote", RESULTS)


if __name__ == "__main__":
    main()
