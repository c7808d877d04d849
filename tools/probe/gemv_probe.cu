// How close the batch-1 FP8 GEMV (linear_fp8_gemv_cuda) comes to what a plain read of the same bytes achieves on
// this GPU, at the decode step's shapes (o_proj 6144 x 16384 = 100 MB; q_b 16384 x 2048; one expert's gate+up
// 4096 x 6144). A diagnostic, not a test. Built several times with -DGLM5_GEMV_U=... -DGLM5_GEMV_MIN_BLOCKS=...
// (kernels/linear_fp8.cu's loads in flight per row and CTAs per SM) to sweep them.
//   read_U: every thread streams 16-byte loads, U in flight, grid = resident CTAs (256 threads), sum kept live;
//   gemv: linear_fp8_gemv_cuda(m = 1) with split-K partials and tile counters, as the engine calls it.
// Each is timed chained (40 launches back to back on 4 weight copies in rotation, so L2, 50 MB, holds none of
// the next launch's bytes), and reported as GB/s of the weight + scale bytes.
// Build: nvcc -std=c++20 --expt-relaxed-constexpr -O3 -arch=sm_90a -I. -Isrc [-DGLM5_GEMV_U=4 ...]
//          tools/probe/gemv_probe.cu build-lead/libglm5_kernels.a build-lead/libglm5_common.a -o build-lead/gemv_probe
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "kernels/linear_fp8.cu"
#include "tools/probe/chained_timer.cuh"

using namespace glm5;

namespace glm5::probe {

template <int U>
__global__ void __launch_bounds__(256) read_kernel(const uint4* __restrict__ p, size_t n16, unsigned* sink) {
  pdl_begin();
  unsigned acc = 0;
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + (U - 1) * stride < n16; i += U * stride) {
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) v[u] = __ldg(p + i + u * stride);
#pragma unroll
    for (int u = 0; u < U; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  for (; i < n16; i += stride) acc ^= __ldg(p + i).x;
  if (acc == 0x12345678u) *sink = acc;
}

template <int U>
void read_row(const char* shape, uint8_t* const* w, size_t bytes, unsigned* sink) {
  int per_sm = 0, sms = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, read_kernel<U>, 256, 0));
  const float us = chained_us(
      [&](int i) {
        launch_kernel(read_kernel<U>, sms * per_sm, 256, 0, nullptr, reinterpret_cast<const uint4*>(w[i % 4]),
                      bytes / 16, sink);
      },
      40, 4);
  std::printf("%-22s read_U%d        %8.2f us  %7.1f GB/s\n", shape, U, us, bytes / us / 1e3);
}

}  // namespace glm5::probe

using namespace glm5::probe;

int main() {
  std::printf("GLM5_GEMV_U %d  GLM5_GEMV_MIN_BLOCKS %d\n", GLM5_GEMV_U, GLM5_GEMV_MIN_BLOCKS);
  unsigned* sink;
  CUDA_CHECK(cudaMalloc(&sink, 4));
  std::mt19937 rng(12345);
  struct Shape {
    const char* name;
    int n, k;
  } shapes[] = {{"o_proj 6144x16384", 6144, 16384}, {"q_b 16384x2048", 16384, 2048}, {"gate_up 4096x6144", 4096, 6144}};
  for (const Shape& sh : shapes) {
    const size_t wb = size_t(sh.n) * sh.k, sb = size_t((sh.n + 127) / 128) * ((sh.k + 127) / 128) * 4;
    std::vector<uint8_t> hw(wb);
    for (auto& v : hw) v = uint8_t(rng()) & 0x77;  // finite e4m3 codes of moderate size
    std::vector<float> hs(sb / 4, 1.f / 64), hx(sh.k);
    for (auto& v : hx) v = float(rng() % 2001) / 1000.f - 1.f;
    uint8_t* w[4];
    float* s[4];
    for (int i = 0; i < 4; ++i) {
      CUDA_CHECK(cudaMalloc(&w[i], wb));
      CUDA_CHECK(cudaMalloc(&s[i], sb));
      CUDA_CHECK(cudaMemcpy(w[i], hw.data(), wb, cudaMemcpyHostToDevice));
      CUDA_CHECK(cudaMemcpy(s[i], hs.data(), sb, cudaMemcpyHostToDevice));
    }
    float *x, *y, *part;
    int* ctr;
    CUDA_CHECK(cudaMalloc(&x, 4 * size_t(sh.k)));
    CUDA_CHECK(cudaMalloc(&y, 4 * size_t(sh.n)));
    CUDA_CHECK(cudaMemcpy(x, hx.data(), 4 * size_t(sh.k), cudaMemcpyHostToDevice));
    LinearParams p;
    p.x = x;
    p.w = w[0];
    p.w_dtype = DType::F8_E4M3;
    p.y = y;
    p.m = 1;
    p.n = sh.n;
    p.k = sh.k;
    p.w_scale = s[0];
    const int S = linear_fp8_gemv_splits(p);
    const size_t part_elems = size_t(S) * sh.n, ctr_elems = linear_fp8_gemv_counters(p);
    CUDA_CHECK(cudaMalloc(&part, 4 * part_elems));
    CUDA_CHECK(cudaMalloc(&ctr, 4 * ctr_elems));
    CUDA_CHECK(cudaMemset(ctr, 0, 4 * ctr_elems));
    // Check one output row against the host (the dot product of row 0 and row n - 1).
    linear_fp8_gemv_cuda(p, part, part_elems, nullptr, ctr, ctr_elems);
    std::vector<float> hy(sh.n);
    CUDA_CHECK(cudaMemcpy(hy.data(), y, 4 * size_t(sh.n), cudaMemcpyDeviceToHost));
    double worst = 0;
    for (int r : {0, sh.n / 2, sh.n - 1}) {
      double ref = 0, mag = 0;
      for (int c = 0; c < sh.k; ++c) {
        const double wv = double(e4m3_bits_to_float(hw[size_t(r) * sh.k + c])) / 64;
        ref += wv * hx[c];
        mag += std::abs(wv * hx[c]);
      }
      worst = std::max(worst, std::abs(hy[r] - ref) / mag);
    }
    const float us = chained_us(
        [&](int i) {
          LinearParams q = p;
          q.w = w[i % 4];
          q.w_scale = s[i % 4];
          linear_fp8_gemv_cuda(q, part, part_elems, nullptr, ctr, ctr_elems);
        },
        40, 4);
    std::printf("%-22s gemv S %2d      %8.2f us  %7.1f GB/s  (rows 0, n/2, n-1: max err / sum|wx| %.1e)\n", sh.name, S, us,
                (wb + sb) / us / 1e3, worst);
    read_row<1>(sh.name, w, wb, sink);
    read_row<2>(sh.name, w, wb, sink);
    read_row<4>(sh.name, w, wb, sink);
    read_row<8>(sh.name, w, wb, sink);
    for (int i = 0; i < 4; ++i) {
      cudaFree(w[i]);
      cudaFree(s[i]);
    }
    cudaFree(x);
    cudaFree(y);
    cudaFree(part);
    cudaFree(ctr);
  }
  return 0;
}
