"""The course's small language models, shipped inside the package (the pretrained-model chapter).

Chapter 15 scores held-out Shakespeare in bits per byte with SmolLM2 beside the
course's own models, all on the same span of a held-out play. Two of its rows are
chapter 11's decoder-only model (the same `lib.DecoderOnlyModel` and recipe) trained
on the same plays: over characters, exactly as chapter 11 trains it, and over the
course's byte-level `lib.BPETokenizer` (512 tokens) instead of characters.
``bench/bpe_language_model.py`` trains both and writes each file with
`save_lm_checkpoint`: the weights in float16, the model's constructor arguments, the
tokenizer (the BPE's merges and pattern, or the model's characters in id order), and
the recipe with its measured results. `load_lm_checkpoint` refuses a file unless its
SHA-256 is the pinned one, and refuses a tokenizer other than the stored one (so a
chapter that rebuilds its vocabulary gets an error, not wrong ids, if it ever differs).

Recipe and licence: ``lib/train/checkpoints/README.md``.
Tests: tests/test_bpe_lm_checkpoint.py, tests/test_char_lm_checkpoint.py.
"""

from __future__ import annotations

import hashlib
import json
import pathlib

import torch

from lib._checks import require_int
from lib.train.bpe import BPETokenizer
from lib.train.translation import require_pinned_file

__all__ = [
    "BPE_LM_CHECKPOINT",
    "BPE_LM_CHECKPOINT_SHA256",
    "CHAR_LM_CHECKPOINT",
    "CHAR_LM_CHECKPOINT_SHA256",
    "save_lm_checkpoint",
    "load_lm_checkpoint",
    "lm_bits_per_byte",
]

_HERE = pathlib.Path(__file__).parent / "checkpoints"
BPE_LM_CHECKPOINT = _HERE / "bpe_language_model.pt"
"""Chapter 11's language model over a 512-token byte-level BPE of the training plays,
float16 weights with its tokenizer and recipe, written by ``bench/bpe_language_model.py
--save`` (recipe in ``lib/train/checkpoints/README.md``); shipped inside the package."""
BPE_LM_CHECKPOINT_SHA256 = "2c5d0bcd365c3592a59a328b03ee6c9ae4ba99f4fc801f7163da30953fa47a1c"

CHAR_LM_CHECKPOINT = _HERE / "char_language_model.pt"
"""Chapter 11's character language model, its recipe exactly (seed 0), float16 weights
with its 84 characters and recipe, written by ``bench/bpe_language_model.py
--save-char`` (recipe in ``lib/train/checkpoints/README.md``); shipped inside the
package."""
CHAR_LM_CHECKPOINT_SHA256 = "d84cbbb86a5056b03f4e7315e765a2cdcc658edc476793157774d0612dadb47e"

_CONFIG_KEYS = {"vocab_size", "d_model", "n_heads", "n_layers", "d_ff", "dropout",
                "norm_first", "max_len", "positional", "activation", "scale_embedding"}


def _plain(name: str, value: dict) -> dict:
    if not isinstance(value, dict):
        raise TypeError(f"{name} must be a dict, got {type(value).__name__}")
    try:  # plain values only (torch.__version__ is a str subclass), for weights_only loading
        return json.loads(json.dumps(value))
    except TypeError as err:
        raise TypeError(f"{name}: plain values only (numbers, strings, lists, dicts): {err}")


def _check_tokenizer(tokenizer, or_none: bool = False):
    """A BPETokenizer, or a string of distinct characters (id i is character i)."""
    if tokenizer is None and or_none:
        return
    if isinstance(tokenizer, str):
        if not tokenizer or len(set(tokenizer)) != len(tokenizer):
            raise ValueError("tokenizer: a character vocabulary is a non-empty string of "
                             "distinct characters, id i being character i")
        return
    if not isinstance(tokenizer, BPETokenizer):
        raise TypeError(f"tokenizer must be a lib.BPETokenizer or a string of characters"
                        f"{' or None' if or_none else ''}, got {type(tokenizer).__name__}")


def _size(tokenizer) -> int:
    return len(tokenizer) if isinstance(tokenizer, str) else tokenizer.vocab_size


def _encode(tokenizer, text: str) -> list[int]:
    if isinstance(tokenizer, BPETokenizer):
        return tokenizer.encode(text)
    index = {c: i for i, c in enumerate(tokenizer)}
    missing = sorted(set(text) - set(index))
    if missing:
        raise ValueError(f"text: characters outside the vocabulary: {''.join(missing)!r}")
    return [index[c] for c in text]


def save_lm_checkpoint(model, config: dict, tokenizer, recipe: dict, path) -> str:
    """Write `model` (a `lib.DecoderOnlyModel` built with the keyword arguments
    `config`) to `path`: its weights in float16, `config`, the tokenizer, and `recipe`
    (a dict of plain values). `tokenizer` is a `lib.BPETokenizer` (its merges and
    pattern are stored) or, for a character model, the string of its characters in id
    order. Returns the file's SHA-256, to pin where it is loaded."""
    from lib.model.families import DecoderOnlyModel

    if not isinstance(model, DecoderOnlyModel):
        raise TypeError(f"model must be a lib.DecoderOnlyModel, got {type(model).__name__}")
    _check_tokenizer(tokenizer)
    config, recipe = _plain("config", config), _plain("recipe", recipe)
    if set(config) != _CONFIG_KEYS:
        raise ValueError(f"config: needs exactly the keys {sorted(_CONFIG_KEYS)}, "
                         f"got {sorted(config)}")
    if not config["vocab_size"] == model.vocab_size == _size(tokenizer):
        raise ValueError(f"config: vocab_size {config['vocab_size']}, the model's "
                         f"{model.vocab_size} and the tokenizer's {_size(tokenizer)} "
                         "must be equal")
    state = {k: v.detach().cpu().to(torch.float16) if v.is_floating_point() else v.cpu()
             for k, v in model.state_dict().items()}
    if isinstance(tokenizer, str):
        data = {"characters": tokenizer}
    else:
        data = tokenizer.to_dict()
        data.pop("merge_counts", None)  # not needed to encode
    payload = {"state": state, "config": config, "tokenizer": data, "recipe": recipe}
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(payload, path)
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _describe_difference(given, stored) -> str:
    if isinstance(given, str) and isinstance(stored, str):
        same = next((k for k, (a, b) in enumerate(zip(given, stored)) if a != b),
                    min(len(given), len(stored)))
        return (f"{len(given)} characters, against the stored {len(stored)}; "
                f"the first {same} agree")
    if isinstance(given, BPETokenizer) and isinstance(stored, BPETokenizer):
        same = next((k for k, (a, b) in enumerate(zip(given.merges, stored.merges))
                     if a != b), min(len(given.merges), len(stored.merges)))
        return (f"{given.vocab_size} tokens, against the stored {stored.vocab_size}; "
                f"the first {same} merges agree")
    kind = lambda t: "characters" if isinstance(t, str) else "a BPE"  # noqa: E731
    return f"{kind(given)}, against the stored {kind(stored)}"


def load_lm_checkpoint(path, sha256: str, tokenizer=None):
    """(model, tokenizer, recipe) from a file `save_lm_checkpoint` wrote.

    Refused (ValueError) unless the file's SHA-256 is `sha256`; if `tokenizer` is
    given (for example the BPE retrained on the training plays, or the characters of
    the training plays), also unless it is the stored one: the same merges and
    pattern, or the same characters in the same order. The tokenizer returned is
    rebuilt from the file (a `lib.BPETokenizer`, or the string of characters); the
    weights come back in float32, the model in eval mode."""
    from lib.model.families import DecoderOnlyModel

    _check_tokenizer(tokenizer, or_none=True)
    path = require_pinned_file(path, sha256)
    payload = torch.load(path, map_location="cpu", weights_only=True)
    data = payload["tokenizer"]
    stored = data["characters"] if "characters" in data else BPETokenizer.from_dict(data)
    if tokenizer is not None and tokenizer != stored:
        raise ValueError(f"tokenizer: not the vocabulary the checkpoint was trained with "
                         f"({_describe_difference(tokenizer, stored)})")
    config = payload["config"]
    if config["vocab_size"] != _size(stored):
        raise ValueError(f"path: the model has {config['vocab_size']} tokens, its stored "
                         f"tokenizer {_size(stored)}")
    model = DecoderOnlyModel(**config)
    model.load_state_dict({k: v.float() if v.is_floating_point() else v
                           for k, v in payload["state"].items()})
    return model.eval(), stored, payload["recipe"]


def lm_bits_per_byte(model, tokenizer, text: str, context: str = "\n", *,
                    stride: int | None = None):
    """Bits per byte of `model` (a `lib.DecoderOnlyModel` over `tokenizer`'s ids: a
    `lib.BPETokenizer`, or a string of characters, id i being character i) on every
    token of `text`, as chapter 15 scores every course model: `context` (one token,
    not scored) then `text` are encoded and cut into non-overlapping windows of
    ``max_len + 1`` tokens (`lib.evaluation_windows`); the tokens of the tail that
    fills no window are scored in one more window, the last ``max_len + 1`` tokens.
    The total loss in nats is divided by ln 2 and by the UTF-8 bytes of `text`.
    Returns (bits per byte, scored tokens, bytes).

    That way the first targets of every window see 1, 2, 3, ... tokens of context.
    With ``stride`` (an int, 1 .. ``max_len``) the windows overlap instead: they start
    0, stride, 2·stride, ... (the last one ends at the text's end), and each scores only
    the targets no earlier window scored, so after the first window every target sees
    at least ``max_len - stride`` tokens. ``stride = max_len`` is the default scoring."""
    import math

    import torch.nn.functional as F

    from lib.model.families import DecoderOnlyModel
    from lib.train.generate import context_length
    from lib.train.training import evaluation_windows, lm_loss

    if not isinstance(model, DecoderOnlyModel):
        raise TypeError(f"model must be a lib.DecoderOnlyModel, got {type(model).__name__}")
    _check_tokenizer(tokenizer)
    if _size(tokenizer) != model.vocab_size:
        raise ValueError(f"tokenizer: {_size(tokenizer)} tokens, the model has "
                         f"{model.vocab_size}")
    if not isinstance(text, str) or not isinstance(context, str) or not context:
        raise TypeError("text and context must be strings, context not empty")
    n_context = len(_encode(tokenizer, context))
    if n_context != 1:
        raise ValueError(f"context: must be one token, {context!r} is {n_context}")
    ids = torch.tensor(_encode(tokenizer, context) + _encode(tokenizer, text))
    window = context_length(model)
    if ids.numel() < window + 1:
        raise ValueError(f"text: {ids.numel() - 1} tokens, fewer than one window of {window}")
    if stride is not None:
        require_int("stride", stride, minimum=1)
        if stride > window:
            raise ValueError(f"stride must be between 1 and the model's context {window}, "
                             f"got {stride}")
        nats = _strided_nats(model, ids, window, stride)
        return nats / math.log(2) / len(text.encode("utf-8")), ids.numel() - 1, \
            len(text.encode("utf-8"))
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


def _strided_nats(model, ids, window: int, stride: int, batch_size: int = 64) -> float:
    """Total nats of ids[1:] in overlapping windows of window + 1 tokens that start
    0, stride, 2·stride, ... (the last at len(ids) - window - 1); every target scored
    once, by the first window that holds it."""
    import torch.nn.functional as F

    n = ids.numel() - 1  # targets ids[1..n]
    starts, first_new = [0], [0]  # window start, index (in the window) of its first new target
    scored = window
    while scored < n:
        start = min(scored - window + stride, n - window)
        starts.append(start)
        first_new.append(scored - start)
        scored = start + window
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    total = 0.0
    with torch.no_grad():
        for i in range(0, len(starts), batch_size):
            chunk = torch.stack([ids[s:s + window + 1] for s in starts[i:i + batch_size]])
            chunk = chunk.to(device)
            logits = model(chunk[:, :-1]).double()  # (b, window, |V|)
            nats = F.cross_entropy(logits.flatten(0, 1), chunk[:, 1:].flatten(),
                                   reduction="none").view(len(chunk), window)
            for row, j in zip(nats, first_new[i:i + batch_size]):
                total += float(row[j:].sum())
    model.train(was_training)
    return total
