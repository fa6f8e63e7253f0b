"""Training throughput of lib.DecoderOnlyModel vs the same model built from torch.nn layers.

Run:  .venv/bin/python bench/lm_throughput.py [--threads 2] [--pairs 20]

The torch model is nn.Embedding (tokens, × √d_model as lib does) + nn.Embedding
(learned positions) + nn.TransformerEncoder of pre-LN nn.TransformerEncoderLayers
(ReLU, dropout 0, batch_first) run with a causal mask (is_causal=True) + a final
LayerNorm + an output layer tied to the token embedding, the same sizes, with lib's
weights copied in (`lib.copy_encoder_layer_to_torch`), so both compute the same
logits (checked). One training step = forward, cross-entropy, backward, AdamW step,
on the same batch. Steps are interleaved (lib, torch, lib, torch, ...) so load from
other processes hits both alike; the figure of merit is the median of the per-pair
time ratios lib/torch. Goal: <= 1.1.
"""

from __future__ import annotations

import argparse
import math
import platform
import statistics
import time

import torch
import torch.nn.functional as F
from torch import nn

import lib


class TorchDecoderOnly(nn.Module):
    def __init__(self, vocab, d_model, n_heads, n_layers, d_ff, max_len):
        super().__init__()
        self.d_model = d_model
        self.embed = nn.Embedding(vocab, d_model)
        self.pos = nn.Embedding(max_len, d_model)
        layer = nn.TransformerEncoderLayer(d_model, n_heads, d_ff, dropout=0.0, batch_first=True, norm_first=True)
        self.stack = nn.TransformerEncoder(layer, n_layers, enable_nested_tensor=False)
        self.final_norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, tokens):
        L = tokens.shape[1]
        x = self.embed(tokens) * math.sqrt(self.d_model) + self.pos(torch.arange(L))
        mask = nn.Transformer.generate_square_subsequent_mask(L)
        x = self.stack(x, mask=mask, is_causal=True)
        return self.head(self.final_norm(x))


def copy_weights(ours: lib.DecoderOnlyModel, theirs: TorchDecoderOnly) -> None:
    with torch.no_grad():
        theirs.embed.weight.copy_(ours.embed.embedding.weight)
        theirs.pos.weight.copy_(ours.pos.embedding.weight)
        for a, b in zip(ours.layers, theirs.stack.layers):
            lib.copy_encoder_layer_to_torch(a, b)
        theirs.final_norm.load_state_dict(ours.final_norm.state_dict())


def step(model, optimizer, tokens) -> float:
    start = time.perf_counter()
    logits = model(tokens[:, :-1])
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--pairs", type=int, default=20)
    parser.add_argument("--batch", type=int, default=12)
    parser.add_argument("--context", type=int, default=64)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    sizes = dict(d_model=128, n_heads=4, n_layers=4, d_ff=512)
    ours = lib.DecoderOnlyModel(84, dropout=0.0, norm_first=True, max_len=args.context, **sizes).train()
    theirs = TorchDecoderOnly(84, max_len=args.context, **sizes).train()
    copy_weights(ours, theirs)
    tokens = torch.randint(0, 84, (args.batch, args.context + 1), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ours.eval(), theirs.eval()
        diff = (ours(tokens[:, :-1]) - theirs(tokens[:, :-1])).abs().max().item()
        ours.train(), theirs.train()
    print(f"torch {torch.__version__}, {platform.machine()}, {args.threads} threads; batch {args.batch} x "
          f"{args.context}, {sizes}; max |logit difference| lib vs torch: {diff:.1e}")
    assert diff < 1e-3
    opt_ours = torch.optim.AdamW(ours.parameters(), lr=1e-3)
    opt_theirs = torch.optim.AdamW(theirs.parameters(), lr=1e-3)
    for _ in range(3):  # warm-up
        step(ours, opt_ours, tokens), step(theirs, opt_theirs, tokens)
    ratios, t_ours, t_theirs = [], [], []
    for _ in range(args.pairs):
        a, b = step(ours, opt_ours, tokens), step(theirs, opt_theirs, tokens)
        ratios.append(a / b), t_ours.append(a), t_theirs.append(b)
    n_tok = args.batch * args.context
    print(f"lib   median {statistics.median(t_ours) * 1e3:7.1f} ms/step  "
          f"{n_tok / statistics.median(t_ours):8.0f} tokens/s")
    print(f"torch median {statistics.median(t_theirs) * 1e3:7.1f} ms/step  "
          f"{n_tok / statistics.median(t_theirs):8.0f} tokens/s")
    print(f"median per-pair ratio lib/torch: {statistics.median(ratios):.3f} (goal <= 1.1)")


if __name__ == "__main__":
    main()
