"""The trained date model of chapter 8, running in the reader's browser.

Introduced in chapter 8 (training).

`DateTranslator(model)` is an ``anywidget`` widget holding a copy of a trained
`lib.Transformer`'s weights (float16, base64: `export_weights`). Its
JavaScript, lib/widgets/static/date_translator.js, runs greedy decoding on
every keystroke, in JupyterLab, VS Code, Colab and on the static web book
alike (no kernel, no network), and shows the output, each step's most
probable next characters and the cross-attention of the step the reader
points at. The first paint shows ``example`` (a stored run computed here with
`lib`) before the page computes anything.

The page runs the float16-rounded weights; `rounded_model` returns the same
model as a `lib.Transformer` (what `date_steps` and the tests compare with).
"""

from __future__ import annotations

import base64
import copy
import pathlib

import anywidget
import numpy as np
import torch
import traitlets

from lib.model.attention import causal_mask, padding_mask

__all__ = ["DateTranslator", "export_weights", "rounded_model", "date_steps", "MAX_EXPORT_BYTES"]

_JS_PATH = pathlib.Path(__file__).parent / "static" / "date_translator.js"

MAX_EXPORT_BYTES = 1_000_000  # the base64 weights the page may carry (issue 25: at most 1 MB)
MAX_SOURCE = 24  # characters the reader may type


def _check_model(model) -> None:
    from lib.model.transformer import Transformer

    if not isinstance(model, Transformer):
        raise TypeError(f"model must be a lib.Transformer (chapter 8's date model), got {type(model).__name__}")
    c = model.config
    if c.positional != "sinusoidal":
        raise ValueError(f"model.config.positional must be 'sinusoidal' for the widget, got {c.positional!r}")
    if c.activation != "relu":
        raise ValueError(f"model.config.activation must be 'relu' for the widget, got {c.activation!r}")
    if c.output_bias:
        raise ValueError("model.config.output_bias must be False for the widget")


def _exported(model) -> list[tuple[str, torch.Tensor]]:
    """The tensors the page needs: every parameter (and tied copy), not the positional tables."""
    return [(name, t) for name, t in model.state_dict().items() if not name.endswith("_pos.pe")]


def export_weights(model) -> tuple[str, list]:
    """The model's weights as the widget stores them: (base64 of little-endian float16
    values, one tensor after another, each row-major), and the layout [[name, shape], ...]
    in that order. Raises ValueError if the text would exceed MAX_EXPORT_BYTES."""
    _check_model(model)
    tensors = _exported(model)
    n_values = sum(t.numel() for _, t in tensors)
    size = 4 * ((2 * n_values + 2) // 3)
    if size > MAX_EXPORT_BYTES:
        raise ValueError(
            f"model has {n_values:,d} weights: {size:,d} bytes of base64 float16, over the page's "
            f"budget of {MAX_EXPORT_BYTES:,d}; use a smaller model"
        )
    flat = np.concatenate([t.detach().to(torch.float32).cpu().numpy().ravel() for _, t in tensors])
    big = np.abs(flat).max() if flat.size else 0.0
    if not np.isfinite(flat).all() or big > 65504:
        raise ValueError(f"model weights must be finite and below 65504 (float16's range), largest {big}")
    data = flat.astype("<f2").tobytes()
    return base64.b64encode(data).decode("ascii"), [[name, list(t.shape)] for name, t in tensors]


def rounded_model(model):
    """A copy of ``model`` in eval mode with every exported weight rounded to float16
    and back: the model the page runs."""
    _check_model(model)
    twin = copy.deepcopy(model).eval()
    with torch.no_grad():
        state = twin.state_dict()
        for name, _ in _exported(twin):
            state[name].copy_(state[name].to(torch.float16).to(state[name].dtype))
    return twin


@torch.no_grad()
def date_steps(model, source: str, vocab, max_len: int = 20, top_k: int = 5) -> dict:
    """Greedy decoding of ``source``, one step at a time (as `lib.greedy_decode`
    does: the decoder re-reads every token so far, no cache), keeping what the
    widget shows: for each step the token chosen, its ``logits``, the ``top_k``
    most probable tokens [[id, probability], ...], and the last decoder layer's
    cross-attention ``cross`` (n_heads rows over the source characters).
    Returns {"source", "output" (text up to EOS), "steps": [...]}."""
    ids = vocab.encode(source)  # raises on a character outside the vocabulary
    model.eval()
    src = torch.tensor([ids], dtype=torch.long)
    src_mask = padding_mask(src, vocab.pad_id)
    memory = model.encode(src, src_mask=src_mask)
    ys = [vocab.bos_id]
    steps = []
    for _ in range(max_len):
        tgt = torch.tensor([ys], dtype=torch.long)
        mask = causal_mask(len(ys))[None, None]
        logits = model.decode(tgt, memory, src_mask=src_mask, tgt_mask=mask)[0, -1].double()
        cross = model.decoder_layers[-1].cross_attn.attention_weights[0, :, -1]  # (h, n)
        probs = logits.softmax(-1)
        top = torch.topk(probs, top_k)
        token = int(logits.argmax())
        steps.append({
            "token": token,
            "logits": logits.tolist(),
            "top": [[int(i), float(p)] for p, i in zip(top.values, top.indices)],
            "cross": cross.double().tolist(),
        })
        ys.append(token)
        if token == vocab.eos_id:
            break
    return {"source": source, "output": vocab.decode(ys), "steps": steps}


class DateTranslator(anywidget.AnyWidget):
    """Type a date, watch chapter 8's trained model translate it, in the page.

    ``DateTranslator(model, vocab=DATE_VOCAB, example="2019-03-07", max_len=20)``:
    ``model`` a trained `lib.Transformer` (sinusoidal positions, ReLU; its exported
    weights must fit MAX_EXPORT_BYTES). Synced: ``source`` (what the box holds; set
    it from Python to change it), ``weights``/``weight_layout`` (`export_weights`),
    ``config`` (sizes, vocabulary, ids), ``example`` (the stored run of ``source``
    with `date_steps` on the rounded model, without logits: the first paint).
    Display it with ``translator`` or ``display(translator)``.
    """

    _esm = _JS_PATH.read_text(encoding="utf-8")

    source = traitlets.Unicode("").tag(sync=True)
    weights = traitlets.Unicode("").tag(sync=True)
    weight_layout = traitlets.List().tag(sync=True)  # not `layout`: every DOMWidget has one
    config = traitlets.Dict().tag(sync=True)
    example = traitlets.Dict().tag(sync=True)

    def __init__(self, model, vocab=None, example: str = "2019-03-07", max_len: int = 20, top_k: int = 5):
        from lib._checks import require_positive_int
        from lib.train.dates import DATE_VOCAB

        _check_model(model)
        vocab = DATE_VOCAB if vocab is None else vocab
        if not hasattr(vocab, "itos") or len(vocab) != model.config.tgt_vocab_size:
            raise ValueError(f"vocab must be the model's CharVocab of {model.config.tgt_vocab_size} tokens")
        require_positive_int("max_len", max_len)
        require_positive_int("top_k", top_k)
        if max_len + 1 > model.config.max_len:
            raise ValueError(f"max_len={max_len} needs positions up to {max_len}, the model has {model.config.max_len}")
        if not isinstance(example, str) or not example or len(example) > MAX_SOURCE:
            raise ValueError(f"example must be a non-empty str of at most {MAX_SOURCE} characters, got {example!r}")
        vocab.encode(example)  # a ValueError naming the characters outside the vocabulary
        weights, layout = export_weights(model)
        self.model = rounded_model(model)
        self.vocab, self.max_len, self.top_k = vocab, max_len, top_k
        c = model.config
        names = {vocab.pad_id: "<pad>", vocab.bos_id: "<bos>", vocab.eos_id: "<eos>"}
        config = {
            "d_model": c.d_model, "n_heads": c.n_heads, "n_layers": c.n_layers, "d_ff": c.d_ff,
            "norm_first": c.norm_first, "eps": c.layer_norm_eps, "scale_embedding": c.scale_embedding,
            "itos": [names.get(i, s) for i, s in enumerate(vocab.itos)],
            "pad_id": vocab.pad_id, "bos_id": vocab.bos_id, "eos_id": vocab.eos_id,
            "max_len": max_len, "top_k": top_k, "max_source": MAX_SOURCE,
        }
        super().__init__(weights=weights, weight_layout=layout, config=config, source=example)
        self._store_example()

    @traitlets.observe("source")
    def _source_changed(self, change) -> None:
        if hasattr(self, "model"):
            self._store_example()

    def _store_example(self) -> None:
        try:
            run = date_steps(self.model, self.source, self.vocab, self.max_len, self.top_k)
        except ValueError:  # characters the model does not know: the page says so itself
            self.example = {}
            return
        for step in run["steps"]:
            del step["logits"]  # the page shows probabilities; 42 logits a step would only add weight
        self.example = run

    def translate(self, source: str) -> dict:
        """What the page shows for ``source``, computed with `lib` (`date_steps` on the rounded model)."""
        return date_steps(self.model, source, self.vocab, self.max_len, self.top_k)

    @property
    def widget(self) -> "DateTranslator":
        """The ipywidgets object to display (every widget of the course has ``.widget``)."""
        return self
