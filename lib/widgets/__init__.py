"""The interactive widgets (ipywidgets and anywidget). Imported only when a
widget is asked for, so that `import lib` does not load ipywidgets."""

from lib.widgets.attention_explorer import AttentionExplorer, ExplorerValueError, explorer_values
from lib.widgets.heads import HeadsExplorer, draw_weights, head_weights
from lib.widgets.positions import PositionExplorer
from lib.widgets.schedule import ScheduleExplorer
from lib.widgets.dates import DateTranslator

__all__ = [
    "AttentionExplorer",
    "ExplorerValueError",
    "explorer_values",
    "HeadsExplorer",
    "draw_weights",
    "head_weights",
    "PositionExplorer",
    "ScheduleExplorer",
    "DateTranslator",
]
