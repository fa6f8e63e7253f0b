"""Chapter 8's date model, shipped trained: the live model of the first page.

Introduced on the course's first page (book/intro); the model is chapter 8's.

`date_checkpoint.pt` holds the weights of `lib.date_model_run` (chapter 8's
recipe, 500 steps) in float16, written by ``tools/date_checkpoint.py``. The
first page shows `lib.DateTranslator` on it without training anything;
`load_date_checkpoint` refuses the file unless its SHA-256 is the pinned one.
"""

from __future__ import annotations

import hashlib
import pathlib

import torch

from lib.train.translation import require_pinned_file

__all__ = ["DATE_CHECKPOINT", "DATE_CHECKPOINT_SHA256", "save_date_checkpoint",
           "load_date_checkpoint"]

DATE_CHECKPOINT = pathlib.Path(__file__).parent / "checkpoints" / "date_model.pt"
DATE_CHECKPOINT_SHA256 = "04bd14b7920ed2200fb9e338933ba0519447781ca9b88f980b7fe9c8a0cc3414"


def _require_plain(name: str, value) -> None:
    """Plain values only (what torch.load(weights_only=True) reads back)."""
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                raise TypeError(f"{name}: keys must be str, got {type(k).__name__}")
            _require_plain(f"{name}[{k!r}]", v)
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _require_plain(f"{name}[{i}]", v)
    elif value is not None and type(value) not in (str, int, float, bool):
        raise TypeError(f"{name} must hold plain values (str, int, float, bool, None, "
                        f"lists, dicts), got {type(value).__name__}")


def save_date_checkpoint(state: dict, recipe: dict, path) -> str:
    """Write a `date_model_run` state dict (floating tensors as float16) and ``recipe``
    (a dict of plain values) to ``path``; returns the file's SHA-256 to pin."""
    from lib.teach.probes import date_model_config

    if not isinstance(state, dict) or not state:
        raise TypeError("state must be a non-empty state_dict (dict of tensors)")
    if not isinstance(recipe, dict):
        raise TypeError(f"recipe must be a dict, got {type(recipe).__name__}")
    _require_plain("recipe", recipe)
    date_model_config().build().load_state_dict(state)  # refuses another architecture
    half = {k: v.detach().cpu().to(torch.float16) if v.is_floating_point() else v.cpu()
            for k, v in state.items()}
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"state": half, "recipe": recipe}, path)
    return hashlib.sha256(path.read_bytes()).hexdigest()


def load_date_checkpoint(path=DATE_CHECKPOINT, sha256: str = DATE_CHECKPOINT_SHA256):
    """(model, recipe): chapter 8's date model (`date_model_config`) from ``path``,
    refused (ValueError) unless the file's SHA-256 is ``sha256``; float32, eval mode."""
    from lib.teach.probes import date_model_config

    path = require_pinned_file(path, sha256)
    payload = torch.load(path, map_location="cpu", weights_only=True)
    model = date_model_config().build()
    model.load_state_dict({k: v.float() if v.is_floating_point() else v
                           for k, v in payload["state"].items()})
    return model.eval(), payload["recipe"]
