// Diagnostic probe (session 34): the latency and throughput of the wgmma MLA decode's code gather, apart from the
// kernel's compute. The MLA's producers wait ~1.9k cycles per tile for a tile's codes (64 random 512-byte rows of the
// 656-byte FP8 KV pool, one cp.async.bulk each, issued ~one tile period ahead: reports/2026-12-06-h200-kv-kernels.md,
// 2026-12-07-h100-mla-crossover-s32-s33.md), i.e. a tile's gather takes ~3.5-4 us under load. Is that the memory
// system's latency at this load (then more tiles in flight would help), or a per-SM limit of the copy engine (then the
// LSU path would)? Each CTA (one per SM, 128 or 132 of them like the MLA's grids) gathers kTiles tiles of 64 rows into a
// ring of D stages (D tiles in flight) and does nothing else:
//   bulk: 64 threads issue one 512-byte cp.async.bulk each per tile (the MLA's feed);
//   ldg:  256 threads, one 16-byte __ldg per lane and row (a warp reads a row per instruction), D tiles of loads in
//         registers before their shared-memory stores.
//   ldgsts: 256 threads, one 16-byte cp.async per lane and row, completing the stage's mbarrier;
//   bulk+pfN: bulk with D = 1 and an L2 prefetch of the rows N tiles further ahead.
// Prints, per form, CTAs and D: us per launch, GB/s of codes, us per tile per CTA (time / T). Not a test and not a
// benchmark of record: a design probe for the MLA feed; its numbers go to the report of the call that ran it.
// Each CTA first stages its row indices in shared memory (one 8 KB load, inside the timed launch), so no form pays a
// dependent index load per tile (the MLA kernel loads its indices a tile ahead). Times include the launch and the
// ring's fill and drain (us per tile = launch time / 32 tiles).
// Build: nvcc -std=c++20 -O3 -arch=sm_90a -I. -Isrc tools/probe/gather_probe.cu build-lead/libglm5_common.a
//        -o build-lead/gather_probe
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "common/error.h"
#include "kernels/mbarrier.cuh"
#include "tools/probe/chained_timer.cuh"

namespace {

constexpr int kRows = 64, kCodeBytes = 512, kRowBytes = 656, kStageBytes = kRows * kCodeBytes, kMaxStages = 6;
constexpr int kThreads = 256;
constexpr int kTiles = 32;                                          // per CTA
constexpr int kBarOff = kMaxStages * kStageBytes;                   // the stages' mbarriers
constexpr int kIdxOff = kBarOff + kMaxStages * 8;                   // the CTA's row indices [kTiles * kRows]
constexpr int kSmemBytes = kIdxOff + kTiles * kRows * 4;            // every form: one CTA per SM

// This CTA's kTiles x kRows row indices into shared memory (all threads; a __syncthreads follows in the caller).
__device__ __forceinline__ const int32_t* stage_indices(const int32_t* idx, uint8_t* smem) {
  int32_t* s = reinterpret_cast<int32_t*>(smem + kIdxOff);
  const int32_t* g = idx + int64_t(blockIdx.x) * kTiles * kRows;
  for (int i = threadIdx.x; i < kTiles * kRows; i += blockDim.x) s[i] = g[i];
  return s;
}

// Reads `n` uint4 (the L2 flush's second half: the memset before it leaves its lines dirty in L2, and their
// write-backs would compete with the timed kernel's reads; after this sweep the lines are clean).
__global__ void sweep(const uint4* p, size_t n, unsigned* sink) {
  unsigned acc = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    acc ^= p[i].x;
  if (acc == 0x12345678u) sink[0] = acc;
}

__global__ void __launch_bounds__(kThreads, 1)
    gather_bulk(const uint8_t* pool, const int32_t* idx, int depth, int pf, unsigned* sink) {
  extern __shared__ __align__(128) uint8_t smem[];
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + kBarOff);
  const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
  if (tid == 0) {
    for (int s = 0; s < kMaxStages; ++s) glm5::mbar_init(&full[s], 2);  // warps 0 and 1 each announce their bytes
    glm5::mbar_init_fence();
  }
  const int32_t* my = stage_indices(idx, smem);
  __syncthreads();
  auto issue = [&](int t) {
    if (w >= 2) return;
    const int s = t % depth;
    if (lane == 0) glm5::mbar_expect_tx(&full[s], 32 * kCodeBytes);
    __syncwarp();
    const int r = 32 * w + lane;
    glm5::bulk_copy_g2s(smem + s * kStageBytes + r * kCodeBytes, pool + int64_t(my[t * kRows + r]) * kRowBytes,
                        kCodeBytes, &full[s]);
  };
  // pf > 0: threads 64..127 also ask L2 for the whole rows (656 bytes) of tile t + pf (cp.async.bulk.prefetch.L2) as
  // tile t is waited for: an L2 stage ahead of the shared-memory ring.
  auto prefetch = [&](int t) {
    if (pf > 0 && tid >= kRows && tid < 2 * kRows && t < kTiles)
      glm5::prefetch_l2(pool + int64_t(my[t * kRows + tid - kRows]) * kRowBytes, kRowBytes);
  };
  for (int t = 0; t < pf; ++t) prefetch(depth + t);
  for (int t = 0; t < depth && t < kTiles; ++t) issue(t);
  unsigned acc = 0;
  for (int t = 0; t < kTiles; ++t) {
    const int s = t % depth;
    prefetch(t + depth + pf);
    glm5::mbar_wait(&full[s], unsigned(t / depth) & 1);
    acc += smem[s * kStageBytes + (tid % kRows) * kCodeBytes + (t & 511)];
    __syncthreads();  // every thread has read stage s: it may be refilled
    if (t + depth < kTiles) issue(t + depth);
  }
  if (acc == 0xFFFFFFFFu) sink[blockIdx.x] = acc;
}

// cp.async (16-byte LDGSTS by the LSU, no registers): warp w copies rows 8 w .. 8 w + 7, a lane 16 bytes of each;
// every thread's cp.async.mbarrier.arrive completes the stage's barrier (256 arrivals).
__global__ void __launch_bounds__(kThreads, 1)
    gather_ldgsts(const uint8_t* pool, const int32_t* idx, int depth, unsigned* sink) {
  extern __shared__ __align__(128) uint8_t smem[];
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + kBarOff);
  const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
  if (tid == 0) {
    for (int s = 0; s < kMaxStages; ++s) glm5::mbar_init(&full[s], kThreads);
    glm5::mbar_init_fence();
  }
  const int32_t* my = stage_indices(idx, smem);
  __syncthreads();
  auto issue = [&](int t) {
    const int s = t % depth;
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const int r = 8 * w + k;
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(glm5::smem_u32(smem + s * kStageBytes + r * kCodeBytes + 16 * lane)),
                   "l"(pool + int64_t(my[t * kRows + r]) * kRowBytes + 16 * lane)
                   : "memory");
    }
    glm5::cp_async_mbar_arrive(&full[s]);
  };
  for (int t = 0; t < depth && t < kTiles; ++t) issue(t);
  unsigned acc = 0;
  for (int t = 0; t < kTiles; ++t) {
    const int s = t % depth;
    glm5::mbar_wait(&full[s], unsigned(t / depth) & 1);
    acc += smem[s * kStageBytes + (tid % kRows) * kCodeBytes + (t & 511)];
    __syncthreads();
    if (t + depth < kTiles) issue(t + depth);
  }
  if (acc == 0xFFFFFFFFu) sink[blockIdx.x] = acc;
}

template <int kDepth>
__global__ void __launch_bounds__(kThreads, 1)
    gather_ldg(const uint8_t* pool, const int32_t* idx, unsigned* sink) {
  extern __shared__ __align__(128) uint8_t smem[];
  const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
  const int32_t* my = stage_indices(idx, smem);
  __syncthreads();
  uint4 v[kDepth][8];
  auto load = [&](int t, uint4 (&d)[8]) {
#pragma unroll
    for (int k = 0; k < 8; ++k)
      d[k] = __ldg(reinterpret_cast<const uint4*>(pool + int64_t(my[t * kRows + 8 * w + k]) * kRowBytes) + lane);
  };
#pragma unroll
  for (int d = 0; d < kDepth; ++d)
    if (d < kTiles) load(d, v[d]);
  unsigned acc = 0;
  for (int t = 0; t < kTiles; t += kDepth) {
#pragma unroll
    for (int d = 0; d < kDepth; ++d) {
      if (t + d >= kTiles) break;
      uint8_t* st = smem + ((t + d) % 2) * kStageBytes;
#pragma unroll
      for (int k = 0; k < 8; ++k) reinterpret_cast<uint4*>(st + (8 * w + k) * kCodeBytes)[lane] = v[d][k];
      if (t + d + kDepth < kTiles) load(t + d + kDepth, v[d]);
      __syncthreads();
      acc += st[(tid % kRows) * kCodeBytes + ((t + d) & 511)];
    }
  }
  if (acc == 0xFFFFFFFFu) sink[blockIdx.x] = acc;
}

}  // namespace

int main() {
  using namespace glm5;
  const int64_t pool_rows = 495000;
  int sms = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int max_ctas = sms;
  std::vector<int32_t> h_idx(int64_t(max_ctas) * kTiles * kRows);
  std::mt19937 rng(34);
  std::uniform_int_distribution<int32_t> pick(0, int32_t(pool_rows - 1));
  for (auto& x : h_idx) x = pick(rng);
  uint8_t* pool = nullptr;
  int32_t* idx = nullptr;
  unsigned* sink = nullptr;
  CUDA_CHECK(cudaMalloc(&pool, pool_rows * kRowBytes));
  CUDA_CHECK(cudaMemset(pool, 1, pool_rows * kRowBytes));
  CUDA_CHECK(cudaMalloc(&idx, h_idx.size() * sizeof(int32_t)));
  CUDA_CHECK(cudaMemcpy(idx, h_idx.data(), h_idx.size() * sizeof(int32_t), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMalloc(&sink, max_ctas * sizeof(unsigned)));
  // A 256 MB buffer written between launches flushes L2 (the pool's rows are cold, as in the decode step).
  const size_t flush_bytes = size_t(256) << 20;
  uint8_t* flush = nullptr;
  CUDA_CHECK(cudaMalloc(&flush, flush_bytes));
  const int smem_bulk = kSmemBytes, smem_ldg = kSmemBytes;  // one CTA per SM for every form
  CUDA_CHECK(cudaFuncSetAttribute(gather_bulk, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bulk));
  CUDA_CHECK(cudaFuncSetAttribute(gather_ldgsts, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bulk));
  CUDA_CHECK(cudaFuncSetAttribute(gather_ldg<1>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_ldg));
  CUDA_CHECK(cudaFuncSetAttribute(gather_ldg<2>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_ldg));
  CUDA_CHECK(cudaFuncSetAttribute(gather_ldg<3>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_ldg));
  // Median of 7 launches, each after an L2 flush (untimed).
  auto time_us = [&](auto launch) {
    return probe::single_us(launch, 7, [&](int r) {
      CUDA_CHECK(cudaMemsetAsync(flush, r, flush_bytes));
      sweep<<<4 * sms, 256>>>(reinterpret_cast<const uint4*>(flush), flush_bytes / 16, sink);
    });
  };
  std::printf("gather probe: %d SMs, %d tiles of %d rows x %d code bytes per CTA, pool %lld rows of %d bytes, L2 "
              "flushed\n", sms, kTiles, kRows, kCodeBytes, (long long)pool_rows, kRowBytes);
  std::printf("%-8s %5s %5s %10s %10s %14s\n", "form", "CTAs", "D", "us", "GB/s", "us/tile/CTA");
  for (int ctas : {128, max_ctas}) {
    const double bytes = double(ctas) * kTiles * kStageBytes;
    auto row = [&](const char* form, int d, float us) {
      std::printf("%-8s %5d %5d %10.1f %10.0f %14.2f\n", form, ctas, d, us, bytes / us * 1e-3, us / kTiles);
    };
    for (int d = 1; d <= kMaxStages; ++d)
      row("bulk", d, time_us([&] { gather_bulk<<<ctas, kThreads, smem_bulk>>>(pool, idx, d, 0, sink); }));
    for (int pf = 1; pf <= 2; ++pf)  // D = 1 with an L2 stage of pf kTiles ahead
      row(pf == 1 ? "bulk+pf1" : "bulk+pf2", 1,
          time_us([&] { gather_bulk<<<ctas, kThreads, smem_bulk>>>(pool, idx, 1, pf, sink); }));
    for (int d = 1; d <= 3; ++d)
      row("ldgsts", d, time_us([&] { gather_ldgsts<<<ctas, kThreads, smem_bulk>>>(pool, idx, d, sink); }));
    row("ldg", 1, time_us([&] { gather_ldg<1><<<ctas, kThreads, smem_ldg>>>(pool, idx, sink); }));
    row("ldg", 2, time_us([&] { gather_ldg<2><<<ctas, kThreads, smem_ldg>>>(pool, idx, sink); }));
    row("ldg", 3, time_us([&] { gather_ldg<3><<<ctas, kThreads, smem_ldg>>>(pool, idx, sink); }));
  }
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaDeviceSynchronize());
  return 0;
}
