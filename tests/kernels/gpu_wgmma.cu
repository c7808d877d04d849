// kernels/wgmma.cuh on its own (sm_90a): D[64 x 64] = A[64 x K] . B[64 x K]^T from K-major 128-byte-swizzled
// BF16 operands in shared memory (MLA's S = Q . K^T) and D = A[64 x K] . B[K x 64] with B MN-major (MLA's
// O = P . V from V's stored rows), written by plain threads at wgmma::sw128_offset, against the product in
// double on the host. K = 64 (one panel), 576 (MLA's 512 latent + 64 rope dims: nine panels) and 768; a
// second pass accumulating into D (2 A . B^T) checks the scale-d predicate. BF16 products are exact in
// fp32, so the bound is fp32 summation: rel 1e-4 of sum |a b| per element (a layout or descriptor error
// gives errors of order 1). The same with fp16 operands (the `.f16.f16` form the MLA kernel's WgmmaF16 runs; fp16
// products are exact in fp32 too). Fresh random inputs per run. The executable is built for sm_90a only
// (CMakeLists.txt); GTEST_SKIP without a GPU, fails on a GPU that is not sm_90.
#include <gtest/gtest.h>

#include <cuda_fp16.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "common/buffer.h"
#include "common/dtype.h"
#include "common/error.h"
#include "common/rng.h"
#include "kernel_test_util.h"
#include "kernels/wgmma.cuh"

namespace glm5 {
namespace {

// One warpgroup: stages A (bf16 row-major [64][K]) and B into the swizzled layout, then `passes` times
// D (+)= A . B^T (trans_b false: B row-major [64][K], K-major) or D (+)= A . B (trans_b true: B row-major
// [K][64], MN-major), then writes D [64][64] fp32.
// kF16: the 16-bit words are fp16, the products the wgmma .f16.f16 form.
template <bool kF16>
__global__ void __launch_bounds__(128) wgmma_gemm_kernel(const uint16_t* a, const uint16_t* b, int K, int passes,
                                                         bool trans_b, float* out) {
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  uint8_t* sa = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  uint8_t* sb = sa + size_t(64) * K * 2;
  for (int i = threadIdx.x; i < 64 * K; i += blockDim.x) {
    const int r = i / K, c = i % K;
    *reinterpret_cast<uint16_t*>(sa + wgmma::sw128_offset(r, c, 64)) = a[i];
    if (!trans_b) *reinterpret_cast<uint16_t*>(sb + wgmma::sw128_offset(r, c, 64)) = b[i];
    else *reinterpret_cast<uint16_t*>(sb + wgmma::sw128_offset(i / 64, i % 64, K)) = b[i];  // b is [K][64]
  }
  wgmma::fence_proxy_async();
  __syncthreads();
  float d[32];
  for (int i = 0; i < 32; ++i) d[i] = 0.f;
  wgmma::fence();
  for (int p = 0; p < passes; ++p) {
    if (trans_b) wgmma::m64n64_bf16_ss_tb<kF16>(d, sa, sb, K, p > 0);
    else wgmma::m64n64_bf16_ss<kF16>(d, sa, sb, K, p > 0);
  }
  wgmma::commit();
  wgmma::wait<0>();
  for (int i = 0; i < 32; ++i) out[wgmma::acc_row(i, threadIdx.x) * 64 + wgmma::acc_col(i, threadIdx.x)] = d[i];
}

// One warpgroup: D[64 x 128] (+)= A[64 x K] . B[K x 128] through m64n128k16 with B MN-major (two 64-column panels,
// the descriptor's leading byte offset apart: the MLA kernel's P . V over 128 value dims at a time), `passes` times.
template <bool kF16>
__global__ void __launch_bounds__(128) wgmma_n128_kernel(const uint16_t* a, const uint16_t* b, int K, int passes,
                                                         float* out) {
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  uint8_t* sa = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  uint8_t* sb = sa + size_t(64) * K * 2;
  for (int i = threadIdx.x; i < 64 * K; i += blockDim.x)
    *reinterpret_cast<uint16_t*>(sa + wgmma::sw128_offset(i / K, i % K, 64)) = a[i];
  for (int i = threadIdx.x; i < K * 128; i += blockDim.x)  // b is [K][128]
    *reinterpret_cast<uint16_t*>(sb + wgmma::sw128_offset(i / 128, i % 128, K)) = b[i];
  wgmma::fence_proxy_async();
  __syncthreads();
  float d[2][32];
  for (int j = 0; j < 2; ++j)
    for (int i = 0; i < 32; ++i) d[j][i] = 0.f;
  wgmma::fence();
  for (int p = 0; p < passes; ++p) wgmma::m64n128_ss_tb<kF16>(d[0], d[1], sa, sb, K, p > 0);
  wgmma::commit();
  wgmma::wait<0>();
  for (int j = 0; j < 2; ++j)
    for (int i = 0; i < 32; ++i)
      out[wgmma::acc_row(i, threadIdx.x) * 128 + 64 * j + wgmma::acc_col(i, threadIdx.x)] = d[j][i];
}

// The wgmma code is built for sm_90a only: fails the test on any other GPU.
void expect_sm90() {
  int dev = 0, major = 0, minor = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
  ASSERT_TRUE(major == 9 && minor == 0) << "wgmma code is built for sm_90a; this GPU is sm_" << major << minor;
}

// A 16-bit operand word from x (bf16, or fp16 rounded by cuda_fp16's conversion) and the value a word holds.
uint16_t operand_word(float x, bool f16) { return f16 ? __half_as_ushort(__float2half_rn(x)) : float_to_bf16_bits(x); }
double operand_value(uint16_t w, bool f16) {
  return f16 ? double(__half2float(__ushort_as_half(w))) : double(bf16_bits_to_float(w));
}

TEST(GpuWgmma, SwizzledBf16AndF16ProductsMatchHost) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  ASSERT_NO_FATAL_FAILURE(expect_sm90());
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  for (int f16 = 0; f16 < 2; ++f16)
  for (int K : {64, 576, 768}) {  // 768: 2 x 96 KB + 1 KB, within the 227 KB a block may have
    // 16-bit words and their values: bf16, or (f16) fp16 rounded on the host by cuda_fp16's conversions.
    std::vector<uint16_t> a(size_t(64) * K), b(size_t(64) * K);
    auto word = [&](float x) { return operand_word(x, f16); };
    auto value = [&](uint16_t w) { return operand_value(w, f16); };
    for (size_t i = 0; i < a.size(); ++i) a[i] = word(rng_normal(seed, 1 + K, i));
    for (size_t i = 0; i < b.size(); ++i) b[i] = word(rng_normal(seed, 2 + K, i));
    auto kernel = f16 ? wgmma_gemm_kernel<true> : wgmma_gemm_kernel<false>;
    Buffer da = to_device(a, "A"), db = to_device(b, "B"), dout(Where::Device, 64 * 64 * 4, "D");
    const size_t smem = 1024 + size_t(2) * 64 * K * 2;
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    for (bool trans_b : {false, true})
      for (int passes : {1, 2}) {
        CUDA_CHECK(cudaMemset(dout.data(), 0xff, dout.bytes()));  // NaN: an element never written fails
        kernel<<<1, 128, smem>>>(da.as<uint16_t>(), db.as<uint16_t>(), K, passes, trans_b, dout.as<float>());
        CUDA_CHECK_LAUNCH();
        CUDA_CHECK(cudaDeviceSynchronize());
        const std::vector<float> got = to_host<float>(dout);
        double worst = 0;
        for (int r = 0; r < 64; ++r)
          for (int c = 0; c < 64; ++c) {
            double want = 0, mag = 0;
            for (int k = 0; k < K; ++k) {
              // B . T: b[c][k]; B (MN-major, [K][64]): b[k][c]
              const uint16_t bb = trans_b ? b[size_t(k) * 64 + c] : b[size_t(c) * K + k];
              const double p = value(a[size_t(r) * K + k]) * value(bb);
              want += p;
              mag += std::fabs(p);
            }
            const double err = std::fabs(double(got[r * 64 + c]) - passes * want) / (passes * mag);
            worst = std::isnan(err) ? 1e9 : std::max(worst, err);
          }
        std::printf("wgmma m64n64 %s K=%d %s passes=%d: max rel err %.3g of sum |a b|\n", f16 ? "f16" : "bf16", K,
                    trans_b ? "A.B (B MN-major)" : "A.B^T (B K-major)", passes, worst);
        EXPECT_LT(worst, 1e-4) << (f16 ? "f16" : "bf16") << " K " << K << " trans_b " << trans_b << " passes " << passes;
      }
  }
}

// m64n128k16 with an MN-major B of two panels (what the MLA kernel's P . V issues, two instructions per k-step
// instead of four m64n64k16): K = 64 (the MLA tile's rows) and 128, bf16 and fp16, one and two passes, against the
// product in double on the host (the same bound as above; a wrong leading byte offset puts panel 0's values in
// columns 64..127 and fails by order 1).
TEST(GpuWgmma, N128MnMajorBMatchesHost) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  ASSERT_NO_FATAL_FAILURE(expect_sm90());
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  for (int f16 = 0; f16 < 2; ++f16)
    for (int K : {64, 128}) {
      std::vector<uint16_t> a(size_t(64) * K), b(size_t(K) * 128);
      auto word = [&](float x) { return operand_word(x, f16); };
      auto value = [&](uint16_t w) { return operand_value(w, f16); };
      for (size_t i = 0; i < a.size(); ++i) a[i] = word(rng_normal(seed, 11 + K, i));
      for (size_t i = 0; i < b.size(); ++i) b[i] = word(rng_normal(seed, 12 + K, i));
      auto kernel = f16 ? wgmma_n128_kernel<true> : wgmma_n128_kernel<false>;
      Buffer da = to_device(a, "A"), db = to_device(b, "B"), dout(Where::Device, 64 * 128 * 4, "D");
      const size_t smem = 1024 + size_t(64) * K * 2 + size_t(K) * 128 * 2;
      CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
      for (int passes : {1, 2}) {
        CUDA_CHECK(cudaMemset(dout.data(), 0xff, dout.bytes()));  // NaN: an element never written fails
        kernel<<<1, 128, smem>>>(da.as<uint16_t>(), db.as<uint16_t>(), K, passes, dout.as<float>());
        CUDA_CHECK_LAUNCH();
        CUDA_CHECK(cudaDeviceSynchronize());
        const std::vector<float> got = to_host<float>(dout);
        double worst = 0;
        for (int r = 0; r < 64; ++r)
          for (int c = 0; c < 128; ++c) {
            double want = 0, mag = 0;
            for (int k = 0; k < K; ++k) {
              const double p = value(a[size_t(r) * K + k]) * value(b[size_t(k) * 128 + c]);
              want += p;
              mag += std::fabs(p);
            }
            const double err = std::fabs(double(got[r * 128 + c]) - passes * want) / (passes * mag);
            worst = std::isnan(err) ? 1e9 : std::max(worst, err);
          }
        std::printf("wgmma m64n128 %s K=%d A.B (B MN-major, 2 panels) passes=%d: max rel err %.3g of sum |a b|\n",
                    f16 ? "f16" : "bf16", K, passes, worst);
        EXPECT_LT(worst, 1e-4) << (f16 ? "f16" : "bf16") << " K " << K << " passes " << passes;
      }
    }
}

}  // namespace
}  // namespace glm5
