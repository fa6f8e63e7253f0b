"""Translation on real text: subword vocabularies that remember words, batches
by length, and decoding of a whole held-out split (the translation chapter).

The chapter translates Greek verses into English (`lib.train.aligned_corpus`).
The pieces, in reading order:

- `SubwordVocab`: a byte-level BPE tokenizer (`lib.BPETokenizer`, the
  tokenization chapter) with the three special tokens in front: PAD 0, BOS 1,
  EOS 2, and BPE token k at id k + 3. `encode_words` encodes a verse word by
  word and says, for every subword, which word it came from: that is what lets
  the chapter compare attention (over subwords) with human alignments (between
  words). Bytes are the base alphabet, so no word is ever unknown.
- `encode_pairs`: every verse pair as `EncodedPair` (ids and word indices).
- `length_batches`: batches of examples of similar length under a token
  budget, so little of each batch is padding; `make_translation_batch` pads
  them into a `lib.Batch` with its masks.
- `translate_ids`: decode a list of sources in length-sorted batches, greedy
  or with the paper's beam search (beam 4, length penalty 0.6, at most
  input length + 50 tokens), and return the outputs in the original order.
- `paired_bootstrap`: how sure is a difference of BLEU (or chrF) between two
  systems on the same verses? Resample the verses with replacement, as
  sacrebleu's paired bootstrap does, and read the 95% interval of the
  difference.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path
from dataclasses import dataclass

import torch

from lib._checks import require_device, require_int, require_positive_int
from lib.train.bpe import BPETokenizer
from lib.train.data import Batch, batch_from_ids
from lib.train.decoding import beam_search, greedy_decode

__all__ = [
    "PairedDifference",
    "paired_bootstrap",
    "SubwordVocab",
    "EncodedPair",
    "train_subword_vocab",
    "encode_pairs",
    "length_batches",
    "make_translation_batch",
    "translate_ids",
    "translation_loss",
    "vocab_fingerprint",
    "save_translation_checkpoint",
    "load_translation_checkpoint",
]

N_SPECIAL = 3  # PAD, BOS, EOS in front of the BPE ids


class SubwordVocab:
    """A `lib.BPETokenizer` with PAD (0), BOS (1) and EOS (2) in front of its ids."""

    pad_id, bos_id, eos_id = 0, 1, 2

    def __init__(self, tokenizer: BPETokenizer):
        if not isinstance(tokenizer, BPETokenizer):
            raise TypeError(f"tokenizer must be a lib.BPETokenizer, got {type(tokenizer).__name__}")
        self.tokenizer = tokenizer

    def __len__(self) -> int:
        return self.tokenizer.vocab_size + N_SPECIAL

    def __repr__(self) -> str:
        return f"SubwordVocab({len(self)} ids: 3 special + {self.tokenizer.vocab_size} BPE)"

    def encode(self, text: str) -> list[int]:
        """The ids of `text` (no BOS or EOS)."""
        return [i + N_SPECIAL for i in self.tokenizer.encode(text)]

    def encode_words(
        self, words: Sequence[str], space_before: Sequence[bool] | None = None
    ) -> tuple[list[int], list[int]]:
        """Encode a sentence word by word: (ids, word_of), ``word_of[t]`` the index of
        the word subword t belongs to. Every word is encoded with a space in front
        (as in running text) unless ``space_before[k]`` is False (punctuation)."""
        if isinstance(words, str):
            raise TypeError("words must be a sequence of words, got a single str")
        if not words:
            raise ValueError("words: empty sentence (nothing to encode)")
        if space_before is None:
            space_before = [True] * len(words)
        if len(space_before) != len(words):
            raise ValueError(f"space_before: {len(space_before)} flags for {len(words)} words")
        ids: list[int] = []
        word_of: list[int] = []
        for k, (word, space) in enumerate(zip(words, space_before)):
            if not isinstance(word, str) or not word:
                raise ValueError(f"words: word {k} is empty or not a str ({word!r})")
            piece = self.encode((" " if space else "") + word)
            ids.extend(piece)
            word_of.extend([k] * len(piece))
        return ids, word_of

    def decode(self, ids) -> str:
        """Text of `ids`, stopping at the first EOS; PAD and BOS are skipped. The text is
        a sentence, returned without outer whitespace (a generated first token may carry
        the space before its word): ``decode(encode(t)) == t.strip()``, not ``t``."""
        if isinstance(ids, torch.Tensor):
            ids = ids.tolist()
        out = []
        for i in ids:
            i = int(i)
            if i == self.eos_id:
                break
            if i in (self.pad_id, self.bos_id):
                continue
            if not 0 <= i < len(self):
                raise ValueError(f"ids: {i} is not an id of this vocabulary (0-{len(self) - 1})")
            out.append(i - N_SPECIAL)
        return self.tokenizer.decode(out).strip()


def train_subword_vocab(sentences: Sequence[str], vocab_size: int) -> SubwordVocab:
    """A `SubwordVocab` whose BPE learnt ``vocab_size - 256`` merges from `sentences`
    (each encoded with a leading space, as `encode_words` encodes words)."""
    if isinstance(sentences, str):
        raise TypeError("sentences must be a sequence of str, got a single str")
    tokenizer = BPETokenizer.train((" " + s for s in sentences), vocab_size)
    return SubwordVocab(tokenizer)


@dataclass(frozen=True)
class EncodedPair:
    """One verse pair as subword ids, with the word each subword came from."""

    src: tuple[int, ...]
    src_word: tuple[int, ...]
    tgt: tuple[int, ...]
    tgt_word: tuple[int, ...]


def _space_before(pair) -> list[bool]:
    return [True] + [bool(s) for s in pair.space_after[:-1]]


def encode_pairs(pairs, src_vocab: SubwordVocab, tgt_vocab: SubwordVocab) -> list[EncodedPair]:
    """Every `lib.VersePair` (Greek words, English tokens) as an `EncodedPair`."""
    out = []
    for pair in pairs:
        src, src_word = src_vocab.encode_words(pair.source)
        tgt, tgt_word = tgt_vocab.encode_words(pair.target, _space_before(pair))
        out.append(EncodedPair(tuple(src), tuple(src_word), tuple(tgt), tuple(tgt_word)))
    return out


def length_batches(
    lengths: Sequence[int], max_tokens: int, seed: int | None = 0, max_size: int | None = None
) -> list[list[int]]:
    """Group example indices into batches of similar length.

    The examples are sorted by length and cut into consecutive runs whose padded
    size (rows × longest row) stays within ``max_tokens`` (a single example
    longer than that gets a batch of its own); with ``max_size`` no batch has
    more rows. The batches are then shuffled with ``seed`` (None: kept in length
    order). Every index appears in exactly one batch.
    """
    if isinstance(lengths, torch.Tensor):
        lengths = lengths.tolist()
    lengths = list(lengths)
    if not lengths:
        raise ValueError("lengths: no examples to batch")
    for k, n in enumerate(lengths):
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"lengths: item {k} is {n!r}, expected a positive int")
    require_positive_int("max_tokens", max_tokens)
    if max_size is not None:
        require_positive_int("max_size", max_size)
    if seed is not None:
        require_int("seed", seed)
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    batches: list[list[int]] = []
    current: list[int] = []
    for i in order:
        width = lengths[i]  # sorted: the newest example is the batch's longest
        full = max_size is not None and len(current) >= max_size
        if current and (width * (len(current) + 1) > max_tokens or full):
            batches.append(current)
            current = []
        current.append(i)
    batches.append(current)
    if seed is not None:
        random.Random(seed).shuffle(batches)
    return batches


def make_translation_batch(examples: Sequence[EncodedPair], device=None) -> Batch:
    """`EncodedPair`s -> a padded `lib.Batch` (PAD 0, BOS 1, EOS 2) with its masks."""
    if device is not None:
        require_device("device", device)
    examples = list(examples)
    if not examples:
        raise ValueError("examples: empty batch")
    for k, ex in enumerate(examples):
        if not isinstance(ex, EncodedPair):
            raise TypeError(f"examples: item {k} must be an EncodedPair, got {type(ex).__name__}")
        if not ex.src or not ex.tgt:
            raise ValueError(f"examples: item {k} has an empty {'source' if not ex.src else 'target'}")
    return batch_from_ids(
        [list(ex.src) for ex in examples], [list(ex.tgt) for ex in examples],
        SubwordVocab.pad_id, SubwordVocab.bos_id, SubwordVocab.eos_id, device,
    )


def translate_ids(
    model,
    sources: Sequence[Sequence[int]],
    beam_size: int = 1,
    length_penalty: float = 0.0,
    extra_len: int = 50,
    max_tokens: int = 4000,
) -> list[list[int]]:
    """Decode every source (a list of ids, no BOS/EOS): greedy for ``beam_size`` 1,
    else beam search with GNMT's ``length_penalty``. Each output has at most
    len(source) + ``extra_len`` tokens (the paper: input length + 50). Sources of
    the same length are decoded together (at most ``max_tokens`` source tokens ×
    beam per batch), so every sentence gets exactly its own limit; the outputs
    come back in the order of `sources`, each cut before its EOS."""
    sources = [list(s) for s in sources]
    if not sources:
        raise ValueError("sources: nothing to translate")
    for k, s in enumerate(sources):
        if not s:
            raise ValueError(f"sources: item {k} is empty (a verse with no tokens)")
    require_positive_int("beam_size", beam_size)
    require_positive_int("extra_len", extra_len)
    require_positive_int("max_tokens", max_tokens)
    device = next(model.parameters()).device
    pad, bos, eos = SubwordVocab.pad_id, SubwordVocab.bos_id, SubwordVocab.eos_id
    outputs: list[list[int] | None] = [None] * len(sources)
    budget = max(1, max_tokens // beam_size)
    by_length: dict[int, list[int]] = {}
    for i, s in enumerate(sources):
        by_length.setdefault(len(s), []).append(i)
    batches = []
    for n, group in sorted(by_length.items()):
        rows = max(1, budget // n)
        batches.extend(group[k:k + rows] for k in range(0, len(group), rows))
    for batch in batches:
        src = torch.tensor([sources[i] for i in batch], dtype=torch.long, device=device)
        max_len = src.shape[1] + extra_len
        if beam_size == 1:
            ids = greedy_decode(model, src, max_len, bos, eos, pad, use_cache=True)
        else:
            ids = beam_search(
                model, src, beam_size, max_len, bos, eos, pad,
                length_penalty=length_penalty, use_cache=True,
            )
        for i, row in zip(batch, ids.tolist()):
            out = []
            for t in row:
                if t == eos:
                    break
                if t != pad:
                    out.append(t)
            outputs[i] = out
    return outputs


@torch.no_grad()
def translation_loss(model, examples: Sequence[EncodedPair], max_tokens: int = 4000) -> float:
    """Mean cross-entropy (nats) per target token, EOS included, with teacher
    forcing and no label smoothing: how surprised the model is by held-out
    references. Padding is not counted."""
    examples = list(examples)
    if not examples:
        raise ValueError("examples: nothing to score")
    require_positive_int("max_tokens", max_tokens)
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    try:
        lengths = [max(len(e.src), len(e.tgt) + 1) for e in examples]
        for batch_ids in length_batches(lengths, max_tokens, seed=None):
            batch = make_translation_batch([examples[i] for i in batch_ids], device)
            logits = model(batch.src, batch.tgt_in, src_mask=batch.src_mask, tgt_mask=batch.tgt_mask)
            total += float(torch.nn.functional.cross_entropy(
                logits.flatten(0, 1).float(), batch.tgt_out.flatten(), ignore_index=batch.pad_id,
                reduction="sum",
            ))
            count += batch.n_tokens
    finally:
        model.train(was_training)
    return total / count


@dataclass(frozen=True)
class PairedDifference:
    """score(a) − score(b) on the same test items, with a paired-bootstrap 95%
    interval: ``low`` and ``high`` are the 2.5th and 97.5th percentiles of the
    difference over resamples of the items; ``p_value`` is the share of
    resamples in which the difference does not have the sign of ``difference``
    (one-sided; 0 means no resample reversed it); ``mean`` is the mean of the
    resampled differences."""

    difference: float
    low: float
    high: float
    p_value: float
    n_samples: int
    mean: float

    def excludes_zero(self) -> bool:
        """True when the 95% interval lies entirely on one side of 0."""
        return self.low > 0 or self.high < 0

    def __str__(self) -> str:
        return f"{self.difference:+.2f} [{self.low:+.2f}, {self.high:+.2f}]"


def _resampled_difference(stats_a, stats_b, score, n_samples: int, seed: int) -> PairedDifference:
    """Paired bootstrap over items: stats_* are (items, k) arrays of per-item
    sufficient statistics, `score` maps a summed row of k statistics to a score.
    The resampling is sacrebleu's (numpy ``default_rng(seed).choice``)."""
    import numpy as np

    require_positive_int("n_samples", n_samples)
    require_int("seed", seed, minimum=0)
    stats_a, stats_b = np.asarray(stats_a, dtype=np.float64), np.asarray(stats_b, dtype=np.float64)
    if stats_a.shape != stats_b.shape or stats_a.ndim != 2 or not len(stats_a):
        raise ValueError(f"the two systems must be scored on the same, non-empty items, "
                         f"got statistics of shapes {stats_a.shape} and {stats_b.shape}")
    full = score(stats_a.sum(0)) - score(stats_b.sum(0))
    idx = np.random.default_rng(seed).choice(len(stats_a), size=(n_samples, len(stats_a)), replace=True)
    diffs = np.array([score(stats_a[i].sum(0)) - score(stats_b[i].sum(0)) for i in idx])
    low, high = np.percentile(diffs, [2.5, 97.5])
    flipped = diffs <= 0 if full > 0 else diffs >= 0 if full < 0 else np.ones_like(diffs, bool)
    return PairedDifference(float(full), float(low), float(high), float(flipped.mean()), n_samples,
                            float(diffs.mean()))


def paired_bootstrap(metric, hypotheses_a: Sequence[str], hypotheses_b: Sequence[str],
                     references: Sequence[str], n_samples: int = 1000,
                     seed: int = 12345) -> PairedDifference:
    """Corpus `metric`(a) − `metric`(b) with a paired-bootstrap 95% interval
    (Koehn, 2004), the test of ``sacrebleu --paired-bs``.

    metric: a ``sacrebleu`` metric (``sacrebleu.BLEU()``, ``sacrebleu.CHRF()``).
    Each resample draws len(references) verses with replacement, the same
    verses for both systems, and scores both on them from sacrebleu's own
    per-verse statistics; the resampling is sacrebleu's (seed 12345 by default,
    as sacrebleu's ``SACREBLEU_SEED``), so its means match sacrebleu's.
    """
    require_positive_int("n_samples", n_samples)
    require_int("seed", seed, minimum=0)
    hypotheses_a, hypotheses_b, references = list(hypotheses_a), list(hypotheses_b), list(references)
    for name, texts in (("hypotheses_a", hypotheses_a), ("hypotheses_b", hypotheses_b)):
        if len(texts) != len(references):
            raise ValueError(f"{name}: {len(texts)} outputs for {len(references)} references")
        if not all(isinstance(t, str) for t in texts):
            raise TypeError(f"{name} must be a list of strings")
    if not references or not all(isinstance(r, str) for r in references):
        raise ValueError("references must be a non-empty list of strings")
    if not hasattr(metric, "_extract_corpus_statistics"):
        raise TypeError("metric must be a sacrebleu metric such as sacrebleu.BLEU(), "
                        f"got {type(metric).__name__}")
    stats = [metric._extract_corpus_statistics(h, [references]) for h in (hypotheses_a, hypotheses_b)]

    def score(row):
        return metric._compute_score_from_stats(list(row)).score

    return _resampled_difference(stats[0], stats[1], score, n_samples, seed)


def vocab_fingerprint(vocab: SubwordVocab) -> str:
    """SHA-256 (first 16 hex digits) of a vocabulary's merges, in order: two
    vocabularies with the same fingerprint give every text the same ids."""
    import hashlib
    import json

    if not isinstance(vocab, SubwordVocab):
        raise TypeError(f"vocab must be a lib.SubwordVocab, got {type(vocab).__name__}")
    merges = json.dumps([list(pair) for pair in vocab.tokenizer.merges])
    return hashlib.sha256(merges.encode()).hexdigest()[:16]


TRANSLATION_CHECKPOINT = Path(__file__).parent / "checkpoints" / "translation_long_run.pt"
"""The translation chapter's longer run (40 epochs, dropout 0.1), float16 weights with
its recipe and learning curve, written by ``bench/translation.py --save`` (recipe in
``lib/train/checkpoints/README.md``); shipped inside the package."""
TRANSLATION_CHECKPOINT_SHA256 = "9bfec5719ab3bd5efc3c49816913c5aca22c07928ca05ef94ff5e34685889e78"


def save_translation_checkpoint(model, src_vocab: SubwordVocab, tgt_vocab: SubwordVocab,
                                recipe: dict, path) -> str:
    """Write `model` (a `lib.Transformer`) to `path`: its weights in float16 (half
    the bytes; the translation chapter's longer run is committed this way), the
    `recipe` it was trained with (a dict of plain values) and the fingerprints of
    the two vocabularies. Returns the file's SHA-256, to pin where it is loaded."""
    import hashlib
    import json
    import pathlib

    from lib.model.transformer import Transformer

    if not isinstance(model, Transformer):
        raise TypeError(f"model must be a lib.Transformer, got {type(model).__name__}")
    if not isinstance(recipe, dict):
        raise TypeError(f"recipe must be a dict, got {type(recipe).__name__}")
    try:  # plain values only (a str subclass such as torch.__version__ becomes a str),
        recipe = json.loads(json.dumps(recipe))  # so that weights_only loading accepts it
    except TypeError as err:
        raise TypeError(f"recipe: plain values only (numbers, strings, lists, dicts): {err}")
    state = {k: v.detach().to(torch.float16) if v.is_floating_point() else v
             for k, v in model.state_dict().items()}
    payload = {"state": state, "config": vars(model.config), "recipe": recipe,
               "vocab": {"src": vocab_fingerprint(src_vocab), "tgt": vocab_fingerprint(tgt_vocab)}}
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(payload, path)
    return hashlib.sha256(path.read_bytes()).hexdigest()


def require_pinned_file(path, sha256: str):
    """`path` as a pathlib.Path once its SHA-256 is `sha256` (the 64 hex digits a
    shipped checkpoint is pinned to); FileNotFoundError if it is missing, ValueError
    naming both hashes if it differs. The check the checkpoint loaders share."""
    import hashlib
    import pathlib

    path = pathlib.Path(path)
    if not isinstance(sha256, str) or len(sha256) != 64:
        raise ValueError("sha256: give the 64 hex digits the checkpoint is pinned to")
    if not path.is_file():
        raise FileNotFoundError(f"path: no checkpoint at {path}")
    actual = hashlib.sha256(path.read_bytes()).hexdigest()
    if actual != sha256:
        raise ValueError(f"path: SHA-256 mismatch for {path}: expected {sha256}, got {actual}")
    return path


def load_translation_checkpoint(path, sha256: str, src_vocab: SubwordVocab,
                                tgt_vocab: SubwordVocab):
    """(model, recipe) from a file `save_translation_checkpoint` wrote: refused
    (ValueError) unless its SHA-256 is `sha256` and its vocabularies' fingerprints
    are those of `src_vocab` and `tgt_vocab` (the same BPE merges, so the same ids).
    The weights come back in float32; the model is in eval mode."""
    from lib.model.transformer import Transformer

    path = require_pinned_file(path, sha256)
    payload = torch.load(path, map_location="cpu", weights_only=True)
    for side, vocab in (("src", src_vocab), ("tgt", tgt_vocab)):
        if payload["vocab"][side] != vocab_fingerprint(vocab):
            raise ValueError(f"{side}_vocab: not the vocabulary the checkpoint was trained with "
                             f"(fingerprint {vocab_fingerprint(vocab)}, expected "
                             f"{payload['vocab'][side]})")
    model = Transformer(**payload["config"])
    model.load_state_dict({k: v.float() if v.is_floating_point() else v
                           for k, v in payload["state"].items()})
    return model.eval(), payload["recipe"]
