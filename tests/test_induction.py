"""lib.teach.induction (chapter 16): batches, scores, half losses and ablation, each
against a brute-force recomputation or a hand-built model whose answer is known."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import lib
from lib.model.hooks import HookPoint


def _causal_patterns(B, h, T, seed=0):
    g = torch.Generator().manual_seed(seed)
    s = torch.randn(B, h, T, T, generator=g).masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), -torch.inf)
    return s.softmax(-1)


def test_repeated_tokens():
    x = lib.repeated_tokens(3, 5, low=10, high=20, prefix=(1,), seed=4)
    assert x.shape == (3, 11) and x.dtype == torch.long
    assert (x[:, 0] == 1).all()
    assert torch.equal(x[:, 1:6], x[:, 6:])
    assert ((x[:, 1:] >= 10) & (x[:, 1:] < 20)).all()
    assert torch.equal(x, lib.repeated_tokens(3, 5, low=10, high=20, prefix=(1,), seed=4))
    assert not torch.equal(x, lib.repeated_tokens(3, 5, low=10, high=20, prefix=(1,), seed=5))


def test_induction_scores_brute_force():
    for prefix, L in ((0, 4), (1, 6), (3, 2)):
        T = prefix + 2 * L
        p = _causal_patterns(2, 3, T, seed=L)
        want = torch.zeros(3)
        for b in range(2):
            for q in range(prefix + L, T):
                want += p[b, :, q, q - L + 1]
        torch.testing.assert_close(lib.induction_scores(p, L), want / (2 * L))


def test_previous_token_scores_brute_force():
    p = _causal_patterns(2, 3, 7)
    for skip in (0, 1, 2):
        want = torch.stack([p[:, :, q, q - 1] for q in range(1 + skip, 7)], -1).mean((0, 2))
        torch.testing.assert_close(lib.previous_token_scores(p, skip=skip), want)


def test_perfect_heads_score_one():
    L, T = 5, 10
    induction = torch.zeros(1, 1, T, T)
    previous = torch.zeros(1, 1, T, T)
    for q in range(T):
        induction[0, 0, q, max(q - L + 1, 0) if q >= L else 0] = 1.0
        previous[0, 0, q, max(q - 1, 0)] = 1.0
    assert float(lib.induction_scores(induction, L)) == 1.0
    assert float(lib.previous_token_scores(previous, skip=0)) == 1.0


class _Copier(nn.Module):
    """A hand-built 'model' that knows the answer on the second copy (logits 20 there)
    and is uniform elsewhere; one block with an attention hook point, for the API."""

    def __init__(self, vocab, length):
        super().__init__()
        self.vocab, self.length = vocab, length
        self.blocks = nn.ModuleList([nn.Module()])
        self.blocks[0].attn = nn.Module()
        self.blocks[0].attn.hook_pattern = HookPoint()
        self.blocks[0].attn.hook_z = HookPoint()
        self.blocks[0].attn.n_heads = 2

    def forward(self, tokens):
        B, T = tokens.shape
        pattern = torch.ones(B, 2, T, T).tril()
        self.blocks[0].attn.hook_pattern(pattern / pattern.sum(-1, keepdim=True))
        z = self.blocks[0].attn.hook_z(torch.ones(B, T, 2, 1))
        logits = torch.zeros(B, T, self.vocab)
        for t in range(T - self.length, T - 1):  # predicts token t + 1 by copying
            logits[torch.arange(B), t, tokens[:, t + 1]] = 20.0 * z[:, t, 0, 0]
        return logits


def test_half_losses_and_probe_on_a_known_model():
    V, L = 7, 4
    x = lib.repeated_tokens(2, L, low=0, high=V, prefix=(0,), seed=1)
    model = _Copier(V, L)
    first, second = lib.half_losses(model, x, L)
    assert math.isclose(first, math.log(V), rel_tol=1e-6)
    want = F.cross_entropy(torch.tensor([[20.0] + [0.0] * (V - 1)]), torch.tensor([0])).item()
    assert math.isclose(second, want, rel_tol=1e-5)
    probe = lib.repeat_probe(model, x, L)
    assert math.isclose(probe["first"], first) and math.isclose(probe["second"], second)
    assert probe["induction"].shape == (1, 2)
    with lib.ablate_heads(model, [(0, 0)]):  # the copying signal goes with head 0
        assert math.isclose(lib.half_losses(model, x, L)[1], math.log(V), rel_tol=1e-6)


def test_ablation_losses_draws_other_heads():
    torch.manual_seed(0)
    model = lib.DecoderOnlyModel(30, d_model=16, n_heads=4, n_layers=2, d_ff=32, dropout=0.0).eval()
    x = lib.repeated_tokens(2, 5, low=0, high=30, seed=0)
    out = lib.ablation_losses(model, x, 5, [(1, 2), (0, 0)], n_heads=4, n_layers=2, draws=3, seed=1)
    assert len(out["random"]) == 3
    for heads in out["random_heads"]:
        assert len(heads) == 2 and not {(1, 2), (0, 0)} & set(heads)
    with lib.ablate_heads(model, [(1, 2), (0, 0)]):
        assert math.isclose(out["top"], lib.half_losses(model, x, 5)[1])


def test_attention_only_model_has_hook_points_and_is_causal():
    for position in ("learned", "rotary"):
        torch.manual_seed(0)
        model = lib.AttentionOnlyModel(20, d_model=16, n_heads=2, max_len=12, position=position).eval()
        x = torch.randint(0, 20, (2, 10))
        out, cache = lib.run_with_cache(model, x)
        assert cache["blocks.1.attn.hook_pattern"].shape == (2, 2, 10, 10)
        y = x.clone()
        y[:, 6:] = (y[:, 6:] + 1) % 20
        with torch.no_grad():
            torch.testing.assert_close(model(y)[:, :6], out[:, :6])


def test_train_attention_only_records_checkpoints():
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 12, (3000,), generator=g)
    run = lib.train_attention_only(ids, ids, 12, steps=6, every=3, context=16, batch_size=4,
                                   d_model=16, n_heads=2, probe_length=6, probe_batch=4,
                                   repeat_fraction=0.5, repeat_length=(3, 6))
    assert run.steps == [0, 3, 6]
    assert len(run.induction) == 3 and run.induction[0].shape == (2, 2)
    assert len(run.best_induction()) == 3 and all(0 <= s <= 1 for s in run.best_induction())
    assert run.model is not None and not run.model.training


def test_early_late_losses_against_cross_entropy_position_by_position():
    torch.manual_seed(0)
    model = lib.AttentionOnlyModel(11, d_model=16, n_heads=2, max_len=20).eval()
    x = torch.randint(0, 11, (3, 20), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        logits = model(x)
    T = x.shape[1]

    def loss_at(t):  # the loss predicting token t (from the logits at t - 1)
        return F.cross_entropy(logits[:, t - 1], x[:, t])

    for early, late in ((8, 12), (1, 1), (19, 19), (3, 5)):
        want_early = torch.stack([loss_at(t) for t in range(1, early + 1)]).mean()
        want_late = torch.stack([loss_at(t) for t in range(T - late, T)]).mean()
        got = lib.early_late_losses(model, x, early=early, late=late)
        assert math.isclose(got[0], float(want_early), rel_tol=1e-5)
        assert math.isclose(got[1], float(want_late), rel_tol=1e-5)
    early, late = lib.early_late_losses(model, x, late=12)  # positions 1-8, last 12
    assert early != late
    with lib.ablate_heads(model, [(1, 0), (1, 1)]):
        assert lib.early_late_losses(model, x, late=12) != (early, late)  # the model's


def test_early_late_losses_on_a_known_model():
    V, L = 7, 6  # _Copier: uniform on the first copy, confident on the second
    x = lib.repeated_tokens(2, L, low=0, high=V, seed=1)
    early, late = lib.early_late_losses(_Copier(V, L), x, early=L - 1, late=L - 1)
    assert math.isclose(early, math.log(V), rel_tol=1e-6)
    want = F.cross_entropy(torch.tensor([[20.0] + [0.0] * (V - 1)]), torch.tensor([0])).item()
    assert math.isclose(late, want, rel_tol=1e-5)
    # one position more reaches back to the second copy's first token, which no copy predicts
    assert lib.early_late_losses(_Copier(V, L), x, late=L)[1] > late + 0.1


def test_early_late_losses_bad_input():
    model = lib.AttentionOnlyModel(11, d_model=16, n_heads=2, max_len=20).eval()
    x = torch.randint(0, 11, (2, 10))
    for bad in ([[1, 2, 3]], x.float(), x > 5):
        with pytest.raises(TypeError, match="windows"):
            lib.early_late_losses(model, bad)
    for bad in (x[0], x[:, :1], x[None]):
        with pytest.raises(ValueError, match="windows"):
            lib.early_late_losses(model, bad)
    for name in ("early", "late"):
        with pytest.raises(TypeError, match=name):
            lib.early_late_losses(model, x, **{name: 2.0})
        for bad in (0, 10):  # T = 10: nine predicted positions
            with pytest.raises(ValueError, match=name):
                lib.early_late_losses(model, x, **{name: bad})


def test_train_attention_only_keeps_its_held_out_windows():
    ids = torch.randint(0, 12, (3000,), generator=torch.Generator().manual_seed(0))
    run = lib.train_attention_only(ids, ids, 12, steps=4, every=2, context=24, batch_size=4,
                                   d_model=16, n_heads=2, probe_length=6, probe_batch=4,
                                   repeat_length=(5, 8))
    plain, twice = run.plain_windows, run.repeat_windows
    assert plain.shape == twice.shape == (64, 24)
    changed = (plain != twice).any(1)
    assert changed.float().mean() > 0.5  # a passage written over most windows
    for row in plain:  # plain windows are stretches of valid_ids as they are
        start = int(((ids.unfold(0, 24, 1) == row).all(1)).nonzero()[0])
        assert torch.equal(ids[start: start + 24], row)
    # the last checkpoint's losses are early_late_losses of the returned model on them
    # (the last 32 positions, or all 23 a window of 24 has)
    assert (run.plain_early_loss[-1], run.plain_late_loss[-1]) == lib.early_late_losses(
        run.model, plain, late=23)
    assert (run.early_loss[-1], run.late_loss[-1]) == lib.early_late_losses(
        run.model, twice, late=23)
    assert run.plain_late_loss[-1] != lib.early_late_losses(run.model, plain, late=22)[1]


def test_train_attention_only_draws_its_probe_from_probe_range(monkeypatch):
    import lib.teach.induction as induction

    real, drawn = induction.repeated_tokens, []

    def spy(*args, **kwargs):
        drawn.append(real(*args, **kwargs))
        return drawn[-1]

    monkeypatch.setattr(induction, "repeated_tokens", spy)
    ids = torch.randint(0, 12, (3000,), generator=torch.Generator().manual_seed(0))
    lib.train_attention_only(ids, ids, 12, steps=2, every=2, context=16, batch_size=4,
                             d_model=16, n_heads=2, probe_length=6, probe_batch=8,
                             probe_range=(3, 7), repeat_length=(3, 6))
    assert len(drawn) == 1
    assert drawn[0].unique().tolist() == [3, 4, 5, 6]  # ids low .. high - 1, all of them


def test_bad_input():
    with pytest.raises(ValueError, match="high"):
        lib.repeated_tokens(2, 3, low=5, high=6)
    with pytest.raises(ValueError, match="length"):
        lib.induction_scores(_causal_patterns(1, 1, 6), 4)
    with pytest.raises(ValueError, match="pattern"):
        lib.induction_scores(torch.rand(2, 3, 4), 2)
    with pytest.raises(TypeError, match="pattern"):
        lib.previous_token_scores(torch.ones(1, 1, 3, 3, dtype=torch.long))
    with pytest.raises(ValueError, match="position"):
        lib.AttentionOnlyModel(10, position="sinusoidal")
    with pytest.raises(TypeError, match="train_ids"):
        lib.train_attention_only([1, 2, 3], torch.arange(5), 5)
    with pytest.raises(ValueError, match="repeat_fraction"):
        lib.train_attention_only(torch.arange(500), torch.arange(500), 500, repeat_fraction=1.5)
    for bad in ((1, 4), (6, 5), (10, 65), [4, 8], (4.0, 8)):  # context 128: at most 64
        with pytest.raises(ValueError, match="repeat_length"):
            lib.train_attention_only(torch.arange(500), torch.arange(500), 500, repeat_length=bad)
    for bad in ((5, 6), (0, 501), (-1, 4), [0, 4], (0.0, 4)):
        with pytest.raises(ValueError, match="probe_range"):
            lib.train_attention_only(torch.arange(500), torch.arange(500), 500, probe_range=bad)


def test_write_twice_repeats_a_passage_inside_the_window():
    from lib.teach.induction import _write_twice

    g = torch.Generator().manual_seed(3)
    lengths = set()
    for T, low, high in ((16, 3, 6), (64, 10, 40), (128, 40, 64)):
        for _ in range(40):
            w = torch.arange(T)  # all distinct: the copied passage is the only repeat
            _write_twice(w, g, low, high)
            changed = (w != torch.arange(T)).nonzero().flatten()
            start, n = int(w[changed[0]]), len(changed)
            assert low <= n <= min(high, T // 2)  # the length asked for (capped at T / 2)
            assert torch.equal(w[changed], torch.arange(start, start + n))  # a contiguous passage
            assert start + n <= changed[0]  # copied from earlier in the window
            lengths.add((T, n))
    assert len({n for T, n in lengths if T == 128}) >= 10  # drawn, not fixed (25 possible)


def test_induction_ablation_groups_heads_by_score_and_ablates_each_group():
    torch.manual_seed(0)
    model = lib.AttentionOnlyModel(12, d_model=16, n_heads=4, max_len=16).eval()
    x = lib.repeated_tokens(6, 6, low=0, high=12, seed=2)
    scores = lib.repeat_probe(model, x, 6, skip=0)["induction"][1]
    threshold = float(scores.median())  # splits layer 2's four heads into two groups
    out = lib.induction_ablation(model, x, 6, threshold=threshold)
    above = [(1, h) for h in range(4) if float(scores[h]) >= threshold]
    assert out["induction"]["heads"] == above and 0 < len(above) < 4
    assert sorted(out["induction"]["heads"] + out["other"]["heads"]) == [(1, h) for h in range(4)]
    assert out["layer 1"]["heads"] == [(0, h) for h in range(4)] and out["none"]["heads"] == []
    assert (out["none"]["first"], out["none"]["second"]) == lib.half_losses(model, x, 6)
    for name in ("induction", "other", "layer 1"):
        with lib.ablate_heads(model, out[name]["heads"]):
            expected = lib.half_losses(model, x, 6)
        assert (out[name]["first"], out[name]["second"]) == expected
        assert expected != lib.half_losses(model, x, 6)  # ablating changed something
    with pytest.raises(TypeError, match="model"):
        lib.induction_ablation(torch.nn.Linear(2, 2), x, 6)
    with pytest.raises(ValueError, match="threshold"):
        lib.induction_ablation(model, x, 6, threshold=1.5)
