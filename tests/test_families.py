"""lib.model.families and lib.teach.diagram (chapter 7)."""

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402
import torch  # noqa: E402

import lib  # noqa: E402
from lib import module_call_order  # noqa: E402
from lib import DecoderOnlyModel, EncoderOnlyModel  # noqa: E402

V = 30


def test_shapes():
    tokens = torch.randint(1, V, (3, 7))
    assert EncoderOnlyModel(V).eval()(tokens).shape == (3, 7, V)
    assert DecoderOnlyModel(V).eval()(tokens).shape == (3, 7, V)


def test_decoder_only_is_causal_and_encoder_only_is_not():
    torch.manual_seed(0)
    tokens = torch.randint(1, V, (2, 6))
    changed = tokens.clone()
    changed[:, 4] = (changed[:, 4] % (V - 1)) + 1  # a different token at position 4
    for model, causal in ((DecoderOnlyModel(V).eval(), True), (EncoderOnlyModel(V).eval(), False)):
        a, b = model(tokens), model(changed)
        assert torch.allclose(a[:, :4], b[:, :4], atol=1e-6) == causal
        assert not torch.allclose(a[:, 4:], b[:, 4:], atol=1e-6)


def test_padding_keys_are_ignored():
    torch.manual_seed(1)
    model = EncoderOnlyModel(V).eval()
    a = torch.tensor([[5, 6, 7, 0, 0]])
    b = torch.tensor([[5, 6, 7, 0, 9]])  # padding replaced by a real token: changes unpadded outputs
    c = torch.tensor([[5, 6, 7, 0, 0, 0]])  # more padding: must not
    assert torch.allclose(model(a, pad_id=0)[:, :3], model(c, pad_id=0)[:, :3], atol=1e-5)
    assert not torch.allclose(model(a, pad_id=0)[:, :3], model(b, pad_id=0)[:, :3], atol=1e-5)


def test_tied_head_and_parameter_count():
    d, ff, L = 32, 64, 3
    model = DecoderOnlyModel(V, d_model=d, n_heads=4, n_layers=L, d_ff=ff, max_len=16)
    assert model.head.weight is model.embed.embedding.weight
    per_layer = (4 * d * d + 4 * d) + (2 * d * ff + ff + d) + 2 * 2 * d
    assert sum(p.numel() for p in model.parameters()) == V * d + 16 * d + L * per_layer


def test_bad_input():
    with pytest.raises(ValueError, match="not divisible"):
        EncoderOnlyModel(V, d_model=30, n_heads=4)
    with pytest.raises(ValueError, match="token id 30"):
        DecoderOnlyModel(V)(torch.tensor([[1, 30]]))
    with pytest.raises(ValueError, match="positional"):
        DecoderOnlyModel(V, positional="rotary")
    with pytest.raises(TypeError, match="pad_id"):
        EncoderOnlyModel(V)(torch.tensor([[1, 2]]), pad_id="0")


@pytest.mark.parametrize("norm_first", [False, True])
def test_call_order_follows_the_norm_order(norm_first):
    model = lib.Transformer(V, V, d_model=16, n_heads=2, n_layers=1, d_ff=32, norm_first=norm_first).eval()
    order = module_call_order(model, torch.tensor([[1, 2, 3]]), torch.tensor([[1, 2]]))
    layer = [n.split(".")[-1] for n in order if n.startswith("decoder_layers.0.") and "dropout" not in n]
    layer = [n for n in layer if n in ("self_attn", "cross_attn", "feed_forward", "norm1", "norm2", "norm3")]
    if norm_first:
        assert layer == ["norm1", "self_attn", "norm2", "cross_attn", "norm3", "feed_forward"]
    else:
        assert layer == ["self_attn", "norm1", "cross_attn", "norm2", "feed_forward", "norm3"]
    assert order.index("encoder_layers.0") < order.index("decoder_layers.0") < order.index("generator")
