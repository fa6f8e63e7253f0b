"""The training loop trains every model family (lib/train/training.py, chapter 11); n-gram baselines."""

import math

import pytest
import torch
import torch.nn.functional as F

import lib


def test_causal_lm_loss_is_cross_entropy_of_the_next_token():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(3, 7, 11, generator=g, dtype=torch.float64)
    tokens = torch.randint(0, 11, (3, 7), generator=g)
    want = F.cross_entropy(logits[:, :-1].reshape(-1, 11), tokens[:, 1:].reshape(-1))
    torch.testing.assert_close(lib.causal_lm_loss(logits, tokens), want)
    tokens[0, 3] = 0
    want = F.cross_entropy(logits[:, :-1].reshape(-1, 11), tokens[:, 1:].reshape(-1), ignore_index=0)
    torch.testing.assert_close(lib.causal_lm_loss(logits, tokens, ignore_index=0), want)


def test_causal_lm_loss_bad_input():
    with pytest.raises(ValueError, match="tokens"):
        lib.causal_lm_loss(torch.randn(2, 1, 5), torch.zeros(2, 1, dtype=torch.long))
    with pytest.raises(ValueError, match="logits"):
        lib.causal_lm_loss(torch.randn(2, 4, 5), torch.zeros(2, 3, dtype=torch.long))
    with pytest.raises(TypeError, match="logits"):
        lib.causal_lm_loss(torch.zeros(2, 4, 5, dtype=torch.long), torch.zeros(2, 4, dtype=torch.long))


def lm(vocab=13, max_len=32):
    torch.manual_seed(0)
    return lib.DecoderOnlyModel(vocab, d_model=32, n_heads=4, n_layers=2, d_ff=64, dropout=0.0,
                                norm_first=True, max_len=max_len)


def test_lm_batch_loss_equals_causal_lm_loss_of_the_full_window():
    model = lm().eval()
    tokens = torch.randint(0, 13, (4, 17))
    batch = lib.LMBatch(tokens)
    torch.testing.assert_close(batch.loss(model), lib.causal_lm_loss(model(tokens), tokens))


def test_fit_trains_a_decoder_only_language_model():
    model = lm()
    text = torch.tensor([i % 13 for i in range(500)])  # a cycle: fully predictable
    g = torch.Generator().manual_seed(0)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    res = lib.fit(model, lambda s: lib.random_windows(text, 16, 8, generator=g), 80, opt)
    assert res.steps == 80 and res.losses[0] > 2.0
    valid = lib.evaluation_windows(text, 16)
    assert lib.lm_loss(model, valid) < 0.2


def test_fit_trains_an_encoder_only_model_on_masked_tokens():
    torch.manual_seed(0)
    model = lib.EncoderOnlyModel(12, d_model=32, n_heads=4, n_layers=2, d_ff=64, dropout=0.0, max_len=16)
    g = torch.Generator().manual_seed(0)
    MASK = 11

    def next_batch(step):
        start = torch.randint(0, 10, (16, 1), generator=g)
        tokens = (start + torch.arange(12)) % 10  # counting: each token = the one before + 1
        hide = torch.rand(tokens.shape, generator=g) < 0.2
        hide[:, 5] = True
        return lib.MaskedLMBatch(tokens.masked_fill(hide, MASK), tokens.masked_fill(~hide, -100))

    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    res = lib.fit(model, next_batch, 120, opt)
    # 120 steps lower the masked-token loss by about 40% (from ~2.5 to ~1.5 nats)
    assert sum(res.losses[-10:]) / 10 < 0.75 * sum(res.losses[:10]) / 10


def test_fit_accepts_a_loss_function_for_any_batch():
    model = lm()
    text = torch.arange(300) % 13
    calls = []

    def loss_fn(m, batch):
        calls.append(batch.shape)
        return lib.causal_lm_loss(m(batch), batch)

    g = torch.Generator().manual_seed(0)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    res = lib.fit(model, lambda s: lib.random_windows(text, 16, 4, generator=g).tokens, 5, opt, loss_fn=loss_fn)
    assert res.steps == 5 and calls == [(4, 17)] * 5


def test_windows():
    ids = torch.arange(101)
    g = torch.Generator().manual_seed(0)
    b = lib.random_windows(ids, 10, 6, generator=g)
    assert b.tokens.shape == (6, 11)
    assert (b.tokens[:, 1:] - b.tokens[:, :-1] == 1).all()  # consecutive tokens
    v = lib.evaluation_windows(ids, 10)
    assert v.tokens.shape == (10, 11) and v.tokens[:, 0].tolist() == list(range(0, 100, 10))
    v = lib.evaluation_windows(ids, 10, 4)
    assert v.tokens.shape == (4, 11) and v.tokens[0, 0] == 0 and v.tokens[-1, 0] == 90
    with pytest.raises(ValueError, match="ids"):
        lib.random_windows(torch.arange(5), 10, 2)
    with pytest.raises(ValueError, match="ids"):
        lib.evaluation_windows(torch.zeros(50), 10)


def test_lm_loss_restores_the_mode_and_matches_the_batch_loss():
    model = lm().train()
    b = lib.evaluation_windows(torch.arange(200) % 13, 16)
    value = lib.lm_loss(model, b, batch_size=3)
    assert model.training
    model.eval()
    assert abs(value - float(b.loss(model).detach())) < 1e-5


def test_ngram_nats_by_hand():
    # training ids 0 1 0 1 1 (|V| = 2), add-1: bigrams (0,1) x2, (1,0) x1, (1,1) x1;
    # contexts 0 and 1 are each followed twice. Scoring 0 1 1: p(1|0) = 3/4, p(1|1) = 2/4.
    train, held = torch.tensor([0, 1, 0, 1, 1]), torch.tensor([0, 1, 1])
    assert lib.ngram_nats(train, held, 2, 2, alpha=1.0) == pytest.approx(
        -(math.log(3 / 4) + math.log(2 / 4)) / 2)
    # unigram: counts 2 and 3 of 5, add-1: p(0) = 3/7, p(1) = 4/7
    assert lib.ngram_nats(train, held, 1, 2, alpha=1.0) == pytest.approx(
        -(math.log(3 / 7) + 2 * math.log(4 / 7)) / 3)
    # trigram of 1 1 0 (context 1 1 never followed in training): 1/|V| with any alpha;
    # of 0 1 0 (seen once, context 0 1 seen twice), add-0.5: 1.5 / 3
    assert lib.ngram_nats(train, torch.tensor([1, 1, 0]), 3, 2, alpha=0.3) == pytest.approx(math.log(2))
    assert lib.ngram_nats(train, torch.tensor([0, 1, 0]), 3, 2, alpha=0.5) == pytest.approx(-math.log(0.5))


def test_ngram_nats_matches_a_counter_model_on_text():
    from collections import Counter

    g = torch.Generator().manual_seed(0)
    train, held = torch.randint(0, 5, (400,), generator=g), torch.randint(0, 5, (60,), generator=g)
    t, h = train.tolist(), held.tolist()
    full = Counter(tuple(t[i : i + 3]) for i in range(len(t) - 2))
    ctx = Counter()
    for k, c in full.items():
        ctx[k[:2]] += c
    want = -sum(math.log((full[tuple(h[i - 2 : i + 1])] + 0.1) / (ctx[tuple(h[i - 2 : i])] + 0.5))
                for i in range(2, len(h))) / (len(h) - 2)
    assert lib.ngram_nats(train, held, 3, 5, alpha=0.1) == pytest.approx(want)


def test_ngram_nats_bad_input():
    ids = torch.tensor([0, 1, 2, 1])
    with pytest.raises(ValueError, match="n"):
        lib.ngram_nats(ids, ids, 0, 3)
    with pytest.raises(ValueError, match="alpha"):
        lib.ngram_nats(ids, ids, 2, 3, alpha=0.0)
    with pytest.raises(ValueError, match="eval_ids"):
        lib.ngram_nats(ids, torch.tensor([0, 5]), 2, 3)
    with pytest.raises(TypeError, match="train_ids"):
        lib.ngram_nats(ids.float(), ids, 2, 3)
    with pytest.raises(ValueError, match="eval_ids"):
        lib.ngram_nats(ids, ids[:1], 2, 3)
    with pytest.raises(ValueError, match="n"):
        lib.ngram_nats(ids, ids, 20, 1000)


def test_ngram_token_nats_per_token_and_per_row_against_a_counter_model():
    from collections import Counter

    g = torch.Generator().manual_seed(1)
    train, held = torch.randint(0, 4, (300,), generator=g), torch.randint(0, 4, (3, 9), generator=g)
    t = train.tolist()
    full = Counter(tuple(t[i : i + 3]) for i in range(len(t) - 2))
    ctx = Counter()
    for k, c in full.items():
        ctx[k[:2]] += c
    want = [[-math.log((full[tuple(h[i - 2 : i + 1])] + 0.1) / (ctx[tuple(h[i - 2 : i])] + 0.4))
             for i in range(2, len(h))] for h in held.tolist()]  # each row scored on its own
    got = lib.ngram_token_nats(train, held, 3, 4, alpha=0.1)
    assert got.shape == (3, 7)
    assert torch.allclose(got, torch.tensor(want, dtype=torch.float64))
    one = lib.ngram_token_nats(train, held[1], 3, 4, alpha=0.1)  # a single sequence
    assert torch.allclose(one, torch.tensor(want[1], dtype=torch.float64))
    assert lib.ngram_nats(train, held[1], 3, 4, alpha=0.1) == pytest.approx(sum(want[1]) / 7)
    with pytest.raises(ValueError, match="eval_ids"):
        lib.ngram_token_nats(train, held[:, :2], 3, 4)
    with pytest.raises(ValueError, match="eval_ids"):
        lib.ngram_token_nats(train, torch.zeros(2, 5, dtype=torch.long) + 4, 3, 4)
