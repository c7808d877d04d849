// CUDA kernels of indexer.h.
// indexer_score, GLM-5 shape with FP8 keys (Hi 32, D 32 / 64 / 128): FP16 tensor cores from registers,
// see indexer_score_f16_kernel; BF16 keys (Hi 32, D 32..128): TF32 tensor cores, indexer_score_mma_kernel.
// indexer_score, other shapes: one block per (logical page of 64 positions, request). The page's keys are
// dequantized into shared memory as fp32 (a [64][D+1] tile, conflict-free column reads), the
// request's queries and head weights too; thread (token, head quarter) sums w_h * ReLU(scale * q_h.k)
// over a quarter of the heads, the four partial sums are added in a fixed order.
// Bytes: B * seq_len * (D + 4) key bytes + 4 per score; FLOPs: 2 * B * seq_len * Hi * D.
// topk: one cluster of C blocks of 1024 threads per request (C up to 8 when B is small: B = 1 at
// 128K context was one SM reading 3 x 512 KB, 153 us, as long as the scores); radix select of the
// k-th largest order key (3 passes of 11/11/10-bit digits, each block's shared-memory histogram
// summed over the cluster through distributed shared memory; after the first pass, each block's
// undecided keys are kept in shared memory when they fit), then an ordered compaction (one block
// prefix sum per 8192 positions, ranks offset by the lower ranks' counts) that keeps keys above the
// threshold and the lowest-position keys equal to it.
#include <algorithm>
#include <cmath>

#include <cooperative_groups.h>
#include <cuda_fp16.h>
#include <mma.h>

#include "common/error.h"
#include "kernels/indexer.h"
#include "kernels/kv_cast.cuh"
#include "kernels/launch.cuh"
#include "kernels/mma_sync.cuh"

// Phase marks of topk_kernel for tools/probe/topk_probe.cu (clock64 of block 0, thread 0); empty here.
#ifndef GLM5_TOPK_MARK
#define GLM5_TOPK_MARK(i)
#endif

namespace glm5 {
namespace {

namespace cg = cooperative_groups;

// IndexerScoreParams::top_hist: the copy of request b's histogram this warp adds to (global warp index mod
// kTopkHistCopies: the hot bins' atomics spread over the copies), or null.
__device__ __forceinline__ unsigned* top_hist_copy(const IndexerScoreParams& p, int b) {
  if (!p.top_hist) return nullptr;
  const unsigned warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  return p.top_hist + (int64_t(b) * kTopkHistCopies + warp % kTopkHistCopies) * kTopkHistBins;
}
// Each lane with `counted` adds its score to bin topk_hist_bin(s) of `hist`, one atomic per distinct bin among the
// warp's lanes. Called by whole warps (every call site's branch is uniform per warp).
__device__ __forceinline__ void top_hist_note(unsigned* hist, float s, bool counted) {
  const unsigned bin = counted ? topk_hist_bin(s) : 0xffffffffu;
  const unsigned peers = __match_any_sync(0xffffffffu, bin);
  if (counted && threadIdx.x % 32 == unsigned(__ffs(peers) - 1)) atomicAdd(hist + bin, unsigned(__popc(peers)));
}

constexpr int kScoreThreads = 256;
constexpr int kHeadQuarters = kScoreThreads / kPageSize;  // 4

size_t score_smem_bytes(int Hi, int D) {
  return sizeof(float) * (size_t(Hi) * D + size_t(kPageSize) * (D + 1) + Hi + kHeadQuarters * kPageSize);
}

__global__ void __launch_bounds__(kScoreThreads) indexer_score_kernel(IndexerScoreParams p) {
  pdl_begin();
  extern __shared__ float4 smem4[];
  const int D = p.layout.dim, Hi = p.Hi, b = blockIdx.y, page = blockIdx.x, tid = threadIdx.x;
  float* q_s = reinterpret_cast<float*>(smem4);  // [Hi][D]
  float* k_s = q_s + Hi * D;                     // [64][D + 1]
  float* w_s = k_s + kPageSize * (D + 1);        // [Hi]
  float* part_s = w_s + Hi;                      // [4][64]
  const int64_t positions = int64_t(p.max_pages) * kPageSize;
  float* out = p.scores + b * positions + int64_t(page) * kPageSize;
  const int seq_len = p.seq_lens[b];
  const int first = page * kPageSize;
  const int32_t page_id = p.block_table[int64_t(b) * p.max_pages + page];
  unsigned* hist = top_hist_copy(p, b);
  if (first >= seq_len || page_id < 0) {
    if (tid < kPageSize) {  // warps 0 and 1 whole
      out[tid] = -INFINITY;
      if (hist) top_hist_note(hist, -INFINITY, first + tid < seq_len);
    }
    return;
  }
  for (int i = tid; i < Hi * D; i += kScoreThreads) q_s[i] = p.q[int64_t(b) * Hi * D + i];
  for (int i = tid; i < Hi; i += kScoreThreads) w_s[i] = p.head_weights[int64_t(b) * Hi + i] * p.head_weight_scale;
  if (p.layout.fp8) {
    const uint8_t* base = p.key_cache + int64_t(page_id) * p.layout.page_bytes();
    const uint32_t* codes = reinterpret_cast<const uint32_t*>(base);
    const float* scales = reinterpret_cast<const float*>(base + kPageSize * D);
    for (int w = tid; w < kPageSize * D / 4; w += kScoreThreads) {
      const int t = (4 * w) / D, d = (4 * w) % D;
      const float4 v = dequant4_f32(__ldg(codes + w), __ldg(scales + t));
      float* k = k_s + t * (D + 1) + d;
      k[0] = v.x;
      k[1] = v.y;
      k[2] = v.z;
      k[3] = v.w;
    }
  } else {
    const uint16_t* keys = reinterpret_cast<const uint16_t*>(p.key_cache) + int64_t(page_id) * kPageSize * D;
    for (int i = tid; i < kPageSize * D; i += kScoreThreads)
      k_s[(i / D) * (D + 1) + i % D] = bf16_bits_to_float(__ldg(keys + i));
  }
  __syncthreads();
  const int t = tid % kPageSize, quarter = tid / kPageSize;
  const float* k = k_s + t * (D + 1);
  float partial = 0.f;
  for (int h = quarter; h < Hi; h += kHeadQuarters) {
    const float* q = q_s + h * D;
    float dot = 0.f;
    for (int d = 0; d < D; ++d) dot = fmaf(q[d], k[d], dot);
    partial += w_s[h] * fmaxf(p.softmax_scale * dot, 0.f);
  }
  part_s[quarter * kPageSize + t] = partial;
  __syncthreads();
  if (tid < kPageSize) {
    float s = 0.f;
    for (int qi = 0; qi < kHeadQuarters; ++qi) s += part_s[qi * kPageSize + tid];
    out[tid] = first + tid < seq_len ? s : -INFINITY;
    if (hist) top_hist_note(hist, s, first + tid < seq_len);
  }
}

// ---- indexer_score on tensor cores (Hi = 32, D % 16 == 0, 32 <= D <= 128: GLM-5's 32 x 128) ----
// The fp32 kernel above is shared-memory bound: two 4-byte shared loads per FMA, ~18K cycles per
// page of 64 positions (B 32 at 128K: 4.5 ms). Here the page's QK^T [64 positions x 32 heads] is
// a TF32 WMMA product (m16n16k8, fp32 accumulation) over D: the keys enter as their exact values
// (an e4m3 code or a bf16 value is exact in TF32; the FP8 per-token scale is applied to the dot
// product after, s_t * (q . e) instead of q . (e * s_t)), and q as two TF32 terms q_hi + q_lo
// (q_hi = tf32(q), q_lo = tf32(q - q_hi): ~22 bits, so the dot product matches fp32 to ~1e-6
// relative; the tests' bound is 1e-5 of the largest score). 4 warps: warp w owns heads
// [16 (w % 2), +16) and positions [32 (w / 2), +32), i.e. 2 x 16 of them, 4 MMAs per k-step in four
// independent accumulator chains (q_hi and q_lo apart: the chains are MMA-latency bound).
// Round 1 on the H200 (one block per SM: no carveout preference; 16-way staging conflicts; two
// chains): 1188 us at B 32 / 128K, 4x better than fp32; this version fixes those three.
// A block walks `pages_per_block` consecutive logical pages of one request, the next page's key
// bytes loaded into registers while the current one multiplies; q_hi / q_lo stay in shared memory.
// Shared memory: keys [64][D+4] fp32 (reused for the [64][36] product), q_hi / q_lo [32][D+4],
// per-position scale: ~66 KiB at D 128, 3 blocks per SM.
constexpr int kMmaThreads = 128;
constexpr int kMmaHeads = 32;
constexpr int kMmaMaxD = 128;
constexpr int kMmaRawUnits = kPageSize * kMmaMaxD / 4 / kMmaThreads;  // 4-value key units per thread (<= 16)

size_t score_mma_smem_bytes(int D) {
  const int ld = D + 4;
  return sizeof(float) * (size_t(kPageSize) * ld + 2 * size_t(kMmaHeads) * ld + kPageSize + kMmaHeads);
}

__global__ void __launch_bounds__(kMmaThreads) indexer_score_mma_kernel(IndexerScoreParams p, int pages_per_block) {
  pdl_begin();
  namespace wmma = nvcuda::wmma;
  extern __shared__ __align__(128) float4 mma_smem[];  // WMMA pointers must be 32-byte aligned
  const int D = p.layout.dim, ld = D + 4, ldc = kMmaHeads + 4, tid = threadIdx.x, warp = tid / 32;
  const int b = blockIdx.y;
  float* k_s = reinterpret_cast<float*>(mma_smem);  // [64][ld] key values; then [64][ldc] q.k products
  float* qh_s = k_s + kPageSize * ld;             // [32][ld]
  float* ql_s = qh_s + kMmaHeads * ld;            // [32][ld]
  float* sc_s = ql_s + kMmaHeads * ld;            // [64] per-position key scale
  float* w_s = sc_s + kPageSize;                  // [32] head weights * head_weight_scale
  const int64_t positions = int64_t(p.max_pages) * kPageSize;
  const int seq_len = p.seq_lens[b];
  const int page0 = blockIdx.x * pages_per_block, page_end = min(p.max_pages, page0 + pages_per_block);
  unsigned* hist = top_hist_copy(p, b);
  for (int i = 4 * tid; i < kMmaHeads * D; i += 4 * kMmaThreads) {  // D % 16 == 0: float4 runs
    const float4 q = *reinterpret_cast<const float4*>(p.q + int64_t(b) * kMmaHeads * D + i);
    const float4 hi = make_float4(wmma::__float_to_tf32(q.x), wmma::__float_to_tf32(q.y), wmma::__float_to_tf32(q.z),
                                  wmma::__float_to_tf32(q.w));
    *reinterpret_cast<float4*>(qh_s + (i / D) * ld + i % D) = hi;
    *reinterpret_cast<float4*>(ql_s + (i / D) * ld + i % D) =
        make_float4(wmma::__float_to_tf32(q.x - hi.x), wmma::__float_to_tf32(q.y - hi.y),
                    wmma::__float_to_tf32(q.z - hi.z), wmma::__float_to_tf32(q.w - hi.w));
  }
  for (int i = tid; i < kMmaHeads; i += kMmaThreads)
    w_s[i] = p.head_weights[int64_t(b) * kMmaHeads + i] * p.head_weight_scale;
  const int units = kPageSize * D / 4;  // 4-value units of one page's keys (4 codes or 4 bf16)
  // A page is computed when it has a position below seq_len and a page id >= 0 (uniform per block).
  auto page_id_of = [&](int page) -> int32_t {
    if (page >= page_end || page * kPageSize >= seq_len) return -1;
    return p.block_table[int64_t(b) * p.max_pages + page];
  };
  auto key_base = [&](int32_t id) -> const uint8_t* {
    return p.layout.fp8 ? p.key_cache + int64_t(id) * p.layout.page_bytes()
                        : p.key_cache + int64_t(id) * kPageSize * D * 2;
  };
  // Unit u = tid + j * kMmaThreads: a warp's 32 units are 128 consecutive values, so both its global
  // loads (128 / 256 contiguous bytes) and its float4 shared stores (512 contiguous bytes within a
  // row) are whole wavefronts, free of bank conflicts.
  uint2 raw[kMmaRawUnits];
  float raw_scale = 1.f;
  auto load_raw = [&](int32_t id) {
    if (id < 0) return;
    const uint8_t* base = key_base(id);
#pragma unroll
    for (int j = 0; j < kMmaRawUnits; ++j) {
      const int u = tid + j * kMmaThreads;
      if (u < units) {
        if (p.layout.fp8) raw[j].x = __ldg(reinterpret_cast<const uint32_t*>(base) + u);
        else raw[j] = __ldg(reinterpret_cast<const uint2*>(base) + u);
      }
    }
    if (p.layout.fp8 && tid < kPageSize) raw_scale = __ldg(reinterpret_cast<const float*>(base + kPageSize * D) + tid);
  };
  // The registers' key bytes -> exact fp32 key values in k_s (scale separately in sc_s).
  auto store_raw = [&]() {
#pragma unroll
    for (int j = 0; j < kMmaRawUnits; ++j) {
      const int u = tid + j * kMmaThreads;
      if (u >= units) continue;
      float4 v;
      if (p.layout.fp8) {
        const float2 a = e4m3x2_to_float2(uint16_t(raw[j].x & 0xffffu)), e = e4m3x2_to_float2(uint16_t(raw[j].x >> 16));
        v = make_float4(a.x, a.y, e.x, e.y);
      } else {
        v = make_float4(__uint_as_float(raw[j].x << 16), __uint_as_float(raw[j].x & 0xffff0000u),
                        __uint_as_float(raw[j].y << 16), __uint_as_float(raw[j].y & 0xffff0000u));
      }
      *reinterpret_cast<float4*>(k_s + ((4 * u) / D) * ld + (4 * u) % D) = v;
    }
    if (tid < kPageSize) sc_s[tid] = p.layout.fp8 ? raw_scale : 1.f;
  };
  const int nt = warp % 2, m0 = 2 * (warp / 2);  // heads [16 nt, +16), positions [16 m0, +32)
  int32_t id = page_id_of(page0);
  load_raw(id);
  for (int page = page0; page < page_end; ++page) {
    float* out = p.scores + b * positions + int64_t(page) * kPageSize;
    const int32_t next_id = page_id_of(page + 1);
    if (id < 0) {  // past seq_len or an unmapped page
      if (tid < kPageSize) {  // warps 0 and 1 whole
        out[tid] = -INFINITY;
        if (hist) top_hist_note(hist, -INFINITY, page * kPageSize + tid < seq_len);
      }
      load_raw(next_id);
      id = next_id;
      continue;
    }
    __syncthreads();  // the previous page's readers of k_s are done
    store_raw();
    load_raw(next_id);  // in flight during this page's products
    __syncthreads();
    // Four independent accumulation chains (2 position tiles x q_hi / q_lo), added at the end.
    wmma::fragment<wmma::accumulator, 16, 16, 8, float> acc[2], acc_lo[2];
#pragma unroll
    for (int m = 0; m < 2; ++m) {
      wmma::fill_fragment(acc[m], 0.f);
      wmma::fill_fragment(acc_lo[m], 0.f);
    }
    for (int kk = 0; kk < D / 8; ++kk) {
      wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::col_major> bh, bl;
      wmma::load_matrix_sync(bh, qh_s + nt * 16 * ld + kk * 8, ld);
      wmma::load_matrix_sync(bl, ql_s + nt * 16 * ld + kk * 8, ld);
#pragma unroll
      for (int m = 0; m < 2; ++m) {
        wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> a;
        wmma::load_matrix_sync(a, k_s + (m0 + m) * 16 * ld + kk * 8, ld);
        wmma::mma_sync(acc[m], a, bh, acc[m]);
        wmma::mma_sync(acc_lo[m], a, bl, acc_lo[m]);
      }
    }
#pragma unroll
    for (int m = 0; m < 2; ++m)
#pragma unroll
      for (int e = 0; e < acc[m].num_elements; ++e) acc[m].x[e] += acc_lo[m].x[e];
    __syncthreads();  // every warp is done reading k_s: it now takes the products
#pragma unroll
    for (int m = 0; m < 2; ++m)
      wmma::store_matrix_sync(k_s + (m0 + m) * 16 * ldc + nt * 16, acc[m], ldc, wmma::mem_row_major);
    __syncthreads();
    {  // position tid / 2, heads [16 (tid % 2), +16) in a rotated order (conflict-free), pair sum
      const int t = tid / 2, half = tid % 2;
      const float* row = k_s + t * ldc + 16 * half;
      const float* w = w_s + 16 * half;
      const float st = sc_s[t];
      float sum = 0.f;
#pragma unroll
      for (int h = 0; h < 16; ++h) {
        const int hh = (h + t) % 16;
        sum += w[hh] * fmaxf(p.softmax_scale * (st * row[hh]), 0.f);
      }
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      if (half == 0) out[t] = page * kPageSize + t < seq_len ? sum : -INFINITY;
      if (hist) top_hist_note(hist, sum, half == 0 && page * kPageSize + t < seq_len);  // every lane calls
    }
    id = next_id;
  }
}

// ---- indexer_score, FP8 keys on FP16 tensor cores (Hi = 32, D = 32 / 64 / 128: GLM-5's 32 x 128) ----
// Why the TF32 kernel above is slow at small batch (B 1, 32K: 23.7 us for ~1 us of key bytes): one
// page per block, the q setup (16 KiB from L2, split to TF32) and the page's key load run one after
// the other, WMMA TF32 fragments come from shared memory through scalar loads (no ldmatrix for
// 32-bit types), and m16n16k8 TF32 runs at half the FP16 rate. Here:
// - An e4m3 code is exact in FP16 (cvt.f16x2.e4m3x2, one instruction per two codes), so the keys
//   feed m16n8k16 FP16 MMAs (fp32 accumulation) straight from the registers they are loaded into:
//   no shared-memory staging, no dequantization; the per-token FP8 scale multiplies the dot product.
// - q of head h is scaled by 2^e_h (max |q_h| * 2^e_h in [2^14, 2^15), exact) and split as
//   hi = f16(q 2^e_h), lo = f16(q 2^e_h - hi): 22 significant bits, the TF32 hi/lo split's accuracy
//   (~1e-6 relative to |q||k|); both terms accumulate into one fp32 accumulator (two MMAs).
// - The dot product runs over D in a permuted order (any order sums the same terms): thread
//   (g = lane / 4, c = lane % 4) of a warp loads row g and g + 8 of each 16-position tile as whole
//   16-byte pieces (bytes [16c, +16) of each 64-byte half of the row), and k-step j's A fragment is
//   word j of them; q's B fragments are built once per block in that same order (index_phys).
// - A warp owns 32 positions (half a page) per step, and the next step's key bytes are in flight in
//   registers during the current step's 128 MMAs. Blocks of 4 warps walk `tiles_per_block` steps
//   of one request; the first step's loads are issued before the q setup. Grid: about one wave of
//   resident blocks, so B 1 at 32K gives every warp one step (256 blocks) and large B x context
//   gives each warp many.
// Epilogue from the accumulators: c0..c3 are (position g / g + 8, heads 8t + 2c, +1); a thread sums
// its 8 heads of w_h ReLU(softmax_scale * s_t * q.e / 2^e_h), a quad shuffle adds the 4 threads.
constexpr int kF16Threads = 128;
constexpr int kF16Warps = kF16Threads / 32;
constexpr int kF16Heads = 32;
constexpr int kF16TilePos = 32;  // positions per warp step (two m16 tiles)

// Physical byte (within a key row of D bytes) of k-step j, quad thread c, element s (0..3; s 0/1 are
// fragment k 2c, 2c + 1 and s 2/3 are k 2c + 8, 2c + 9).
template <int D>
__device__ __forceinline__ int index_phys(int j, int c, int s) {
  if constexpr (D >= 64) return (j / 4) * 64 + 16 * c + 4 * (j % 4) + s;
  else return 8 * c + 4 * j + s;  // D 32: one 8-byte piece per row
}

template <int D>
struct F16KeyRegs {
  static constexpr int kWords = D / 16;  // 32-bit words per thread per row (one per k-step)
  uint32_t w[2][2][kWords];              // [m tile][row g / g + 8][k-step]
  float scale[2][2];
  int32_t page_id;                       // < 0: nothing loaded (past seq_len, unmapped, past the range)
};

// l2: through L2 only (ld.global.cg): the reload of a fresh tile after the PDL wait must not hit the L1 lines of the
// load before it (L1 is not coherent with the writes of the previous kernel).
template <int D>
__device__ __forceinline__ void f16_load_tile(const IndexerScoreParams& p, int b, int tile, int tile_end, int seq_len,
                                              F16KeyRegs<D>& r, bool l2 = false) {
  r.page_id = -1;
  if (tile >= tile_end) return;
  const int page = tile / 2;
  if (page * kPageSize >= seq_len) return;
  const int32_t id = p.block_table[int64_t(b) * p.max_pages + page];
  r.page_id = id;
  if (id < 0) return;
  const int lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;
  const uint8_t* pb = p.key_cache + int64_t(id) * p.layout.page_bytes();
  const float* scales = reinterpret_cast<const float*>(pb + kPageSize * D);
#pragma unroll
  for (int m = 0; m < 2; ++m)
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) {
      const int row = (tile % 2) * kF16TilePos + 16 * m + 8 * rr + g;
      const uint8_t* rp = pb + row * D;
      if constexpr (D >= 64) {
#pragma unroll
        for (int ch = 0; ch < D / 64; ++ch) {
          const uint4* a = reinterpret_cast<const uint4*>(rp + 64 * ch + 16 * c);
          const uint4 v = l2 ? __ldcg(a) : __ldcs(a);
          r.w[m][rr][4 * ch] = v.x;
          r.w[m][rr][4 * ch + 1] = v.y;
          r.w[m][rr][4 * ch + 2] = v.z;
          r.w[m][rr][4 * ch + 3] = v.w;
        }
      } else {
        const uint2* a = reinterpret_cast<const uint2*>(rp + 8 * c);
        const uint2 v = l2 ? __ldcg(a) : __ldcs(a);
        r.w[m][rr][0] = v.x;
        r.w[m][rr][1] = v.y;
      }
      r.scale[m][rr] = l2 ? __ldcg(scales + row) : __ldcs(scales + row);
    }
}

template <int D>
__global__ void __launch_bounds__(kF16Threads, 3) indexer_score_f16_kernel(IndexerScoreParams p, int tiles_per_block) {
  if (!p.fresh) pdl_begin();
  constexpr int KS = D / 16;
  __shared__ uint4 qf_s[4 * KS * 32];  // [n tile][k-step][lane]: {hi b0b1, hi b2b3, lo b0b1, lo b2b3}
  __shared__ float w_s[kF16Heads];     // head weight * head_weight_scale
  __shared__ float f_s[kF16Heads];     // softmax_scale * 2^-e_h
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, g = lane / 4, c = lane % 4;
  const int b = blockIdx.y;
  const int seq_len = p.seq_lens[b];
  const int tiles = p.max_pages * 2;
  const int tile_begin = blockIdx.x * tiles_per_block, tile_end = min(tiles, tile_begin + tiles_per_block);
  float* out_row = p.scores + int64_t(b) * p.max_pages * kPageSize;
  unsigned* hist = top_hist_copy(p, b);
  int tile = tile_begin + warp;
  F16KeyRegs<D> cur;
  // seq_lens and the block table are per-step tables copied before the step's first kernel; with p.fresh only the
  // fresh positions' keys may still be in flight from the previous kernel (IndexerScoreParams::fresh).
  f16_load_tile<D>(p, b, tile, tile_end, seq_len, cur);  // in flight during the q setup (and, with fresh, the wait)
  if (p.fresh) {
    pdl_begin();
    if (tile < tile_end && tile * kF16TilePos < seq_len && (tile + 1) * kF16TilePos > seq_len - p.fresh)
      f16_load_tile<D>(p, b, tile, tile_end, seq_len, cur, true);  // a fresh key: again, now that it is written
  }
  // q setup: warp w owns heads w + 4 i (i < 8). Lane l < 4 KS holds the entry (j = l / 4, quad
  // thread l % 4) of each: 4 consecutive floats (index_phys), all 8 loads in flight together; the
  // head's max |q| is a warp max over them.
  const float* qb = p.q + int64_t(b) * kF16Heads * D;
  constexpr int kHeadsPerWarp = kF16Heads / kF16Warps;
  float4 qv[kHeadsPerWarp];
  const bool holds = lane < 4 * KS;
#pragma unroll
  for (int i = 0; i < kHeadsPerWarp; ++i) {
    const int h = warp + kF16Warps * i;
    qv[i] = holds ? *reinterpret_cast<const float4*>(qb + h * D + index_phys<D>(lane / 4, lane % 4, 0))
                  : make_float4(0.f, 0.f, 0.f, 0.f);
  }
#pragma unroll
  for (int i = 0; i < kHeadsPerWarp; ++i) {
    const int h = warp + kF16Warps * i;
    const float4 v = qv[i];
    float mx = fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w)));
#pragma unroll
    for (int o = 16; o; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    // 2^e with max |q_h| 2^e in [2^14, 2^15) (e clamped: 2^e and 2^-e stay normal floats)
    const int e = mx > 0.f && isfinite(mx) ? max(-100, min(100, 14 - ilogbf(mx))) : 0;
    if (lane == 0) {
      f_s[h] = p.softmax_scale * __int_as_float((127 - e) << 23);
      w_s[h] = p.head_weights[int64_t(b) * kF16Heads + h] * p.head_weight_scale;
    }
    if (holds) {
      const float sc = __int_as_float((127 + e) << 23);  // 2^e, exact
      const float x0 = v.x * sc, x1 = v.y * sc, x2 = v.z * sc, x3 = v.w * sc;
      const __half h0 = __float2half_rn(x0), h1 = __float2half_rn(x1), h2 = __float2half_rn(x2),
                   h3 = __float2half_rn(x3);
      const __half l0 = __float2half_rn(x0 - __half2float(h0)), l1 = __float2half_rn(x1 - __half2float(h1)),
                   l2 = __float2half_rn(x2 - __half2float(h2)), l3 = __float2half_rn(x3 - __half2float(h3));
      auto pack = [](__half first, __half second) {
        return uint32_t(__half_as_ushort(first)) | (uint32_t(__half_as_ushort(second)) << 16);
      };
      const int j = lane / 4, cc = lane % 4, t = h / 8, n = h % 8;
      qf_s[(t * KS + j) * 32 + n * 4 + cc] = make_uint4(pack(h0, h1), pack(h2, h3), pack(l0, l1), pack(l2, l3));
    }
  }
  __syncthreads();
  float wr[4][2], fr[4][2];  // this thread's heads 8t + 2c + e
#pragma unroll
  for (int t = 0; t < 4; ++t)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      wr[t][e] = w_s[8 * t + 2 * c + e];
      fr[t][e] = f_s[8 * t + 2 * c + e];
    }
  for (; tile < tile_end; tile += kF16Warps) {
    F16KeyRegs<D> nxt;
    f16_load_tile<D>(p, b, tile + kF16Warps, tile_end, seq_len, nxt);
    const int pos0 = tile * kF16TilePos;
    if (cur.page_id < 0) {  // (uniform per warp)
      out_row[pos0 + lane] = -INFINITY;
      if (hist) top_hist_note(hist, -INFINITY, pos0 + lane < seq_len);
    } else {
      float acc[2][4][4];
#pragma unroll
      for (int m = 0; m < 2; ++m)
#pragma unroll
        for (int t = 0; t < 4; ++t)
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[m][t][e] = 0.f;
#pragma unroll
      for (int j = 0; j < KS; ++j) {
        uint4 bq[4];
#pragma unroll
        for (int t = 0; t < 4; ++t) bq[t] = qf_s[(t * KS + j) * 32 + lane];
#pragma unroll
        for (int m = 0; m < 2; ++m) {
          const uint32_t w0 = cur.w[m][0][j], w1 = cur.w[m][1][j];
          const uint32_t a0 = e4m3x2_to_f16x2(w0), a1 = e4m3x2_to_f16x2(w1), a2 = e4m3x2_to_f16x2(w0 >> 16),
                         a3 = e4m3x2_to_f16x2(w1 >> 16);
#pragma unroll
          for (int t = 0; t < 4; ++t) {
            mma_16816_f16(acc[m][t], a0, a1, a2, a3, bq[t].x, bq[t].y);
            mma_16816_f16(acc[m][t], a0, a1, a2, a3, bq[t].z, bq[t].w);
          }
        }
      }
      float sum[2][2];  // [m][row g / g + 8]
#pragma unroll
      for (int m = 0; m < 2; ++m)
#pragma unroll
        for (int rr = 0; rr < 2; ++rr) {
          const float st = cur.scale[m][rr];
          float s = 0.f;
#pragma unroll
          for (int t = 0; t < 4; ++t)
#pragma unroll
            for (int e = 0; e < 2; ++e) s += wr[t][e] * fmaxf(acc[m][t][2 * rr + e] * (st * fr[t][e]), 0.f);
          s += __shfl_xor_sync(0xffffffffu, s, 1);
          s += __shfl_xor_sync(0xffffffffu, s, 2);
          sum[m][rr] = s;
        }
      // lane c of the quad writes (m = c / 2, rr = c % 2): position 16 m + 8 rr + g of the step
      const float v = c == 0 ? sum[0][0] : c == 1 ? sum[0][1] : c == 2 ? sum[1][0] : sum[1][1];
      const int pos = pos0 + 16 * (c / 2) + 8 * (c % 2) + g;
      out_row[pos] = pos < seq_len ? v : -INFINITY;
      if (hist) top_hist_note(hist, v, pos < seq_len);
    }
    cur = nxt;
  }
}

constexpr int kTopkThreads = 1024;
constexpr int kTopkWarps = kTopkThreads / 32;
static_assert(kTopkWarps == 32, "select_digit sums the warp totals with one lane per warp");
constexpr int kTopkPerThread = 8;                        // consecutive positions per thread per step
constexpr int kTopkStep = kTopkThreads * kTopkPerThread;  // positions per block step (8192)
constexpr int kTopkBins = 2048;                          // 11-bit digits (the last pass: 10 bits)
constexpr int kTopkCandidates = 16384;                   // shared-memory keys after the first pass
constexpr unsigned kNoDigit = 0xffffffffu;

constexpr int kMaxCluster = 8;                           // blocks per request, chosen (portable cluster size)
constexpr int kMinClusterChunk = 4096;                   // positions per block before the split pays

constexpr int kTopkChunkSmem = 32768;                    // a block's positions kept in shared memory
size_t topk_smem_bytes() { return sizeof(uint32_t) * (2 * kTopkBins + kTopkCandidates + kTopkChunkSmem); }

__device__ __forceinline__ int32_t slot_of(const TopkParams& p, int b, int pos) {
  const int32_t page = p.block_table[int64_t(b) * p.max_pages + pos / kPageSize];
  return page < 0 ? -1 : page * kPageSize + pos % kPageSize;
}

// The order keys of positions base + kTopkPerThread*tid + j (j < kTopkPerThread) of one request's
// scores; valid[j] false at or past `end`. Two 16-byte loads when `vec` (row 16-byte aligned and
// base a multiple of 4), else scalars.
__device__ __forceinline__ void load_keys(const float* __restrict__ s, int end, int base, bool vec,
                                          uint32_t (&key)[kTopkPerThread], bool (&valid)[kTopkPerThread]) {
  const int first = base + kTopkPerThread * int(threadIdx.x);
  const int n = end;
  float v[kTopkPerThread];
  if (vec && first + kTopkPerThread <= n) {
#pragma unroll
    for (int q = 0; q < kTopkPerThread / 4; ++q) {
      const float4 f = __ldg(reinterpret_cast<const float4*>(s + first) + q);
      v[4 * q] = f.x;
      v[4 * q + 1] = f.y;
      v[4 * q + 2] = f.z;
      v[4 * q + 3] = f.w;
    }
  } else {
#pragma unroll
    for (int j = 0; j < kTopkPerThread; ++j) v[j] = first + j < n ? __ldg(s + first + j) : 0.f;
  }
#pragma unroll
  for (int j = 0; j < kTopkPerThread; ++j) {
    valid[j] = first + j < n;
    key[j] = topk_order_key(v[j]);
  }
}

// Adds `digit` (kNoDigit: nothing) to the shared histogram. Whole warp calls.
__device__ __forceinline__ void hist_add(unsigned* hist, unsigned digit) {
  // The lanes with lane 0's digit add once (all of them when a row is one heavy tie); the others add
  // singly. Measured on the H200 (tools/probe/topk_probe.cu, B 1, pass 0 at 4096 keys per block): 1.7 us,
  // against 3.0-3.6 us with __match_any_sync peers (its latency, not contention: uniformly spread keys
  // cost the same) and 1.2 us with plain atomics, which serialize 32-way on an all-equal row.
  const unsigned lane = threadIdx.x % 32, d0 = __shfl_sync(0xffffffffu, digit, 0);
  const unsigned with0 = __ballot_sync(0xffffffffu, digit == d0);
  if (digit == d0) {
    if (lane == 0 && d0 != kNoDigit) atomicAdd(&hist[d0], unsigned(__popc(with0)));
  } else if (digit != kNoDigit) {
    atomicAdd(&hist[digit], 1u);
  }
}

// Whole warp: appends word[j] of every lane and j with take[j] to dst (in no particular order), the warp's slots
// reserved with one atomic add on *count (shared memory: this block's, or another block's of the cluster). One atomic
// per warp, not per key: the same-address atomics of 32 warps were ~1 us of a 4096-key copy.
// Slots at or past `cap` are not written (the count still grows): a histogram that undercounts the selected digit
// cannot make the gathered form write past rank 0's candidate buffer.
template <int N>
__device__ __forceinline__ void warp_append(const bool (&take)[N], const uint32_t (&word)[N], unsigned* count,
                                            uint32_t* dst, unsigned cap) {
  const unsigned lane = threadIdx.x % 32;
  unsigned mask[N], total = 0;
#pragma unroll
  for (int j = 0; j < N; ++j) {
    mask[j] = __ballot_sync(0xffffffffu, take[j]);
    total += __popc(mask[j]);
  }
  unsigned at = 0;
  if (lane == 0 && total) at = atomicAdd(count, total);
  at = __shfl_sync(0xffffffffu, at, 0);
  const unsigned below = (1u << lane) - 1u;
#pragma unroll
  for (int j = 0; j < N; ++j) {
    if (mask[j] >> lane & 1u) {
      const unsigned slot = at + __popc(mask[j] & below);
      if (slot < cap) dst[slot] = word[j];
    }
    at += __popc(mask[j]);
  }
}

// Digit of `key` for a pass at `shift` with `bits`, or kNoDigit unless valid and the bits above
// the digit equal `prefix` under `prefix_mask`.
__device__ __forceinline__ unsigned digit_of(uint32_t key, bool valid, uint32_t prefix, uint32_t prefix_mask, int shift,
                                             int bits) {
  return valid && (key & prefix_mask) == prefix ? (key >> shift) & ((1u << bits) - 1u) : kNoDigit;
}

// Block-wide: the digit d of `hist` (nbins = 1024 or 2048, highest digit first) holding rank
// `remaining` (1-based) and how many keys lie in higher digits; written to sel[0], sel[1].
// `warp_sums` is [T / 32] scratch. Ends with a barrier, so sel is readable by every thread. T: the block's threads
// (the cluster kernel's 1024, the flat form's 512).
template <int T = kTopkThreads>
__device__ void select_digit(const unsigned* hist, int nbins, unsigned remaining, unsigned* warp_sums, unsigned* sel) {
  static_assert(T % 32 == 0 && T <= 1024, "whole warps, at most 32");
  constexpr int kWarps = T / 32;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, per = nbins / T;
  unsigned local = 0;
  for (int d = 0; d < per; ++d) local += hist[per * tid + d];
  unsigned suffix = local;  // inclusive suffix sum over the lanes >= this lane of the warp
  for (int o = 1; o < 32; o <<= 1) {
    const unsigned v = __shfl_down_sync(0xffffffffu, suffix, o);
    if (lane + o < 32) suffix += v;
  }
  if (lane == 0) warp_sums[warp] = suffix;
  __syncthreads();
  // Keys in the digits of higher threads: this warp's higher lanes, plus the higher warps' totals
  // (one shared load per lane and a warp sum, not a serial walk over up to 31 warps).
  unsigned higher_warps = lane > warp && lane < kWarps ? warp_sums[lane] : 0u;
#pragma unroll
  for (int o = 16; o; o >>= 1) higher_warps += __shfl_xor_sync(0xffffffffu, higher_warps, o);
  unsigned above = suffix - local + higher_warps;
  if (above < remaining && above + local >= remaining) {
    for (int d = per - 1; d >= 0; --d) {
      const unsigned c = hist[per * tid + d];
      if (above + c >= remaining) {
        sel[0] = unsigned(per * tid + d);
        sel[1] = above;
        break;
      }
      above += c;
    }
  }
  __syncthreads();
}

// Block-wide exclusive prefix sum of `v` in thread order; the block total in *total.
// `warp_sums` is [T / 32] scratch; barriers before and after, so it can be called in a loop.
template <int T = kTopkThreads>
__device__ unsigned block_exclusive_sum(unsigned v, unsigned* warp_sums, unsigned* total) {
  static_assert(T % 32 == 0 && T <= 1024, "whole warps, at most 32");
  constexpr int kWarps = T / 32;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  unsigned incl = v;
  for (int o = 1; o < 32; o <<= 1) {
    const unsigned u = __shfl_up_sync(0xffffffffu, incl, o);
    if (lane >= o) incl += u;
  }
  __syncthreads();  // the previous call's readers are done with warp_sums
  if (lane == 31) warp_sums[warp] = incl;
  __syncthreads();
  // Lane l scans the first l + 1 warp totals (one shared load and five shuffles, not a serial walk
  // over the 32 totals in every thread).
  unsigned scan = lane < kWarps ? warp_sums[lane] : 0u;
  for (int o = 1; o < 32; o <<= 1) {
    const unsigned u = __shfl_up_sync(0xffffffffu, scan, o);
    if (lane >= o) scan += u;
  }
  const unsigned lower = __shfl_sync(0xffffffffu, scan, (warp + 31) % 32);  // warps < this one (warp 0: unused)
  *total = __shfl_sync(0xffffffffu, scan, 31);
  return incl - v + (warp > 0 ? lower : 0u);
}

// Block-wide sum of `v` (every thread gets it); barriers inside, callable in a loop.
template <int T = kTopkThreads>
__device__ __forceinline__ unsigned block_sum(unsigned v, unsigned* warp_sums) {
  unsigned total = 0;
  block_exclusive_sum<T>(v, warp_sums, &total);
  return total;
}

// Block-wide, one step of the ordered compaction: writes the winners among the keys of positions first + q
// (q < kTopkPerThread, consecutive per thread, sharing the page page_id) of every thread in position order from
// output slot `written`: keys above kth, and keys equal to it while their rank among this step's equal keys is below
// eq_left (slot -1 for an unmapped page; no slot at or past k). Returns the step's counts, packed: above kth in the low
// 16 bits, equal in the high (each <= 8192). `warp_sums` is [T / 32] scratch (block_exclusive_sum).
template <int T>
__device__ __forceinline__ unsigned write_winners(const uint32_t (&key)[kTopkPerThread], const bool (&valid)[kTopkPerThread],
                                                  uint32_t kth, unsigned written, unsigned eq_left, int first,
                                                  int32_t page_id, int32_t* out, int k, unsigned* warp_sums) {
  unsigned gt = 0, eq = 0;
#pragma unroll
  for (int j = 0; j < kTopkPerThread; ++j) {
    gt += valid[j] && key[j] > kth;
    eq += valid[j] && key[j] == kth;
  }
  unsigned totals = 0;
  const unsigned before = block_exclusive_sum<T>(gt | (eq << 16), warp_sums, &totals);
  const unsigned gt_before = before & 0xffffu, eq_before = before >> 16;
  unsigned pos = written + gt_before + min(eq_before, eq_left);
  unsigned eq_rank = eq_before;
#pragma unroll
  for (int j = 0; j < kTopkPerThread; ++j) {
    bool take = false;
    if (valid[j] && key[j] > kth) take = true;
    if (valid[j] && key[j] == kth) take = eq_rank++ < eq_left;
    if (take) {
      if (pos < unsigned(k)) out[pos] = page_id < 0 ? -1 : page_id * kPageSize + (first + j) % kPageSize;
      ++pos;
    }
  }
  return totals;
}

// One cluster of C blocks per request (C = cluster size, 1..8; block rank r owns the positions
// [r*chunk, (r+1)*chunk), chunk a multiple of 8). Radix select of the k-th largest order key with
// digits of 11, 11 and 10 bits: each pass, every block histograms its own keys in shared memory,
// the cluster syncs, the C histograms are summed through distributed shared memory (each block sums
// 1/C of the bins and stores them into every block's copy) and every block selects the same digit.
// After pass 1 a block keeps its keys of the selected top digit (the only ones still undecided) in
// shared memory when they fit (kTopkCandidates), so passes 2 and 3 read shared memory instead of the
// scores (else they re-read them, filtered by the prefix). Last, an
// ordered compaction: a block learns how many keys above / equal to the k-th key the lower ranks
// hold (from their candidates and pass-1 histogram, or a count over their positions), then walks
// its own positions in steps of 8192 (8 consecutive per thread, one block prefix sum per step)
// writing the keys above the k-th key and the lowest-position keys equal to it. With C = 1 this is
// the single-block algorithm (three reads of the scores). A block whose positions fit in
// kTopkChunkSmem (32,768) reads them once, all loads in flight together, then scans shared memory.
// Round 1 on the H200 (before that staging): B 1 at 128K 39.6 us (single block: 152.7 us).
// (C is fixed at compile time, __cluster_dims__, so the launch, also under CUDA-graph capture,
// carries no cluster attribute; launch_kernel adds only the PDL one.)
template <int C_>
__global__ void __cluster_dims__(C_, 1, 1) __launch_bounds__(kTopkThreads) topk_kernel(TopkParams p, int limit) {
  GLM5_TOPK_MARK(0);
  pdl_begin();
  GLM5_TOPK_MARK(1);
  extern __shared__ uint32_t topk_smem[];
  unsigned* hist = topk_smem;                  // [kTopkBins] this block's histogram (read by the cluster)
  unsigned* merged = hist + kTopkBins;         // [kTopkBins] the cluster's
  uint32_t* cand = merged + kTopkBins;         // [kTopkCandidates]
  uint32_t* chunk_s = cand + kTopkCandidates;  // [kTopkChunkSmem] this block's order keys, in position order
  __shared__ unsigned warp_sums[kTopkWarps];
  __shared__ unsigned sel[2];
  __shared__ unsigned cand_count;
  __shared__ unsigned rank_counts[2];          // this block's keys > and == the k-th (read by higher ranks)
  // The gathered form (below): rank 0's candidate count and, per rank, the keys above the top digit (both
  // written by every block through distributed shared memory), rank 0's per-rank candidate counts, and what
  // rank 0 sends each block for its compaction: {k-th key, equal keys taken, keys > and == it at lower ranks}.
  __shared__ unsigned gather_count;
  __shared__ unsigned rank_above[C_];
  __shared__ unsigned rank_cand[2 * C_];
  __shared__ uint32_t verdict[4];
  __shared__ unsigned few_count;  // rank 0: the candidates of the selected pass-1 digit (<= 32 kept in `few`)
  __shared__ uint32_t few[32];
  cg::cluster_group cluster = cg::this_cluster();
  const int C = int(cluster.num_blocks()), rank = int(cluster.block_rank());
  const int b = int(blockIdx.x) / C, tid = threadIdx.x, lane = tid % 32;
  const int n = min(max(p.seq_lens[b], 0), limit);
  const float* s = p.scores + int64_t(b) * p.score_stride;
  int32_t* out = p.out_slots + int64_t(b) * p.k;
  unsigned* top_hist = p.top_hist ? p.top_hist + int64_t(b) * kTopkHistCopies * kTopkHistBins : nullptr;
  // Zeroes this request's histogram (consumed) once every block has read it: blocks `first`.. of `blocks` each
  // clear their share.
  auto clear_top_hist = [&](int first, int blocks) {
    if (top_hist && rank >= first && rank < first + blocks)
      for (int i = (rank - first) * kTopkThreads + tid; i < kTopkHistCopies * kTopkHistBins; i += blocks * kTopkThreads)
        top_hist[i] = 0;
  };
  if (n <= p.k) {  // the same in every block of the cluster: no cluster barrier is skipped unevenly
    if (rank == 0)
      for (int i = tid; i < p.k; i += kTopkThreads) out[i] = i < n ? slot_of(p, b, i) : -1;
    clear_top_hist(0, 1);  // no block read it
    return;
  }
  if (tid == 0) gather_count = 0;  // before pass 0's cluster barrier (or `started`), which every remote add follows
  if (tid < C_) rank_above[tid] = 0;
  // Without a pass 0 of our own (top_hist), a split cluster barrier orders those zeros (and every block's start, which
  // distributed shared memory needs) before the first remote add; its wait comes after the key loads.
  const bool own_pass0 = !(top_hist && p.gather);  // uniform over the cluster
  cg::cluster_group::arrival_token started;
  if (!own_pass0) started = cluster.barrier_arrive();
  const int chunk = ((n + C - 1) / C + kTopkPerThread - 1) / kTopkPerThread * kTopkPerThread;
  const int begin = min(n, rank * chunk), end = min(n, begin + chunk);
  const bool vec = (reinterpret_cast<uintptr_t>(s) & 15u) == 0;
  // The block-table entry of this thread's first 8 positions, for the compaction's first step: loaded
  // here, its latency hidden behind the passes (at B 1 / 32K, C = 8, a block's 4,096 positions are
  // one step; longer chunks load the later steps' entries in the loop).
  const int first0 = begin + kTopkPerThread * tid;
  const int32_t first_page = first0 < end ? p.block_table[int64_t(b) * p.max_pages + first0 / kPageSize] : -1;
  // When this block's positions fit (GLM-5 128K: 16,384 at C = 8, 32,768 at C = 4), their order
  // keys are read from global memory once, here, with all loads in flight together; every later
  // scan reads shared memory.
  const bool chunk_in_smem = end - begin <= kTopkChunkSmem;
  // TopkParams::top_hist: the first pass's merged histogram as the score kernel built it, loaded beside the keys.
  static_assert(kTopkHistBins == kTopkBins && kTopkBins == 2 * kTopkThreads, "two bins per thread");
  unsigned th0 = 0, th1 = 0;
  if (!own_pass0) {  // the sum of the score kernel's copies
    unsigned c0[kTopkHistCopies], c1[kTopkHistCopies];
#pragma unroll
    for (int c = 0; c < kTopkHistCopies; ++c) {
      c0[c] = __ldcg(top_hist + c * kTopkHistBins + tid);
      c1[c] = __ldcg(top_hist + c * kTopkHistBins + tid + kTopkThreads);
    }
#pragma unroll
    for (int c = 0; c < kTopkHistCopies; ++c) {
      th0 += c0[c];
      th1 += c1[c];
    }
  }
  if (chunk_in_smem) {
    for (int base = begin; base < end; base += 2 * kTopkStep) {
      uint32_t k0[kTopkPerThread], k1[kTopkPerThread];
      bool v0[kTopkPerThread], v1[kTopkPerThread];
      load_keys(s, end, base, vec, k0, v0);
      load_keys(s, end, base + kTopkStep, vec, k1, v1);  // all invalid (no load) past the end
      const int at = base - begin + kTopkPerThread * tid;  // a multiple of 8: two aligned uint4
      if (base + kTopkPerThread * tid < end) {
        reinterpret_cast<uint4*>(chunk_s + at)[0] = make_uint4(k0[0], k0[1], k0[2], k0[3]);
        reinterpret_cast<uint4*>(chunk_s + at)[1] = make_uint4(k0[4], k0[5], k0[6], k0[7]);
      }
      if (base + kTopkStep + kTopkPerThread * tid < end) {
        reinterpret_cast<uint4*>(chunk_s + at + kTopkStep)[0] = make_uint4(k1[0], k1[1], k1[2], k1[3]);
        reinterpret_cast<uint4*>(chunk_s + at + kTopkStep)[1] = make_uint4(k1[4], k1[5], k1[6], k1[7]);
      }
    }
  }
  if (!own_pass0) {
    merged[tid] = th0;
    merged[tid + kTopkThreads] = th1;
  }
  __syncthreads();  // the keys (chunk_in_smem) and the loaded histogram are in shared memory
  if (!own_pass0) cluster.barrier_wait(std::move(started));
  GLM5_TOPK_MARK(2);
  // The order keys of positions base + 8*tid + j, from shared memory or global memory.
  auto fetch = [&](int base, uint32_t (&key)[kTopkPerThread], bool (&valid)[kTopkPerThread]) {
    if (!chunk_in_smem) {
      load_keys(s, end, base, vec, key, valid);
      return;
    }
    const int first = base + kTopkPerThread * tid;
    uint4 a = make_uint4(0, 0, 0, 0), c = a;
    if (first < end) {
      a = reinterpret_cast<const uint4*>(chunk_s + first - begin)[0];
      c = reinterpret_cast<const uint4*>(chunk_s + first - begin)[1];
    }
    const uint32_t kk[kTopkPerThread] = {a.x, a.y, a.z, a.w, c.x, c.y, c.z, c.w};
#pragma unroll
    for (int j = 0; j < kTopkPerThread; ++j) {
      valid[j] = first + j < end;
      key[j] = kk[j];
    }
  };
  // After each pass `prefix` holds the top bits of the k-th largest key (under `prefix_mask`) and
  // `remaining` how many keys with that prefix still belong to the top k.
  uint32_t prefix = 0, prefix_mask = 0;
  unsigned remaining = p.k;
  bool in_smem = false;
  unsigned count = 0;        // keys in cand when in_smem
  unsigned above_top = 0;    // this block's keys whose top digit is above the selected one
  bool gathered = false;     // the gathered form runs passes 1 and 2 (below)
  // After the first digit (the same in every block): the gathered form when its keys fit rank 0's buffer.
  auto gather_at = [&](unsigned digit, unsigned above) {
    if (!p.gather || merged[digit] > unsigned(kTopkCandidates)) return false;
    prefix = digit << 21;
    remaining -= above;
    return true;
  };
  // The histogram is used only when it counts exactly the n positions (the same in every block: one row); otherwise
  // (a score kernel run without its top-k, an aborted step) the kernel makes its own pass 0.
  const bool hist_ok = !own_pass0 && block_sum(th0 + th1, warp_sums) == unsigned(n);
  if (hist_ok) {  // the first digit from the score kernel's histogram: no pass 0 of our own
    if (tid == 0) sel[0] = sel[1] = 0;  // (a histogram that does not hold k keys selects nothing: no stale index)
    __syncthreads();
    select_digit(merged, kTopkBins, remaining, warp_sums, sel);
    GLM5_TOPK_MARK(5);
    gathered = gather_at(sel[0], sel[1]);  // else the three cluster passes, their own pass 0 included
  }
  for (int pass = 0; pass < 3 && !gathered; ++pass) {  // digits: bits 31..21, 20..10, 9..0
    const int shift = pass == 0 ? 21 : pass == 1 ? 10 : 0, bits = pass == 2 ? 10 : 11, nbins = 1 << bits;
    for (int i = tid; i < kTopkBins; i += kTopkThreads) hist[i] = 0;
    __syncthreads();
    if (in_smem) {
      for (unsigned base = 0; base < count; base += kTopkThreads) {
        const unsigned i = base + tid;
        hist_add(hist, digit_of(i < count ? cand[i] : 0u, i < count, prefix, prefix_mask, shift, bits));
      }
    } else {
      for (int base = begin; base < end; base += kTopkStep) {
        uint32_t key[kTopkPerThread];
        bool valid[kTopkPerThread];
        fetch(base, key, valid);
#pragma unroll
        for (int j = 0; j < kTopkPerThread; ++j)
          hist_add(hist, digit_of(key[j], valid[j], prefix, prefix_mask, shift, bits));
      }
    }
    GLM5_TOPK_MARK(3 + 4 * pass);
    cluster.sync();  // every block's histogram is complete
    // Reduce-scatter + all-gather: block `rank` sums its 1/C slice of the bins over the C histograms
    // and stores the sums into every block's `merged` (C remote loads and C remote stores per bin of the
    // slice: 2C nbins remote accesses per pass in all, where every block reading all C histograms whole
    // was C^2 nbins, C/2 times more: ~2.5 -> 1.2 us per pass at C = 8). No block still reads `merged` of
    // the previous pass: it has passed the cluster barrier above.
    const int slice = nbins / C_;  // nbins 1024 or 2048, C_ <= 8
    for (int i = tid; i < slice; i += kTopkThreads) {
      const int bin = rank * slice + i;
      unsigned part[C_];
#pragma unroll
      for (int r = 0; r < C_; ++r) part[r] = cluster.map_shared_rank(hist, r)[bin];
      unsigned sum = 0;
#pragma unroll
      for (int r = 0; r < C_; ++r) sum += part[r];
#pragma unroll
      for (int r = 0; r < C_; ++r) cluster.map_shared_rank(merged, r)[bin] = sum;
    }
    cluster.sync();  // the remote reads are done (hist is rewritten next pass); merged is complete
    GLM5_TOPK_MARK(4 + 4 * pass);
    select_digit(merged, nbins, remaining, warp_sums, sel);
    GLM5_TOPK_MARK(5 + 4 * pass);
    const unsigned digit = sel[0], above = sel[1];
    if (pass == 0 && (gathered = gather_at(digit, above))) break;
    const unsigned in_digit = hist[digit];  // this block's keys in the selected digit
    prefix |= digit << shift;
    prefix_mask |= uint32_t(nbins - 1) << shift;
    remaining -= above;
    if (pass == 0) {
      unsigned mine = 0;
      for (int i = tid; i < nbins; i += kTopkThreads) mine += unsigned(i) > digit ? hist[i] : 0u;
      above_top = block_sum(mine, warp_sums);
    }
    if (pass == 0 && in_digit <= kTopkCandidates) {
      // Copy this block's keys of the selected top digit to shared memory (any order: only counts matter).
      if (tid == 0) cand_count = 0;
      __syncthreads();
      for (int base = begin; base < end; base += kTopkStep) {
        uint32_t key[kTopkPerThread];
        bool valid[kTopkPerThread];
        fetch(base, key, valid);
        bool take[kTopkPerThread];
#pragma unroll
        for (int j = 0; j < kTopkPerThread; ++j) take[j] = valid[j] && (key[j] & prefix_mask) == prefix;
        warp_append(take, key, &cand_count, cand, kTopkCandidates);
      }
      __syncthreads();
      in_smem = true;
      count = cand_count;  // == in_digit
    }
    __syncthreads();  // hist, sel and warp_sums are rewritten by the next pass
    GLM5_TOPK_MARK(6 + 4 * pass);
  }
  uint32_t kth = prefix;
  unsigned gt_lower = 0, eq_lower = 0;  // keys > / == kth at the positions of the lower ranks
  if (gathered) {
    // Gathered form: the keys of the selected top digit (at most kTopkCandidates of the cluster's) go to rank 0,
    // which resolves the low 21 bits alone (passes 1 and 2 with block barriers instead of two cluster barriers and
    // a distributed-shared-memory merge each) and sends every block what its compaction needs. A candidate is
    // stored as its low 21 bits with its block's rank above them (the top 11 bits are the selected digit's).
    constexpr uint32_t kLow = (1u << 21) - 1u;
    const uint32_t top = prefix >> 21;
    unsigned* dst_count = cluster.map_shared_rank(&gather_count, 0);
    uint32_t* dst_cand = cluster.map_shared_rank(cand, 0);
    unsigned mine_above = 0;
    for (int base = begin; base < end; base += kTopkStep) {
      uint32_t key[kTopkPerThread];
      bool valid[kTopkPerThread];
      fetch(base, key, valid);
      bool take[kTopkPerThread];
      uint32_t word[kTopkPerThread];
#pragma unroll
      for (int j = 0; j < kTopkPerThread; ++j) {
        take[j] = valid[j] && key[j] >> 21 == top;
        word[j] = (key[j] & kLow) | uint32_t(rank) << 21;
        mine_above += valid[j] && key[j] >> 21 > top;
      }
      warp_append(take, word, dst_count, dst_cand, kTopkCandidates);  // one remote add per warp and step
    }
    mine_above = __reduce_add_sync(0xffffffffu, mine_above);
    if (lane == 0 && mine_above) atomicAdd(cluster.map_shared_rank(&rank_above[rank], 0), mine_above);
    GLM5_TOPK_MARK(19);
    cluster.sync();  // rank 0 holds every candidate and every block's count above the top digit
    GLM5_TOPK_MARK(20);
    clear_top_hist(0, C);  // every block read it before the barrier above; each zeroes 1/C of it
    if (rank == 0) {
      const unsigned count = min(gather_count, unsigned(kTopkCandidates));  // == merged[top digit]
      // Pass 1 (bits 20..10) over every candidate.
      for (int i = tid; i < kTopkBins; i += kTopkThreads) hist[i] = 0;
      if (tid == 0) few_count = 0;
      __syncthreads();
      for (unsigned base = 0; base < count; base += kTopkThreads) {  // bound uniform: whole warps call hist_add
        const unsigned i = base + tid;
        hist_add(hist, digit_of(i < count ? cand[i] & kLow : 0u, i < count, 0u, 0u, 10, 11));
      }
      __syncthreads();
      select_digit(hist, kTopkBins, remaining, warp_sums, sel);
      uint32_t low = sel[0] << 10;
      constexpr uint32_t kLowTop = kLow & ~1023u;  // the pass-1 bits of a candidate's low bits
      remaining -= sel[1];
      // Pass 2 (bits 9..0): the candidates of the selected pass-1 digit are usually a handful (a quarter octave of
      // scores over 2,048 digits); up to 32 of them, one warp ranks them against each other (no histogram, no
      // select); more, and the histogram pass runs.
      if (hist[sel[0]] <= 32u) {
        for (unsigned base = 0; base < count; base += kTopkThreads) {  // bound uniform: whole warps append
          const unsigned i = base + tid;
          const uint32_t w[1] = {i < count ? cand[i] & kLow : 0u};
          const bool in[1] = {i < count && (w[0] & kLowTop) == low};
          warp_append(in, w, &few_count, few, 32u);
        }
        __syncthreads();
        if (tid < 32) {  // warp 0: the remaining-th largest of the few (ties: the first lane of the tied run wins)
          const unsigned nf = few_count;
          const uint32_t v = tid < nf ? few[tid] : 0u;
          unsigned gt = 0, eq = 0;
          for (unsigned j = 0; j < nf; ++j) {
            const uint32_t u = __shfl_sync(0xffffffffu, v, int(j));
            gt += u > v;
            eq += u == v;
          }
          const bool holds = tid < nf && gt < remaining && gt + eq >= remaining;
          const unsigned who = __ballot_sync(0xffffffffu, holds);
          const int src = __ffs(who) - 1;  // at least one lane holds it (the digit has >= remaining keys)
          low = __shfl_sync(0xffffffffu, v, src);
          const unsigned above = __shfl_sync(0xffffffffu, gt, src);
          if (tid == 0) {
            sel[0] = low;
            sel[1] = above;
          }
        }
        __syncthreads();
        low = sel[0];
        remaining -= sel[1];
      } else {
        __syncthreads();  // every thread has read hist[sel[0]] and sel
        for (int i = tid; i < 1024; i += kTopkThreads) hist[i] = 0;
        __syncthreads();
        for (unsigned base = 0; base < count; base += kTopkThreads) {
          const unsigned i = base + tid;
          hist_add(hist, digit_of(i < count ? cand[i] & kLow : 0u, i < count, low, kLowTop, 0, 10));
        }
        __syncthreads();
        select_digit(hist, 1024, remaining, warp_sums, sel);
        low |= sel[0];
        remaining -= sel[1];
      }
      // Each rank's candidates > and == the k-th key, one pass (shared atomics on 2 C counters).
      if (tid < 2 * C_) rank_cand[tid] = 0;
      __syncthreads();
      for (unsigned i = tid; i < count; i += kTopkThreads) {
        const uint32_t w = cand[i], l = w & kLow;
        if (l > low) atomicAdd(&rank_cand[w >> 21], 1u);
        else if (l == low) atomicAdd(&rank_cand[C_ + (w >> 21)], 1u);
      }
      __syncthreads();
      if (tid < C) {  // thread r sends block r its verdict
        unsigned gl = 0, el = 0;
        for (int r = 0; r < tid; ++r) {
          gl += rank_above[r] + rank_cand[r];
          el += rank_cand[C_ + r];
        }
        uint32_t* v = cluster.map_shared_rank(verdict, tid);
        v[0] = top << 21 | low;
        v[1] = remaining;
        v[2] = gl;
        v[3] = el;
      }
    }
    GLM5_TOPK_MARK(21);
    cluster.sync();  // every block holds its verdict; no block touches another's shared memory after this
    GLM5_TOPK_MARK(22);
    kth = verdict[0];
    remaining = verdict[1];
    gt_lower = verdict[2];
    eq_lower = verdict[3];
  } else {
    // This block's keys > kth and == kth, for the higher ranks (the last rank's are not needed).
    if (rank + 1 < C) {
      unsigned gt = 0, eq = 0;
      if (in_smem) {
        for (unsigned i = tid; i < count; i += kTopkThreads) {
          gt += cand[i] > kth;
          eq += cand[i] == kth;
        }
      } else {
        for (int base = begin; base < end; base += kTopkStep) {
          uint32_t key[kTopkPerThread];
          bool valid[kTopkPerThread];
          fetch(base, key, valid);
#pragma unroll
          for (int j = 0; j < kTopkPerThread; ++j) {
            gt += valid[j] && key[j] > kth;
            eq += valid[j] && key[j] == kth;
          }
        }
      }
      gt = block_sum(gt, warp_sums);
      eq = block_sum(eq, warp_sums);
      if (tid == 0) {
        rank_counts[0] = in_smem ? gt + above_top : gt;
        rank_counts[1] = eq;
      }
    }
    GLM5_TOPK_MARK(15);
    cluster.sync();  // rank_counts of every block are written
    GLM5_TOPK_MARK(16);
    for (int r = 0; r < rank; ++r) {
      const unsigned* rc = cluster.map_shared_rank(rank_counts, r);
      gt_lower += rc[0];
      eq_lower += rc[1];
    }
  }
  // Compaction in position order: keys > kth, and the first `remaining` keys == kth overall.
  unsigned written = gt_lower + min(eq_lower, remaining), eq_seen = eq_lower;
  for (int base = begin; base < end && written < unsigned(p.k); base += kTopkStep) {
    uint32_t key[kTopkPerThread];
    bool valid[kTopkPerThread];
    fetch(base, key, valid);
    // This thread's 8 positions share one page (first is a multiple of 8): one block-table load,
    // in flight during the prefix sum, instead of a dependent load per written slot.
    const int first = base + kTopkPerThread * tid;
    const int32_t page_id = base == begin ? first_page
                            : first < end   ? p.block_table[int64_t(b) * p.max_pages + first / kPageSize]
                                            : -1;
    // Equal keys are taken in position order while eq_seen + (their rank) < remaining.
    const unsigned eq_left = remaining > eq_seen ? remaining - eq_seen : 0u;
    const unsigned totals =
        write_winners<kTopkThreads>(key, valid, kth, written, eq_left, first, page_id, out, p.k, warp_sums);
    const unsigned gt_total = totals & 0xffffu, eq_total = totals >> 16;
    written += gt_total + min(eq_total, eq_left);
    eq_seen += eq_total;
  }
  GLM5_TOPK_MARK(17);
  if (!gathered) {
    cluster.sync();  // no block leaves while another may still read its shared memory
    clear_top_hist(0, 1);  // every block read it before the barrier above
  }
  GLM5_TOPK_MARK(18);
}

// ---- The flat form (TopkParams::flat_workspace): no cluster, a grid of small blocks per request ----
//
// Why: at batch 1 / 32K the cluster kernel's 1024-thread, 208-KiB blocks fill whole SMs, so its 8-SM cluster is
// placed only when the score kernel's blocks in one GPC have retired, and its passes after the first are
// cluster barriers and merges (session 22: the top-k ended ~13 us after the score kernel, ~10 us of it the
// kernel). Here each request is ceil(positions / 4096) blocks of 512 threads (54 registers with nvcc 13: two
// per SM; 9 KiB of shared memory), which fit beside the score kernel's blocks and wait in pdl_wait() for it; the
// score kernel's first-digit histogram (TopkParams::top_hist, required, 16-byte aligned: read as uint4) gives every
// block the top digit D0 at once. topk_cuda launches at most kFlatMaxBlocks blocks per request (the header and the
// shared per-block arrays are sized for them).
//
// Per request:
//   1. Every block: its 4096 positions' order keys (registers, one load each), the summed histogram, D0 and the
//      keys above it; it counts its keys above D0 and appends those in D0 (the candidates) to the workspace in
//      position order, then takes a ticket (threadfence-reduction pattern: bar.sync, one thread's fence and
//      atomicAdd, as cooperative groups' grid sync does).
//   2. The last block to arrive resolves the k-th key among the candidates alone (radix passes over bits 20..10
//      and 9..0, shared-memory histograms), counts each block's candidates above and equal to it, and writes per
//      block the output offset and how many equal keys it takes (the lowest positions first); then it resets the
//      ticket and bumps the request's generation word (st.release).
//   3. The other blocks wait for the generation to change (ld.acquire, nanosleep), and every block writes its
//      winners in position order at its offset (a block prefix sum), then zeroes its share of top_hist.
// The waiting blocks hold their SMs, so every block of the grid must be resident at once: topk_cuda launches this
// form only when B x blocks is within half of what the GPU holds (topk_flat_fits, the kernel's occupancy). The grid
// that depends on it (PDL) is not scheduled before all its blocks have started (each calls launch_dependents
// first), so it cannot take their places. A histogram that does not count the n positions (an aborted step) makes
// every key a candidate: step 2 then runs all three radix passes.
// The same slots as the cluster kernel and the CPU twin (keys above the k-th, then the lowest-position equal ones,
// in position order).
constexpr int kFlatThreads = 512;
constexpr int kFlatWarps = kFlatThreads / 32;
constexpr int kFlatChunk = kTopkFlatChunk;  // positions per block
constexpr int kFlatMaxBlocks = kTopkFlatMaxBlocks;
constexpr int kFlatHeaderWords = kTopkFlatHeaderWords;
static_assert(kFlatChunk == kFlatThreads * kTopkPerThread, "8 positions per thread");
// Header words: ticket, generation, k-th key, then per block: keys above D0, candidates, output offset, equal taken.
enum : int { kFlatTicket = 0, kFlatGen = 1, kFlatKth = 2, kFlatGt = 4, kFlatEq = kFlatGt + kFlatMaxBlocks,
             kFlatOff = kFlatEq + kFlatMaxBlocks, kFlatTake = kFlatOff + kFlatMaxBlocks };
static_assert(kFlatTake + kFlatMaxBlocks <= kFlatHeaderWords, "header fits");
static_assert(kTopkBins == 4 * kFlatThreads, "four histogram bins per thread");

// Workspace: the B requests' headers first (request b's at word b * kFlatHeaderWords, wherever the positions per
// request change between launches), then per request blocks x kFlatChunk (key, position) candidate slots.
__host__ __device__ constexpr int64_t flat_candidate_words(int blocks) { return int64_t(blocks) * kFlatChunk * 2; }

// Step 2's walk over the candidates (cand[j * kFlatChunk ..][0 .. eq[j]) of the G blocks), warp-uniform so f may
// use warp collectives: f(j, ok, key) for every lane of every warp step, ok false (key 0) on the lanes past block j's
// count. The keys are read through L2 (other blocks wrote them).
template <typename F>
__device__ __forceinline__ void for_each_candidate(const uint2* cand, const unsigned* eq, int G, F&& f) {
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (int j = 0; j < G; ++j) {
    const unsigned cnt = eq[j];
    for (unsigned base = warp * 32; base < cnt; base += kFlatThreads) {
      const unsigned i = base + lane;
      const bool ok = i < cnt;
      f(j, ok, ok ? __ldcg(&cand[int64_t(j) * kFlatChunk + i].x) : 0u);
    }
  }
}

// Step 2 (one block): the k-th largest order key among the candidates (cand[j * kFlatChunk ..][0 .. eq[j]) of the
// G blocks), of which `need` lie at or below it, the candidates sharing the top `fixed_bits` bits `prefix`.
// Returns the key; *need_eq becomes how many keys equal to it are taken. hist: [kTopkBins] shared scratch.
__device__ uint32_t flat_resolve(const uint2* cand, const unsigned* eq, int G, uint32_t prefix, int fixed_bits,
                                 unsigned need, unsigned* hist, unsigned* warp_sums, unsigned* sel, unsigned* need_eq) {
  const int tid = threadIdx.x;
  for (int shift = 32 - fixed_bits; shift > 0;) {
    const int bits = shift == 10 ? 10 : 11;
    shift -= bits;
    for (int i = tid; i < kTopkBins; i += kFlatThreads) hist[i] = 0;
    if (tid == 0) sel[0] = sel[1] = 0;
    __syncthreads();
    const int above_bits = shift + bits;  // the digit's upper neighbours must equal prefix (none when 32)
    for_each_candidate(cand, eq, G, [&](int, bool ok, uint32_t key) {
      const bool match = ok && (above_bits == 32 || (key >> above_bits) == prefix);
      hist_add(hist, match ? (key >> shift) & ((1u << bits) - 1u) : kNoDigit);
    });
    __syncthreads();
    select_digit<kFlatThreads>(hist, 1 << bits, need, warp_sums, sel);
    prefix = (above_bits == 32 ? 0u : prefix << bits) | sel[0];
    need -= sel[1];
    __syncthreads();  // every thread has read sel (and hist) before the next pass rewrites them
  }
  *need_eq = need;
  return prefix;
}

__global__ void __launch_bounds__(kFlatThreads) topk_flat_kernel(TopkParams p, int limit) {
  pdl_begin();
  __shared__ __align__(16) unsigned hist[kTopkBins];  // (written as uint4)
  __shared__ unsigned warp_sums[kFlatWarps];
  __shared__ unsigned sel[2];
  // [1] the k-th key, [2] this block's output offset, [3] first "this block is the last", then its equal keys taken.
  __shared__ unsigned verdict[4];
  __shared__ unsigned blk_gt[kFlatMaxBlocks], blk_eq[kFlatMaxBlocks], blk_cg[kFlatMaxBlocks], blk_ce[kFlatMaxBlocks];
  const int b = blockIdx.y, j = blockIdx.x, G = gridDim.x, tid = threadIdx.x, lane = tid % 32;
  const int n = min(max(p.seq_lens[b], 0), limit);
  const float* s = p.scores + int64_t(b) * p.score_stride;
  int32_t* out = p.out_slots + int64_t(b) * p.k;
  unsigned* top_hist = p.top_hist + int64_t(b) * kTopkHistCopies * kTopkHistBins;
  uint32_t* ws = static_cast<uint32_t*>(p.flat_workspace) + int64_t(b) * kFlatHeaderWords;
  uint2* cand = reinterpret_cast<uint2*>(static_cast<uint32_t*>(p.flat_workspace) + int64_t(p.B) * kFlatHeaderWords +
                                         int64_t(b) * flat_candidate_words(G));
  auto clear_top_hist = [&] {  // this block's share; every block of the request has read it by now
    for (int i = j * kFlatThreads + tid; i < kTopkHistCopies * kTopkHistBins; i += G * kFlatThreads) top_hist[i] = 0;
  };
  if (n <= p.k) {  // the same in every block of the request: all positions, padded with -1
    for (int i = j * kFlatThreads + tid; i < p.k; i += G * kFlatThreads) out[i] = i < n ? slot_of(p, b, i) : -1;
    clear_top_hist();  // no block reads it
    return;
  }
  // The generation before this launch's verdict, in thread 0 (acquire: read before its ticket below).
  unsigned gen0 = 0;
  if (tid == 0) gen0 = ld_acquire_gpu(ws + kFlatGen);
  const int begin = j * kFlatChunk, first = begin + kTopkPerThread * tid;
  uint32_t key[kTopkPerThread];
  bool valid[kTopkPerThread];
  load_keys(s, n, begin, (reinterpret_cast<uintptr_t>(s) & 15u) == 0, key, valid);
  const int32_t page_id = first < n ? p.block_table[int64_t(b) * p.max_pages + first / kPageSize] : -1;
  uint4 h = make_uint4(0, 0, 0, 0);
#pragma unroll
  for (int c = 0; c < kTopkHistCopies; ++c) {
    const uint4 v = __ldcg(reinterpret_cast<const uint4*>(top_hist + c * kTopkHistBins) + tid);
    h.x += v.x, h.y += v.y, h.z += v.z, h.w += v.w;
  }
  reinterpret_cast<uint4*>(hist)[tid] = h;
  const bool hist_ok = block_sum<kFlatThreads>(h.x + h.y + h.z + h.w, warp_sums) == unsigned(n);
  // The top digit D0 and the keys above it (the same in every block); without a usable histogram every key is a
  // candidate.
  uint32_t d0 = 0;
  unsigned above = 0;
  if (hist_ok) {
    if (tid == 0) sel[0] = sel[1] = 0;
    __syncthreads();
    select_digit<kFlatThreads>(hist, kTopkBins, unsigned(p.k), warp_sums, sel);
    d0 = sel[0], above = sel[1];
  }
  unsigned gt = 0, eq = 0;
#pragma unroll
  for (int q = 0; q < kTopkPerThread; ++q) {
    const uint32_t d = key[q] >> 21;
    gt += valid[q] && hist_ok && d > d0;
    eq += valid[q] && (!hist_ok || d == d0);
  }
  unsigned totals = 0;  // packed: above D0 in the low 16 bits, candidates in the high (each <= 4096)
  const unsigned before = block_exclusive_sum<kFlatThreads>(gt | (eq << 16), warp_sums, &totals);
  unsigned at = before >> 16;
#pragma unroll
  for (int q = 0; q < kTopkPerThread; ++q)
    if (valid[q] && (!hist_ok || key[q] >> 21 == d0))
      cand[int64_t(j) * kFlatChunk + at++] = make_uint2(key[q], unsigned(first + q));
  if (tid == 0) {
    ws[kFlatGt + j] = totals & 0xffffu;
    ws[kFlatEq + j] = totals >> 16;
  }
  __syncthreads();  // the block's candidates and counts are written
  if (tid == 0) {
    __threadfence();
    verdict[3] = atomicAdd(ws + kFlatTicket, 1u) == unsigned(G - 1);
  }
  __syncthreads();
  const bool last = verdict[3] != 0;
  __syncthreads();  // every thread read `last` before verdict[] is reused
  if (last) {
    if (tid == 0) __threadfence();  // (acquire side of the other blocks' fence + ticket)
    __syncthreads();
    for (int i = tid; i < G; i += kFlatThreads) {
      blk_gt[i] = __ldcg(ws + kFlatGt + i);
      blk_eq[i] = __ldcg(ws + kFlatEq + i);
      blk_cg[i] = blk_ce[i] = 0;
    }
    __syncthreads();
    unsigned need_eq = 0;
    const uint32_t kth = flat_resolve(cand, blk_eq, G, hist_ok ? d0 : 0u, hist_ok ? 11 : 0,
                                      hist_ok ? unsigned(p.k) - above : unsigned(p.k), hist, warp_sums, sel, &need_eq);
    // Each block's candidates above and equal to the k-th key (one shared atomic per warp and block).
    for_each_candidate(cand, blk_eq, G, [&](int jj, bool ok, uint32_t k2) {
      const unsigned g = __popc(__ballot_sync(0xffffffffu, ok && k2 > kth));
      const unsigned e = __popc(__ballot_sync(0xffffffffu, ok && k2 == kth));
      if (lane == 0) {
        if (g) atomicAdd(&blk_cg[jj], g);
        if (e) atomicAdd(&blk_ce[jj], e);
      }
    });
    __syncthreads();
    if (tid == 0) {  // offsets and equal keys taken, in block (= position) order
      unsigned off = 0, eq_before = 0;
      for (int jj = 0; jj < G; ++jj) {
        const unsigned take = min(blk_ce[jj], need_eq > eq_before ? need_eq - eq_before : 0u);
        eq_before += blk_ce[jj];
        ws[kFlatOff + jj] = off;
        ws[kFlatTake + jj] = take;
        if (jj == j) verdict[2] = off, verdict[3] = take;
        off += blk_gt[jj] + blk_cg[jj] + take;
      }
      verdict[1] = kth;
      ws[kFlatTicket] = 0;  // for the next launch (it starts after this grid completes)
      ws[kFlatKth] = kth;
      __threadfence();
      st_release_gpu(ws + kFlatGen, gen0 + 1u);
    }
  } else if (tid == 0) {
    while (ld_acquire_gpu(ws + kFlatGen) == gen0) __nanosleep(32);
    verdict[1] = __ldcg(ws + kFlatKth);
    verdict[2] = __ldcg(ws + kFlatOff + j);
    verdict[3] = __ldcg(ws + kFlatTake + j);
  }
  __syncthreads();
  // Step 3: this block's winners in position order: keys above the k-th, and its first `take` equal ones.
  write_winners<kFlatThreads>(key, valid, verdict[1], verdict[2], verdict[3], first, page_id, out, p.k, warp_sums);
  clear_top_hist();
}

}  // namespace

void indexer_score_cuda(const IndexerScoreParams& p, cudaStream_t stream) {
  validate_indexer_score_params(p);
  if (p.B == 0) return;
  const int D = p.layout.dim;
  if (p.layout.fp8 && p.Hi == kF16Heads && (D == 32 || D == 64 || D == 128) &&
      ((reinterpret_cast<uintptr_t>(p.key_cache) | reinterpret_cast<uintptr_t>(p.q)) & 15u) == 0) {
    // FP16 tensor-core path. Blocks: about one wave of resident blocks (each warp then walks
    // several 32-position steps); at least one step per warp.
    auto kernel = D == 128 ? indexer_score_f16_kernel<128> : D == 64 ? indexer_score_f16_kernel<64>
                                                                      : indexer_score_f16_kernel<32>;
    const int sms = current_device_sm_count();
    int per_sm = 0;
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kF16Threads, 0));
    // Blocks per request: the resident slots over B (>= 1), so B x gx stays within one wave; steps
    // per block a multiple of the 4 warps. B 1 / 32K: 256 blocks of 4 steps; B 32 / 128K: 12 x 32.
    const int64_t tiles = int64_t(p.max_pages) * 2, slots = int64_t(sms) * std::max(per_sm, 1);
    const int64_t per_req = std::max<int64_t>(1, slots / p.B);
    int64_t tpb = (tiles + per_req - 1) / per_req;
    tpb = (tpb + kF16Warps - 1) / kF16Warps * kF16Warps;
    const int gx = int((tiles + tpb - 1) / tpb);
    launch_kernel(kernel, dim3(gx, p.B), kF16Threads, 0, stream, p, int(tpb));
    CUDA_CHECK_LAUNCH();
    return;
  }
  if (p.Hi == kMmaHeads && D % 16 == 0 && D >= 32 && D <= kMmaMaxD &&
      ((reinterpret_cast<uintptr_t>(p.key_cache) | reinterpret_cast<uintptr_t>(p.q)) & 15u) == 0) {
    // Tensor-core path. Pages per block: about 4 blocks per SM-slot of work (3 resident per SM), so
    // a block's q setup (16 KiB) is amortized over many pages at large B x context.
    const size_t smem = score_mma_smem_bytes(D);
    CUDA_CHECK(cudaFuncSetAttribute(indexer_score_mma_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    CUDA_CHECK(cudaFuncSetAttribute(indexer_score_mma_kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                    int(cudaSharedmemCarveoutMaxShared)));  // 3 blocks per SM, not 1
    const int sms = current_device_sm_count();
    int per_sm = 0;
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, indexer_score_mma_kernel, kMmaThreads, smem));
    const int64_t blocks_wanted = int64_t(sms) * std::max(per_sm, 1) * 4;
    const int64_t total_pages = int64_t(p.B) * p.max_pages;
    const int ppb = int(std::max<int64_t>(1, (total_pages + blocks_wanted - 1) / blocks_wanted));
    const int gx = (p.max_pages + ppb - 1) / ppb;
    launch_kernel(indexer_score_mma_kernel, dim3(gx, p.B), kMmaThreads, smem, stream, p, ppb);
    CUDA_CHECK_LAUNCH();
    return;
  }
  const size_t smem = score_smem_bytes(p.Hi, D);
  require(smem <= 227 * 1024, "indexer_score_cuda: Hi = " + std::to_string(p.Hi) + ", D = " +
                                  std::to_string(D) + " need " + std::to_string(smem) +
                                  " bytes of shared memory, more than the 227 KiB a block can have");
  CUDA_CHECK(cudaFuncSetAttribute(indexer_score_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  launch_kernel(indexer_score_kernel, dim3(p.max_pages, p.B), kScoreThreads, smem, stream, p);
  CUDA_CHECK_LAUNCH();
}

namespace {
using TopkKernel = void (*)(TopkParams, int);
TopkKernel topk_kernel_for(int C) {  // the cluster-size instantiations topk_cuda picks from
  switch (C) {
    case 8: return topk_kernel<8>;
    case 4: return topk_kernel<4>;
    case 2: return topk_kernel<2>;
    default: return topk_kernel<1>;
  }
}
}  // namespace

bool topk_score_hist_pays_here(int B, int limit) { return topk_score_hist_pays(B, limit, current_device_sm_count()); }

namespace {
int64_t flat_resident_blocks() {
  int per_sm = 0;
  CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, topk_flat_kernel, kFlatThreads, 0));
  return int64_t(current_device_sm_count()) * per_sm;
}
}  // namespace

bool topk_flat_fits_here(int B, int limit) { return topk_flat_fits(B, limit, flat_resident_blocks()); }

void topk_cuda(const TopkParams& p, cudaStream_t stream) {
  validate_topk_params(p);
  if (p.B == 0) return;
  const int limit = int(std::min<int64_t>(p.score_stride, int64_t(p.max_pages) * kPageSize));
  const size_t smem = topk_smem_bytes();
  // Cluster size: the largest power of two <= 8 that keeps B * C blocks within about half the SMs
  // (a 1024-thread, 208 KiB block fills an SM) and >= 4096 positions per block, and that the GPU
  // can co-schedule (cudaOccupancyMaxActiveClusters); B <= 16 at 32K and 128K: 8, B = 32: 4, B >= 67: 1
  // (topk_cluster_blocks).
  // (A one-block-per-request top-k, tried: 52 us at B 1 / 32K, 123 us streamed at 128K; a block's
  // time grows ~1.2-1.6 ns per key it holds, so the keys are spread over up to 8 SMs instead.
  // A non-portable cluster of 16, tried in session 18 (S18a): slower everywhere, 23.3 vs 17.4 us chained at
  // B 1 / 32K and 23.9 vs 22.6 at 128K: its 16 SMs start later and its merges cost more than the halved keys.
  // 4 positions per thread instead of 8 when a block holds <= 4096 (S18b): -1.6 to -2.0 us at B 1 / 32K exactly,
  // but a decode step's request holds 32K + 1 or more positions, so it never applied there; not kept.)
  // The flat form (TopkParams::flat_workspace) where every block fits at once (TopkParams::cluster does not apply).
  if (p.flat_workspace && p.top_hist && (reinterpret_cast<uintptr_t>(p.top_hist) & 15u) == 0 &&
      (reinterpret_cast<uintptr_t>(p.flat_workspace) & 7u) == 0) {
    if (topk_flat_fits_here(p.B, limit)) {
      launch_kernel(topk_flat_kernel, dim3(topk_flat_blocks(limit), p.B), kFlatThreads, 0, stream, p, limit);
      CUDA_CHECK_LAUNCH();
      return;
    }
  }
  static_assert(kMaxCluster == 8 && kMinClusterChunk == 4096, "topk_cluster_blocks' rule");
  int C = topk_cluster_blocks(p.B, limit, current_device_sm_count());
  if (p.cluster > 0) C = p.cluster;  // tuning override (still halved below if it cannot be co-scheduled)
  for (;; C /= 2) {
    CUDA_CHECK(cudaFuncSetAttribute(topk_kernel_for(C), cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    if (C == 1) break;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(unsigned(p.B * C));
    cfg.blockDim = dim3(kTopkThreads);
    cfg.dynamicSmemBytes = smem;
    int clusters = 0;
    if (cudaOccupancyMaxActiveClusters(&clusters, topk_kernel_for(C), &cfg) == cudaSuccess && clusters >= 1) break;
    (void)cudaGetLastError();  // a refused size is not an error: try the next smaller one
  }
  launch_kernel(topk_kernel_for(C), p.B * C, kTopkThreads, smem, stream, p, limit);
  CUDA_CHECK_LAUNCH();
}

}  // namespace glm5
