// Throughput of e4m3 -> bf16 dequantization variants (round_bf16(e4m3 * scale), the value math of kv_cast and the
// MLA kernels' FP8 feed) on the GPU, shared memory to shared memory, with the wgmma producer's shape: 256 threads
// per CTA, one CTA per SM, 16 codes per step. A diagnostic, not a test. It first checks every variant bitwise
// against the hardware-convert reference (dequant16_bf16) on all 254 finite codes x scales from 2^-20 to 2^7
// (with random mantissas), then times them.
//   V0 dequant16_bf16: cvt.rn.f16x2.e4m3x2, f16 -> f32 converts, fp32 multiply, cvt.rn.bf16x2.f32.
//   V1 the f16 halves moved into fp32 by integer ops (bits >> 3 with sign: value * 2^-112), then * 2^112 * scale.
//   V2 no e4m3 convert at all: each code's bits placed into fp32 by integer ops (value * 2^-120), * 2^120, * scale.
//   V3 V2 with one multiply by scale * 2^120 (exact for scale < 2^8).
// Build: nvcc -std=c++20 -O3 -arch=sm_90a -I. -Isrc tools/probe/dequant_probe.cu build-lead/libglm5_common.a
//          -o build-lead/dequant_probe
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "common/error.h"
#include "kernels/kv_cast.cuh"

using namespace glm5;

// V1: two f16 (a half2's bits) -> the two fp32 values times 2^-112, exactly (normal and subnormal halves alike).
__device__ __forceinline__ void f16x2_bits_to_f32_scaled(uint32_t h, float& lo, float& hi) {
  hi = __int_as_float(int(h) >> 3 & int(0x8fffe000u));
  lo = __int_as_float(int(__byte_perm(h, 0, 0x1054)) >> 3 & int(0x8fffe000u));
}
__device__ __forceinline__ void dequant16_v1(uint4 codes, float scale, uint4* out) {
  const uint32_t w[4] = {codes.x, codes.y, codes.z, codes.w};
  uint32_t o[8];
#pragma unroll
  for (int k = 0; k < 4; ++k) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const __half2_raw raw = __nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t(w[k] >> (16 * h)), __NV_E4M3);
      uint32_t bits;
      std::memcpy(&bits, &raw, 4);
      float lo, hi;
      f16x2_bits_to_f32_scaled(bits, lo, hi);
      const __nv_bfloat162 two = __float22bfloat162_rn(make_float2(lo * 0x1p112f * scale, hi * 0x1p112f * scale));
      std::memcpy(&o[2 * k + h], &two, 4);
    }
  }
  out[0] = make_uint4(o[0], o[1], o[2], o[3]);
  out[1] = make_uint4(o[4], o[5], o[6], o[7]);
}

// V2: code byte k of w -> fp32 bits sign << 31 | (code & 0x7f) << 20 = value * 2^-120 (e4m3 subnormals included).
template <int k>
__device__ __forceinline__ float e4m3_byte_scaled(uint32_t w) {
  const uint32_t top = k == 3 ? w : __byte_perm(w, 0, 0x0444 | (k << 12));  // byte k in bits 24..31, zeros below
  return __int_as_float(int(top) >> 4 & int(0x87f00000u));
}
__device__ __forceinline__ void dequant16_v2(uint4 codes, float scale, uint4* out) {
  const uint32_t w[4] = {codes.x, codes.y, codes.z, codes.w};
  uint32_t o[8];
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const float a = e4m3_byte_scaled<0>(w[k]) * 0x1p120f, b = e4m3_byte_scaled<1>(w[k]) * 0x1p120f;
    const float c = e4m3_byte_scaled<2>(w[k]) * 0x1p120f, d = e4m3_byte_scaled<3>(w[k]) * 0x1p120f;
    const __nv_bfloat162 lo = __float22bfloat162_rn(make_float2(a * scale, b * scale));
    const __nv_bfloat162 hi = __float22bfloat162_rn(make_float2(c * scale, d * scale));
    std::memcpy(&o[2 * k], &lo, 4);
    std::memcpy(&o[2 * k + 1], &hi, 4);
  }
  out[0] = make_uint4(o[0], o[1], o[2], o[3]);
  out[1] = make_uint4(o[4], o[5], o[6], o[7]);
}

// V3: V2 with 2^120 folded into the scale (one multiply per code; exact while scale * 2^120 is finite, scale < 2^8).
__device__ __forceinline__ void dequant16_v3(uint4 codes, float scale, uint4* out) {
  const uint32_t w[4] = {codes.x, codes.y, codes.z, codes.w};
  const float s = scale * 0x1p120f;
  uint32_t o[8];
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const __nv_bfloat162 lo = __float22bfloat162_rn(make_float2(e4m3_byte_scaled<0>(w[k]) * s, e4m3_byte_scaled<1>(w[k]) * s));
    const __nv_bfloat162 hi = __float22bfloat162_rn(make_float2(e4m3_byte_scaled<2>(w[k]) * s, e4m3_byte_scaled<3>(w[k]) * s));
    std::memcpy(&o[2 * k], &lo, 4);
    std::memcpy(&o[2 * k + 1], &hi, 4);
  }
  out[0] = make_uint4(o[0], o[1], o[2], o[3]);
  out[1] = make_uint4(o[4], o[5], o[6], o[7]);
}

template <int V>
__device__ __forceinline__ void dequant(uint4 c, float s, uint4* out) {
  if constexpr (V == 0) dequant16_bf16(c, s, out);
  else if constexpr (V == 1) dequant16_v1(c, s, out);
  else if constexpr (V == 2) dequant16_v2(c, s, out);
  else dequant16_v3(c, s, out);
}

// Check: thread i converts chunk i of `codes` with scales[i].
template <int V>
__global__ void check_kernel(const uint4* codes, const float* scales, uint4* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) dequant<V>(codes[i], scales[i], out + 2 * i);
}

// Timing: each thread converts 8 chunks per step (2 rows x 4 chunks, as a producer lane per tile) from shared memory
// into shared memory, `steps` times; the result's xor goes to global memory so nothing is dead code.
template <int V>
__global__ void __launch_bounds__(256, 1) time_kernel(const uint4* src, float scale, int steps, uint32_t* sink) {
  __shared__ uint4 in_s[256 * 8];
  __shared__ uint4 out_s[256 * 16];
  const int t = threadIdx.x;
  for (int k = 0; k < 8; ++k) in_s[t + 256 * k] = src[(blockIdx.x * 8 + k) * 256 + t];
  __syncthreads();
  uint32_t acc = 0;
  for (int s = 0; s < steps; ++s) {
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      uint4 v[2];
      dequant<V>(in_s[t + 256 * ((k + s) & 7)], scale, v);
      out_s[2 * (t + 256 * k)] = v[0];
      out_s[2 * (t + 256 * k) + 1] = v[1];
    }
    acc ^= out_s[2 * (t + 256 * (s & 7))].x;  // this thread's own output: no cross-thread read
  }
  sink[blockIdx.x * 256 + t] = acc;
}

template <int V>
int run_check(const uint4* dc, const float* ds, uint4* dout, int n, const std::vector<uint4>& ref) {
  check_kernel<V><<<(n + 255) / 256, 256>>>(dc, ds, dout, n);
  CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<uint4> got(2 * n);
  CUDA_CHECK(cudaMemcpy(got.data(), dout, got.size() * 16, cudaMemcpyDeviceToHost));
  int bad = 0;
  for (int i = 0; i < 2 * n; ++i)
    bad += std::memcmp(&got[i], &ref[i], 16) != 0;
  std::printf("V%d: %d of %d output chunks differ from V0\n", V, bad, 2 * n);
  return bad;
}

template <int V>
int run_time(const uint4* src, uint32_t* sink, int sms) {
  const int steps = 4096;
  cudaEvent_t e0, e1;
  CUDA_CHECK(cudaEventCreate(&e0));
  CUDA_CHECK(cudaEventCreate(&e1));
  time_kernel<V><<<sms, 256>>>(src, 0.0123f, 16, sink);  // warm-up
  CUDA_CHECK(cudaEventRecord(e0));
  time_kernel<V><<<sms, 256>>>(src, 0.0123f, steps, sink);
  CUDA_CHECK(cudaEventRecord(e1));
  CUDA_CHECK(cudaEventSynchronize(e1));
  float ms = 0;
  CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
  int clk_khz = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&clk_khz, cudaDevAttrClockRate, 0));
  const double chunks_per_sm = double(steps) * 8 * 256;
  const double cycles = ms * 1e-3 * clk_khz * 1e3;
  std::printf("V%d: %.3f ms, %.1f codes per SM-cycle (at the %d MHz attribute clock); a 64 x 512 tile = %.0f cycles\n",
              V, ms, chunks_per_sm * 16 / cycles, clk_khz / 1000, 64.0 * 512 / (chunks_per_sm * 16 / cycles));
  return 0;
}

int run() {
  // Check inputs: every finite code (0x7f / 0xff are NaN) in every byte position, with 64 scales.
  std::vector<uint8_t> codes_list;
  for (int c = 0; c < 256; ++c)
    if ((c & 0x7f) != 0x7f) codes_list.push_back(uint8_t(c));
  std::mt19937 g(7);
  std::vector<float> scale_list;
  for (int e = -20; e <= 7; ++e) scale_list.push_back(std::ldexp(1.f + float(g() % 1024) / 1024.f, e));
  for (int r = 0; r < 36; ++r) scale_list.push_back(std::ldexp(float(g() % 100000 + 1) / 100000.f, -int(g() % 12)));
  const int n = int(scale_list.size()) * 256;  // chunks of 16 codes
  std::vector<uint4> hc(n);
  std::vector<float> hs(n);
  for (int i = 0; i < n; ++i) {
    uint8_t b[16];
    for (int k = 0; k < 16; ++k) b[k] = codes_list[(i * 16 + k * 7 + i / 256) % codes_list.size()];
    std::memcpy(&hc[i], b, 16);
    hs[i] = scale_list[i / 256];
  }
  uint4 *dc, *dout;
  float* ds;
  CUDA_CHECK(cudaMalloc(&dc, n * 16));
  CUDA_CHECK(cudaMalloc(&ds, n * 4));
  CUDA_CHECK(cudaMalloc(&dout, 2 * n * 16));
  CUDA_CHECK(cudaMemcpy(dc, hc.data(), n * 16, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(ds, hs.data(), n * 4, cudaMemcpyHostToDevice));
  check_kernel<0><<<(n + 255) / 256, 256>>>(dc, ds, dout, n);
  CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<uint4> ref(2 * n);
  CUDA_CHECK(cudaMemcpy(ref.data(), dout, ref.size() * 16, cudaMemcpyDeviceToHost));
  int bad = run_check<1>(dc, ds, dout, n, ref) + run_check<2>(dc, ds, dout, n, ref) + run_check<3>(dc, ds, dout, n, ref);

  int sms = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  uint4* src;
  uint32_t* sink;
  const size_t m = size_t(sms) * 8 * 256;
  CUDA_CHECK(cudaMalloc(&src, m * 16));
  CUDA_CHECK(cudaMalloc(&sink, size_t(sms) * 256 * 4));
  std::vector<uint4> hsrc(m);
  for (auto& x : hsrc) x = make_uint4(g() & 0x77777777u, g() & 0x77777777u, g() & 0x77777777u, g() & 0x77777777u);
  CUDA_CHECK(cudaMemcpy(src, hsrc.data(), m * 16, cudaMemcpyHostToDevice));
  run_time<0>(src, sink, sms);
  run_time<1>(src, sink, sms);
  run_time<2>(src, sink, sms);
  run_time<3>(src, sink, sms);
  return bad ? 2 : 0;
}

// A failed CUDA call (CUDA_CHECK throws glm5::Error) is one line and exit 1.
int main() {
  try {
    return run();
  } catch (const glm5::Error& e) {
    std::fprintf(stderr, "dequant_probe: %s\n", e.what());
    return 1;
  }
}
