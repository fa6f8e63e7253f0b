"""The tokenizer stored in a GGUF file, rebuilt from its vocabulary and merges (the
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

Before BPE the text is cut into chunks with GPT-2's regular expression
(contractions, letters, numbers, other symbols, spaces); merges never cross
chunks. SmolLM2 was trained with its digits split one by one as well; its
merge list holds no pair of digits, so the digits end up one token each either
way.

Tests: tests/test_gguf_tokenizer.py compares token ids with Hugging Face's
tokenizer loaded from the same file, on ASCII, accented, CJK, emoji, code and
chat strings.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["GGUFTokenizer", "GPT2_PATTERN"]

# GPT-2's pre-tokeniser (Radford et al., 2019), with \p{L} letters and \p{N} numbers.
GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
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
    """

    def __init__(self, tokens: Sequence[str], merges: Sequence[str],
                 token_types: Sequence[int] | None = None, *, bos_id: int | None = None,
                 eos_id: int | None = None, chat_template: str | None = None):
        import regex  # \p{L}, \p{N}: imported here so that `import lib` does not need it

        if not tokens or not all(isinstance(t, str) for t in tokens):
            raise TypeError("tokens: expected a non-empty sequence of str")
        if not all(isinstance(m, str) and m.count(" ") == 1 for m in merges):
            raise ValueError("merges: each merge must be a str 'left right' with one space")
        self.tokens = list(tokens)
        self.token_to_id = {t: i for i, t in enumerate(self.tokens)}
        self.ranks = {tuple(m.split(" ")): r for r, m in enumerate(merges)}
        types = list(token_types) if token_types is not None else [1] * len(self.tokens)
        self.special = {t: i for i, t in enumerate(self.tokens) if int(types[i]) == CONTROL}
        # Longest first, so that no special token is matched as a prefix of another.
        alternatives = "|".join(regex.escape(t) for t in sorted(self.special, key=len, reverse=True))
        self._special_split = regex.compile(f"({alternatives})") if alternatives else None
        self._chunks = regex.compile(GPT2_PATTERN)
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
                   chat_template=meta.get("tokenizer.chat_template"))

    @property
    def vocab_size(self) -> int:
        return len(self.tokens)

    def _bpe(self, chunk: str) -> list[int]:
        """One pre-tokenised chunk to ids: its bytes, then merges by rank."""
        if chunk in self._cache:
            return self._cache[chunk]
        parts = [self._byte_char[b] for b in chunk.encode("utf-8")]
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
                for chunk in self._chunks.findall(piece):
                    ids.extend(self._bpe(chunk))
        return ids

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
                f"special={len(self.special)})")
