// Kernel of linear_fp8_wgmma.h (sm_90a): the block-scaled FP8 GEMM on the FP8 tensor cores. Design and arithmetic
// in the header; written here from the PTX ISA (wgmma e4m3, cp.async.bulk.tensor, mbarrier) and DeepSeek-V3's public
// description of its FP8 GEMM (per-128-column promotion), no code taken.
//
// A CTA streams a range of units (Sched below): unit = one tile (W rows [128 rb, 128 rb + 128) x tokens
// [N tt, N tt + N)) by one 128-column block of k; at the end of a tile's range it writes y or its segment's partial.
// 384 threads = 3 warpgroups:
//   WG0, thread 0 (producer): per unit, one stage of the shared-memory ring: W's [128 rows x 128 B] box and
//     x's [N tokens x 128 B] box by TMA (128-byte swizzle: wgmma's K-major layout, kernels/wgmma.cuh; rows past n or m
//     arrive as zeros) and x's N scales of that block by one bulk copy, all completing the stage's `full` barrier.
//     W's first stages are issued before the PDL wait (no kernel of the step writes weights); x after it.
//   WG1, WG2 (consumers): rows 64 (wg - 1) .. + 64 of the block. Per stage: 4 wgmma m64nNk32 (e4m3 x e4m3 -> fp32)
//     into `tmp`, then acc += tmp * s_x[token] * s_w[block] (masked to 0 past m: the scales there are not x's), then
//     one arrival per warp on the stage's `empty` barrier.
// Stages: as many as fit in ~220 KB, at most 8 (N 128: 6 of 33 KB; N <= 32: 8; the W bytes of 6-8 blocks in flight per SM).
#include "kernels/sm90a/linear_fp8_wgmma.h"

#include <cuda.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "common/error.h"
#include "kernels/launch.cuh"
#include "kernels/mbarrier.cuh"
#include "kernels/tma.h"
#include "kernels/wgmma.cuh"
#include "kernels/sm90a/wgmma_e4m3.cuh"

namespace glm5 {
namespace lfw {

constexpr int kThreads = 384;
constexpr int kRows = 128;                 // W rows per CTA (one scale block)
constexpr int kCols = kFp8WeightBlock;     // columns per stage (one scale block, one 128-byte swizzle row)
constexpr int kABytes = kRows * kCols;     // 16 KB of W codes per stage
constexpr int kConsumerWarps = 8;
constexpr int kSmemBudget = 220 * 1024;

template <int N>
struct Cfg {
  static constexpr int kBBytes = N * kCols;
  static constexpr int kStageBytes = (kABytes + kBBytes + N * 4 + 1023) / 1024 * 1024;
  static constexpr int kStages = std::min(8, kSmemBudget / kStageBytes);
  static constexpr size_t kSmem = size_t(kStages) * kStageBytes + 1024;  // + alignment slack of the base
};

struct Args {
  float* y;
  int m, n, k;
  bool accumulate;
  const float* w_scale;
  int ld_scale;
  const float* x_scale;  // [k / 128][ld_xs], tokens fastest
  int ld_xs;
  float* part;           // [segments][m][n] when a tile has more than one segment
  int* counters;         // [tiles] when a tile has more than one segment
  int KB, kb_per_split, S;  // column blocks; split-K's (stream_k false) blocks per split and splits per tile
  int tiles, token_tiles;   // tiles = row blocks * token tiles
  bool stream_k;
};

// The work of CTA c: units u (one 128-row block of W by one token tile by one 128-column block, tile-major:
// tile T = u / KB = rb * token_tiles + tt, column block u % KB), a contiguous range [unit_begin(c), unit_end(c)).
// Stream-K (a.stream_k): the U = tiles * KB units cut evenly over the grid's G CTAs, c U / G (integer division), so
// every SM streams the same number of W blocks whatever the tile count (o_proj's 48 row blocks over 132 SMs: 46-47
// units each, against 2 splits of 64 on 96 SMs with split-K). Split-K: tile c / S, its split c % S of kb_per_split.
// A tile's k range is covered by the CTAs owner(T KB) .. owner(T KB + KB - 1): its segments, in that order.
struct Sched {
  int U, G, KB, S, kb_per_split;
  bool stream_k;
  __host__ __device__ __forceinline__ int unit_begin(int c) const {
    return stream_k ? int(int64_t(c) * U / G) : (c / S) * KB + (c % S) * kb_per_split;
  }
  __host__ __device__ __forceinline__ int unit_end(int c) const {
    const int e = (c / S + 1) * KB, b = unit_begin(c) + kb_per_split;
    return stream_k ? int(int64_t(c + 1) * U / G) : (b < e ? b : e);
  }
  __host__ __device__ __forceinline__ int owner(int u) const {  // the CTA whose range holds unit u
    return stream_k ? int((int64_t(u + 1) * G - 1) / U) : (u / KB) * S + (u % KB) / kb_per_split;
  }
};

template <int N>
__global__ void __launch_bounds__(kThreads, 1)
    linear_fp8_wgmma_kernel(const __grid_constant__ CUtensorMap wmap, const __grid_constant__ CUtensorMap xmap, Args a) {
  using C = Cfg<N>;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* base = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  __shared__ __align__(8) uint64_t full[C::kStages], empty[C::kStages];
  __shared__ int last_cta;
  const int tid = threadIdx.x, wg = tid / 128;
  const Sched sc{a.tiles * a.KB, int(gridDim.x), a.KB, a.S, a.kb_per_split, a.stream_k};
  const int cta = blockIdx.x, u0 = sc.unit_begin(cta), nu = sc.unit_end(cta) - u0;
  // The unit being loaded / multiplied: its column block kb, tile T, row block rb and first token t0 (tiles: token
  // tiles fastest, so the token tiles of a row block run side by side and read its W blocks from L2 after the
  // first), and its ring stage s with the stage's phase. Stepped, not divided out per unit: S24d's ncu found the
  // consumers issue-bound (0.43 instructions per cycle and scheduler, DRAM 23% busy at N 128), the per-unit integer
  // divisions among the instructions.
  struct Cursor {
    int kb, T, rb, t0, s, phase;
    __device__ __forceinline__ void retile(const Args& a) { rb = T / a.token_tiles, t0 = (T % a.token_tiles) * N; }
    __device__ __forceinline__ bool step(const Args& a) {  // to the next unit; true when it starts a new tile
      if (++s == C::kStages) s = 0, phase ^= 1;
      if (++kb < a.KB) return false;
      kb = 0, ++T;
      retile(a);
      return true;
    }
  };
  Cursor first{u0 % a.KB, u0 / a.KB, 0, 0, 0, 0};
  first.retile(a);
  if (tid == 0) {
    for (int s = 0; s < C::kStages; ++s) {
      mbar_init(&full[s], 1);                 // the producer's expect_tx arrival (+ the stage's bytes)
      mbar_init(&empty[s], kConsumerWarps);   // one arrival per consumer warp
    }
    mbar_init_fence();
  }
  __syncthreads();
  if (wg == 0) {  // producer: one thread works
    if (tid == 0) {
      constexpr unsigned kTx = unsigned(kABytes + C::kBBytes + N * 4);
      auto load_w = [&](const Cursor& c) {
        tma_load_2d(base + c.s * C::kStageBytes, &wmap, c.kb * kCols, c.rb * kRows, &full[c.s]);
      };
      auto load_x = [&](const Cursor& c) {
        uint8_t* st = base + c.s * C::kStageBytes;
        tma_load_2d(st + kABytes, &xmap, c.kb * kCols, c.t0, &full[c.s]);
        bulk_copy_g2s(st + kABytes + C::kBBytes, a.x_scale + size_t(c.kb) * a.ld_xs + c.t0, N * 4, &full[c.s]);
      };
      const int pre = min(nu, C::kStages);
      Cursor c = first;
      for (int i = 0; i < pre; ++i, c.step(a)) {  // W's first blocks: in flight before the wait for x's quantization
        mbar_expect_tx(&full[c.s], kTx);
        load_w(c);
      }
      pdl_wait();
      Cursor cx = first;
      for (int i = 0; i < pre; ++i, cx.step(a)) load_x(cx);
      for (int i = pre; i < nu; ++i, c.step(a)) {
        mbar_wait(&empty[c.s], c.phase ^ 1);  // the consumers are done with unit i - kStages (phase of round - 1)
        mbar_expect_tx(&full[c.s], kTx);
        load_w(c);
        load_x(c);
      }
    }
    return;
  }
  // Consumers: warpgroup h = wg - 1 owns rows 64 h .. + 63 of each unit's 128-row block.
  pdl_wait();  // y, the partials and the counters are written by earlier kernels
  const int h = wg - 1, ct = tid - 128 * wg, lane = tid % 32;
  float acc[N / 2], tmp[N / 2];
#pragma unroll
  for (int i = 0; i < N / 2; ++i) acc[i] = 0.f;
  // Unit i: its 4 wgmma into t (one commit group), then, once they are done, acc += t * s_x * s_w and the stage freed.
  auto issue = [&](const Cursor& c, float (&t)[N / 2]) {
    mbar_wait(&full[c.s], c.phase);
    uint8_t* st = base + c.s * C::kStageBytes;
    const uint64_t da = wgmma::desc_sw128(st + h * 64 * kCols), db = wgmma::desc_sw128(st + kABytes);
    wgmma::fence();
#pragma unroll
    for (int j = 0; j < kCols / 32; ++j) wgmma::m64k32_e4m3_ss<N>(t, da + 2 * j, db + 2 * j, j > 0);  // +32 B per k-step
    wgmma::commit();
  };
  // cols_left: column c of this thread's registers is a token iff c' < cols_left (c' = c less 2 (lane % 4)).
  auto promote = [&](const Cursor& c, float (&t)[N / 2], float sw, int cols_left) {
    wgmma::fence_operand(t);
    const float* sx = reinterpret_cast<const float*>(base + c.s * C::kStageBytes + kABytes + C::kBBytes);
#pragma unroll
    for (int j2 = 0; j2 < N / 8; ++j2) {  // columns 8 j2 + 2 (lane % 4) + {0, 1}: registers 4 j2 + {0, 1} + {0, 2}
      const float2 v = *reinterpret_cast<const float2*>(sx + 8 * j2 + 2 * (lane % 4));
      const float f0 = 8 * j2 < cols_left ? v.x * sw : 0.f, f1 = 8 * j2 + 1 < cols_left ? v.y * sw : 0.f;
      const int r0 = 4 * j2;
      acc[r0] = fmaf(t[r0], f0, acc[r0]);
      acc[r0 + 2] = fmaf(t[r0 + 2], f0, acc[r0 + 2]);
      acc[r0 + 1] = fmaf(t[r0 + 1], f1, acc[r0 + 1]);
      acc[r0 + 3] = fmaf(t[r0 + 3], f1, acc[r0 + 3]);
    }
    __syncwarp();
    if (lane == 0) mbar_arrive(&empty[c.s]);
  };
  const int64_t slice = int64_t(a.m) * a.n;
  const int ct2 = tid - 128;  // 0..255 over both consumer warpgroups
  // The tile of unit i is done here (its last column block, or this CTA's last unit): y (=|+=) acc when this CTA is
  // the tile's only segment; else acc is the partial of segment j, and the last segment to arrive adds them in
  // segment order (the same order whichever arrives last: deterministic).
  auto flush = [&](const Cursor& cur) {
    const int T = cur.T, n0 = cur.rb * kRows, t0 = cur.t0;
    const int first = sc.owner(T * a.KB), nseg = sc.owner(T * a.KB + a.KB - 1) - first + 1;
    // Register i: token t_base + 8 (i / 4) + i % 2, row r_base + 8 ((i % 4) / 2) (wgmma::acc_row / acc_col).
    const int t_base = t0 + 2 * (ct % 4), r_base = n0 + 64 * h + 16 * (ct / 32) + (ct % 32) / 4;
    auto offset = [&](int r) {  // y / partial-slice offset of register r (m n < 2^31: checked), or -1 outside [m, n)
      const int row = r_base + 8 * ((r % 4) / 2), t = t_base + 8 * (r / 4) + (r % 2);
      return row < a.n && t < a.m ? t * a.n + row : -1;
    };
    if (nseg == 1) {  // y = acc, or y += acc. Every load of a pass is issued before its adds and stores (S23d:
      // element by element, each y load waited for the store before it, which may alias: o_proj at batch 128 took 144 us).
      constexpr int kHalf = N >= 128 ? N / 8 : N / 4;  // registers per pass
#pragma unroll
      for (int h0 = 0; h0 < N / 2; h0 += kHalf) {
        float prev[kHalf];
#pragma unroll
        for (int r = 0; r < kHalf; ++r) {
          const int o = offset(h0 + r);
          prev[r] = a.accumulate && o >= 0 ? a.y[o] : 0.f;
        }
#pragma unroll
        for (int r = 0; r < kHalf; ++r) {
          const int o = offset(h0 + r);
          if (o >= 0) a.y[o] = a.accumulate ? prev[r] + acc[h0 + r] : acc[h0 + r];
        }
      }
      return;
    }
    const int j = cta - first;
#pragma unroll
    for (int r = 0; r < N / 2; ++r) {
      const int o = offset(r);
      if (o >= 0) __stcg(a.part + j * slice + o, acc[r]);
    }
    __threadfence();
    wgmma::bar_sync(1, 256);
    int* counter = a.counters + T;
    if (tid == 128) last_cta = atomicAdd(counter, 1) == nseg - 1;
    wgmma::bar_sync(1, 256);
    if (!last_cta) return;
    __threadfence();
    // The sum in a flat, coalesced order: 4 consecutive rows per thread and load (n % 4 == 0), a segment's loads
    // all in flight before its adds, so a pass (up to 8 float4 per thread: N 128 takes two) costs ~nseg + 2 L2 round
    // trips.
    if (a.n % 4 == 0) {
      constexpr int kQ = N * (kRows / 4) / 256, kQP = kQ < 8 ? kQ : 8;  // float4 chunks per thread (N / 8), per pass
      for (int q0 = 0; q0 < kQ; q0 += kQP) {
        float4 sum[kQP];
        auto chunk_offset = [&](int q) {  // offset of chunk ct2 + 256 (q0 + q) (token-major, 32 per token), or -1
          const int c = ct2 + 256 * (q0 + q), t = t0 + c / (kRows / 4), r = n0 + 4 * (c % (kRows / 4));
          return t < a.m && r < a.n ? t * a.n + r : -1;
        };
#pragma unroll
        for (int q = 0; q < kQP; ++q) sum[q] = make_float4(0.f, 0.f, 0.f, 0.f);
        for (int zz = 0; zz < nseg; ++zz) {
          const float* pz = a.part + zz * slice;
          float4 v[kQP];
#pragma unroll
          for (int q = 0; q < kQP; ++q) {
            const int o = chunk_offset(q);
            v[q] = o >= 0 ? __ldcg(reinterpret_cast<const float4*>(pz + o)) : make_float4(0.f, 0.f, 0.f, 0.f);
          }
#pragma unroll
          for (int q = 0; q < kQP; ++q)
            sum[q] = make_float4(sum[q].x + v[q].x, sum[q].y + v[q].y, sum[q].z + v[q].z, sum[q].w + v[q].w);
        }
        if (a.accumulate) {
          float4 prev[kQP];
#pragma unroll
          for (int q = 0; q < kQP; ++q) {
            const int o = chunk_offset(q);
            prev[q] = o >= 0 ? *reinterpret_cast<const float4*>(a.y + o) : make_float4(0.f, 0.f, 0.f, 0.f);
          }
#pragma unroll
          for (int q = 0; q < kQP; ++q)
            sum[q] = make_float4(prev[q].x + sum[q].x, prev[q].y + sum[q].y, prev[q].z + sum[q].z, prev[q].w + sum[q].w);
        }
#pragma unroll
        for (int q = 0; q < kQP; ++q) {
          const int o = chunk_offset(q);
          if (o >= 0) *reinterpret_cast<float4*>(a.y + o) = sum[q];
        }
      }
    } else {  // any n: one element per thread and load, up to 16 per pass
      constexpr int kE = N * kRows / 256, kP = kE < 16 ? kE : 16;
      for (int e0 = 0; e0 < kE; e0 += kP) {
        auto elem_offset = [&](int q) {
          const int e = ct2 + 256 * (e0 + q), t = t0 + e / kRows, r = n0 + e % kRows;
          return t < a.m && r < a.n ? t * a.n + r : -1;
        };
        float sum[kP];
#pragma unroll
        for (int q = 0; q < kP; ++q) sum[q] = 0.f;
        for (int zz = 0; zz < nseg; ++zz) {
          float v[kP];
#pragma unroll
          for (int q = 0; q < kP; ++q) {
            const int o = elem_offset(q);
            v[q] = o >= 0 ? __ldcg(a.part + zz * slice + o) : 0.f;
          }
#pragma unroll
          for (int q = 0; q < kP; ++q) sum[q] += v[q];
        }
        float prev[kP];
#pragma unroll
        for (int q = 0; q < kP; ++q) {
          const int o = elem_offset(q);
          prev[q] = a.accumulate && o >= 0 ? a.y[o] : 0.f;
        }
#pragma unroll
        for (int q = 0; q < kP; ++q) {
          const int o = elem_offset(q);
          if (o >= 0) a.y[o] = a.accumulate ? prev[q] + sum[q] : sum[q];
        }
      }
    }
    if (tid == 128) *counter = 0;  // for the next launch (graph replays)
  };
  // One temporary: the 4 products of a unit, then its promotion. (S23f tried two temporaries at N <= 64, unit
  // i + 1's products issued before unit i's promotion: slower in the bench, o_proj at m = 64 59.9 against 47.7 us,
  // gate+up 24.8 against 21.8: the wait for unit i + 1's stage came before unit i's stage was freed.)
  Cursor c = first;
  const float* wsr = a.w_scale + size_t(c.rb) * a.ld_scale;
  int cols_left = a.m - c.t0 - 2 * (lane % 4);
  for (int i = 0; i < nu; ++i) {
    issue(c, tmp);
    const float sw = __ldg(wsr + c.kb);
    wgmma::wait<0>();
    promote(c, tmp, sw, cols_left);
    if (c.kb == a.KB - 1 || i == nu - 1) {
      if (i == nu - 1) pdl_launch_dependents();
      flush(c);
#pragma unroll
      for (int r = 0; r < N / 2; ++r) acc[r] = 0.f;
    }
    if (c.step(a)) {
      wsr = a.w_scale + size_t(c.rb) * a.ld_scale;
      cols_left = a.m - c.t0 - 2 * (lane % 4);
    }
  }
}

template <int N>
void launch(const CUtensorMap& wmap, const CUtensorMap& xmap, const Args& a, dim3 grid, cudaStream_t stream) {
  auto kernel = linear_fp8_wgmma_kernel<N>;
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(Cfg<N>::kSmem)));
  launch_kernel(kernel, grid, kThreads, Cfg<N>::kSmem, stream, wmap, xmap, a);
}

}  // namespace lfw

std::string linear_fp8_wgmma_unsupported(const LinearParams& p) {
  if (p.w_dtype != DType::F8_E4M3 || !p.w_scale) return "FP8 (e4m3) weights with block scales";
  if (p.k % kFp8WeightBlock != 0) return "k a multiple of 128 (got " + std::to_string(p.k) + ")";
  if (int64_t(p.w_stride()) % 16 != 0 || (reinterpret_cast<uintptr_t>(p.w) & 15u) != 0)
    return "a 16-byte aligned weight with a row stride that is a multiple of 16 bytes (got " +
           std::to_string(p.w_stride()) + ")";
  if (p.m > 4096) return "m <= 4096 (got " + std::to_string(p.m) + ")";
  if (int64_t(p.m) * p.n >= (int64_t(1) << 31)) return "m n < 2^31 (the kernel's 32-bit offsets)";
  if ((reinterpret_cast<uintptr_t>(p.x) & 15u) != 0 || (reinterpret_cast<uintptr_t>(p.y) & 15u) != 0)
    return "16-byte aligned x and y (the quantization's and the split-K sum's vector accesses)";
  return sm90a_device_missing();
}

Fp8WgmmaPlan linear_fp8_wgmma_plan(const LinearParams& p, int sms, int max_n, bool stream_k) {
  Fp8WgmmaPlan q;
  q.N = p.m <= 8 ? 8 : p.m <= 16 ? 16 : p.m <= 32 ? 32 : p.m <= 64 || max_n <= 64 ? 64 : 128;
  q.token_tiles = (p.m + q.N - 1) / q.N;
  q.row_blocks = (p.n + lfw::kRows - 1) / lfw::kRows;
  const int KB = p.k / kFp8WeightBlock, tiles = q.row_blocks * q.token_tiles;
  // Split-K: as many splits as keep the grid within one CTA per SM, each of at least 4 column blocks (a ring's
  // worth of streaming before a partial costs its write and read).
  q.S = std::max(1, std::min(sms / std::max(1, tiles), KB / 4));
  q.kb_per_split = (KB + q.S - 1) / q.S;
  q.S = (KB + q.kb_per_split - 1) / q.kb_per_split;
  // Stream-K, for one token tile (past it, the token tiles of a row block would read its W blocks at different
  // times, not from L2) of 64 or 128 tokens: the units cut evenly over one CTA per SM, at least 4 each. Taken where
  // it costs less than split-K by the cost of a CTA = its units + kFlushUnits per tile it ends (S24b, bench and
  // step: a tile's end, its partial and the last CTA's sum, cost ~3 units; stream-K took o_proj at m 128 from 92.5
  // to 81.6 us, 64 -> 47 units per CTA, but slowed gate+up, 12 -> 12 units with one more tile end, from 32.7 to
  // 38.0 us). Tiles of 8 to 32 tokens stay split-K: with the cursor (S24e) their units cost little enough that 96
  // SMs stream o_proj as fast as 132 (m 32 44.1 us split-K against 45.5, m 8 41.3 against 43.0), while 64 and 128
  // still gain (m 64 49.0 against 50.8, m 128 65.3 against 69.3).
  constexpr int kFlushUnits = 3;
  auto cost = [&](const lfw::Sched& s) {
    int worst = 0;
    for (int c = 0; c < s.G; ++c) {
      const int b = s.unit_begin(c), e = s.unit_end(c);
      worst = std::max(worst, e - b + kFlushUnits * ((e - 1) / KB - b / KB + 1));
    }
    return worst;
  };
  const lfw::Sched split{tiles * KB, tiles * q.S, KB, q.S, q.kb_per_split, false};
  const lfw::Sched sk{tiles * KB, std::max(1, std::min(sms, tiles * KB / 4)), KB, q.S, q.kb_per_split, true};
  q.stream_k = stream_k && q.token_tiles == 1 && q.N >= 64 && cost(sk) < cost(split);
  const lfw::Sched& sc = q.stream_k ? sk : split;
  q.grid = sc.G;
  for (int c = 0; c < q.grid; ++c) q.max_units = std::max(q.max_units, sc.unit_end(c) - sc.unit_begin(c));
  for (int t = 0; t < tiles; ++t) {
    const int nseg = sc.owner(t * KB + KB - 1) - sc.owner(t * KB) + 1, rb = t / q.token_tiles, tt = t % q.token_tiles;
    q.segments = std::max(q.segments, nseg);
    if (nseg > 1)
      q.partial_moved += size_t(nseg) * std::min(q.N, p.m - tt * q.N) * std::min(lfw::kRows, p.n - rb * lfw::kRows);
  }
  q.partial_elems = q.segments > 1 ? size_t(q.segments) * p.m * p.n : 0;
  q.counters = q.segments > 1 ? size_t(tiles) : 0;
  q.x_code_bytes = size_t(p.m) * p.k;
  q.x_scale_ld = (p.m + 3) / 4 * 4;
  q.x_scale_floats = size_t(KB) * q.x_scale_ld + q.N;
  return q;
}

namespace {
lfw::Sched sched_of(const Fp8WgmmaPlan& q, int k) {  // the kernel's Sched for plan q (its Args carry the same fields)
  const int KB = k / kFp8WeightBlock;
  return {q.row_blocks * q.token_tiles * KB, q.grid, KB, q.S, q.kb_per_split, q.stream_k};
}
}  // namespace

Fp8WgmmaUnits linear_fp8_wgmma_units(const Fp8WgmmaPlan& q, int k, int cta) {
  const lfw::Sched sc = sched_of(q, k);
  return {sc.unit_begin(cta), sc.unit_end(cta)};
}

int linear_fp8_wgmma_owner(const Fp8WgmmaPlan& q, int k, int u) { return sched_of(q, k).owner(u); }

void linear_fp8_wgmma_cuda(const LinearParams& p, const Fp8WgmmaPlan& q, uint8_t* x_codes, float* x_scales,
                           float* partial, int* counters, cudaStream_t stream) {
  require(p.x && p.w && p.y && p.m > 0 && p.n > 0, "linear_fp8_wgmma_cuda: null x / w / y or an empty shape");
  const std::string why = linear_fp8_wgmma_unsupported(p);
  require(why.empty(), "linear_fp8_wgmma_cuda: needs " + why);
  require(q.N > 0 && q.row_blocks == (p.n + lfw::kRows - 1) / lfw::kRows && q.token_tiles == (p.m + q.N - 1) / q.N,
          "linear_fp8_wgmma_cuda: the plan is not linear_fp8_wgmma_plan's for these params");
  const int KB = p.k / kFp8WeightBlock, tiles = q.row_blocks * q.token_tiles;
  require(q.grid >= 1 && (q.stream_k ? q.grid <= tiles * KB && q.token_tiles == 1 : q.grid == tiles * q.S),
          "linear_fp8_wgmma_cuda: the plan's grid is not linear_fp8_wgmma_plan's for these params");
  require(x_codes && x_scales && (q.segments == 1 || (partial && counters)),
          "linear_fp8_wgmma_cuda: null x_codes / x_scales, or null partials / counters for a split-K plan");
  require((reinterpret_cast<uintptr_t>(x_codes) & 15u) == 0 && (reinterpret_cast<uintptr_t>(x_scales) & 15u) == 0,
          "linear_fp8_wgmma_cuda: x_codes and x_scales must be 16-byte aligned");
  static_assert(lfw::kCols == 128, "tma_map_bytes_sw128 boxes are 128 bytes wide");
  const CUtensorMap wmap = tma_map_bytes_sw128(p.w, p.k, p.n, p.w_stride(), lfw::kRows, "linear_fp8_wgmma_cuda", "the weight");
  const CUtensorMap xmap =
      tma_map_bytes_sw128(x_codes, p.k, p.m, p.k, q.N, "linear_fp8_wgmma_cuda", "the quantized activations");
  lfw::Args a{p.y, p.m, p.n, p.k, p.accumulate, p.w_scale, p.scale_stride(), x_scales, q.x_scale_ld, partial, counters,
              KB, q.kb_per_split, q.S, tiles, q.token_tiles, q.stream_k};
  const dim3 grid(unsigned(q.grid));
  if (q.N == 8) lfw::launch<8>(wmap, xmap, a, grid, stream);
  else if (q.N == 16) lfw::launch<16>(wmap, xmap, a, grid, stream);
  else if (q.N == 32) lfw::launch<32>(wmap, xmap, a, grid, stream);
  else if (q.N == 64) lfw::launch<64>(wmap, xmap, a, grid, stream);
  else lfw::launch<128>(wmap, xmap, a, grid, stream);
  CUDA_CHECK_LAUNCH();
}

}  // namespace glm5
