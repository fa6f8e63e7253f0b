"""lib.train.gguf_tokenizer: SmolLM2's byte-level BPE rebuilt from the GGUF file's vocabulary
and merges gives the same token ids as Hugging Face's tokenizer loaded from the same file
(offline), on a set of strings with unicode, emoji, CJK, code, whitespace and numbers;
a wrong merge order is detected."""

from __future__ import annotations

import random

import pytest
from smollm2_reference import gguf_path, hf_tokenizer

from lib.interop.gguf import read_gguf
from lib.train.corpus import load_corpus
from lib.train.gguf_tokenizer import GGUFTokenizer

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


@pytest.fixture(scope="module")
def tokenizer():
    return GGUFTokenizer.from_gguf(read_gguf(gguf_path()))


def _reference_ids(text):
    return hf_tokenizer().encode(text, add_special_tokens=False)


@pytest.mark.parametrize("text", STRINGS)
def test_ids_equal_the_reference(tokenizer, text):
    ids = tokenizer.encode(text)
    assert ids == _reference_ids(text)
    assert tokenizer.decode(ids) == text  # byte-level: nothing is lost


def test_held_out_shakespeare_equals_the_reference(tokenizer):
    text = load_corpus().validation["macbeth"][:20_000]
    ids = tokenizer.encode(text)
    assert ids == _reference_ids(text)
    assert len(ids) < len(text) / 3  # merges do happen


def test_decode_equals_the_reference(tokenizer):
    ids = list(range(0, 49152, 97)) + [2, 1, 0]
    assert tokenizer.decode(ids) == hf_tokenizer().decode(ids)


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
                          [3 if t in tokenizer.special else 1 for t in tokenizer.tokens])
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
