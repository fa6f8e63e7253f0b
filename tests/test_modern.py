"""lib.model.modern (chapter 14) against independent references: F.rms_norm, Hugging Face's
Llama layers and model built from a tiny LlamaConfig (never from a hub), brute force."""

import math

import pytest
import torch
import torch.nn.functional as F
from transformers import LlamaConfig
from transformers.models.llama import modeling_llama as hf

import lib
from lib.model.modern import (
    GroupedQueryAttention,
    ModernConfig,
    ModernDecoder,
    RMSNorm,
    SwiGLU,
    apply_rotary,
    kv_cache_bytes,
    rotary_tables,
)

D, H, G, L, V, FF = 32, 4, 2, 2, 61, 48  # d_model, heads, kv heads, layers, vocab, d_ff
D_HEAD = D // H


def llama_config(**kw):
    base = dict(vocab_size=V, hidden_size=D, intermediate_size=FF, num_hidden_layers=L,
                num_attention_heads=H, num_key_value_heads=G, rms_norm_eps=1e-5,
                rope_theta=10000.0, max_position_embeddings=64, tie_word_embeddings=True,
                attention_bias=False, mlp_bias=False)
    base.update(kw)
    config = LlamaConfig(**base)
    config._attn_implementation = "eager"
    return config


def to_half_order(w, n_heads):
    """Rows of W_Q / W_K laid out for interleaved pairs -> the half-split layout:
    in each head, output feature 2i goes to i and 2i + 1 to i + d_head/2."""
    out, d_in = w.shape
    d_head = out // n_heads
    return w.view(n_heads, d_head // 2, 2, d_in).transpose(1, 2).reshape(out, d_in)


def causal_additive(T):
    return torch.full((T, T), float("-inf")).triu(1)[None, None]


# ---------------------------------------------------------------- RMSNorm


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_rmsnorm_equals_functional_and_llama(dtype):
    torch.manual_seed(0)
    norm = RMSNorm(D, eps=1e-5).to(dtype)
    with torch.no_grad():
        norm.weight.copy_(torch.randn(D))
    x = torch.randn(3, 5, D, dtype=dtype) * 3 + 1
    ref = F.rms_norm(x, (D,), norm.weight, 1e-5)
    tol = 1e-6 if dtype == torch.float32 else 1e-12
    assert (norm(x) - ref).abs().max() < tol
    llama = hf.LlamaRMSNorm(D, eps=1e-5).to(dtype)
    llama.weight.data.copy_(norm.weight)
    assert (norm(x) - llama(x)).abs().max() < 1e-6  # HF computes the root in float32
    # not LayerNorm: the mean is not subtracted (x has mean about 1)
    assert (norm(x) - F.layer_norm(x, (D,), norm.weight, None, 1e-5)).abs().max() > 0.1


def test_rmsnorm_bias_and_eps_inside_the_root():
    norm = RMSNorm(4, eps=0.5, bias=True)
    with torch.no_grad():
        norm.bias.fill_(2.0)
    x = torch.tensor([[1.0, -1.0, 1.0, -1.0]])  # mean square 1
    assert torch.allclose(norm(x), x / math.sqrt(1.5) + 2.0)


# ---------------------------------------------------------------- rotary


def test_rotary_tables_equal_llama_rotary_embedding():
    config = llama_config(rope_theta=500.0)
    rope = hf.LlamaRotaryEmbedding(config)
    x = torch.zeros(1, 12, D)
    cos_hf, sin_hf = rope(x, torch.arange(3, 15)[None])  # (1, 12, d_head), halves repeated
    cos, sin = rotary_tables(12, D_HEAD, base=500.0, offset=3)
    assert cos.shape == sin.shape == (12, D_HEAD // 2) and cos.dtype == torch.float32
    assert (cos - cos_hf[0, :, : D_HEAD // 2]).abs().max() < 1e-5
    assert (sin - sin_hf[0, :, : D_HEAD // 2]).abs().max() < 1e-5
    assert torch.equal(cos_hf[0, :, : D_HEAD // 2], cos_hf[0, :, D_HEAD // 2 :])


def test_interleaved_pairing_equals_explicit_rotation_matrices():
    torch.manual_seed(1)
    x = torch.randn(2, 3, 7, 6, dtype=torch.float64)
    cos, sin = rotary_tables(7, 6, base=100.0)
    out = apply_rotary(x, cos.double(), sin.double(), "interleaved")
    for p in range(7):
        for i in range(3):
            theta = p * 100.0 ** (-2 * i / 6)
            R = torch.tensor([[math.cos(theta), -math.sin(theta)],
                              [math.sin(theta), math.cos(theta)]], dtype=torch.float64)
            pair = x[..., p, 2 * i : 2 * i + 2]  # (2, 3, 2)
            assert torch.allclose(out[..., p, 2 * i : 2 * i + 2], pair @ R.T, atol=1e-6)


def test_half_pairing_equals_hugging_face_rotate_half():
    torch.manual_seed(2)
    q, k = torch.randn(2, H, 9, D_HEAD), torch.randn(2, G, 9, D_HEAD)
    cos, sin = rotary_tables(9, D_HEAD)
    cos2, sin2 = torch.cat([cos, cos], -1)[None], torch.cat([sin, sin], -1)[None]
    q_hf, k_hf = hf.apply_rotary_pos_emb(q, k, cos2, sin2)
    assert (apply_rotary(q, cos, sin, "half") - q_hf).abs().max() < 1e-6
    assert (apply_rotary(k, cos, sin, "half") - k_hf).abs().max() < 1e-6
    # the wrong pairing is a different function: a test comparing with HF would fail
    assert (apply_rotary(q, cos, sin, "interleaved") - q_hf).abs().max() > 0.1


def test_pairings_agree_after_the_feature_permutation():
    torch.manual_seed(3)
    x = torch.randn(1, 2, 5, 8)
    cos, sin = rotary_tables(5, 8)
    perm = torch.cat([torch.arange(0, 8, 2), torch.arange(1, 8, 2)])  # 2i -> i, 2i+1 -> i+4
    assert torch.allclose(apply_rotary(x, cos, sin, "interleaved")[..., perm],
                          apply_rotary(x[..., perm], cos, sin, "half"), atol=1e-6)


def test_rotary_scores_depend_on_the_offset_only():
    torch.manual_seed(4)
    q, k = torch.randn(8, dtype=torch.float64), torch.randn(8, dtype=torch.float64)

    def score(p, s):
        cq, sq = rotary_tables(1, 8, offset=p)
        ck, sk = rotary_tables(1, 8, offset=s)
        rq = apply_rotary(q[None], cq.double(), sq.double())
        rk = apply_rotary(k[None], ck.double(), sk.double())
        return (rq * rk).sum().item()

    assert abs(score(3, 1) - score(10, 8)) < 1e-5 and abs(score(3, 1) - score(1, 3)) > 1e-3


# ---------------------------------------------------------------- SwiGLU


def test_swiglu_equals_llama_mlp():
    torch.manual_seed(5)
    mine = SwiGLU(D, FF)
    ref = hf.LlamaMLP(llama_config())
    ref.gate_proj.weight.data.copy_(mine.w_gate.weight)
    ref.up_proj.weight.data.copy_(mine.w_up.weight)
    ref.down_proj.weight.data.copy_(mine.w_down.weight)
    x = torch.randn(2, 5, D)
    assert (mine(x) - ref(x)).abs().max() < 1e-6
    # gate and up swapped is a different function
    assert (mine.w_down(mine.w_gate(x) * F.silu(mine.w_up(x))) - ref(x)).abs().max() > 1e-3
    assert sum(p.numel() for p in mine.parameters()) == 3 * D * FF


# ---------------------------------------------------------------- grouped-query attention


def brute_force_gqa(attn, x, repeat="interleave"):
    """Each query head j, one at a time, against key/value head j // group (or j % G for
    the wrong order), rotary applied by explicit 2x2 rotations, a loop over positions."""
    B, T, _ = x.shape
    d, h, g = attn.d_head, attn.n_heads, attn.n_kv_heads
    q = attn.w_q(x).view(B, T, h, d)
    k = attn.w_k(x).view(B, T, g, d)
    v = attn.w_v(x).view(B, T, g, d)
    if attn.rope_base is not None:
        def rot(t):
            out = t.clone()
            for p in range(T):
                for i in range(d // 2):
                    th = p * attn.rope_base ** (-2 * i / d)
                    a, b = t[:, p, :, 2 * i], t[:, p, :, 2 * i + 1]
                    out[:, p, :, 2 * i] = a * math.cos(th) - b * math.sin(th)
                    out[:, p, :, 2 * i + 1] = a * math.sin(th) + b * math.cos(th)
            return out
        q, k = rot(q), rot(k)
    heads = []
    for j in range(h):
        kv = j // (h // g) if repeat == "interleave" else j % g
        z = torch.zeros(B, T, d, dtype=x.dtype)
        for t in range(T):
            s = (q[:, t, j, None, :] * k[:, : t + 1, kv, :]).sum(-1) / math.sqrt(d)  # (B, t+1)
            z[:, t] = (s.softmax(-1)[..., None] * v[:, : t + 1, kv, :]).sum(1)
        heads.append(z)
    return attn.w_o(torch.cat(heads, dim=-1))


@pytest.mark.parametrize("rope", [None, 10000.0])
@pytest.mark.parametrize("n_kv", [1, 2, 4])
def test_gqa_equals_brute_force(rope, n_kv):
    torch.manual_seed(6)
    attn = GroupedQueryAttention(D, H, n_kv, rope_base=rope).double()
    x = torch.randn(2, 6, D, dtype=torch.float64)
    ref = brute_force_gqa(attn, x)
    assert (attn(x) - ref).abs().max() < 1e-10  # fused path
    hook = attn.hook_pattern.register_forward_hook(lambda m, i, o: None)
    assert (attn(x) - ref).abs().max() < 1e-10  # textbook path
    hook.remove()
    if n_kv not in (1, H):  # with 2 groups of 2, the wrong repeat order is a different model
        wrong = brute_force_gqa(attn, x, repeat="tile")
        assert (attn(x) - wrong).abs().max() > 1e-3


def test_gqa_equals_llama_attention_in_both_pairings():
    torch.manual_seed(7)
    config = llama_config()
    rope = hf.LlamaRotaryEmbedding(config)
    x = torch.randn(2, 7, D)
    pos = rope(x, torch.arange(7)[None])
    results = {}
    for pairing in ("interleaved", "half"):
        mine = GroupedQueryAttention(D, H, G, rope_base=10000.0, pairing=pairing)
        ref = hf.LlamaAttention(config, layer_idx=0)
        permute = pairing == "interleaved"
        ref.q_proj.weight.data.copy_(to_half_order(mine.w_q.weight, H) if permute else mine.w_q.weight)
        ref.k_proj.weight.data.copy_(to_half_order(mine.w_k.weight, G) if permute else mine.w_k.weight)
        ref.v_proj.weight.data.copy_(mine.w_v.weight)
        ref.o_proj.weight.data.copy_(mine.w_o.weight)
        out_ref, _ = ref(x, position_embeddings=pos, attention_mask=causal_additive(7))
        assert (mine(x) - out_ref).abs().max() < 1e-5
        # the same weights under the other pairing give another attention
        other = "half" if pairing == "interleaved" else "interleaved"
        mine.pairing = other
        results[pairing] = (mine(x) - out_ref).abs().max().item()
    assert min(results.values()) > 1e-3


def test_kv_cache_holds_unrepeated_heads():
    torch.manual_seed(8)
    attn = GroupedQueryAttention(D, H, 1, rope_base=10000.0)
    cache = lib.AttentionCache()
    x = torch.randn(3, 5, D)
    steps = [attn(x[:, :2], cache), attn(x[:, 2:3], cache), attn(x[:, 3:], cache)]
    assert (torch.cat(steps, 1) - attn(x)).abs().max() < 1e-5
    assert cache.k.shape == cache.v.shape == (3, 1, 5, D_HEAD) and cache.length == 5


# ---------------------------------------------------------------- the whole model


def modern_from(config_kw=None, pairing="interleaved", seed=0):
    torch.manual_seed(seed)
    kw = dict(vocab_size=V, d_model=D, n_layers=L, n_heads=H, n_kv_heads=G, d_ff=FF,
              max_len=64, rope_pairing=pairing)
    c = ModernConfig(**{**kw, **(config_kw or {})})
    model = ModernDecoder(c)
    with torch.no_grad():  # non-trivial gains
        for block in model.blocks:
            block.norm1.weight.copy_(1 + 0.3 * torch.randn(D))
            block.norm2.weight.copy_(1 + 0.3 * torch.randn(D))
        model.final_norm.weight.copy_(1 + 0.3 * torch.randn(D))
    return model


def llama_from(model, permute: bool):
    ref = hf.LlamaForCausalLM(llama_config()).eval()
    with torch.no_grad():
        ref.model.embed_tokens.weight.copy_(model.embed.weight)
        for block, layer in zip(model.blocks, ref.model.layers):
            a, s = block.attn, layer.self_attn
            s.q_proj.weight.copy_(to_half_order(a.w_q.weight, H) if permute else a.w_q.weight)
            s.k_proj.weight.copy_(to_half_order(a.w_k.weight, G) if permute else a.w_k.weight)
            s.v_proj.weight.copy_(a.w_v.weight)
            s.o_proj.weight.copy_(a.w_o.weight)
            layer.mlp.gate_proj.weight.copy_(block.mlp.w_gate.weight)
            layer.mlp.up_proj.weight.copy_(block.mlp.w_up.weight)
            layer.mlp.down_proj.weight.copy_(block.mlp.w_down.weight)
            layer.input_layernorm.weight.copy_(block.norm1.weight)
            layer.post_attention_layernorm.weight.copy_(block.norm2.weight)
        ref.model.norm.weight.copy_(model.final_norm.weight)
    assert ref.lm_head.weight is ref.model.embed_tokens.weight
    return ref


@pytest.mark.parametrize("pairing", ["interleaved", "half"])
def test_decoder_equals_llama_for_causal_lm(pairing):
    model = modern_from(pairing=pairing).eval()
    ref = llama_from(model, permute=pairing == "interleaved")
    tokens = torch.randint(0, V, (2, 20), generator=torch.Generator().manual_seed(9))
    with torch.no_grad():
        mine, theirs = model(tokens), ref(tokens).logits
        assert (mine - theirs).abs().max() < 1e-4
        # without the row permutation (or with the wrong pairing) the logits differ
        wrong = llama_from(model, permute=pairing != "interleaved")(tokens).logits
        assert (mine - wrong).abs().max() > 1e-2


def test_cached_decode_equals_full_forward_and_bytes():
    model = modern_from({"n_kv_heads": 1}).eval()
    tokens = torch.randint(0, V, (3, 17), generator=torch.Generator().manual_seed(10))
    cache = lib.KVCache(L)
    with torch.no_grad():
        full = model(tokens)
        pieces = [model(tokens[:, :5], cache=cache)]
        pieces += [model(tokens[:, t : t + 1], cache=cache) for t in range(5, 17)]
    assert (torch.cat(pieces, 1) - full).abs().max() < 1e-5
    assert cache.length == 17 and cache.self_attn[1].k.shape == (3, 1, 17, D_HEAD)
    # 2 (K and V) x layers x kv heads x d_head x 4 bytes, per token of each sequence
    assert kv_cache_bytes(cache) == 2 * L * 1 * D_HEAD * 4 * 3 * 17
    greedy = lib.generate(model, tokens[0, :4], 10, greedy=True)
    assert torch.equal(greedy, lib.generate(model, tokens[0, :4], 10, greedy=True, use_cache=False))


def test_hook_points_and_textbook_path():
    model = modern_from().eval()
    names = dict(model.named_modules())
    for i in range(L):
        for n in ("hook_resid_pre", "attn.hook_pattern", "attn.hook_z", "hook_attn_out",
                  "hook_mlp_out", "hook_resid_post"):
            assert isinstance(names[f"blocks.{i}.{n}"], lib.model.hooks.HookPoint)
    seen = {}
    hooks = [names[f"blocks.1.{n}"].register_forward_hook(
        lambda m, i, o, n=n: seen.__setitem__(n, o)) for n in ("attn.hook_pattern", "attn.hook_z")]
    tokens = torch.randint(0, V, (2, 9), generator=torch.Generator().manual_seed(11))
    with torch.no_grad():
        hooked = model(tokens)
        for h in hooks:
            h.remove()
        assert (hooked - model(tokens)).abs().max() < 1e-5
    pattern = seen["attn.hook_pattern"]
    assert pattern.shape == (2, H, 9, 9) and seen["attn.hook_z"].shape == (2, 9, H, D_HEAD)
    assert torch.allclose(pattern.sum(-1), torch.ones(2, H, 9)) and pattern.triu(1).abs().max() == 0
    # a hook that zeroes the pattern changes the output: the hook's value is used
    h = names["blocks.0.attn.hook_pattern"].register_forward_hook(lambda m, i, o: o * 0)
    with torch.no_grad():
        assert (model(tokens) - hooked).abs().max() > 1e-3
    h.remove()


def test_old_choices_build_and_train_step():
    for kw in (dict(norm="layer", position="learned", ffn="gelu", bias=True, n_kv_heads=H),
               dict(norm="layer", norm_first=False, position="sinusoidal", ffn="relu",
                    tie_embeddings=False)):
        torch.manual_seed(0)
        model = ModernDecoder(ModernConfig(vocab_size=V, d_model=D, n_layers=L, n_heads=H,
                                           d_ff=FF, max_len=64, **{"n_kv_heads": G, **kw}))
        tokens = torch.randint(0, V, (2, 12))
        loss = F.cross_entropy(model(tokens).flatten(0, 1), tokens.flatten())
        loss.backward()
        assert torch.isfinite(loss)
        biases = [n for n, _ in model.named_parameters() if n.endswith("bias")]
        assert bool(biases) == kw.get("bias", False)


def test_no_bias_model_has_no_bias_parameters():
    model = modern_from()
    assert not [n for n, _ in model.named_parameters() if "bias" in n]
    assert model.head.weight is model.embed.weight


# ---------------------------------------------------------------- bad input


def test_bad_input_names_the_argument():
    with pytest.raises(ValueError, match="n_kv_heads=3 must divide n_heads=4"):
        GroupedQueryAttention(8, 4, 3)
    with pytest.raises(ValueError, match="pairing must be one of"):
        GroupedQueryAttention(8, 4, 2, rope_base=1e4, pairing="halves")
    with pytest.raises(TypeError, match="n_kv_heads must be an int"):
        GroupedQueryAttention(8, 4, 2.0)
    with pytest.raises(ValueError, match="d_head must be even"):
        rotary_tables(4, 7)
    with pytest.raises(ValueError, match=r"cos must have shape \(T, d_head // 2\) = \(5, 4\)"):
        apply_rotary(torch.randn(1, 5, 8), torch.ones(5, 8), torch.ones(5, 4))
    with pytest.raises(TypeError, match="x must be a floating-point tensor"):
        RMSNorm(4)(torch.ones(2, 4, dtype=torch.long))
    with pytest.raises(ValueError, match="x must have last dimension d=4"):
        RMSNorm(4)(torch.ones(2, 5))
    with pytest.raises(ValueError, match="eps must be positive"):
        RMSNorm(4, eps=0.0)
    with pytest.raises(ValueError, match=r"x must have shape \(B, T, d_model=8\)"):
        GroupedQueryAttention(8, 4, 2)(torch.randn(2, 3, 6))
    with pytest.raises(ValueError, match="position must be one of"):
        ModernDecoder(ModernConfig(position="alibi"))
    with pytest.raises(ValueError, match="ffn must be one of"):
        ModernDecoder(ModernConfig(ffn="geglu"))
    with pytest.raises(TypeError, match="config must be a lib.ModernConfig"):
        ModernDecoder({"d_model": 8})
    model = ModernDecoder(ModernConfig(vocab_size=10, max_len=8))
    with pytest.raises(ValueError, match="tokens holds token id 10"):
        model(torch.tensor([[1, 10]]))
    with pytest.raises(ValueError, match="go beyond the model's max_len=8"):
        model(torch.zeros(1, 9, dtype=torch.long))
    with pytest.raises(ValueError, match=r"cache must be a KVCache\(2\)"):
        model(torch.zeros(1, 3, dtype=torch.long), cache=lib.KVCache(3))


# ---------------------------------------------------------------- chapter 14's position controls


def test_nope_model_sees_positions_only_through_the_mask():
    """position="none", one layer: swapping two earlier tokens leaves the last position's
    logits unchanged (its attention is a weighted sum over a set), which a learned or
    rotary model does not; and the model has no position table at all."""
    torch.manual_seed(0)
    kw = dict(vocab_size=V, d_model=D, n_layers=1, n_heads=H, n_kv_heads=G, d_ff=FF, max_len=32)
    tokens = torch.randint(0, V, (1, 10))
    swapped = tokens.clone()
    swapped[0, [0, 3]] = tokens[0, [3, 0]]
    assert tokens[0, 0] != tokens[0, 3]
    for position, invariant in (("none", True), ("rotary", False), ("learned", False)):
        torch.manual_seed(1)
        model = ModernDecoder(ModernConfig(position=position, **kw)).eval()
        with torch.no_grad():
            same = torch.allclose(model(tokens)[0, -1], model(swapped)[0, -1], atol=1e-5)
        assert same == invariant, position
    nope = ModernDecoder(ModernConfig(position="none", **kw))
    assert not [n for n, _ in nope.named_parameters() if n.startswith("pos")]
    assert all(b.attn.rope_base is None for b in nope.blocks)


def test_position_scale_scales_the_sinusoidal_table_only():
    kw = dict(vocab_size=V, d_model=D, n_layers=1, n_heads=H, n_kv_heads=G, d_ff=FF, max_len=16)
    plain = ModernDecoder(ModernConfig(position="sinusoidal", **kw))
    scaled = ModernDecoder(ModernConfig(position="sinusoidal", position_scale=0.25, **kw))
    assert torch.equal(scaled.pos.pe, plain.pos.pe * 0.25)
    # chapter 6's table has rows of norm sqrt(d/2); 1/sqrt(d/2) brings them to 1
    unit = ModernDecoder(ModernConfig(position="sinusoidal", position_scale=(D / 2) ** -0.5,
                                      **kw))
    assert torch.allclose(plain.pos.pe.norm(dim=-1), torch.full((16,), (D / 2) ** 0.5))
    assert torch.allclose(unit.pos.pe.norm(dim=-1), torch.ones(16))
    with pytest.raises(ValueError, match="position_scale scales the added sinusoidal"):
        ModernDecoder(ModernConfig(position="learned", position_scale=0.5, **kw))
    with pytest.raises(ValueError, match="position_scale must be positive"):
        ModernDecoder(ModernConfig(position="sinusoidal", position_scale=0.0, **kw))
