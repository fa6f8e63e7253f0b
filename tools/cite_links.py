"""Write the chapters' citations as links that read well in JupyterLab (issue 27).

    python tools/cite_links.py           # {cite:p}/{cite:t} roles -> author-year links, every chapter
    python tools/cite_links.py --check   # exit 1 if a chapter has a role left or a link whose
                                         # text is not its entry's author and year

jupyterlab-myst shows a `{cite}` role as its raw key with a warning icon; a Markdown link
"([Vaswani et al., 2017](bibliography.md#cite-vaswani2017attention))" reads the same in
JupyterLab and Colab as in print, and _ext/citations.py turns it back into the role when
the web book is built. The author and year come from site/references.bib. Only Markdown
cells change; outputs, metadata and code cells are left as they are.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "_ext"))
import citations  # noqa: E402

sys.path.remove(str(ROOT / "_ext"))


def problems(text: str, known: dict[str, tuple[str, str]]) -> list[str]:
    found = [f"role left: {m.group(0)}" for m in citations.ROLE.finditer(text)]
    for match in citations.LINK.finditer(text):
        key, shown = match["key"], match["text"]
        if key not in known:
            found.append(f"unknown key: {key}")
            continue
        authors, year = known[key]
        if shown not in (f"{authors}, {year}", f"{authors} ({year})"):
            found.append(f"{key}: the link says {shown!r}, the entry is {authors}, {year}")
    return found


def main(argv: list[str], book: Path = ROOT / "book") -> int:
    check = "--check" in argv
    known = citations.entries()
    bad = []
    for path in sorted(book.glob("[0-9][0-9]_*.ipynb")):
        notebook = json.loads(path.read_text())
        changed = False
        for i, cell in enumerate(notebook["cells"]):
            if cell["cell_type"] != "markdown":
                continue
            text = "".join(cell["source"])
            if not check:
                new = citations.roles_to_links(text, known)
                if new != text:
                    cell["source"] = new.splitlines(keepends=True)
                    changed, text = True, new
            bad += [f"{path.name} cell {i}: {p}" for p in problems(text, known)]
        if changed:
            path.write_text(json.dumps(notebook, indent=1, ensure_ascii=False) + "\n")
            print(f"rewrote the citations of {path.name}")
    if bad:
        print("citations to fix (python tools/cite_links.py):", *bad, sep="\n  ")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
