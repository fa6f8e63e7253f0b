"""The course's BPE language model, shipped inside the package (the pretrained-model chapter).

Chapter 15 scores held-out Shakespeare in bits per byte with SmolLM2 beside the
course's own models. Its BPE row is chapter 11's decoder-only model (the same
`lib.DecoderOnlyModel` and recipe) trained on the same plays, tokenized by the
course's byte-level `lib.BPETokenizer` (512 tokens) instead of characters.
``bench/bpe_language_model.py`` trains it and writes the file with
`save_bpe_lm_checkpoint`: the weights in float16, the model's constructor
arguments, the tokenizer's merges and pattern, and the recipe with its measured
results. `load_bpe_lm_checkpoint` refuses the file unless its SHA-256 is the
pinned one, and refuses a tokenizer other than the stored one (so a chapter that
retrains the BPE gets an error, not wrong ids, if the merges ever differ).

Recipe and licence: ``lib/train/checkpoints/README.md``.
Tests: tests/test_bpe_lm_checkpoint.py.
"""

from __future__ import annotations

import hashlib
import json
import pathlib

import torch

from lib.train.bpe import BPETokenizer
from lib.train.translation import require_pinned_file

__all__ = [
    "BPE_LM_CHECKPOINT",
    "BPE_LM_CHECKPOINT_SHA256",
    "save_bpe_lm_checkpoint",
    "load_bpe_lm_checkpoint",
    "bpe_bits_per_byte",
]

BPE_LM_CHECKPOINT = pathlib.Path(__file__).parent / "checkpoints" / "bpe_language_model.pt"
"""Chapter 11's language model over a 512-token byte-level BPE of the training plays,
float16 weights with its tokenizer and recipe, written by ``bench/bpe_language_model.py
--save`` (recipe in ``lib/train/checkpoints/README.md``); shipped inside the package."""
BPE_LM_CHECKPOINT_SHA256 = "2c5d0bcd365c3592a59a328b03ee6c9ae4ba99f4fc801f7163da30953fa47a1c"

_CONFIG_KEYS = {"vocab_size", "d_model", "n_heads", "n_layers", "d_ff", "dropout",
                "norm_first", "max_len", "positional", "activation", "scale_embedding"}


def _plain(name: str, value: dict) -> dict:
    if not isinstance(value, dict):
        raise TypeError(f"{name} must be a dict, got {type(value).__name__}")
    try:  # plain values only (torch.__version__ is a str subclass), for weights_only loading
        return json.loads(json.dumps(value))
    except TypeError as err:
        raise TypeError(f"{name}: plain values only (numbers, strings, lists, dicts): {err}")


def save_bpe_lm_checkpoint(model, config: dict, tokenizer: BPETokenizer, recipe: dict,
                           path) -> str:
    """Write `model` (a `lib.DecoderOnlyModel` built with the keyword arguments
    `config`) to `path`: its weights in float16, `config`, `tokenizer`'s merges and
    pattern, and `recipe` (a dict of plain values). Returns the file's SHA-256, to pin
    where it is loaded."""
    from lib.model.families import DecoderOnlyModel

    if not isinstance(model, DecoderOnlyModel):
        raise TypeError(f"model must be a lib.DecoderOnlyModel, got {type(model).__name__}")
    if not isinstance(tokenizer, BPETokenizer):
        raise TypeError(f"tokenizer must be a lib.BPETokenizer, got {type(tokenizer).__name__}")
    config, recipe = _plain("config", config), _plain("recipe", recipe)
    if set(config) != _CONFIG_KEYS:
        raise ValueError(f"config: needs exactly the keys {sorted(_CONFIG_KEYS)}, "
                         f"got {sorted(config)}")
    if not config["vocab_size"] == model.vocab_size == tokenizer.vocab_size:
        raise ValueError(f"config: vocab_size {config['vocab_size']}, the model's "
                         f"{model.vocab_size} and the tokenizer's {tokenizer.vocab_size} "
                         "must be equal")
    state = {k: v.detach().cpu().to(torch.float16) if v.is_floating_point() else v.cpu()
             for k, v in model.state_dict().items()}
    data = tokenizer.to_dict()
    data.pop("merge_counts", None)  # not needed to encode
    payload = {"state": state, "config": config, "tokenizer": data, "recipe": recipe}
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(payload, path)
    return hashlib.sha256(path.read_bytes()).hexdigest()


def load_bpe_lm_checkpoint(path, sha256: str, tokenizer: BPETokenizer | None = None):
    """(model, tokenizer, recipe) from a file `save_bpe_lm_checkpoint` wrote.

    Refused (ValueError) unless the file's SHA-256 is `sha256`; if `tokenizer` is
    given (for example the BPE retrained on the training plays), also unless its
    merges and pattern are the stored ones. The tokenizer returned is rebuilt from
    the stored merges; the weights come back in float32, the model in eval mode."""
    from lib.model.families import DecoderOnlyModel

    if tokenizer is not None and not isinstance(tokenizer, BPETokenizer):
        raise TypeError(f"tokenizer must be a lib.BPETokenizer or None, "
                        f"got {type(tokenizer).__name__}")
    path = require_pinned_file(path, sha256)
    payload = torch.load(path, map_location="cpu", weights_only=True)
    stored = BPETokenizer.from_dict(payload["tokenizer"])
    if tokenizer is not None and tokenizer != stored:
        same = next((k for k, (a, b) in enumerate(zip(tokenizer.merges, stored.merges))
                     if a != b), min(len(tokenizer.merges), len(stored.merges)))
        raise ValueError(f"tokenizer: not the vocabulary the checkpoint was trained with "
                         f"({tokenizer.vocab_size} tokens, against the stored "
                         f"{stored.vocab_size}; the first {same} merges agree)")
    config = payload["config"]
    if config["vocab_size"] != stored.vocab_size:
        raise ValueError(f"path: the model has {config['vocab_size']} tokens, its stored "
                         f"tokenizer {stored.vocab_size}")
    model = DecoderOnlyModel(**config)
    model.load_state_dict({k: v.float() if v.is_floating_point() else v
                           for k, v in payload["state"].items()})
    return model.eval(), stored, payload["recipe"]


def bpe_bits_per_byte(model, tokenizer: BPETokenizer, text: str, context: str = "\n"):
    """Bits per byte of `model` (a `lib.DecoderOnlyModel` over `tokenizer`'s ids) on every
    token of `text`, as chapter 15 scores every model: `context` (one token, not scored)
    then `text` are encoded and cut into non-overlapping windows of ``max_len + 1``
    tokens (`lib.evaluation_windows`); the tokens of the tail that fills no window are
    scored in one more window, the last ``max_len + 1`` tokens. The total loss in nats
    is divided by ln 2 and by the UTF-8 bytes of `text`.
    Returns (bits per byte, scored tokens, bytes)."""
    import math

    import torch.nn.functional as F

    from lib.model.families import DecoderOnlyModel
    from lib.train.generate import context_length
    from lib.train.training import evaluation_windows, lm_loss

    if not isinstance(model, DecoderOnlyModel):
        raise TypeError(f"model must be a lib.DecoderOnlyModel, got {type(model).__name__}")
    if not isinstance(tokenizer, BPETokenizer):
        raise TypeError(f"tokenizer must be a lib.BPETokenizer, got {type(tokenizer).__name__}")
    if tokenizer.vocab_size != model.vocab_size:
        raise ValueError(f"tokenizer: {tokenizer.vocab_size} tokens, the model has "
                         f"{model.vocab_size}")
    if not isinstance(text, str) or not isinstance(context, str) or not context:
        raise TypeError("text and context must be strings, context not empty")
    n_context = len(tokenizer.encode(context))
    if n_context != 1:
        raise ValueError(f"context: must be one token, {context!r} is {n_context}")
    ids = torch.tensor(tokenizer.encode(context) + tokenizer.encode(text))
    window = context_length(model)
    if ids.numel() < window + 1:
        raise ValueError(f"text: {ids.numel() - 1} tokens, fewer than one window of {window}")
    windows = evaluation_windows(ids, window)
    n_scored = windows.tokens.shape[0] * window
    nats = lm_loss(model, windows) * n_scored
    tail = ids.numel() - 1 - n_scored
    if tail:
        last = ids[-(window + 1):].to(next(model.parameters()).device)
        was_training = model.training
        model.eval()
        with torch.no_grad():
            logits = model(last[None, :-1])[0, -tail:]  # (tail, |V|)
            nats += float(F.cross_entropy(logits, last[-tail:], reduction="sum"))
        model.train(was_training)
    return nats / math.log(2) / len(text.encode("utf-8")), ids.numel() - 1, \
        len(text.encode("utf-8"))
