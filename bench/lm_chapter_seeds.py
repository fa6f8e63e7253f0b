"""Chapter 11's language model on several seeds: every figure its prose reads.

Run:  .venv/bin/python bench/lm_chapter_seeds.py [--seeds 0 1] [--scale-embedding] [--steps 1500]

Trains the chapter's model (3 layers, d_model 64, 1,500 steps of 32 x 64 characters,
AdamW, warm-up + cosine, clipping 1.0, one thread) exactly as the notebook does, one
run per seed (the seed of the initialisation and of the batches), and prints for each:
the loss before training, the validation loss, the loss by position in the window,
the sample statistics at each temperature against held-out text cut the same way,
greedy against beam search, and the n-gram baselines (which do not depend on the seed).
``--scale-embedding`` multiplies the embedding by √d_model (the paper's choice) instead
of GPT-2's plain embedding.
"""

from __future__ import annotations

import argparse
import re

import torch

import lib
from lib.teach.modern_ladder import lm_optimizer

CONTEXT, STEPS, BATCH, PEAK = 64, 1500, 32, 3e-3
PROMPT_LEN, N_SAMPLES = 16, 40
SETTINGS = [("greedy", dict(greedy=True)), ("T = 0.5", dict(temperature=0.5)),
            ("T = 0.8", dict(temperature=0.8)), ("T = 1.0", dict(temperature=1.0)),
            ("T = 1.5", dict(temperature=1.5)), ("T = 1.0, top-k 5", dict(top_k=5))]


def words(text):
    return re.findall(r"[a-z]+", text.lower())


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--scale-embedding", action="store_true")
    parser.add_argument("--steps", type=int, default=STEPS, help="training steps (the chapter: 1500)")
    args = parser.parse_args()
    steps = args.steps
    torch.set_num_threads(1)
    corpus = lib.load_corpus()
    chars = sorted(set(corpus.train_text))
    stoi = {c: i for i, c in enumerate(chars)}
    encode = lambda t: torch.tensor([stoi[c] for c in t], dtype=torch.long)  # noqa: E731
    decode = lambda ids: "".join(chars[i] for i in ids.tolist())  # noqa: E731
    train_ids, valid_ids = encode(corpus.train_text), encode(corpus.validation_text)
    V = len(chars)
    train_words = words(corpus.train_text)
    vocabulary, word_pairs = set(train_words), set(zip(train_words, train_words[1:]))

    def measure(texts):
        ws = [words(t) for t in texts]
        w = [x for row in ws for x in row]
        p = [pair for row in ws for pair in zip(row, row[1:])]
        return sum(x in vocabulary for x in w) / len(w), sum(x in word_pairs for x in p) / len(p)

    for n in (2, 3, 4, 5):
        print(f"{n}-gram add-0.01: {lib.ngram_nats(train_ids, valid_ids, n, V):.4f} nats/char")
    valid = lib.evaluation_windows(valid_ids, CONTEXT, n_windows=1000)
    real = [decode(w[PROMPT_LEN:CONTEXT]) for w in valid.tokens]  # 1000 windows, 48 characters
    print("held-out text, words %.3f pairs %.3f" % measure(real))
    prompt = encode("Is this a dagger")
    for seed in args.seeds:
        torch.manual_seed(seed)
        model = lib.DecoderOnlyModel(
            V, d_model=64, n_heads=4, n_layers=3, d_ff=256, dropout=0.0, norm_first=True,
            max_len=CONTEXT, positional="learned", activation="gelu",
            scale_embedding=args.scale_embedding,
        )
        g = torch.Generator().manual_seed(seed)
        optimizer, scheduler = lm_optimizer(model, steps, PEAK, warmup=50)
        before = lib.lm_loss(model, valid)
        lib.fit(model, lambda step: lib.random_windows(train_ids, CONTEXT, BATCH, generator=g),
                steps, optimizer, scheduler, clip_norm=1.0, log_every=0)
        after = lib.lm_loss(model, valid)
        print(f"seed {seed}: before {before:.4f}, validation {after:.4f} nats/char")
        model.eval()
        with torch.no_grad():
            x = valid.tokens
            nll = torch.nn.functional.cross_entropy(model(x[:, :-1]).transpose(1, 2), x[:, 1:],
                                                    reduction="none").mean(0)
        print("  by position:", {p: round(float(nll[p]), 3) for p in (0, 1, 3, 7, 15, 31, 63)},
              f"mean 16-63 {float(nll[16:].mean()):.4f}")
        for name, kw in SETTINGS:
            line = f"  {name:18s}"
            for draw in (1, 2):
                gen = torch.Generator().manual_seed(draw)
                rows = lib.generate(model, prompt.repeat(N_SAMPLES, 1), CONTEXT - PROMPT_LEN,
                                    generator=gen, **kw)[:, PROMPT_LEN:]
                line += " words %.3f pairs %.3f" % measure([decode(r) for r in rows])
            print(line)
        gains = []
        for start in range(0, 40_000, 4_000):
            p = valid_ids[start : start + 16]
            greedy = lib.generate(model, p, 24, greedy=True)[16:]
            _, beam = lib.lm_beam_search(model, p, 24, 8)
            gains.append(beam - lib.continuation_log_prob(model, p, greedy))
        print(f"  beam 8 - greedy over 24 characters, 10 prompts: min {min(gains):.2f}, "
              f"mean {sum(gains) / len(gains):.2f} nats")


if __name__ == "__main__":
    main()
