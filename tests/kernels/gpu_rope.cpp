// RoPE: CUDA kernel vs CPU twin on GLM-5's layouts: main attention (64 heads x (192 nope + 64 rope),
// rope at offset 192) and the indexer (32 heads x 128, rope first 64), both pair layouts, batch
// 1, 3, 32, positions up to 200k, and odd sizes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "common/buffer.h"
#include "common/error.h"
#include "kernels/rope.h"
#include "kernel_test_util.h"

namespace glm5 {
namespace {

void check(int rows, int heads, int head_stride, int offset, int rope_dim, bool interleave, float scaling) {
  std::mt19937 rng(rows * 31 + heads + rope_dim + interleave);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::uniform_int_distribution<int32_t> pd(0, 200000);
  const int row_stride = heads * head_stride;
  std::vector<float> x(size_t(rows) * row_stride), inv_freq(rope_dim / 2);
  for (auto& v : x) v = nd(rng);
  for (int i = 0; i < rope_dim / 2; ++i) inv_freq[i] = float(1.0 / std::pow(1e6, 2.0 * i / rope_dim));
  std::vector<int32_t> pos(rows);
  for (auto& v : pos) v = pd(rng);
  pos[0] = 0;
  if (rows > 1) pos[1] = 202751;
  Buffer dx = to_device(x), dpos = to_device(pos), dfreq = to_device(inv_freq);
  RopeParams hp{x.data(), pos.data(), inv_freq.data(), rows, heads, row_stride, head_stride, offset, rope_dim,
                interleave, scaling};
  RopeParams dp = hp;
  dp.x = dx.as<float>();
  dp.positions = dpos.as<int32_t>();
  dp.inv_freq = dfreq.as<float>();
  rope_cpu(hp);
  rope_cuda(dp, nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<float> got(x.size());
  dx.download(got.data(), dx.bytes());
  double max_abs = 0;
  for (size_t i = 0; i < x.size(); ++i) max_abs = std::max(max_abs, std::abs(double(x[i]) - got[i]));
  std::printf("rope rows=%d heads=%d stride=%d offset=%d rope=%d interleave=%d: max abs %.3g (|x| ~ 1)\n", rows,
              heads, head_stride, offset, rope_dim, int(interleave), max_abs);
  EXPECT_LT(max_abs, 1e-5);
}

TEST(GpuRope, MatchesCpuTwin) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  for (int rows : {1, 3, 32})
    for (bool interleave : {false, true}) {
      check(rows, 64, 256, 192, 64, interleave, 1.f);  // attention q: 192 nope + 64 rope
      check(rows, 1, 576, 512, 64, interleave, 1.f);   // kv_a output: 512 latent + 64 rope
      check(rows, 32, 128, 0, 64, interleave, 1.f);    // indexer q: rope first
    }
  check(5, 7, 30, 3, 26, false, 1.3f);  // odd: 7 heads, rope 26 at offset 3, YaRN-like scaling
  check(2, 3, 2, 0, 2, true, 1.f);
}

TEST(GpuRope, BadParamsThrowBeforeLaunch) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  RopeParams p{nullptr, nullptr, nullptr, 1, 1, 4, 4, 0, 4, false, 1.f};
  EXPECT_THROW(rope_cuda(p, nullptr), Error);
}

}  // namespace
}  // namespace glm5
