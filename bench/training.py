"""Benchmark: steps and seconds to reach chapter 8's accuracy target, lib.Transformer vs nn.Transformer.

Both models get the same sizes, hyper-parameters, data stream, loss, optimizer,
schedule and training loop (`lib.train.training.fit`). Only the encoder/decoder stack
differs: `lib`'s EncoderLayer/DecoderLayer, or PyTorch's nn.TransformerEncoder /
nn.TransformerDecoder (post-LN, no final norm, like lib's post-LN model), wrapped
with lib's own embeddings, positional encoding and output projection.

The runs are interleaved (lib, torch, torch, lib, ...) in one process so that a
change in the machine's load hits both. Seconds count training only: the time
spent evaluating is measured and subtracted.

    .venv/bin/python bench/training.py [--repeats 2] [--threads 1] [--target 0.99]
"""

from __future__ import annotations

import argparse
import random
import time

import torch
from torch import nn

import lib
from lib import DATE_VOCAB, make_batch, make_date_split, sample_pairs
from lib import exact_match
from lib import fit, noam_optimizer

# Chapter 8's model and training settings.
CONFIG = dict(d_model=64, n_heads=4, n_layers=2, d_ff=256, dropout=0.1, max_len=64)
BATCH, WARMUP, FACTOR, SMOOTHING, CLIP = 128, 200, 0.5, 0.1, 1.0


class TorchSeq2Seq(nn.Module):
    """nn.TransformerEncoder/Decoder between lib's embeddings and output layer, with lib's interface.

    encode(src, *, src_mask) and decode(tgt, memory, *, src_mask, tgt_mask) take lib's
    masks (bool, True = may attend, keyword-only as in lib) and translate them to
    PyTorch's (True = blocked).
    """

    def __init__(self, vocab_size, d_model, n_heads, n_layers, d_ff, dropout, max_len):
        super().__init__()
        self.d_model = d_model
        self.src_embed = lib.TokenEmbedding(vocab_size, d_model)
        self.tgt_embed = lib.TokenEmbedding(vocab_size, d_model)
        self.src_pos = lib.SinusoidalPositionalEncoding(d_model, max_len=max_len, dropout=dropout)
        self.tgt_pos = lib.SinusoidalPositionalEncoding(d_model, max_len=max_len, dropout=dropout)
        enc = nn.TransformerEncoderLayer(d_model, n_heads, d_ff, dropout, batch_first=True)
        dec = nn.TransformerDecoderLayer(d_model, n_heads, d_ff, dropout, batch_first=True)
        self.encoder = nn.TransformerEncoder(enc, n_layers, norm=None, enable_nested_tensor=False)
        self.decoder = nn.TransformerDecoder(dec, n_layers, norm=None)
        self.generator = nn.Linear(d_model, vocab_size, bias=False)
        # The same initialisation as lib.Transformer: embedding tables N(0, 1/d_model),
        # every other matrix Xavier-uniform, chosen by the owning module's type.
        tables = {id(m.weight) for m in self.modules() if isinstance(m, nn.Embedding)}
        for p in self.parameters():
            if p.dim() > 1:
                if id(p) in tables:
                    nn.init.normal_(p, mean=0.0, std=d_model**-0.5)
                else:
                    nn.init.xavier_uniform_(p)

    @staticmethod
    def _blocked_keys(src_mask):
        return None if src_mask is None else ~src_mask[:, 0, 0, :]  # (B, n) True = PAD

    def encode(self, src, *, src_mask=None):
        x = self.src_pos(self.src_embed(src))
        return self.encoder(x, src_key_padding_mask=self._blocked_keys(src_mask))

    def decode(self, tgt, memory, *, src_mask=None, tgt_mask=None):
        # lib's tgt_mask is causal AND key-not-PAD; PAD keys only follow the real ones, so
        # for every real query the causal mask alone is equivalent.
        m = tgt.shape[1]
        causal_blocked = torch.ones(m, m, dtype=torch.bool, device=tgt.device).triu(1)
        y = self.tgt_pos(self.tgt_embed(tgt))
        y = self.decoder(y, memory, tgt_mask=causal_blocked, memory_key_padding_mask=self._blocked_keys(src_mask))
        return self.generator(y)

    def forward(self, src, tgt, *, src_mask=None, tgt_mask=None):
        return self.decode(tgt, self.encode(src, src_mask=src_mask), src_mask=src_mask, tgt_mask=tgt_mask)


def build(kind: str) -> nn.Module:
    torch.manual_seed(0)
    V = len(DATE_VOCAB)
    if kind == "lib":
        return lib.Transformer(V, V, **CONFIG)
    return TorchSeq2Seq(V, **CONFIG)


def run(kind: str, args, split, test) -> dict:
    model = build(kind)
    optimizer, scheduler = noam_optimizer(model, CONFIG["d_model"], WARMUP, FACTOR)
    rng = random.Random(0)  # the same batches for both models
    eval_seconds = [0.0]

    def evaluate():
        start = time.perf_counter()
        value = exact_match(model, test, DATE_VOCAB, max_len=20)
        eval_seconds[0] += time.perf_counter() - start
        return value

    res = fit(model, lambda s: make_batch(sample_pairs(split.train, BATCH, rng), DATE_VOCAB), args.max_steps,
              optimizer, scheduler, SMOOTHING, evaluate=evaluate, eval_every=args.eval_every,
              target=args.target, clip_norm=CLIP)
    train_seconds = res.seconds - eval_seconds[0]
    return {
        "kind": kind, "params": sum(p.numel() for p in model.parameters()), "reached": res.reached_at,
        "steps": res.steps, "seconds": train_seconds, "per_step": train_seconds / res.steps,
        "accuracy": res.evals[-1][1],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=1, help="runs per model (interleaved)")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (chapter 8 uses 1)")
    parser.add_argument("--target", type=float, default=0.99, help="held-out exact match to reach")
    parser.add_argument("--eval-every", type=int, default=50)
    parser.add_argument("--max-steps", type=int, default=1500)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    split = make_date_split(n_held_out=1500, first_year=1950, last_year=2049, seed=0)
    test = sample_pairs(split.held_out[500:], 1000, random.Random(2))  # chapter 8's test pairs
    results = []
    for r in range(args.repeats):
        for kind in (("lib", "torch") if r % 2 == 0 else ("torch", "lib")):
            results.append(run(kind, args, split, test))
            x = results[-1]
            print(f"run {r + 1} {kind:5s}  params {x['params']:,d}  reached {args.target} at step {x['reached']}  "
                  f"({x['steps']} steps, {x['seconds']:.1f} s training, {1000 * x['per_step']:.1f} ms/step, "
                  f"accuracy {x['accuracy']:.3f})", flush=True)

    def mean(kind, key):
        values = [x[key] for x in results if x["kind"] == kind]
        return sum(values) / len(values)

    print(f"\n{'':8s}{'steps':>8s}{'seconds':>10s}{'ms/step':>10s}")
    for kind in ("lib", "torch"):
        print(f"{kind:8s}{mean(kind, 'steps'):8.0f}{mean(kind, 'seconds'):10.1f}{1000 * mean(kind, 'per_step'):10.1f}")
    print(f"\nratio lib/torch: seconds to target {mean('lib', 'seconds') / mean('torch', 'seconds'):.2f}, "
          f"steps to target {mean('lib', 'steps') / mean('torch', 'steps'):.2f}, "
          f"time per step {mean('lib', 'per_step') / mean('torch', 'per_step'):.2f}  (goal: <= 1.2)")


if __name__ == "__main__":
    main()
