// One batch-1 decoding step of a Llama-style decoder (lib.model.llama._TokenPlan), every
// block in one call: lib's optional native step (lib.model.native, chapter 17).
//
// The four matrix-vector products of a block are the same torch.bmm calls the Python
// step makes (W's row blocks, lib.model.llama._split_product), so they read the weights
// exactly as fast. What changes is everything between them: RMSNorm, rotary, the cache
// write, the attention of one query, SiLU * up and the residual adds are plain loops over
// a few hundred floats here, where the Python step makes about 35 tensor calls a block,
// each costing microseconds of dispatch for nanoseconds of arithmetic.
//
// Rounding: the rotary (x * c + swapped * s), SiLU * up and the residual adds round
// each operation as PyTorch does (compiled with -ffp-contract=off: no fused multiply-add);
// RMSNorm's sum of squares and the attention's dot products and softmax are summed in
// another order than PyTorch's kernels, so the step agrees with the Python one to
// float32 rounding, not bit for bit (tests/test_native_step.py).

#include <torch/extension.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace {

float dot(const float* a, const float* b, int64_t n) {
  float s = 0.0f;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

// y = x / sqrt(mean(x^2) + eps) * w
void rms_norm(const float* x, const float* w, double eps, int64_t n, float* y) {
  const float r = 1.0f / std::sqrt(dot(x, x, n) / static_cast<float>(n) + static_cast<float>(eps));
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = (x[i] * r) * w[i];
}

// h (K numbers) times W's row blocks (S, K, N/S): the N outputs in order, as one bmm.
at::Tensor product(const at::Tensor& h, const at::Tensor& blocks) {
  const int64_t S = blocks.size(0), K = blocks.size(1);
  return at::bmm(h.view({1, 1, K}).expand({S, 1, K}), blocks);
}

void check_f32(const at::Tensor& t, const char* name) {
  TORCH_CHECK(t.scalar_type() == at::kFloat && t.device().is_cpu(), name,
              " must be a float32 CPU tensor");
}

}  // namespace

// x (d) float32: the token's residual stream entering block 0 -> after the last block.
// per_layer: 6 tensors a block (norm1 weight (d), QKV row blocks, W^O row blocks, norm2
// weight (d), gate-up row blocks, down row blocks). k_buffers[l], v_buffers[l]
// (1, G, capacity, D), contiguous: positions 0..t-1 already cached; the step writes
// position t and attends positions 0..t. c, s (D): the rotation of position t laid out
// like a head's features (lib.model.llama._RotaryTable.pairs, flattened).
at::Tensor decode_step(const at::Tensor& x, const std::vector<at::Tensor>& per_layer,
                       const std::vector<at::Tensor>& k_buffers,
                       const std::vector<at::Tensor>& v_buffers, int64_t t, const at::Tensor& c,
                       const at::Tensor& s, int64_t H, int64_t G, int64_t D, int64_t d_ff,
                       double eps, bool interleaved) {
  const int64_t L = static_cast<int64_t>(k_buffers.size());
  const int64_t d = x.numel();
  TORCH_CHECK(L > 0 && static_cast<int64_t>(v_buffers.size()) == L &&
                  static_cast<int64_t>(per_layer.size()) == 6 * L,
              "per_layer must hold 6 tensors for each of the ", L, " layers");
  TORCH_CHECK(H > 0 && G > 0 && H % G == 0 && D > 0 && D % 2 == 0 && t >= 0,
              "bad shape constants");
  check_f32(x, "x");
  check_f32(c, "c");
  check_f32(s, "s");
  TORCH_CHECK(x.is_contiguous() && c.is_contiguous() && s.is_contiguous() && c.numel() == D &&
                  s.numel() == D,
              "x, c and s must be contiguous; c and s must hold D numbers");
  for (int64_t l = 0; l < L; ++l) {
    for (const at::Tensor* buf : {&k_buffers[l], &v_buffers[l]}) {
      check_f32(*buf, "a cache buffer");
      TORCH_CHECK(buf->is_contiguous() && buf->dim() == 4 && buf->size(0) == 1 &&
                      buf->size(1) == G && buf->size(3) == D && buf->size(2) > t,
                  "cache buffer ", l, " must be (1, G, capacity > t, D), contiguous");
    }
    for (int64_t j = 0; j < 6; ++j) check_f32(per_layer[6 * l + j], "a weight");
  }
  at::NoGradGuard no_grad;
  at::Tensor out = x.clone();
  float* X = out.data_ptr<float>();
  at::Tensor h = at::empty({d}, x.options());
  at::Tensor z = at::empty({H * D}, x.options());
  at::Tensor a = at::empty({d_ff}, x.options());
  float* Hn = h.data_ptr<float>();
  float* Z = z.data_ptr<float>();
  float* A = a.data_ptr<float>();
  const float* C = c.data_ptr<float>();
  const float* Sn = s.data_ptr<float>();
  std::vector<float> tmp(D), p(t + 1);
  std::vector<int64_t> partner(D);
  for (int64_t i = 0; i < D; ++i)
    partner[i] = interleaved ? (i ^ 1) : (i < D / 2 ? i + D / 2 : i - D / 2);
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  const int64_t group = H / G;

  for (int64_t l = 0; l < L; ++l) {
    const at::Tensor* w = &per_layer[6 * l];
    // 1. pre-norm, 2. Q, K, V: one product, H + 2G heads of D features
    rms_norm(X, w[0].data_ptr<float>(), eps, d, Hn);
    at::Tensor qkv = product(h, w[1]);
    TORCH_CHECK(qkv.numel() == (H + 2 * G) * D, "QKV row blocks of layer ", l,
                " give ", qkv.numel(), " numbers, not (H + 2G) * D");
    float* Q = qkv.data_ptr<float>();
    // 3. rotary, Q's and K's heads: x * c + swapped * s
    for (int64_t head = 0; head < H + G; ++head) {
      float* u = Q + head * D;
      std::memcpy(tmp.data(), u, D * sizeof(float));
      for (int64_t i = 0; i < D; ++i) u[i] = tmp[i] * C[i] + tmp[partner[i]] * Sn[i];
    }
    // the new key and value written at position t
    const int64_t cap = k_buffers[l].size(2);
    float* Kb = k_buffers[l].data_ptr<float>();
    float* Vb = v_buffers[l].data_ptr<float>();
    for (int64_t g = 0; g < G; ++g) {
      std::memcpy(Kb + (g * cap + t) * D, Q + (H + g) * D, D * sizeof(float));
      std::memcpy(Vb + (g * cap + t) * D, Q + (H + G + g) * D, D * sizeof(float));
    }
    // 4. attention of the one query over positions 0..t; head j reads kv head j / group
    for (int64_t j = 0; j < H; ++j) {
      const float* q = Q + j * D;
      const float* kg = Kb + (j / group) * cap * D;
      const float* vg = Vb + (j / group) * cap * D;
      float top = -std::numeric_limits<float>::infinity();
      for (int64_t i = 0; i <= t; ++i) {
        p[i] = dot(q, kg + i * D, D) * scale;
        top = std::max(top, p[i]);
      }
      float total = 0.0f;
      for (int64_t i = 0; i <= t; ++i) total += (p[i] = std::exp(p[i] - top));
      float* zj = Z + j * D;
      std::fill(zj, zj + D, 0.0f);
      for (int64_t i = 0; i <= t; ++i) {
        const float wi = p[i] / total;
        const float* vi = vg + i * D;
#pragma omp simd
        for (int64_t f = 0; f < D; ++f) zj[f] += wi * vi[f];
      }
    }
    // 5. W^O and the residual
    at::Tensor o = product(z, w[2]);
    const float* O = o.data_ptr<float>();
#pragma omp simd
    for (int64_t i = 0; i < d; ++i) X[i] += O[i];
    // 6. SwiGLU: silu(gate) * up, down, the residual
    rms_norm(X, w[3].data_ptr<float>(), eps, d, Hn);
    at::Tensor gu = product(h, w[4]);
    TORCH_CHECK(gu.numel() == 2 * d_ff, "gate-up row blocks of layer ", l, " give ",
                gu.numel(), " numbers, not 2 * d_ff");
    const float* GU = gu.data_ptr<float>();
    for (int64_t i = 0; i < d_ff; ++i) {
      const float g = GU[i];
      A[i] = (g / (1.0f + std::exp(-g))) * GU[d_ff + i];
    }
    at::Tensor dn = product(a, w[5]);
    const float* DN = dn.data_ptr<float>();
#pragma omp simd
    for (int64_t i = 0; i < d; ++i) X[i] += DN[i];
  }
  return out;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("decode_step", &decode_step, "One batch-1 decoding step through every block");
}
