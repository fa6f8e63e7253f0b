"""lib.teach.next_tokens (chapter 15): the k most probable next tokens of a prompt, their
probabilities the softmax of the last position's logits, computed here by hand; the table
and the figure; bad input refused."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402
import torch  # noqa: E402

import lib  # noqa: E402


class Letters:
    """A character tokenizer over a-z and space: id = position."""
    alphabet = "abcdefghijklmnopqrstuvwxyz "

    def encode(self, text):
        return [self.alphabet.index(c) for c in text]

    def decode(self, ids):
        return "".join(self.alphabet[i] for i in ids)


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return lib.DecoderOnlyModel(27, d_model=16, n_heads=2, n_layers=1, d_ff=32,
                                dropout=0.0).eval()


def test_probabilities_are_the_last_positions_softmax(model):
    tok = Letters()
    pairs = lib.next_tokens(model, tok, "to be", k=4, prefix=(26,))
    with torch.no_grad():
        logits = model(torch.tensor([[26, *tok.encode("to be")]]))[0, -1]
    p = torch.exp(logits.double() - torch.logsumexp(logits.double(), 0))
    want = sorted(range(27), key=lambda i: -float(p[i]))[:4]
    assert [t for t, _ in pairs] == [tok.decode([i]) for i in want]
    assert [round(q, 12) for _, q in pairs] == [round(float(p[i]), 12) for i in want]
    assert all(a >= b for (_, a), (_, b) in zip(pairs, pairs[1:]))
    without = lib.next_tokens(model, tok, "to be", k=4)  # the prefix is used
    assert without != pairs


def test_table_and_figure(model):
    tok = Letters()
    results = {p: lib.next_tokens(model, tok, p, k=3) for p in ("ab", "a b", "zz z")}
    text = lib.next_tokens_table(results)
    assert text.count("->") == 3 and "'ab'" in text
    first = results["ab"][0]
    assert f"{first[0]!r} {first[1]:.2f}" in text
    fig = lib.plot_next_tokens(results, columns=2)
    visible = [ax for ax in fig.axes if ax.axison]
    assert len(fig.axes) == 4 and len(visible) == 3
    assert len(visible[0].patches) == 3


def test_bad_input(model):
    tok = Letters()
    with pytest.raises(ValueError, match="prompt"):
        lib.next_tokens(model, tok, "")
    with pytest.raises(ValueError, match="k"):
        lib.next_tokens(model, tok, "ab", k=0)
    with pytest.raises(ValueError, match="k"):
        lib.next_tokens(model, tok, "ab", k=28)
    with pytest.raises(ValueError, match="results"):
        lib.plot_next_tokens({})
    with pytest.raises(ValueError, match="columns"):
        lib.plot_next_tokens({"a": [("b", 1.0)]}, columns=0)
