"""Measure the built web book: code blocks that scroll sideways, and the site's weight.

    python tools/site_report.py                 # both, on _build/html (`make site-report`)
    python tools/site_report.py --widths 1280   # only the code-block count, at 1280 px
    python tools/site_report.py --weight        # only the weights

Code blocks: every page of _toc.yml is opened in headless Chromium (Debian's chromium
and chromium-driver, as for `make test-site`) at each width, and every code block is
measured: the input of a notebook cell, its outputs, and the code blocks of the prose.
A block scrolls sideways when its scrollWidth exceeds its clientWidth (the text is wider
than its box). Each such block is listed with its page, the notebook cell it comes from
(0-based index among all the notebook's cells) and the cell's first line.

Weight: the bytes a reader's browser transfers for one chapter page with widgets (every
request, read from Chromium's network log; uncompressed, as a plain file server sends
them), and the size of the whole _build/html folder.

tests/browser/test_site.py imports BLOCK_REPORT and page_cells from here, and asserts
that no block scrolls at 1280 and 1366 px and that the weights stay under a budget.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SITE = ROOT / "_build" / "html"
WIDGET_PAGE = "book/02_attention_math"  # a chapter with stored widgets (the Q/K/V explorer)

# Every code block of the article, with whether it scrolls sideways.
# kind: "input" (a notebook cell's code), "output" (one output of a cell), "prose" (a code
# block of the text); cell: the position of its .cell among the page's cells (or -1).
BLOCK_REPORT = """
const article = document.querySelector('.bd-article') || document.body;
const cells = Array.from(article.querySelectorAll('div.cell'));
function scrolls(el) {
  if (el.scrollWidth > el.clientWidth) return el.scrollWidth - el.clientWidth;
  let worst = 0;
  for (const inner of el.querySelectorAll('pre, .table-wrapper, table')) {
    if (inner.scrollWidth > inner.clientWidth) worst = Math.max(worst, inner.scrollWidth - inner.clientWidth);
  }
  return worst;
}
const blocks = [];
function add(kind, el) {
  if (el.getClientRects().length === 0) return;  // not drawn (a collapsed cell's input)
  const cell = el.closest('div.cell');
  blocks.push({kind, cell: cell ? cells.indexOf(cell) : -1, over: scrolls(el),
               width: el.clientWidth, text: (el.textContent || '').trim().split('\\n')[0].slice(0, 70)});
}
for (const el of article.querySelectorAll('div.cell_input pre')) add('input', el);
for (const el of article.querySelectorAll('div.cell_output > .output')) add('output', el);
for (const el of article.querySelectorAll('div.highlight pre')) {
  if (!el.closest('div.cell')) add('prose', el);
}
return blocks;
"""


def toc_pages(toc_path: Path = ROOT / "_toc.yml") -> list[str]:
    import yaml

    toc = yaml.safe_load(toc_path.read_text())
    pages = [toc["root"]]

    def walk(entries):
        for entry in entries or []:
            if "file" in entry:
                pages.append(entry["file"])
            walk(entry.get("sections"))

    for part in toc.get("parts", []):
        walk(part.get("chapters"))
    walk(toc.get("chapters"))
    return pages


def page_cells(page: str) -> list[tuple[int, str]]:
    """For each cell the page shows (in order): its index in the notebook and its first line.

    myst-nb drops the cells tagged remove-cell, and the install cell (_ext/notebook_page.py);
    every other code cell becomes a div.cell."""
    path = ROOT / f"{page}.ipynb"
    if not path.exists():
        return []
    shown = []
    for index, cell in enumerate(json.loads(path.read_text())["cells"]):
        tags = cell.get("metadata", {}).get("tags", [])
        install = "".join(cell["source"]).startswith("# Colab or a fresh environment: install")
        if cell["cell_type"] == "code" and "remove-cell" not in tags and not install:
            shown.append((index, "".join(cell["source"]).split("\n")[0][:70]))
    return shown


def serve(site: Path):
    handler = functools.partial(_Quiet, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002
        pass


def browser(profile: str):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    os.environ["SE_OFFLINE"] = "true"
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or shutil.which("chromium-browser")
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--no-first-run", "--disable-background-networking", f"--user-data-dir={profile}",
                 "--window-size=1280,1600", "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
                 "--proxy-server=http://127.0.0.1:9"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(shutil.which("chromedriver")))
    driver.set_page_load_timeout(120)
    driver.set_script_timeout(120)
    driver.execute_cdp_cmd("Network.enable", {})
    return driver


def settle(driver) -> None:
    """Wait for MathJax and the stored widgets, which change the page's layout."""
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, 120).until(lambda d: d.execute_script("return document.readyState") == "complete")
    driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "if (!document.querySelector('.math')) { done(); return; }"
        "const t0 = Date.now(); (function poll() {"
        " if (window.MathJax && MathJax.startup && MathJax.startup.promise) MathJax.startup.promise.then(done, done);"
        " else if (Date.now() - t0 > 60000) done(); else setTimeout(poll, 100); })();"
    )
    views = "document.querySelectorAll('script[type=\"application/vnd.jupyter.widget-view+json\"]').length"
    drawn = "document.querySelectorAll('.widget-subarea').length"
    for _ in range(240):
        if driver.execute_script(f"return {drawn} >= {views};"):
            break
        time.sleep(0.25)
    time.sleep(0.3)


def measure_blocks(driver, base: str, pages: list[str], width: int) -> tuple[list[dict], int]:
    """Every code block that scrolls sideways at `width` CSS px, on every page; and how
    many blocks were measured."""
    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride", {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": False}
    )
    found, measured = [], 0
    try:
        for page in pages:
            driver.get(base + page + ".html")
            settle(driver)
            cells = page_cells(page)
            blocks = driver.execute_script(BLOCK_REPORT)
            measured += len(blocks)
            for block in blocks:
                if block["over"] <= 0:
                    continue
                index, first = cells[block["cell"]] if 0 <= block["cell"] < len(cells) else (None, "")
                found.append({"page": page, "width": width, **block, "notebook_cell": index, "first_line": first})
    finally:
        driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    return found, measured


def page_bytes(driver, base: str, page: str) -> tuple[int, dict[str, int]]:
    """Bytes transferred for one page (nothing cached): total, and per URL."""
    driver.execute_cdp_cmd("Network.clearBrowserCache", {})
    driver.get_log("performance")
    driver.get(base + page + ".html")
    settle(driver)
    time.sleep(1.0)
    urls, sizes = {}, {}
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        params = message.get("params", {})
        if message.get("method") == "Network.requestWillBeSent":
            urls[params["requestId"]] = params["request"]["url"]
        elif message.get("method") == "Network.loadingFinished":
            sizes[params["requestId"]] = int(params.get("encodedDataLength", 0))
    per_url = {urls.get(r, r).replace(base, ""): n for r, n in sizes.items()}
    return sum(per_url.values()), per_url


def folder_bytes(site: Path) -> tuple[int, int]:
    files = [p for p in site.rglob("*") if p.is_file()]
    return sum(p.stat().st_size for p in files), len(files)


def megabytes(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--site", type=Path, default=Path(os.environ.get("COURSE_SITE_DIR", SITE)))
    parser.add_argument("--widths", type=int, nargs="*", default=[1280, 1366])
    parser.add_argument("--weight", action="store_true", help="only the weights")
    parser.add_argument("--pages", nargs="*", help="pages to measure (default: every page of _toc.yml)")
    parser.add_argument("--json", type=Path, help="also write every scrolling block to this file")
    args = parser.parse_args(argv)
    if not (args.site / "index.html").exists():
        print(f"no built site at {args.site}: run `make book` first")
        return 1
    pages = args.pages or toc_pages()
    server, base = serve(args.site)
    with tempfile.TemporaryDirectory() as profile:
        driver = browser(profile)
        try:
            if not args.weight:
                every = []
                for width in args.widths:
                    found, measured = measure_blocks(driver, base, pages, width)
                    every += found
                    kinds = {k: sum(b["kind"] == k for b in found) for k in ("input", "output", "prose")}
                    print(f"{width} px: {len(found)} of {measured} code blocks scroll sideways "
                          f"({kinds['input']} inputs, {kinds['output']} outputs, {kinds['prose']} in the prose)")
                    for b in found:
                        where = f"cell {b['notebook_cell']}" if b["notebook_cell"] is not None else "text"
                        print(f"  {b['page']} {where} ({b['kind']}, {b['over']} px too wide): "
                              f"{b['first_line'] or b['text']}")
                if args.json:
                    args.json.write_text(json.dumps(every, indent=1, ensure_ascii=False) + "\n")
            total, per_url = page_bytes(driver, base, WIDGET_PAGE)
            size, files = folder_bytes(args.site)
            print(f"{WIDGET_PAGE} (with widgets): {megabytes(total)} transferred in {len(per_url)} requests")
            for url, n in sorted(per_url.items(), key=lambda kv: -kv[1])[:8]:
                print(f"  {n:>9,d}  {url}")
            print(f"_build/html: {megabytes(size)} in {files} files")
        finally:
            driver.quit()
            server.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
