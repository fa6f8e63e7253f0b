"""lib.teach.modern_ladder (chapter 14's ladder): bits per byte by hand, parameter matching
by brute force, chapter 11's model reproduced, the KV-cache formula against real tensors,
training runs that are reproducible and independent of the process count."""

import dataclasses
import math

import pytest
import torch
from transformers import LlamaConfig
from transformers.models.llama import modeling_llama as hf

import lib
from lib.teach import modern_ladder as ladder


def test_bits_per_byte_by_hand():
    # 3 ASCII characters, 1 two-byte and 1 three-byte character: 8 bytes
    text = "abcé€"
    assert len(text.encode("utf-8")) == 8
    assert ladder.bits_per_byte(8 * math.log(2), text) == pytest.approx(1.0, abs=1e-15)
    assert ladder.bits_per_byte(3.0, "xyz") == pytest.approx(3.0 / (3 * math.log(2)))
    with pytest.raises(ValueError, match="text is empty"):
        ladder.bits_per_byte(1.0, "")
    with pytest.raises(TypeError, match="text must be a str"):
        ladder.bits_per_byte(1.0, b"abc")
    with pytest.raises(ValueError, match="total_nats must be >= 0"):
        ladder.bits_per_byte(-1.0, "abc")


def test_matched_d_ff_is_the_brute_force_best():
    rungs = ladder.ladder_configs(50, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, d_ff=128)
    target = ladder.non_embedding_parameters(lib.ModernDecoder(rungs[0][1]))
    for name, config in rungs[1:]:
        counts = {d: ladder.non_embedding_parameters(
            lib.ModernDecoder(dataclasses.replace(config, d_ff=d))) for d in range(40, 200)}
        best = min(counts, key=lambda d: (abs(counts[d] - target), d))
        assert config.d_ff == best, name


def test_each_rung_changes_one_choice():
    rungs = ladder.ladder_configs(84)
    assert [n for n, _ in rungs] == ["chapter 11", "+ RMSNorm", "+ rotary", "+ SwiGLU",
                                     "+ GQA", "+ no biases"]
    fields = [f.name for f in dataclasses.fields(lib.ModernConfig) if f.name != "d_ff"]
    changed = []
    for (_, a), (_, b) in zip(rungs, rungs[1:]):
        changed.append([f for f in fields if getattr(a, f) != getattr(b, f)])
    assert changed == [["norm"], ["position"], ["ffn"], ["n_kv_heads"], ["bias"]]
    first, last = rungs[0][1], rungs[-1][1]
    assert (first.norm, first.position, first.ffn, first.bias, first.n_kv_heads) == (
        "layer", "learned", "gelu", True, 4)
    assert [c.d_ff for _, c in rungs] == [256, 256, 256, 170, 192, 196]


def test_from_decoder_only_reproduces_chapter_11():
    torch.manual_seed(0)
    model = lib.DecoderOnlyModel(30, d_model=32, n_heads=4, n_layers=2, d_ff=64, dropout=0.0,
                                 norm_first=True, max_len=16, positional="learned",
                                 activation="gelu", scale_embedding=False).eval()
    with torch.no_grad():  # biases and gains away from their initial values
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
    modern = ladder.from_decoder_only(model).eval()
    tokens = torch.randint(0, 30, (3, 16))
    with torch.no_grad():
        assert (modern(tokens) - model(tokens)).abs().max() < 1e-5
    bad = lib.DecoderOnlyModel(30, d_model=32, n_heads=4, n_layers=2, d_ff=64)  # post-LN
    with pytest.raises(ValueError, match="must be pre-LN"):
        ladder.from_decoder_only(bad)
    with pytest.raises(TypeError, match="model must be a lib.DecoderOnlyModel"):
        ladder.from_decoder_only(modern)


@pytest.mark.parametrize("n_kv", [1, 2, 4])
def test_kv_bytes_formula_equals_real_tensors(n_kv):
    config = lib.ModernConfig(vocab_size=20, d_model=32, n_layers=3, n_heads=4, n_kv_heads=n_kv,
                              d_ff=40, max_len=16)
    model = lib.ModernDecoder(config)
    tokens = torch.randint(0, 20, (2, 11))
    cache = lib.KVCache(3)
    with torch.no_grad():
        model(tokens, cache=cache)
    real = sum(t.numel() * t.element_size() for c in cache.self_attn for t in (c.k, c.v))
    assert real == ladder.kv_bytes_per_token(config) * 22 == 2 * 3 * n_kv * 8 * 4 * 22
    assert ladder.measured_kv_bytes_per_token(model, tokens) == ladder.kv_bytes_per_token(config)
    assert ladder.measured_kv_bytes_per_token(model.half(), tokens) == ladder.kv_bytes_per_token(
        config, 2)


def test_half_order_and_copy_to_llama_attention():
    w = torch.arange(16.0)[:, None].expand(16, 3)  # row r holds r
    # 2 heads of 8: in head 0 rows 0,2,4,6 then 1,3,5,7; head 1 likewise from 8
    expected = [0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15]
    assert ladder.half_order(w, 2)[:, 0].tolist() == expected
    torch.manual_seed(1)
    config = LlamaConfig(hidden_size=32, num_attention_heads=4, num_key_value_heads=2)
    config._attn_implementation = "eager"
    x = torch.randn(2, 6, 32)
    position = hf.LlamaRotaryEmbedding(config)(x, torch.arange(6)[None])
    mask = torch.full((6, 6), float("-inf")).triu(1)[None, None]
    for pairing in ("interleaved", "half"):
        attn = lib.GroupedQueryAttention(32, 4, 2, rope_base=10000.0, pairing=pairing)
        ref = hf.LlamaAttention(config, layer_idx=0)
        ladder.copy_to_llama_attention(attn, ref)
        with torch.no_grad():
            assert (attn(x) - ref(x, position_embeddings=position, attention_mask=mask)[0]
                    ).abs().max() < 1e-5


def tiny_data():
    g = torch.Generator().manual_seed(0)
    train = torch.randint(0, 12, (5000,), generator=g)
    train[1::2] = (train[::2] + 1) % 12  # learnable: every second token follows the one before
    valid = torch.randint(0, 12, (2002,), generator=g)
    valid[1::2] = (valid[::2] + 1) % 12
    heldout = lib.evaluation_windows(valid, 16, n_windows=20)
    text = "x" * heldout.tokens[:, 1:].numel()
    return train, heldout, text


def test_train_rung_learns_is_reproducible_and_scores_in_bits_per_byte():
    train, heldout, text = tiny_data()
    rungs = ladder.ladder_configs(12, d_model=16, n_layers=1, n_heads=2, n_kv_heads=1, d_ff=32,
                                  max_len=16)
    name, config = rungs[-1]
    a = ladder.train_rung(name, config, train, heldout, text, steps=60, batch_size=8, seed=3)
    b = ladder.train_rung(name, config, train, heldout, text, steps=60, batch_size=8, seed=3)
    assert a.losses == b.losses and a.bits_per_byte == b.bits_per_byte
    assert a.losses[-1] < a.losses[0] - 0.3  # it learns
    torch.manual_seed(3)
    model = lib.ModernDecoder(config)  # the untrained start of that run
    nats = ladder.heldout_nats(model, heldout)
    mean = lib.lm_loss(model, heldout)  # chapter 11's mean, an independent path
    assert nats == pytest.approx(mean * heldout.tokens[:, 1:].numel(), rel=1e-5)
    assert a.bits_per_byte == pytest.approx(a.heldout_nats / (math.log(2) * len(text)))
    assert a.bits_per_byte < ladder.bits_per_byte(nats, text)
    assert a.kv_bytes_per_token == 2 * 1 * 1 * 8 * 4 and a.tokens_per_second > 0


def test_train_rung_curve_scores_along_the_run_without_changing_it():
    """eval_at (chapter 14's budget study, bench/rotary_budget.py): held-out bits per
    byte at the given steps and at the end; the training is the same as without it."""
    train, heldout, text = tiny_data()
    name, config = ladder.ladder_configs(12, d_model=16, n_layers=1, n_heads=2, n_kv_heads=1,
                                         d_ff=32, max_len=16)[2]
    kw = dict(steps=40, batch_size=8, seed=1)
    plain = ladder.train_rung(name, config, train, heldout, text, **kw)
    curved = ladder.train_rung(name, config, train, heldout, text, eval_at=(10, 20), **kw)
    assert curved.losses == plain.losses and curved.bits_per_byte == plain.bits_per_byte
    assert [s for s, _ in curved.curve] == [10, 20, 40] and plain.curve == [(40, plain.bits_per_byte)]
    assert curved.curve[-1][1] == plain.bits_per_byte
    torch.manual_seed(1)  # the run's start
    untrained = ladder.bits_per_byte(ladder.heldout_nats(lib.ModernDecoder(config), heldout),
                                     text)
    points = [b for _, b in curved.curve]
    assert untrained > max(points) and len(set(points)) == 3  # scored as it learns
    for bad, error in (((0,), ValueError), ((41,), ValueError), (10, TypeError), ("10", TypeError)):
        with pytest.raises(error, match="eval_at"):
            ladder.train_rung(name, config, train, heldout, text, eval_at=bad, **kw)


def test_run_ladder_is_independent_of_the_process_count():
    train, heldout, text = tiny_data()
    rungs = ladder.ladder_configs(12, d_model=16, n_layers=1, n_heads=2, n_kv_heads=1, d_ff=32,
                                  max_len=16)[:2]
    kw = dict(steps=5, seeds=(0, 1), batch_size=4)
    one = ladder.run_ladder(rungs, train, heldout, text, processes=1, **kw)
    two = ladder.run_ladder(rungs, train, heldout, text, processes=2, **kw)
    assert [(r.name, r.seed) for r in one] == [(n, s) for s in (0, 1) for n, _ in rungs]
    assert [r.losses for r in one] == [r.losses for r in two]
    assert [r.bits_per_byte for r in one] == [r.bits_per_byte for r in two]
    # the seeds differ, the rungs of one seed see the same windows (same first loss
    # for rungs whose start differs only in the norm: both start near ln 12)
    assert one[0].losses != one[2].losses


def test_a_result_keeps_the_trained_weights():
    """RungResult.state (chapter 14's attention cell): the trained weights, on the CPU,
    copied (not the live tensors); loaded into a fresh model they give the stored score."""
    train, heldout, text = tiny_data()
    name, config = ladder.ladder_configs(12, d_model=16, n_layers=1, n_heads=2, n_kv_heads=1,
                                         d_ff=32, max_len=16)[2]  # a rotary rung
    run = ladder.train_rung(name, config, train, heldout, text, steps=6, batch_size=4)
    untrained = lib.ModernDecoder(config).state_dict()
    assert set(run.state) == set(untrained)
    assert all(t.device.type == "cpu" for t in run.state.values())
    assert any(not torch.equal(run.state[k], untrained[k]) for k in untrained)  # trained
    model = lib.ModernDecoder(config)
    model.load_state_dict(run.state)
    assert ladder.heldout_nats(model.eval(), heldout) == pytest.approx(run.heldout_nats,
                                                                       rel=1e-9)
    many = ladder.run_ladder([(name, config)], train, heldout, text, steps=6, seeds=(0,),
                             batch_size=4, processes=1)
    assert all(torch.equal(many[0].state[k], run.state[k]) for k in run.state)


def test_training_speed_times_every_rung():
    train, _, _ = tiny_data()
    rungs = ladder.ladder_configs(12, d_model=16, n_layers=1, n_heads=2, n_kv_heads=1, d_ff=32,
                                  max_len=16)
    speed = ladder.training_speed(rungs, train, steps=2, repeats=2, batch_size=4)
    assert list(speed) == [n for n, _ in rungs] and all(v > 0 for v in speed.values())
    with pytest.raises(ValueError, match="repeats must be positive"):
        ladder.training_speed(rungs, train, repeats=0)


def test_bad_input():
    with pytest.raises(TypeError, match="config must be a lib.ModernConfig"):
        ladder.matched_d_ff({"d_ff": 3}, 100)
    with pytest.raises(ValueError, match="target must be positive"):
        ladder.matched_d_ff(lib.ModernConfig(), 0)
    with pytest.raises(TypeError, match="rungs must be a non-empty list"):
        ladder.run_ladder([], torch.zeros(10, dtype=torch.long), None, "", steps=1)
    with pytest.raises(TypeError, match="batch must be a lib.LMBatch"):
        ladder.heldout_nats(lib.ModernDecoder(lib.ModernConfig()), torch.zeros(2, 3))
    with pytest.raises(ValueError, match="bytes_per_value must be positive"):
        ladder.kv_bytes_per_token(lib.ModernConfig(), 0)
    with pytest.raises(ValueError, match="not n_heads=3 heads of an even width"):
        ladder.half_order(torch.zeros(9, 4), 3)


def test_device_cpu_is_the_default_bit_for_bit():
    """device="cpu" (or a torch.device) trains and scores exactly as the default does."""
    train, heldout, text = tiny_data()
    rungs = ladder.ladder_configs(12, d_model=16, n_layers=1, n_heads=2, n_kv_heads=1, d_ff=32,
                                  max_len=16)
    name, config = rungs[-1]
    kw = dict(steps=8, batch_size=4, seed=2)
    default = ladder.train_rung(name, config, train, heldout, text, **kw)
    for device in ("cpu", torch.device("cpu"), None):
        run = ladder.train_rung(name, config, train, heldout, text, device=device, **kw)
        assert run.losses == default.losses and run.heldout_nats == default.heldout_nats
    one = ladder.run_ladder(rungs[:2], train, heldout, text, steps=3, seeds=(0,), batch_size=4)
    cpu = ladder.run_ladder(rungs[:2], train, heldout, text, steps=3, seeds=(0,), batch_size=4,
                            device="cpu")
    assert [r.losses for r in one] == [r.losses for r in cpu]
    assert [r.heldout_nats for r in one] == [r.heldout_nats for r in cpu]
    speed = ladder.training_speed(rungs[:1], train, steps=1, repeats=1, batch_size=4,
                                  device="cpu")
    assert list(speed) == [rungs[0][0]] and speed[rungs[0][0]] > 0


def test_the_model_and_its_inputs_stay_together():
    """from_decoder_only builds on the source model's device, and measured_kv_bytes_per_token
    moves the tokens to the model's (meta here: shapes and sizes, no values needed)."""
    with torch.device("meta"):
        source = lib.DecoderOnlyModel(30, d_model=32, n_heads=4, n_layers=2, d_ff=64,
                                      dropout=0.0, norm_first=True, max_len=16,
                                      positional="learned", activation="gelu",
                                      scale_embedding=False)
    modern = ladder.from_decoder_only(source)
    assert {p.device.type for p in modern.parameters()} == {"meta"}
    config = ladder.ladder_configs(12, d_model=16, n_layers=1, n_heads=2, n_kv_heads=1,
                                   d_ff=32, max_len=16)[-1][1]
    with torch.device("meta"):
        model = lib.ModernDecoder(config)
    tokens = torch.randint(0, 12, (2, 16))  # on the CPU
    assert ladder.measured_kv_bytes_per_token(model, tokens) == ladder.kv_bytes_per_token(config)


@pytest.mark.parametrize("bad, error, message", [
    ("gpu", ValueError, "device must name a device such as 'cpu' or 'cuda', got 'gpu'"),
    ("", ValueError, "device must name a device"),
    (0, TypeError, "device must be a str or a torch.device"),
    (torch.float32, TypeError, "device must be a str or a torch.device"),
])
def test_a_bad_device_is_refused(bad, error, message):
    train, heldout, text = tiny_data()
    rungs = ladder.ladder_configs(12, d_model=16, n_layers=1, n_heads=2, n_kv_heads=1, d_ff=32,
                                  max_len=16)
    with pytest.raises(error, match=message):
        ladder.train_rung(*rungs[0], train, heldout, text, steps=1, device=bad)
    with pytest.raises(error, match=message):
        ladder.run_ladder(rungs, train, heldout, text, steps=1, device=bad)
    with pytest.raises(error, match=message):
        ladder.training_speed(rungs, train, device=bad)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cuda_without_a_gpu_is_refused_up_front():
    train, heldout, text = tiny_data()
    rungs = ladder.ladder_configs(12, d_model=16, n_layers=1, n_heads=2, n_kv_heads=1, d_ff=32,
                                  max_len=16)
    with pytest.raises(ValueError, match="device is 'cuda' but CUDA is not available"):
        ladder.run_ladder(rungs, train, heldout, text, steps=1, device="cuda")
