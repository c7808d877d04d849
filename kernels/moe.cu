// CUDA MoE decode: routing (one block per token) and the routed SwiGLU experts as one grouped launch
// family, no per-expert host loop. Small batches (B < 4, or no grouping scratch): one block row per
// (token, expert-slot) pair. Larger batches: the pairs are bucketed by expert (moe_group_kernel) and
// blocks (expert, row block) read each selected expert's weights once for all its tokens, 8 tokens per
// warp pass (moe_*_grouped_kernel, moe_combine_kernel); with FP8 and BF16 weights the grouped pass runs on
// the tensor cores by default (moe_*_grouped_mma_kernel, MoeExpertsParams.fp8_mma). Per-token path:
//   moe_gate_up_kernel: act[b,j,i] = silu(gate_e[i,:] . x_b) * (up_e[i,:] . x_b),  e = topk_ids[b,j]
//   moe_down_kernel:    out[b,d]   = sum_j topk_weights[b,j] * (down_e[d,:] . act[b,j,:])
// Memory-bound GEMV: one warp per output row, 16-byte bf16 weight loads (8 values) when the row
// length is a multiple of 8 and the bases are 16-byte aligned, fp32 accumulation, warp-shuffle sums.
// Bytes: B*k*(3*inter*hidden*2) weight bytes (repeated experts re-read, mostly from L2) + activations.
// Device-side expert ids outside [0, E) contribute nothing (the CPU twin throws on them).
#include <algorithm>
#include <cstdint>

#include "common/error.h"
#include "kernels/moe.h"
#include "kernels/moe_route.cuh"
#include "kernels/kv_cast.cuh"
#include "kernels/kv_layout.h"
#include "kernels/fp8_dot.cuh"
#include "kernels/linear_bf16_mma.cuh"
#include "kernels/linear_fp8_mma.cuh"
#include "kernels/launch.cuh"
#include "kernels/norm.cuh"
#include "kernels/sm90a/moe_fp8_wgmma.h"

namespace glm5 {

namespace {

using namespace moe_route_dev;

constexpr int kWarps = 8;              // warps per block of the expert kernels
constexpr int kGateUpRowsPerWarp = 2;  // inter rows per warp (each row: a gate and an up dot product)
constexpr int kDownRowsPerWarp = 1;    // hidden rows per warp (each row: k dot products); B=1 still
                                       // gives hidden/8 = 768 blocks at GLM-5 size

// out[b, d] = v, or out[b, d] + v with MoeExpertsParams.accumulate (the residual add fused in).
__device__ __forceinline__ void store_out(const MoeExpertsParams& p, int b, int d, float v) {
  float* o = p.out + size_t(b) * p.hidden + d;
  *o = p.accumulate ? *o + v : v;
}

// Dot product of fp32 `x` with a bf16 row of length n, summed over the warp (all lanes get it).
template <bool kVec>
__device__ float warp_dot_bf16(const float* x, const uint16_t* w, int n) {
  const int lane = threadIdx.x % 32;
  float acc = 0.f;
  if constexpr (kVec) {  // n % 8 == 0, w and x 16-byte aligned
    for (int i = lane * 8; i < n; i += 32 * 8) {
      const uint4 packed = *reinterpret_cast<const uint4*>(w + i);
      const float4 x0 = *reinterpret_cast<const float4*>(x + i);
      const float4 x1 = *reinterpret_cast<const float4*>(x + i + 4);
      const uint32_t u[4] = {packed.x, packed.y, packed.z, packed.w};
      const float xs[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        acc += xs[2 * q] * __uint_as_float(u[q] << 16);
        acc += xs[2 * q + 1] * __uint_as_float(u[q] & 0xffff0000u);
      }
    }
  } else {
    for (int i = lane; i < n; i += 32) acc += x[i] * bf16_bits_to_float(w[i]);
  }
  return warp_sum(acc);
}

// Dot product of fp32 `x` with an FP8 row of length n (block scales `s`: one per 128 columns), summed
// over the warp. Vector path: n % 16 == 0, w and x 16-byte aligned: 16 codes per lane per step, which
// never straddle a 128-column block.
template <bool kVec>
__device__ float warp_dot_fp8(const float* x, const uint8_t* w, const float* s, int n) {
  const int lane = threadIdx.x % 32;
  float acc = 0.f;
  if constexpr (kVec) {
    const float* const xs[1] = {x};
    const uint8_t* const ws[1] = {w};
    const float* const ss[1] = {s};
    float out[1];
    warp_dots_fp8<1, 1>(xs, ws, ss, 0, n, out);  // fp8_dot.cuh: the same per-lane arithmetic order
    return out[0];
  } else {
    for (int i = lane; i < n; i += 32) {
      const float2 v = e4m3x2_to_float2(uint16_t(w[i]));
      acc = fmaf(v.x * s[i / 128], x[i], acc);
    }
  }
  return warp_sum(acc);
}

// Row `row` (of `rows_per_expert` per expert) of expert e's weight, BF16 or FP8, dotted with x.
template <bool kVec, bool kFp8>
__device__ float expert_row_dot(const float* x, const void* w, const float* s, int e, int rows_per_expert, int row, int n) {
  const size_t r = size_t(e) * rows_per_expert + row;
  if constexpr (kFp8) {
    const int sc = (n + 127) / 128, sr = (rows_per_expert + 127) / 128;
    return warp_dot_fp8<kVec>(x, static_cast<const uint8_t*>(w) + r * n, s + (size_t(e) * sr + row / 128) * sc, n);
  } else {
    return warp_dot_bf16<kVec>(x, static_cast<const uint16_t*>(w) + r * n, n);
  }
}

// grid (B*k, ceil(inter / (kWarps*kGateUpRowsPerWarp))), block 32*kWarps.
template <bool kVec, bool kFp8>
__global__ void moe_gate_up_kernel(MoeExpertsParams p) {
  pdl_begin();
  const int pair = blockIdx.x;  // b * k + j
  const int b = pair / p.k;
  const int e = p.topk_ids[pair] - p.expert_begin;  // local expert; outside [0, E): another rank's
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float* act = p.act + size_t(pair) * p.inter;
  const int row0 = (blockIdx.y * kWarps + warp) * kGateUpRowsPerWarp;
  const bool valid = e >= 0 && e < p.E;
  const float* x = p.x + size_t(b) * p.hidden;
  for (int r = 0; r < kGateUpRowsPerWarp; ++r) {
    const int i = row0 + r;
    if (i >= p.inter) break;
    float a = 0.f;
    if (valid) {
      const float g = expert_row_dot<kVec, kFp8>(x, p.w_gate, p.s_gate, e, p.inter, i, p.hidden);
      const float u = expert_row_dot<kVec, kFp8>(x, p.w_up, p.s_up, e, p.inter, i, p.hidden);
      a = g / (1.0f + expf(-g)) * u;
    }
    if (lane == 0) act[i] = a;
  }
}

// FP8 vector path of moe_gate_up_kernel (same grid): the warp's two rows' gate and up dot products
// run together (warp_dots_fp8<4, 2>: 8 x 16 B in flight per lane), same arithmetic order as
// expert_row_dot, so the same bits. Each chunk's activations are loaded once for the four rows.
// Pairs B*k .. B*k + B - 1 (with p.shared_gate_up): the shared expert of token pair - B*k.
// The body of one CTA's tile (pair, row block `by`), shared with moe_pair_fused_fp8_kernel.
__device__ __forceinline__ void gate_up_fp8_tile(const MoeExpertsParams& p, int pair, int by) {
  const bool shared = pair >= p.B * p.k;
  const int b = shared ? pair - p.B * p.k : pair / p.k;
  const int e = shared ? 0 : p.topk_ids[pair] - p.expert_begin;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float* act = p.act + size_t(pair) * p.inter;
  const int row0 = (by * kWarps + warp) * kGateUpRowsPerWarp;
  static_assert(kGateUpRowsPerWarp == 2, "two rows per warp");
  if (row0 >= p.inter) return;
  const int row1 = min(row0 + 1, p.inter - 1);
  if (e < 0 || e >= p.E) {
    if (lane == 0) {
      act[row0] = 0.f;
      act[row1] = 0.f;
    }
    return;
  }
  const float* x = p.x + size_t(b) * p.hidden;
  const int sc = (p.hidden + 127) / 128, sr = (p.inter + 127) / 128;
  // Routed: expert e's gate / up rows. Shared: rows i (gate) and inter + i (up) of shared_gate_up.
  auto wrow = [&](const void* w, int i) {
    return shared ? static_cast<const uint8_t*>(p.shared_gate_up) + (size_t(w == p.w_up ? p.inter : 0) + i) * p.hidden
                  : static_cast<const uint8_t*>(w) + (size_t(e) * p.inter + i) * p.hidden;
  };
  auto srow = [&](const float* s, int i) {
    return shared ? p.s_shared_gate_up + ((s == p.s_up ? p.inter : 0) + i) / 128 * sc : s + (size_t(e) * sr + i / 128) * sc;
  };
  const float* const xs[4] = {x, x, x, x};
  const uint8_t* const ws[4] = {wrow(p.w_gate, row0), wrow(p.w_up, row0), wrow(p.w_gate, row1), wrow(p.w_up, row1)};
  const float* const ss[4] = {srow(p.s_gate, row0), srow(p.s_up, row0), srow(p.s_gate, row1), srow(p.s_up, row1)};
  float o[4];
  uint4 c[4][2];
  if (lane * 16 < p.hidden) warp_load_fp8<4, 2>(ws, lane * 16, p.hidden, c);
  warp_dots_fp8_loaded<4, 2, true>(xs, ws, ss, 0, p.hidden, c, o);
  if (lane == 0) {
    act[row0] = o[0] / (1.0f + expf(-o[0])) * o[1];
    if (row1 != row0) act[row1] = o[2] / (1.0f + expf(-o[2])) * o[3];
  }
}

__global__ void __launch_bounds__(32 * kWarps, 2) moe_gate_up_fp8_kernel(MoeExpertsParams p, int pair0) {
  pdl_wait();
  // MoeExpertsParams::shared_late_trigger: the shared expert's stage lets its down kernel in at exit (implicitly).
  if (!(p.shared_late_trigger && pair0 >= p.B * p.k)) pdl_launch_dependents();
  gate_up_fp8_tile(p, pair0 + blockIdx.x, blockIdx.y);  // pair0: MoeExpertsParams::Stage (shared pairs start at B*k)
}

// FP8 vector path of moe_down_kernel (same grid): the token's valid slots eight at a time
// (warp_dots_fp8<8, 1>; a short last group repeats its last slot and drops the copies), summed in slot
// order as moe_down_kernel does.
__global__ void __launch_bounds__(32 * kWarps, 2) moe_down_fp8_kernel(MoeExpertsParams p) {
  pdl_begin();
  const int b = blockIdx.x;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int d = (blockIdx.y * kWarps + warp) * kDownRowsPerWarp;
  static_assert(kDownRowsPerWarp == 1, "one row per warp");
  if (d >= p.hidden) return;
  int js[32];  // the launcher checks k <= 32
  int nv = 0;
  for (int j = 0; j < p.k; ++j) {
    const int e = p.topk_ids[b * p.k + j] - p.expert_begin;
    if (e >= 0 && e < p.E) js[nv++] = j;
  }
  const int sc = (p.inter + 127) / 128, sr = (p.hidden + 127) / 128;
  float sum = 0.f;
  constexpr int G = 8;  // slots per pass: 8 x 16 B in flight per lane (GLM-5 / DeepSeek k = 8: one pass)
  for (int g = 0; g < nv; g += G) {
    const float* xs[G];
    const uint8_t* ws[G];
    const float* ss[G];
#pragma unroll
    for (int r = 0; r < G; ++r) {
      const int j = js[min(g + r, nv - 1)];
      const int e = p.topk_ids[b * p.k + j] - p.expert_begin;
      xs[r] = p.act + (size_t(b) * p.k + j) * p.inter;
      ws[r] = static_cast<const uint8_t*>(p.w_down) + (size_t(e) * p.hidden + d) * p.inter;
      ss[r] = p.s_down + (size_t(e) * sr + d / 128) * sc;
    }
    float o[G];
    const float* const (&cx)[G] = xs;
    const uint8_t* const (&cw)[G] = ws;
    const float* const (&cs)[G] = ss;
    warp_dots_fp8<G, 1>(cx, cw, cs, 0, p.inter, o);
#pragma unroll
    for (int r = 0; r < G; ++r)
      if (g + r < nv) sum = fmaf(o[r], p.topk_weights[b * p.k + js[g + r]], sum);  // as moe_combine_kernel
  }
  if (lane == 0) store_out(p, b, d, sum);
}

// FP8 down projection per (token, slot) pair, for small batches with pair_out scratch: grid (B*k,
// ceil(hidden / (kWarps * kPairDownRows))); a warp takes kPairDownRows rows of ONE expert, all dotted
// with the same act row, and writes pair_out[pair, d]; moe_combine_kernel then sums the slots in slot
// order. Why (H200, GLM-5 batch 1, 2026-11-29 run E): moe_down_fp8_kernel (a warp = one row d, all 8
// slots) took 67 us per call for 100 MB of FP8 weights (35% of copy) while gate_up ran at 79%: each of
// its 8 rows has a different act row, so per 16 weight bytes a lane reads 8 x 64 bytes of fp32 act
// from L1, and at HBM speed that is the L1's whole bandwidth. Here the 4 rows share one act chunk
// (16 bytes of act traffic per 16 weight bytes). Same per-row arithmetic (warp_dots_fp8 sums in the
// same order for any R and U) and the same slot-order sum in moe_combine_kernel: bitwise equal to
// moe_down_fp8_kernel.
// The body of one CTA's tile (pair, row block `by`), shared with moe_pair_fused_fp8_kernel: expert e's rows
// d0 .. d0 + 3 per warp dotted with the pair's act row (loaded once per chunk for the four rows). The warp's first
// step of weight loads (4 rows x 2 x 16 B per lane) is issued, then `x = wait()` runs (every thread calls it, the
// same number of times: it may hold barriers) and returns where to read the pair's act row (p.act's row, or a copy
// in shared memory), then the rest is streamed. `ids_cg`: the expert id is read through L2 (it is read before
// `wait`, see moe_down_pair_fp8_kernel).
constexpr int kPairDownRows = 4;
template <class Wait>
__device__ __forceinline__ void down_pair_fp8_tile(const MoeExpertsParams& p, int pair, int by, bool ids_cg, Wait wait) {
  const bool shared = pair >= p.B * p.k;  // the shared expert of token pair - B*k (p.shared_down)
  const int e = shared ? 0 : (ids_cg ? __ldcg(p.topk_ids + pair) : p.topk_ids[pair]) - p.expert_begin;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int d0 = (by * kWarps + warp) * kPairDownRows;
  const bool active = e >= 0 && e < p.E && d0 < p.hidden;  // else another rank's expert: the combine skips it
  const int sc = (p.inter + 127) / 128, sr = (p.hidden + 127) / 128;
  const uint8_t* ws[kPairDownRows];
  const float* ss[kPairDownRows];
#pragma unroll
  for (int r = 0; r < kPairDownRows; ++r) {
    const int d = min(d0 + r, p.hidden - 1);  // rows past the end repeat the last one (not written)
    ws[r] = static_cast<const uint8_t*>(shared ? p.shared_down : p.w_down) + (size_t(active ? e : 0) * p.hidden + d) * p.inter;
    ss[r] = (shared ? p.s_shared_down : p.s_down) + (size_t(active ? e : 0) * sr + d / 128) * sc;
  }
  const uint8_t* const (&cw)[kPairDownRows] = ws;
  const float* const (&cs)[kPairDownRows] = ss;
  uint4 c[kPairDownRows][2];
  if (active && lane * 16 < p.inter) warp_load_fp8<kPairDownRows, 2>(cw, lane * 16, p.inter, c);
  const float* x = wait();
  if (!active) return;
  const float* const xs[kPairDownRows] = {x, x, x, x};
  static_assert(kPairDownRows == 4, "xs lists the rows");
  float o[kPairDownRows];
  warp_dots_fp8_loaded<kPairDownRows, 2, true>(xs, cw, cs, 0, p.inter, c, o);
  if (lane == 0)
#pragma unroll
    for (int r = 0; r < kPairDownRows; ++r)
      if (d0 + r < p.hidden) p.pair_out[size_t(pair) * p.hidden + d0 + r] = o[r];
}

// kEarly (MoeExpertsParams::down_early_loads): the warp's first step of weight loads is issued before pdl_wait(),
// so under PDL the first wave's DRAM round trips overlap the tail of moe_gate_up_fp8_kernel (S17a: moe.experts
// 6.85 -> 6.73 ms per batch-1 step; bench 100.1 -> 98.9 us). The weights and scales are written by no kernel of
// the step; the expert id is: it comes from the routing kernel two launches back, read through L2
// (ld.global.cg). Why that read sees the routing's output: this grid's CTAs are scheduled only after every CTA
// of the gate_up grid has executed griddepcontrol.launch_dependents, which each does after its
// griddepcontrol.wait returned, i.e. after the routing grid completed and its writes were flushed
// (kernels/launch.cuh's contract, applied twice). L1 is bypassed because it is not coherent: an earlier layer's
// ids at the same address could sit there. Without PDL (GLM5_PDL=0, graphs without programmatic edges) the
// launch is ordinary and the order trivially holds.
template <bool kEarly>
__global__ void __launch_bounds__(32 * kWarps, 2) moe_down_pair_fp8_kernel(MoeExpertsParams p, int pair0) {
  if constexpr (!kEarly) pdl_begin();
  const int pair = pair0 + blockIdx.x;
  down_pair_fp8_tile(p, pair, blockIdx.y, kEarly, [&] {
    if constexpr (kEarly) pdl_begin();
    return static_cast<const float*>(p.act + size_t(pair) * p.inter);
  });
}

// The batch-1 pair path in one persistent launch (MoeExpertsParams::pair_sync): gate_up tiles, then down tiles,
// taken in that order from a tile counter by gridDim.x resident CTAs. Why: the two-kernel form loses a ramp and a
// tail per launch (S17: a plain 192 MiB read in one launch runs at 84% of copy, 96 MiB at 75%; the two MoE kernels
// are within ~6% of a math-free read of their bytes in their access pattern), and here a CTA done with its
// gate_up tiles starts its down tile's weight loads while the last gate_up tiles finish.
// Order: a gate_up tile (pair, by) counts itself in done[pair] after its act rows are written (a barrier, then
// thread 0 fences and adds: the barrier makes the CTA's writes thread 0's, the gpu-scope fence is cumulative); a down tile of `pair` issues its first weight loads, then thread 0 polls
// done[pair] (ld.acquire.gpu) until all ceil(inter / 16) tiles of the pair have counted, a barrier, and the CTA
// copies the act row through L2 (ld.global.cg: L1 is not coherent) into shared memory (inter floats of dynamic
// shared memory; S17d: reading it through L2 for every chunk and row instead, 64 B per 16 weight bytes, made the
// fused launch 171 us against the two kernels' 98). No deadlock without co-residency: tiles are handed out in increasing order, so every
// gate_up tile a down tile waits for was taken earlier by a CTA that is running it (gate_up tiles wait on
// nothing). Sync words (p.pair_sync): [0] tile counter, [1] CTAs finished, [2 + i] done of local pair i; the
// last CTA to finish resets them all to zero for the next launch (CUDA-graph replays).
// Same per-row arithmetic as the two kernels: the same bits.
__global__ void __launch_bounds__(32 * kWarps, 2) moe_pair_fused_fp8_kernel(MoeExpertsParams p, int pair0, int npairs) {
  pdl_begin();
  extern __shared__ __align__(16) float act_s[];  // [p.inter]: the down tile's act row
  __shared__ int tile_s[2];  // the current tile and the next one (fetched while the current one runs)
  int* const tiles = p.pair_sync;
  int* const finished = p.pair_sync + 1;
  int* const done = p.pair_sync + 2;
  const int up_blocks = (p.inter + kWarps * kGateUpRowsPerWarp - 1) / (kWarps * kGateUpRowsPerWarp);
  const int down_blocks = (p.hidden + kWarps * kPairDownRows - 1) / (kWarps * kPairDownRows);
  const int t_up = npairs * up_blocks, t_all = t_up + npairs * down_blocks;
  // The next tile's number is fetched one tile ahead (S17e: fetching it between tiles left the CTA without loads in
  // flight for an atomic's round trip per tile: 112.8 us against the two kernels' 99.2). Still deadlock-free: a
  // CTA holding a prefetched gate_up tile u is running a current tile below u, hence a gate_up tile too (every
  // gate_up tile is numbered below every down tile), which waits on nothing.
  if (threadIdx.x == 0) tile_s[0] = atomicAdd(tiles, 1);
  for (int it = 0;; ++it) {
    __syncthreads();  // tile_s[it % 2] is written; every thread is done with the previous tile
    const int t = tile_s[it % 2];
    if (t >= t_all) break;
    if (threadIdx.x == 0) tile_s[(it + 1) % 2] = atomicAdd(tiles, 1);  // read at the next iteration's barrier
    if (t < t_up) {
      const int local = t / up_blocks;
      gate_up_fp8_tile(p, pair0 + local, t % up_blocks);
      __syncthreads();  // the CTA's act rows are written; thread 0's fence makes them visible at gpu scope first
      if (threadIdx.x == 0) {
        __threadfence();
        atomicAdd(done + local, 1);
      }
    } else {
      const int local = (t - t_up) / down_blocks;
      down_pair_fp8_tile(p, pair0 + local, (t - t_up) % down_blocks, false, [&] {
        if (threadIdx.x == 0)
          while (ld_acquire_gpu(done + local) < up_blocks) __nanosleep(64);
        __syncthreads();
        const float4* src = reinterpret_cast<const float4*>(p.act + size_t(pair0 + local) * p.inter);
        for (int i = threadIdx.x; i < p.inter / 4; i += blockDim.x) reinterpret_cast<float4*>(act_s)[i] = __ldcg(src + i);
        __syncthreads();
        return static_cast<const float*>(act_s);
      });
    }
  }
  if (threadIdx.x == 0) __threadfence();  // this CTA's tile-counter and done updates before its finished count
  if (threadIdx.x == 0 && atomicAdd(finished, 1) == int(gridDim.x) - 1) {
    // Every other CTA has left the loop: no one reads the words any more.
    *tiles = 0;
    *finished = 0;
    for (int i = 0; i < npairs; ++i) done[i] = 0;
  }
}

// grid (B, ceil(hidden / (kWarps*kDownRowsPerWarp))), block 32*kWarps. Loops over the k slots, so no
// atomics and a deterministic sum (slot order, as the CPU twin).
template <bool kVec, bool kFp8>
__global__ void moe_down_kernel(MoeExpertsParams p) {
  pdl_begin();
  const int b = blockIdx.x;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int row0 = (blockIdx.y * kWarps + warp) * kDownRowsPerWarp;
  for (int r = 0; r < kDownRowsPerWarp; ++r) {
    const int d = row0 + r;
    if (d >= p.hidden) break;
    float sum = 0.f;
    for (int j = 0; j < p.k; ++j) {
      const int e = p.topk_ids[b * p.k + j] - p.expert_begin;
      if (e < 0 || e >= p.E) continue;
      const float* act = p.act + (size_t(b) * p.k + j) * p.inter;
      sum = fmaf(expert_row_dot<kVec, kFp8>(act, p.w_down, p.s_down, e, p.hidden, d, p.inter), p.topk_weights[b * p.k + j],
                 sum);  // explicit: the combine kernels' bits must not depend on -fmad
    }
    if (lane == 0) store_out(p, b, d, sum);
  }
}

// One block of kRouteThreads per token (was one warp: 10.9 us per call at GLM-5 batch 1 on the H200,
// ~0.8 ms per step, latency of serial loops over 256 experts). Shared: score[E], choice[E] (masked in
// place), group_score[n_group]. Same picks and weights as the CPU twin: a group's score is the sum of
// its top-2 choice scores (the top-2 of a union is order-free), picks by block-wide argmax with ties
// to the lower index, the weight sum accumulated in pick order.
constexpr int kRouteThreads = 256;
__global__ void __launch_bounds__(kRouteThreads) moe_route_kernel(MoeRouteParams p) {
  pdl_begin();
  extern __shared__ float smem[];
  float* score = smem;
  float* choice = smem + p.E;
  float* group_score = smem + 2 * p.E;
  __shared__ float red_v[kRouteThreads / 32];
  __shared__ int red_i[kRouteThreads / 32];
  __shared__ int picks[32];
  const int b = blockIdx.x, tid = threadIdx.x, lane = tid % 32, warp = tid / 32, nw = kRouteThreads / 32;
  const int group_size = p.E / p.n_group;
  for (int e = tid; e < p.E; e += kRouteThreads) {
    score[e] = 1.0f / (1.0f + expf(-p.logits[size_t(b) * p.E + e]));
    choice[e] = score[e] + p.bias[e];
    if (isnan(choice[e])) choice[e] = -INFINITY;  // NaN logits never win; +inf below marks "taken"
  }
  __syncthreads();
  for (int g = warp; g < p.n_group; g += nw) {  // sum of the top-2 choice scores of group g
    float first = -INFINITY, second = -INFINITY;
    for (int e = g * group_size + lane; e < (g + 1) * group_size; e += 32) top2_add(choice[e], first, second);
    top2_merge_lanes(first, second, 32);
    if (lane == 0) group_score[g] = group_size >= 2 ? first + second : first;
  }
  __syncthreads();
  if (warp == 0) {  // keep topk_group groups (marked by group_score = +inf after the pick)
    for (int t = 0; t < p.topk_group; ++t) {
      float v = -INFINITY;
      int idx = 0x7fffffff;
      for (int g = lane; g < p.n_group; g += 32)
        if (group_score[g] != INFINITY && (group_score[g] > v || idx == 0x7fffffff)) { v = group_score[g]; idx = g; }
      warp_argmax(v, idx);
      __syncwarp();
      if (lane == 0) group_score[idx] = INFINITY;
      __syncwarp();
    }
  }
  __syncthreads();
  for (int e = tid; e < p.E; e += kRouteThreads)  // experts of dropped groups score -inf, as HF masked_fill
    if (group_score[e / group_size] != INFINITY) choice[e] = -INFINITY;
  __syncthreads();
  for (int j = 0; j < p.k; ++j) {
    float v = -INFINITY;
    int idx = 0x7fffffff;
    for (int e = tid; e < p.E; e += kRouteThreads)
      if (choice[e] != INFINITY && (choice[e] > v || idx == 0x7fffffff)) { v = choice[e]; idx = e; }
    warp_argmax(v, idx);
    if (lane == 0) {
      red_v[warp] = v;
      red_i[warp] = idx;
    }
    __syncthreads();
    if (warp == 0) {
      v = lane < nw ? red_v[lane] : -INFINITY;
      idx = lane < nw ? red_i[lane] : 0x7fffffff;
      warp_argmax(v, idx);
      if (lane == 0) {
        choice[idx] = INFINITY;  // taken
        picks[j] = idx;
      }
    }
    __syncthreads();
  }
  if (tid == 0) {
    float weight_sum = 0.f;
    for (int j = 0; j < p.k; ++j) weight_sum += score[picks[j]];  // same order as the CPU twin
    for (int j = 0; j < p.k; ++j) {
      float w = score[picks[j]];
      if (p.norm_topk_prob) w /= (weight_sum + 1e-20f);
      p.topk_ids[size_t(b) * p.k + j] = picks[j];
      p.topk_weights[size_t(b) * p.k + j] = w * p.routed_scaling_factor;
    }
  }
}


// One warp per token (route_token_warp in moe_route.cuh).
template <int P>
__global__ void __launch_bounds__(32) moe_route_warp_kernel(MoeRouteParams p) {
  pdl_begin();
  const int b = blockIdx.x;
  const float* logits = p.logits + size_t(b) * p.E;
  route_token_warp<P>(p, b, [&](int i) { return logits[i]; });
}

// One 256-thread block per token, by ranks (route_token_block in moe_route.cuh; MoeRouteParams::rank_form).
// Dynamic shared memory: score [E], choice [E] (E % 32 == 0: 16-byte aligned), gscore [n_group], picks [k].
constexpr int kRouteRankThreads = 256;
__global__ void __launch_bounds__(kRouteRankThreads) moe_route_rank_kernel(MoeRouteParams p) {
  pdl_begin();
  extern __shared__ float4 route_smem4[];
  float* score = reinterpret_cast<float*>(route_smem4);
  float* choice = score + p.E;
  float* gscore = choice + p.E;
  int* picks = reinterpret_cast<int*>(gscore + p.n_group);
  const int b = blockIdx.x;
  const float* logits = p.logits + size_t(b) * p.E;
  route_token_block(p, b, [&](int i) { return logits[i]; }, score, choice, gscore, picks);
}

// ---- expert-grouped path ----
constexpr int kGroup = 8;  // pairs per pass of a warp (weights loaded once per pass)

// out[t] = sum over the warp of x_t . w for the nt <= kGroup activation rows xs[t] and one weight row
// (BF16, or FP8 with per-128-column scales srow). Each token's lane partials accumulate in the order
// of warp_dot_bf16 / warp_dot_fp8, so the grouped and per-token kernels agree to the bit.
template <bool kVec, bool kFp8>
__device__ void warp_dot_multi(const float* const* xs, int nt, const void* wrow, const float* srow, int n, float* out) {
  const int lane = threadIdx.x % 32;
  float acc[kGroup] = {};
  if constexpr (kFp8 && kVec) {
    const uint8_t* w = static_cast<const uint8_t*>(wrow);
    for (int i = lane * 16; i < n; i += 32 * 16) {
      const uint4 packed = __ldg(reinterpret_cast<const uint4*>(w + i));
      const float s = srow[i / 128];
#pragma unroll
      for (int t = 0; t < kGroup; ++t) {
        if (t >= nt) break;
        acc[t] = fmaf(s, fp8_dot16(packed, xs[t] + i), acc[t]);
      }
    }
  } else if constexpr (kFp8) {
    const uint8_t* w = static_cast<const uint8_t*>(wrow);
    for (int i = lane; i < n; i += 32) {
      const float2 v = e4m3x2_to_float2(uint16_t(w[i]));
      const float ws = v.x * srow[i / 128];
      for (int t = 0; t < nt; ++t) acc[t] = fmaf(ws, xs[t][i], acc[t]);
    }
  } else if constexpr (kVec) {
    const uint16_t* w = static_cast<const uint16_t*>(wrow);
    for (int i = lane * 8; i < n; i += 32 * 8) {
      const uint4 packed = *reinterpret_cast<const uint4*>(w + i);
      const uint32_t u[4] = {packed.x, packed.y, packed.z, packed.w};
#pragma unroll
      for (int t = 0; t < kGroup; ++t) {
        if (t >= nt) break;
        const float4 x0 = *reinterpret_cast<const float4*>(xs[t] + i);
        const float4 x1 = *reinterpret_cast<const float4*>(xs[t] + i + 4);
        const float xv[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          acc[t] += xv[2 * q] * __uint_as_float(u[q] << 16);
          acc[t] += xv[2 * q + 1] * __uint_as_float(u[q] & 0xffff0000u);
        }
      }
    }
  } else {
    const uint16_t* w = static_cast<const uint16_t*>(wrow);
    for (int i = lane; i < n; i += 32) {
      const float wv = bf16_bits_to_float(w[i]);
      for (int t = 0; t < nt; ++t) acc[t] += xs[t][i] * wv;
    }
  }
#pragma unroll
  for (int t = 0; t < kGroup; ++t) out[t] = warp_sum(acc[t]);
}

// Row `row` of expert e's [rows_per_expert, n] weight and its scale row.
template <bool kFp8>
__device__ void expert_row(const void* w, const float* s, int e, int rows_per_expert, int row, int n, const void*& wrow,
                           const float*& srow) {
  const size_t r = size_t(e) * rows_per_expert + row;
  if constexpr (kFp8) {
    wrow = static_cast<const uint8_t*>(w) + r * n;
    const int sc = (n + 127) / 128, sr = (rows_per_expert + 127) / 128;
    srow = s + (size_t(e) * sr + row / 128) * sc;
  } else {
    wrow = static_cast<const uint16_t*>(w) + r * n;
    srow = nullptr;
  }
}

// One block: bucket the B*k pairs by local expert. group[0..E] = offsets, group[E+1 ..] = pair indices.
// With sched.out (the TMA-fed expert kernels' slot-row schedule, MoeSlotSchedule in moe.h) the same scan also
// yields R and U, and each pair's slot row is written beside its bucket position; pad rows get -1.
__global__ void moe_group_kernel(MoeExpertsParams p, MoeSlotSchedule sched) {
  pdl_begin();
  extern __shared__ int counts[];  // [E] counts, [E] cursors; with sched.out also [E] slot-row starts R, [E] offsets
  int* cursor = counts + p.E;
  int* row_begin = counts + 2 * p.E;
  int* offset = counts + 3 * p.E;
  const int pairs = p.B * p.k;
  for (int e = threadIdx.x; e < p.E; e += blockDim.x) counts[e] = 0;
  __syncthreads();
  for (int i = threadIdx.x; i < pairs; i += blockDim.x) {
    const int e = p.topk_ids[i] - p.expert_begin;
    if (e >= 0 && e < p.E) atomicAdd(&counts[e], 1);
  }
  __syncthreads();
  if (threadIdx.x < 32) {  // exclusive scans of the counts (and of R's rounded counts and the token tiles): each lane
    // a run of consecutive experts, one warp scan (a serial loop over 256 experts in one thread took ~10 us, Nsight
    // Compute S26b)
    const int lane = threadIdx.x, per = (p.E + 31) / 32, e0 = min(p.E, lane * per), e1 = min(p.E, e0 + per);
    const int tn = max(sched.tile_n, 1);
    int n = 0, r = 0, u = 0;
    for (int e = e0; e < e1; ++e) {
      const int c = counts[e];
      n += c, r += (c + 3) & ~3, u += (c + tn - 1) / tn;
    }
    int run = n, rrun = r, urun = u;
#pragma unroll
    for (int o = 1; o < 32; o *= 2) {
      const int a = __shfl_up_sync(0xffffffffu, run, o), b = __shfl_up_sync(0xffffffffu, rrun, o),
                d = __shfl_up_sync(0xffffffffu, urun, o);
      if (lane >= o) run += a, rrun += b, urun += d;
    }
    run -= n, rrun -= r, urun -= u;
    for (int e = e0; e < e1; ++e) {
      const int c = counts[e];
      p.group[e] = run;
      cursor[e] = run;
      if (sched.out) {
        row_begin[e] = rrun;
        offset[e] = run;
        sched.out[e] = rrun;
        sched.out[p.E + 1 + e] = urun;
      }
      run += c, rrun += (c + 3) & ~3, urun += (c + tn - 1) / tn;
    }
    if (lane == 31) {
      p.group[p.E] = run;
      if (sched.out) sched.out[p.E] = rrun, sched.out[2 * p.E + 1] = urun;
    }
  }
  __syncthreads();
  int* slot_src = sched.out ? sched.out + moe_slot_schedule_src(p.E) : nullptr;
  if (sched.out)  // the pad rows of every bucket: R[e] + count_e .. R[e + 1] - 1 (at most 3)
    for (int e = threadIdx.x; e < p.E; e += blockDim.x)
      for (int j = counts[e]; j < ((counts[e] + 3) & ~3); ++j) slot_src[row_begin[e] + j] = -1;
  for (int i = threadIdx.x; i < pairs; i += blockDim.x) {
    const int e = p.topk_ids[i] - p.expert_begin;
    if (e < 0 || e >= p.E) continue;
    const int pos = atomicAdd(&cursor[e], 1);  // order inside a bucket: any
    p.group[p.E + 1 + pos] = i;
    if (sched.out) slot_src[row_begin[e] + pos - offset[e]] = i;
  }
}

// grid (E, ceil(inter / (kWarps*kGateUpRowsPerWarp))): act[pair, i] for every pair routed to expert e.
template <bool kVec, bool kFp8>
__global__ void moe_gate_up_grouped_kernel(MoeExpertsParams p) {
  pdl_begin();
  const int e = blockIdx.x;
  const int begin = p.group[e], count = p.group[e + 1] - begin;
  if (count == 0) return;
  const int* pairs = p.group + p.E + 1 + begin;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int row0 = (blockIdx.y * kWarps + warp) * kGateUpRowsPerWarp;
  for (int r = 0; r < kGateUpRowsPerWarp; ++r) {
    const int i = row0 + r;
    if (i >= p.inter) break;
    const void *wg, *wu;
    const float *sg, *su;
    expert_row<kFp8>(p.w_gate, p.s_gate, e, p.inter, i, p.hidden, wg, sg);
    expert_row<kFp8>(p.w_up, p.s_up, e, p.inter, i, p.hidden, wu, su);
    for (int c0 = 0; c0 < count; c0 += kGroup) {
      const int nt = min(kGroup, count - c0);
      const float* xs[kGroup];
#pragma unroll
      for (int t = 0; t < kGroup; ++t) xs[t] = p.x + size_t(pairs[c0 + min(t, nt - 1)] / p.k) * p.hidden;
      float g[kGroup], u[kGroup];
      warp_dot_multi<kVec, kFp8>(xs, nt, wg, sg, p.hidden, g);
      warp_dot_multi<kVec, kFp8>(xs, nt, wu, su, p.hidden, u);
      if (lane == 0)
        for (int t = 0; t < nt; ++t) p.act[size_t(pairs[c0 + t]) * p.inter + i] = g[t] / (1.0f + expf(-g[t])) * u[t];
    }
  }
}

// grid (E, ceil(hidden / (kWarps*kDownRowsPerWarp))): pair_out[pair, d] for every pair routed to e.
template <bool kVec, bool kFp8>
__global__ void moe_down_grouped_kernel(MoeExpertsParams p) {
  pdl_begin();
  const int e = blockIdx.x;
  const int begin = p.group[e], count = p.group[e + 1] - begin;
  if (count == 0) return;
  const int* pairs = p.group + p.E + 1 + begin;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int row0 = (blockIdx.y * kWarps + warp) * kDownRowsPerWarp;
  for (int r = 0; r < kDownRowsPerWarp; ++r) {
    const int d = row0 + r;
    if (d >= p.hidden) break;
    const void* wd;
    const float* sd;
    expert_row<kFp8>(p.w_down, p.s_down, e, p.hidden, d, p.inter, wd, sd);
    for (int c0 = 0; c0 < count; c0 += kGroup) {
      const int nt = min(kGroup, count - c0);
      const float* xs[kGroup];
#pragma unroll
      for (int t = 0; t < kGroup; ++t) xs[t] = p.act + size_t(pairs[c0 + min(t, nt - 1)]) * p.inter;
      float o[kGroup];
      warp_dot_multi<kVec, kFp8>(xs, nt, wd, sd, p.inter, o);
      if (lane == 0)
        for (int t = 0; t < nt; ++t) p.pair_out[size_t(pairs[c0 + t]) * p.hidden + d] = o[t];
    }
  }
}

// ---- expert-grouped path on the tensor cores (MoeExpertsParams.fp8_mma) ----
// FP8 experts: the warp tile of linear_fp8_mma (kernels/linear_fp8_mma.cuh): W rows straight from global
// memory, tokens = the expert bucket's pairs, 8 per n-tile (x / act rounded to f16 with per-128-column
// power-of-two scales). Bytes in flight per lane per 128-column block: 4 m-tiles x 2 rows x 2 chunks
// x 16 B (the GEMV-style grouped kernels above keep one row's 16 B). BF16 experts (kFp8 false): the
// same kernels with bf16_mma_warp_tile (kernels/linear_bf16_mma.cuh: x / act split into bf16 hi + lo).
constexpr int kMoeMmaWarps = 4;
constexpr int kMoeMmaHalfTiles = 2;  // gate_up: m-tiles of gate rows (and as many of up rows) per warp
constexpr int kMoeMmaDownTiles = 4;  // down: m-tiles (16 hidden rows each) per warp

// grid (E, ceil(inter / (16 kMoeMmaHalfTiles kMoeMmaWarps))): a warp owns inter rows
// [i0, i0 + 16 kMoeMmaHalfTiles) of expert e; m-tiles 0..H-1 are those gate rows, H..2H-1 the same up
// rows, so a C fragment holds gate and up of the same (row, pair): act = silu(g) * u in registers.
template <bool kFp8, bool kPf>
__global__ void __launch_bounds__(32 * kMoeMmaWarps) moe_gate_up_grouped_mma_kernel(MoeExpertsParams p) {
  pdl_begin();
  constexpr int H = kMoeMmaHalfTiles;
  const int e = blockIdx.x;
  const int begin = p.group[e], count = p.group[e + 1] - begin;
  if (count == 0) return;
  const int* pairs = p.group + p.E + 1 + begin;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int i0 = (blockIdx.y * kMoeMmaWarps + warp) * 16 * H;
  if (i0 >= p.inter) return;
  constexpr size_t es = kFp8 ? 1 : 2;  // bytes per weight
  const size_t expert_off = size_t(e) * p.inter * p.hidden * es;
  const uint8_t* wg = static_cast<const uint8_t*>(p.w_gate) + expert_off;
  const uint8_t* wu = static_cast<const uint8_t*>(p.w_up) + expert_off;
  const int sc = (p.hidden + 127) / 128, sr = (p.inter + 127) / 128;
  const uint8_t* wrow[2 * H][2];
  const float* srow[2 * H];
#pragma unroll
  for (int i = 0; i < H; ++i) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const size_t r = size_t(min(i0 + 16 * i + g + 8 * h, p.inter - 1));  // rows past inter: never stored
      wrow[i][h] = wg + r * p.hidden * es;
      wrow[H + i][h] = wu + r * p.hidden * es;
    }
    const size_t sb = (size_t(e) * sr + min(i0 + 16 * i, p.inter - 1) / 128) * sc;
    srow[i] = kFp8 ? p.s_gate + sb : nullptr;
    srow[H + i] = kFp8 ? p.s_up + sb : nullptr;
  }
  for (int c0 = 0; c0 < count; c0 += 8) {
    const float* xrow[1] = {c0 + g < count ? p.x + size_t(pairs[c0 + g] / p.k) * p.hidden : nullptr};
    float acc[2 * H][1][4];
    if constexpr (kFp8) fp8_mma_warp_tile<2 * H, 1, kPf>(wrow, srow, xrow, 1, 0, p.hidden, acc);
    else bf16_mma_warp_tile<2 * H, 1, kPf>(wrow, xrow, 1, 0, p.hidden, acc);
#pragma unroll
    for (int i = 0; i < H; ++i)
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const int row = i0 + 16 * i + g + 8 * (q / 2), c = c0 + 2 * t + (q % 2);
        if (row < p.inter && c < count) {
          const float gv = acc[i][0][q], uv = acc[H + i][0][q];
          p.act[size_t(pairs[c]) * p.inter + row] = gv / (1.0f + expf(-gv)) * uv;
        }
      }
  }
}

// grid (E, ceil(hidden / (16 kMoeMmaDownTiles kMoeMmaWarps))): pair_out[pair, d] = down_e[d, :] . act[pair, :]
// for every pair routed to expert e.
template <bool kFp8, bool kPf>
__global__ void __launch_bounds__(32 * kMoeMmaWarps) moe_down_grouped_mma_kernel(MoeExpertsParams p) {
  pdl_begin();
  constexpr int MT = kMoeMmaDownTiles;
  const int e = blockIdx.x;
  const int begin = p.group[e], count = p.group[e + 1] - begin;
  if (count == 0) return;
  const int* pairs = p.group + p.E + 1 + begin;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int d0 = (blockIdx.y * kMoeMmaWarps + warp) * 16 * MT;
  if (d0 >= p.hidden) return;
  constexpr size_t es = kFp8 ? 1 : 2;  // bytes per weight
  const uint8_t* wd = static_cast<const uint8_t*>(p.w_down) + size_t(e) * p.hidden * p.inter * es;
  const int sc = (p.inter + 127) / 128, sr = (p.hidden + 127) / 128;
  const uint8_t* wrow[MT][2];
  const float* srow[MT];
#pragma unroll
  for (int i = 0; i < MT; ++i) {
#pragma unroll
    for (int h = 0; h < 2; ++h) wrow[i][h] = wd + size_t(min(d0 + 16 * i + g + 8 * h, p.hidden - 1)) * p.inter * es;
    srow[i] = kFp8 ? p.s_down + (size_t(e) * sr + min(d0 + 16 * i, p.hidden - 1) / 128) * sc : nullptr;
  }
  for (int c0 = 0; c0 < count; c0 += 8) {
    const float* xrow[1] = {c0 + g < count ? p.act + size_t(pairs[c0 + g]) * p.inter : nullptr};
    float acc[MT][1][4];
    if constexpr (kFp8) fp8_mma_warp_tile<MT, 1, kPf>(wrow, srow, xrow, 1, 0, p.inter, acc);
    else bf16_mma_warp_tile<MT, 1, kPf>(wrow, xrow, 1, 0, p.inter, acc);
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const int d = d0 + 16 * i + g + 8 * (q / 2), c = c0 + 2 * t + (q % 2);
        if (d < p.hidden && c < count) p.pair_out[size_t(pairs[c]) * p.hidden + d] = acc[i][0][q];
      }
  }
}

// out[b, d] (=|+=) sum_j topk_weights[b, j] * pair_out[b*k + j, d] over this rank's slots, in slot order.
// The loads of kCombineBatch slots are issued before their multiply-adds (which stay in slot order): a loop that
// loaded slot j + 1 only after slot j's add paid one L2 round trip per slot (GLM-5: 9 in a chain).
constexpr int kCombineBatch = 8;
// Element d of token b: combined, written to out, returned.
__device__ __forceinline__ float combine_element(const MoeExpertsParams& p, int b, int d) {
  const float shared = p.shared_down ? p.pair_out[(size_t(p.B) * p.k + b) * p.hidden + d] : 0.f;
  const float resid = p.accumulate ? p.out[size_t(b) * p.hidden + d] : 0.f;
  float sum = 0.f;
  for (int j0 = 0; j0 < p.k; j0 += kCombineBatch) {
    float v[kCombineBatch], w[kCombineBatch];
    bool ok[kCombineBatch];
#pragma unroll
    for (int q = 0; q < kCombineBatch; ++q) {
      const int j = j0 + q;
      const int e = j < p.k ? p.topk_ids[b * p.k + j] - p.expert_begin : -1;
      ok[q] = e >= 0 && e < p.E;  // another rank's expert (or past k): skipped
      v[q] = ok[q] ? p.pair_out[(size_t(b) * p.k + j) * p.hidden + d] : 0.f;
      w[q] = ok[q] ? p.topk_weights[b * p.k + j] : 0.f;
    }
#pragma unroll
    for (int q = 0; q < kCombineBatch; ++q)
      if (ok[q]) sum = fmaf(v[q], w[q], sum);
  }
  if (p.shared_down) sum += shared;  // + the shared expert
  const float r = p.accumulate ? resid + sum : sum;
  p.out[size_t(b) * p.hidden + d] = r;
  return r;
}

__global__ void moe_combine_kernel(MoeExpertsParams p) {
  pdl_begin();
  const int b = blockIdx.y;
  const int d = blockIdx.x * blockDim.x + threadIdx.x;
  if (d < p.hidden) combine_element(p, b, d);
}

// moe_combine_kernel with the next RMSNorm (MoeExpertsParams::next_norm_weight) in the same launch: grid
// (ceil(hidden / blockDim.x), B), blockDim.x = rmsnorm_vec_threads(hidden) (384 at GLM-5), one element per thread
// as moe_combine_kernel; the last CTA of a token's row (a counter per token, MoeExpertsParams::combine_counters,
// reset by that CTA) reads the row back through L2 (ld.global.cg: the other CTAs wrote it) in the norm kernel's
// layout and runs norm_dev::rmsnorm_vec_regs, the norm kernel's own arithmetic: out and the normalized row are the
// bits of moe_combine_kernel + rmsnorm_cuda. Why: at batch 1 the combine and the next layer's attn.norm (one CTA)
// are two dependent launches of a few microseconds each on the critical path (S13: 3.5 + 5.0 us per layer).
// (S17h measured a first form, the whole row in ONE CTA of 384 threads: moe.experts +610 us per step, more than
// the 374 us of attn.norm it saved: each thread then combined 16 elements in 4 dependent rounds.)
__global__ void __launch_bounds__(1024) moe_combine_norm_kernel(MoeExpertsParams p) {
  pdl_begin();
  const int b = blockIdx.y;
  const int d = blockIdx.x * blockDim.x + threadIdx.x;
  if (d < p.hidden) combine_element(p, b, d);
  __shared__ bool last;
  __syncthreads();  // the CTA's elements are written; thread 0's fence makes them visible at gpu scope first
  if (threadIdx.x == 0) {
    __threadfence();
    last = atomicAdd(p.combine_counters + b, 1) == int(gridDim.x) - 1;
    if (last) p.combine_counters[b] = 0;  // for the next launch (CUDA-graph replays)
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  const float4* row = reinterpret_cast<const float4*>(p.out + size_t(b) * p.hidden);
  const int n4 = p.hidden / 4, nthreads = blockDim.x;
  float4 v[norm_dev::kVecPerThread];
#pragma unroll
  for (int j = 0; j < norm_dev::kVecPerThread; ++j) {
    const int i = threadIdx.x + j * nthreads;
    v[j] = i < n4 ? __ldcg(row + i) : make_float4(0.f, 0.f, 0.f, 0.f);
  }
  norm_dev::rmsnorm_vec_regs(v, p.next_norm_weight, p.next_norm_out + size_t(b) * p.hidden, p.hidden, p.next_norm_eps,
                             nthreads);
}

// The slot sum into out (moe_combine_kernel), with the next RMSNorm when asked (moe_combine_norm_kernel).
void launch_combine(const MoeExpertsParams& p, cudaStream_t stream) {
  if (p.next_norm_weight) {  // (alignment checked by moe_experts_cuda before any launch)
    const int t = norm_dev::rmsnorm_vec_threads(p.hidden);
    launch_kernel(moe_combine_norm_kernel, dim3((p.hidden + t - 1) / t, p.B), t, 0, stream, p);
  } else {
    launch_kernel(moe_combine_kernel, dim3((p.hidden + 255) / 256, p.B), 256, 0, stream, p);
  }
  CUDA_CHECK_LAUNCH();
}

template <bool kVec, bool kFp8>
void launch_gate_up_grouped(const MoeExpertsParams& p, dim3 grid, cudaStream_t stream) {
  launch_kernel(moe_gate_up_grouped_kernel<kVec, kFp8>, grid, 32 * kWarps, 0, stream, p);
}
template <bool kVec, bool kFp8>
void launch_down_grouped(const MoeExpertsParams& p, dim3 grid, cudaStream_t stream) {
  launch_kernel(moe_down_grouped_kernel<kVec, kFp8>, grid, 32 * kWarps, 0, stream, p);
}

// The tensor-core grouped pair (gate_up then down) for one weight type and prefetch setting.
template <bool kFp8, bool kPf>
void launch_grouped_mma(const MoeExpertsParams& p, dim3 gu, dim3 gd, cudaStream_t stream) {
  launch_kernel(moe_gate_up_grouped_mma_kernel<kFp8, kPf>, gu, 32 * kMoeMmaWarps, 0, stream, p);
  CUDA_CHECK_LAUNCH();
  launch_kernel(moe_down_grouped_mma_kernel<kFp8, kPf>, gd, 32 * kMoeMmaWarps, 0, stream, p);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

void moe_route_cuda(const MoeRouteParams& p, cudaStream_t stream) {
  validate_moe_route_params(p, "moe_route_cuda");
  require(p.k <= 32, "moe_route_cuda: MoeRouteParams.k = " + std::to_string(p.k) + ", expected <= 32 (one lane per pick)");
  if (p.rank_form && p.E % 32 == 0 && p.n_group <= kRouteRankThreads) {
    const size_t smem = sizeof(float) * (2 * size_t(p.E) + p.n_group + p.k);
    if (smem <= 48 * 1024) {
      launch_kernel(moe_route_rank_kernel, p.B, kRouteRankThreads, smem, stream, p);
      CUDA_CHECK_LAUNCH();
      return;
    }
  }
  switch (route_warp_p(p)) {  // one warp per token (moe_route_warp_kernel)
    case 1: launch_kernel(moe_route_warp_kernel<1>, p.B, 32, 0, stream, p); CUDA_CHECK_LAUNCH(); return;
    case 2: launch_kernel(moe_route_warp_kernel<2>, p.B, 32, 0, stream, p); CUDA_CHECK_LAUNCH(); return;
    case 4: launch_kernel(moe_route_warp_kernel<4>, p.B, 32, 0, stream, p); CUDA_CHECK_LAUNCH(); return;
    case 8: launch_kernel(moe_route_warp_kernel<8>, p.B, 32, 0, stream, p); CUDA_CHECK_LAUNCH(); return;
    default: break;
  }
  const size_t smem = sizeof(float) * (2 * size_t(p.E) + p.n_group);
  require(smem <= 48 * 1024, "moe_route_cuda: MoeRouteParams.E = " + std::to_string(p.E) + " needs " +
                                 std::to_string(smem) + " bytes of shared memory, expected <= 49152");
  launch_kernel(moe_route_kernel, p.B, kRouteThreads, smem, stream, p);
  CUDA_CHECK_LAUNCH();
}

void moe_experts_cuda(const MoeExpertsParams& p, cudaStream_t stream) {
  validate_moe_experts_params(p, "moe_experts_cuda", false);
  const bool fp8 = p.w_dtype == DType::F8_E4M3;
  const int vec_n = fp8 ? 16 : 8;  // elements per 16-byte weight load
  const bool vec_up = p.hidden % vec_n == 0 && aligned16(p.x) && aligned16(p.w_gate) && aligned16(p.w_up);
  const bool vec_down = p.inter % vec_n == 0 && aligned16(p.act) && aligned16(p.w_down);
  const dim3 block(32 * kWarps);
  const int up_rows = kWarps * kGateUpRowsPerWarp, down_rows = kWarps * kDownRowsPerWarp;
  const bool shared = p.shared_gate_up != nullptr;
  require(!shared || (fp8 && vec_up && vec_down && p.pair_out && !(p.group && p.B >= p.group_min_tokens) &&
                      aligned16(p.shared_gate_up) && aligned16(p.shared_down)),
          "moe_experts_cuda: a fused shared expert (MoeExpertsParams.shared_gate_up) runs only on the per-token FP8 "
          "path: F8_E4M3 weights, hidden and inter multiples of 16, 16-byte aligned rows, pair_out set, B < " +
              std::to_string(p.group_min_tokens) + " or no group scratch");
  const int pairs = p.B * p.k + (shared ? p.B : 0);
  const bool has_combine = p.pair_out && ((p.group && p.B >= p.group_min_tokens) || (fp8 && vec_down));
  require(!p.next_norm_weight || has_combine,
          "moe_experts_cuda: MoeExpertsParams.next_norm_weight needs a combine launch (pair_out set, with FP8 weights "
          "in vector rows or expert grouping at B >= " + std::to_string(p.group_min_tokens) + ")");
  require(!p.next_norm_weight || p.combine_counters,
          "moe_experts_cuda: MoeExpertsParams.next_norm_weight needs combine_counters (B ints, zero)");
  require(!p.next_norm_weight || (p.hidden % 4 == 0 && p.hidden <= 16384),
          "moe_experts_cuda: hidden = " + std::to_string(p.hidden) +
              ": MoeExpertsParams.next_norm_weight needs hidden % 4 == 0 and <= 16384 (one CTA holds the row)");
  require(!p.next_norm_weight || (aligned16(p.out) && aligned16(p.pair_out) && aligned16(p.next_norm_weight) &&
                                  aligned16(p.next_norm_out)),
          "moe_experts_cuda: MoeExpertsParams.next_norm_weight needs 16-byte aligned out, pair_out, next_norm_weight "
          "and next_norm_out");
  using Stage = MoeExpertsParams::Stage;
  require(p.stage == Stage::All || shared,
          "moe_experts_cuda: MoeExpertsParams.stage other than All needs the fused shared expert (shared_gate_up)");
  if (p.stage == Stage::Combine) {
    launch_combine(p, stream);
    return;
  }
  if (p.group && p.pair_out && p.B >= p.group_min_tokens) {
    // FP8 / BF16 tensor cores fed by TMA (kernels/sm90a/moe_fp8_wgmma.h), where supported and given its scratch:
    // the bucketing also writes their slot-row schedule
    const bool wgmma = p.fp8_wgmma && p.wgmma_scratch && moe_fp8_wgmma_unsupported(p).empty();
    const MoeFp8WgmmaPlan plan = wgmma ? moe_fp8_wgmma_checked_plan(p) : MoeFp8WgmmaPlan{};
    const MoeSlotSchedule sched = wgmma ? moe_fp8_wgmma_slot_schedule(p, plan) : MoeSlotSchedule{};
    const size_t per_expert = sizeof(int) * (wgmma ? 4 : 2), smem = per_expert * size_t(p.E);
    require(smem <= 48 * 1024, "moe_experts_cuda: MoeExpertsParams.E = " + std::to_string(p.E) +
                                   " local experts exceed the grouping kernel's shared memory (max " +
                                   std::to_string(48 * 1024 / per_expert) + ")");
    launch_kernel(moe_group_kernel, 1, 256, smem, stream, p, sched);
    CUDA_CHECK_LAUNCH();
    if (wgmma) {
      moe_fp8_wgmma_experts_cuda(p, plan, current_device_sm_count(), stream);
      launch_combine(p, stream);
      return;
    }
    // tensor cores (vec: hidden, inter % 16 (FP8) / % 8 (BF16) == 0, 16-byte aligned rows and x)
    if (p.fp8_mma && vec_up && vec_down) {
      const int mrows = 16 * kMoeMmaHalfTiles * kMoeMmaWarps, drows = 16 * kMoeMmaDownTiles * kMoeMmaWarps;
      const dim3 gu(p.E, (p.inter + mrows - 1) / mrows), gd(p.E, (p.hidden + drows - 1) / drows);
      const bool pf = p.mma_prefetch < 0 ? !fp8 : p.mma_prefetch > 0;  // see MoeExpertsParams.mma_prefetch
      if (fp8) pf ? launch_grouped_mma<true, true>(p, gu, gd, stream) : launch_grouped_mma<true, false>(p, gu, gd, stream);
      else pf ? launch_grouped_mma<false, true>(p, gu, gd, stream) : launch_grouped_mma<false, false>(p, gu, gd, stream);
      launch_combine(p, stream);
      return;
    }
    const dim3 gu(p.E, (p.inter + up_rows - 1) / up_rows), gd(p.E, (p.hidden + down_rows - 1) / down_rows);
    if (fp8 && vec_up) launch_gate_up_grouped<true, true>(p, gu, stream);
    else if (fp8) launch_gate_up_grouped<false, true>(p, gu, stream);
    else if (vec_up) launch_gate_up_grouped<true, false>(p, gu, stream);
    else launch_gate_up_grouped<false, false>(p, gu, stream);
    CUDA_CHECK_LAUNCH();
    if (fp8 && vec_down) launch_down_grouped<true, true>(p, gd, stream);
    else if (fp8) launch_down_grouped<false, true>(p, gd, stream);
    else if (vec_down) launch_down_grouped<true, false>(p, gd, stream);
    else launch_down_grouped<false, false>(p, gd, stream);
    CUDA_CHECK_LAUNCH();
    launch_combine(p, stream);
    return;
  }
  // The pairs this stage runs: [pair0, pair0 + npairs) (MoeExpertsParams::Stage; shared implies the FP8 vector path).
  const int pair0 = p.stage == Stage::Shared ? p.B * p.k : 0;
  const int npairs = p.stage == Stage::Shared ? p.B : p.stage == Stage::Routed ? p.B * p.k : pairs;
  const dim3 grid_up(npairs, (p.inter + up_rows - 1) / up_rows);
  if (fp8 && vec_up && vec_down && p.pair_out && p.pair_sync && p.stage != Stage::Shared &&
      size_t(p.inter) * 4 <= 48 * 1024) {
    // One persistent launch (moe_pair_fused_fp8_kernel): as many CTAs as fit at once, at most one per tile.
    const int sms = current_device_sm_count();
    int per_sm = 0;
    const size_t smem = size_t(p.inter) * 4;  // the down tile's act row
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, moe_pair_fused_fp8_kernel, 32 * kWarps, smem));
    const int64_t tiles = int64_t(npairs) * ((p.inter + up_rows - 1) / up_rows +
                                             (p.hidden + kWarps * kPairDownRows - 1) / (kWarps * kPairDownRows));
    const int grid = int(std::min<int64_t>(tiles, int64_t(sms) * std::max(per_sm, 1)));
    launch_kernel(moe_pair_fused_fp8_kernel, grid, block, smem, stream, p, pair0, npairs);
    CUDA_CHECK_LAUNCH();
    if (p.stage == Stage::All) launch_combine(p, stream);
    return;
  }
  if (fp8 && vec_up) launch_kernel(moe_gate_up_fp8_kernel, grid_up, block, 0, stream, p, pair0);
  else if (fp8) launch_kernel(moe_gate_up_kernel<false, true>, grid_up, block, 0, stream, p);
  else if (vec_up) launch_kernel(moe_gate_up_kernel<true, false>, grid_up, block, 0, stream, p);
  else launch_kernel(moe_gate_up_kernel<false, false>, grid_up, block, 0, stream, p);
  CUDA_CHECK_LAUNCH();
  if (fp8 && vec_down && p.pair_out) {  // see moe_down_pair_fp8_kernel
    const int rows = kWarps * kPairDownRows;
    const dim3 grid_down(npairs, (p.hidden + rows - 1) / rows);
    if (p.down_early_loads) launch_kernel(moe_down_pair_fp8_kernel<true>, grid_down, block, 0, stream, p, pair0);
    else launch_kernel(moe_down_pair_fp8_kernel<false>, grid_down, block, 0, stream, p, pair0);
    CUDA_CHECK_LAUNCH();
    if (p.stage == Stage::All) launch_combine(p, stream);
    return;
  }
  const dim3 grid_down(p.B, (p.hidden + down_rows - 1) / down_rows);
  if (fp8 && vec_down) {
    require(p.k <= 32, "moe_experts_cuda: MoeExpertsParams.k = " + std::to_string(p.k) + ", expected <= 32");
    launch_kernel(moe_down_fp8_kernel, grid_down, block, 0, stream, p);
  }
  else if (fp8) launch_kernel(moe_down_kernel<false, true>, grid_down, block, 0, stream, p);
  else if (vec_down) launch_kernel(moe_down_kernel<true, false>, grid_down, block, 0, stream, p);
  else launch_kernel(moe_down_kernel<false, false>, grid_down, block, 0, stream, p);
  CUDA_CHECK_LAUNCH();
}

}  // namespace glm5
