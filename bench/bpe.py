"""Training time and compression of lib's BPE tokenizer against the `tokenizers` package.

Run:  .venv/bin/python bench/bpe.py [--sizes 512 1024 4096] [--repeats 3]

Both are trained on the training plays of the Shakespeare corpus (`make data`)
with the same vocabulary size and GPT-2's byte-level pre-tokeniser, then encode
the four held-out validation plays. Printed per vocabulary size: the training
time of each (lib is pure Python, one core; `tokenizers` is Rust and may use
both cores), the compression in bytes per token on the validation plays, and
whether the merges are identical. lib is trained twice: with its own tie-breaking
(smaller ids first) and with the order `tokenizers` breaks ties in ("gpt2").
Each time is the best of --repeats runs (3 by default): the machine is shared, and
one wall-clock reading measures the neighbours as much as the code. Figures, not a
timed test.
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import lib
from lib.train.bpe import BPETokenizer, train_tokenizers_reference


def seconds(fn):
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[512, 1024, 4096])
    parser.add_argument("--repeats", type=int, default=3, help="best of this many training runs")
    args = parser.parse_args()

    corpus = lib.load_corpus()
    train, valid = corpus.train_text, corpus.validation_text
    n_bytes = len(valid.encode("utf-8"))
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print(f"training text: {len(corpus.train)} works, {len(train.encode()):,} bytes; "
          f"validation: {len(corpus.validation)} plays, {n_bytes:,} bytes")
    print(f"{'|V|':>6} {'lib s':>7} {'tok s':>7} {'lib B/tok':>10} {'tok B/tok':>10} "
          f"{'diff':>7} {'same set':>9} {'same order (gpt2 ties)':>23}")
    for size in args.sizes:
        t_ours, ours = min((seconds(lambda: BPETokenizer.train(train, size)) for _ in range(args.repeats)),
                           key=lambda r: r[0])
        t_ref, (reference, merges) = min(
            (seconds(lambda: train_tokenizers_reference(train, size)) for _ in range(args.repeats)),
            key=lambda r: r[0],
        )
        gpt2 = BPETokenizer.train(train, size, tie_break="gpt2")
        n_ours, n_ref = len(ours.encode(valid)), len(reference.encode(valid).ids)
        assert ours.decode(ours.encode(valid)) == valid
        print(f"{size:>6} {t_ours:>7.2f} {t_ref:>7.2f} {n_bytes / n_ours:>10.3f} {n_bytes / n_ref:>10.3f} "
              f"{(n_ours - n_ref) / n_ref:>+7.2%} {str(set(ours.merge_bytes) == set(merges)):>9} "
              f"{str(gpt2.merge_bytes == merges):>23}")
    print(f"for comparison: characters {n_bytes / len(valid):.3f} B/token "
          f"({len(set(train))} distinct characters in the training text), bytes 1.000 B/token")


if __name__ == "__main__":
    main()
