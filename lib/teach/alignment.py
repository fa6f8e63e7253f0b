"""Does cross-attention align words the way people do? Attention read as word
alignments, scored against human alignments (the translation chapter).

A word alignment is a set of links (i, j): source word i and target word j
translate each other. The alignment error rate (AER) of Och and Ney (2003)
scores a predicted set A against human links, split into *sure* links S and
*possible* links P (S ⊆ P):

    AER = 1 − (|A ∩ S| + |A ∩ P|) / (|A| + |S|)

0 is perfect, 1 is no overlap. When the annotators marked every link alike
(as in the chapter's corpus), P = S and AER = 1 − F1 of A against S. Over a
corpus the counts are summed first (`AlignmentCounts`), not the verses' AERs
averaged.

From attention to links, in three steps (Garg et al., 2019, read alignments
from a Transformer's cross-attention in the same spirit):

1. `cross_attention_by_layer`: run the trained model on a verse with teacher
   forcing and keep every decoder layer's cross-attention weights,
   (layers, heads, target subwords + 1, source subwords).
2. `word_attention`: pool subwords into words: a target word's row is the
   mean of its subwords' rows, a source word's column the sum of its
   subwords' columns (so each row still sums to 1).
3. `argmax_links`: each target word is linked to the source word it attends
   to most. `diagonal_links` is the positional baseline: target word j of m is
   linked to the source word at the same relative position.

Which decoder position's attention belongs to target word j? The position
that *predicts* it (it reads the word before) or the one that *reads* it.
`cross_attention_by_layer` returns both row sets; the chapter measures both.
(Chen et al., 2020, call the first "naive attention" and show that, in deeper
trained models, the second, shifted reading aligns better.)

Attention that is not finite (NaN or inf, from a diverged model) is refused
with a ValueError: its argmax would silently pick the NaN entry. Each
`AttentionAlignment` also keeps every verse's counts, so `aer_difference`
can put a paired-bootstrap interval on a difference of corpus AER.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import torch

from lib._checks import require_tensor, shape
from lib.model.attention import causal_mask
from lib.train.translation import PairedDifference, _resampled_difference

__all__ = [
    "AlignmentCounts",
    "alignment_error_rate",
    "argmax_links",
    "diagonal_links",
    "word_attention",
    "cross_attention_by_layer",
    "AttentionAlignment",
    "score_attention_alignments",
    "aer_difference",
]


def _check_links(name: str, links) -> set[tuple[int, int]]:
    if isinstance(links, (str, bytes)) or not isinstance(links, Iterable):
        raise TypeError(f"{name} must be a set of (source, target) index pairs, got {type(links).__name__}")
    out = set()
    for link in links:
        if isinstance(link, (str, bytes)) or not isinstance(link, (tuple, list)) or len(link) != 2:
            raise ValueError(f"{name}: every link must be a pair of indices >= 0, got {link!r}")
        if not all(isinstance(x, numbers.Integral) and not isinstance(x, bool) for x in link):
            raise TypeError(f"{name}: link indices must be integers, got {link!r} "
                            f"({', '.join(type(x).__name__ for x in link)})")
        if not all(x >= 0 for x in link):
            raise ValueError(f"{name}: every link must be a pair of indices >= 0, got {link!r}")
        out.add((int(link[0]), int(link[1])))
    return out


def _require_finite(name: str, t: torch.Tensor) -> None:
    if not bool(torch.isfinite(t).all()):
        bad = int((~torch.isfinite(t)).sum())
        raise ValueError(f"{name} has {bad} entries that are NaN or infinite: attention from a model "
                         "that diverged cannot be read as alignments")


@dataclass
class AlignmentCounts:
    """Link counts summed over verses: |A|, |S|, |A ∩ S| and |A ∩ P|."""

    predicted: int = 0
    sure: int = 0
    hits_sure: int = 0
    hits_possible: int = 0

    def add(self, predicted, sure, possible=None) -> "AlignmentCounts":
        """Count one verse's links (P = S when `possible` is None); returns self."""
        a, s = _check_links("predicted", predicted), _check_links("sure", sure)
        p = s if possible is None else _check_links("possible", possible)
        if not s <= p:
            raise ValueError(f"possible: must contain every sure link; missing {sorted(s - p)[:5]}")
        self.predicted += len(a)
        self.sure += len(s)
        self.hits_sure += len(a & s)
        self.hits_possible += len(a & p)
        return self

    @property
    def aer(self) -> float:
        """1 − (|A∩S| + |A∩P|) / (|A| + |S|)."""
        if self.predicted + self.sure == 0:
            raise ValueError("AER is undefined with no predicted and no sure links")
        return 1.0 - (self.hits_sure + self.hits_possible) / (self.predicted + self.sure)

    @property
    def precision(self) -> float:
        """|A ∩ P| / |A|: how many predicted links a person would accept."""
        return self.hits_possible / self.predicted if self.predicted else float("nan")

    @property
    def recall(self) -> float:
        """|A ∩ S| / |S|: how many sure links were found."""
        return self.hits_sure / self.sure if self.sure else float("nan")


def alignment_error_rate(predicted, sure, possible=None) -> float:
    """AER of one set of links (Och and Ney, 2003); P = S when `possible` is None."""
    return AlignmentCounts().add(predicted, sure, possible).aer


def word_attention(
    attn: torch.Tensor, tgt_word: Sequence[int], src_word: Sequence[int]
) -> torch.Tensor:
    """Pool subword attention (..., m, n) into word attention (..., M, N).

    ``tgt_word[t]`` is the word of target subword t (m entries, word indices
    0..M-1 in order), ``src_word[s]`` the word of source subword s (n entries).
    A target word's row is the mean of its subwords' rows; a source word's
    column is the sum of its subwords' columns.
    """
    require_tensor("attn", attn)
    if attn.dim() < 2 or not attn.is_floating_point():
        raise ValueError(f"attn must be a float tensor (..., m, n), got {shape(attn)} {attn.dtype}")
    _require_finite("attn", attn)
    m, n = attn.shape[-2:]
    for name, words, size in (("tgt_word", tgt_word, m), ("src_word", src_word, n)):
        words = list(words)
        if len(words) != size:
            raise ValueError(f"{name}: {len(words)} entries for {size} subwords (attn {shape(attn)})")
        if not words or words[0] != 0 or any(b - a not in (0, 1) for a, b in zip(words, words[1:])):
            raise ValueError(f"{name} must number the words 0, 1, 2, ... in order, got {words[:12]}")
    tgt = torch.tensor(list(tgt_word))
    src = torch.tensor(list(src_word))
    rows = torch.zeros(int(tgt[-1]) + 1, m, dtype=attn.dtype)
    rows[tgt, torch.arange(m)] = 1.0
    rows = rows / rows.sum(dim=1, keepdim=True)  # (M, m): the mean over a word's subwords
    cols = torch.zeros(n, int(src[-1]) + 1, dtype=attn.dtype)
    cols[torch.arange(n), src] = 1.0  # (n, N): the sum over a word's subwords
    return rows.to(attn.device) @ attn @ cols.to(attn.device)


def argmax_links(word_attn: torch.Tensor, targets: Iterable[int] | None = None) -> set[tuple[int, int]]:
    """{(argmax_i word_attn[j, i], j)} for each target word j in `targets` (default: all).

    word_attn: (M, N), row j the attention of target word j over the N source words.
    """
    require_tensor("word_attn", word_attn)
    if word_attn.dim() != 2:
        raise ValueError(f"word_attn must be (M, N), got {shape(word_attn)}")
    _require_finite("word_attn", word_attn)
    M = word_attn.shape[0]
    targets = range(M) if targets is None else list(targets)
    bad = [j for j in targets if not 0 <= j < M]
    if bad:
        raise ValueError(f"targets: {bad[:5]} are not rows of word_attn {shape(word_attn)}")
    best = word_attn.argmax(dim=1).tolist()
    return {(best[j], j) for j in targets}


def diagonal_links(n_src: int, n_tgt: int, targets: Iterable[int] | None = None) -> set[tuple[int, int]]:
    """The positional baseline: target word j of n_tgt is linked to source word
    floor((j + ½) · n_src / n_tgt), the one whose span contains the centre of
    word j's relative position (capped at n_src − 1)."""
    for name, v in (("n_src", n_src), ("n_tgt", n_tgt)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a positive int, got {v!r}")
    targets = range(n_tgt) if targets is None else list(targets)
    out = set()
    for j in targets:
        if isinstance(j, bool) or not isinstance(j, numbers.Integral):
            raise TypeError(f"targets: {j!r} is not an integer index")
        if not 0 <= j < n_tgt:
            raise ValueError(f"targets: {j} is not a target word index (0-{n_tgt - 1})")
        i = int((j + 0.5) * n_src / n_tgt)  # floor of the centre's position
        out.add((min(i, n_src - 1), int(j)))
    return out


@torch.no_grad()
def cross_attention_by_layer(model, src: Sequence[int], tgt: Sequence[int], bos_id: int = 1, eos_id: int = 2):
    """Every decoder layer's cross-attention on one verse, with teacher forcing.

    src, tgt: the verse's subword ids (no BOS/EOS). The decoder reads
    BOS + tgt; returns (predict, read), each (layers, heads, len(tgt), len(src)):
    ``predict[l, h, t]`` is the attention of the position that predicts target
    subword t, ``read[l, h, t]`` that of the position that reads it.
    """
    src, tgt = list(src), list(tgt)
    if not src or not tgt:
        raise ValueError(f"src and tgt must be non-empty, got {len(src)} and {len(tgt)} ids")
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    try:
        s = torch.tensor([src], device=device)
        t = torch.tensor([[bos_id, *tgt]], device=device)
        model(s, t, src_mask=None, tgt_mask=causal_mask(t.shape[1], device=device)[None, None])
        maps = torch.stack([layer.cross_attn.attention_weights[0] for layer in model.decoder_layers])
    finally:
        model.train(was_training)
    return maps[:, :, :-1].cpu(), maps[:, :, 1:].cpu()  # (L, h, m, n) each


@dataclass
class AttentionAlignment:
    """Corpus AER of every decoder layer's cross-attention, read as alignments.

    heads[l][h]  counts of head h of layer l
    average[l]   counts of layer l's heads averaged before the argmax
    diagonal     counts of the positional baseline (`diagonal_links`)
    rows         "predict" or "read": which decoder position stands for a word
    verses       the same counts verse by verse, (heads, average, diagonal) per
                 verse, for `per_verse` and `aer_difference`

    The "best head" of `table` is chosen on the scored verses themselves.
    """

    heads: list[list[AlignmentCounts]]
    average: list[AlignmentCounts]
    diagonal: AlignmentCounts
    rows: str
    verses: list = field(default_factory=list, repr=False)

    def per_verse(self, which) -> list[AlignmentCounts]:
        """Every verse's counts of one reading: ``(layer, head)``,
        ``(layer, "average")`` or ``"diagonal"``."""
        if not self.verses:
            raise ValueError("no per-verse counts: build this with score_attention_alignments")
        if which == "diagonal":
            return [diagonal for _, _, diagonal in self.verses]
        if not isinstance(which, tuple) or len(which) != 2:
            raise ValueError(f"which must be (layer, head), (layer, 'average') or 'diagonal', got {which!r}")
        layer, head = which
        n_layers, n_heads = len(self.heads), len(self.heads[0])
        if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < n_layers:
            raise ValueError(f"which: layer must be 0-{n_layers - 1}, got {layer!r}")
        if head == "average":
            return [average[layer] for _, average, _ in self.verses]
        if isinstance(head, bool) or not isinstance(head, int) or not 0 <= head < n_heads:
            raise ValueError(f"which: head must be 0-{n_heads - 1} or 'average', got {head!r}")
        return [heads[layer][head] for heads, _, _ in self.verses]

    def aer(self) -> torch.Tensor:
        """(layers, heads) AER of every head."""
        return torch.tensor([[c.aer for c in layer] for layer in self.heads])

    def table(self) -> str:
        """A text table: one row per layer, one column per head, then the head
        average, the best head, and the diagonal baseline underneath."""
        n_heads = len(self.heads[0])
        head_cols = "".join(f"  head {h}" for h in range(n_heads))
        lines = [f"{'AER, ' + self.rows + ' rows':<21}{head_cols}   average    best"]
        for l, (layer, avg) in enumerate(zip(self.heads, self.average)):
            cells = "".join(f"  {c.aer:6.3f}" for c in layer)
            best = min(c.aer for c in layer)
            lines.append(f"decoder layer {l}      {cells}    {avg.aer:6.3f}  {best:6.3f}")
        lines.append(f"diagonal baseline     {self.diagonal.aer:6.3f}")
        return "\n".join(lines)


def score_attention_alignments(model, pairs, encoded, rows: str = "predict") -> AttentionAlignment:
    """Score every decoder layer and head of `model` against the human links of
    `pairs` (`lib.VersePair`s, with their `lib.EncodedPair`s in `encoded`).

    For each verse: the cross-attention with teacher forcing
    (`cross_attention_by_layer`), pooled into words (`word_attention`), each
    English word that takes part in alignment (not punctuation) linked to its
    most attended Greek word (`argmax_links`); counts summed over the verses.
    """
    if rows not in ("predict", "read"):
        raise ValueError(f"rows must be 'predict' or 'read', got {rows!r}")
    pairs, encoded = list(pairs), list(encoded)
    if not pairs or len(pairs) != len(encoded):
        raise ValueError(f"pairs and encoded must be equally long and non-empty, got {len(pairs)} and {len(encoded)}")
    heads = averages = None
    diagonal = AlignmentCounts()
    verses = []
    for pair, enc in zip(pairs, encoded):
        predict, read = cross_attention_by_layer(model, enc.src, enc.tgt)
        maps = predict if rows == "predict" else read
        words = word_attention(maps.double(), enc.tgt_word, enc.src_word)  # (L, H, M, N)
        n_layers, n_heads = words.shape[:2]
        if heads is None:
            heads = [[AlignmentCounts() for _ in range(n_heads)] for _ in range(n_layers)]
            averages = [AlignmentCounts() for _ in range(n_layers)]
        targets = pair.aligned_targets
        verse_heads = [[AlignmentCounts() for _ in range(n_heads)] for _ in range(n_layers)]
        verse_average = [AlignmentCounts() for _ in range(n_layers)]
        for l in range(n_layers):
            for h in range(n_heads):
                verse_heads[l][h].add(argmax_links(words[l, h], targets), pair.links)
            verse_average[l].add(argmax_links(words[l].mean(dim=0), targets), pair.links)
        verse_diagonal = AlignmentCounts().add(
            diagonal_links(len(pair.source), len(pair.target), targets), pair.links)
        verses.append((verse_heads, verse_average, verse_diagonal))
        for l in range(n_layers):
            for h in range(n_heads):
                _accumulate(heads[l][h], verse_heads[l][h])
            _accumulate(averages[l], verse_average[l])
        _accumulate(diagonal, verse_diagonal)
    return AttentionAlignment(heads, averages, diagonal, rows, verses)


def _accumulate(total: AlignmentCounts, part: AlignmentCounts) -> None:
    total.predicted += part.predicted
    total.sure += part.sure
    total.hits_sure += part.hits_sure
    total.hits_possible += part.hits_possible


def aer_difference(a: Sequence[AlignmentCounts], b: Sequence[AlignmentCounts],
                   n_samples: int = 1000, seed: int = 12345) -> PairedDifference:
    """Corpus AER(a) − AER(b) over the same verses, with a paired-bootstrap 95%
    interval: each resample draws the verses with replacement (the same verses
    for a and b, as `lib.paired_bootstrap` does for BLEU) and sums their counts
    before dividing. a, b: one `AlignmentCounts` per verse, e.g. from
    `AttentionAlignment.per_verse`. A negative difference means a aligns better.
    """
    a, b = list(a), list(b)
    for name, counts in (("a", a), ("b", b)):
        if not counts or not all(isinstance(c, AlignmentCounts) for c in counts):
            raise TypeError(f"{name} must be a non-empty list of AlignmentCounts, one per verse")
    if len(a) != len(b):
        raise ValueError(f"a and b must count the same verses, got {len(a)} and {len(b)}")

    def stats(counts):
        return [(c.predicted, c.sure, c.hits_sure, c.hits_possible) for c in counts]

    def aer(row):
        return 1.0 - (row[2] + row[3]) / (row[0] + row[1])

    return _resampled_difference(stats(a), stats(b), aer, n_samples, seed)
