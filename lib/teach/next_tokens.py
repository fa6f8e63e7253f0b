"""What a language model expects next: the most probable next tokens of a few prompts,
as a table and as a figure (the chapter "A real pretrained model").

`next_tokens` runs the model once per prompt and returns the ``k`` most probable
next tokens with their probabilities (softmax of the last position's logits);
`plot_next_tokens` draws one panel of horizontal bars per prompt, and
`next_tokens_table` writes the same numbers as text, for a page without figures.

Tests: tests/test_next_tokens.py.
"""

from __future__ import annotations

import numbers

import torch

__all__ = ["next_tokens", "next_tokens_table", "plot_next_tokens"]


def next_tokens(model, tokenizer, prompt: str, k: int = 5, *, prefix=()) -> list[tuple[str, float]]:
    """The ``k`` most probable next tokens of `prompt`, most probable first, as
    ``(token text, probability)`` pairs. `tokenizer` has ``encode`` and ``decode``;
    `prefix` token ids go before the prompt's (e.g. a start token)."""
    if not isinstance(prompt, str) or not prompt:
        raise ValueError(f"prompt: expected a non-empty str, got {prompt!r}")
    if not isinstance(k, numbers.Integral) or isinstance(k, bool) or k < 1:
        raise ValueError(f"k: expected a positive int, got {k!r}")
    ids = [*prefix, *tokenizer.encode(prompt)]
    device = next(model.parameters()).device
    with torch.no_grad():
        logits = model(torch.tensor([ids], device=device))[0, -1]
    if k > logits.numel():
        raise ValueError(f"k: {k} is more than the {logits.numel()} tokens of the vocabulary")
    probs = torch.softmax(logits.double(), dim=-1)
    top = probs.topk(k)
    return [(tokenizer.decode([int(i)]), float(p)) for p, i in zip(top.values, top.indices)]


def next_tokens_table(results: dict[str, list[tuple[str, float]]]) -> str:
    """`results` (prompt -> `next_tokens`'s pairs) as text: one line per prompt, its
    tokens written with ``repr`` so that spaces and newlines show."""
    lines = []
    for prompt, pairs in results.items():
        shown = "  ".join(f"{tok!r} {p:.2f}" for tok, p in pairs)
        lines.append(f"{prompt!r}\n    -> {shown}")
    return "\n".join(lines)


def plot_next_tokens(results: dict[str, list[tuple[str, float]]], *, columns: int = 3,
                     width: float = 10.0):
    """One panel per prompt, `columns` panels a row: the next tokens as horizontal bars
    of their probability (0 to 1). Returns the figure."""
    import math

    import matplotlib.pyplot as plt

    if not results:
        raise ValueError("results: expected at least one prompt")
    if not isinstance(columns, numbers.Integral) or isinstance(columns, bool) or columns < 1:
        raise ValueError(f"columns: expected a positive int, got {columns!r}")
    columns = min(columns, len(results))
    rows = math.ceil(len(results) / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(width, 2.4 * rows), squeeze=False)
    for ax in axes.flat[len(results):]:
        ax.axis("off")
    for ax, (prompt, pairs) in zip(axes.flat, results.items()):
        labels = [repr(tok) for tok, _ in pairs][::-1]
        _ = ax.barh(range(len(pairs)), [p for _, p in pairs][::-1], color="tab:blue")
        _ = ax.set_yticks(range(len(pairs)), labels, fontsize="small")
        _ = ax.set_xlim(0, 1)
        _ = ax.set_xlabel("probability")
        title = prompt if len(prompt) <= 28 else prompt[:26] + "…"
        _ = ax.set_title(repr(title), fontsize="small")
    fig.tight_layout()
    return fig
