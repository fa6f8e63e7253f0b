"""Hook points, run_with_cache, ablate_heads and compare_layers (lib/model/inspect.py, chapter 16).

The cached tensors are checked against recomputation from the model's own weights
with plain torch; compare_layers against bugs injected into a copy of a model,
each expected to be found at the sub-layer it was put in.
"""

import copy
import math
import types

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import lib
from lib.model.inspect import ablate_heads, compare_layers, hook_names, run_with_cache

V, D, H, L = 40, 32, 4, 9


def _decoder(norm_first=False, seed=0):
    torch.manual_seed(seed)
    return lib.DecoderOnlyModel(V, d_model=D, n_heads=H, n_layers=2, d_ff=64, dropout=0.0,
                                norm_first=norm_first).eval()


def _tokens(seed=1, B=3):
    return torch.randint(0, V, (B, L), generator=torch.Generator().manual_seed(seed))


def _modern(**changes):
    torch.manual_seed(0)
    cfg = dict(vocab_size=V, d_model=D, n_layers=2, n_heads=4, n_kv_heads=2, d_ff=48, norm="rms",
               norm_first=True, position="rotary", rope_base=10000.0, ffn="swiglu", bias=False,
               tie_embeddings=True, norm_eps=1e-5, max_len=64)
    cfg.update(changes)
    return lib.ModernDecoder(lib.ModernConfig(**cfg)).eval()


# --------------------------------------------------------------------------- hook points


def test_hook_names_of_lib_decoder():
    names = hook_names(_decoder())
    for i in range(2):
        for part in ("hook_resid_pre", "hook_attn_out", "hook_mlp_out", "hook_resid_post",
                     "self_attn.hook_pattern", "self_attn.hook_z"):
            assert f"layers.{i}.{part}" in names
    assert len(names) == 12


def test_state_dict_unchanged_by_hook_points():
    keys = list(_decoder().state_dict())
    assert not [k for k in keys if "hook" in k]


@pytest.mark.parametrize("norm_first", [False, True])
def test_hooks_change_no_number(norm_first):
    model, x = _decoder(norm_first), _tokens()
    with torch.no_grad():
        plain = model(x)
    out, cache = run_with_cache(model, x)
    assert torch.equal(out, plain)  # eval mode: the same textbook path, bit for bit
    assert len(cache) == 12
    assert not any(p._forward_hooks for p in model.modules())  # hooks removed afterwards


def test_train_mode_hooks_equal_fused_path():
    model, x = _decoder(), _tokens()
    model.train()  # dropout 0: the fused kernel without hooks, the textbook path with
    with torch.no_grad():
        fused = model(x)
    out, cache = run_with_cache(model, x, names=["layers.1.self_attn.hook_pattern"])
    torch.testing.assert_close(out, fused, atol=1e-5, rtol=1e-5)
    assert list(cache) == ["layers.1.self_attn.hook_pattern"]


@pytest.mark.parametrize("norm_first", [False, True])
def test_cached_pattern_recomputed_from_q_and_k(norm_first):
    model, x = _decoder(norm_first), _tokens()
    _, cache = run_with_cache(model, x)
    for i, layer in enumerate(model.layers):
        resid = cache[f"layers.{i}.hook_resid_pre"]
        a_in = layer.norm1(resid) if norm_first else resid
        attn = layer.self_attn
        q = (a_in @ attn.w_q.weight.T + attn.w_q.bias).view(3, L, H, D // H).transpose(1, 2)
        k = (a_in @ attn.w_k.weight.T + attn.w_k.bias).view(3, L, H, D // H).transpose(1, 2)
        v = (a_in @ attn.w_v.weight.T + attn.w_v.bias).view(3, L, H, D // H).transpose(1, 2)
        scores = q @ k.transpose(-1, -2) / math.sqrt(D // H)
        scores = scores.masked_fill(torch.ones(L, L).triu(1).bool(), -torch.inf)
        pattern = torch.softmax(scores, dim=-1)
        torch.testing.assert_close(cache[f"layers.{i}.self_attn.hook_pattern"], pattern)
        z = (pattern @ v).transpose(1, 2)  # (B, T, h, d_head)
        torch.testing.assert_close(cache[f"layers.{i}.self_attn.hook_z"], z)
        attn_out = z.reshape(3, L, D) @ attn.w_o.weight.T + attn.w_o.bias
        torch.testing.assert_close(cache[f"layers.{i}.hook_attn_out"], attn_out)
        mid = layer.norm1(resid + attn_out) if not norm_first else resid + attn_out
        mlp = layer.feed_forward(mid if not norm_first else layer.norm2(mid))
        torch.testing.assert_close(cache[f"layers.{i}.hook_mlp_out"], mlp)
        post = layer.norm2(mid + mlp) if not norm_first else mid + mlp
        torch.testing.assert_close(cache[f"layers.{i}.hook_resid_post"], post)


def test_a_hook_can_replace_the_pattern():
    model, x = _decoder(), _tokens()
    point = model.layers[0].self_attn.hook_pattern
    uniform = torch.ones(L, L).tril()
    uniform = uniform / uniform.sum(-1, keepdim=True)
    handle = point.register_forward_hook(lambda m, i, o: uniform.expand_as(o).clone())
    try:
        with torch.no_grad():
            hooked = model(x)
    finally:
        handle.remove()
    with torch.no_grad():
        plain = model(x)
    assert not torch.allclose(hooked, plain, atol=1e-3)


def test_encoder_decoder_layers_have_hooks():
    torch.manual_seed(0)
    model = lib.Transformer(V, V, d_model=D, n_heads=H, n_layers=1, d_ff=64, dropout=0.0).eval()
    src, tgt = _tokens(2), _tokens(3)
    with torch.no_grad():
        plain = model(src, tgt)
    out, cache = run_with_cache(model, src, tgt)
    assert torch.equal(out, plain)
    assert "decoder_layers.0.hook_cross_attn_out" in cache
    assert cache["decoder_layers.0.cross_attn.hook_pattern"].shape == (3, H, L, L)


# --------------------------------------------------------------------------- ablation


def test_ablate_heads_equals_zeroed_output_columns():
    model, x = _decoder(), _tokens()
    heads = [(0, 1), (1, 3), (1, 0)]
    with torch.no_grad(), ablate_heads(model, heads):
        ablated = model(x)
    assert not any(p._forward_hooks for p in model.modules())
    surgery = copy.deepcopy(model)
    d = D // H
    with torch.no_grad():
        for layer, h in heads:  # W_O's columns that read head h
            surgery.layers[layer].self_attn.w_o.weight[:, h * d:(h + 1) * d] = 0.0
        want = surgery(x)
        plain = model(x)
    torch.testing.assert_close(ablated, want)
    assert not torch.allclose(ablated, plain, atol=1e-3)


def test_ablate_heads_in_modern_decoder_equals_zeroed_columns():
    model, x = _modern(), _tokens()
    with torch.no_grad(), ablate_heads(model, [(1, 2)]):
        ablated = model(x)
    surgery = copy.deepcopy(model)
    d = D // 4
    with torch.no_grad():
        surgery.blocks[1].attn.w_o.weight[:, 2 * d:3 * d] = 0.0
        want = surgery(x)
    torch.testing.assert_close(ablated, want)


def test_mean_ablation_equals_the_mean_folded_into_w_o():
    """mean_over: head h outputs its mean z over other inputs, the same as W_O without
    h's columns plus those columns times the mean, added as a bias."""
    model, x = _decoder(), _tokens()
    other = _tokens(seed=7, B=5)
    heads = [(1, 3), (0, 1)]
    with torch.no_grad(), ablate_heads(model, heads, mean_over=other):
        ablated = model(x)
    _, cache = run_with_cache(model, other)
    surgery = copy.deepcopy(model)
    d = D // H
    with torch.no_grad():
        for layer, h in heads:
            mean = cache[f"layers.{layer}.self_attn.hook_z"][:, :, h, :].mean(dim=(0, 1))
            w_o = surgery.layers[layer].self_attn.w_o
            cols = w_o.weight[:, h * d:(h + 1) * d]
            w_o.bias += cols @ mean
            cols.zero_()
        want = surgery(x)
        with ablate_heads(model, heads):
            zeroed = model(x)
    torch.testing.assert_close(ablated, want)
    assert not torch.allclose(ablated, zeroed, atol=1e-4)  # the mean is not zero
    assert not any(p._forward_hooks for p in model.modules())
    with pytest.raises(TypeError, match="mean_over"):
        with ablate_heads(model, heads, mean_over=other.float()):
            pass


def test_bad_input():
    model = _decoder()
    with pytest.raises(ValueError, match="names"):
        run_with_cache(model, _tokens(), names=["blocks.0.nothing"])
    with pytest.raises(TypeError, match="model"):
        run_with_cache(lambda x: x, _tokens())
    with pytest.raises(ValueError, match="heads"):
        with ablate_heads(model, [(0, H)]):
            pass
    with pytest.raises(TypeError, match="heads"):
        with ablate_heads(model, [0, 1]):
            pass
    with pytest.raises(ValueError, match="layer"):
        with ablate_heads(model, [(5, 0)]):
            pass
    with pytest.raises(ValueError, match="atol"):
        compare_layers(model, model, _tokens(), atol=-1.0)
    with pytest.raises(TypeError, match="inputs"):
        compare_layers(model, model, [1, 2])


# --------------------------------------------------------------------------- compare_layers


def test_equal_pair_reports_nothing():
    model = _decoder()
    assert compare_layers(copy.deepcopy(model), model, _tokens()) is None
    modern = _modern()
    assert compare_layers(copy.deepcopy(modern), modern, _tokens()) is None


def test_training_mode_restored():
    model = _decoder().train()
    compare_layers(copy.deepcopy(model), model, _tokens())
    assert model.training


def _check(diff, name, atol=1e-5):
    assert diff is not None, "a bug went unnoticed"
    assert diff.name == name, str(diff)
    assert diff.max_abs_diff > atol
    assert name in str(diff)


def test_layer_norm_eps():
    model = _decoder()
    bug = copy.deepcopy(model)
    bug.layers[1].norm2.eps = 1e-1
    _check(compare_layers(bug, model, _tokens()), "layers.1.norm2")


def _unscaled_forward(self, query, key, value, mask=None, *, cache=None):
    """lib's MultiHeadAttention without the 1/sqrt(d_k) (hook points kept)."""
    B, m, _ = query.shape
    q, k, v = (self._split(w(t)) for w, t in ((self.w_q, query), (self.w_k, key), (self.w_v, value)))
    scores = (q @ k.transpose(-2, -1)).masked_fill(~mask, float("-inf"))
    weights = self.hook_pattern(scores.softmax(-1))
    z = self.hook_z((weights @ v).transpose(1, 2))
    return self.w_o(z.reshape(B, m, self.d_model))


def test_missing_scale():
    model = _decoder()
    bug = copy.deepcopy(model)
    bug.layers[1].self_attn.forward = types.MethodType(_unscaled_forward, bug.layers[1].self_attn)
    _check(compare_layers(bug, model, _tokens()), "layers.1.self_attn.hook_pattern")


def test_mask_off_by_one():
    model = _decoder()
    bug = copy.deepcopy(model)

    def forward(self, tokens):  # each token also sees the next one
        n = tokens.shape[1]
        return self._run(tokens, torch.ones(n, n, dtype=torch.bool).tril(1))

    bug.forward = types.MethodType(forward, bug)
    _check(compare_layers(bug, model, _tokens()), "layers.0.self_attn.hook_pattern")


def test_untied_output():
    model = _decoder()
    bug = copy.deepcopy(model)
    torch.manual_seed(5)
    bug.head = nn.Linear(D, V, bias=False)  # a fresh head, not the embedding matrix
    _check(compare_layers(bug, model, _tokens()), "head")


def test_rope_pairing():
    model = _modern()
    bug = copy.deepcopy(model)
    bug.blocks[0].attn.pairing = "half"
    _check(compare_layers(bug, model, _tokens()), "blocks.0.attn.hook_pattern")


def test_gqa_repeat_order():
    model = _modern()
    bug = copy.deepcopy(model)
    attn = bug.blocks[1].attn

    def textbook(self, q, k, v, offset, n_keys):  # tile the kv heads instead of grouping
        group = self.n_heads // self.n_kv_heads
        k, v = k.repeat(1, group, 1, 1), v.repeat(1, group, 1, 1)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_head)
        scores = scores.masked_fill(~self._mask(q.shape[-2], n_keys, offset, q.device), -torch.inf)
        return self.hook_pattern(scores.softmax(-1)) @ v

    attn._textbook = types.MethodType(textbook, attn)
    attn.hook_pattern.register_forward_hook(lambda m, i, o: None)  # the textbook path even alone
    with torch.no_grad():  # the injected bug changes the logits
        assert not torch.allclose(bug(_tokens()), model(_tokens()), atol=1e-4)
    _check(compare_layers(bug, model, _tokens()), "blocks.1.attn.hook_pattern")


def test_rms_norm_eps_in_modern():
    model = _modern()
    bug = copy.deepcopy(model)
    bug.blocks[0].norm2.eps = 0.5
    _check(compare_layers(bug, model, _tokens()), "blocks.0.norm2")


def test_tolerance_respected():
    model = _decoder()
    bug = copy.deepcopy(model)
    with torch.no_grad():
        bug.layers[0].self_attn.w_v.weight.add_(1e-7)
    assert compare_layers(bug, model, _tokens(), atol=1e-4) is None
    diff = compare_layers(bug, model, _tokens(), atol=1e-9)
    assert diff is not None and diff.name == "layers.0.self_attn.w_v"


def test_functions_sharing_modules():
    torch.manual_seed(0)
    a, b = nn.Linear(4, 4), nn.Linear(4, 4)
    x = torch.randn(2, 4)
    ref = lambda x: b(torch.relu(a(x)))  # noqa: E731
    swapped = lambda x: a(torch.relu(b(x)))  # noqa: E731
    diff = compare_layers(swapped, ref, x, modules={"a": a, "b": b})
    assert diff is not None and diff.name == "a"
    assert compare_layers(lambda x: b(F.relu(a(x))), ref, x, modules={"a": a, "b": b}) is None


# --------------------------------------------------------------------------- chapter 7's checkers


def test_encoder_layer_checker_names_the_first_differing_sub_layer():
    def doubled_ffn(x, attn, ffn, norm1, norm2, mask=None):  # an unnamed slip in the FFN's sum
        x = norm1(x + attn(x, x, x, mask=mask))
        return norm2(x + 2 * ffn(x))

    verdict = lib.check_post_ln_encoder_layer(doubled_ffn)
    assert not verdict and verdict.mistake is None
    assert "Where (lib.compare_layers, case 0): first difference at norm2:" in verdict.message

    def scaled_input(x, attn, ffn, norm1, norm2, mask=None):
        y = norm1(x)
        x = x + attn(y * 1.5, y * 1.5, y * 1.5, mask=mask)
        return x + ffn(norm2(x))

    verdict = lib.check_pre_ln_encoder_layer(scaled_input)
    assert not verdict and "first difference at attn.w_q" in verdict.message


def test_decoder_checker_names_the_layer_and_sub_layer():
    def second_layer_ffn_halved(y, encoder_outputs, layers, tgt_mask, memory_mask):
        memory = encoder_outputs[-1]
        for i, m in enumerate(layers):
            y = m.norm1(y + m.self_attn(y, y, y, mask=tgt_mask))
            y = m.norm2(y + m.cross_attn(y, memory, memory, mask=memory_mask))
            y = m.norm3(y + (0.5 if i == 1 else 1.0) * m.feed_forward(y))
        return y

    verdict = lib.check_post_ln_decoder(second_layer_ffn_halved)
    assert not verdict and verdict.mistake is None
    assert "first difference at layers[1].norm3" in verdict.message


def test_named_mistakes_and_passes_get_no_location():
    def post_ln(x, attn, ffn, norm1, norm2, mask=None):
        x = norm1(x + attn(x, x, x, mask=mask))
        return norm2(x + ffn(x))

    def pre_ln_order(x, attn, ffn, norm1, norm2, mask=None):
        y = norm1(x)
        x = x + attn(y, y, y, mask=mask)
        return x + ffn(norm2(x))

    assert "compare_layers" not in lib.check_post_ln_encoder_layer(post_ln).message
    verdict = lib.check_post_ln_encoder_layer(pre_ln_order)
    assert verdict.mistake is not None and "compare_layers" not in verdict.message


@pytest.mark.parametrize("pairing", ["interleaved", "half"])
def test_modern_pattern_recomputed_from_rotated_q_and_repeated_k(pairing):
    """The rotary, grouped-query ModernDecoder (SmolLM2's class): each head's cached pattern
    equals softmax of its rotated query against the rotated key of its key/value group,
    rebuilt here by brute force (explicit 2x2 rotations, head j reading kv head j // 2)."""
    torch.manual_seed(21)
    n_heads, n_kv, d_head, T = 4, 2, 8, 9
    config = lib.ModernConfig(vocab_size=40, d_model=n_heads * d_head, n_layers=2,
                              n_heads=n_heads, n_kv_heads=n_kv, d_ff=48, rope_base=100.0,
                              rope_pairing=pairing)
    model = lib.ModernDecoder(config).eval()
    tokens = torch.randint(0, 40, (2, T), generator=torch.Generator().manual_seed(22))
    with torch.no_grad():
        _, cache = run_with_cache(model, tokens)
    for i, block in enumerate(model.blocks):
        h = block.norm1(cache[f"blocks.{i}.hook_resid_pre"])
        q = (h @ block.attn.w_q.weight.T).view(2, T, n_heads, d_head)
        k = (h @ block.attn.w_k.weight.T).view(2, T, n_kv, d_head)
        rotated = []
        for x in (q, k):
            out = torch.empty_like(x)
            for p in range(T):
                for pair in range(d_head // 2):
                    a_i, b_i = (2 * pair, 2 * pair + 1) if pairing == "interleaved" else (
                        pair, pair + d_head // 2)
                    theta = p * 100.0 ** (-2 * pair / d_head)
                    c, s = math.cos(theta), math.sin(theta)
                    a, b = x[:, p, :, a_i], x[:, p, :, b_i]
                    out[:, p, :, a_i], out[:, p, :, b_i] = a * c - b * s, a * s + b * c
            rotated.append(out)
        q, k = rotated
        for j in range(n_heads):
            scores = q[:, :, j] @ k[:, :, j // (n_heads // n_kv)].transpose(-1, -2)
            scores = (scores / math.sqrt(d_head)).masked_fill(
                torch.ones(T, T).triu(1).bool(), -torch.inf)
            torch.testing.assert_close(cache[f"blocks.{i}.attn.hook_pattern"][:, j],
                                       scores.softmax(-1), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("make", [
    lambda: lib.ModernConfig().build(),
    lambda: lib.DecoderOnlyModel(30, d_model=16, n_heads=2, n_layers=2, d_ff=32, dropout=0.0),
])
def test_no_hook_point_is_called_while_none_is_attached(monkeypatch, make):
    """Chapter 16: with no hook attached the models do not even call their hook points;
    with one attached, every hook point of that block runs."""
    from lib.model.hooks import HookPoint

    calls = []
    original = HookPoint.forward
    monkeypatch.setattr(HookPoint, "forward", lambda self, x: calls.append(self) or original(self, x))
    model = make().eval()
    tokens = torch.randint(0, 30, (1, 6), generator=torch.Generator().manual_seed(23))
    with torch.no_grad():
        model(tokens)
        assert calls == []
        layers = getattr(model, "blocks", None) or model.layers
        layers[1].hook_mlp_out.register_forward_hook(lambda m, i, o: None)
        model(tokens)
    assert layers[1].hook_mlp_out in calls and layers[1].hook_resid_post in calls
    assert not any(p is layers[0].hook_mlp_out for p in calls)
