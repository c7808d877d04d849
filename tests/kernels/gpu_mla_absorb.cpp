// MLA absorb / unabsorb: CUDA kernels vs CPU twins at GLM-5's dims (64 heads, nope 192, v 256,
// kv_lora 512, q head 256) with a BF16 kv_b, batch 1, 3, 32, plus odd dims and an F32 kv_b.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "common/buffer.h"
#include "common/dtype.h"
#include "common/error.h"
#include "common/rng.h"
#include "kernels/mla_absorb.h"

namespace glm5 {
namespace {

struct Err {
  double max_abs = 0, max_ref = 0;
  void add(double ref, double got) {
    max_abs = std::max(max_abs, std::abs(ref - got));
    max_ref = std::max(max_ref, std::abs(ref));
  }
};

void check(int B, int H, int nope, int rope, int v, int L, DType dt) {
  const int qk = nope + rope;
  const size_t w_elems = size_t(H) * (nope + v) * L;
  std::vector<float> wf(w_elems);
  std::vector<uint16_t> wb(w_elems);
  for (size_t i = 0; i < w_elems; ++i) {
    wb[i] = float_to_bf16_bits(rng_normal(1, 11, i) * 0.05f);
    wf[i] = bf16_bits_to_float(wb[i]);
  }
  std::vector<float> q(size_t(B) * H * qk), ol(size_t(B) * H * L);
  for (size_t i = 0; i < q.size(); ++i) q[i] = rng_normal(2, B, i);
  for (size_t i = 0; i < ol.size(); ++i) ol[i] = rng_normal(3, B, i);
  const void* hw = dt == DType::BF16 ? (const void*)wb.data() : (const void*)wf.data();
  Buffer dw(Where::Device, w_elems * dtype_size(dt), "kv_b"), dq(Where::Device, q.size() * 4, "q"),
      dol(Where::Device, ol.size() * 4, "o_latent"), dql(Where::Device, size_t(B) * H * L * 4, "q_latent"),
      dout(Where::Device, size_t(B) * H * v * 4, "out");
  dw.upload(hw, dw.bytes());
  dq.upload(q.data(), dq.bytes());
  dol.upload(ol.data(), dol.bytes());

  std::vector<float> ql(size_t(B) * H * L), out(size_t(B) * H * v);
  mla_absorb_cpu({q.data(), hw, dt, ql.data(), B, H, nope, v, L, qk});
  mla_absorb_cuda({dq.as<float>(), dw.data(), dt, dql.as<float>(), B, H, nope, v, L, qk}, nullptr);
  mla_unabsorb_cpu({ol.data(), hw, dt, out.data(), B, H, nope, v, L});
  mla_unabsorb_cuda({dol.as<float>(), dw.data(), dt, dout.as<float>(), B, H, nope, v, L}, nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<float> gql(ql.size()), gout(out.size());
  dql.download(gql.data(), dql.bytes());
  dout.download(gout.data(), dout.bytes());
  Err ea, eu;
  for (size_t i = 0; i < ql.size(); ++i) ea.add(ql[i], gql[i]);
  for (size_t i = 0; i < out.size(); ++i) eu.add(out[i], gout[i]);
  std::printf("mla B=%d H=%d nope=%d v=%d L=%d %s: absorb max abs %.3g (rel %.3g), unabsorb max abs %.3g (rel %.3g)\n",
              B, H, nope, v, L, dtype_name(dt).c_str(), ea.max_abs, ea.max_abs / ea.max_ref, eu.max_abs,
              eu.max_abs / eu.max_ref);
  EXPECT_LT(ea.max_abs / ea.max_ref, 1e-5);
  EXPECT_LT(eu.max_abs / eu.max_ref, 1e-5);
}

TEST(GpuMlaAbsorb, MatchesCpuTwin) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  for (int B : {1, 3, 32}) check(B, 64, 192, 64, 256, 512, DType::BF16);
  check(3, 5, 24, 8, 16, 40, DType::BF16);  // odd
  check(2, 3, 7, 1, 9, 33, DType::F32);
  check(1, 4, 48, 32, 32, 64, DType::BF16);  // glm5-tiny
}

TEST(GpuMlaAbsorb, BadParamsThrowBeforeLaunch) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  EXPECT_THROW(mla_absorb_cuda({nullptr, nullptr, DType::BF16, nullptr, 1, 1, 1, 1, 1, 1}, nullptr), Error);
  EXPECT_THROW(mla_unabsorb_cuda({nullptr, nullptr, DType::BF16, nullptr, 1, 1, 1, 1, 1}, nullptr), Error);
}

}  // namespace
}  // namespace glm5
