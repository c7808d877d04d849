// CUDA kernel of linear_bf16.h: BF16-weight GEMV, small m, k split over the warps of a CTA.
#include <algorithm>
#include <cstdint>

#include "common/error.h"
#include "kernels/kv_cast.cuh"
#include "kernels/kv_layout.h"
#include "kernels/linear_bf16.h"
#include "kernels/launch.cuh"
#include "kernels/bf16_dot.cuh"

namespace glm5 {

namespace {

constexpr int kWarps = 8, kThreads = 32 * kWarps;
constexpr int kRows = 4;  // output rows per CTA


template <int MT>
__global__ void __launch_bounds__(kThreads) linear_bf16_gemv_kernel(LinearParams p) {
  __shared__ float red[kWarps][kRows][MT];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int r0 = blockIdx.x * kRows;
  const int ldw = p.w_stride();
  const uint16_t* w = static_cast<const uint16_t*>(p.w);
  uint4 wv[kRows];
  auto load = [&](int c) {
#pragma unroll
    for (int r = 0; r < kRows; ++r)  // all weight loads of a step first: kRows x 16 B in flight per lane
      wv[r] = __ldg(reinterpret_cast<const uint4*>(w + size_t(min(r0 + r, p.n - 1)) * ldw + c));
  };
  // The first step's weights are in flight before the wait for the previous kernel (kernels/launch.cuh).
  int c = (warp * 32 + lane) * 8;
  if (c < p.k) load(c);
  pdl_begin();
  float acc[kRows][MT] = {};
  for (; c < p.k; c += kThreads * 8) {
#pragma unroll
    for (int t = 0; t < MT; ++t) {
      if (t < p.m) {
        const float4* xr = reinterpret_cast<const float4*>(p.x + size_t(t) * p.k + c);
        const float4 a = __ldg(xr), b = __ldg(xr + 1);
#pragma unroll
        for (int r = 0; r < kRows; ++r) acc[r][t] += dot8_bf16(wv[r], a, b);
      }
    }
    if (c + kThreads * 8 < p.k) load(c + kThreads * 8);
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r)
#pragma unroll
    for (int t = 0; t < MT; ++t) {
      const float s = warp_sum(acc[r][t]);
      if (lane == 0) red[warp][r][t] = s;
    }
  __syncthreads();
  if (threadIdx.x < kRows * MT) {
    const int r = threadIdx.x / MT, t = threadIdx.x % MT;
    if (r0 + r < p.n && t < p.m) {
      float s = 0.f;
#pragma unroll
      for (int w8 = 0; w8 < kWarps; ++w8) s += red[w8][r][t];
      float* y = p.y + size_t(t) * p.n + r0 + r;
      *y = p.accumulate ? *y + s : s;
    }
  }
}


}  // namespace

bool linear_bf16_gemv_preferred(const LinearParams& p) {
  return p.w_dtype == DType::BF16 && p.m >= 1 && p.m <= 4 && p.n > 0 &&
         int64_t(p.n) * p.k <= (int64_t(1) << 24) && p.k % 8 == 0 && p.w_stride() % 8 == 0 && aligned16(p.w) &&
         aligned16(p.x);
}

void linear_bf16_gemv_cuda(const LinearParams& p, cudaStream_t stream) {
  validate_linear_params(p, "linear_bf16_gemv_cuda", false);
  require(linear_bf16_gemv_preferred(p),
          "linear_bf16_gemv_cuda: needs BF16 weights, m <= 4, n * k <= 2^24, k and ldw multiples of 8, aligned w / x; "
          "got m = " + std::to_string(p.m) + ", n = " + std::to_string(p.n) + ", k = " + std::to_string(p.k));
  const dim3 grid((p.n + kRows - 1) / kRows);
  if (p.m == 1) launch_kernel(linear_bf16_gemv_kernel<1>, grid, kThreads, 0, stream, p);
  else if (p.m == 2) launch_kernel(linear_bf16_gemv_kernel<2>, grid, kThreads, 0, stream, p);
  else launch_kernel(linear_bf16_gemv_kernel<4>, grid, kThreads, 0, stream, p);
  CUDA_CHECK_LAUNCH();
}

}  // namespace glm5
