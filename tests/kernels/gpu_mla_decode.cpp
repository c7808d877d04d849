// GPU tests of kernels/mla_decode.h: the CUDA kernels against the CPU twin (shape sweep, -1 padding,
// all-invalid requests), and the three KV paths (fp8, cast, gather-cast) agreeing on the GPU.
//
// Tolerances. L = 512 shapes run the tensor-core kernel, which rounds Q to bf16 once and the softmax
// weights P to bf16 for P . V (fp32 accumulation and fp32 softmax otherwise). Its reference is the CPU
// twin fed the bf16-rounded Q, so both compute the same scores up to fp32 summation order:
//   |lse - ref| <= 1e-4 (fp32 order of 576-long dot products and 2048-long sums, scores O(1));
//   |out - ref| <= 2^-7 * max|V| + 1e-5 * max(1, max|out|): out is a P-weighted mean of the V rows,
//   each weight rounded to bf16 (relative error <= u = 2^-8, bf16 has 8 significant bits) while l
//   sums the fp32 weights, so the mean moves by at most 2^-8 * max|V| (twice that as margin).
// Against the twin fed the fp32 Q (small cases only), Q rounding moves each score by at most
// delta = scale * 2^-8 * sum_i |q_i| |k_i| <= scale * 2^-8 * ||q||_1 * max|K|, hence
//   |out - ref| <= max|V| * (exp(2 delta) - 1) + the bound above, |lse - ref| <= delta + 1e-4.
// Other shapes (glm5-tiny's L = 64) run the fp32 fallback kernel: 2e-5 against the fp32-Q twin.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "common/buffer.h"
#include "common/dtype.h"  // round_f16
#include "common/error.h"
#include "common/rng.h"
#include "kernels/kv_cache.h"
#include "kernels/kv_cast.h"
#include "kernels/mla_decode.h"
#include "kernels/sm90a/mla_decode_wgmma.h"
#include "kernel_test_util.h"

using namespace glm5;

namespace {

struct Case {
  int L, R, B, H, topk, rows, valid;  // `valid`: indices per request that are >= 0 (rest -1); -1: all
  int s_q = 1;                        // query tokens per request (MTP), sharing the request's indices
  int holes_pct = 0;                  // of the indices below `valid`, this percent (drawn fresh) are -1 too:
                                      // invalid rows inside full tiles, not only as a suffix
  int HQ() const { return s_q * H; }  // query heads per request
};

struct Data {
  LatentLayout layout;
  std::vector<uint8_t> pool;
  std::vector<float> q_latent, q_rope;
  std::vector<int32_t> indices;
};

Data make_data(const Case& c, uint64_t seed, bool fill_pool = true) {
  Data d;
  d.layout = make_latent_layout(c.L, c.R, true);
  d.pool.resize(size_t(c.rows) * d.layout.row_bytes);
  if (fill_pool) kv_fill_random_cpu({d.pool.data(), d.layout, nullptr, {}, 0, c.rows, seed});
  d.q_latent.resize(size_t(c.B) * c.HQ() * c.L);
  d.q_rope.resize(size_t(c.B) * c.HQ() * c.R);
  for (size_t i = 0; i < d.q_latent.size(); ++i) d.q_latent[i] = 0.2f * rng_normal(seed, 11, i);
  for (size_t i = 0; i < d.q_rope.size(); ++i) d.q_rope[i] = 0.2f * rng_normal(seed, 12, i);
  d.indices.resize(size_t(c.B) * c.topk);
  for (int b = 0; b < c.B; ++b)
    for (int j = 0; j < c.topk; ++j) {
      const bool ok = (c.valid < 0 || j < c.valid) &&
                      !(c.holes_pct > 0 && rng_uniform(seed, 14, size_t(b) * c.topk + j) * 100 < c.holes_pct);
      d.indices[size_t(b) * c.topk + j] = ok ? std::min(int32_t(rng_uniform(seed, 13, size_t(b) * c.topk + j) * c.rows), c.rows - 1) : -1;  // u * rows can round to rows
    }
  if (c.B > 1)  // the last request has no valid index at all
    for (int j = 0; j < c.topk; ++j) d.indices[size_t(c.B - 1) * c.topk + j] = -1;
  return d;
}

MlaDecodeParams params(const Case& c, const float* ql, const float* qr, const uint8_t* kv, LatentLayout layout,
                       const int32_t* idx, float* out, float* lse) {
  MlaDecodeParams p;
  p.q_latent = ql;
  p.q_rope = qr;
  p.q_rope_head_stride = c.R;
  p.q_rope_row_stride = c.H * c.R;
  p.kv = kv;
  p.layout = layout;
  p.indices = idx;
  p.out = out;
  p.lse = lse;
  p.B = c.B;
  p.H = c.H;
  p.s_q = c.s_q;
  p.topk = c.topk;
  p.scale = 1.f / std::sqrt(256.f);
  return p;
}

// Whether mla_decode_cuda runs the tensor-core kernel for this case (see mla_decode.cu tc_supported).
bool tensor_core_case(const Case& c) { return c.L == 512 && c.R % 16 == 0 && c.L + c.R <= 576; }

// The CPU twin over the B requests, one thread per slice of requests (the twin is plain fp32 loops).
// ql / qr: the query's latent and rope parts (d's pool, layout and indices are the keys). kernel:
// MlaDecodeKernel::WgmmaF16 makes the twin use that kernel's fp16 K / V values (mla_decode.h).
void twin(const Case& c, const Data& d, const std::vector<float>& ql, const std::vector<float>& qr,
          std::vector<float>& out, std::vector<float>& lse, MlaDecodeKernel kernel = MlaDecodeKernel::Auto) {
  out.assign(size_t(c.B) * c.HQ() * c.L, 0.f);
  lse.assign(size_t(c.B) * c.HQ(), 0.f);
  const int n_threads = int(std::max(1u, std::min(16u, std::thread::hardware_concurrency())));
  std::vector<std::thread> pool;
  for (int t = 0; t < n_threads; ++t)
    pool.emplace_back([&, t] {
      for (int b = t; b < c.B; b += n_threads) {
        Case one = c;
        one.B = 1;
        MlaDecodeParams p = params(one, ql.data() + size_t(b) * c.HQ() * c.L, qr.data() + size_t(b) * c.HQ() * c.R,
                                   d.pool.data(), d.layout, d.indices.data() + size_t(b) * c.topk,
                                   out.data() + size_t(b) * c.HQ() * c.L, lse.data() + size_t(b) * c.HQ());
        p.q_rope_row_stride = c.H * c.R;
        p.kernel = kernel;
        mla_decode_cpu(p);
      }
    });
  for (auto& th : pool) th.join();
}

// max |value| over the latent (V) part and over the whole row (K) of every pool row, as dequantized.
std::pair<double, double> max_abs_v_k(const Case& c, const Data& d) {
  std::vector<uint16_t> bf(c.L + c.R);
  double v = 0, k = 0;
  for (int r = 0; r < c.rows; ++r) {
    dequant_latent_row_bf16(d.pool.data() + size_t(r) * d.layout.row_bytes, d.layout, bf.data());
    for (int i = 0; i < c.L + c.R; ++i) {
      const double a = std::fabs(bf16_bits_to_float(bf[i]));
      k = std::max(k, a);
      if (i < c.L) v = std::max(v, a);
    }
  }
  return {v, k};
}

}  // namespace

// Runs mla_decode_cuda (split-K when `split`, with a workspace of exactly the documented size) and
// returns out and lse on the host. bf16_operands: MlaDecodeParams::fp8_bf16_operands (true here unless a test asks:
// Auto's bf16 form keeps the three KV paths' bits equal, which most checks below compare).
struct GpuResult {
  std::vector<float> out, lse;
};
GpuResult run_gpu(const Case& c, const Buffer& ql, const Buffer& qr, const uint8_t* kv, LatentLayout layout,
                  const int32_t* idx, bool split, MlaDecodeKernel kernel = MlaDecodeKernel::Auto, int splits = 0,
                  int heads_per_cta = 0, bool bf16_operands = true, int crossover = 0) {
  const size_t n_out = size_t(c.B) * c.HQ() * c.L, n_lse = size_t(c.B) * c.HQ();
  Buffer o(Where::Device, n_out * 4, "out"), l(Where::Device, n_lse * 4, "lse");
  const size_t ws_bytes = split ? mla_decode_workspace_bytes(c.B, c.HQ(), c.topk, c.L) : 0;
  Buffer ws(Where::Device, std::max<size_t>(ws_bytes, 16), "mla workspace");
  MlaDecodeParams p = params(c, ql.as<float>(), qr.as<float>(), kv, layout, idx, o.as<float>(), l.as<float>());
  if (split) {
    p.workspace = ws.as<float>();
    p.workspace_bytes = ws_bytes;
  }
  p.kernel = kernel;
  p.splits = splits;
  p.heads_per_cta = heads_per_cta;
  p.fp8_bf16_operands = bf16_operands;
  p.crossover = crossover;
  mla_decode_cuda(p, nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  return {to_host<float>(o, n_out), to_host<float>(l, n_lse)};
}

class GpuMlaDecode : public ::testing::TestWithParam<Case> {};

TEST_P(GpuMlaDecode, MatchesCpuTwinAndPathsAgree) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  const Case c = GetParam();
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Data d = make_data(c, seed);
  const size_t n_out = size_t(c.B) * c.HQ() * c.L, n_lse = size_t(c.B) * c.HQ();
  const bool tc = tensor_core_case(c);
  // Reference: the twin fed the Q the kernel uses (bf16-rounded for the tensor-core kernel).
  Data dq = d;
  if (tc) {
    for (float& x : dq.q_latent) x = round_bf16(x);
    for (float& x : dq.q_rope) x = round_bf16(x);
  }
  std::vector<float> out, lse;
  twin(c, dq, dq.q_latent, dq.q_rope, out, lse);
  const auto [max_v, max_k] = max_abs_v_k(c, d);
  double q_l1 = 0;  // max over (b, h) of ||q||_1 over the L + R dims
  for (size_t bh = 0; bh < n_lse; ++bh) {
    double s = 0;
    for (int i = 0; i < c.L; ++i) s += std::fabs(d.q_latent[bh * c.L + i]);
    for (int i = 0; i < c.R; ++i) s += std::fabs(d.q_rope[bh * c.R + i]);
    q_l1 = std::max(q_l1, s);
  }
  const double scale = 1.0 / 16.0, p_tol = std::ldexp(max_v, -7);
  const double delta = tc ? scale * std::ldexp(q_l1 * max_k, -8) : 0.0;
  // The fp32-Q twin as a second reference, on the smaller cases (the twin is slow at B=64, H=64).
  std::vector<float> out32, lse32;
  std::vector<float> out16, lse16;  // the twin of the WgmmaF16 kernel (fp16 Q, K, V), computed at its first use
  const bool check_fp32_q = tc && double(c.B) * c.HQ() * c.topk <= double(8) * 64 * 2048;
  if (check_fp32_q) twin(c, d, d.q_latent, d.q_rope, out32, lse32);

  Buffer ql = to_device(d.q_latent, "q_latent"), qr = to_device(d.q_rope, "q_rope"), pool = to_device(d.pool, "pool"),
         idx = to_device(d.indices, "indices");
  const int W = c.L + c.R;
  Buffer bf(Where::Device, size_t(c.rows) * W * 2, "bf16 pool");
  kv_cast_cuda({pool.as<uint8_t>(), d.layout, bf.as<uint16_t>(), c.rows}, nullptr);
  Buffer compact(Where::Device, d.indices.size() * W * 2, "compact"), cidx(Where::Device, d.indices.size() * 4, "cidx");
  kv_gather_cast_cuda({pool.as<uint8_t>(), d.layout, idx.as<int32_t>(), compact.as<uint16_t>(), cidx.as<int32_t>(),
                       int64_t(d.indices.size())},
                      nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());

  // Passes: single-pass, split-K as chosen, (when the default splits more than twice) split-K with a
  // third of the default's chunks (MlaDecodeParams.splits: uneven chunks, some possibly empty), and
  // (tensor cores, more than 16 query heads) 16-head slices per CTA, single-pass and split-K.
  const int s_default = mla_decode_num_splits(c.B, c.HQ(), c.topk);
  for (int pass = 0; pass < 5; ++pass) {
    if (pass == 2 && s_default <= 2) continue;
    if (pass >= 3 && (!tc || c.HQ() <= 16)) continue;
    const bool split = pass == 1 || pass == 2 || pass == 4;
    const int splits = pass == 2 ? s_default / 3 : 0, hpc = pass >= 3 ? 16 : 0;
    SCOPED_TRACE(std::string(split ? "split-K path" : "single-pass path") +
                 (splits ? ", splits " + std::to_string(splits) : "") + (hpc ? ", 16 heads per CTA" : ""));
    const GpuResult g = run_gpu(c, ql, qr, pool.as<uint8_t>(), d.layout, idx.as<int32_t>(), split,
                                MlaDecodeKernel::Auto, splits, hpc);
    double max_abs = 0, max_ref = 0, max_lse = 0;
    for (size_t i = 0; i < n_out; ++i) {
      max_abs = std::max(max_abs, double(std::fabs(g.out[i] - out[i])));
      max_ref = std::max(max_ref, double(std::fabs(out[i])));
    }
    for (size_t i = 0; i < n_lse; ++i) {
      if (std::isinf(lse[i])) {
        ASSERT_EQ(g.lse[i], lse[i]) << "lse " << i;
      } else {
        max_lse = std::max(max_lse, double(std::fabs(g.lse[i] - lse[i])));
      }
    }
    const double tol_out = tc ? p_tol + 1e-5 * std::max(1.0, max_ref) : 2e-5 * std::max(1.0, max_ref);
    const double tol_lse = tc ? 1e-4 : 2e-5;
    std::printf("mla_decode %s %s%s L=%d B=%d s_q=%d H=%d topk=%d (S=%d): max abs err %.3g (tol %.3g, max |out| %.3g, "
                "max |V| %.3g), max lse err %.3g (tol %.3g)\n",
                tc ? "tensor-core" : "fp32", split ? "split" : "single", hpc ? " 16h/CTA" : "", c.L, c.B, c.s_q, c.H,
                c.topk, split ? (splits ? splits : std::min(s_default, mla_decode_num_splits(c.B, c.HQ(), c.topk, hpc ? 16 : 64))) : 1, max_abs, tol_out, max_ref, max_v, max_lse,
                tol_lse);
    EXPECT_LE(max_abs, tol_out);
    EXPECT_LE(max_lse, tol_lse);
    for (size_t i = 0; i < n_out; ++i) ASSERT_TRUE(std::isfinite(g.out[i])) << "out " << i;
    if (check_fp32_q) {
      double e_out = 0, e_lse = 0;
      for (size_t i = 0; i < n_out; ++i) e_out = std::max(e_out, double(std::fabs(g.out[i] - out32[i])));
      for (size_t i = 0; i < n_lse; ++i)
        if (!std::isinf(lse32[i])) e_lse = std::max(e_lse, double(std::fabs(g.lse[i] - lse32[i])));
      const double t_out = max_v * std::expm1(2 * delta) + tol_out, t_lse = delta + tol_lse;
      std::printf("  vs fp32-Q twin: max abs err %.3g (bound %.3g), lse err %.3g (bound %.3g)\n", e_out, t_out, e_lse,
                  t_lse);
      EXPECT_LE(e_out, t_out);
      EXPECT_LE(e_lse, t_lse);
    }
    if (c.B > 1) {
      for (int i = 0; i < c.HQ() * c.L; ++i) ASSERT_EQ(g.out[size_t(c.B - 1) * c.HQ() * c.L + i], 0.f);
    }

    // cast and gather-cast paths on the GPU: same values, same kernel order -> the same bits as fp8.
    // (The same split-K chunks and heads per CTA as g: other splits round P differently.)
    const GpuResult gc = run_gpu(c, ql, qr, bf.as<uint8_t>(), bf16_layout_of(d.layout), idx.as<int32_t>(), split,
                                 MlaDecodeKernel::Auto, splits, hpc);
    const GpuResult gg = run_gpu(c, ql, qr, compact.as<uint8_t>(), bf16_layout_of(d.layout), cidx.as<int32_t>(), split,
                                 MlaDecodeKernel::Auto, splits, hpc);
    EXPECT_EQ(gc.out, g.out) << "cast path differs from fp8 path";
    EXPECT_EQ(gg.out, g.out) << "gather-cast path differs from fp8 path";
    EXPECT_EQ(0, std::memcmp(gc.lse.data(), g.lse.data(), n_lse * 4));
    EXPECT_EQ(0, std::memcmp(gg.lse.data(), g.lse.data(), n_lse * 4));
    if (tc) {  // pipelined and plain tensor-core kernels: same arithmetic in the same order -> same bits
      // (Auto may have run the wgmma kernel: the mma.sync kernels are compared with each other.)
      const GpuResult gp = run_gpu(c, ql, qr, pool.as<uint8_t>(), d.layout, idx.as<int32_t>(), split,
                                   MlaDecodeKernel::TensorCorePipelined, splits, hpc);
      const GpuResult g8 = run_gpu(c, ql, qr, pool.as<uint8_t>(), d.layout, idx.as<int32_t>(), split,
                                   MlaDecodeKernel::TensorCore, splits, hpc);
      const GpuResult g16 = run_gpu(c, ql, qr, bf.as<uint8_t>(), bf16_layout_of(d.layout), idx.as<int32_t>(), split,
                                    MlaDecodeKernel::TensorCorePipelined, splits, hpc);
      EXPECT_EQ(g8.out, gp.out) << "TensorCore (fp8 rows) differs from TensorCorePipelined";
      EXPECT_EQ(0, std::memcmp(g8.lse.data(), gp.lse.data(), n_lse * 4));
      EXPECT_EQ(g16.out, gp.out) << "TensorCorePipelined (bf16 rows) differs from the fp8 rows";
      EXPECT_EQ(0, std::memcmp(g16.lse.data(), gp.lse.data(), n_lse * 4));
    }
    if (tc && hpc == 0 && c.R == 64) {  // the sm_90a wgmma kernel: same bounds against the twin
      MlaDecodeParams probe = params(c, ql.as<float>(), qr.as<float>(), pool.as<uint8_t>(), d.layout, idx.as<int32_t>(),
                                     nullptr, nullptr);
      if (mla_decode_wgmma_supported(probe)) {
        const GpuResult w8 = run_gpu(c, ql, qr, pool.as<uint8_t>(), d.layout, idx.as<int32_t>(), split,
                                     MlaDecodeKernel::Wgmma, splits, 0);
        double w_abs = 0, w_lse = 0;
        for (size_t i = 0; i < n_out; ++i) w_abs = std::max(w_abs, double(std::fabs(w8.out[i] - out[i])));
        for (size_t i = 0; i < n_lse; ++i) {
          if (std::isinf(lse[i])) ASSERT_EQ(w8.lse[i], lse[i]) << "wgmma lse " << i;
          else w_lse = std::max(w_lse, double(std::fabs(w8.lse[i] - lse[i])));
        }
        std::printf("  wgmma kernel: max abs err %.3g (tol %.3g), max lse err %.3g (tol %.3g)\n", w_abs, tol_out, w_lse,
                    tol_lse);
        EXPECT_LE(w_abs, tol_out) << "Wgmma kernel";
        EXPECT_LE(w_lse, tol_lse) << "Wgmma kernel";
        for (size_t i = 0; i < n_out; ++i) ASSERT_TRUE(std::isfinite(w8.out[i])) << "wgmma out " << i;
        // BF16 rows (cast path) through the same kernel: the same K / V values in the same order.
        const GpuResult w16 = run_gpu(c, ql, qr, bf.as<uint8_t>(), bf16_layout_of(d.layout), idx.as<int32_t>(), split,
                                      MlaDecodeKernel::Wgmma, splits, 0);
        EXPECT_EQ(w16.out, w8.out) << "Wgmma kernel: bf16 rows differ from fp8 rows";
        EXPECT_EQ(0, std::memcmp(w16.lse.data(), w8.lse.data(), n_lse * 4));
        // The fp16-operand form (WgmmaF16) against the twin fed its fp16 Q, K and V: what is left is P's fp16
        // rounding (relative <= 2^-11 per weight, so |out - ref| <= 2^-11 max|V|) and fp32 order. The S28e build
        // stayed at 1.8e-5 to 3.9e-4 against ~1.7e-3; the bf16 form differs from the fp16 one by 2.4e-4 to 4.2e-3,
        // so a bf16 rounding left somewhere (Q, rope, P, scale) fails it in most cases. Then against the fp32-Q bf16
        // twin within the bf16 kernel's bound.
        if (out16.empty()) {
          std::vector<float> ql16 = d.q_latent, qr16 = d.q_rope;  // Q only: no copy of the pool
          for (float& x : ql16) x = round_f16(x);
          for (float& x : qr16) x = round_f16(x);
          twin(c, d, ql16, qr16, out16, lse16, MlaDecodeKernel::WgmmaF16);
        }
        const GpuResult wf = run_gpu(c, ql, qr, pool.as<uint8_t>(), d.layout, idx.as<int32_t>(), split,
                                     MlaDecodeKernel::WgmmaF16, splits, 0);
        const double tol16 = std::ldexp(max_v, -11) + 2e-5 * std::max(1.0, max_ref);
        double f_abs = 0, f_lse = 0, f_diff = 0;
        for (size_t i = 0; i < n_out; ++i) {
          ASSERT_TRUE(std::isfinite(wf.out[i])) << "WgmmaF16 out " << i;
          f_abs = std::max(f_abs, double(std::fabs(wf.out[i] - out16[i])));
          f_diff = std::max(f_diff, double(std::fabs(wf.out[i] - w8.out[i])));
        }
        for (size_t i = 0; i < n_lse; ++i) {
          if (std::isinf(lse16[i])) ASSERT_EQ(wf.lse[i], lse16[i]) << "WgmmaF16 lse " << i;
          else f_lse = std::max(f_lse, double(std::fabs(wf.lse[i] - lse16[i])));
        }
        std::printf("  wgmma fp16 operands vs fp16 twin: max abs err %.3g (tol %.3g), lse err %.3g (tol %.3g); "
                    "max |f16 - bf16 operands| %.3g\n", f_abs, tol16, f_lse, tol_lse, f_diff);
        EXPECT_LE(f_abs, tol16) << "WgmmaF16 kernel";
        EXPECT_LE(f_lse, tol_lse) << "WgmmaF16 kernel";
        EXPECT_GT(f_diff, 0.0) << "WgmmaF16 gave the bf16-operand kernel's bits: were fp16 operands used?";
        // The crossover form (MlaDecodeParams::crossover = 2: head-block pairs as clusters, each CTA producing half of
        // every tile into both): the same bits as without it, in both operand forms, where the kernel has the form
        // (an even number of 64-head blocks, no split-K cluster merge, i.e. not S = 2); refused elsewhere.
        {
          const int blocks = (c.HQ() + 63) / 64;
          const int S_w = split ? mla_decode_wgmma_splits(splits > 0 ? splits : s_default, c.topk) : 1;
          const bool has_form = blocks % 2 == 0 && !mla_decode_wgmma_merges_in_cluster(S_w);
          for (const bool f16 : {false, true}) {
            const MlaDecodeKernel k = f16 ? MlaDecodeKernel::WgmmaF16 : MlaDecodeKernel::Wgmma;
            if (!has_form) {
              EXPECT_THROW(run_gpu(c, ql, qr, pool.as<uint8_t>(), d.layout, idx.as<int32_t>(), split, k, splits, 0, true, 2),
                           Error)
                  << "crossover without head-block pairs (" << blocks << " blocks, S = " << S_w << ")";
              continue;
            }
            const GpuResult x = run_gpu(c, ql, qr, pool.as<uint8_t>(), d.layout, idx.as<int32_t>(), split, k, splits, 0,
                                        true, 2);
            const GpuResult off = run_gpu(c, ql, qr, pool.as<uint8_t>(), d.layout, idx.as<int32_t>(), split, k, splits,
                                          0, true, 1);
            EXPECT_EQ(x.out, off.out) << "crossover changed the " << (f16 ? "fp16" : "bf16") << "-operand kernel's output";
            EXPECT_EQ(0, std::memcmp(x.lse.data(), off.lse.data(), n_lse * 4));
            const GpuResult& auto_x = f16 ? wf : w8;  // crossover 0 (auto): either form, the same bits
            EXPECT_EQ(auto_x.out, off.out) << "crossover auto";
            std::printf("  wgmma %s operands, crossover (%d head blocks, S = %d): bitwise as without\n",
                        f16 ? "fp16" : "bf16", blocks, S_w);
          }
        }
        if (check_fp32_q) {
          double e = 0, el = 0;
          for (size_t i = 0; i < n_out; ++i) e = std::max(e, double(std::fabs(wf.out[i] - out32[i])));
          for (size_t i = 0; i < n_lse; ++i)
            if (!std::isinf(lse32[i])) el = std::max(el, double(std::fabs(wf.lse[i] - lse32[i])));
          const double t_out = max_v * std::expm1(2 * delta) + tol_out, t_lse = delta + tol_lse;
          std::printf("  wgmma fp16 operands vs fp32-Q twin: max abs err %.3g (bound %.3g), lse err %.3g (bound %.3g)\n",
                      e, t_out, el, t_lse);
          EXPECT_LE(e, t_out);
          EXPECT_LE(el, t_lse);
        }
        EXPECT_THROW(run_gpu(c, ql, qr, bf.as<uint8_t>(), bf16_layout_of(d.layout), idx.as<int32_t>(), split,
                             MlaDecodeKernel::WgmmaF16, splits, 0),
                     Error)
            << "WgmmaF16 must refuse BF16 rows";
        // Auto's default form for FP8 rows (fp8_bf16_operands false): the fp16 kernel wherever Auto picks wgmma,
        // else the same kernel as with bf16 operands; BF16 rows ignore the flag.
        const GpuResult a16 = run_gpu(c, ql, qr, pool.as<uint8_t>(), d.layout, idx.as<int32_t>(), split,
                                      MlaDecodeKernel::Auto, splits, 0, false);
        MlaDecodeParams pa = probe;
        pa.heads_per_cta = 0;
        const bool auto_wg = mla_decode_auto_wgmma(pa);
        EXPECT_EQ(a16.out, auto_wg ? wf.out : g.out) << "Auto with fp16 operands allowed (auto wgmma " << auto_wg << ")";
        EXPECT_EQ(0, std::memcmp(a16.lse.data(), (auto_wg ? wf.lse : g.lse).data(), n_lse * 4));
        const GpuResult c16 = run_gpu(c, ql, qr, bf.as<uint8_t>(), bf16_layout_of(d.layout), idx.as<int32_t>(), split,
                                      MlaDecodeKernel::Auto, splits, 0, false);
        EXPECT_EQ(c16.out, g.out) << "BF16 rows must ignore fp8_bf16_operands";
        EXPECT_EQ(0, std::memcmp(c16.lse.data(), g.lse.data(), n_lse * 4));
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, GpuMlaDecode,
                         ::testing::Values(Case{64, 32, 3, 4, 16, 40, -1},      // glm5-tiny
                                           Case{64, 32, 3, 6, 50, 40, 37},      // 6 heads, -1 padding
                                           Case{512, 64, 3, 64, 2048, 5000, -1},  // GLM-5
                                           Case{512, 64, 1, 64, 2048, 5000, -1},  // GLM-5, batch 1 (S = 64)
                                           Case{512, 64, 1, 64, 2048, 5000, 700},  // -1 padding across chunks
                                           Case{512, 64, 32, 64, 2048, 20000, 1900},
                                           Case{512, 64, 128, 16, 2048, 20000, -1},
                                           Case{512, 64, 128, 6, 100, 3000, 77},
                                           Case{512, 64, 32, 6, 2048, 8000, 33},  // most chunks empty
                                           Case{512, 64, 3, 16, 2048, 3000, 1500},
                                           Case{512, 64, 2, 8, 16, 100, 5},
                                           Case{512, 64, 3, 64, 16, 100, -1},
                                           Case{512, 64, 4, 4, 100, 300, 99},
                                           Case{512, 64, 1, 1, 33, 50, -1},
                                           // GLM-5 per-GPU heads 64 / 16 / 8 (TP1 / TP4 / TP8) x batch 1 / 8 / 64,
                                           // top-k 2048 with -1 padding (the last request of B > 1 all -1)
                                           Case{512, 64, 1, 64, 2048, 30000, 2000},
                                           Case{512, 64, 8, 64, 2048, 30000, 1999},
                                           Case{512, 64, 64, 64, 2048, 30000, 2040},
                                           Case{512, 64, 1, 16, 2048, 30000, 1777},
                                           Case{512, 64, 8, 16, 2048, 30000, -1},
                                           Case{512, 64, 64, 16, 2048, 30000, 2047},
                                           Case{512, 64, 1, 8, 2048, 30000, 2048},
                                           Case{512, 64, 8, 8, 2048, 30000, 1000},
                                           Case{512, 64, 64, 8, 2048, 30000, -1},
                                           Case{512, 64, 2, 128, 2048, 30000, 1500},  // two head blocks
                                           Case{512, 64, 3, 40, 300, 3000, 250},      // 40 heads padded to 64
                                           Case{512, 64, 2, 24, 2048, 3000, 2000},    // 24 heads padded to 32
                                           Case{512, 48, 2, 64, 200, 3000, 190},      // R = 48
                                           // MTP: s_q query tokens per request share its indices
                                           Case{512, 64, 4, 64, 2048, 30000, 1900, 2},  // 128 query heads
                                           Case{512, 64, 1, 16, 2048, 30000, -1, 2},
                                           Case{512, 64, 3, 8, 500, 3000, 450, 3},      // 24 query heads
                                           Case{512, 64, 3, 48, 700, 3000, 650, 2},     // 96: a partial second block
                                           Case{64, 32, 3, 4, 16, 40, 12, 2},           // fp32 kernel
                                           // -1 scattered inside full tiles (a quarter / a third of the rows), many tiles
                                           Case{512, 64, 8, 64, 2048, 30000, -1, 1, 25},
                                           Case{512, 64, 2, 128, 2048, 30000, 1900, 1, 33},
                                           // 128 query heads at B 24: the wgmma kernel's split-K is S = 2, the
                                           // cluster merge, where crossover is refused
                                           Case{512, 64, 24, 64, 2048, 30000, 2000, 2},
                                           // 256 query heads (4 head blocks: two crossover pairs), 3 requests
                                           Case{512, 64, 3, 128, 2048, 30000, 1700, 2}));

TEST(GpuMlaDecodeSplit, RejectsSmallWorkspace) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  const Case c{512, 64, 1, 64, 2048, 100, -1};
  ASSERT_GT(mla_decode_num_splits(c.B, c.H, c.topk), 1);
  Data d = make_data(c, 5);
  Buffer ql = to_device(d.q_latent, "q_latent"), qr = to_device(d.q_rope, "q_rope"), pool = to_device(d.pool, "pool"),
         idx = to_device(d.indices, "indices"), out(Where::Device, size_t(64) * 512 * 4, "out"),
         ws(Where::Device, 1024, "ws");
  MlaDecodeParams p = params(c, ql.as<float>(), qr.as<float>(), pool.as<uint8_t>(), d.layout, idx.as<int32_t>(),
                             out.as<float>(), nullptr);
  p.workspace = ws.as<float>();
  p.workspace_bytes = 1024;
  EXPECT_THROW(mla_decode_cuda(p, nullptr), Error);
  // More splits than the workspace was sized for is refused too.
  const size_t need = mla_decode_workspace_bytes(c.B, c.H, c.topk, c.L);
  Buffer ws2(Where::Device, need, "ws2");
  p.workspace = ws2.as<float>();
  p.workspace_bytes = need;
  p.splits = mla_decode_num_splits(c.B, c.H, c.topk) + 1;
  EXPECT_THROW(mla_decode_cuda(p, nullptr), Error);
  p.splits = -1;
  EXPECT_THROW(mla_decode_cuda(p, nullptr), Error);
}

// MlaDecodeParams::l2_prefetch (the combine's L2 prefetch of the next kernel's weights, before its PDL wait, as
// prefetch requests or as plain loads) changes no output bit and writes nothing: batch 1 and 2 with 64 heads (split-K with the combine), against the same launch
// without it; the prefetched region (random BF16-sized words, H regions of 256 x 512 x 2 bytes at a stride of
// 448 x 512 x 2, W_UV's place in GLM-5's kv_b) is read back unchanged. A bad rider is one clear error.
TEST(GpuMlaDecodeSplit, L2PrefetchRiderChangesNothing) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  const uint64_t seed = fresh_seed();
  for (const Case& c : {Case{512, 64, 1, 64, 2048, 30000, -1}, Case{512, 64, 2, 64, 2048, 30000, 1900}}) {
    ASSERT_GT(mla_decode_num_splits(c.B, c.H, c.topk), 1);
    Data d = make_data(c, seed);
    Buffer ql = to_device(d.q_latent, "q_latent"), qr = to_device(d.q_rope, "q_rope"), pool = to_device(d.pool, "pool"),
           idx = to_device(d.indices, "indices");
    const int64_t row = 512 * 2, stride = 448 * row, bytes = 256 * row;
    std::vector<uint32_t> w(size_t(c.H) * stride / 4);
    for (size_t i = 0; i < w.size(); ++i) w[i] = uint32_t(rng_uniform(seed, 21, i) * 4294967295.0);
    Buffer wd = to_device(w, "kv_b");
    const size_t n_out = size_t(c.B) * c.HQ() * c.L, n_lse = size_t(c.B) * c.HQ();
    const size_t ws_bytes = mla_decode_workspace_bytes(c.B, c.HQ(), c.topk, c.L);
    Buffer ws(Where::Device, ws_bytes, "ws");
    std::vector<float> out[3], lse[3];
    for (int with = 0; with < 3; ++with) {  // none, L2 prefetch requests, plain loads
      Buffer o(Where::Device, n_out * 4, "out"), l(Where::Device, n_lse * 4, "lse");
      MlaDecodeParams p = params(c, ql.as<float>(), qr.as<float>(), pool.as<uint8_t>(), d.layout, idx.as<int32_t>(),
                                 o.as<float>(), l.as<float>());
      p.workspace = ws.as<float>();
      p.workspace_bytes = ws_bytes;
      if (with) {
        p.l2_prefetch = wd.as<uint8_t>() + 192 * row;
        p.l2_prefetch_head_bytes = bytes;
        p.l2_prefetch_head_stride = stride;
        p.l2_prefetch_loads = with == 2;
      }
      mla_decode_cuda(p, nullptr);
      CUDA_CHECK(cudaDeviceSynchronize());
      out[with] = to_host<float>(o, n_out);
      lse[with] = to_host<float>(l, n_lse);
    }
    for (int with = 1; with < 3; ++with) {
      EXPECT_EQ(0, std::memcmp(out[0].data(), out[with].data(), n_out * 4)) << "B " << c.B << " form " << with;
      EXPECT_EQ(0, std::memcmp(lse[0].data(), lse[with].data(), n_lse * 4)) << "B " << c.B << " form " << with;
    }
    double ma = 0;
    for (float v : out[0]) ma = std::max(ma, double(std::fabs(v)));
    EXPECT_GT(ma, 0.0) << "the outputs compared are not all zero";
    EXPECT_TRUE(to_host<uint32_t>(wd, w.size()) == w) << "the prefetched region was written";
    MlaDecodeParams bad = params(c, ql.as<float>(), qr.as<float>(), pool.as<uint8_t>(), d.layout, idx.as<int32_t>(),
                                 ws.as<float>(), nullptr);
    bad.l2_prefetch = wd.as<uint8_t>() + 8;  // not 16-byte aligned
    bad.l2_prefetch_head_bytes = bytes;
    EXPECT_THROW(mla_decode_cuda(bad, nullptr), Error);
  }
}

// Forcing the tensor-core kernel on a shape it does not handle is an error, not a wrong answer; the
// fp32 kernel forced on a GLM-5 shape still matches the twin to fp32 order.
TEST(GpuMlaDecodeKernelChoice, ForcedKernels) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  for (const Case& c : {Case{64, 32, 2, 4, 16, 40, -1}, Case{512, 64, 2, 16, 300, 500, 250}}) {
    Data d = make_data(c, fresh_seed());
    Buffer ql = to_device(d.q_latent, "q_latent"), qr = to_device(d.q_rope, "q_rope"), pool = to_device(d.pool, "pool"),
           idx = to_device(d.indices, "indices"), out(Where::Device, size_t(c.B) * c.HQ() * c.L * 4, "out"),
           lse(Where::Device, size_t(c.B) * c.HQ() * 4, "lse");
    MlaDecodeParams p = params(c, ql.as<float>(), qr.as<float>(), pool.as<uint8_t>(), d.layout, idx.as<int32_t>(),
                               out.as<float>(), lse.as<float>());
    if (c.L != 512) {
      p.kernel = MlaDecodeKernel::TensorCore;
      EXPECT_THROW(mla_decode_cuda(p, nullptr), Error);
      continue;
    }
    p.kernel = MlaDecodeKernel::Fp32;
    mla_decode_cuda(p, nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<float> ref(size_t(c.B) * c.HQ() * c.L), ref_lse(size_t(c.B) * c.HQ());
    twin(c, d, d.q_latent, d.q_rope, ref, ref_lse);
    const std::vector<float> got = to_host<float>(out, ref.size());
    double e = 0, m = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      e = std::max(e, double(std::fabs(got[i] - ref[i])));
      m = std::max(m, double(std::fabs(ref[i])));
    }
    EXPECT_LE(e, 2e-5 * std::max(1.0, m)) << "forced fp32 kernel";
  }
}

// Not a pass/fail check: time of the decode at GLM-5 decode shapes (fp8 and bf16 rows, 64 and 16
// heads, split-K as mla_decode_num_splits chooses, and without the workspace), with the roofline
// floor max(bytes / 4.26 TB/s, FLOPs / 790 TFLOP/s) of the H200 for comparison. Pool 200k rows
// (131 MB FP8) so the selected rows come from HBM, not L2.
TEST(GpuMlaDecodeTiming, Glm5Batch) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  const int rows = 200000;
  const LatentLayout l8 = make_latent_layout(512, 64, true), l16 = bf16_layout_of(l8);
  Buffer pool(Where::Device, size_t(rows) * l8.row_bytes, "pool"), bf(Where::Device, size_t(rows) * l16.row_bytes, "bf16");
  kv_fill_random_cuda({pool.as<uint8_t>(), l8, nullptr, {}, 0, rows, 3}, nullptr);
  kv_cast_cuda({pool.as<uint8_t>(), l8, bf.as<uint16_t>(), rows}, nullptr);
  for (auto [H, s_q] : {std::pair{64, 1}, std::pair{16, 1}, std::pair{64, 2}})
    for (int B : {1, 8, 64, 128}) {
      if (s_q > 1 && B < 64) continue;
      Case c{512, 64, B, H, 2048, rows, -1, s_q};
      Data d = make_data(c, 3 + B, /*fill_pool=*/false);
      // All valid: make_data clears the last request; refill it with spread rows (one repeated row would
      // make that request's CTA contend on a single L2 line and set the kernel time).
      for (size_t i = 0; i < d.indices.size(); ++i)
        if (d.indices[i] < 0) d.indices[i] = int32_t((i * 7919u) % uint32_t(rows));
      Buffer ql = to_device(d.q_latent, "q_latent"), qr = to_device(d.q_rope, "q_rope"), idx = to_device(d.indices, "indices");
      Buffer out(Where::Device, size_t(B) * c.HQ() * 512 * 4, "out");
      const size_t ws_bytes = mla_decode_workspace_bytes(B, c.HQ(), 2048, 512);
      Buffer ws(Where::Device, std::max<size_t>(ws_bytes, 16), "mla workspace");
      for (bool fp8 : {true, false})
        for (int v = 0; v < 4; ++v) {  // 0: split-K as chosen, 1: no workspace, 2: the fp32 kernel (fp8, H 64
                                       // only), 3: fp8 TensorCore (not pipelined) / bf16 TensorCorePipelined
          const bool split = v != 1;
          if (v == 1 && ws_bytes == 0) continue;
          if (v == 2 && !(fp8 && H == 64 && s_q == 1 && B >= 64)) continue;
          if (v == 3 && !(c.HQ() >= 64 || c.HQ() <= 16)) continue;
          const LatentLayout& kl = fp8 ? l8 : l16;
          MlaDecodeParams p = params(c, ql.as<float>(), qr.as<float>(), fp8 ? pool.as<uint8_t>() : bf.as<uint8_t>(), kl,
                                     idx.as<int32_t>(), out.as<float>(), nullptr);
          if (split) {
            p.workspace = ws.as<float>();
            p.workspace_bytes = ws_bytes;
          }
          if (v == 2) p.kernel = MlaDecodeKernel::Fp32;
          if (v == 3) p.kernel = fp8 ? MlaDecodeKernel::TensorCore : MlaDecodeKernel::TensorCorePipelined;
          mla_decode_cuda(p, nullptr);
          cudaEvent_t a, e;
          CUDA_CHECK(cudaEventCreate(&a));
          CUDA_CHECK(cudaEventCreate(&e));
          CUDA_CHECK(cudaEventRecord(a));
          for (int i = 0; i < 20; ++i) mla_decode_cuda(p, nullptr);
          CUDA_CHECK(cudaEventRecord(e));
          CUDA_CHECK(cudaEventSynchronize(e));
          float ms = 0;
          CUDA_CHECK(cudaEventElapsedTime(&ms, a, e));
          const double us = ms * 1000.0 / 20, flops = 2.0 * B * c.HQ() * 2048 * (2 * 512 + 64);
          const double bytes = double(B) * 2048 * (kl.row_bytes + 4) + double(B) * c.HQ() * (576 + 513) * 4;
          const double floor_us = std::max(bytes / 4.26e6, flops / 790e6);
          std::printf("mla_decode %s %s %s B=%3d s_q=%d H=%2d topk=2048 (S=%2d): %7.1f us, %6.1f TFLOP/s, %6.0f GB/s, "
                      "%.0f%% of roofline floor %.1f us\n",
                      v == 2 ? "fp32" : v == 3 ? (fp8 ? "tc  " : "pipe") : (fp8 ? "pipe" : "tc  "), fp8 ? "fp8 " : "bf16", split ? "split " : "single", B, s_q, H,
                      split ? mla_decode_num_splits(B, c.HQ(), 2048) : 1, us, flops / us / 1e6, bytes / us / 1e3,
                      100.0 * floor_us / us, floor_us);
          CUDA_CHECK(cudaEventDestroy(a));
          CUDA_CHECK(cudaEventDestroy(e));
        }
    }
}
