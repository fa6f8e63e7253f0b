"""`lib`: the small PyTorch Transformer that every chapter of the course imports.

Batch-first tensors throughout; masks are bool with True = "may attend".
The library is grouped in layers:

- `lib.model`: attention, the layers, the Transformer and its relatives;
- `lib.train`: the schedule, the loss, the training loop, data and decoding;
- `lib.teach`: exercise checkers, worked-example tables, measurements, plots;
- `lib.widgets`: the interactive widgets (loaded only when first used);
- `lib.interop`: weight copies to and from other implementations.

Chapters import every name from `lib` itself (``from lib import ...``), so
moving a function between these modules never breaks a notebook. Each
module's docstring names the chapter that introduces it.
"""

from __future__ import annotations

import importlib

from lib.interop import *  # noqa: F403
from lib.interop import __all__ as _interop_all
from lib.model import *  # noqa: F403
from lib.model import __all__ as _model_all
from lib.teach import *  # noqa: F403
from lib.teach import __all__ as _teach_all
from lib.train import *  # noqa: F403
from lib.train import __all__ as _train_all
from lib.train.lm_checkpoint import *  # noqa: F403
from lib.train.lm_checkpoint import __all__ as _lm_checkpoint_all

# Widgets load ipywidgets and anywidget: they are imported on first use (PEP 562).
_WIDGETS = {
    "AttentionExplorer": "lib.widgets.attention_explorer",
    "ExplorerValueError": "lib.widgets.attention_explorer",
    "explorer_values": "lib.widgets.attention_explorer",
    "HeadsExplorer": "lib.widgets.heads",
    "draw_weights": "lib.widgets.heads",
    "head_weights": "lib.widgets.heads",
    "PositionExplorer": "lib.widgets.positions",
    "ScheduleExplorer": "lib.widgets.schedule",
    "DateTranslator": "lib.widgets.dates",
}


def __getattr__(name: str):
    if name in _WIDGETS:
        return getattr(importlib.import_module(_WIDGETS[name]), name)
    raise AttributeError(f"module 'lib' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WIDGETS))


__all__ = [*_model_all, *_train_all, *_teach_all, *_interop_all, *_lm_checkpoint_all, *_WIDGETS]
