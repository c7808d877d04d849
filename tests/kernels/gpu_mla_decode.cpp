// GPU tests of kernels/mla_decode.h: the CUDA kernel against the CPU twin (shape sweep, -1 padding,
// all-invalid requests), and the three KV paths (fp8, cast, gather-cast) agreeing on the GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "common/buffer.h"
#include "common/error.h"
#include "common/rng.h"
#include "kernels/kv_cache.h"
#include "kernels/kv_cast.h"
#include "kernels/mla_decode.h"
#include "kernel_test_util.h"

using namespace glm5;

namespace {

struct Case {
  int L, R, B, H, topk, rows, valid;  // `valid`: indices per request that are >= 0 (rest -1); -1: all
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
  d.q_latent.resize(size_t(c.B) * c.H * c.L);
  d.q_rope.resize(size_t(c.B) * c.H * c.R);
  for (size_t i = 0; i < d.q_latent.size(); ++i) d.q_latent[i] = 0.2f * rng_normal(seed, 11, i);
  for (size_t i = 0; i < d.q_rope.size(); ++i) d.q_rope[i] = 0.2f * rng_normal(seed, 12, i);
  d.indices.resize(size_t(c.B) * c.topk);
  for (int b = 0; b < c.B; ++b)
    for (int j = 0; j < c.topk; ++j) {
      const bool ok = c.valid < 0 || j < c.valid;
      d.indices[size_t(b) * c.topk + j] = ok ? int32_t(rng_uniform(seed, 13, size_t(b) * c.topk + j) * c.rows) : -1;
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
  p.topk = c.topk;
  p.scale = 1.f / std::sqrt(256.f);
  return p;
}

}  // namespace

// Runs mla_decode_cuda (split-K when `split`, with a workspace of exactly the documented size) and
// returns out and lse on the host.
struct GpuResult {
  std::vector<float> out, lse;
};
GpuResult run_gpu(const Case& c, const Buffer& ql, const Buffer& qr, const uint8_t* kv, LatentLayout layout,
                  const int32_t* idx, bool split) {
  const size_t n_out = size_t(c.B) * c.H * c.L, n_lse = size_t(c.B) * c.H;
  Buffer o(Where::Device, n_out * 4, "out"), l(Where::Device, n_lse * 4, "lse");
  const size_t ws_bytes = split ? mla_decode_workspace_bytes(c.B, c.H, c.topk, c.L) : 0;
  Buffer ws(Where::Device, std::max<size_t>(ws_bytes, 16), "mla workspace");
  MlaDecodeParams p = params(c, ql.as<float>(), qr.as<float>(), kv, layout, idx, o.as<float>(), l.as<float>());
  if (split) {
    p.workspace = ws.as<float>();
    p.workspace_bytes = ws_bytes;
  }
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
  const size_t n_out = size_t(c.B) * c.H * c.L, n_lse = size_t(c.B) * c.H;
  std::vector<float> out(n_out), lse(n_lse);
  mla_decode_cpu(params(c, d.q_latent.data(), d.q_rope.data(), d.pool.data(), d.layout, d.indices.data(), out.data(),
                        lse.data()));

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

  for (bool split : {false, true}) {
    SCOPED_TRACE(split ? "split-K path" : "single-pass path");
    const GpuResult g = run_gpu(c, ql, qr, pool.as<uint8_t>(), d.layout, idx.as<int32_t>(), split);
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
    std::printf("mla_decode %s L=%d B=%d H=%d topk=%d (S=%d): max abs err %.3g (max |out| %.3g), max lse err %.3g\n",
                split ? "split" : "single", c.L, c.B, c.H, c.topk, split ? mla_decode_num_splits(c.B, c.H, c.topk) : 1,
                max_abs, max_ref, max_lse);
    EXPECT_LE(max_abs, 2e-5 * std::max(1.0, max_ref));
    EXPECT_LE(max_lse, 2e-5);
    if (c.B > 1) {
      for (int i = 0; i < c.H * c.L; ++i) ASSERT_EQ(g.out[size_t(c.B - 1) * c.H * c.L + i], 0.f);
    }

    // cast and gather-cast paths on the GPU: same values, same kernel order -> the same bits as fp8.
    const GpuResult gc = run_gpu(c, ql, qr, bf.as<uint8_t>(), bf16_layout_of(d.layout), idx.as<int32_t>(), split);
    const GpuResult gg = run_gpu(c, ql, qr, compact.as<uint8_t>(), bf16_layout_of(d.layout), cidx.as<int32_t>(), split);
    EXPECT_EQ(gc.out, g.out) << "cast path differs from fp8 path";
    EXPECT_EQ(gg.out, g.out) << "gather-cast path differs from fp8 path";
    EXPECT_EQ(0, std::memcmp(gc.lse.data(), g.lse.data(), n_lse * 4));
    EXPECT_EQ(0, std::memcmp(gg.lse.data(), g.lse.data(), n_lse * 4));
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
                                           Case{512, 64, 1, 1, 33, 50, -1}));

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
}

// Not a pass/fail check: time of the fp8 decode at GLM-5 decode shapes, single-pass and split-K.
TEST(GpuMlaDecodeTiming, Glm5Batch) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  for (int B : {1, 32, 128}) {
    Case c{512, 64, B, 64, 2048, 100000, -1};
    Data d = make_data(c, 3, /*fill_pool=*/false);
    Buffer ql = to_device(d.q_latent, "q_latent"), qr = to_device(d.q_rope, "q_rope"),
           pool(Where::Device, d.pool.size(), "pool"), idx = to_device(d.indices, "indices");
    kv_fill_random_cuda({pool.as<uint8_t>(), d.layout, nullptr, {}, 0, c.rows, 3}, nullptr);
    Buffer out(Where::Device, size_t(B) * 64 * 512 * 4, "out");
    const size_t ws_bytes = mla_decode_workspace_bytes(B, 64, 2048, 512);
    Buffer ws(Where::Device, std::max<size_t>(ws_bytes, 16), "mla workspace");
    for (bool split : {false, true}) {
      MlaDecodeParams p = params(c, ql.as<float>(), qr.as<float>(), pool.as<uint8_t>(), d.layout, idx.as<int32_t>(),
                                 out.as<float>(), nullptr);
      if (split) {
        p.workspace = ws.as<float>();
        p.workspace_bytes = ws_bytes;
      }
      mla_decode_cuda(p, nullptr);
      cudaEvent_t a, e;
      CUDA_CHECK(cudaEventCreate(&a));
      CUDA_CHECK(cudaEventCreate(&e));
      CUDA_CHECK(cudaEventRecord(a));
      for (int i = 0; i < 10; ++i) mla_decode_cuda(p, nullptr);
      CUDA_CHECK(cudaEventRecord(e));
      CUDA_CHECK(cudaEventSynchronize(e));
      float ms = 0;
      CUDA_CHECK(cudaEventElapsedTime(&ms, a, e));
      const double us = ms * 100.0, flops = 2.0 * B * 64 * 2048 * (2 * 512 + 64);
      std::printf("mla_decode fp8 %s B=%d H=64 topk=2048 (S=%d, workspace %.1f MB): %.1f us, %.2f TFLOP/s\n",
                  split ? "split " : "single", B, split ? mla_decode_num_splits(B, 64, 2048) : 1, ws_bytes / 1e6, us,
                  flops / us / 1e6);
      CUDA_CHECK(cudaEventDestroy(a));
      CUDA_CHECK(cudaEventDestroy(e));
    }
  }
}
