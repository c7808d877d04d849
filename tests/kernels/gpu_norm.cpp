// RMSNorm / LayerNorm: CUDA kernels vs CPU twins on random rows at GLM-5's sizes (hidden 6144,
// q_lora 2048, kv_lora 512, indexer head 128) and odd ones, batch 1, 3, 32, strided and in place.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "common/buffer.h"
#include "common/error.h"
#include "kernels/norm.h"
#include "kernel_test_util.h"

namespace glm5 {
namespace {

void check(bool layer, int rows, int dim, int stride, bool in_place) {
  std::mt19937 rng(rows * 7919 + dim + layer);
  std::normal_distribution<float> nd(0.3f, 2.f);
  std::vector<float> x(size_t(rows) * stride), w(dim), bias(dim), y(size_t(rows) * stride, -5.f);
  for (auto& v : x) v = nd(rng);
  for (auto& v : w) v = 1.f + 0.2f * nd(rng);
  for (auto& v : bias) v = 0.1f * nd(rng);
  Buffer dx = to_device(x), dw = to_device(w), db = to_device(bias), dy = to_device(y);
  NormParams hp{x.data(), w.data(), layer ? bias.data() : nullptr, in_place ? x.data() : y.data(), rows, dim,
                stride, stride, layer ? 1e-6f : 1e-5f};
  NormParams dp = hp;
  dp.x = dx.as<float>();
  dp.weight = dw.as<float>();
  dp.bias = layer ? db.as<float>() : nullptr;
  dp.y = in_place ? dx.as<float>() : dy.as<float>();
  if (layer) { layernorm_cpu(hp); layernorm_cuda(dp, nullptr); }
  else { rmsnorm_cpu(hp); rmsnorm_cuda(dp, nullptr); }
  CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<float> ref = in_place ? x : y;
  const std::vector<float> got = to_host<float>(in_place ? dx : dy);
  double max_abs = 0, max_rel = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double e = std::abs(double(ref[i]) - got[i]);
    max_abs = std::max(max_abs, e);
    max_rel = std::max(max_rel, e / std::max(1.0, std::abs(double(ref[i]))));
  }
  std::printf("%s rows=%d dim=%d stride=%d in_place=%d: max abs %.3g, max rel %.3g\n", layer ? "layernorm" : "rmsnorm",
              rows, dim, stride, int(in_place), max_abs, max_rel);
  EXPECT_LT(max_rel, 1e-5);
}

TEST(GpuNorm, MatchesCpuTwin) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  for (bool layer : {false, true})
    for (int rows : {1, 3, 32})
      for (int dim : {6144, 2048, 512, 128, 1, 257}) check(layer, rows, dim, dim, false);
  check(false, 3, 512, 576, false);  // kv_a output: latent 512 of a 576-wide row
  check(false, 32, 6144, 6144, true);
  check(true, 3, 128, 130, true);
}

TEST(GpuNorm, BadParamsThrowBeforeLaunch) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  NormParams p{nullptr, nullptr, nullptr, nullptr, 1, 4, 4, 4, 1e-6f};
  EXPECT_THROW(rmsnorm_cuda(p, nullptr), Error);
  EXPECT_THROW(layernorm_cuda(p, nullptr), Error);
}

}  // namespace
}  // namespace glm5
