"""Character vocabularies and padded batches for sequence-to-sequence training.

Introduced in chapter 8 (training); the date task itself is in `lib.train.dates`.

Everything is character-level: one small vocabulary serves source and target,
with three special tokens PAD (0), BOS (1) and EOS (2).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from lib._checks import require_device, require_token_id, shape
from lib.model.attention import causal_mask, padding_mask

__all__ = [
    "PAD",
    "BOS",
    "EOS",
    "CharVocab",
    "Batch",
    "make_batch",
]

PAD, BOS, EOS = "<pad>", "<bos>", "<eos>"


class CharVocab:
    """Characters <-> integer ids, with PAD = 0, BOS = 1, EOS = 2 first.

    ``encode`` refuses a character the vocabulary does not hold (a ValueError
    naming it) instead of silently mapping it to some "unknown" id.
    """

    def __init__(self, characters: str):
        if not isinstance(characters, str) or not characters:
            raise ValueError("characters must be a non-empty string")
        if len(set(characters)) != len(characters):
            raise ValueError(f"characters must be distinct, got {characters!r}")
        self.itos: list[str] = [PAD, BOS, EOS, *characters]
        self.stoi: dict[str, int] = {s: i for i, s in enumerate(self.itos)}
        self.pad_id, self.bos_id, self.eos_id = 0, 1, 2

    def __len__(self) -> int:
        return len(self.itos)

    def __repr__(self) -> str:
        return f"CharVocab(size={len(self)}, characters={''.join(self.itos[3:])!r})"

    def encode(self, text: str, bos: bool = False, eos: bool = False) -> list[int]:
        """A string -> its list of ids, optionally framed by BOS and EOS."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        unknown = sorted({c for c in text if c not in self.stoi})
        if unknown:
            raise ValueError(f"text {text!r} holds characters outside the vocabulary: {unknown}")
        ids = [self.stoi[c] for c in text]
        return ([self.bos_id] if bos else []) + ids + ([self.eos_id] if eos else [])

    def decode(self, ids) -> str:
        """Ids -> string: skip PAD and BOS, stop at the first EOS."""
        if isinstance(ids, torch.Tensor):
            if ids.dim() != 1:
                raise ValueError(f"decode takes one sequence of shape (length,), got {shape(ids)}")
            ids = ids.tolist()
        out = []
        for i in ids:
            i = int(i)
            if not 0 <= i < len(self):
                raise ValueError(f"id {i} is outside [0, {len(self)}) for this vocabulary")
            if i == self.eos_id:
                break
            if i in (self.pad_id, self.bos_id):
                continue
            out.append(self.itos[i])
        return "".join(out)


@dataclass
class Batch:
    """One padded batch of a sequence-to-sequence task.

    src      (B, n)        source ids, PAD on the right
    tgt_in   (B, m)        BOS + target: what the decoder reads (teacher forcing)
    tgt_out  (B, m)        target + EOS: what it must predict, PAD on the right
    src_mask (B, 1, 1, n)  True on real source tokens (for encoder and cross-attention)
    tgt_mask (B, 1, m, m)  causal AND True on real target tokens
    pad_id                 the vocabulary's PAD id
    """

    src: torch.Tensor
    tgt_in: torch.Tensor
    tgt_out: torch.Tensor
    src_mask: torch.Tensor
    tgt_mask: torch.Tensor
    pad_id: int = 0

    @property
    def n_tokens(self) -> int:
        """Target tokens that count in the loss (everything but PAD)."""
        return int((self.tgt_out != self.pad_id).sum())

    @property
    def device(self) -> torch.device:
        return self.src.device

    def to(self, device: torch.device | str) -> "Batch":
        """The same batch on ``device`` (itself if it is there already)."""
        device = require_device("device", device)
        if torch.device(device) == self.src.device:
            return self
        return Batch(*(t.to(device) for t in (self.src, self.tgt_in, self.tgt_out, self.src_mask, self.tgt_mask)),
                     pad_id=self.pad_id)


def _pad(rows: list[list[int]], pad_id: int) -> torch.Tensor:
    width = max(len(r) for r in rows)
    return torch.tensor([r + [pad_id] * (width - len(r)) for r in rows], dtype=torch.long)


def make_batch(pairs, vocab: CharVocab, device: torch.device | str | None = None) -> Batch:
    """(source, target) string pairs -> a padded `Batch` with its masks, on ``device``
    (the CPU by default).

    Raises ValueError for an empty list, a pair that is not two strings, an
    empty string or a character outside ``vocab``.
    """
    if not isinstance(vocab, CharVocab):
        raise TypeError(f"vocab must be a CharVocab, got {type(vocab).__name__}")
    if device is not None:
        require_device("device", device)
    pairs = list(pairs)
    if not pairs:
        raise ValueError("make_batch needs at least one (source, target) pair")
    for p in pairs:
        if not (isinstance(p, tuple) and len(p) == 2 and all(isinstance(s, str) and s for s in p)):
            raise ValueError(f"each pair must be two non-empty strings (source, target), got {p!r}")
    return batch_from_ids(
        [vocab.encode(s) for s, _ in pairs], [vocab.encode(t) for _, t in pairs],
        vocab.pad_id, vocab.bos_id, vocab.eos_id, device,
    )


def batch_from_ids(src_rows, tgt_rows, pad_id: int, bos_id: int, eos_id: int, device=None) -> Batch:
    """Source and target id lists (no BOS/EOS) -> a padded `Batch` with its masks.

    The one place a sequence-to-sequence batch is put together: `make_batch`
    (characters) and `lib.make_translation_batch` (subwords) both end here.
    ``pad_id``, ``bos_id`` and ``eos_id`` must be int token ids (a float or a
    tensor would silently become a PAD id the masks never match).
    """
    for name, value in (("pad_id", pad_id), ("bos_id", bos_id), ("eos_id", eos_id)):
        require_token_id(name, value)
    if device is not None:
        require_device("device", device)
    src_rows, tgt_rows = list(src_rows), list(tgt_rows)
    if not src_rows or len(src_rows) != len(tgt_rows):
        raise ValueError(
            f"src_rows and tgt_rows must be non-empty and of equal length, got "
            f"{len(src_rows)} and {len(tgt_rows)} rows"
        )
    src = _pad(src_rows, pad_id)  # (B, n)
    tgt_in = _pad([[bos_id, *t] for t in tgt_rows], pad_id)  # (B, m): BOS + target
    tgt_out = _pad([[*t, eos_id] for t in tgt_rows], pad_id)  # (B, m): target + EOS
    src_mask = padding_mask(src, pad_id)  # (B, 1, 1, n)
    m = tgt_in.shape[1]
    tgt_mask = causal_mask(m)[None, None] & padding_mask(tgt_in, pad_id)  # (B, 1, m, m)
    batch = Batch(src, tgt_in, tgt_out, src_mask, tgt_mask, pad_id=pad_id)
    return batch if device is None else batch.to(device)

