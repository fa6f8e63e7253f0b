"""A byte-level byte-pair-encoding (BPE) tokenizer, written from scratch (the tokenization chapter).

Byte-pair encoding (Sennrich et al., 2016) starts from a small alphabet and
repeatedly adds, as a new token, the most frequent pair of adjacent tokens in
the training text. Here the alphabet is the 256 byte values, as in GPT-2
(Radford et al., 2019): every string is a sequence of UTF-8 bytes, so any
Unicode text can be encoded, nothing is ever "unknown", and
``decode(encode(s)) == s`` for every string ``s``.

The pieces, in reading order:

- `pretokenize`: a regular expression (in the spirit of GPT-2's) cuts the text
  into words, numbers, punctuation runs and spaces. Merges never cross these
  boundaries, so a token never spans "end of one word + start of the next".
- `count_pairs` and `merge_pair`: the two operations of BPE on one list of ids,
  written plainly; the chapter's exercises rebuild them.
- `train_naive`: the algorithm as the paper states it: recount every pair
  after every merge. Clear, and slow: kept as the reference the fast trainer
  is tested against.
- `BPETokenizer.train`: the same merges, fast. The text is reduced to its
  unique words with their counts; the trainer keeps every pair's count and,
  per pair, the set of words that contain it. A merge then rewrites only the
  words that contain the merged pair and updates the counts of the pairs it
  destroys and creates, instead of recounting the whole corpus. The most
  frequent pair comes from a heap with lazy deletion.
- `BPETokenizer.encode`/`decode`, `save`/`load` (plain JSON).

Ties (two pairs with the same count) go to the smaller pair of ids,
``min((a, b))``, in both trainers, so training is deterministic. With
``tie_break="gpt2"`` the bytes are ranked instead in the order of GPT-2's
printable stand-ins for them (printable ASCII first, the space byte after them),
which is the order the `tokenizers` package breaks ties in: then the two give
identical merges.
"""

from __future__ import annotations

import heapq
import json
import os
import re
from collections import Counter
from collections.abc import Iterable, Sequence

__all__ = [
    "BPETokenizer",
    "GPT2_STYLE_PATTERN",
    "pretokenize",
    "count_pairs",
    "merge_pair",
    "train_naive",
    "train_tokenizers_reference",
]

N_BYTES = 256  # the base alphabet: one token per byte value

# GPT-2's pre-tokeniser uses the third-party `regex` module's \p{L} (letters) and
# \p{N} (numbers). With the standard `re`: letters are word characters that are
# not digits or "_", numbers are digits. The alternatives, in order:
#   's 't 're 've 'm 'll 'd    English contractions, as in GPT-2 (case-sensitive);
#   ' ?letters'                a word with at most one leading space;
#   ' ?digits'                 a number with at most one leading space;
#   ' ?other'                  a run of punctuation or symbols (incl. "_");
#   '\s+(?!\S)' then '\s+'     whitespace; the last space before a word is left
#                              for the word (" the"), the rest stays together;
#   '[\s\S]'                   anything else, one character at a time, so no
#                              character is ever dropped.
GPT2_STYLE_PATTERN = (
    r"'s|'t|'re|'ve|'m|'ll|'d"
    r"| ?[^\W\d_]+"
    r"| ?\d+"
    r"| ?(?:[^\s\w]|_)+"
    r"|\s+(?!\S)|\s+"
    r"|[\s\S]"
)

_FORMAT = "lib.train.bpe"
_VERSION = 1


def _compiled(pattern: object) -> re.Pattern:
    """The pre-tokeniser's pattern, compiled; a clear error for a bad one."""
    if not isinstance(pattern, str):
        raise TypeError(f"pattern must be a str, got {type(pattern).__name__}")
    try:
        return re.compile(pattern)
    except re.error as err:
        raise ValueError(f"pattern: not a valid regular expression ({err}): {pattern!r}") from None


def pretokenize(text: str, pattern: str = GPT2_STYLE_PATTERN) -> list[str]:
    """Cut `text` into the chunks BPE works inside: ``"".join(chunks) == text``.

    >>> pretokenize("Hamlet's 2 friends!")
    ['Hamlet', "'s", ' 2', ' friends', '!']
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    return _compiled(pattern).findall(text)


def count_pairs(ids: Sequence[int]) -> dict[tuple[int, int], int]:
    """How often each pair of adjacent ids occurs, overlaps included.

    >>> count_pairs([1, 1, 1, 2])
    {(1, 1): 2, (1, 2): 1}
    """
    counts: dict[tuple[int, int], int] = {}
    for pair in zip(ids, ids[1:]):
        counts[pair] = counts.get(pair, 0) + 1
    return counts


def merge_pair(ids: Sequence[int], pair: tuple[int, int], new_id: int) -> list[int]:
    """Replace every occurrence of `pair` in `ids` by `new_id`, scanning left to right.

    An overlapping run is merged from the left: ``merge_pair([7, 7, 7], (7, 7), 9)``
    is ``[9, 7]``.
    """
    out = []
    i = 0
    while i < len(ids):
        if i + 1 < len(ids) and ids[i] == pair[0] and ids[i + 1] == pair[1]:
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def _check_vocab_size(vocab_size) -> int:
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int):
        raise TypeError(f"vocab_size must be an int, got {type(vocab_size).__name__}")
    if vocab_size < N_BYTES:
        raise ValueError(
            f"vocab_size must be at least {N_BYTES} (one token per byte value), got {vocab_size}"
        )
    return vocab_size


def _word_counts(text: str | Iterable[str], pattern: str) -> Counter:
    """The unique pre-tokenised chunks of the corpus and how often each occurs."""
    if isinstance(text, (bytes, bytearray)):
        raise TypeError("text must be a str or an iterable of str, got bytes: decode it first")
    if isinstance(text, str):
        texts: Iterable = (text,)
    elif isinstance(text, Iterable):
        texts = text
    else:
        raise TypeError(f"text must be a str or an iterable of str, got {type(text).__name__}")
    regex = _compiled(pattern)
    counts: Counter = Counter()
    for i, piece in enumerate(texts):
        if not isinstance(piece, str):
            raise TypeError(f"text must be a str or an iterable of str; item {i} is a {type(piece).__name__}")
        counts.update(regex.findall(piece))
    if not counts:
        raise ValueError("text: the corpus is empty; BPE needs some text to learn merges from")
    return counts


def _encode_bytes(text: str) -> bytes:
    # surrogatepass: lone surrogates (valid in a Python str) round-trip too.
    return text.encode("utf-8", errors="surrogatepass")


def _tie_ranks(tie_break: str) -> list[int]:
    """Each byte's rank for breaking ties (merged tokens rank by their id, after all bytes)."""
    if tie_break == "ids":
        return list(range(N_BYTES))
    if tie_break == "gpt2":
        stand_in = _gpt2_byte_to_unicode()
        order = sorted(range(N_BYTES), key=lambda b: stand_in[b])
        ranks = [0] * N_BYTES
        for r, b in enumerate(order):
            ranks[b] = r
        return ranks
    raise ValueError(f"tie_break must be 'ids' or 'gpt2', got {tie_break!r}")


def train_naive(
    text: str | Iterable[str],
    vocab_size: int,
    pattern: str = GPT2_STYLE_PATTERN,
    tie_break: str = "ids",
) -> list[tuple[int, int]]:
    """BPE's merges by the textbook algorithm: recount all pairs after every merge.

    The reference for `BPETokenizer.train` (same merges, same tie-breaking);
    use it on small texts only: each merge costs a pass over the whole corpus.
    """
    vocab_size = _check_vocab_size(vocab_size)
    byte_rank = _tie_ranks(tie_break)
    rank = lambda i: byte_rank[i] if i < N_BYTES else i  # noqa: E731
    counts = _word_counts(text, pattern)
    words = [(list(_encode_bytes(w)), c) for w, c in counts.items()]
    merges = []
    for new_id in range(N_BYTES, vocab_size):
        totals: dict[tuple[int, int], int] = {}
        for ids, c in words:
            for pair, n in count_pairs(ids).items():
                totals[pair] = totals.get(pair, 0) + n * c
        if not totals:
            break  # every word is a single token: nothing left to merge
        # The most frequent pair; ties to the smallest pair (by rank).
        best = min(totals, key=lambda p: (-totals[p], rank(p[0]), rank(p[1])))
        merges.append(best)
        words = [(merge_pair(ids, best, new_id), c) for ids, c in words]
    return merges


class BPETokenizer:
    """A trained byte-level BPE tokenizer: its merges, in the order they were learnt.

    Token ids 0-255 are the bytes; id ``256 + k`` is the k-th merge. Build one
    with `BPETokenizer.train(text, vocab_size)` or `BPETokenizer.load(path)`.
    """

    def __init__(
        self,
        merges: Sequence[tuple[int, int]] = (),
        pattern: str = GPT2_STYLE_PATTERN,
        merge_counts: Sequence[int] | None = None,
    ):
        _compiled(pattern)
        self.pattern = pattern
        self.merges: list[tuple[int, int]] = []
        self.vocab: list[bytes] = [bytes([b]) for b in range(N_BYTES)]  # id -> its bytes
        for k, pair in enumerate(merges):
            if (
                not isinstance(pair, (tuple, list))
                or len(pair) != 2
                or not all(isinstance(i, int) and not isinstance(i, bool) for i in pair)
            ):
                raise TypeError(f"merges: item {k} must be a pair of ints, got {pair!r}")
            a, b = pair
            if not (0 <= a < len(self.vocab) and 0 <= b < len(self.vocab)):
                raise ValueError(
                    f"merges: item {k} {tuple(pair)} uses an id that does not exist yet "
                    f"(ids 0-{len(self.vocab) - 1} exist before it)"
                )
            self.merges.append((a, b))
            self.vocab.append(self.vocab[a] + self.vocab[b])
        self.ranks = {pair: N_BYTES + k for k, pair in enumerate(self.merges)}  # pair -> new id
        if merge_counts is not None and len(merge_counts) != len(self.merges):
            raise ValueError(f"merge_counts: {len(merge_counts)} counts for {len(self.merges)} merges")
        # How often each merged pair occurred in the training text when it was merged.
        self.merge_counts = None if merge_counts is None else [int(c) for c in merge_counts]
        self._regex = re.compile(pattern)
        self._cache: dict[str, list[int]] = {}

    # ---- training ---------------------------------------------------------

    @classmethod
    def train(
        cls,
        text: str | Iterable[str],
        vocab_size: int,
        pattern: str = GPT2_STYLE_PATTERN,
        tie_break: str = "ids",
    ) -> BPETokenizer:
        """Learn ``vocab_size - 256`` merges from `text` (a str or an iterable of str).

        Fewer merges are learnt when the corpus runs out of pairs (every word
        already one token). Same merges as `train_naive`, in seconds on a few MB.
        tie_break: "ids" (the smaller pair of ids wins a tie) or "gpt2" (bytes
        ranked as `tokenizers` ranks them; see the module's docstring).
        """
        vocab_size = _check_vocab_size(vocab_size)
        byte_rank = _tie_ranks(tie_break)
        rank = lambda i: byte_rank[i] if i < N_BYTES else i  # noqa: E731
        counts = _word_counts(text, pattern)
        words = [list(_encode_bytes(w)) for w in counts]
        freq = list(counts.values())

        # 1. Count every pair once, and remember which words contain it.
        pair_counts: dict[tuple[int, int], int] = {}
        where: dict[tuple[int, int], set[int]] = {}
        for w, ids in enumerate(words):
            c = freq[w]
            for pair in zip(ids, ids[1:]):
                pair_counts[pair] = pair_counts.get(pair, 0) + c
                where.setdefault(pair, set()).add(w)
        # Max-heap by count (negated), ties to the smaller pair; stale entries are skipped.
        heap = [(-c, rank(a), rank(b), (a, b)) for (a, b), c in pair_counts.items()]
        heapq.heapify(heap)

        merges: list[tuple[int, int]] = []
        merge_counts: list[int] = []
        for new_id in range(N_BYTES, vocab_size):
            # 2. The most frequent pair: pop until the entry's count is current.
            while heap:
                neg, _, _, pair = heapq.heappop(heap)
                current = pair_counts.get(pair, 0)
                if current == -neg:
                    break
                if current > 0:  # counts only fall after a pair is created: re-queue it
                    heapq.heappush(heap, (-current, rank(pair[0]), rank(pair[1]), pair))
            else:
                break  # no pairs left
            if current <= 0:
                break
            merges.append(pair)
            merge_counts.append(current)
            # 3. Rewrite only the words that contain the pair. Merging a b -> z inside
            #    x a b y destroys (x, a) and (b, y) and creates (x, z) and (z, y): only
            #    those counts change. (`where` may keep words that lost a pair: a
            #    superset is harmless, the merge then finds nothing to do there.)
            a, b = pair
            new_pairs: set[tuple[int, int]] = set()
            for w in where.pop(pair):
                ids, c = words[w], freq[w]
                n = len(ids)
                out: list[int] = []
                i = 0
                while i < n:
                    if ids[i] == a and i + 1 < n and ids[i + 1] == b:
                        if out:
                            x = out[-1]
                            pair_counts[(x, a)] -= c
                            p = (x, new_id)
                            pair_counts[p] = pair_counts.get(p, 0) + c
                            where.setdefault(p, set()).add(w)
                            new_pairs.add(p)
                        if i + 2 < n:
                            y = ids[i + 2]
                            pair_counts[(b, y)] -= c
                            p = (new_id, y)
                            pair_counts[p] = pair_counts.get(p, 0) + c
                            where.setdefault(p, set()).add(w)
                            new_pairs.add(p)
                        out.append(new_id)
                        i += 2
                    else:
                        out.append(ids[i])
                        i += 1
                words[w] = out
            pair_counts.pop(pair, None)
            # 4. Only pairs containing the new token can have grown: queue them.
            for p in new_pairs:
                if pair_counts[p] > 0:
                    heapq.heappush(heap, (-pair_counts[p], rank(p[0]), rank(p[1]), p))
        return cls(merges, pattern, merge_counts)

    # ---- using it ---------------------------------------------------------

    @property
    def merge_bytes(self) -> list[tuple[bytes, bytes]]:
        """The merges as pairs of byte strings (comparable across implementations)."""
        return [(self.vocab[a], self.vocab[b]) for a, b in self.merges]

    @property
    def vocab_size(self) -> int:
        """|V|: 256 bytes plus one token per merge."""
        return len(self.vocab)

    def _encode_chunk(self, chunk: str) -> list[int]:
        ids = self._cache.get(chunk)
        if ids is not None:
            return ids
        ids = list(_encode_bytes(chunk))
        while len(ids) >= 2:
            # The earliest-learnt merge among the adjacent pairs, applied everywhere:
            # the same segmentation as applying all merges in training order.
            pair = min(zip(ids, ids[1:]), key=lambda p: self.ranks.get(p, 1 << 62))
            if pair not in self.ranks:
                break
            ids = merge_pair(ids, pair, self.ranks[pair])
        if len(self._cache) < 200_000:
            self._cache[chunk] = ids
        return ids

    def encode(self, text: str) -> list[int]:
        """The token ids of `text` (any str)."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        out: list[int] = []
        for chunk in self._regex.findall(text):
            out.extend(self._encode_chunk(chunk))
        return out

    def _check_ids(self, ids) -> list[int]:
        if isinstance(ids, (str, bytes)) or not isinstance(ids, Iterable):
            raise TypeError(f"ids must be a sequence of ints, got {type(ids).__name__}")
        if hasattr(ids, "tolist"):  # a tensor or an array
            ids = ids.tolist()
        ids = list(ids)
        for i in ids:
            if isinstance(i, bool) or not isinstance(i, int):
                raise TypeError(f"ids must be ints, got {type(i).__name__} {i!r}")
            if not 0 <= i < len(self.vocab):
                raise ValueError(f"ids: {i} is not a token id (the vocabulary has ids 0-{len(self.vocab) - 1})")
        return ids

    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        """The bytes the ids stand for."""
        return b"".join(self.vocab[i] for i in self._check_ids(ids))

    def decode(self, ids: Iterable[int], errors: str = "replace") -> str:
        """The text of `ids`. Bytes that are not valid UTF-8 (possible when the ids
        were not made by `encode`, e.g. sampled by a model) become "�" (errors="replace")."""
        data = self.decode_bytes(ids)
        try:
            return data.decode("utf-8", errors="surrogatepass")
        except UnicodeDecodeError:
            return data.decode("utf-8", errors=errors)

    def token_strings(self, ids: Iterable[int]) -> list[str]:
        """Each token on its own, as text; a token that holds only part of a character's
        UTF-8 bytes shows them escaped: "ï" is two tokens ``\\xc3`` and ``\\xaf`` when no merge joins them."""
        return [self.vocab[i].decode("utf-8", errors="backslashreplace") for i in self._check_ids(ids)]

    def show(self, text: str, sep: str = "|") -> str:
        """`text` with the token boundaries marked: ``"Ham|let| is"``."""
        return sep.join(self.token_strings(self.encode(text)))

    # ---- plain JSON -------------------------------------------------------

    def to_dict(self) -> dict:
        data = {
            "format": _FORMAT,
            "version": _VERSION,
            "pattern": self.pattern,
            "merges": [list(p) for p in self.merges],
        }
        if self.merge_counts is not None:
            data["merge_counts"] = list(self.merge_counts)
        return data

    @classmethod
    def from_dict(cls, data: dict) -> BPETokenizer:
        if not isinstance(data, dict) or data.get("format") != _FORMAT:
            raise ValueError(f"data: not a saved {_FORMAT} tokenizer (no 'format': {_FORMAT!r})")
        if data.get("version") != _VERSION:
            raise ValueError(f"data: version {data.get('version')!r} is not supported (expected {_VERSION})")
        for key in ("pattern", "merges"):
            if key not in data:
                raise ValueError(f"data: a saved tokenizer needs {key!r}")
        merges = [tuple(p) if isinstance(p, list) else p for p in data["merges"]]
        return cls(merges, data["pattern"], data.get("merge_counts"))

    def save(self, path: str | os.PathLike) -> None:
        """Write the tokenizer as plain JSON (its pattern and merges; the vocabulary follows)."""
        with open(path, "w", encoding="utf-8") as f:
            json.dump(self.to_dict(), f)
            f.write("\n")

    @classmethod
    def load(cls, path: str | os.PathLike) -> BPETokenizer:
        with open(path, encoding="utf-8") as f:
            return cls.from_dict(json.load(f))

    def __eq__(self, other) -> bool:
        return isinstance(other, BPETokenizer) and (self.merges, self.pattern) == (other.merges, other.pattern)

    def __repr__(self) -> str:
        return f"BPETokenizer(vocab_size={self.vocab_size}, merges={len(self.merges)})"


def _gpt2_byte_to_unicode() -> dict[int, str]:
    """GPT-2's printable stand-in character for each byte (how `tokenizers` stores bytes)."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    table = {b: chr(b) for b in keep}
    others = [b for b in range(N_BYTES) if b not in table]
    table.update({b: chr(N_BYTES + k) for k, b in enumerate(others)})
    return table


def train_tokenizers_reference(text: str | Iterable[str], vocab_size: int):
    """The same training with the independent `tokenizers` package (Hugging Face, Rust).

    Its byte-level BPE trainer with GPT-2's pre-tokeniser, all 256 bytes as the
    alphabet, no special tokens. Returns ``(tokenizer, merges)`` with the merges as
    pairs of byte strings, comparable with `BPETokenizer.merge_bytes`. `tokenizers`
    is needed only for this check (ImportError otherwise).
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    vocab_size = _check_vocab_size(vocab_size)
    texts = [text] if isinstance(text, str) else list(text)
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=[],
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer)
    to_byte = {c: b for b, c in _gpt2_byte_to_unicode().items()}
    merges = json.loads(tokenizer.to_str())["model"]["merges"]
    pairs = [m.split(" ") if isinstance(m, str) else m for m in merges]
    return tokenizer, [tuple(bytes(to_byte[c] for c in part) for part in pair) for pair in pairs]
