"""Chapter 3's worked attention examples, recomputed with lib.

Hand work rounds intermediate values to two decimals; the chapter's two-decimal
numbers are checked to that precision, and the exact values against closed
forms where the example has them.
"""

import math

import torch

import lib


def t(rows):
    return torch.tensor(rows, dtype=torch.float64)


def test_example_1_three_by_two():
    Q, K, V = t([[1, 0], [0, 1], [1, 1]]), t([[1, 1], [0, 1], [1, 0]]), t([[0, 2], [1, 1], [2, 0]])
    out, w = lib.scaled_dot_product_attention(Q, K, V)
    assert torch.equal(Q @ K.T, t([[1, 0, 1], [1, 1, 0], [2, 1, 1]]))
    two_decimal_weights = t([[0.40, 0.20, 0.40], [0.40, 0.40, 0.20], [0.50, 0.25, 0.25]])
    assert (w - two_decimal_weights).abs().max() < 0.005
    # exact first row: e^a / (2 e^a + 1) with a = 1/√2
    a = math.exp(1 / math.sqrt(2))
    assert math.isclose(w[0, 0].item(), a / (2 * a + 1), rel_tol=1e-12)
    # an output computed from the rounded weights is right to 0.06 at worst
    rounded_out = t([[1.00, 1.00], [0.80, 1.20], [0.75, 1.25]])
    assert (out - rounded_out).abs().max() < 0.06
    # row 1 is exactly [1, 1]: its weights on V's first and last rows are equal
    torch.testing.assert_close(out[0], t([1.0, 1.0]))


def test_example_2_one_query():
    out, w = lib.scaled_dot_product_attention(t([[1, 1]]), t([[1, 0], [0, 1]]), t([[2, 3], [4, 1]]))
    torch.testing.assert_close(w, t([[0.5, 0.5]]))
    torch.testing.assert_close(out, t([[3.0, 2.0]]))


def test_example_3_column_value():
    out, w = lib.scaled_dot_product_attention(t([[1, 1, 1, 1]]), torch.eye(4, dtype=torch.float64), t([[2], [4], [6], [8]]))
    torch.testing.assert_close(w, torch.full((1, 4), 0.25, dtype=torch.float64))
    torch.testing.assert_close(out, t([[5.0]]))


def two_head_module():
    """The two-head example's projections loaded into lib.MultiHeadAttention (no biases)."""
    WQ = [t([[1, 0], [0, 1], [1, 0], [0, 1]]), t([[0, 1], [1, 0], [1, 1], [0, 0]])]
    WK = [t([[1, 0], [0, 1], [0, 1], [1, 0]]), t([[0, 1], [1, 0], [1, 0], [1, 1]])]
    WV = [t([[1, 0], [0, 1], [1, 0], [0, 1]]), t([[0, 1], [1, 1], [0, 1], [1, 0]])]
    WO = t([[1, 0, 0, 1], [0, 1, 1, 0], [1, 0, 1, 0], [0, 1, 0, 1]])
    mha = lib.MultiHeadAttention(4, 2, bias=False).double().eval()
    with torch.no_grad():
        # heads sit side by side along the output features; nn.Linear stores Wᵀ
        mha.w_q.weight.copy_(torch.cat(WQ, dim=1).T)
        mha.w_k.weight.copy_(torch.cat(WK, dim=1).T)
        mha.w_v.weight.copy_(torch.cat(WV, dim=1).T)
        mha.w_o.weight.copy_(WO.T)
    return mha, WQ, WK, WV, WO


def test_two_head_example():
    Q = t([[1, 2, 1, 0], [0, 1, 1, 1], [1, 0, 2, 1]])
    K = t([[1, 1, 0, 2], [2, 1, 1, 0], [0, 1, 1, 1]])
    V = t([[1, 1, 0, 0], [0, 2, 1, 1], [1, 1, 2, 2]])
    mha, WQ, WK, WV, WO = two_head_module()
    # the projections the chapter works out by hand
    assert torch.equal(Q @ WQ[0], t([[2, 2], [1, 2], [3, 1]]))
    assert torch.equal(K @ WK[0], t([[3, 1], [2, 2], [1, 2]]))
    assert torch.equal(V @ WV[0], t([[1, 1], [1, 3], [3, 3]]))
    assert torch.equal(Q @ WQ[1], t([[3, 2], [2, 1], [2, 3]]))
    assert torch.equal(K @ WK[1], t([[3, 3], [2, 2], [3, 1]]))
    assert torch.equal(V @ WV[1], t([[1, 2], [3, 3], [3, 4]]))
    heads = [lib.scaled_dot_product_attention(Q @ WQ[i], K @ WK[i], V @ WV[i]) for i in range(2)]
    two_decimal_alpha = [t([[0.45, 0.45, 0.11], [0.25, 0.50, 0.25], [0.79, 0.19, 0.02]]),
                  t([[0.92, 0.03, 0.05], [0.73, 0.09, 0.18], [0.96, 0.03, 0.01]])]
    two_decimal_heads = [t([[1.23, 2.13], [1.50, 2.50], [1.04, 1.42]]), t([[1.16, 2.13], [1.53, 2.45], [1.09, 2.06]])]
    for (out, w), alpha, head in zip(heads, two_decimal_alpha, two_decimal_heads):
        assert (w - alpha).abs().max() < 0.01
        assert (out - head).abs().max() < 0.03
    # the W^O product, by the definition and by lib's module
    concat = torch.cat([heads[0][0], heads[1][0]], dim=1)
    final = concat @ WO
    torch.testing.assert_close(mha(Q[None], K[None], V[None])[0], final)
    torch.testing.assert_close(mha.attention_weights[0], torch.stack([heads[0][1], heads[1][1]]))
