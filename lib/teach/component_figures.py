"""A picture for every component, drawn from the code (issue 35).

Introduced on the course's first page; each figure opens the section of the chapter
that introduces its component (chapters 2, 4, 5, 6, 7, 11, 13 and 14).

Every figure is SVG text in one visual language (`PALETTE`: a colour per role,
the same box, arrow and ⊕ everywhere) and every size written in it is read from
`lib`: the modules are built from lib's own configurations (chapter 8's date
model, `date_model_config`, for the 2017 parts; `lib.ModernConfig()`'s defaults
for today's block), run once with forward hooks, and the shapes the tensors had
are the ones printed. Which tiles tiled attention visits comes from
`lib.model.tiled._key_blocks`, the loop the computation runs. Change the code or
the configuration and the figure follows. ``tools/diagrams.py`` writes them to
``book/figures/`` (``--check`` says if one is stale).

`FIGURES` maps a name to (function, alt text, caption); the alt text states the
figure's point.
"""

from __future__ import annotations

import html
import inspect

import torch

__all__ = ["FIGURES", "PALETTE", "figure_svg", "figure_names", "recorded_shapes"]

# role -> (fill, stroke): the one visual language of the course's diagrams
PALETTE = {
    "tensor": ("#ffffff", "#333333"),
    "attention": ("#dbe9f6", "#1a5fb4"),
    "ffn": ("#fde7d2", "#b35900"),
    "norm": ("#ececec", "#555555"),
    "position": ("#e2f2e2", "#2e7d32"),
    "cache": ("#efe3f6", "#6a3d9a"),
    "output": ("#fff6c7", "#8a6d00"),
}
FONT = "system-ui, -apple-system, 'Segoe UI', sans-serif"
MONO = "ui-monospace, 'SFMono-Regular', Menlo, monospace"


class _Svg:
    """A few drawing primitives writing SVG elements, in the course's style."""

    def __init__(self, width: int, height: int, title: str, desc: str):
        self.width, self.height = width, height
        self.parts = [
            f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
            f'width="{width}" height="{height}" role="img" aria-labelledby="t d">',
            f'<title id="t">{html.escape(title)}</title><desc id="d">{html.escape(desc)}</desc>',
            '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
            'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" '
            'fill="#333"/></marker></defs>',
            f'<rect width="{width}" height="{height}" fill="#ffffff"/>',
        ]

    def text(self, x, y, s, size=13, anchor="middle", mono=False, colour="#111", weight="normal"):
        family = MONO if mono else FONT
        self.parts.append(
            f'<text x="{x:g}" y="{y:g}" font-family="{family}" font-size="{size}" '
            f'text-anchor="{anchor}" fill="{colour}" font-weight="{weight}">{html.escape(str(s))}</text>')

    def box(self, x, y, w, h, label, shape=None, role="tensor", dashed=False):
        """A box centred on x, top at y; ``label`` above ``shape`` (monospace)."""
        fill, stroke = PALETTE[role]
        dash = ' stroke-dasharray="5 3"' if dashed else ""
        self.parts.append(f'<rect x="{x - w / 2:g}" y="{y:g}" width="{w:g}" height="{h:g}" rx="6" '
                          f'fill="{fill}" stroke="{stroke}" stroke-width="1.6"{dash}/>')
        if shape is None:
            self.text(x, y + h / 2 + 5, label)
        else:
            self.text(x, y + h / 2 - 3, label)
            self.text(x, y + h / 2 + 13, shape, size=11, mono=True, colour="#444")

    def arrow(self, x1, y1, x2, y2, colour="#333", dashed=False):
        dash = ' stroke-dasharray="4 3"' if dashed else ""
        self.parts.append(f'<line x1="{x1:g}" y1="{y1:g}" x2="{x2:g}" y2="{y2:g}" stroke="{colour}" '
                          f'stroke-width="1.5" marker-end="url(#arrow)"{dash}/>')

    def path(self, d, colour="#333", arrow=True):
        end = ' marker-end="url(#arrow)"' if arrow else ""
        self.parts.append(f'<path d="{d}" fill="none" stroke="{colour}" stroke-width="1.5"{end}/>')

    def plus(self, x, y, r=9):
        """The residual addition ⊕."""
        self.parts.append(f'<circle cx="{x:g}" cy="{y:g}" r="{r}" fill="#fff" stroke="#333" '
                          'stroke-width="1.5"/>')
        self.parts.append(f'<path d="M{x - r + 3:g},{y:g} H{x + r - 3:g} M{x:g},{y - r + 3:g} '
                          f'V{y + r - 3:g}" stroke="#333" stroke-width="1.5"/>')

    def rect(self, x, y, w, h, fill, stroke="#333", width=1.0):
        self.parts.append(f'<rect x="{x:g}" y="{y:g}" width="{w:g}" height="{h:g}" fill="{fill}" '
                          f'stroke="{stroke}" stroke-width="{width}"/>')

    def svg(self) -> str:
        return "\n".join(self.parts + ["</svg>"]) + "\n"


def _shape(t) -> str:
    return "(" + ", ".join(str(int(s)) for s in t) + ")"


def recorded_shapes(model: torch.nn.Module, *inputs, **kwargs) -> dict[str, tuple]:
    """{sub-module name: the shape of its output} from one forward pass of ``model``
    (`lib.teach.diagram.record_forward`): the sizes the figures print."""
    from lib.teach.diagram import record_forward

    seen = record_forward(model.eval(), *inputs, **kwargs)
    return {name: tuple(r["output"].shape) for name, r in seen.items() if torch.is_tensor(r["output"])}


def _date_model_run(m: int = 6, n: int = 8):
    """Chapter 8's date model (lib.date_model_config, 2017 layers) run on n source and
    m target tokens: (model, {module: output shape})."""
    from lib.model.attention import causal_mask
    from lib.teach.probes import date_model_config

    torch.manual_seed(0)
    model = date_model_config().build().eval()
    src = torch.randint(3, model.config.src_vocab_size, (1, n))
    tgt = torch.randint(3, model.config.tgt_vocab_size, (1, m))
    return model, recorded_shapes(model, src, tgt, tgt_mask=causal_mask(m)[None, None])


def _modern_run(t: int = 8):
    """`lib.ModernConfig()`'s default block (RMSNorm, rotary, SwiGLU, grouped-query) run
    on t tokens: (model, {module: output shape})."""
    from lib.model.modern import ModernConfig

    torch.manual_seed(0)
    model = ModernConfig().build().eval()
    tokens = torch.randint(0, model.config.vocab_size, (1, t))
    return model, recorded_shapes(model, tokens)


# --------------------------------------------------------------------------- the figures


def attention_svg() -> str:
    """Scaled dot-product attention on the shapes of one head of chapter 8's model."""
    from lib.model.attention import scaled_dot_product_attention

    model, shapes = _date_model_run()
    head = model.encoder_layers[0].self_attn
    m, n, d_k = 3, 4, head.d_k
    q, k, v = torch.randn(m, d_k), torch.randn(n, d_k), torch.randn(n, d_k)
    out, weights = scaled_dot_product_attention(q, k, v)
    s = _Svg(560, 430, "Scaled dot-product attention",
             FIGURES["attention"][1])
    s.box(110, 20, 120, 44, "queries Q", _shape(q.shape))
    s.box(280, 20, 120, 44, "keys K", _shape(k.shape))
    s.box(450, 20, 120, 44, "values V", _shape(v.shape))
    s.box(195, 100, 210, 44, "scores Q Kᵀ / √d_k", _shape(weights.shape), "attention")
    s.arrow(110, 64, 170, 100)
    s.arrow(280, 64, 220, 100)
    s.box(195, 180, 210, 44, "mask (optional): −∞", _shape(weights.shape), "attention", dashed=True)
    s.arrow(195, 144, 195, 180)
    s.box(195, 260, 210, 44, "softmax over each row", _shape(weights.shape), "attention")
    s.arrow(195, 224, 195, 260)
    s.box(320, 350, 230, 44, "weighted sum of values", _shape(out.shape), "output")
    s.arrow(195, 304, 290, 350)
    s.arrow(450, 64, 360, 350)
    s.text(20, 420, f"sizes: one head of chapter 8's model, d_k = {d_k}; {m} queries, {n} keys",
           size=11, anchor="start", colour="#444")
    return s.svg()


def multi_head_svg() -> str:
    """Multi-head attention: project, split into heads, attend, concatenate, W^O."""
    model, shapes = _date_model_run()
    p = "encoder_layers.0.self_attn"
    attn = model.get_submodule(p)
    h, d_k, d = attn.n_heads, attn.d_k, attn.d_model
    s = _Svg(600, 470, "Multi-head attention", FIGURES["multi_head"][1])
    s.box(300, 16, 200, 44, "input x", _shape(shapes[p + ".w_q"][:-1] + (d,)))
    for i, role in enumerate(("Q", "K", "V")):
        x = 150 + 150 * i
        s.box(x, 96, 120, 44, f"W^{role}: {d} → {d}", _shape(shapes[f"{p}.w_{role.lower()}"]), "attention")
        s.arrow(300, 60, x, 96)
    z = shapes[p + ".hook_z"]  # (B, m, h, d_k)
    pattern = shapes[p + ".hook_pattern"]  # (B, h, m, n)
    width = 520 / h
    for j in range(h):
        x = 40 + width * (j + 0.5)
        s.box(x, 190, width - 12, 56, f"head {j}", f"d_k = {d_k}", "attention")
    s.text(300, 178, f"split into {h} heads of d_k = {d} / {h} = {d_k}; weights {_shape(pattern)}",
           size=12)
    for i in range(3):
        s.arrow(150 + 150 * i, 140, 150 + 150 * i, 166)
    s.box(300, 290, 260, 44, "concatenate the heads", _shape(z), "tensor")
    for j in range(h):
        s.arrow(40 + width * (j + 0.5), 246, 300, 290)
    s.box(300, 370, 200, 44, f"W^O: {d} → {d}", _shape(shapes[p + ".w_o"]), "output")
    s.arrow(300, 334, 300, 370)
    s.text(20, 455, f"sizes: chapter 8's model, d_model = {d}, {h} heads; 1 sequence of "
           f"{pattern[-1]} tokens", size=11, anchor="start", colour="#444")
    return s.svg()


def feed_forward_svg() -> str:
    """The position-wise feed-forward network, one position at a time."""
    model, shapes = _date_model_run()
    ff = model.encoder_layers[0].feed_forward
    p = "encoder_layers.0.feed_forward"
    d, d_ff = ff.linear1.in_features, ff.linear1.out_features
    s = _Svg(560, 360, "The position-wise feed-forward network", FIGURES["feed_forward"][1])
    s.box(280, 16, 220, 44, "one position's vector", f"({d},)  of {_shape(shapes[p])}")
    s.box(280, 96, 260, 44, f"linear1: {d} → {d_ff}", _shape(shapes[p + ".linear1"]), "ffn")
    s.arrow(280, 60, 280, 96)
    s.box(280, 176, 260, 44, "ReLU: max(0, ·)", f"{d_ff} = {d_ff // d} × d_model", "ffn")
    s.arrow(280, 140, 280, 176)
    s.box(280, 256, 260, 44, f"linear2: {d_ff} → {d}", _shape(shapes[p + ".linear2"]), "ffn")
    s.arrow(280, 220, 280, 256)
    s.text(280, 330, "the same two matrices at every position; positions never mix here", size=12)
    s.text(20, 350, f"sizes: chapter 8's model, d_model = {d}, d_ff = {d_ff}", size=11,
           anchor="start", colour="#444")
    return s.svg()


def positions_svg() -> str:
    """Token embedding plus the sinusoidal position table, row by row."""
    from lib.model.layers import sinusoidal_positional_encoding

    model, shapes = _date_model_run()
    d = model.config.d_model
    n = shapes["src_embed"][1]
    pe = sinusoidal_positional_encoding(n, d)
    s = _Svg(600, 360, "Positional encoding", FIGURES["positions"][1])
    s.box(150, 16, 220, 44, "token embeddings", _shape(shapes["src_embed"]), "tensor")
    s.box(450, 16, 240, 44, "sinusoidal table, rows 0..n−1", _shape(pe.shape), "position")
    s.plus(300, 120)
    s.arrow(150, 60, 292, 114)
    s.arrow(450, 60, 308, 114)
    s.box(300, 160, 260, 44, "input to the first layer", _shape(shapes["src_pos"]), "tensor")
    s.arrow(300, 129, 300, 160)
    # a strip of the table: colour = value, fast dimensions on the left
    cols = 32
    cell = 500 / cols
    for i in range(n):
        for j in range(cols):
            value = float(pe[i, j * d // cols])
            shade = int(255 - 110 * (value + 1))
            s.rect(50 + j * cell, 236 + i * 12, cell, 12, f"rgb({shade},{min(255, shade + 40)},{shade})",
                   stroke="none")
    s.text(50, 230, "position 0", size=11, anchor="start", colour="#444")
    s.text(550, 230, f"{n} positions × {d} dimensions (dimensions 0, {d // cols}, "
           f"{2 * d // cols}, … shown)", size=11, anchor="end", colour="#444")
    s.text(20, 350, f"sizes: chapter 8's model, d_model = {d}, a source of {n} characters",
           size=11, anchor="start", colour="#444")
    return s.svg()


def encoder_decoder_svg() -> str:
    """The whole encoder-decoder, as chapter 8's model is built."""
    model, shapes = _date_model_run()
    c = model.config
    n_enc, n_dec = len(model.encoder_layers), len(model.decoder_layers)
    s = _Svg(640, 560, "The encoder and the decoder", FIGURES["encoder_decoder"][1])
    # encoder column
    s.box(160, 500, 220, 44, "source embedding + positions", _shape(shapes["src_pos"]), "position")
    s.rect(40, 180, 240, 290, "#f7f9fc", stroke="#1a5fb4")
    s.text(160, 200, f"encoder layer × {n_enc}", weight="bold")
    s.box(160, 400, 200, 40, "self-attention", None, "attention")
    s.box(160, 340, 200, 36, "add & LayerNorm", None, "norm")
    s.box(160, 280, 200, 40, "feed-forward", None, "ffn")
    s.box(160, 220, 200, 36, "add & LayerNorm", None, "norm")
    for y1, y2 in ((500, 440), (400, 376), (340, 320), (280, 256)):
        s.arrow(160, y1, 160, y2)
    s.box(160, 110, 220, 44, "memory", _shape(shapes[f"encoder_layers.{n_enc - 1}"]), "tensor")
    s.arrow(160, 180, 160, 154)
    # decoder column
    s.box(480, 500, 220, 44, "target embedding + positions", _shape(shapes["tgt_pos"]), "position")
    s.rect(360, 130, 240, 340, "#f7f9fc", stroke="#1a5fb4")
    s.text(480, 150, f"decoder layer × {n_dec}", weight="bold")
    s.box(480, 410, 200, 36, "masked self-attention", None, "attention")
    s.box(480, 362, 200, 30, "add & LayerNorm", None, "norm")
    s.box(480, 310, 200, 36, "cross-attention", None, "attention")
    s.box(480, 262, 200, 30, "add & LayerNorm", None, "norm")
    s.box(480, 210, 200, 36, "feed-forward", None, "ffn")
    s.box(480, 164, 200, 30, "add & LayerNorm", None, "norm")
    for y1, y2 in ((500, 446), (410, 392), (362, 346), (310, 292), (262, 246), (210, 194)):
        s.arrow(480, y1, 480, y2)
    s.path("M270,132 C330,132 330,328 380,328")
    s.text(330, 245, "keys, values", size=11, colour="#444")
    s.box(480, 70, 220, 44, f"linear → {c.tgt_vocab_size} scores", _shape(shapes["generator"]), "output")
    s.arrow(480, 130, 480, 114)
    s.text(20, 30, f"sizes: chapter 8's model, d_model = {c.d_model}, {c.n_heads} heads, d_ff = {c.d_ff};",
           size=11, anchor="start", colour="#444")
    s.text(20, 46, "a source of 8 and a target of 6 characters", size=11, anchor="start",
           colour="#444")
    return s.svg()


def modern_block_svg() -> str:
    """Today's decoder block: pre-norm RMSNorm, rotary grouped-query attention, SwiGLU."""
    model, shapes = _modern_run()
    c = model.config
    b = model.blocks[0]
    p = "blocks.0"
    d_ff = b.mlp.w_gate.out_features if hasattr(b.mlp, "w_gate") else c.d_ff
    s = _Svg(560, 520, "A modern decoder block", FIGURES["modern_block"][1])
    s.box(280, 460, 200, 44, "x (residual stream)", _shape(shapes[p + ".norm1"]), "tensor")
    s.path("M380,482 H470 V270 H292")  # the residual paths: around attention,
    s.path("M280,250 H430 V100 H292")  # then around the feed-forward network
    s.box(280, 390, 180, 36, "RMSNorm", None, "norm")
    s.arrow(280, 460, 280, 426)
    s.box(280, 300, 260, 50, f"attention: {c.n_heads} query, {c.n_kv_heads} key/value heads",
          "rotary positions on q, k", "attention")
    s.arrow(280, 390, 280, 350)
    s.plus(280, 270)
    s.arrow(280, 300, 280, 279)
    s.box(280, 200, 180, 36, "RMSNorm", None, "norm")
    s.arrow(280, 261, 280, 236)
    s.box(280, 120, 260, 50, f"SwiGLU: {c.d_model} → {d_ff} (×2) → {c.d_model}",
          _shape(shapes[p + ".mlp"]), "ffn")
    s.arrow(280, 200, 280, 170)
    s.plus(280, 100)
    s.arrow(280, 120, 280, 109)
    s.arrow(280, 91, 280, 60)
    s.text(280, 50, f"to the next block ({len(model.blocks)} blocks)", size=12)
    s.text(20, 512, f"sizes: lib.ModernConfig() defaults, d_model = {c.d_model}, "
           f"{c.n_heads} heads of {c.d_model // c.n_heads}, no biases", size=11, anchor="start",
           colour="#444")
    return s.svg()


def grouped_query_svg() -> str:
    """Grouped-query attention: query heads share key/value heads (j // group)."""
    model, shapes = _modern_run()
    attn = model.blocks[0].attn
    h, g, d_head = attn.n_heads, attn.n_kv_heads, attn.d_head
    p = "blocks.0.attn"
    group = h // g
    s = _Svg(600, 330, "Grouped-query attention", FIGURES["grouped_query"][1])
    wq = 520 / h
    wk = 520 / g
    for j in range(h):
        s.box(40 + wq * (j + 0.5), 40, wq - 14, 44, f"query {j}", f"d = {d_head}", "attention")
    for kv in range(g):
        s.box(40 + wk * (kv + 0.5), 190, wk - 40, 44, f"key/value head {kv}", f"d = {d_head}", "cache")
    for j in range(h):  # query head j reads key/value head j // group, as the code does
        s.arrow(40 + wk * (j // group + 0.5), 190, 40 + wq * (j + 0.5), 84)
    s.text(300, 130, f"query head j reads key/value head j // {group}", size=12)
    s.text(300, 275, f"w_q {attn.w_q.in_features} → {attn.w_q.out_features},  "
           f"w_k and w_v {attn.w_k.in_features} → {attn.w_k.out_features} each:", size=12, mono=True)
    s.text(300, 295, f"the cache keeps {g} heads per token instead of {h}", size=12)
    s.text(20, 322, f"sizes: lib.ModernConfig() defaults; one block's output {_shape(shapes[p])}",
           size=11, anchor="start", colour="#444")
    return s.svg()


def kv_cache_svg() -> str:
    """Decoding with a KV cache: one new token, its keys and values appended."""
    from lib.model.kv_cache import KVCache

    model, _ = _modern_run()
    prompt = torch.randint(0, model.config.vocab_size, (1, 5))
    cache = KVCache(len(model.blocks))
    with torch.no_grad():
        model(prompt, cache=cache)
        before = tuple(cache.self_attn[0].k.shape)
        model(prompt[:, -1:], cache=cache)
    after = tuple(cache.self_attn[0].k.shape)
    t = before[-2]
    s = _Svg(600, 330, "The KV cache", FIGURES["kv_cache"][1])
    s.text(20, 30, f"cached keys of layer 0 after the prompt: {_shape(before)}", size=12, anchor="start",
           mono=True)
    cell = 44
    for i in range(after[-2]):
        new = i >= t
        s.box(60 + cell * i + cell / 2, 60, cell - 6, 40, f"k{i}", None, "attention" if new else "cache")
        s.box(60 + cell * i + cell / 2, 110, cell - 6, 40, f"v{i}", None, "attention" if new else "cache")
    s.text(60 + cell * t + cell / 2, 172, "new", size=12, colour="#1a5fb4")
    s.box(60 + cell * t + cell / 2, 220, 120, 44, "new token", "(1, 1)", "tensor")
    s.arrow(60 + cell * t + cell / 2, 220, 60 + cell * t + cell / 2, 150)
    s.box(480, 220, 180, 44, "its query attends to", f"all {after[-2]} keys", "output")
    s.arrow(60 + cell * t + cell / 2 + 60, 242, 390, 242)
    s.text(20, 300, f"after one step: {_shape(after)} (batch, key/value heads, positions, d_head);",
           size=12, anchor="start", mono=True)
    s.text(20, 320, "only the new token is computed: the earlier keys and values are reused",
           size=12, anchor="start")
    return s.svg()


def tiled_svg() -> str:
    """Tiled attention: the query × key tiles `lib.tiled_attention` visits, causal."""
    from lib.model.tiled import _key_blocks, tiled_attention

    defaults = inspect.signature(tiled_attention).parameters
    block_q, block_k = defaults["block_q"].default, defaults["block_k"].default
    n = 4 * block_q
    rows, cols = n // block_q, -(-n // block_k)
    visited = set()
    for qi in range(rows):
        q0, q1 = qi * block_q, min(n, (qi + 1) * block_q)
        for k0, _k1 in _key_blocks(n, block_k, True, q1):
            visited.add((qi, k0 // block_k))
    s = _Svg(600, 360, "Tiled attention", FIGURES["tiled"][1])
    size = 60
    x0, y0 = 60, 60
    for qi in range(rows):
        for kj in range(cols):
            on = (qi, kj) in visited
            fill, stroke = PALETTE["attention"] if on else ("#ffffff", "#bbbbbb")
            s.rect(x0 + kj * size, y0 + qi * size, size - 4, size - 4, fill, stroke, 1.4)
            if on:
                s.text(x0 + kj * size + size / 2 - 2, y0 + qi * size + size / 2 + 3,
                       f"{block_q}×{block_k}", size=11, mono=True)
    s.text(x0 + cols * size / 2, 45, f"keys, in blocks of {block_k}", size=12)
    s.text(30, y0 + rows * size / 2, f"queries, blocks of {block_q}", size=12,
           anchor="middle")
    s.parts[-1] = s.parts[-1].replace("<text ", f'<text transform="rotate(-90 30 {y0 + rows * size / 2:g})" ', 1)
    x = x0 + cols * size + 30
    s.text(x, 90, f"{len(visited)} of {rows * cols} tiles computed (causal)", size=12, anchor="start")
    s.text(x, 112, "one tile at a time, with a running", size=12, anchor="start")
    s.text(x, 130, "maximum and sum per query row", size=12, anchor="start")
    s.text(x, 152, f"never the whole ({n} × {n}) matrix", size=12, anchor="start")
    s.text(20, 350, f"sizes: lib.tiled_attention's default blocks, {n} tokens", size=11,
           anchor="start", colour="#444")
    return s.svg()


# name -> (function, alt text stating the point, caption)
FIGURES: dict[str, tuple] = {
    "attention": (attention_svg,
                  "Attention compares every query with every key (scores Q times K transposed, "
                  "divided by the square root of d_k), optionally masks, turns each row into "
                  "weights with a softmax, and returns for each query a weighted sum of the values.",
                  "Scaled dot-product attention, on the shapes of one head of chapter 8's model."),
    "multi_head": (multi_head_svg,
                   "Multi-head attention projects the input to queries, keys and values, splits "
                   "the width into heads that attend independently, concatenates their outputs "
                   "and mixes them with W^O, so it costs what one full-width head costs.",
                   "Multi-head attention, with the sizes of chapter 8's model."),
    "feed_forward": (feed_forward_svg,
                     "The feed-forward network widens each position's vector to d_ff, applies "
                     "ReLU and narrows it back, with the same weights at every position and no "
                     "mixing between positions.",
                     "The position-wise feed-forward network."),
    "positions": (positions_svg,
                  "Attention alone ignores order, so the position table's row for each position "
                  "is added to the token's embedding before the first layer; fast sinusoids in "
                  "the first dimensions, slow ones in the last.",
                  "Positional encoding: the sinusoidal table added to the embeddings."),
    "encoder_decoder": (encoder_decoder_svg,
                        "The encoder turns the source into a memory; every decoder layer reads "
                        "its own earlier outputs through masked self-attention and the memory "
                        "through cross-attention, and a final linear map scores the next token.",
                        "The encoder–decoder, as chapter 8's model is built."),
    "modern_block": (modern_block_svg,
                     "Today's decoder block normalises before each sublayer (RMSNorm) and adds "
                     "the result back to the residual stream; attention uses rotary positions "
                     "and fewer key/value heads, and the feed-forward network is SwiGLU.",
                     "A modern decoder block, drawn from lib.ModernConfig's defaults."),
    "grouped_query": (grouped_query_svg,
                      "In grouped-query attention several query heads share one key/value head, "
                      "so the keys and values a model must cache shrink by that factor while the "
                      "number of query heads stays.",
                      "Grouped-query attention: which key/value head each query head reads."),
    "kv_cache": (kv_cache_svg,
                 "With a KV cache each decoding step computes the keys and values of the new "
                 "token only and appends them; its query attends to all the stored ones, so a "
                 "step no longer recomputes the whole prefix.",
                 "The KV cache after a prompt and one decoding step."),
    "tiled": (tiled_svg,
              "Tiled attention walks the score matrix one block of queries and keys at a time, "
              "skips the blocks a causal mask removes, and never holds the whole matrix.",
              "Tiled attention: the blocks lib.tiled_attention computes, causal."),
}


def figure_names() -> list[str]:
    return list(FIGURES)


def figure_svg(name: str) -> str:
    """The SVG text of the figure ``name`` (one of `figure_names()`)."""
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, got {type(name).__name__}")
    if name not in FIGURES:
        raise ValueError(f"name must be one of {figure_names()}, got {name!r}")
    torch_state = torch.random.get_rng_state()
    try:
        return FIGURES[name][0]()
    finally:
        torch.random.set_rng_state(torch_state)
