// Kernels of moe_fp8_wgmma.h (sm_90a): the routed MoE experts on the FP8 tensor cores, fed by TMA. Design in the
// header. Written here from the PTX ISA (wgmma e4m3, cp.async.bulk.tensor, mbarrier); the ring and the promotion follow
// linear_fp8_wgmma.cu.
//
// The grouped GEMM kernel (moe_wgmma_kernel<N, kGateUp, kBf16>), 384 threads = 3 warpgroups, one CTA per SM (FP8 as
// below; BF16: 64-column units, no scales, 4 wgmma m64nNk16 straight into acc):
//   WG0, thread 0 (producer): per unit (a tile's 128-column block of k) one ring stage: 16 KB of W (gate_up: the tile's
//     64 gate rows, then its 64 up rows; down: its 128 rows), the N slot rows' codes of that block (TMA, 128-byte
//     swizzle) and their N scales (one bulk copy), all on the stage's `full` barrier.
//   WG1, WG2 (consumers): W rows 64 (wg - 1) .. + 63 of the stage (gate_up: WG1 gate, WG2 up; down: two row halves):
//     4 wgmma m64nNk32 into `tmp`, acc += tmp s_x s_w (0 past the tile's pairs), one arrival per warp on `empty`.
//   At a tile's end, gate_up: WG2 hands u to WG1 through shared memory, WG1 stores act = silu(g) u; down: both store
//   pair_out.
#include "kernels/sm90a/moe_fp8_wgmma.h"

#include <cuda.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "common/error.h"
#include "kernels/kv_cast.cuh"  // float_to_e4m3_device
#include "kernels/kv_layout.h"  // aligned16
#include "kernels/launch.cuh"
#include "kernels/linear.h"  // kFp8WeightBlock
#include "kernels/mbarrier.cuh"
#include "kernels/sm90a/wgmma_e4m3.cuh"
#include "kernels/tma.h"
#include "kernels/wgmma.cuh"

namespace glm5 {
namespace mfw {

constexpr int kThreads = 384;
constexpr int kCols = kFp8WeightBlock;  // columns per unit (one scale block, one 128-byte swizzle row)
constexpr int kWBytes = 128 * kCols;    // W codes per stage: 128 rows
constexpr int kConsumerWarps = 8;
constexpr int kMaxExperts = 512;        // local experts (the schedule's shared arrays)
constexpr int kSmemBudget = 200 * 1024;

template <int N>
struct Cfg {
  static constexpr int kBBytes = N * kCols;
  static constexpr int kStageBytes = (kWBytes + kBBytes + N * 4 + 1023) / 1024 * 1024;
  static constexpr int kStages = std::min(8, kSmemBudget / kStageBytes);
  static constexpr int kXchBytes = (N / 2) * 128 * 4;  // gate_up's hand-off of u: N / 2 floats x 128 threads
  static constexpr size_t kSmem = size_t(kStages) * kStageBytes + kXchBytes + 1024;  // + alignment slack
};

struct Args {
  const int32_t* group;  // moe_group_kernel's [E + 1 + pairs]: offsets, then pair indices in bucket order
  const int32_t* sched;  // its slot-row schedule (MoeSlotSchedule: R, U, slot sources)
  int E;
  int KB;                // 128-byte units of k: hidden / 128 (gate_up), inter / 128 (down); BF16 hidden / 64, inter / 64
  int row_blocks;        // tiles' row blocks per expert: inter / 64 (gate_up), hidden / 128 (down)
  int w_rows;            // rows per expert of each weight: inter (gate, up), hidden (down)
  const float* s_a;      // block scales [E][w_rows / 128][KB]: gate (gate_up) or down
  const float* s_b;      // up (gate_up); unused for down
  const float* x_scale;  // [KB][ld_xs] of the slot rows (tokens fastest)
  int ld_xs;
  float* out;            // act [pairs][inter] (gate_up) or pair_out [pairs][hidden] (down)
  int out_ld;            // inter or hidden
  int ksplit;            // gate_up: tiles per (expert, row block, token tile) along k, 1 or 2 (down: 1)
  float* gu;             // gate_up with ksplit 2: [pairs][2][inter] sums of g and u, zero before (atomic adds)
};

// Slot-row start R[e] and tile start of every expert (e <= E; tile_begin[E] = T, the tile count) into shared memory
// from moe_group_kernel's schedule (MoeSlotSchedule: R and the token-tile starts U, tiles = U x row blocks x ksplit),
// one load per thread.
__device__ __forceinline__ void schedule(const Args& a, int* row_begin, int* tile_begin) {
  const int per_tt = a.row_blocks * a.ksplit;
  for (int e = threadIdx.x; e <= a.E; e += blockDim.x) {
    row_begin[e] = a.sched[e];
    tile_begin[e] = a.sched[a.E + 1 + e] * per_tt;
  }
}

// Tile t: its expert (the last e with tile_begin[e] <= t: it has tiles, since tile_begin[E] = T > t), row block, token
// tile's first slot row and bucket position, its pair count, and its first column block (k split: part ks of ksplit).
struct Tile {
  int e, rb, xrow, slot0, nvalid, kb0;
};
template <int N>
__device__ __forceinline__ Tile tile_of(const Args& a, int t, const int* row_begin, const int* tile_begin) {
  int lo = 0, hi = a.E;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (tile_begin[mid] <= t) lo = mid;
    else hi = mid;
  }
  const int e = lo, g0 = a.group[e], count = a.group[e + 1] - g0, ntt = (count + N - 1) / N;
  const int local = t - tile_begin[e], ks = local % a.ksplit, rt = local / a.ksplit, rb = rt / ntt, tt = rt % ntt;
  return {e, rb, row_begin[e] + tt * N, g0 + tt * N, min(N, count - tt * N), ks * (a.KB / a.ksplit)};
}

// kBf16: BF16 weights and slot rows (a unit is 64 columns, 4 wgmma m64nNk16 straight into acc, no scales).
template <int N, bool kGateUp, bool kBf16>
__global__ void __launch_bounds__(kThreads, 1)
    moe_wgmma_kernel(const __grid_constant__ CUtensorMap wmap_a, const __grid_constant__ CUtensorMap wmap_b,
                     const __grid_constant__ CUtensorMap xmap, Args a) {
  using C = Cfg<N>;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* base = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  float* xch = reinterpret_cast<float*>(base + C::kStages * C::kStageBytes);
  __shared__ __align__(8) uint64_t full[C::kStages], empty[C::kStages];
  __shared__ int row_begin[kMaxExperts + 1], tile_begin[kMaxExperts + 1];
  const int tid = threadIdx.x, wg = tid / 128;
  constexpr int kTileRows = kGateUp ? 64 : 128;  // rows of each weight per tile
  if (tid == 0) {
    for (int s = 0; s < C::kStages; ++s) {
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], kConsumerWarps);
    }
    mbar_init_fence();
  }
  pdl_wait();  // the buckets and the quantized rows come from the launches before
  schedule(a, row_begin, tile_begin);
  __syncthreads();
  const int T = tile_begin[a.E], G = gridDim.x, c = blockIdx.x;
  const int t_begin = int(int64_t(c) * T / G), t_end = int(int64_t(c + 1) * T / G);
  if (t_begin >= t_end) return;
  const int KBt = a.KB / a.ksplit;  // column blocks per tile
  const int nu = (t_end - t_begin) * KBt;
  // The unit being loaded / multiplied: tile t (and its Tile), its kb-th column block (tl.kb0 + kb), ring stage s and
  // its phase.
  struct Cursor {
    int t, kb, s, phase;
    Tile tl;
    __device__ __forceinline__ void step(const Args& a, const int* rbeg, const int* tbeg, int t_end) {
      if (++s == C::kStages) s = 0, phase ^= 1;
      if (++kb < a.KB / a.ksplit) return;
      kb = 0;
      if (++t < t_end) tl = tile_of<N>(a, t, rbeg, tbeg);
    }
  };
  const Cursor first{t_begin, 0, 0, 0, tile_of<N>(a, t_begin, row_begin, tile_begin)};
  if (wg == 0) {  // producer: one thread works
    if (tid == 0) {
      constexpr unsigned kTx = unsigned(kWBytes + C::kBBytes + (kBf16 ? 0 : N * 4));
      Cursor cu = first;
      for (int i = 0; i < nu; ++i, cu.step(a, row_begin, tile_begin, t_end)) {
        if (i >= C::kStages) mbar_wait(&empty[cu.s], cu.phase ^ 1);  // unit i - kStages is done
        uint8_t* st = base + cu.s * C::kStageBytes;
        mbar_expect_tx(&full[cu.s], kTx);
        const int wrow = cu.tl.e * a.w_rows + cu.tl.rb * kTileRows;
        const int kb = cu.tl.kb0 + cu.kb;
        tma_load_2d(st, &wmap_a, kb * kCols, wrow, &full[cu.s]);
        if constexpr (kGateUp) tma_load_2d(st + 64 * kCols, &wmap_b, kb * kCols, wrow, &full[cu.s]);
        tma_load_2d(st + kWBytes, &xmap, kb * kCols, cu.tl.xrow, &full[cu.s]);
        if constexpr (!kBf16)
          bulk_copy_g2s(st + kWBytes + C::kBBytes, a.x_scale + size_t(kb) * a.ld_xs + cu.tl.xrow, N * 4, &full[cu.s]);
      }
    }
    return;
  }
  const int h = wg - 1, ct = tid - 128 * wg, lane = tid % 32;
  float acc[N / 2], tmp[N / 2];
#pragma unroll
  for (int i = 0; i < N / 2; ++i) acc[i] = 0.f;
  // This warpgroup's weight scales: gate / up rows (gate_up, WG1 / WG2) or its 64 of the tile's 128 rows (down).
  const float* sbase = kGateUp && h == 1 ? a.s_b : a.s_a;
  const int SR = a.w_rows / 128;
  auto wscale_row = [&](const Tile& tl) {
    return sbase + (size_t(tl.e) * SR + (tl.rb * kTileRows + (kGateUp ? 0 : 64 * h)) / 128) * a.KB + tl.kb0;
  };
  Cursor cu = first;
  const float* wsr = kBf16 ? nullptr : wscale_row(cu.tl);
  for (int i = 0; i < nu; ++i) {
    mbar_wait(&full[cu.s], cu.phase);
    uint8_t* st = base + cu.s * C::kStageBytes;
    const uint64_t da = wgmma::desc_sw128(st + h * 64 * kCols), db = wgmma::desc_sw128(st + kWBytes);
    if constexpr (kBf16) {  // fp32 sums of the whole k in acc; columns past the tile's pairs are never stored
      wgmma::fence_operand(acc);
      wgmma::fence();
#pragma unroll
      for (int j = 0; j < kCols / 32; ++j) wgmma::m64k16_bf16_ss<N>(acc, da + 2 * j, db + 2 * j, true);
      wgmma::commit();
      wgmma::wait<0>();
      wgmma::fence_operand(acc);
    } else {
      wgmma::fence();
#pragma unroll
      for (int j = 0; j < kCols / 32; ++j) wgmma::m64k32_e4m3_ss<N>(tmp, da + 2 * j, db + 2 * j, j > 0);
      wgmma::commit();
      const float sw = __ldg(wsr + cu.kb);
      const int cols_left = cu.tl.nvalid - 2 * (lane % 4);
      wgmma::wait<0>();
      wgmma::fence_operand(tmp);
      const float* sx = reinterpret_cast<const float*>(st + kWBytes + C::kBBytes);
#pragma unroll
      for (int j2 = 0; j2 < N / 8; ++j2) {  // columns 8 j2 + 2 (lane % 4) + {0, 1}: registers 4 j2 + {0, 1} + {0, 2}
        const float2 v = *reinterpret_cast<const float2*>(sx + 8 * j2 + 2 * (lane % 4));
        const float f0 = 8 * j2 < cols_left ? v.x * sw : 0.f, f1 = 8 * j2 + 1 < cols_left ? v.y * sw : 0.f;
        const int r0 = 4 * j2;
        acc[r0] = fmaf(tmp[r0], f0, acc[r0]);
        acc[r0 + 2] = fmaf(tmp[r0 + 2], f0, acc[r0 + 2]);
        acc[r0 + 1] = fmaf(tmp[r0 + 1], f1, acc[r0 + 1]);
        acc[r0 + 3] = fmaf(tmp[r0 + 3], f1, acc[r0 + 3]);
      }
    }
    __syncwarp();
    if (lane == 0) mbar_arrive(&empty[cu.s]);
    if (cu.kb == KBt - 1) {  // the tile's end: register r holds row r_base + 8 ((r % 4) / 2), token t_base + 8 (r / 4) + r % 2
      const Tile& tl = cu.tl;
      if (i == nu - 1) pdl_launch_dependents();
      const int t_base = 2 * (ct % 4), r_base = tl.rb * kTileRows + (kGateUp ? 0 : 64 * h) + 16 * (ct / 32) + (ct % 32) / 4;
      const int* pairs = a.group + a.E + 1 + tl.slot0;
      if (kGateUp && a.ksplit > 1) {  // g (WG1) and u (WG2) halves added into gu: 0 + a + b = 0 + b + a, deterministic
        float* gu = a.gu + size_t(h) * a.out_ld;
#pragma unroll
        for (int r = 0; r < N / 2; ++r) {
          const int t = t_base + 8 * (r / 4) + (r % 2);
          if (t < tl.nvalid) atomicAdd(gu + size_t(pairs[t]) * 2 * a.out_ld + r_base + 8 * ((r % 4) / 2), acc[r]);
        }
      } else if constexpr (kGateUp) {
        if (h == 1) {
#pragma unroll
          for (int r = 0; r < N / 2; ++r) xch[r * 128 + ct] = acc[r];
        }
        wgmma::bar_sync(1, 256);
        if (h == 0) {
#pragma unroll
          for (int r = 0; r < N / 2; ++r) {
            const int t = t_base + 8 * (r / 4) + (r % 2);
            if (t < tl.nvalid) {
              const float g = acc[r], u = xch[r * 128 + ct];
              a.out[size_t(pairs[t]) * a.out_ld + r_base + 8 * ((r % 4) / 2)] = g / (1.0f + expf(-g)) * u;
            }
          }
        }
        wgmma::bar_sync(1, 256);  // xch is read before the next tile's hand-off
      } else {
#pragma unroll
        for (int r = 0; r < N / 2; ++r) {
          const int t = t_base + 8 * (r / 4) + (r % 2);
          if (t < tl.nvalid) a.out[size_t(pairs[t]) * a.out_ld + r_base + 8 * ((r % 4) / 2)] = acc[r];
        }
      }
#pragma unroll
      for (int r = 0; r < N / 2; ++r) acc[r] = 0.f;
    }
    cu.step(a, row_begin, tile_begin, t_end);
    if (!kBf16 && cu.kb == 0 && i + 1 < nu) wsr = wscale_row(cu.tl);
  }
}

// Slot-row quantization (steps 1 and 3 of the header): grid (K / 128, ceil(rows / kQuantRows)) CTAs of 256 threads;
// CTA (b, y) quantizes column block b of slot rows y kQuantRows .. + kQuantRows - 1, warp w rows w, w + 8, ...: each
// row's source from moe_group_kernel's schedule (MoeSlotSchedule: its pair, whose x row is pair / k and act row the
// pair, or -1: a pad row, zeros with scale 1). Rows past R[E] (the plan's rows bound B k + 3 E counts every expert's
// pad) are left alone. Every load of a warp is issued before any is used.
// History: S25c's form, one CTA per expert looping over the blocks, chained ~24 L2 round trips per warp at batch 128;
// S25d's, one CTA per (expert, column block), launched E x K / 128 CTAs, ~80% of them for experts without pairs at
// batch 8: 11.3 us per launch in the batch-8 step, S26b. S26c / S26e re-gridded it as now, each CTA scanning the bucket
// offsets and binary-searching each row's expert (own time, Nsight Compute, x then act, batch 1 / 8 / 32 / 128:
// 12 + 11 / 16.4 + 12 / 25.5 + 13.5 / 42 + 21 us); session 27 moved that derivation into moe_group_kernel, once.
constexpr int kQuantThreads = 256;
constexpr int kQuantRowsPerWarp = 4;
constexpr int kQuantRows = kQuantRowsPerWarp * kQuantThreads / 32;  // slot rows per CTA
// kBf16: the rows rounded to bf16 (64 columns per block of 128 bytes), no scales.
template <bool kBf16>
__global__ void __launch_bounds__(kQuantThreads) moe_wgmma_quant_kernel(const int32_t* sched, int E, int rows,
                                                                        const float* src, int src_div, int K,
                                                                        uint8_t* codes, float* scales, int ld,
                                                                        float* gu) {
  pdl_wait();
  pdl_launch_dependents();
  const int b = blockIdx.x, lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int first = blockIdx.y * kQuantRows + warp;
  const int32_t* slot_src = sched + moe_slot_schedule_src(E);  // [rows] (the plan's bound; entries past R[E] are stale)
  const int total = sched[E];
  int src_row[kQuantRowsPerWarp];  // -1: pad row; -2: past R[E]
#pragma unroll
  for (int i = 0; i < kQuantRowsPerWarp; ++i) {  // loaded beside R[E], not after it
    const int j = first + 8 * i;
    src_row[i] = j < rows ? slot_src[j] : -2;
  }
#pragma unroll
  for (int i = 0; i < kQuantRowsPerWarp; ++i) {
    const int j = first + 8 * i;
    src_row[i] = j >= total ? -2 : src_row[i] >= 0 ? src_row[i] / src_div : -1;
  }
  float4 v[kQuantRowsPerWarp];
#pragma unroll
  for (int i = 0; i < kQuantRowsPerWarp; ++i) {
    v[i] = make_float4(0.f, 0.f, 0.f, 0.f);
    if (src_row[i] < 0) continue;
    if (!kBf16 && gu) {  // act = silu(g) u from gate_up's k-split sums, as its unsplit store computes it; the sums
                         // zeroed (FP8 only: BF16 never splits)
      float* gp = gu + size_t(src_row[i]) * 2 * K + 128 * b + 4 * lane;
      const float4 g = *reinterpret_cast<const float4*>(gp), u = *reinterpret_cast<const float4*>(gp + K);
      v[i] = make_float4(g.x / (1.0f + expf(-g.x)) * u.x, g.y / (1.0f + expf(-g.y)) * u.y,
                         g.z / (1.0f + expf(-g.z)) * u.z, g.w / (1.0f + expf(-g.w)) * u.w);
      *reinterpret_cast<float4*>(gp) = make_float4(0.f, 0.f, 0.f, 0.f);
      *reinterpret_cast<float4*>(gp + K) = make_float4(0.f, 0.f, 0.f, 0.f);
    } else if constexpr (kBf16) {
      const float2 f = *reinterpret_cast<const float2*>(src + size_t(src_row[i]) * K + 64 * b + 2 * lane);
      v[i] = make_float4(f.x, f.y, 0.f, 0.f);
    } else {
      v[i] = *reinterpret_cast<const float4*>(src + size_t(src_row[i]) * K + 128 * b + 4 * lane);
    }
  }
#pragma unroll
  for (int i = 0; i < kQuantRowsPerWarp; ++i) {
    if (src_row[i] == -2) continue;
    const int j = first + 8 * i;
    if constexpr (kBf16) {  // bf16 codes (a pad row: zeros)
      const uint32_t q = uint32_t(float_to_bf16_bits(v[i].x)) | uint32_t(float_to_bf16_bits(v[i].y)) << 16;
      *reinterpret_cast<uint32_t*>(codes + size_t(j) * K * 2 + 128 * b + 4 * lane) = q;
      continue;
    }
    float amax = fmaxf(fmaxf(fabsf(v[i].x), fabsf(v[i].y)), fmaxf(fabsf(v[i].z), fabsf(v[i].w)));
#pragma unroll
    for (int o = 16; o > 0; o /= 2) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    const float s = amax > 0.f ? amax / 448.f : 1.f;  // a pad row (zeros): codes 0, scale 1
    const uint32_t q = uint32_t(float_to_e4m3_device(v[i].x / s)) | uint32_t(float_to_e4m3_device(v[i].y / s)) << 8 |
                       uint32_t(float_to_e4m3_device(v[i].z / s)) << 16 |
                       uint32_t(float_to_e4m3_device(v[i].w / s)) << 24;
    *reinterpret_cast<uint32_t*>(codes + size_t(j) * K + 128 * b + 4 * lane) = q;
    if (lane == 0) scales[size_t(b) * ld + j] = s;
  }
}

template <int N, bool kGateUp, bool kBf16>
void launch_gemm(const CUtensorMap& wa, const CUtensorMap& wb, const CUtensorMap& xm, const Args& a, int grid,
                 cudaStream_t stream) {
  auto kernel = moe_wgmma_kernel<N, kGateUp, kBf16>;
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(Cfg<N>::kSmem)));
  launch_kernel(kernel, dim3(unsigned(grid)), kThreads, Cfg<N>::kSmem, stream, wa, wb, xm, a);
  CUDA_CHECK_LAUNCH();
}

// Rows are handled in bytes: es = 1 (e4m3) or 2 (bf16) bytes per element, a unit / column block is 128 bytes.
template <int N, bool kBf16>
void launch_all(const MoeExpertsParams& p, const MoeFp8WgmmaPlan& q, int sms, cudaStream_t stream) {
  constexpr int es = kBf16 ? 2 : 1;
  uint8_t* s = p.wgmma_scratch;
  uint8_t* xc = s + q.x_codes;
  float* xs = reinterpret_cast<float*>(s + q.x_scales);
  uint8_t* ac = s + q.act_codes;
  float* as = reinterpret_cast<float*>(s + q.act_scales);
  const int64_t E = p.E, hb = int64_t(p.hidden) * es, ib = int64_t(p.inter) * es;  // row bytes
  const char* who = "moe_fp8_wgmma_experts_cuda";
  // 1. x into slot rows
  const unsigned quant_chunks = unsigned((q.rows + kQuantRows - 1) / kQuantRows);
  const int32_t* sched = reinterpret_cast<const int32_t*>(s + q.sched);
  launch_kernel(moe_wgmma_quant_kernel<kBf16>, dim3(unsigned(hb / 128), quant_chunks), kQuantThreads, 0, stream,
                sched, p.E, q.rows, p.x, p.k, p.hidden, xc, xs, q.scale_ld, static_cast<float*>(nullptr));
  CUDA_CHECK_LAUNCH();
  // 2. gate_up
  const CUtensorMap gm = tma_map_bytes_sw128(p.w_gate, hb, E * p.inter, hb, 64, who, "the gate weights");
  const CUtensorMap um = tma_map_bytes_sw128(p.w_up, hb, E * p.inter, hb, 64, who, "the up weights");
  const CUtensorMap xm = tma_map_bytes_sw128(xc, hb, q.rows, hb, N, who, "the quantized x rows");
  float* gus = q.ksplit > 1 ? reinterpret_cast<float*>(s + q.gu) : nullptr;
  const Args gu{p.group, sched, p.E, int(hb / kCols), p.inter / 64, p.inter, p.s_gate, p.s_up, xs, q.scale_ld, p.act, p.inter,
                q.ksplit, gus};
  launch_gemm<N, true, kBf16>(gm, um, xm, gu, sms, stream);
  // 3. act into slot rows
  launch_kernel(moe_wgmma_quant_kernel<kBf16>, dim3(unsigned(ib / 128), quant_chunks), kQuantThreads, 0, stream,
                sched, p.E, q.rows, static_cast<const float*>(p.act), 1, p.inter, ac, as, q.scale_ld, gus);
  CUDA_CHECK_LAUNCH();
  // 4. down
  const CUtensorMap dm = tma_map_bytes_sw128(p.w_down, ib, E * p.hidden, ib, 128, who, "the down weights");
  const CUtensorMap am = tma_map_bytes_sw128(ac, ib, q.rows, ib, N, who, "the quantized act rows");
  const Args dn{p.group, sched, p.E, int(ib / kCols), p.hidden / 128, p.hidden, p.s_down, p.s_down, as, q.scale_ld,
                p.pair_out, p.hidden, 1, nullptr};
  launch_gemm<N, false, kBf16>(dm, dm, am, dn, sms, stream);
}

template <int N>
void launch_all(const MoeExpertsParams& p, const MoeFp8WgmmaPlan& q, int sms, cudaStream_t stream) {
  if (p.w_dtype == DType::BF16) launch_all<N, true>(p, q, sms, stream);
  else launch_all<N, false>(p, q, sms, stream);
}

}  // namespace mfw

std::string moe_fp8_wgmma_unsupported(const MoeExpertsParams& p) {
  if (p.w_dtype != DType::BF16 && (p.w_dtype != DType::F8_E4M3 || !p.s_gate || !p.s_up || !p.s_down))
    return "FP8 (e4m3) weights with block scales, or BF16 weights";
  if (p.hidden % 128 != 0 || p.inter % 128 != 0)
    return "hidden and inter multiples of 128 (got " + std::to_string(p.hidden) + ", " + std::to_string(p.inter) + ")";
  if (!aligned16(p.w_gate) || !aligned16(p.w_up) || !aligned16(p.w_down) || !aligned16(p.x) || !aligned16(p.act) ||
      !aligned16(p.pair_out))
    return "16-byte aligned weights, x, act and pair_out";
  if (p.E > mfw::kMaxExperts) return "at most " + std::to_string(mfw::kMaxExperts) + " local experts";
  if (p.shared_gate_up) return "no fused shared expert";
  if (!p.group || !p.pair_out || !p.act) return "the group, act and pair_out scratch";
  if (int64_t(p.E) * std::max(p.hidden, p.inter) >= (int64_t(1) << 31)) return "E x rows < 2^31 (TMA coordinates)";
  return sm90a_device_missing();
}

MoeFp8WgmmaPlan moe_fp8_wgmma_plan(int B, int k, int E, int num_experts_total, int hidden, int inter, int ksplit,
                                   DType w_dtype) {
  MoeFp8WgmmaPlan q;
  const int total = num_experts_total > 0 ? num_experts_total : E;
  const double mean = double(B) * k / std::max(1, total);  // pairs per expert
  q.N = mean * 4 <= 8 ? 8 : mean * 4 <= 16 ? 16 : mean * 4 <= 32 ? 32 : 64;
  // gate_up's k split is opt-in: whole tiles cut over the CTAs leave the last CTAs up to one tile behind (GLM-5 batch
  // 8: ~55 experts x 32 row blocks over 132 SMs, 13.3 tiles per CTA, the longest 14: 5% of gate_up), which the split
  // would halve; measured on the H200 (S25d, bench moe_experts_fp8_wgmma_k1 / _k2, GLM-5 shapes) it never paid for its
  // atomic adds and the act pass over the sums: batch 8 568.8 vs 573.8 us, 32 1535.1 vs 1540.0, 128 2506.4 vs 2545.2.
  // So the plan takes 1 and only MoeExpertsParams::wgmma_ksplit = 2 splits.
  const bool even = (hidden / 128) % 2 == 0;
  const bool bf16 = w_dtype == DType::BF16;
  const size_t es = bf16 ? 2 : 1;
  q.ksplit = ksplit == 2 && even && !bf16 ? 2 : 1;
  q.rows = (B * k + 3 * E + 3) / 4 * 4;
  q.scale_ld = q.rows;
  auto up = [](size_t v) { return (v + 127) / 128 * 128; };
  size_t off = 0;
  q.x_codes = off;
  off = up(off + size_t(q.rows) * hidden * es);
  q.x_scales = off;
  off = up(off + (size_t(hidden / 128) * q.scale_ld + q.N) * 4);
  q.act_codes = off;
  off = up(off + size_t(q.rows) * inter * es);
  q.act_scales = off;
  off = up(off + (size_t(inter / 128) * q.scale_ld + q.N) * 4);
  // The schedule before the k-split sums: its place must not depend on ksplit (a call with ksplit 1 after one with 2 on
  // the same scratch would write it over the sums, which must stay zero).
  q.sched = off;
  off = up(off + moe_slot_schedule_bytes(E, q.rows));
  q.gu = off;
  if (q.ksplit > 1) off = up(off + size_t(B) * k * 2 * inter * 4);
  q.scratch_bytes = off;
  return q;
}

MoeFp8WgmmaPlan moe_fp8_wgmma_checked_plan(const MoeExpertsParams& p) {
  const std::string why = moe_fp8_wgmma_unsupported(p);
  require(why.empty(), "moe_fp8_wgmma_experts_cuda: needs " + why);
  require(p.wgmma_ksplit >= 0 && p.wgmma_ksplit <= 2, "moe_fp8_wgmma_experts_cuda: MoeExpertsParams.wgmma_ksplit = " +
                                                        std::to_string(p.wgmma_ksplit) + ", expected 0, 1 or 2");
  const MoeFp8WgmmaPlan q =
      moe_fp8_wgmma_plan(p.B, p.k, p.E, p.num_experts_total, p.hidden, p.inter, p.wgmma_ksplit, p.w_dtype);
  require(p.wgmma_scratch && p.wgmma_scratch_bytes >= q.scratch_bytes &&
              (reinterpret_cast<uintptr_t>(p.wgmma_scratch) & 127u) == 0,
          "moe_fp8_wgmma_experts_cuda: MoeExpertsParams.wgmma_scratch holds " + std::to_string(p.wgmma_scratch_bytes) +
              " bytes, expected >= " + std::to_string(q.scratch_bytes) + " (moe_fp8_wgmma_plan), 128-byte aligned");
  return q;
}

MoeSlotSchedule moe_fp8_wgmma_slot_schedule(const MoeExpertsParams& p, const MoeFp8WgmmaPlan& q) {
  return {reinterpret_cast<int32_t*>(p.wgmma_scratch + q.sched), q.N};
}
MoeSlotSchedule moe_fp8_wgmma_slot_schedule(const MoeExpertsParams& p) {
  return moe_fp8_wgmma_slot_schedule(p, moe_fp8_wgmma_checked_plan(p));
}

void moe_fp8_wgmma_experts_cuda(const MoeExpertsParams& p, const MoeFp8WgmmaPlan& q, int sms, cudaStream_t stream) {
  require(sms >= 1, "moe_fp8_wgmma_experts_cuda: sms = " + std::to_string(sms) + ", expected >= 1");
  if (q.N == 8) mfw::launch_all<8>(p, q, sms, stream);
  else if (q.N == 16) mfw::launch_all<16>(p, q, sms, stream);
  else if (q.N == 32) mfw::launch_all<32>(p, q, sms, stream);
  else mfw::launch_all<64>(p, q, sms, stream);
}

}  // namespace glm5

namespace glm5 {
void moe_fp8_wgmma_scratch_init(uint8_t* scratch, size_t bytes) {
  require(scratch != nullptr || bytes == 0, "moe_fp8_wgmma_scratch_init: null scratch");
  CUDA_CHECK(cudaMemset(scratch, 0, bytes));
  CUDA_CHECK(cudaDeviceSynchronize());
}
}  // namespace glm5
