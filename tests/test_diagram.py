"""lib.teach.diagram: the architecture figure drawn from the model (chapter 7).

The tests read the drawn artists back: the boxes' labels, the ⊕ circles
(gid "residual-add") and the skip paths (gid "residual-skip")."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import lib  # noqa: E402
from lib.teach.diagram import record_forward  # noqa: E402

V = 30
SUBLAYERS = ("self_attn", "cross_attn", "feed_forward")


def draw(norm_first, n_layers=1):
    model = lib.Transformer(V, V, d_model=16, n_heads=2, n_layers=n_layers, d_ff=32, norm_first=norm_first)
    fig, ax = plt.subplots(figsize=(10, 9))
    lib.draw_architecture(model, ax=ax)
    boxes = []  # (x, y, name, label) of every module box
    for t in ax.texts:
        label = t.get_text()
        if "params" in label and "×" not in label:
            x, y = t.get_position()
            boxes.append((x, y, label.split(":")[0], label))
    adds = [p.center for p in ax.patches if p.get_gid() == "residual-add"]
    skips = [(line.get_xdata(), line.get_ydata()) for line in ax.lines if line.get_gid() == "residual-skip"]
    plt.close(fig)
    return boxes, adds, skips


def neighbour(boxes, x, y, above):
    """The name of the box in column x nearest above (or below) height y."""
    column = [(by, name) for bx, by, name, _ in boxes if abs(bx - x) < 1e-9]
    side = [(by, name) for by, name in column if (by > y if above else by < y)]
    if not side:
        return None
    return (min if above else max)(side)[1]


@pytest.mark.parametrize("norm_first", [False, True])
def test_one_residual_sum_per_sub_layer(norm_first):
    boxes, adds, skips = draw(norm_first)
    n_sublayers = sum(name in SUBLAYERS for *_, name, _ in boxes)
    assert n_sublayers == 5  # encoder: attention, FFN; decoder: self, cross, FFN
    assert len(adds) == len(skips) == n_sublayers


@pytest.mark.parametrize("norm_first", [False, True])
def test_the_sum_follows_its_sub_layer_and_the_norm_sits_where_the_order_says(norm_first):
    boxes, adds, skips = draw(norm_first)
    for ax_x, ax_y in adds:
        below = neighbour(boxes, ax_x, ax_y, above=False)
        above = neighbour(boxes, ax_x, ax_y, above=True)
        assert below in SUBLAYERS  # ⊕ right after the sub-layer
        if norm_first:  # pre-LN: norm -> sub-layer -> ⊕
            sub_y = max(by for bx, by, name, _ in boxes if abs(bx - ax_x) < 1e-9 and by < ax_y)
            assert neighbour(boxes, ax_x, sub_y, above=False).startswith("norm")
        else:
            assert above.startswith("norm")  # post-LN: the LayerNorm takes the sum


@pytest.mark.parametrize("norm_first", [False, True])
def test_the_skip_branches_before_the_norm_in_pre_ln_and_before_the_sub_layer_in_post_ln(norm_first):
    boxes, adds, skips = draw(norm_first)
    ends = {(round(x, 6), round(y, 6)) for x, y in adds}
    for xs, ys in skips:
        column_x, start_y, end_y = xs[0], ys[0], ys[-1]
        assert end_y > start_y
        assert any(abs(end_y - y) < 1e-9 and abs(column_x - x) < 1e-9 for x, y in ends)  # into a ⊕
        first = neighbour(boxes, column_x, start_y, above=True)
        if norm_first:
            assert first.startswith("norm")  # around norm + sub-layer
        else:
            assert first in SUBLAYERS  # around the sub-layer only
        # exactly one sub-layer is bypassed
        inside = [name for bx, by, name, _ in boxes if abs(bx - column_x) < 1e-9 and start_y < by < end_y]
        assert sum(name in SUBLAYERS for name in inside) == 1
        assert sum(name.startswith("norm") for name in inside) == (1 if norm_first else 0)


def test_only_the_decoder_self_attention_is_marked_causal():
    boxes, _, _ = draw(False)
    causal = [(x, name) for x, _, name, label in boxes if "masked (causal)" in label]
    decoder_x = max(x for x, *_ in boxes)
    assert causal == [(decoder_x, "self_attn")]


def test_record_forward_sees_masks_memory_and_weights():
    torch.manual_seed(0)
    model = lib.Transformer(V, V, d_model=16, n_heads=2, n_layers=2, d_ff=32, dropout=0.0).eval()
    src, tgt = torch.tensor([[1, 2, 3, 0]]), torch.tensor([[1, 2, 3]])
    seen = record_forward(model, src, tgt, src_mask=lib.padding_mask(src, 0), tgt_mask=lib.causal_mask(3))
    cross = seen["decoder_layers.0.cross_attn"]
    assert torch.equal(cross["args"][1], seen["encoder_layers.1"]["output"])
    assert cross["weights"].shape == (1, 2, 3, 4) and (cross["weights"][..., 3] == 0).all()
    assert seen["generator"]["weights"] is None
    only = record_forward(model, src, tgt, names={"generator"})
    assert set(only) == {"generator"}
    assert not any(m._forward_hooks for m in model.modules())  # hooks removed


def test_record_forward_refuses_a_non_module():
    with pytest.raises(TypeError, match="model"):
        record_forward(lambda x: x, torch.zeros(1))


# --------------------------------------------------------------------------- component figures
# (lib.teach.component_figures, tools/diagrams.py: issue 35)

import importlib.util  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
from pathlib import Path  # noqa: E402

import nbformat  # noqa: E402

from lib.teach import component_figures as cf  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("diagrams_tool", ROOT / "tools" / "diagrams.py")
diagrams = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(diagrams)


def _texts(svg: str) -> list[str]:
    import html

    return [html.unescape(t) for t in re.findall(r"<text[^>]*>([^<]*)</text>", svg)]


def test_every_component_has_a_figure_placed_in_a_chapter():
    placed = [name for places in diagrams.PLACES.values() for name, _ in places]
    assert sorted(placed) == sorted(cf.figure_names())
    assert set(cf.figure_names()) >= {"attention", "multi_head", "feed_forward", "positions",
                                      "encoder_decoder", "modern_block", "grouped_query",
                                      "kv_cache", "tiled"}


@pytest.mark.parametrize("name", cf.figure_names())
def test_alt_text_states_a_point(name):
    """Not a label ('Diagram of attention'): a sentence of at least 15 words with a verb
    of what the component does, the same text in the SVG's <desc>."""
    _, alt, caption = cf.FIGURES[name]
    words = alt.split()
    assert len(words) >= 15 and alt.endswith("."), alt
    assert not re.match(r"(figure|diagram|image|picture)\b", alt, re.I), alt
    assert caption.strip() and caption != alt
    svg = cf.figure_svg(name)
    desc = re.search(r"<desc[^>]*>(.*?)</desc>", svg, re.S).group(1)
    import html

    assert html.unescape(desc) == alt
    assert 'role="img"' in svg


def test_sizes_are_read_from_the_code_not_typed(monkeypatch):
    """Change lib's configuration and the figures follow: 8 heads of d_k 8 in the multi-head
    figure, 1 key/value head in the grouped-query one, 32-wide tiles in the tiled one."""
    import dataclasses

    import lib.model.modern as modern
    import lib.model.tiled as tiled
    import lib.teach.probes as probes

    base = probes.date_model_config()
    monkeypatch.setattr(probes, "date_model_config", lambda: dataclasses.replace(base, n_heads=8))
    texts = _texts(cf.figure_svg("multi_head"))
    assert "head 7" in texts and "d_k = 8" in texts and "head 8" not in texts
    assert "(1, 8, 8, 8)" in texts  # the heads' outputs (B, n, h, d_k) for the 8 source tokens
    class OneKeyValueHead(modern.ModernConfig):
        def __init__(self, **kw):
            super().__init__(**{"n_kv_heads": 1, **kw})

    monkeypatch.setattr(modern, "ModernConfig", OneKeyValueHead)
    gqa = _texts(cf.figure_svg("grouped_query"))
    assert "key/value head 0" in gqa and "key/value head 1" not in gqa
    assert any("keeps 1 heads per token instead of 4" in t for t in gqa)
    real_tiled = tiled.tiled_attention

    def small_blocks(q, k, v, *, key_mask=None, causal=False, block_q=32, block_k=32):
        return real_tiled(q, k, v, key_mask=key_mask, causal=causal, block_q=block_q, block_k=block_k)

    monkeypatch.setattr(tiled, "tiled_attention", small_blocks)
    assert "32×32" in _texts(cf.figure_svg("tiled"))


def test_tiled_figure_counts_the_causal_tiles():
    """4 × 4 blocks under a causal mask: the lower triangle and the diagonal, 10 of 16."""
    texts = _texts(cf.figure_svg("tiled"))
    assert "10 of 16 tiles computed (causal)" in texts
    assert sum(t == "64×64" for t in texts) == 10


def test_kv_cache_figure_shows_the_cache_growing_by_one():
    c = lib.ModernConfig()
    head = c.d_model // c.n_heads
    texts = " ".join(_texts(cf.figure_svg("kv_cache")))
    assert f"(1, {c.n_kv_heads}, 5, {head})" in texts and f"(1, {c.n_kv_heads}, 6, {head})" in texts


def test_grouped_query_arrows_follow_the_code():
    """Query head j's arrow starts under key/value head j // (n_heads / n_kv_heads)."""
    c = lib.ModernConfig()
    svg = cf.figure_svg("grouped_query")
    arrows = [tuple(float(v) for v in m) for m in
              re.findall(r'<line x1="([\d.]+)" y1="190" x2="([\d.]+)" y2="84"', svg)]
    assert len(arrows) == c.n_heads
    kv_x = sorted({a[0] for a in arrows})
    q_x = sorted(a[1] for a in arrows)
    group = c.n_heads // c.n_kv_heads
    for x1, x2 in arrows:
        assert kv_x.index(x1) == q_x.index(x2) // group


def test_figure_svg_refuses_bad_names():
    with pytest.raises(ValueError, match="name"):
        cf.figure_svg("attn")
    with pytest.raises(TypeError, match="name"):
        cf.figure_svg(3)


def test_the_figure_files_are_current():
    """book/figures/*.svg are what lib draws now (`python tools/diagrams.py --check`)."""
    assert diagrams.main(["--check"]) == 0, "run python tools/diagrams.py"


def test_check_fails_on_a_stale_or_missing_file(tmp_path, monkeypatch):
    monkeypatch.setattr(diagrams, "FIGURES", tmp_path)
    monkeypatch.setattr(diagrams, "ROOT", tmp_path)
    assert diagrams.main([]) == 0
    assert diagrams.main(["--check"]) == 0
    path = tmp_path / "attention.svg"
    path.write_text(path.read_text().replace("softmax", "softmin"))
    assert diagrams.main(["--check"]) == 1
    diagrams.main([])
    (tmp_path / "tiled.svg").unlink()
    assert diagrams.main(["--check"]) == 1


def _copy(stem: str, tmp_path) -> Path:
    dest = tmp_path / f"{stem}.ipynb"
    shutil.copyfile(ROOT / "book" / f"{stem}.ipynb", dest)
    return dest


def test_insert_places_the_figure_after_its_heading_once(tmp_path):
    paths = [_copy(stem, tmp_path) for stem in diagrams.PLACES]
    assert diagrams.insert_all(paths) == 0
    once = [p.read_text() for p in paths]
    assert diagrams.insert_all(paths) == 0  # idempotent
    assert [p.read_text() for p in paths] == once
    for path in paths:
        cells = nbformat.read(path, as_version=4).cells
        for name, heading in diagrams.PLACES[path.stem]:
            found = [i for i, c in enumerate(cells) if diagrams.marker(name) in c.source]
            assert len(found) == 1, (path.stem, name)
            before = cells[found[0] - 1]
            assert before.cell_type == "markdown" and re.search(
                r"^#{2,6} +" + re.escape(heading) + r"(?!\w)", before.source, re.M) or \
                diagrams.TAG in before.metadata.get("tags", []), (path.stem, name)
            assert f"](figures/{name}.svg)" in cells[found[0]].source


def test_a_heading_is_matched_whole_and_never_the_title():
    cells = [{"cell_type": "markdown", "source": "# The mathematics of attention"},
             {"cell_type": "markdown", "source": "intro\n\n## The mathematical background"},
             {"cell_type": "markdown", "source": "## The math\n\ntext"}]
    assert diagrams._heading_cell(cells, "The math") == 2
    assert diagrams._heading_cell(cells[:2], "The math") is None
    assert diagrams._heading_cell(cells, "The mathematics of attention") is None  # a title


def test_insert_fails_loudly_on_a_missing_heading(tmp_path, capsys):
    path = _copy("02_attention_math", tmp_path)
    notebook = nbformat.read(path, as_version=4)
    for cell in notebook.cells:
        if cell.cell_type == "markdown":
            cell.source = cell.source.replace("## The math", "## Mathematics")
    nbformat.write(notebook, path)
    before = path.read_text()
    assert diagrams.insert_all([path]) == 1
    assert "The math" in capsys.readouterr().err
    assert path.read_text() == before  # nothing written


@pytest.mark.parametrize("stem", sorted(diagrams.PLACES))
def test_every_listed_chapter_has_its_diagram_cell(stem):
    """After `python tools/diagrams.py --insert` (the coordinator runs it once the chapters'
    owners are done): each chapter shows its figures, with their alt text, as written now."""
    cells = nbformat.read(ROOT / "book" / f"{stem}.ipynb", as_version=4).cells
    for name, _ in diagrams.PLACES[stem]:
        found = [c for c in cells if diagrams.marker(name) in c.source]
        assert len(found) == 1, f"{stem}: no {name} figure cell: run python tools/diagrams.py --insert"
        assert found[0].source == "".join(diagrams.figure_cell(name)["source"])
        assert (ROOT / "book" / "figures" / f"{name}.svg").is_file()
