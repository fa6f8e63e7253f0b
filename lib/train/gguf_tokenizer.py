r"""The tokenizer stored in a GGUF file, rebuilt from its vocabulary and merges (the
chapter "A real pretrained model").

SmolLM2's file (``tokenizer.ggml.model = gpt2``) holds a byte-level BPE
tokenizer, the same kind the tokenization chapter trains:

- ``tokenizer.ggml.tokens``: the 49,152 token strings; id = position. Bytes are
  spelled with GPT-2's printable stand-ins ("Ġ" is the space byte, "Ċ" the
  newline).
- ``tokenizer.ggml.merges``: 48,900 strings "a b", best first. Encoding a chunk
  starts from its bytes and repeatedly merges the adjacent pair that comes
  first in this list (lowest rank), until no pair of the list is left. The
  order matters: merging by position in the text, or in another order, gives
  other tokens.
- ``tokenizer.ggml.token_type``: 3 marks the control tokens (``<|im_start|>``,
  ``<|im_end|>``, ``<|endoftext|>``...): they are matched whole in the text and
  never cut.
- ``tokenizer.chat_template``: how a conversation is laid out for the Instruct
  model (`apply_chat` writes that template out in Python).

Before BPE the text is cut into chunks, and merges never cross chunks. How it
is cut is the file's ``tokenizer.ggml.pre``. SmolLM2's says ``smollm``: every
digit (``\p{N}``) is first cut off on its own, then GPT-2's regular expression
(contractions, letters, numbers, other symbols, spaces) cuts the pieces between
the digits. The digits end up one token each either way (the merge list holds
no pair of digits), but the chunks *around* them change: in ``"x   1"`` GPT-2's
expression alone gives the last space to the digit (``'x', '  ', ' 1'``; no merge
joins a space and a digit, so the tokens are ``'x', '  ', ' ', '1'``), while with
the digits cut off first the run of spaces is a piece by itself and stays whole
(``'x', '   ', '1'``). ``gpt2`` (and a file
without the key) means GPT-2's expression alone; other types are refused.

A byte with no token of its own (SmolLM2's vocabulary lacks 21 of the 256,
among them the ASCII control characters 0x04, 0x06, 0x13, 0x14, 0x16, 0x1d) is
dropped before the merges, as Hugging Face's `tokenizers` does.

Tests: tests/test_gguf_tokenizer.py compares token ids with a reference built
with Hugging Face's `tokenizers` from the vocabulary and merges (read by the
`gguf` package) and the pre-tokenizer SmolLM2 publishes (``Digits`` with
individual digits, then ``ByteLevel``), on hand-written strings and 3,000
generated ones. Not with Hugging Face's GGUF loader: it maps ``smollm`` to plain
``ByteLevel``, the very step this module once missed, so it could not see it.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["GGUFTokenizer", "GPT2_PATTERN", "PRE_TOKENIZERS"]

# GPT-2's pre-tokeniser (Radford et al., 2019), with \p{L} letters and \p{N} numbers.
GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
# tokenizer.ggml.pre -> the expressions that cut the text, applied in turn: each cuts
# the pieces the previous one left, and what it matches becomes a piece of its own.
PRE_TOKENIZERS = {"gpt2": (GPT2_PATTERN,), "gpt-2": (GPT2_PATTERN,),
                  "smollm": (r"\p{N}", GPT2_PATTERN)}
_NEVER = float("inf")  # the rank of a pair that is not in the list
CONTROL = 3  # tokenizer.ggml.token_type of a control (special) token

SYSTEM_PROMPT = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's printable stand-in character for each of the 256 byte values: printable
    Latin-1 characters stand for themselves, the others are shifted past 255."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
            *range(ord("®"), ord("ÿ") + 1)]
    table = {b: chr(b) for b in keep}
    others = [b for b in range(256) if b not in table]
    table.update({b: chr(256 + k) for k, b in enumerate(others)})
    return table


class GGUFTokenizer:
    """Byte-level BPE from a vocabulary and a ranked merge list.

    tokens        the token strings (id = index), bytes in GPT-2's stand-ins
    merges        "a b" strings, best (first applied) first
    token_types   per token; `CONTROL` (3) marks tokens matched whole
    chat_template the file's template text (kept for the record; `apply_chat`
                  implements the ChatML layout SmolLM2 uses)
    pre           the pre-tokenizer, a key of `PRE_TOKENIZERS` (the file's
                  ``tokenizer.ggml.pre``; "gpt2" = GPT-2's expression alone)
    """

    def __init__(self, tokens: Sequence[str], merges: Sequence[str],
                 token_types: Sequence[int] | None = None, *, bos_id: int | None = None,
                 eos_id: int | None = None, chat_template: str | None = None,
                 pre: str = "gpt2"):
        import regex  # \p{L}, \p{N}: imported here so that `import lib` does not need it

        if not tokens or not all(isinstance(t, str) for t in tokens):
            raise TypeError("tokens: expected a non-empty sequence of str")
        if not all(isinstance(m, str) and m.count(" ") == 1 for m in merges):
            raise ValueError("merges: each merge must be a str 'left right' with one space")
        if pre not in PRE_TOKENIZERS:
            raise ValueError(f"pre: pre-tokenizer {pre!r} is not implemented "
                             f"(known: {sorted(PRE_TOKENIZERS)})")
        self.tokens = list(tokens)
        self.token_to_id = {t: i for i, t in enumerate(self.tokens)}
        self.ranks = {tuple(m.split(" ")): r for r, m in enumerate(merges)}
        types = list(token_types) if token_types is not None else [1] * len(self.tokens)
        self.special = {t: i for i, t in enumerate(self.tokens) if int(types[i]) == CONTROL}
        # Longest first, so that no special token is matched as a prefix of another.
        alternatives = "|".join(regex.escape(t) for t in sorted(self.special, key=len, reverse=True))
        self._special_split = regex.compile(f"({alternatives})") if alternatives else None
        self.pre = pre
        self._cuts = [regex.compile(p) for p in PRE_TOKENIZERS[pre]]
        self._byte_char = bytes_to_unicode()
        self._char_byte = {c: b for b, c in self._byte_char.items()}
        self.bos_id, self.eos_id, self.chat_template = bos_id, eos_id, chat_template
        self._cache: dict[str, list[int]] = {}

    @classmethod
    def from_gguf(cls, gguf_file) -> GGUFTokenizer:
        """The tokenizer described by a `lib.interop.gguf.GGUFFile`'s metadata."""
        meta = gguf_file.metadata
        if meta.get("tokenizer.ggml.model") != "gpt2":
            raise ValueError(f"gguf_file: tokenizer {meta.get('tokenizer.ggml.model')!r} "
                             "is not a byte-level BPE ('gpt2')")
        return cls(meta["tokenizer.ggml.tokens"], meta["tokenizer.ggml.merges"],
                   meta.get("tokenizer.ggml.token_type"),
                   bos_id=meta.get("tokenizer.ggml.bos_token_id"),
                   eos_id=meta.get("tokenizer.ggml.eos_token_id"),
                   chat_template=meta.get("tokenizer.chat_template"),
                   pre=_pre_type(meta.get("tokenizer.ggml.pre", "gpt2")))

    @property
    def vocab_size(self) -> int:
        return len(self.tokens)

    def _bpe(self, chunk: str) -> list[int]:
        """One pre-tokenised chunk to ids: its bytes, then merges by rank."""
        if chunk in self._cache:
            return self._cache[chunk]
        # a byte with no token is dropped before merging, as `tokenizers` does
        parts = [c for c in map(self._byte_char.get, chunk.encode("utf-8"))
                 if c in self.token_to_id]
        while len(parts) > 1:
            best = min(zip(parts, parts[1:]), key=lambda pair: self.ranks.get(pair, _NEVER))
            if best not in self.ranks:
                break  # no pair of the list is left
            merged, i = [], 0
            while i < len(parts):  # merge every occurrence, left to right
                if i + 1 < len(parts) and (parts[i], parts[i + 1]) == best:
                    merged.append(parts[i] + parts[i + 1])
                    i += 2
                else:
                    merged.append(parts[i])
                    i += 1
            parts = merged
        ids = [self.token_to_id[p] for p in parts]
        if len(self._cache) < 100_000:
            self._cache[chunk] = ids
        return ids

    def encode(self, text: str) -> list[int]:
        """Token ids of `text`; control tokens written in the text are kept whole.
        No BOS is added (the file says ``add_bos_token = false``)."""
        if not isinstance(text, str):
            raise TypeError(f"text: expected a str, got {type(text).__name__}")
        pieces = self._special_split.split(text) if self._special_split else [text]
        ids: list[int] = []
        for k, piece in enumerate(pieces):
            if k % 2 == 1:  # the split's captured separators are the special tokens
                ids.append(self.special[piece])
            else:
                for chunk in self.chunks(piece):
                    ids.extend(self._bpe(chunk))
        return ids

    def chunks(self, text: str) -> list[str]:
        """`text` (without control tokens) cut by the pre-tokenizer: the pieces that
        BPE merges within. ``chunks("x   1")`` is ``['x', '   ', '1']`` for SmolLM2."""
        pieces = [text]
        for cut in self._cuts:
            out = []
            for piece in pieces:
                start = 0
                for m in cut.finditer(piece):  # the match, and what lies before it
                    out.extend(p for p in (piece[start:m.start()], m.group()) if p)
                    start = m.end()
                if start < len(piece):
                    out.append(piece[start:])
            pieces = out
        return pieces

    def decode(self, ids: Sequence[int]) -> str:
        """The text of `ids` (bytes that are not valid UTF-8 become U+FFFD)."""
        out, pending = [], bytearray()
        for i in ids:
            i = int(i)
            if not 0 <= i < len(self.tokens):
                raise ValueError(f"ids: {i} is not a token id (0..{len(self.tokens) - 1})")
            token = self.tokens[i]
            if token in self.special:
                out.append(pending.decode("utf-8", errors="replace"))
                pending = bytearray()
                out.append(token)
            else:
                pending.extend(self._char_byte[c] for c in token)
        out.append(pending.decode("utf-8", errors="replace"))
        return "".join(out)

    def apply_chat(self, messages: Sequence[dict], add_generation_prompt: bool = True,
                   tokenize: bool = True):
        """A conversation laid out as the file's chat template does (ChatML):
        ``<|im_start|>role\\ncontent<|im_end|>\\n`` per message, a default system
        message first when the first message is not one, and with
        `add_generation_prompt` the opening of the assistant's turn. Returns the ids
        (or the text with ``tokenize=False``)."""
        if not messages or not all(isinstance(m, dict) and {"role", "content"} <= set(m)
                                   for m in messages):
            raise ValueError("messages: expected a non-empty list of {'role', 'content'} dicts")
        text = ""
        if messages[0]["role"] != "system":
            text += f"<|im_start|>system\n{SYSTEM_PROMPT}<|im_end|>\n"
        for m in messages:
            text += f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n"
        if add_generation_prompt:
            text += "<|im_start|>assistant\n"
        return self.encode(text) if tokenize else text

    def __repr__(self) -> str:
        return (f"GGUFTokenizer(vocab_size={self.vocab_size}, merges={len(self.ranks)}, "
                f"special={len(self.special)}, pre={self.pre!r})")


def _pre_type(pre) -> str:
    if pre not in PRE_TOKENIZERS:
        raise ValueError(f"gguf_file: tokenizer.ggml.pre {pre!r} is not implemented "
                         f"(known: {sorted(PRE_TOKENIZERS)})")
    return pre
