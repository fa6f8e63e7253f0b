"""Write tests/js/fixtures.json: fixed numbers from `lib` for the widgets' JavaScript unit
tests (tests/js/widgets.test.mjs, run by `node --test`, and from tests/test_widgets_js.py).

    .venv/bin/python tests/js/make_fixtures.py

Every expected number here is computed by lib (torch), never by the JavaScript under test.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

import lib
from lib.train.dates import DATE_VOCAB
from lib.widgets.dates import date_steps, export_weights, rounded_model

OUT = Path(__file__).with_name("fixtures.json")


def small_date_model(seed: int, norm_first: bool):
    """A small seeded lib.Transformer over the date vocabulary, its LayerNorms perturbed
    so that a mistake in their weights or biases shows."""
    torch.manual_seed(seed)
    model = lib.TransformerConfig(src_vocab_size=len(DATE_VOCAB), tgt_vocab_size=len(DATE_VOCAB), d_model=16,
                                  n_heads=2, n_layers=2, d_ff=32, dropout=0.0, max_len=32,
                                  norm_first=norm_first).build().eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.add_(0.3 * torch.randn_like(p))
            elif name.endswith("bias"):
                p.add_(0.1 * torch.randn_like(p))
    return model


def date_fixture(seed: int, norm_first: bool) -> dict:
    model = small_date_model(seed, norm_first)
    weights, layout = export_weights(model)
    twin = rounded_model(model)
    c = model.config
    config = {"d_model": c.d_model, "n_heads": c.n_heads, "n_layers": c.n_layers, "d_ff": c.d_ff,
              "norm_first": c.norm_first, "eps": c.layer_norm_eps, "scale_embedding": c.scale_embedding,
              "itos": ["<pad>", "<bos>", "<eos>", *DATE_VOCAB.itos[3:]], "pad_id": 0, "bos_id": 1, "eos_id": 2,
              "max_len": 12, "top_k": 3, "max_source": 24}
    runs = [date_steps(twin, s, DATE_VOCAB, max_len=12, top_k=3) for s in ("2019-03-07", "1950-1-1", "2100-12-31")]
    return {"weights": weights, "layout": layout, "config": config, "runs": runs,
            "first_values": twin.src_embed.embedding.weight.detach().flatten()[:8].double().tolist()}


def heads_fixture() -> dict:
    from lib.widgets.heads import _projections, head_weights

    x = 2.0 * torch.randn(6, 8, generator=torch.Generator().manual_seed(11))
    cases = [{"n_heads": n, "head": h, "projections": _projections(8, n, 3),
              "weights": head_weights(x, n, h, seed=3).double().tolist()} for n, h in ((1, 0), (2, 1), (4, 2), (8, 7))]
    return {"x": x.double().tolist(), "cases": cases}


def positions_fixture() -> dict:
    pe = lib.sinusoidal_positional_encoding(100, 64).double()
    cases = []
    for a, b, lo, hi in ((5, 12, 0, 5), (10, 20, 0, 63), (60, 70, 56, 63), (0, 3, 0, 0), (99, 0, 31, 32)):
        va, vb = pe[a, lo : hi + 1], pe[b, lo : hi + 1]
        norms = float(va.norm() * vb.norm())
        cases.append({"a": a, "b": b, "lo": lo, "hi": hi, "values_a": va.tolist(), "values_b": vb.tolist(),
                      "dot": float(va @ vb), "cosine": float(va @ vb) / norms if norms else None})
    return {"d_model": 64, "cases": cases}


def schedule_fixture() -> dict:
    cases = []
    for d, w, f, total in ((512, 4000, 1.0, 20000), (64, 200, 0.5, 20000), (256, 1000, 2.0, 500), (16, 100, 3.9, 2000)):
        curve = [lib.noam_lr(s, d, w, f) for s in range(1, total + 1)]
        best = max(range(total), key=curve.__getitem__)
        probes = sorted({1, min(w, total), total, max(1, total // 3)})
        cases.append({"d_model": d, "warmup": w, "factor": f, "total": total, "peak_step": best + 1,
                      "peak_lr": curve[best], "probes": [[s, curve[s - 1]] for s in probes]})
    return {"cases": cases}


def main() -> None:
    fixtures = {"dates": [date_fixture(0, False), date_fixture(1, True)], "heads": heads_fixture(),
                "positions": positions_fixture(), "schedule": schedule_fixture()}
    OUT.write_text(json.dumps(fixtures) + "\n")
    print(f"wrote {OUT} ({OUT.stat().st_size:,d} bytes)")


if __name__ == "__main__":
    main()
