// CUDA kernel of linear_fp8_tma.h: the TMA-fed FP8 GEMV (m = 1).
//
// Byte model: n * k weight bytes (+ n * k / 16384 * 4 of scales, + k * 4 of x per CTA from L2, + n * 4 of y,
// + 2 * S * n * 4 of split partials through L2). Floor: n * k / copy bandwidth (o_proj 6144 x 16384: 100.7 MB,
// 23.6 us at 4.26 TB/s).
//
// Shared memory per CTA: `stages` x 32 KB ring (1024-byte aligned: the 128-byte swizzle repeats every
// 8 rows x 128 bytes), the CTA's slice of x as fp32 (<= kMaxXFloats), 2 x stages mbarriers.
// Threads: 8 consumer warps (thread t: row t of the CTA's 256) + 1 producer warp (one elected thread).
// Swizzle (CU_TENSOR_MAP_SWIZZLE_128B): the 16-byte chunk c of box row r lands at r * 128 + ((c ^ (r % 8)) * 16),
// so the 8 threads of a quarter-warp (rows r..r+7) reading their chunk c hit 8 different 16-byte bank groups.
// Pipeline per stage s of the ring (phase = use count & 1):
//   producer: wait empty[s] (from the second use), arrive.expect_tx(full[s], 32 KB), TMA box -> ring[s].
//   consumers: wait full[s], 8 x (16-byte load, 16 e4m3 -> fp32, 16 FMAs with x), one lane per warp arrives
//   on empty[s] (count 8) after __syncwarp.
// Register budget: __launch_bounds__(288, 2) (2 CTAs per SM with 3 stages: 2 x ~103 KB of shared memory).
#include <cuda.h>
#include <cudaTypedefs.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <tuple>

#include "common/error.h"
#include "kernels/fp8_dot.cuh"
#include "kernels/launch.cuh"
#include "kernels/linear_fp8_tma.h"
#include "kernels/tma.h"
#include "kernels/mbarrier.cuh"

namespace glm5 {
namespace {

constexpr int kBoxCols = 128;                     // TMA box columns = one scale block (128 B: the swizzle span)
constexpr int kStageBytes = 256 * kBoxCols;       // 32 KB per ring stage, whatever the box shape
constexpr int kConsumerWarps = 8;                 // 256 consumer threads
constexpr int kThreads = 32 * (kConsumerWarps + 1);
constexpr int kMaxStages = 4;
constexpr int kMaxXFloats = 8192;                 // x slice per CTA (32 KB): splits are chosen so it fits
// x is staged with each 128-column block padded to 132 floats (528 B = 33 x 16 B): the kNB boxes a quarter-warp
// reads at once then hit different 16-byte bank groups (unpadded, 512 B apart, they collide kNB ways).
constexpr int kXBlockFloats = kBoxCols + 4;

struct TmaGemvArgs {
  LinearParams p;
  float* part;       // [S][n] or null (S == 1)
  int* counters;     // [row blocks] or null (S == 1)
  int blocks_per_split;  // 128-column blocks per split (a multiple of the boxes per stage, but for the last)
};

// kBoxRows (256, 128 or 64) rows per CTA; a ring stage holds kNB = 256 / kBoxRows boxes of [kBoxRows x 128]
// at adjacent 128-column blocks, so each weight row contributes kNB x 128 contiguous bytes per stage
// (the DRAM access pattern is the variable under test: 128 B from each of 256 rows, or 512 B from each of 64).
// Consumer thread t = kNB * r + j owns row r and box j of every stage; its 8 chunk reads run in the
// order (q + (8 / kNB) j) % 8, so the 8 threads of a quarter-warp (8 / kNB rows x kNB boxes) hit 8
// different 16-byte bank groups (boxes are 8 KB-multiples apart, the swizzle XORs the chunk with r % 8;
// a shared-memory bank model of the three shapes, review of session 5). The kNB partial sums
// of a row are added by shuffles (adjacent lanes) at the end, in box order.
template <int kStages, int kBoxRows>
__global__ void __launch_bounds__(kThreads, 2)
    linear_fp8_tma_kernel(const __grid_constant__ CUtensorMap wmap, TmaGemvArgs a) {
  constexpr int kNB = 256 / kBoxRows;
  constexpr int kBoxBytes = kBoxRows * kBoxCols;
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  // The ring must start on a 1024-byte boundary (128-byte swizzle atom); the dynamic allocation asks for 1 KB extra.
  uint8_t* ring = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  float* xs = reinterpret_cast<float*>(ring + kStages * kStageBytes);
  __shared__ uint64_t full[kStages], empty[kStages];
  const LinearParams& p = a.p;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int row0 = blockIdx.x * kBoxRows;
  const int kbs = (p.k + kBoxCols - 1) / kBoxCols;
  const int kb0 = blockIdx.y * a.blocks_per_split, kb1 = min(kbs, kb0 + a.blocks_per_split);
  const int nb = max(kb1 - kb0, 0);          // column blocks of this CTA
  const int stages_used = (nb + kNB - 1) / kNB;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], kConsumerWarps);
    }
    mbar_init_fence();
  }
  __syncthreads();
  if (warp == kConsumerWarps) {
    // Producer. The weights are not written by any kernel of the step: the ring fills before the PDL wait.
    // The first `kStages` stages go out before the wait; then the wait (every thread of the CTA waits
    // before it may exit, launch.cuh's contract) and the launch of the dependents; the rest of the ring
    // refills as the consumers free its stages. Boxes past the CTA's last column block are not issued.
    auto issue = [&](int i) {
      const int s = i % kStages;
      if (i >= kStages) mbar_wait(&empty[s], ((i / kStages) - 1) & 1);
      const int boxes = min(kNB, nb - i * kNB);
      mbar_expect_tx(&full[s], unsigned(boxes * kBoxBytes));
      for (int j = 0; j < boxes; ++j)
        tma_load_2d(ring + s * kStageBytes + j * kBoxBytes, &wmap, (kb0 + i * kNB + j) * kBoxCols, row0, &full[s]);
    };
    if (lane == 0)
      for (int i = 0; i < min(stages_used, kStages); ++i) issue(i);
    pdl_begin();
    if (lane == 0)
      for (int i = kStages; i < stages_used; ++i) issue(i);
    return;
  }
  pdl_begin();
  // The CTA's slice of x: columns [kb0 * 128, kb1 * 128), zero past k.
  const int c0 = kb0 * kBoxCols, cols = nb * kBoxCols;
  for (int i = threadIdx.x * 4; i < cols; i += 32 * kConsumerWarps * 4) {
    float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
    if (c0 + i + 3 < p.k) {
      v = *reinterpret_cast<const float4*>(p.x + c0 + i);
    } else {
      float t[4] = {0.f, 0.f, 0.f, 0.f};
      for (int q = 0; q < 4; ++q)
        if (c0 + i + q < p.k) t[q] = p.x[c0 + i + q];
      v = make_float4(t[0], t[1], t[2], t[3]);
    }
    *reinterpret_cast<float4*>(xs + (i / kBoxCols) * kXBlockFloats + i % kBoxCols) = v;
  }
  asm volatile("bar.sync 1, %0;" ::"r"(32 * kConsumerWarps) : "memory");  // consumers only
  const int r = threadIdx.x / kNB, j = threadIdx.x % kNB;  // row within the box, box within the stage
  const int row = row0 + r;
  const float* srow = p.w_scale + size_t(min(row, p.n - 1) / kFp8WeightBlock) * p.scale_stride();
  float acc = 0.f;
  float sc = j < nb ? __ldg(srow + kb0 + j) : 0.f;
  for (int i = 0; i < stages_used; ++i) {
    const int s = i % kStages, b = i * kNB + j;  // b: this thread's column block within the CTA's range
    const float sc_next = b + kNB < nb ? __ldg(srow + kb0 + b + kNB) : 0.f;
    mbar_wait(&full[s], (i / kStages) & 1);
    if (b < nb) {
      const uint8_t* box_row = ring + s * kStageBytes + j * kBoxBytes + r * kBoxCols;
      const float* xb = xs + b * kXBlockFloats;
      float part = 0.f;
#pragma unroll
      for (int q = 0; q < kBoxCols / 16; ++q) {
        const int c = (q + (8 / kNB) * j) & 7;
        const uint4 codes = *reinterpret_cast<const uint4*>(box_row + ((c ^ (r & 7)) << 4));
        part += fp8_dot16(codes, xb + 16 * c);
      }
      acc = fmaf(sc, part, acc);
    }
    __syncwarp();
    if (lane == 0) mbar_arrive(&empty[s]);
    sc = sc_next;
  }
  // The row's kNB partial sums (adjacent lanes), added in box order by the lane of box 0.
#pragma unroll
  for (int o = 1; o < kNB; ++o) {
    const float v = __shfl_down_sync(0xffffffffu, acc, o);
    if (j == 0) acc += v;
  }
  const bool owner = j == 0 && row < p.n;
  const bool split = a.part != nullptr;
  if (!split) {
    if (owner) p.y[row] = p.accumulate ? p.y[row] + acc : acc;
    return;
  }
  if (owner) a.part[size_t(blockIdx.y) * p.n + row] = acc;
  __shared__ int last;
  __threadfence();  // this CTA's partials reach L2 before its count
  asm volatile("bar.sync 1, %0;" ::"r"(32 * kConsumerWarps) : "memory");
  if (threadIdx.x == 0) {
    int* c = a.counters + blockIdx.x;
    last = atomicAdd(c, 1) == int(gridDim.y) - 1;
    if (last) *c = 0;
  }
  asm volatile("bar.sync 1, %0;" ::"r"(32 * kConsumerWarps) : "memory");
  if (!last || !owner) return;
  __threadfence();
  float sum = 0.f;
  for (int z = 0; z < int(gridDim.y); ++z) sum += __ldcg(a.part + size_t(z) * p.n + row);
  p.y[row] = p.accumulate ? p.y[row] + sum : sum;
}

CUtensorMap weight_map(const LinearParams& p, int box_rows) {
  static_assert(kBoxCols == 128, "tma_map_bytes_sw128 boxes are 128 bytes wide");
  return tma_map_bytes_sw128(p.w, p.k, p.n, p.w_stride(), box_rows, "linear_fp8_tma_cuda", "the weight");
}

size_t smem_bytes(int stages, int blocks_per_split) {
  return 1024 + size_t(stages) * kStageBytes + size_t(blocks_per_split) * kXBlockFloats * 4;
}

template <int S, int R>
void launch(const CUtensorMap& map, const TmaGemvArgs& a, dim3 grid, cudaStream_t stream) {
  const size_t smem = smem_bytes(S, a.blocks_per_split);
  CUDA_CHECK(cudaFuncSetAttribute(linear_fp8_tma_kernel<S, R>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  launch_kernel(linear_fp8_tma_kernel<S, R>, grid, kThreads, smem, stream, map, a);
}
template <int R>
void launch_rows(int stages, const CUtensorMap& map, const TmaGemvArgs& a, dim3 grid, cudaStream_t stream) {
  if (stages == 2) launch<2, R>(map, a, grid, stream);
  else if (stages == 3) launch<3, R>(map, a, grid, stream);
  else launch<4, R>(map, a, grid, stream);
}

// The split plan: S column ranges of `per` blocks each (a multiple of the boxes per stage, 256 / box_rows,
// but for the last range). CTAs per SM: 2 with 2-3 ring stages (each CTA within half of the 227 KB of shared
// memory, which bounds its x slice), 1 with 4 stages (128 KB of ring). S >= the requested or heuristic count as
// far as ceil(k / 128) allows, and large enough that the x slice fits. Heuristic: one wave of those CTAs over
// the row blocks, each split at least 2 column blocks.
struct SplitPlan {
  int S = 1, per = 1;
};
SplitPlan split_plan(const LinearParams& p, int splits, int box_rows, int stages) {
  const int kbs = (p.k + kBoxCols - 1) / kBoxCols, nbox = 256 / box_rows;
  const int row_blocks = (p.n + box_rows - 1) / box_rows;
  const int per_sm = stages <= 3 ? 2 : 1;
  const size_t budget = size_t(227 * 1024) / per_sm - 1024;  // static shared memory: barriers, `last`
  const size_t x_room = budget - std::min(budget, smem_bytes(stages, 0));
  const int max_per = std::max(nbox, int(std::min<size_t>(kMaxXFloats / kBoxCols, x_room / (kXBlockFloats * 4))));
  int S = splits > 0 ? std::min(splits, kbs)
                     : std::max(1, std::min(std::max(1, (per_sm * current_device_sm_count()) / row_blocks), kbs / 2));
  SplitPlan sp;
  for (;; ++S) {
    sp.per = ((kbs + S - 1) / S + nbox - 1) / nbox * nbox;
    if (sp.per <= max_per || sp.per <= nbox) break;
  }
  sp.S = (kbs + sp.per - 1) / sp.per;  // no empty range
  return sp;
}

void validate_box_rows(int box_rows) {
  require(box_rows == 64 || box_rows == 128 || box_rows == 256,
          "linear_fp8_tma_cuda: box_rows = " + std::to_string(box_rows) + ", expected 64, 128 or 256");
}

}  // namespace

bool linear_fp8_tma_supported(const LinearParams& p) {
  return p.m == 1 && p.n > 0 && p.k > 0 && p.w_dtype == DType::F8_E4M3 && p.w_scale && p.k % 16 == 0 &&
         p.w_stride() % 16 == 0 && ((reinterpret_cast<uintptr_t>(p.w) | reinterpret_cast<uintptr_t>(p.x)) & 15u) == 0;
}

int linear_fp8_tma_splits(const LinearParams& p, int box_rows, int stages) {
  validate_box_rows(box_rows);
  return split_plan(p, 0, box_rows, stages).S;
}

size_t linear_fp8_tma_partial(const LinearParams& p, int splits, int box_rows, int stages) {
  validate_box_rows(box_rows);
  const int S = split_plan(p, splits, box_rows, stages).S;
  return S > 1 ? size_t(S) * p.n : 0;
}

size_t linear_fp8_tma_counters(const LinearParams& p) { return size_t((p.n + 63) / 64); }

void linear_fp8_tma_cuda(const LinearParams& p, float* partial, size_t partial_elems, int* counters,
                         size_t counter_elems, cudaStream_t stream, int splits, int stages, int box_rows) {
  validate_linear_params(p, "linear_fp8_tma_cuda", false);
  require(linear_fp8_tma_supported(p), "linear_fp8_tma_cuda: needs m == 1, F8_E4M3 weights with scales, k % 16 == 0 "
                                       "and 16-byte aligned x, weight and row stride (m " + std::to_string(p.m) +
                                           ", k " + std::to_string(p.k) + ")");
  require(stages >= 2 && stages <= kMaxStages,
          "linear_fp8_tma_cuda: stages = " + std::to_string(stages) + ", expected 2..4");
  validate_box_rows(box_rows);
  const SplitPlan sp = split_plan(p, splits, box_rows, stages);
  TmaGemvArgs a{p, nullptr, nullptr, sp.per};
  if (sp.S > 1) {
    require(partial && partial_elems >= size_t(sp.S) * p.n,
            "linear_fp8_tma_cuda: partial holds " + std::to_string(partial_elems) + " floats, needs " +
                std::to_string(size_t(sp.S) * p.n));
    require(counters && counter_elems >= linear_fp8_tma_counters(p),
            "linear_fp8_tma_cuda: counters hold " + std::to_string(counter_elems) + " ints, need " +
                std::to_string(linear_fp8_tma_counters(p)));
    a.part = partial;
    a.counters = counters;
  }
  const CUtensorMap map = weight_map(p, box_rows);
  const dim3 grid((p.n + box_rows - 1) / box_rows, sp.S);
  if (box_rows == 256) launch_rows<256>(stages, map, a, grid, stream);
  else if (box_rows == 128) launch_rows<128>(stages, map, a, grid, stream);
  else launch_rows<64>(stages, map, a, grid, stream);
  CUDA_CHECK_LAUNCH();
}

}  // namespace glm5
