"""Chapter 11's language model over a 512-token byte-level BPE, and over characters:
the BPE and character rows of chapter 15.

Run:  OMP_NUM_THREADS=1 .venv/bin/python bench/bpe_language_model.py [--seeds 0 1] \
          [--char] [--save lib/train/checkpoints/bpe_language_model.pt] \
          [--save-char lib/train/checkpoints/char_language_model.pt]

The course's `lib.BPETokenizer` is trained on the training plays (512 tokens: the 256
bytes and 256 merges; deterministic, ties to the smaller pair). Then, for each seed (the
seed of the initialisation and of the batches), chapter 11's model and recipe exactly,
on BPE tokens instead of characters: `lib.DecoderOnlyModel` (3 pre-norm layers,
d_model 64, 4 heads, d_ff 256, GELU, learned positions, no dropout, output tied to the
embedding), a context of 64 tokens, 1,500 steps of 32 random windows, AdamW (peak 3e-3,
betas 0.9/0.99, weight decay 0.1 on matrices), 50 warm-up steps then a cosine to 10%,
gradients clipped at 1.0, one thread. With ``--char`` (or ``--save-char``), chapter 11's
character model is trained on the same seeds too: its vocabulary (the 84 characters of
the training plays, sorted), model, seed, batches, optimiser and schedule are chapter
11's, so seed 0 is the model chapter 11 trains (its evaluations every 500 steps change
no weight); it is scored the same way.

Each model is scored in bits per byte (total nats over the scored tokens / ln 2 / the
UTF-8 bytes of those tokens) on the two texts of chapter 15: the first 30,000
characters of Macbeth (after one newline token as context) and all four held-out plays,
in non-overlapping windows of 64 + 1 tokens (`lib.evaluation_windows`); the tail that fills
no window is left out and the bytes are those of the scored tokens (for the span, 43 BPE
tokens or 48 characters, under 0.3% of its bytes). Chapter 15's `lib.lm_bits_per_byte`
scores that tail too, so its figure for the same weights differs in the third decimal.
With ``--save`` the first seed's BPE model is written with `lib.save_lm_checkpoint`, with
``--save-char`` the first seed's character model; each recipe holds every seed's
figures, and the script prints each file's SHA-256 to pin in
``lib/train/lm_checkpoint.py``.
"""

from __future__ import annotations

import argparse
import math
import time

import torch

import lib
from lib.teach.modern_ladder import lm_optimizer

CONTEXT, STEPS, BATCH, PEAK, VOCAB_SIZE = 64, 1500, 32, 3e-3, 512
CONFIG = dict(d_model=64, n_heads=4, n_layers=3, d_ff=256, dropout=0.0, norm_first=True,
              max_len=CONTEXT, positional="learned", activation="gelu",
              scale_embedding=False)


def bits_per_byte(model, ids, decode_bytes):
    """Bits per byte over every non-overlapping window of `ids` (the tail that fills no
    window left out; the bytes are those of the scored tokens)."""
    windows = lib.evaluation_windows(ids, CONTEXT)
    scored = windows.tokens[:, 1:].reshape(-1).tolist()
    n_bytes = len(decode_bytes(scored))
    nats = lib.lm_loss(model, windows) * len(scored)
    return nats / math.log(2) / n_bytes, len(scored), n_bytes


def train(vocab_size, train_ids, seed, steps):
    torch.manual_seed(seed)
    model = lib.DecoderOnlyModel(vocab_size, **CONFIG)
    g = torch.Generator().manual_seed(seed)
    optimizer, scheduler = lm_optimizer(model, steps, PEAK, warmup=50)
    start = time.process_time()
    result = lib.fit(model, lambda step: lib.random_windows(train_ids, CONTEXT, BATCH,
                                                            generator=g),
                     steps, optimizer, scheduler, clip_norm=1.0, log_every=0)
    cpu = time.process_time() - start
    last = sum(result.losses[-100:]) / len(result.losses[-100:])
    return model.eval(), cpu, last


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--steps", type=int, default=STEPS)
    parser.add_argument("--char", action="store_true",
                        help="also train chapter 11's character model on the same seeds")
    parser.add_argument("--save", default=None, help="write the first seed's BPE model here")
    parser.add_argument("--save-char", default=None,
                        help="write the first seed's character model here (implies --char)")
    args = parser.parse_args()
    args.char = args.char or args.save_char is not None
    torch.set_num_threads(1)
    corpus = lib.load_corpus()
    span = corpus.validation["macbeth"][:30_000]

    start = time.process_time()
    bpe = lib.BPETokenizer.train(corpus.train_text, VOCAB_SIZE)
    print(f"{bpe} trained in {time.process_time() - start:.1f} s CPU")
    encode = lambda t: torch.tensor(bpe.encode(t), dtype=torch.long)  # noqa: E731
    newline = bpe.encode("\n")
    texts = {"span": torch.tensor(newline + bpe.encode(span)),
             "four plays": encode(corpus.validation_text)}
    train_ids = encode(corpus.train_text)
    print(f"training plays: {train_ids.numel():,} tokens, "
          f"{len(corpus.train_text) / train_ids.numel():.3f} characters per token")

    chars = sorted(set(corpus.train_text))  # chapter 11's vocabulary, in its order
    assert set(corpus.validation_text) <= set(chars) and len(chars) == 84
    stoi = {c: i for i, c in enumerate(chars)}
    cenc = lambda t: torch.tensor([stoi[c] for c in t], dtype=torch.long)  # noqa: E731
    cbytes = lambda ids: "".join(chars[i] for i in ids).encode("utf-8")  # noqa: E731
    ctexts = {"span": cenc("\n" + span), "four plays": cenc(corpus.validation_text)}
    ctrain = cenc(corpus.train_text)

    results, saved, saved_char = [], None, None
    for seed in args.seeds:
        model, cpu, last = train(bpe.vocab_size, train_ids, seed, args.steps)
        row = {"seed": seed, "train_cpu_seconds": round(cpu, 1),
               "train_loss_last_100": round(last, 4)}
        for name, ids in texts.items():
            bpb, n_tok, nb = bits_per_byte(model, ids, bpe.decode_bytes)
            row[f"bpb {name}"] = round(bpb, 4)
            print(f"BPE  seed {seed}: {name}: {bpb:.4f} bits per byte "
                  f"({n_tok:,} tokens, {nb:,} bytes)")
        print(f"BPE  seed {seed}: {cpu:.0f} s CPU, last 100 steps' loss {last:.3f} nats/token")
        if args.char:
            cmodel, ccpu, clast = train(len(chars), ctrain, seed, args.steps)
            for name, ids in ctexts.items():
                bpb, n_tok, nb = bits_per_byte(cmodel, ids, cbytes)
                row[f"character model bpb {name}"] = round(bpb, 4)
                print(f"char seed {seed}: {name}: {bpb:.4f} bits per byte "
                      f"({n_tok:,} tokens, {nb:,} bytes)")
            ch11 = lib.lm_loss(cmodel, lib.evaluation_windows(ctexts["four plays"], CONTEXT,
                                                               n_windows=1000))
            row["character model nats, chapter 11's 1,000 windows"] = round(ch11, 4)
            print(f"char seed {seed}: {ch11:.4f} nats per character on chapter 11's "
                  "1,000 validation windows")
            row["character model train_cpu_seconds"] = round(ccpu, 1)
            row["character model train_loss_last_100"] = round(clast, 4)
            print(f"char seed {seed}: {ccpu:.0f} s CPU, last 100 steps' loss {clast:.3f}")
            if saved_char is None:
                saved_char = cmodel
        results.append(row)
        if saved is None:
            saved = model
    n_params = sum(p.numel() for p in saved.parameters())
    print(f"{n_params:,} parameters")
    recipe = {"steps": args.steps, "batch": BATCH, "context": CONTEXT, "peak_lr": PEAK,
              "warmup": 50, "schedule": "linear warm-up, cosine to 10%",
              "optimizer": "AdamW betas (0.9, 0.99), weight decay 0.1 on matrices",
              "clip_norm": 1.0, "seed": args.seeds[0], "threads": 1,
              "torch": str(torch.__version__), "results": results}
    if args.save:
        digest = lib.save_lm_checkpoint(
            saved, {"vocab_size": bpe.vocab_size, **CONFIG}, bpe,
            {**recipe, "bpe": f"lib.BPETokenizer.train(corpus.train_text, {VOCAB_SIZE})"},
            args.save)
        print(f"saved {args.save}: SHA-256 {digest}")
    if args.save_char:
        n_char = sum(p.numel() for p in saved_char.parameters())
        print(f"character model: {n_char:,} parameters")
        digest = lib.save_lm_checkpoint(
            saved_char, {"vocab_size": len(chars), **CONFIG}, "".join(chars),
            {**recipe, "characters": "sorted(set(corpus.train_text)), chapter 11's"},
            args.save_char)
        print(f"saved {args.save_char}: SHA-256 {digest}")


if __name__ == "__main__":
    main()
