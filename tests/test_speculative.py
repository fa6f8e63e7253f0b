"""Speculative decoding (chapter 17): greedy is plain greedy token for token, for every lib
decoder; sampling follows the target's distribution exactly (Leviathan et al. 2023).

The frequency test runs the whole loop (draft, verify, accept, cut the caches) on
table models with a 3-token vocabulary whose next-token logits depend on the two
previous tokens, read back from the KV cache (so a cache not cut back to the accepted
tokens gives other frequencies). Over N = 2,000 seeded runs of 3 new tokens, the 27
outcomes' counts are compared with the target's exact joint probabilities by Pearson's
chi-square (rejected below ALPHA = 1e-3: a right rule raises a false alarm with
probability 1e-3 per seed). The naive rule (accept the draft's token when it is the
target's argmax, else draw from the target) is rejected by the same test.
"""

from __future__ import annotations

import itertools
import types

import pytest
import torch
from torch import nn

import lib
from lib.train.sampling import chi_square_test

ALPHA = 1e-3
N_RUNS = 2000


class TableModel(nn.Module):
    """logits of token t+1 = table[x_{t-1}, x_t] (x_{-1} = 0), the history kept in a KVCache."""

    def __init__(self, table: torch.Tensor):
        super().__init__()
        self.table = nn.Parameter(table, requires_grad=False)  # (V, V, V)
        self.vocab_size = table.shape[0]
        self.layers = nn.ModuleList([nn.Identity()])
        self.pos = types.SimpleNamespace(max_len=64)

    def forward(self, tokens, cache=None):
        seen = tokens.float()[:, None, :, None]  # (1, 1, m, 1): the ids, as "keys"
        history = tokens if cache is None else cache.self_attn[0].update(seen, seen)[0][0, 0, :, 0].long()[None]
        m = tokens.shape[1]
        padded = torch.cat([torch.zeros(1, 1, dtype=torch.long), history], dim=1)
        prev2, prev1 = padded[0, -m - 1 : -1], padded[0, -m:]
        return self.table[prev2, prev1][None]  # (1, m, V)


def naive_accept(q, p, drafts, generator=None):
    for i in range(drafts.shape[0]):
        if int(drafts[i]) != int(q[i].argmax()):
            return i, int(torch.multinomial(q[i], 1, generator=generator))
    return drafts.shape[0], int(torch.multinomial(q[-1], 1, generator=generator))


def models():
    g = torch.Generator().manual_seed(0)
    target = TableModel(torch.randn(3, 3, 3, generator=g))
    draft = TableModel(4 * target.table.detach() + 0.5 * torch.randn(3, 3, 3, generator=g))
    return target, draft


def joint(target, prompt, settings):
    """The target's exact probability of each 3-token continuation (27,)."""
    probs = []
    for seq in itertools.product(range(3), repeat=3):
        full = torch.cat([prompt, torch.tensor(seq)])
        q = lib.sampler_probs(target(full[None])[0, len(prompt) - 1 : -1], **settings)
        probs.append(float(q[torch.arange(3), torch.tensor(seq)].prod()))
    return torch.tensor(probs, dtype=torch.float64)


def frequencies(target, draft, prompt, settings, k, seed, accept=lib.speculative_accept):
    g = torch.Generator().manual_seed(seed)
    counts = torch.zeros(27, dtype=torch.long)
    rate = []
    for _ in range(N_RUNS):
        r = lib.speculative_generate(target, draft, prompt, 3, k=k, generator=g, accept=accept,
                                     **settings)
        a, b, c = r.tokens[-3:].tolist()
        counts[9 * a + 3 * b + c] += 1
        rate.append(r.acceptance_rate)
    return counts, rate


@pytest.mark.parametrize("settings, k, seed", [
    (dict(temperature=1.0), 2, 0), (dict(temperature=0.8, top_p=0.9), 3, 1),
])
def test_speculative_sampling_draws_the_targets_distribution(settings, k, seed):
    target, draft = models()
    prompt = torch.tensor([1, 2])
    want = joint(target, prompt, settings)
    assert abs(float(want.sum()) - 1) < 1e-9
    counts, _ = frequencies(target, draft, prompt, settings, k, seed)
    assert chi_square_test(counts, want)[1] >= ALPHA
    # the draft's own distribution is far from it: the rule, not the draft, makes it right
    draft_joint = joint(draft, prompt, settings)
    assert chi_square_test((N_RUNS * draft_joint).round(), want)[1] < ALPHA


@pytest.mark.parametrize("seed", [0])
def test_the_naive_rule_is_rejected(seed):
    target, draft = models()
    prompt, settings = torch.tensor([1, 2]), dict(temperature=1.0)
    counts, _ = frequencies(target, draft, prompt, settings, 2, seed, accept=naive_accept)
    assert chi_square_test(counts, joint(target, prompt, settings))[1] < ALPHA


def test_a_cache_not_cut_back_is_caught():
    """The same loop with truncate_cache disabled: after a rejection the caches hold
    positions the sequence does not, and the loop fails (the next round has nothing
    new to feed) or, if it ran, its frequencies would move."""
    import lib.train.speculative as speculative

    target, draft = models()
    prompt, settings = torch.tensor([1, 2]), dict(temperature=1.0)
    original = speculative.truncate_cache
    try:
        speculative.truncate_cache = lambda cache, length: None
        counts, _ = frequencies(target, draft, prompt, settings, 2, 0)
    except (IndexError, ValueError, RuntimeError):
        return
    finally:
        speculative.truncate_cache = original
    assert chi_square_test(counts, joint(target, prompt, settings))[1] < ALPHA


def _decoders():
    torch.manual_seed(0)
    old = lib.DecoderOnlyModel(vocab_size=13, d_model=32, n_heads=4, n_layers=3, d_ff=64,
                               max_len=80)
    modern = lib.ModernConfig(vocab_size=13, d_model=32, n_heads=4, n_kv_heads=2, n_layers=3,
                              d_ff=64, max_len=80, position="rotary").build()
    return [old, modern]


@pytest.mark.parametrize("index", [0, 1], ids=["DecoderOnlyModel", "ModernDecoder"])
@pytest.mark.parametrize("k", [1, 4])
def test_greedy_speculative_is_greedy_token_for_token(index, k):
    target = _decoders()[index].eval()
    torch.manual_seed(1)
    other = (lib.DecoderOnlyModel(vocab_size=13, d_model=16, n_heads=2, n_layers=1, d_ff=32,
                                  max_len=80).eval())
    for draft in (lib.early_exit_draft(target, 1), other):
        for prompt in ([1, 2, 3], [7, 7, 7, 7, 2]):
            prompt = torch.tensor(prompt)
            want = lib.generate(target, prompt, 20, greedy=True)
            got = lib.speculative_generate(target, draft, prompt, 20, k=k)
            assert torch.equal(got.tokens, want)
            assert got.rounds <= 20 and 0 <= got.accepted <= got.drafted


def test_a_perfect_draft_is_always_accepted():
    target = _decoders()[1].eval()
    r = lib.speculative_generate(target, target, torch.tensor([1, 2]), 21, k=4)
    assert r.accepted == r.drafted == 16 and r.rounds == 5 and r.acceptance_rate == 1.0


def test_early_exit_draft_shares_weights_and_leaves_the_model_alone():
    target = _decoders()[1]
    draft = lib.early_exit_draft(target, 2)
    assert len(draft.layers) == 2 and len(target.layers) == 3 and draft.config.n_layers == 2
    assert draft.blocks[1] is target.blocks[1] and draft.head is target.head
    tokens = torch.tensor([[1, 2, 3]])
    assert draft(tokens).shape == target(tokens).shape == (1, 3, 13)
    with pytest.raises(ValueError, match="n_layers"):
        lib.early_exit_draft(target, 4)


def test_truncate_cache_keeps_the_first_positions():
    model = _decoders()[1].eval()
    cache = lib.KVCache(3)
    model(torch.tensor([[1, 2, 3, 4, 5]]), cache=cache)
    lib.truncate_cache(cache, 2)
    assert cache.length == 2
    step = model(torch.tensor([[3]]), cache=cache)[0, -1]
    assert torch.allclose(step, model(torch.tensor([[1, 2, 3]]))[0, -1], atol=1e-5)
    with pytest.raises(ValueError, match="length"):
        lib.truncate_cache(cache, 9)


@pytest.mark.parametrize("kw, match", [
    (dict(k=0), "k"), (dict(temperature=-1.0), "temperature"), (dict(max_new_tokens=-1), "max_new"),
])
def test_bad_arguments_are_named(kw, match):
    target = _decoders()[1]
    args = dict(max_new_tokens=4)
    args.update(kw)
    with pytest.raises((ValueError, TypeError), match=match):
        lib.speculative_generate(target, target, torch.tensor([1]), **args)
    with pytest.raises(ValueError, match="vocabulary"):
        lib.speculative_generate(target, _decoders()[0].__class__(
            vocab_size=5, d_model=8, n_heads=2, n_layers=1, d_ff=8, max_len=80),
            torch.tensor([1]), 3)
