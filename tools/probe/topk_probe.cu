// Where the DSA indexer's top-k spends its time at batch 1 (the decode step's 21.7 us per layer at 32K, and
// ~19 us even at 4K positions in the kernel bench). A diagnostic, not a test. For each (positions, cluster
// size): the kernel's result against topk_cpu on lognormal random scores (drawn fresh), then
//   - single: median of 50 launches, each timed alone by CUDA events;
//   - chained: 200 launches back to back on one stream (PDL-chained, as in the decode step), time / 200;
//   - phases: clock64() cycles of block 0, thread 0 between the kernel's GLM5_TOPK_MARK points (converted to us
//     at the SM clock), from the last launch.
// And the launch floor: an empty kernel with topk's launch shape (1024 threads, cluster C, its dynamic shared
// memory, or none) chained 200 times.
// Build: nvcc -std=c++20 --expt-relaxed-constexpr -O3 -arch=sm_90a -I. -Isrc tools/probe/topk_probe.cu \
//          build-lead/libglm5_kernels.a build-lead/libglm5_common.a -o build-lead/topk_probe
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

// (Mark 0 stores before the kernel's PDL wait, against kernels/launch.cuh's contract; only this probe build
// does so, into an array no kernel reads.)
__device__ long long g_topk_marks[32];
#define GLM5_TOPK_MARK(i)                                                \
  do {                                                                   \
    if (blockIdx.x == 0 && threadIdx.x == 0) g_topk_marks[i] = clock64(); \
  } while (0)

#include "kernels/indexer.cu"
#include "tools/probe/chained_timer.cuh"

using namespace glm5;

namespace glm5::probe {

template <int C>
__global__ void __cluster_dims__(C, 1, 1) __launch_bounds__(1024) empty_kernel(int* sink) {
  pdl_begin();
  cg::this_cluster().sync();
  if (threadIdx.x == 9999) *sink = 1;
}

template <int C>
void empty_floor(size_t smem, int* sink) {
  CUDA_CHECK(cudaFuncSetAttribute(empty_kernel<C>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  const float us = chained_us([&](int) { launch_kernel(empty_kernel<C>, C, 1024, smem, nullptr, sink); }, 200);
  std::printf("empty kernel  C %d  smem %6zu B: chained %.2f us\n", C, smem, us);
}

}  // namespace glm5::probe

using namespace glm5::probe;

int main() {
  int dev = 0, khz = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, dev));
  const double cyc_per_us = khz / 1000.0;
  std::printf("SM clock attribute %.0f MHz\n", cyc_per_us);
  int* sink = nullptr;
  CUDA_CHECK(cudaMalloc(&sink, 4));
  empty_floor<1>(0, sink);
  empty_floor<1>(topk_smem_bytes(), sink);
  empty_floor<4>(0, sink);
  empty_floor<4>(topk_smem_bytes(), sink);
  empty_floor<8>(topk_smem_bytes(), sink);

  std::mt19937_64 rng(std::random_device{}());
  const int k = 2048;
  for (int dist = 0; dist < 6; ++dist)
  for (int n : {4096, 32768, 131072}) {
    const int pages = n / kPageSize;
    std::vector<float> s(n);
    std::lognormal_distribution<float> ln(0.f, 1.f);
    std::normal_distribution<float> nd(0.f, 1.f);
    std::uniform_real_distribution<float> ud(-1e30f, 1e30f);
    // 0: lognormal (positive, ~36 populated top-11-bit digits); 1: normal (both signs); 2: uniform over
    // +-1e30 (spread over ~all top digits: the low-contention case)
    // 3: half the scores 0 (a partial heavy tie: all of a position's ReLU terms zero), half lognormal;
    // 4: every score equal (one tie)
    // 5: the DSA indexer's form, sum over 32 heads of w_h ReLU(z_h) with w_h ~ N(0, 1/32) per request, z_h ~ N(0, 1)
    float wh[32];
    for (float& w : wh) w = nd(rng) / std::sqrt(32.f);
    auto indexer_like = [&] {
      float acc = 0.f;
      for (float w : wh) acc += w * std::max(nd(rng), 0.f);
      return acc;
    };
    for (auto& v : s)
      v = dist == 0 ? ln(rng) : dist == 1 ? nd(rng) : dist == 2 ? ud(rng) : dist == 3 ? (rng() % 2 ? ln(rng) : 0.f)
        : dist == 4 ? 1.f : indexer_like();
    const char* dname[] = {"lognormal(0, 1)", "normal(0, 1)", "uniform(+-1e30)", "half 0, half lognormal", "all equal",
                           "indexer-like: sum_h w_h ReLU(z_h)"};
    std::printf("distribution %s\n", dname[dist]);
    std::vector<int32_t> bt(pages), seq = {n};
    for (int i = 0; i < pages; ++i) bt[i] = pages - 1 - i;  // reversed pages: the slots are not the positions
    float* d_s;
    int32_t *d_bt, *d_seq, *d_out;
    CUDA_CHECK(cudaMalloc(&d_s, 4 * size_t(n)));
    CUDA_CHECK(cudaMalloc(&d_bt, 4 * size_t(pages)));
    CUDA_CHECK(cudaMalloc(&d_seq, 4));
    CUDA_CHECK(cudaMalloc(&d_out, 4 * size_t(k)));
    CUDA_CHECK(cudaMemcpy(d_s, s.data(), 4 * size_t(n), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(d_bt, bt.data(), 4 * size_t(pages), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(d_seq, seq.data(), 4, cudaMemcpyHostToDevice));
    std::vector<int32_t> want(k), got(k);
    TopkParams p{s.data(), n, seq.data(), bt.data(), pages, want.data(), 1, k};
    topk_cpu(p);
    for (int C : {0, 4, 8})
    for (bool gather : {true, false}) {
      TopkParams d{d_s, n, d_seq, d_bt, pages, d_out, 1, k, C};
      d.gather = gather;
      CUDA_CHECK(cudaMemset(d_out, 0xff, 4 * size_t(k)));
      topk_cuda(d, nullptr);
      CUDA_CHECK(cudaMemcpy(got.data(), d_out, 4 * size_t(k), cudaMemcpyDeviceToHost));
      const bool ok = got == want;
      const float one = single_us([&] { topk_cuda(d, nullptr); }, 50);
      long long m[32] = {};
      CUDA_CHECK(cudaMemcpyToSymbol(g_topk_marks, m, sizeof(m)));  // marks of the form that ran, no stale ones
      const float chain = chained_us([&](int) { topk_cuda(d, nullptr); }, 200);
      CUDA_CHECK(cudaMemcpyFromSymbol(m, g_topk_marks, sizeof(m)));
      std::printf("n %6d  C %d  gather %d  %s  single %.2f us  chained %.2f us\n  phases (us):", n, C, int(gather),
                  ok ? "ok" : "MISMATCH", one, chain);
      auto phase = [&](const char* name, int from, int to) { std::printf(" %s %.2f", name, (m[to] - m[from]) / cyc_per_us); };
      if (m[19] != 0) {  // the gathered form ran: marks 0-5, 19-22, 17, 18
        phase("pdl", 0, 1), phase("load", 1, 2), phase("p0.hist", 2, 3), phase("p0.merge", 3, 4), phase("p0.sel", 4, 5);
        phase("send", 5, 19), phase("csync", 19, 20), phase("rank0", 20, 21), phase("csync", 21, 22);
        phase("compact", 22, 17), phase("exit", 17, 18);
      } else {
        const char* names[] = {"pdl", "load", "p0.hist", "p0.merge", "p0.sel", "p0.rest", "p1.hist", "p1.merge",
                               "p1.sel", "p1.rest", "p2.hist", "p2.merge", "p2.sel", "p2.rest", "counts", "csync",
                               "compact", "exit"};
        for (int i = 1; i <= 18; ++i) phase(names[i - 1], i - 1, i);
      }
      std::printf("  total %.2f\n", (m[18] - m[0]) / cyc_per_us);
    }
    cudaFree(d_s);
    cudaFree(d_bt);
    cudaFree(d_seq);
    cudaFree(d_out);
  }
  return 0;
}
