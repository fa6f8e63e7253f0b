"""The JupyterLab settings `make lab` installs into .venv (issue 27, item 8).

JupyterLab reads default settings from ``<app settings dir>/overrides.json``
(``.venv/share/jupyter/lab/settings/`` for the course's JupyterLab); a reader's own
choices (Settings menu, ``~/.jupyter/lab/user-settings``) still win over them.

One setting is written, and only because an older `make lab` turned it on:
the widget manager's "Save Widget State Automatically" (``saveState``) is OFF.
With it on, @jupyter-widgets/jupyterlab-manager 5 (ipywidgets 8) marks a notebook
modified for every widget model it restores from the notebook's stored state
(``register_model`` -> ``setDirty``), so every chapter that stores a widget
(the explorers of chapters 2, 4, 6 and 8) was marked modified as soon as it
was opened; JupyterLab's autosave (every 120 s) then rewrote the chapter file,
and for a notebook that is not trusted (any chapter you have not run yourself)
with an empty widget state: the stored explorers were gone from the file.
JupyterLab's own default is off, as written here; tests/test_lab_settings.py and
tests/browser/test_lab.py (`make test-lab`) check it.

Usage:
    python tools/lab_settings.py [--settings-dir DIR]          # write (idempotent)
    python tools/lab_settings.py [--settings-dir DIR] --check  # exit 1 if not as here

Other settings already in overrides.json are kept.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DIR = ROOT / ".venv" / "share" / "jupyter" / "lab" / "settings"
WIDGETS_PLUGIN = "@jupyter-widgets/jupyterlab-manager:plugin"
# plugin id -> settings this course requires (merged into overrides.json)
REQUIRED: dict[str, dict[str, object]] = {WIDGETS_PLUGIN: {"saveState": False}}


def _read(path: Path) -> dict:
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise SystemExit(f"{path} is not valid JSON ({err}); fix or remove it, then run again")
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise SystemExit(f"{path} must map plugin ids to objects of settings")
    return data


def problems(settings_dir: Path) -> list[str]:
    """What in ``settings_dir/overrides.json`` differs from REQUIRED (empty: all as here)."""
    data = _read(Path(settings_dir) / "overrides.json")
    found = []
    for plugin, wanted in REQUIRED.items():
        for key, value in wanted.items():
            have = data.get(plugin, {}).get(key, "<not set>")
            if have != value:
                found.append(f"{plugin} {key}: {json.dumps(have) if have != '<not set>' else have}, "
                             f"the course needs {json.dumps(value)}")
    return found


def apply(settings_dir: Path) -> bool:
    """Write REQUIRED into ``settings_dir/overrides.json``, keeping its other settings.
    Returns True if the file changed."""
    settings_dir = Path(settings_dir)
    path = settings_dir / "overrides.json"
    data = _read(path)
    for plugin, wanted in REQUIRED.items():
        data.setdefault(plugin, {}).update(wanted)
    text = json.dumps(data, indent=2, sort_keys=True) + "\n"
    if path.exists() and path.read_text(encoding="utf-8") == text:
        return False
    settings_dir.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--settings-dir", type=Path, default=DEFAULT_DIR,
                        help="JupyterLab's app settings dir (default: %(default)s)")
    parser.add_argument("--check", action="store_true", help="only check; exit 1 if it differs")
    args = parser.parse_args(argv)
    path = args.settings_dir / "overrides.json"
    if args.check:
        found = problems(args.settings_dir)
        for line in found:
            print(f"{path}: {line}")
        return 1 if found else 0
    changed = apply(args.settings_dir)
    print(f"{path}: {'written' if changed else 'already as required'} "
          f"(Save Widget State Automatically: off, so opening a chapter does not modify it)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
