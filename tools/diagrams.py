"""The component diagrams: write them, check them, put them in the chapters (issue 35).

    python tools/diagrams.py            # write book/figures/<name>.svg from lib
    python tools/diagrams.py --check    # exit 1 if a figure file is missing or stale
    python tools/diagrams.py --insert [NOTEBOOK ...]   # the figure cells, in the chapters

The figures are drawn by `lib.teach.component_figures` from the shapes lib's modules
compute. ``--insert`` puts, in each chapter of PLACES (or in the notebooks given, which
may be copies: a file is matched to its chapter by its name), one markdown cell with the
figure and its alt text right after the cell that holds the heading of the section
introducing the component. It is idempotent: a cell it wrote before (tag
``component-diagram`` and the comment ``<!-- component-diagram: NAME -->``) is replaced,
wherever it stands. A heading that is not found is an error naming the chapter and the
heading; nothing is written then.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
FIGURES = ROOT / "book" / "figures"
TAG = "component-diagram"

# chapter file stem -> [(figure name, the heading that opens the section: a ## to ######
# heading whose text is this, or starts with it and goes on after a non-word character)]
PLACES: dict[str, list[tuple[str, str]]] = {
    "02_attention_math": [("attention", "The math")],
    "04_multi_head_attention": [("multi_head", "The math")],
    "05_feed_forward": [("feed_forward", "The math")],
    "06_positional_encoding": [("positions", "The math")],
    "07_encoder_decoder": [("encoder_decoder", "The math")],
    "11_language_model": [("kv_cache", "The KV cache")],
    "13_efficient_attention": [("tiled", "`lib.tiled_attention`")],
    "14_modern_decoder": [("modern_block", "What and why"),
                          ("grouped_query", "Change 4: grouped-query attention")],
}


def _lib():
    sys.path.insert(0, str(ROOT))
    from lib.teach import component_figures

    return component_figures


def marker(name: str) -> str:
    return f"<!-- {TAG}: {name} (written by tools/diagrams.py --insert) -->"


def figure_cell(name: str) -> dict:
    """The markdown cell showing figure ``name`` with its alt text and caption."""
    _, alt, caption = _lib().FIGURES[name]
    text = f"{marker(name)}\n![{alt}](figures/{name}.svg)\n\n*{caption}*"
    return {"cell_type": "markdown", "id": f"{TAG}-{name}".replace("_", "-"),
            "metadata": {"tags": [TAG]}, "source": text.splitlines(keepends=True)}


def _is_figure_cell(cell: dict, name: str) -> bool:
    return cell.get("cell_type") == "markdown" and marker(name) in "".join(cell.get("source", ""))


def _heading_cell(cells: list[dict], heading: str) -> int | None:
    # a section heading (## to ######, not the chapter's # title) that is `heading` or
    # starts with it and goes on with a non-word character ("The math" is not "The mathematics")
    pattern = re.compile(r"^#{2,6} +" + re.escape(heading) + r"(?!\w)", re.M)
    for i, cell in enumerate(cells):
        if cell.get("cell_type") == "markdown" and pattern.search("".join(cell["source"])):
            return i
    return None


def insert(notebook: dict, places: list[tuple[str, str]], where: str) -> dict:
    """``notebook`` with each figure cell of ``places`` right after its heading's cell
    (an earlier copy removed first). ValueError if a heading is missing."""
    cells = notebook["cells"]
    for name, heading in places:
        cells[:] = [c for c in cells if not _is_figure_cell(c, name)]
        at = _heading_cell(cells, heading)
        if at is None:
            raise ValueError(f"{where}: no heading starting {heading!r} for the {name} figure; "
                             "update PLACES in tools/diagrams.py")
        cells.insert(at + 1, nbformat.from_dict(figure_cell(name)))
    return notebook


def write(check: bool) -> int:
    cf = _lib()
    FIGURES.mkdir(parents=True, exist_ok=True)
    stale = []
    for name in cf.figure_names():
        path = FIGURES / f"{name}.svg"
        text = cf.figure_svg(name)
        if check:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                stale.append(str(path.relative_to(ROOT)))
        else:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path.relative_to(ROOT)}")
    if stale:
        print("stale or missing (run python tools/diagrams.py): " + ", ".join(stale))
        return 1
    return 0


def insert_all(paths: list[Path]) -> int:
    if not paths:
        paths = [ROOT / "book" / f"{stem}.ipynb" for stem in PLACES]
    updated = {}
    for path in paths:
        stem = next((s for s in PLACES if path.stem.startswith(s)), None)
        if stem is None:
            raise SystemExit(f"{path}: not a chapter with a component figure ({sorted(PLACES)})")
        notebook = nbformat.read(path, as_version=4)
        try:
            updated[path] = insert(notebook, PLACES[stem], str(path))
        except ValueError as err:
            print(err, file=sys.stderr)
            return 1
    for path, notebook in updated.items():  # only once every heading was found
        nbformat.write(notebook, path)
        print(f"{path}: {', '.join(n for n, _ in PLACES[next(s for s in PLACES if path.stem.startswith(s))])}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a figure file is stale")
    parser.add_argument("--insert", nargs="*", type=Path, metavar="NOTEBOOK",
                        help="insert the figure cells (default: every chapter in PLACES)")
    args = parser.parse_args(argv)
    if args.insert is not None:
        return insert_all(args.insert)
    return write(args.check)


if __name__ == "__main__":
    raise SystemExit(main())
