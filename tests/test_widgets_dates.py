"""lib/widgets/dates.py: chapter 8's date model exported into a widget that decodes in the page.

References: torch's own float16 rounding (Tensor.half), lib.greedy_decode and
lib.cross_attention_maps, the model's teacher-forced forward pass. The JavaScript that
runs the exported weights is tested by tests/js/widgets.test.mjs (tests/test_widgets_js.py)
and, on the built page, by tests/browser/test_site.py.
"""

import base64

import numpy as np
import pytest
import torch

import lib
from lib import DATE_VOCAB
from lib.widgets.dates import MAX_EXPORT_BYTES, DateTranslator, date_steps, export_weights, rounded_model


def date_model(seed=0, d_model=16, n_layers=2, **kw):
    torch.manual_seed(seed)
    config = lib.TransformerConfig(src_vocab_size=len(DATE_VOCAB), tgt_vocab_size=len(DATE_VOCAB), d_model=d_model,
                                   n_heads=2, n_layers=n_layers, d_ff=2 * d_model, max_len=64, **kw)
    return config.build().eval()


@pytest.fixture(scope="module")
def model():
    return date_model()


def test_export_is_every_weight_as_float16_in_state_dict_order(model):
    text, layout = export_weights(model)
    values = np.frombuffer(base64.b64decode(text), dtype="<f2")
    state = model.state_dict()
    assert [name for name, _ in layout] == [k for k in state if not k.endswith("_pos.pe")]
    offset = 0
    for name, shape in layout:
        t = state[name]
        assert list(t.shape) == shape
        got = torch.from_numpy(values[offset : offset + t.numel()].astype(np.float32)).view(t.shape)
        assert torch.equal(got, t.half().float()), name
        offset += t.numel()
    assert offset == len(values)


def test_chapter_8_model_fits_the_page_budget():
    ch8 = lib.TransformerConfig(src_vocab_size=42, tgt_vocab_size=42, d_model=64, n_heads=4, n_layers=2,
                                d_ff=256, dropout=0.1, max_len=64).build()
    text, _ = export_weights(ch8)
    assert 600_000 < len(text) <= MAX_EXPORT_BYTES  # 241,536 weights, 2 bytes each, base64


def test_a_model_too_big_for_the_page_is_refused():
    big = lib.TransformerConfig(src_vocab_size=42, tgt_vocab_size=42, d_model=128, n_heads=4, n_layers=2,
                                d_ff=512, max_len=64).build()
    with pytest.raises(ValueError, match="budget"):
        export_weights(big)


def test_rounded_model_rounds_the_weights_and_leaves_the_model_alone(model):
    before = {k: v.clone() for k, v in model.state_dict().items()}
    twin = rounded_model(model)
    for name, t in model.state_dict().items():
        assert torch.equal(t, before[name])
        expected = t if name.endswith("_pos.pe") else t.half().float()
        assert torch.equal(twin.state_dict()[name], expected), name


@pytest.mark.parametrize("source", ["2019-03-07", "1950-1-1", "2150-12-12"])
def test_date_steps_is_greedy_decoding_with_its_logits_and_cross_attention(model, source):
    run = date_steps(model, source, DATE_VOCAB, max_len=20, top_k=5)
    src = torch.tensor([DATE_VOCAB.encode(source)])
    greedy = lib.greedy_decode(model, src, 20, DATE_VOCAB.bos_id, DATE_VOCAB.eos_id)[0].tolist()
    tokens = [s["token"] for s in run["steps"]]
    assert tokens == greedy[: len(tokens)] and run["output"] == DATE_VOCAB.decode(greedy)
    # every step's logits: the teacher-forced forward pass over BOS + the tokens chosen
    tgt = torch.tensor([[DATE_VOCAB.bos_id] + tokens[:-1]])
    with torch.no_grad():
        logits = model(src, tgt, tgt_mask=lib.causal_mask(tgt.shape[1])[None, None])[0]
    got = torch.tensor([s["logits"] for s in run["steps"]], dtype=torch.float64)
    torch.testing.assert_close(got, logits.double(), atol=1e-5, rtol=0)
    for s, row in zip(run["steps"], logits.double().softmax(-1)):
        probs, ids = row.topk(5)
        assert [i for i, _ in s["top"]] == ids.tolist()
        assert [p for _, p in s["top"]] == pytest.approx(probs.tolist(), abs=1e-6)
    if run["steps"][-1]["token"] == DATE_VOCAB.eos_id:  # cross_attention_maps reads BOS + output (+ EOS row)
        maps = lib.cross_attention_maps(model, source, run["output"], DATE_VOCAB)  # (h, m, n)
        cross = torch.tensor([s["cross"] for s in run["steps"]], dtype=torch.float64).transpose(0, 1)
        torch.testing.assert_close(cross, maps.double(), atol=1e-6, rtol=0)


def test_widget_stores_the_example_run_and_follows_its_source(model):
    w = DateTranslator(model, example="2019-03-07", max_len=20)
    expected = date_steps(w.model, "2019-03-07", DATE_VOCAB, 20, 5)
    assert w.example["output"] == expected["output"] and w.source == "2019-03-07"
    assert [s["token"] for s in w.example["steps"]] == [s["token"] for s in expected["steps"]]
    assert all("logits" not in s for s in w.example["steps"])  # the page does not need them
    assert w.config["itos"][:3] == ["<pad>", "<bos>", "<eos>"] and w.config["max_len"] == 20
    w.source = "1999-12-31"
    assert w.example["source"] == "1999-12-31"
    w.source = "1999/12/31"  # characters the model does not know: nothing stored, the page says why
    assert w.example == {}
    assert w.widget is w and w.translate("2019-3-7")["source"] == "2019-3-7"


def test_bad_arguments_name_themselves(model):
    with pytest.raises(TypeError, match="model must be a lib.Transformer"):
        DateTranslator(torch.nn.Linear(2, 2))
    with pytest.raises(ValueError, match="outside the vocabulary"):
        DateTranslator(model, example="2019/03/07")
    with pytest.raises(ValueError, match="example must be"):
        DateTranslator(model, example="")
    with pytest.raises(ValueError, match="max_len=80"):
        DateTranslator(model, max_len=80)
    with pytest.raises(TypeError, match="max_len must be"):
        DateTranslator(model, max_len=2.5)
    with pytest.raises(ValueError, match="positional"):
        DateTranslator(date_model(positional="learned"))
    with pytest.raises(ValueError, match="vocab"):
        DateTranslator(model, vocab=lib.CharVocab("abc"))
