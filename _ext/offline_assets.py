"""Sphinx extension: serve every front-end file of the book from the book itself.

The built site must load no script, style sheet or font from another host.
Three things would otherwise come from a CDN:

* MathJax (Sphinx's default ``mathjax_path`` points at jsdelivr);
* RequireJS and the Jupyter widget manager ``@jupyter-widgets/html-manager``
  (myst-nb's default ``nb_ipywidgets_js`` points at cdnjs and jsdelivr);
* the front end of third-party widget modules -- here anywidget's -- which
  the widget manager asks RequireJS for by module name and, failing that,
  fetches from ``<data-jupyter-widgets-cdn>NAME@VERSION/dist/index.js``.

They are npm packages pinned in package.json / package-lock.json; ``npm ci``
puts them in node_modules/ (not committed). This extension copies them into
``_build/html/_static/offline/`` when the HTML build finishes, and _config.yml
points ``mathjax_path`` and ``nb_ipywidgets_js`` at those copies.

On each page with widgets, a small script before the widget manager tells
RequireJS where the local copies are (``paths``: ``anywidget`` ->
``_static/offline/widgets/anywidget/index.js``; the manager's own module path,
from which it finds its fonts), so the first lookup by name succeeds. The
``data-jupyter-widgets-cdn`` attribute -- the fallback for a module with no
local copy -- is set in _config.yml to a local folder too and made
page-relative here, so even a missing module never leaves the site.

sphinx-thebe's two scripts (which name unpkg) are dropped from the pages
while no thebe launch button is configured.

One copy of each front-end file, and no source maps (issue 27: a chapter with
a widget loaded 7.9 MB). From the widget manager's dist/ only ``embed-amd.js``
is copied: it defines the module ``.../dist/libembed-amd`` itself, so the
separate ``libembed-amd.js`` (the same 3.6 MB) is never requested, and of the
FontAwesome 4 fonts it declares only the woff2 files, which every browser the
book supports picks first. The theme draws its icons twice over: with the
FontAwesome web fonts of its style sheet and with ``fontawesome.js`` (1.5 MB),
which replaces each icon by an SVG; the script is dropped from the pages and
the icons come from the web fonts (woff2; their ttf copies go). Source maps
(``*.map``, 3.4 MB) and the comments that name them are removed, and so are
the theme's translation catalogues (``_static/locales``, read by Sphinx at
build time, never by a page). tests/browser/test_site.py checks the result.

Each widget module named in a page's stored widget state must have a local
copy, or the build warns (an error under ``-W``): the modules built into the
html-manager (``@jupyter-widgets/base``, ``controls``, ``output``) need none;
for the others (anywidget), the npm package's version must satisfy the
version spec the notebook stored.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.errors import ExtensionError
from sphinx.util import logging

logger = logging.getLogger(__name__)

OUT = "offline"  # _build/html/_static/offline/
CDN_ATTRIBUTE = "data-jupyter-widgets-cdn"
WIDGET_STATE_TYPE = "application/vnd.jupyter.widget-state+json"
# Modules that @jupyter-widgets/html-manager bundles: never fetched.
BUILTIN_WIDGET_MODULES = {"@jupyter-widgets/base", "@jupyter-widgets/controls", "@jupyter-widgets/output"}
# npm packages whose front end a stored widget state may need, by module name.
WIDGET_PACKAGES = {"anywidget": "anywidget"}

# The widgets' `typeset` (labels, HTMLMath) calls MathJax 2's
# `MathJax.Hub.Queue(["Typeset", MathJax.Hub, element])`, which throws under
# MathJax 3. Give MathJax 3 that one entry point, typesetting the element.
# Added again once MathJax has loaded, in case loading replaced the object.
MATHJAX2_SHIM = """
(function () {
  function shim() {
    var mj = window.MathJax;
    if (!mj || mj.Hub) return;
    mj.Hub = { Queue: function (job) {
      var element = Array.isArray(job) ? job[2] : undefined;
      var ready = (mj.startup && mj.startup.promise) || Promise.resolve();
      ready.then(function () { return mj.typesetPromise ? mj.typesetPromise(element ? [element] : undefined) : null; })
           .catch(function (error) { console.warn("MathJax typeset failed", error); });
    } };
  }
  shim();
  document.addEventListener("DOMContentLoaded", shim);
})();"""

# MathJax: the one combined component the book loads (Sphinx's default,
# tex-mml-chtml) and what it may fetch later (TeX extensions, CHTML fonts,
# the menu, accessibility and speech); not the other combined bundles or SVG output.
MATHJAX_ROOT_FILES = {"tex-mml-chtml.js", "core.js", "loader.js", "startup.js"}


def _mathjax_skip(directory: str, names: list[str]) -> set[str]:
    path = Path(directory)
    if path.name == "es5":
        return {n for n in names if n.endswith(".js") and n not in MATHJAX_ROOT_FILES}
    if path.name == "output" and path.parent.name == "es5":
        return {n for n in names if n.startswith("svg")}
    return set()


def _widget_manager_skip(directory: str, names: list[str]) -> set[str]:
    """Keep the entry point and the woff2 fonts; the rest duplicates them (see above)."""
    return {n for n in names if n != "embed-amd.js" and not n.endswith(".woff2")}


# (source inside node_modules/, destination inside _static/offline/, what to leave out)
COPIES = [
    ("mathjax/es5", "mathjax", _mathjax_skip),
    ("requirejs/require.js", "require.js", None),
    ("@jupyter-widgets/html-manager/dist", "html-manager", _widget_manager_skip),
]


# A comment naming a source map, alone at the start of a line (the same words inside the
# bundled code's strings are left alone); the ";" that may follow it stays.
SOURCE_MAP_COMMENT = re.compile(r"^(//# sourceMappingURL=\S+?\.map|/\*# sourceMappingURL=\S+?\.map ?\*/)", re.M)
# The theme's icon script (the same icons as its web fonts, as SVG).
ICON_SCRIPT = re.compile(r'<script defer(?:="defer")? src="[^"]*_static/scripts/fontawesome\.js[^"]*"></script>\n?')


def _node_modules(app: Sphinx) -> Path:
    return Path(app.srcdir) / "node_modules"


def _npm_version(app: Sphinx, package: str) -> str:
    return json.loads((_node_modules(app) / package / "package.json").read_text())["version"]


def check_node_modules(app: Sphinx) -> None:
    """Fail early, with the fix, when `npm ci` has not been run."""
    if app.builder.format != "html":
        return
    root = _node_modules(app)
    missing = [src for src, _, _ in COPIES if not (root / src).exists()]
    missing += [f"{p}/dist/index.js" for p in WIDGET_PACKAGES.values() if not (root / p / "dist/index.js").exists()]
    if missing:
        raise ExtensionError(
            f"front-end packages missing from {root}: {', '.join(missing)}. "
            "Run `npm ci` in the repository root (the Makefile's `book` target does)."
        )


def _satisfies(version: str, spec: str) -> bool:
    """Enough of npm's semver ranges for the specs widget libraries store.

    ``*``, ``A.B.C``, ``~A.B.*`` / ``~A.B.C`` / ``A.B.*`` (same minor) and ``^A.B.C``.
    """
    have = tuple(int(x) for x in re.findall(r"\d+", version)[:3])
    spec = spec.strip()
    if spec in ("*", ""):
        return True
    nums = tuple(int(x) for x in re.findall(r"\d+", spec)[:3])
    if not nums:
        return False
    if spec.startswith("^"):
        if nums[0] > 0:
            return have[0] == nums[0] and have >= nums
        return have[:2] == nums[:2] and have >= nums
    if spec.startswith("~") or "*" in spec or len(nums) < 3:
        return have[: min(2, len(nums))] == nums[: min(2, len(nums))] and have >= nums
    return have == nums


def _thebe_enabled(app: Sphinx) -> bool:
    launch = (app.config.html_theme_options or {}).get("launch_buttons") or {}
    return bool(launch.get("thebe"))


def _attributes(js) -> dict:
    return dict(getattr(js, "attributes", {}) or {})


def rewrite_page_scripts(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    """Per page: make the widget 'CDN' page-relative, point the widget manager at
    its own fonts, drop sphinx-thebe's unused scripts, and note which widget
    modules the page's stored state needs."""
    scripts = context.get("script_files")
    if not scripts:
        return
    if not _thebe_enabled(app):
        # sphinx-thebe (always loaded by Jupyter Book) puts `THEBE_JS_URL =
        # "https://unpkg.com/..."` and its loader on every page; with no thebe
        # launch button nothing can call them, so keep the page free of them.
        scripts[:] = [
            js
            for js in scripts
            if not str(js.filename or "").endswith("sphinx-thebe.js")
            and "THEBE_JS_URL" not in _attributes(js).get("body", "")
        ]
    for js in list(scripts):
        attributes = _attributes(js)
        if attributes.get("type") == WIDGET_STATE_TYPE and attributes.get("body"):
            for model in json.loads(attributes["body"]).get("state", {}).values():
                inner = model.get("state", {})
                for module, version in (
                    (model.get("model_module"), model.get("model_module_version")),
                    (inner.get("_view_module"), inner.get("_view_module_version")),
                ):
                    if module and module not in BUILTIN_WIDGET_MODULES:
                        app.offline_widget_modules.add((module, version or "*", pagename))  # type: ignore[attr-defined]
        cdn = attributes.get(CDN_ATTRIBUTE)
        if cdn and "://" not in cdn:
            attributes[CDN_ATTRIBUTE] = context["pathto"](cdn, 1)
            index = scripts.index(js)
            scripts[index] = type(js)(js.filename, priority=js.priority, **attributes)
            # RequireJS paths, page-relative: third-party widget modules by name,
            # and the manager's own module path. The manager finds its fonts
            # (FontAwesome, for widget icons) from the URL RequireJS gives its
            # module "@jupyter-widgets/html-manager/dist/libembed-amd", by
            # default under the page's folder; map it to our copy.
            assets = context["pathto"](f"_static/{OUT}/html-manager", 1)
            paths = {"@jupyter-widgets/html-manager/dist": assets}
            # The widget packages the manager bundles (base, controls and their 7.x
            # versions) take their fonts' folder from their module's URL, by default
            # "<page folder>/@jupyter-widgets/": point them at the manager's folder, which
            # holds those fonts. (The theme's fontawesome.js used to draw widget icons
            # itself, so the wrong folder went unnoticed.)
            for name in ("base", "controls", "base7", "controls7", "output", "html-manager"):
                paths[f"@jupyter-widgets/{name}"] = f"{assets}/{name}"
            for module in WIDGET_PACKAGES:
                paths[module] = context["pathto"](f"_static/{OUT}/widgets/{module}/index", 1)
            body = (
                f"window.__jupyter_widgets_assets_path__ = {json.dumps(assets + '/')}; "
                f"window.requirejs.config({{paths: {json.dumps(paths)}}});" + MATHJAX2_SHIM
            )
            scripts.insert(index, type(js)(None, priority=js.priority, body=body))


def copy_assets(app: Sphinx, exception: Exception | None) -> None:
    if exception is not None or app.builder.format != "html":
        return
    root = _node_modules(app)
    out = Path(app.outdir) / "_static" / OUT
    for src, dst, skip in COPIES:
        source, target = root / src, out / dst
        if source.is_dir():
            shutil.copytree(source, target, dirs_exist_ok=True, ignore=skip)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    for module, package in WIDGET_PACKAGES.items():
        target = out / "widgets" / module / "index.js"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / package / "dist" / "index.js", target)
    remove_waste(Path(app.outdir))
    for module, spec, pagename in sorted(app.offline_widget_modules):
        package = WIDGET_PACKAGES.get(module)
        if package is None:
            logger.warning(
                f"{pagename}: widget module {module!r} ({spec}) has no local copy, so the page "
                "cannot draw it offline. Add its npm package to package.json and to "
                "WIDGET_PACKAGES in _ext/offline_assets.py.",
                type="offline",
                subtype="widget",
            )
            continue
        version = _npm_version(app, package)
        if not _satisfies(version, spec):
            logger.warning(
                f"{pagename}: the stored widget state wants {module}@{spec}, but node_modules has "
                f"{package}@{version}; pin a matching version in package.json.",
                type="offline",
                subtype="widget",
            )


def remove_waste(outdir: Path) -> None:
    """Source maps, the theme's icon script, duplicate font formats, translation catalogues."""
    static = outdir / "_static"
    for path in list(static.rglob("*.map")):
        path.unlink()
    for path in [*static.rglob("*.js"), *static.rglob("*.css")]:
        text = path.read_text(encoding="utf-8", errors="surrogateescape")
        if "sourceMappingURL=" in text:
            path.write_text(SOURCE_MAP_COMMENT.sub("", text), encoding="utf-8", errors="surrogateescape")
    icons = static / "scripts" / "fontawesome.js"
    for path in [icons, icons.with_name("fontawesome.js.LICENSE.txt")]:
        path.unlink(missing_ok=True)
    for path in (static / "vendor" / "fontawesome").rglob("*.ttf"):
        path.unlink()
    shutil.rmtree(static / "locales", ignore_errors=True)
    for page in outdir.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        if "fontawesome.js" in text:
            page.write_text(ICON_SCRIPT.sub("", text), encoding="utf-8")


def setup(app: Sphinx) -> dict:
    app.offline_widget_modules = set()  # (module, version spec, page) found in widget states
    app.connect("builder-inited", check_node_modules)
    # After myst-nb has added a page's widget scripts (priority 500).
    app.connect("html-page-context", rewrite_page_scripts, priority=900)
    app.connect("build-finished", copy_assets)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
