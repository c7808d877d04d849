// Elementwise ops: CUDA kernels vs CPU twins: embedding (F32/BF16, GLM-5 vocab 154880 ids),
// residual add, SwiGLU (inter 2048 / 12288 / odd), argmax over 154880 logits with ties and NaN,
// fp32 -> bf16 rounding (bit-exact with the host's round-to-nearest-even).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <vector>

#include "common/buffer.h"
#include "common/dtype.h"
#include "common/error.h"
#include "kernels/elementwise.h"
#include "kernel_test_util.h"

namespace glm5 {
namespace {

TEST(GpuElementwise, Embedding) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (auto [vocab, dim] : {std::pair{154880, 64}, std::pair{1000, 6144}, std::pair{13, 7}}) {
    std::uniform_int_distribution<int32_t> td(0, vocab - 1);
    std::vector<float> table(size_t(vocab) * dim);
    for (auto& v : table) v = nd(rng);
    std::vector<uint16_t> table_bf16(table.size());
    for (size_t i = 0; i < table.size(); ++i) table_bf16[i] = float_to_bf16_bits(table[i]);
    for (int rows : {1, 3, 32}) {
      std::vector<int32_t> tokens(rows);
      for (auto& t : tokens) t = td(rng);
      tokens[0] = vocab - 1;
      for (DType dt : {DType::F32, DType::BF16}) {
        std::vector<float> out(size_t(rows) * dim);
        const void* host_table = dt == DType::F32 ? (const void*)table.data() : (const void*)table_bf16.data();
        Buffer dtab = dt == DType::F32 ? to_device(table) : to_device(table_bf16);
        Buffer dtok = to_device(tokens), dout(Where::Device, out.size() * 4, "out");
        embedding_cpu({tokens.data(), host_table, dt, out.data(), rows, dim});
        embedding_cuda({dtok.as<int32_t>(), dtab.data(), dt, dout.as<float>(), rows, dim}, nullptr);
        CUDA_CHECK(cudaDeviceSynchronize());
        EXPECT_EQ(to_host<float>(dout), out) << "vocab " << vocab << " dim " << dim << " rows " << rows;
      }
    }
  }
}

TEST(GpuElementwise, AddAndSiluMul) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  std::mt19937 rng(2);
  std::normal_distribution<float> nd(0.f, 3.f);
  for (int64_t n : {int64_t(6144), int64_t(6144) * 32, int64_t(12345), int64_t(1), int64_t(3) << 20}) {
    std::vector<float> y(n), x(n);
    for (auto& v : y) v = nd(rng);
    for (auto& v : x) v = nd(rng);
    Buffer dy = to_device(y), dx = to_device(x);
    add_inplace_cpu({y.data(), x.data(), n});
    add_inplace_cuda({dy.as<float>(), dx.as<float>(), n}, nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
    EXPECT_EQ(to_host<float>(dy), y) << "n " << n;
  }
  for (int rows : {1, 3, 32})
    for (int inter : {2048, 12288, 77}) {
      std::vector<float> gu(size_t(rows) * 2 * inter), out(size_t(rows) * inter);
      for (auto& v : gu) v = nd(rng);
      Buffer dgu = to_device(gu), dout(Where::Device, out.size() * 4, "out");
      silu_mul_cpu({gu.data(), out.data(), rows, inter});
      silu_mul_cuda({dgu.as<float>(), dout.as<float>(), rows, inter}, nullptr);
      CUDA_CHECK(cudaDeviceSynchronize());
      const std::vector<float> got = to_host<float>(dout);
      double max_abs = 0, max_rel = 0;
      for (size_t i = 0; i < out.size(); ++i) {
        const double e = std::abs(double(out[i]) - got[i]);
        max_abs = std::max(max_abs, e);
        max_rel = std::max(max_rel, e / std::max(1e-3, std::abs(double(out[i]))));
      }
      std::printf("silu_mul rows=%d inter=%d: max abs %.3g, max rel %.3g\n", rows, inter, max_abs, max_rel);
      EXPECT_LT(max_rel, 1e-5);
    }
}

TEST(GpuElementwise, Argmax) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.f, 5.f);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int rows : {1, 3, 32})
    for (int n : {154880, 1, 33, 4097}) {
      std::vector<float> logits(size_t(rows) * n);
      for (auto& v : logits) v = nd(rng);
      std::uniform_int_distribution<int> jd(0, n - 1);
      for (int r = 0; r < rows; ++r) {
        float* row = logits.data() + size_t(r) * n;
        if (r % 3 == 1) {  // a tie for the max at two places: the first must win
          const int a = jd(rng), b = jd(rng);
          row[a] = row[b] = 1e6f;
        }
        if (r % 3 == 2) {  // NaN sprinkled, including at the front
          for (int t = 0; t < 10; ++t) row[jd(rng)] = nan;
          row[0] = nan;
        }
      }
      if (rows == 3) std::fill(logits.begin() + 2 * size_t(n), logits.end(), nan);  // an all-NaN row
      std::vector<int32_t> out(rows);
      Buffer dl = to_device(logits), dout(Where::Device, rows * 4, "out");
      argmax_cpu({logits.data(), out.data(), rows, n});
      argmax_cuda({dl.as<float>(), dout.as<int32_t>(), rows, n}, nullptr);
      CUDA_CHECK(cudaDeviceSynchronize());
      EXPECT_EQ(to_host<int32_t>(dout), out) << "rows " << rows << " n " << n;
    }
}

TEST(GpuElementwise, F32ToBf16RoundsToNearestEven) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  std::mt19937 rng(4);
  std::normal_distribution<float> nd(0.f, 100.f);
  std::vector<float> src(100003);
  for (auto& v : src) v = nd(rng);
  // Exact ties: 1 + 2^-8 (rounds down to even), 1 + 3*2^-8 (rounds up), and specials.
  const float specials[] = {1.00390625f, 1.01171875f, -1.00390625f, 0.f, -0.f,
                            std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::max(), std::numeric_limits<float>::denorm_min(),
                            std::numeric_limits<float>::quiet_NaN()};
  for (size_t i = 0; i < std::size(specials); ++i) src[i] = specials[i];
  Buffer ds = to_device(src), dd(Where::Device, src.size() * 2, "bf16");
  f32_to_bf16_cuda(ds.as<float>(), dd.as<uint16_t>(), int64_t(src.size()), nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<uint16_t> got = to_host<uint16_t>(dd);
  int mismatches = 0;
  for (size_t i = 0; i < src.size(); ++i) {
    if (std::isnan(src[i])) {
      EXPECT_TRUE(std::isnan(bf16_bits_to_float(got[i])));
      continue;
    }
    if (got[i] != float_to_bf16_bits(src[i]) && mismatches++ < 5)
      ADD_FAILURE() << "src " << src[i] << ": got 0x" << std::hex << got[i] << " expected 0x"
                    << float_to_bf16_bits(src[i]);
  }
  EXPECT_EQ(mismatches, 0);
  EXPECT_EQ(got[0], 0x3f80);  // 1 + 2^-8 -> 1.0 (tie to even)
  EXPECT_EQ(got[1], 0x3f82);  // 1 + 3*2^-8 -> 1 + 2^-6 (tie to even)
}

TEST(GpuElementwise, BadParamsThrowBeforeLaunch) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  EXPECT_THROW(add_inplace_cuda({nullptr, nullptr, 4}, nullptr), Error);
  EXPECT_THROW(argmax_cuda({nullptr, nullptr, 1, 1}, nullptr), Error);
  EXPECT_THROW(f32_to_bf16_cuda(nullptr, nullptr, 4, nullptr), Error);
}

}  // namespace
}  // namespace glm5
