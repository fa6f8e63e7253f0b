"""lib.train.gguf_tokenizer: SmolLM2's byte-level BPE rebuilt from the GGUF file's vocabulary
and merges gives the same token ids as SmolLM2's tokenizer put together with `tokenizers`
(tests/smollm2_reference.py: its published pre-tokenizer, digits split one by one before
ByteLevel; not Hugging Face's GGUF loader, which drops that step), on strings with unicode,
emoji, CJK, code, whitespace and numbers, the 2026-11-28 review's strings (whitespace runs
before digits, unicode numerals, control characters without a token) and 3,000 generated
ones; a wrong merge order and the missing digit split are both detected."""

from __future__ import annotations

import random

import pytest
from smollm2_reference import gguf_path, hf_tokenizer, smollm2_tokenizer

from lib.interop.gguf import read_gguf
from lib.train.corpus import load_corpus
from lib.train.gguf_tokenizer import GGUFTokenizer, bytes_to_unicode

STRINGS = [
    "Hello, world!",
    "To be, or not to be: that is the question.\n\nWhether 'tis nobler in the mind",
    "Café naïve résumé Straße façade Œuvre",
    "東京は日本の首都です。中文测试，한국어 텍스트",
    "emoji 🤖👍🏽 and a family 👨‍👩‍👧 ✨",
    "1234567890 3.14159 2024-11-24 1,000,000 ½ ²",
    "  leading   spaces\ttabs\r\nwindows line\n\n\n",
    "def f(x):\n    return x**2  # comment\n",
    "I'm you're we've they'll he'd IT'S don't",
    "Ελληνικά Русский العربية हिन्दी",
    "<|im_start|>user\nHi!<|im_end|>\n<|endoftext|>",
    "",
    " ",
    "a" * 50 + " " + "ab" * 20,
]

# The 2026-11-28 review's strings (W1, W2): where cutting the digits off first changes the
# chunks around them, unicode numerals, and the six ASCII bytes that have no token.
HARD = [
    "1. one\n\n2. two", "Chapter 1\n\n\n2", "x   1", "    1 + 2", "a = [1,  2,   3]",
    "Total:\t\t42", "  42", "version  2.0.1", "\u00a01", "\u30001", "year 2024",
    "¹²³ ½ Ⅻ ٣٤ ४२", "3rd 21st 100km 1e-5 0x1F", "🤖👍🏽 👨‍👩‍👧 🇫🇷 ❤️ ✨",
    "e\u0301 vs é; ﬁ ligature; ＡＢＣ fullwidth", "   \n\t \r\n  ", "trailing spaces    ",
    "IT'S DON'T you'RE", "\u200bzero\u200bwidth",
    "a\x1db", "a \x1d b", "a\x1d\x1d b", "\x1dx", "x\x1d", "\x04\x06\x13\x14\x16\x1d",
    "log\x13 2026-11-28\x14 ok", "\x1d\x1d\n\n7",
]
# SmolLM2's vocabulary has no token for these ASCII bytes: they are dropped, as `tokenizers` does
NO_TOKEN = "\x04\x06\x13\x14\x16\x1d"
# Palette of the generated strings: whitespace runs, digits and unicode numerals,
# control characters, emoji, code, contractions.
PALETTE = (list("ab Z") + [" ", "  ", "   ", "\n", "\n\n", "\t", "\r\n", "\u00a0", "\u3000"]
           + list("0123456789") + ["½", "²", "٣", "४", "Ⅻ", "①"] + list(NO_TOKEN + "\x0b\x0c\x00")
           + ["🤖", "👍🏽", "👨‍👩‍👧", "东京", "é", "ß"]
           + ["'s", "'S", "'ll", ".", ",", "-", "=", "(", ")", "x = 1", "def f(", "    return 2"])


def _generated(n, seed=0):
    rng = random.Random(seed)
    return ["".join(rng.choice(PALETTE) for _ in range(rng.randint(1, 14))) for _ in range(n)]


@pytest.fixture(scope="module")
def tokenizer():
    return GGUFTokenizer.from_gguf(read_gguf(gguf_path()))


def _reference_ids(text):
    return smollm2_tokenizer().encode(text, add_special_tokens=False).ids


def test_the_file_names_smollm_and_lib_reads_it(tokenizer):
    assert tokenizer.pre == "smollm"
    assert tokenizer.chunks("x   1") == ["x", "   ", "1"]
    assert tokenizer.chunks("1. one\n\n2") == ["1", ".", " one", "\n\n", "2"]


@pytest.mark.parametrize("text", STRINGS + HARD)
def test_ids_equal_the_reference(tokenizer, text):
    ids = tokenizer.encode(text)
    assert ids == _reference_ids(text)
    # byte-level: nothing is lost but the bytes that have no token
    assert tokenizer.decode(ids) == "".join(c for c in text if c not in NO_TOKEN)


def test_generated_strings_equal_the_reference(tokenizer):
    texts = _generated(3000)
    assert sum(any(c.isdigit() for c in t) for t in texts) > 1000  # digits are well covered
    wrong = [t for t in texts if tokenizer.encode(t) != _reference_ids(t)]
    assert wrong == []


def test_gpt2_chunks_alone_are_caught(tokenizer):
    """The reference sees the 2026-11-28 bug: the same vocabulary and merges cut by GPT-2's
    expression alone (what lib did, and Hugging Face's GGUF loader still does) differ."""
    gpt2 = GGUFTokenizer(tokenizer.tokens, [" ".join(p) for p in tokenizer.ranks],
                         [3 if t in tokenizer.special else 1 for t in tokenizer.tokens],
                         pre="gpt2")
    for text in ["1. one\n\n2. two", "x   1", "    1 + 2", "Total:\t\t42"]:
        assert gpt2.encode(text) != _reference_ids(text), text
    assert sum(gpt2.encode(t) != _reference_ids(t) for t in _generated(500)) > 50


def test_bytes_without_a_token(tokenizer):
    """21 byte values have no single-byte token; six of them are ASCII control characters."""
    table = bytes_to_unicode()
    missing = [b for b in range(256) if table[b] not in tokenizer.token_to_id]
    assert [b for b in missing if b < 128] == [ord(c) for c in NO_TOKEN]
    assert len(missing) == 21
    ab = tokenizer.encode("a") + tokenizer.encode("b")  # \x1d is whitespace: a chunk of its own
    assert tokenizer.encode("a\x1db") == ab == _reference_ids("a\x1db")


def test_held_out_shakespeare_equals_the_reference(tokenizer):
    text = load_corpus().validation["macbeth"][:20_000]
    ids = tokenizer.encode(text)
    assert ids == _reference_ids(text)
    assert len(ids) < len(text) / 3  # merges do happen


def test_decode_equals_the_reference(tokenizer):
    ids = list(range(0, 49152, 97)) + [2, 1, 0]
    assert tokenizer.decode(ids) == hf_tokenizer().decode(ids)
    assert tokenizer.decode(ids) == smollm2_tokenizer().decode(ids, skip_special_tokens=False)


@pytest.mark.parametrize("messages", [
    [{"role": "user", "content": "What is the capital of France?"}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
     {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "2+2?"}],
])
def test_chat_template_equals_the_reference(tokenizer, messages):
    text = hf_tokenizer().apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    assert tokenizer.apply_chat(messages, tokenize=False) == text
    assert tokenizer.apply_chat(messages) == _reference_ids(text)


@pytest.mark.parametrize("order", ["reversed", "shuffled", "two merges swapped"])
def test_a_wrong_merge_order_is_detected(tokenizer, order):
    merges = [" ".join(pair) for pair in tokenizer.ranks]  # best first
    texts = STRINGS
    if order == "reversed":
        merges = merges[::-1]
    elif order == "shuffled":
        random.Random(0).shuffle(merges)
    else:  # 'e r' (rank 7) before 'Ġ t' (rank 0): " there" becomes 'Ġth', 'er', 'e'
        merges[0], merges[7] = merges[7], merges[0]
        texts = [" there", " other"]
    wrong = GGUFTokenizer(tokenizer.tokens, merges,
                          [3 if t in tokenizer.special else 1 for t in tokenizer.tokens],
                          pre=tokenizer.pre)
    assert all(tokenizer.encode(t) == _reference_ids(t) for t in texts)
    assert any(wrong.encode(t) != _reference_ids(t) for t in texts)


def test_bad_input_is_refused(tokenizer):
    with pytest.raises(TypeError, match="text"):
        tokenizer.encode(b"bytes")
    with pytest.raises(ValueError, match="ids"):
        tokenizer.decode([49152])
    with pytest.raises(ValueError, match="messages"):
        tokenizer.apply_chat([])
    with pytest.raises(ValueError, match="merges"):
        GGUFTokenizer(["a", "b"], ["ab"])
    with pytest.raises(ValueError, match="pre"):
        GGUFTokenizer(["a", "b"], ["a b"], pre="llama3")


def test_an_unknown_pre_tokenizer_in_the_file_is_refused():
    class File:
        metadata = {"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.tokens": ["a", "b"],
                    "tokenizer.ggml.merges": ["a b"], "tokenizer.ggml.pre": "qwen2"}
    with pytest.raises(ValueError, match="gguf_file: tokenizer.ggml.pre 'qwen2'"):
        GGUFTokenizer.from_gguf(File())
