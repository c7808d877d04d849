// Warp-specialized wgmma sparse MLA decode (sm_90a), the successor of the mma.sync kernel
// (mla_decode_tc.cuh) for batches that fill the GPU. Why: on the H200 the mma.sync kernel reaches
// 145-149 TFLOP/s at batch 64 / 128 (19% of the measured BF16 peak), FlashMLA's warp-specialized wgmma
// kernel 397 TFLOP/s on the same rows (reports/2026-11-29-h200-kv-kernels.md, S5b); our BF16-row variant
// is only 4% faster than FP8 rows, so the matrix-product structure, not the dequantization, is the gap.
// The design follows the one FlashMLA's source describes (written here from our notes, no code taken):
//
// CTA = 4 warpgroups (512 threads, one CTA per SM: 226.3 of the 227 KB of shared memory), 64 query heads of one
// request, one chunk of its top-k rows, tiles of 64 rows:
//   WG2 + WG3 (producers): gather the tile's 64 rows -- FP8 rows: codes by one cp.async.bulk per row, issued by WG1
//       (issue_fp8_codes), into the K buffer they will fill, scales and rope by 16-byte loads (produce_fp8_bulk);
//       BF16 rows with 16-byte ld.global.nc into registers (produce_bf16) -- the next tile's while the consumers
//       compute; dequantize FP8 codes exactly as kv_cast does
//       (round_bf16(e4m3 * scale)) or copy BF16 rows, and write the 64 x 576 bf16 K tile in the
//       128-byte-swizzled K-major wgmma layout (kernels/wgmma.cuh) of one of two buffers; invalid rows
//       (index -1 or past the chunk) are zeros with a -inf score bias. Signals `full[buf]`.
//   WG0: S = Q . K^T (64 heads x 64 rows over 576 dims: 36 wgmma m64n64k16, Q and K from shared
//       memory), the online softmax in fp32 (base-2, prescaled), P rounded to bf16 into shared memory
//       with the per-row rescale factors, then O[:, 0:256] += P . V (16 wgmma m64n64k16; V = the first
//       512 dims of the same K tile read as an MN-major B operand: no second copy).
//   WG1: rescales O[:, 256:512] by WG0's factors and adds P . V for those dims; its P . V of tile i
//       overlaps WG0's Q . K^T of tile i + 1. FP8 rows: then issues tile i + 2's copies into that buffer
//       (issue_fp8_codes; WG1 waited ~4.5k of each ~6.3k-cycle tile for P in s7h).
// Handshakes: mbarriers full[2] (256 producer arrivals) / empty[2] (256 consumer arrivals) for the K
// buffers, and for FP8 rows rawfull[2] (the code copies' bytes, 4 WG1 warp arrivals) and full_lo[2] (panels 0..3 stored: WG0 starts Q . K^T on them while the producers store the rest); named barriers S_ready (WG0 -> WG1: P and factors
// written) and S_free (WG1 -> WG0: done reading P). Registers: setmaxnreg 192 / 160 / 80 / 80 (sum 512 = 4 x 128, the launch allocation).
// Split-K at S = 2: the two CTAs of a (head block, request) run as one thread-block cluster and merge their partials
// through distributed shared memory (cluster_merge); larger S write partials for mla_decode_cuda's combine kernel.
// Shared memory: Q 72 KB + 2 K tiles 144 KB + P 8 KB + stats 1.3 KB.
// The fp16-operand form (kF16, MlaDecodeKernel::WgmmaF16; FP8 rows only): everything above with fp16 where it says
// bf16 -- Q, the K tile (codes dequantized as f16(e4m3 * f16(scale)) by dequant16_f16, the rope converted from bf16)
// and P -- and the .f16.f16 wgmma form (S28b on an H100: 2-5% faster at batch 64-128).
#include "kernels/sm90a/mla_decode_wgmma.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "common/error.h"
#include "kernels/kv_cast.cuh"
#include "kernels/cluster.cuh"
#include "kernels/launch.cuh"
#include "kernels/mbarrier.cuh"
#include "kernels/mla_decode_tc.cuh"
#include "kernels/wgmma.cuh"

namespace glm5 {
namespace mla_wg {

constexpr int kThreads = 512;
constexpr int kHeads = 64;  // query heads per CTA: wgmma M
constexpr int kTile = kMlaWgmmaTile;
constexpr int kL = 512, kR = 64, kW = kL + kR;
constexpr int kPanelBytes = 64 * 128;              // 64 rows x 64 bf16 columns, 128-byte swizzled
constexpr int kOpBytes = (kW / 64) * kPanelBytes;  // 73728: Q, or one K tile (9 panels)
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;
constexpr float kNegBig = -1e30f;  // running-max start: finite, so a fully masked tile gives exp2 = 0
enum : int { kBarSReady = 1, kBarSFree = 2, kBarEpilogue = 3, kBarQ = 4, kBarPWritten = 5, kBarRawRead = 6, kBarXSend = 7 };

// Phase timing for tools/probe/mla_wgmma_probe.cu only (GLM5_MLA_WGMMA_PROBE): thread 0 of each warpgroup adds
// the clock64() cycles of each phase to g_probe[slot]; the library build compiles none of it.
#ifdef GLM5_MLA_WGMMA_PROBE
__device__ unsigned long long g_probe[32];
#define PROBE_T0 long long probe_t = clock64()
#define PROBE(slot)                                                        \
  do {                                                                     \
    const long long now = clock64();                                       \
    if ((threadIdx.x & 127) == 0) atomicAdd(&g_probe[slot], now - probe_t); \
    probe_t = now;                                                         \
  } while (0)
#else
#define PROBE_T0
#define PROBE(slot)
#endif

// Byte offsets from the 1024-byte-aligned base of dynamic shared memory.
struct Smem {
  static constexpr int q = 0;
  static constexpr int kv = q + kOpBytes;           // 2 K tiles
  static constexpr int p = kv + 2 * kOpBytes;       // P [64 heads x 64 rows] bf16, swizzled: one panel
  static constexpr int alpha = p + kPanelBytes;     // [64] fp32 per-row rescale of O for this tile
  static constexpr int bias = alpha + 64 * 4;       // [2][64] fp32 score bias: 0 or -inf (invalid row)
  static constexpr int ml = bias + 2 * 64 * 4;      // m [64] (log2 units), l [64]: the epilogue's stats
  static constexpr int bars = ml + 2 * 64 * 4;      // full[2], empty[2], rawfull[2], full_lo[2] (FP8 bulk feed),
                                                    // xfull_lo[2], xfull[2], xsent[2] (crossover: the partner's
                                                    // rows; this CTA's rows received by the partner)
  static constexpr int end = bars + 14 * 8;
  static constexpr int total = end + 1024;          // + slack to align the base to 1024 bytes
};
static_assert(Smem::total <= 227 * 1024, "one CTA per SM must fit the 227 KB opt-in limit");

// Two floats rounded to nearest as one bf16x2 word, or (kF16) one fp16x2 word; x in the low half.
template <bool kF16>
__device__ __forceinline__ uint32_t pack2(float x, float y) {
  if constexpr (kF16) {
    const __half2 h = __floats2half2_rn(x, y);
    return *reinterpret_cast<const uint32_t*>(&h);
  } else {
    const __nv_bfloat162 h = __float22bfloat162_rn(make_float2(x, y));
    return *reinterpret_cast<const uint32_t*>(&h);
  }
}

// Q of query heads [h0, h0 + 64) of request b (zeros past HQ), rounded to bf16, into the swizzled
// K-major operand by the 256 consumer threads: 16-byte chunks of 8 dims, six chunks' loads in flight per thread
// (the 18 chunks per thread in 3 rounds). Two in flight (9 dependent L2 round trips) made this prologue 11-15k
// cycles per CTA (session 9's probe); six: B 128 / 64 heads 124.0 -> 119.2 us, B 64 / 64 heads 72.7 -> 68.9
// (S13h, same call; nine: 120.4 / 69.8, ptxas spills 28 B vs 8 B).
// kF16: rounded to fp16 instead (MlaDecodeKernel::WgmmaF16).
template <bool kF16>
__device__ __forceinline__ void load_q(const MlaDecodeParams& p, int b, int h0, int HQ, uint8_t* q_s, int tid) {
  constexpr int kRowChunks = kW / 8, kChunks = kHeads * kRowChunks, kStagers = 256, kUnroll = 6;
  for (int c0 = tid; c0 < kChunks; c0 += kUnroll * kStagers) {  // 4608 chunks = 3 x 6 x 256
    float v[kUnroll][8];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int c = c0 + u * kStagers, r = c / kRowChunks, d = (c % kRowChunks) * 8, h = h0 + r;
#pragma unroll
      for (int k = 0; k < 8; ++k) v[u][k] = 0.f;
      if (c < kChunks && h < HQ) {
        if (d < kL) {
          const float4* src = reinterpret_cast<const float4*>(p.q_latent + (int64_t(b) * HQ + h) * kL + d);
          const float4 x = __ldg(src), y = __ldg(src + 1);
          v[u][0] = x.x, v[u][1] = x.y, v[u][2] = x.z, v[u][3] = x.w;
          v[u][4] = y.x, v[u][5] = y.y, v[u][6] = y.z, v[u][7] = y.w;
        } else {
          const float* src = mla_tc::q_rope_row(p, b, h) + (d - kL);  // rope rows: any alignment
#pragma unroll
          for (int k = 0; k < 8; ++k) v[u][k] = __ldg(src + k);
        }
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int c = c0 + u * kStagers;
      if (c >= kChunks) continue;
      uint32_t w[4];
#pragma unroll
      for (int k = 0; k < 4; ++k) w[k] = pack2<kF16>(v[u][2 * k], v[u][2 * k + 1]);
      *reinterpret_cast<uint4*>(q_s + wgmma::sw128_offset(c / kRowChunks, (c % kRowChunks) * 8, kHeads)) =
          make_uint4(w[0], w[1], w[2], w[3]);
    }
  }
}

// Byte offset of 16-byte chunk `chunk` (dims 8 chunk .. 8 chunk + 7) of row t in a swizzled K tile.
__device__ __forceinline__ int tile_chunk_offset(int t, int chunk) { return int(wgmma::sw128_offset(t, 8 * chunk, kTile)); }

// BF16 rows, register feed (FP8 rows take produce_fp8_bulk below; this feed was both until S7).
// Producer warpgroups 2 and 3 (thread pt = 0..255, warp pw = pt / 32 = 0..7). Warp pw handles tile rows
// t = pw + 8 u (u = 0..7), one row per slot; lane u < 8 holds row u's index (broadcast with shuffles).
// Each row is read contiguously: lane l loads 32 bytes (dims 16 l..16 l + 15), lanes 0..7 16 bytes of rope;
// so one warp instruction covers 512 contiguous bytes (S6c: an 8-rows-per-instruction mapping spent ~2100 cycles
// per tile issuing its loads). Lane l writes dims 16 l..16 l + 15 = chunks 2 l and 2 l + 1 of panel l / 4;
// lanes of odd panels write their odd chunk first, so a quarter-warp's eight 16-byte stores hit eight
// distinct bank groups. Two slots are in flight in registers (slot q + 2's loads are issued as slot q is
// stored), and the rows of tile i + 2 are prefetched into L2 when tile i starts. Why two warpgroups: S6d's
// phase probe showed one producer warpgroup (one warp per SM sub-partition) needing ~9.9k cycles per tile
// for the gather + dequantization (3 instructions per code, latency-bound with one warp per scheduler),
// more than twice the consumers' ~4.3k.
constexpr int kProducerWarps = 8;
constexpr int kSlotRows = 1;
constexpr int kRowsPerWarp = kTile / kProducerWarps;  // 8 rows of each tile per producer warp (both feeds)
// Slots (rows) each producer warp keeps in flight, and whether it prefetches tile i + 2's rows into L2;
// macros only so tools/probe can build variants side by side.
#ifndef GLM5_MLA_WG_INFLIGHT
#define GLM5_MLA_WG_INFLIGHT 2
#endif
#ifndef GLM5_MLA_WG_PREFETCH
#define GLM5_MLA_WG_PREFETCH 1
#endif
constexpr int kInFlight = GLM5_MLA_WG_INFLIGHT;
constexpr bool kPrefetchL2 = GLM5_MLA_WG_PREFETCH != 0;

// The pool index of row t of tile `tile` of the chunk [j0, j_end), or -1 when !has_row or past the chunk's end
// (one predicate, so the load stays a single predicated __ldg). ind = request b's top-k indices.
__device__ __forceinline__ int row_index(const int32_t* ind, int j0, int j_end, int tile, int t, bool has_row) {
  const int j = j0 + tile * kTile + t;
  return has_row && j < j_end ? __ldg(ind + j) : -1;
}
// Producer lane u < 8 of warp pw: the index of row pw + 8 u of tile `tile` (of n), or -1 (no such row, or
// lane >= 8). Both feeds keep one tile's indices this way.
__device__ __forceinline__ int tile_row_index(const int32_t* ind, int j0, int j_end, int n, int pw, int lane, int tile) {
  return row_index(ind, j0, j_end, tile, pw + kProducerWarps * lane, lane < kRowsPerWarp && tile < n);
}

struct RowSlot {
  uint4 lat[kSlotRows][2];
  uint4 rope[kSlotRows];
  int index[kSlotRows];
};

__device__ __forceinline__ void load_slot(const MlaDecodeParams& p, int idx_lane, int q, int lane, RowSlot& r) {
  const int rb = p.layout.row_bytes, ro = p.layout.rope_offset();
#pragma unroll
  for (int k = 0; k < kSlotRows; ++k) {
#ifdef GLM5_MLA_WG_NOLOAD  // probe only: no global loads (the producer's compute and stores alone)
    const int t = -1;
    r.index[k] = __shfl_sync(0xffffffffu, idx_lane, kSlotRows * q + k);
#else
    const int t = __shfl_sync(0xffffffffu, idx_lane, kSlotRows * q + k);
    r.index[k] = t;
#endif
    const uint8_t* row = p.kv + int64_t(t < 0 ? 0 : t) * rb;
    const uint4 zero = make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int m = 0; m < 2; ++m)
      r.lat[k][m] = t >= 0 ? __ldg(reinterpret_cast<const uint4*>(row) + 2 * lane + m) : zero;
    r.rope[k] = t >= 0 && lane < 8 ? __ldg(reinterpret_cast<const uint4*>(row + ro) + lane) : zero;
  }
}

__device__ __forceinline__ void store_slot(const RowSlot& r, int q, int pw, int lane, uint8_t* dst, float* bias) {
  const int odd = (lane >> 2) & 1;
#pragma unroll
  for (int k = 0; k < kSlotRows; ++k) {
    const int t = pw + kProducerWarps * (kSlotRows * q + k);
    const uint4 out[2] = {r.lat[k][0], r.lat[k][1]};
    *reinterpret_cast<uint4*>(dst + tile_chunk_offset(t, 2 * lane + odd)) = odd ? out[1] : out[0];
    *reinterpret_cast<uint4*>(dst + tile_chunk_offset(t, 2 * lane + 1 - odd)) = odd ? out[0] : out[1];
    if (lane < 8) *reinterpret_cast<uint4*>(dst + tile_chunk_offset(t, kL / 8 + lane)) = r.rope[k];
    if (lane == 0) bias[t] = r.index[k] >= 0 ? 0.f : -INFINITY;
  }
}

__device__ __forceinline__ void produce_bf16(const MlaDecodeParams& p, int b, int j0, int j_end, int n, uint8_t* kv_s,
                                        float* bias_s, uint64_t* full, uint64_t* empty, int pt) {
  const int pw = pt >> 5, lane = pt & 31;
  const int32_t* ind = p.indices + int64_t(b) * p.topk;
  auto index_of = [&](int tile) { return tile_row_index(ind, j0, j_end, n, pw, lane, tile); };
  auto prefetch_row = [&](int index) {
    if (index >= 0) prefetch_l2(p.kv + int64_t(index) * p.layout.row_bytes, unsigned(p.layout.row_bytes));
  };
  int idx_cur = index_of(0), idx_nxt = index_of(1), idx_far = index_of(2);
  if (kPrefetchL2) {
    prefetch_row(idx_cur);
    prefetch_row(idx_nxt);
  }
  constexpr int kSlots = kRowsPerWarp / kSlotRows;  // per tile
  static_assert(kSlots % kInFlight == 0, "slot q lives in R[q % kInFlight] across tiles");
  RowSlot R[kInFlight];
#pragma unroll
  for (int q = 0; q < kInFlight; ++q) load_slot(p, idx_cur, q, lane, R[q]);
  PROBE_T0;
  for (int i = 0; i < n; ++i) {
    const int buf = i & 1;
    uint8_t* dst = kv_s + buf * kOpBytes;
    float* bias = bias_s + buf * kTile;
    if (kPrefetchL2) prefetch_row(idx_far);  // tile i + 2
    PROBE(20);  // producer: L2 prefetch issue
    if (i >= 2) mbar_wait(&empty[buf], ((i >> 1) - 1) & 1);  // tile i - 2 consumed
    PROBE(21);  // producer: wait for an empty buffer
#pragma unroll
    for (int q = 0; q < kSlots; ++q) {
      store_slot(R[q % kInFlight], q, pw, lane, dst, bias);
      if (q == kSlots - kInFlight) {  // every slot of tile i is loaded: move the index window on
        idx_cur = idx_nxt;
        idx_nxt = idx_far;
        idx_far = index_of(i + 3);
      }
      if (q + kInFlight < kSlots) load_slot(p, idx_cur, q + kInFlight, lane, R[q % kInFlight]);
      else if (i + 1 < n) load_slot(p, idx_cur, q + kInFlight - kSlots, lane, R[q % kInFlight]);
    }
    wgmma::fence_proxy_async();  // generic-proxy stores -> wgmma's async-proxy operand reads
    mbar_arrive(&full[buf]);
    PROBE(22);  // producer: load latency + store
  }
}

// FP8 rows, bulk-copy feed (S7). Why: the register-fed producer above keeps two 656-byte rows per warp in
// flight, 16 rows = 10.5 KB per SM, and S6's phase probe measured the consumers waiting on it ~45% of each tile
// (reports/2026-11-30-h200-mla-wgmma-probe.md); loaded HBM latency x the per-SM share of 4.26 TB/s wants ~3x that.
// Here the tile's 64 rows are in flight at once, with no registers held: WG1 issues (issue_fp8_codes) one
// cp.async.bulk per valid row of its 512 code bytes into panels 4..7's place of the K buffer the tile is dequantized
// into (rawfull[buf]'s transaction bytes; no shared memory is left for a separate ring: Q + 2 K tiles + P take 226 of
// the 227 KB). Each producer lane loads its rows' four fp32 scales and one 16-byte rope chunk from global memory while
// the codes fly, and stores the rope chunk at its swizzled place in panel 8. The copy of tile i is issued by WG1
// right after its P . V of tile i - 2, so it lands while the producers still dequantize tile i - 1; the producers
// wait on empty[buf] (WG0's P . V of tile i - 2 done) before they write panels 0..3 and 8.
// Session 7 had the producers issue the copies after their own wait on empty (the copy latency was theirs) and the
// rope as a 2-D TMA box per row; S8b/S8e (reports/2026-11-30-h200-mla-wgmma-probe.md): the copy engine takes
// ~20 cycles per code copy and ~40 per rope box, so the boxes doubled WG1's issue time for no gain over the loads.
// Dequantization reads the codes back from shared memory:
//   round 1, panels 0..3 (dims 0..255), writes bytes [0, 32768) of the buffer, below the codes: streamed, then
//   full_lo[buf] lets WG0 start Q . K^T on those panels;
//   round 2, panels 4..7 (dims 256..511), overwrites the codes: each thread first reads its 4 chunks into registers,
//   then a named barrier of the 256 producers, then the stores.
// Lane (u = lane / 8, q = lane % 8) converts rows pw + 8 u and pw + 8 (u + 4), code chunks q, 8 + q (round 1) and
// 16 + q, 24 + q (round 2): a quarter-warp reads 128 contiguous bytes of one row (no bank conflicts), and its odd
// panel's lanes store their odd output chunk first. Same chunk -> bf16 as the register feed (dequant16_bf16 =
// kv_cast's rounding; kF16: dequant16_f16); invalid rows are zeros (the producers zero their rope row; no copy is issued for them).
constexpr int kRowB = kL + 4 * (kL / 128) + 2 * kR;   // 656: FP8 row (codes, 4 fp32 scales, bf16 rope)
constexpr int kRopeOffB = kL + 4 * (kL / 128);         // 528: the rope in an FP8 row
constexpr int kRawOff = 4 * kPanelBytes;              // 32768: the codes of the tile, panels 4..7's place
constexpr int kRopePanel = kL / 64;                    // 8: the rope panel
constexpr int kLoDims = kL / 2;                        // 256 dims (panels 0..3), round 1, signalled by full_lo
constexpr uint64_t kLoDesc = uint64_t(kLoDims / 64 * kPanelBytes) >> 4;  // their wgmma descriptor offset
static_assert(kRawOff == 4 * kPanelBytes && kRawOff + kTile * kL == kRopePanel * kPanelBytes,
              "the codes fill exactly panels 4..7; round 1's stores (panels 0..3) stay below them");
static_assert(kRowB % 16 == 0 && kRopeOffB % 16 == 0, "cp.async.bulk and the rope's uint4 loads need 16-byte alignment");
static_assert(kRowsPerWarp == 8 && kL == 512, "the lane -> (row, chunk) map below is written for 8 rows x 32 chunks");
static_assert(kHeads == kTile, "kLoDesc advances Q's and K's descriptors alike: both are 64-row swizzled operands");

// Crossover (kCross; MlaDecodeParams::crossover, mla_decode_wgmma_crossover): where a request has an even number of
// 64-head blocks (s_q H = 128, 256 ...), the two CTAs of a head-block pair (blockIdx.x 2k, 2k + 1) run as one
// thread-block cluster and share the tile's production: CTA xr (its rank) copies, dequantizes and stores only rows
// [32 xr, 32 xr + 32) of every tile into its own K buffer, and the copy engine moves them into its partner's (the idea
// FlashMLA's public write-up calls crossover, docs/20250929-hopper-fp8-sparse-deep-dive.md; written here from that
// description).
// Per CTA that halves the code copies, scale / rope loads, dequantization and its shared-memory stores' issue, the
// producers' share of a tile (~6.3k cycles against the consumers' ~4.3k at 128 heads, S29a); the cost is the pair's
// coupling (a buffer is refilled once both CTAs' consumers are done with it) and the remote copies.
//   Moving the rows: a CTA's 32 rows of a 128-byte-swizzled 64-row panel are four whole 1 KB swizzle atoms, 4 KB
//     contiguous at the same offset in both CTAs. After round 1 (panels 0..3; kBarRawRead follows every producer's
//     fence.proxy.async) and after round 2 (panels 4..7, the rope panel 8 and the 32 bias words; kBarXSend), producer
//     thread 0 sends them by cp.async.bulk shared::cta -> shared::cluster (bulk_copy_s2cluster). Sessions 32-33 stored
//     each 16 bytes twice instead, the second by st.async: ~2,300 remote 16-byte stores per tile, and WG1's P . V,
//     reading panels 4..7 meanwhile, took 3.9k cycles per tile against 1.3k without crossover (S34a, H100; the kernel
//     14-16% slower than without crossover; reports/2026-12-07-h100-mla-crossover-s32-s33.md).
//   Codes: this CTA's 32 rows land in its own rows' place of panels 4..7 (cross_code_offset: row 32 xr + 8 u + k at
//     panel 4 + u, bytes [4096 xr + 512 k, + 512)), so the partner's copies (the other 32 rows) never touch them and
//     round 2's in-place overwrite stays a matter of this CTA's producers (kBarRawRead).
//   Barriers: empty[buf] counts one arrival per consumer warp of both CTAs (16; the waits at cluster scope);
//     xfull_lo[buf] / xfull[buf] take the partner's bytes (its round-1 panels; its round-2 panels, rope and bias),
//     announced by this CTA's producer thread 0 once the buffer is free (then the partner's bytes for the previous
//     use of the buffer have all landed); the consumers wait for them beside full_lo / full. xsent[buf]: the partner
//     has received this CTA's round 2 of the buffer's tile (its thread 0 arrives once its xfull wait is over), so the
//     copy has read panels 4..7's rows and WG1 may land the next codes there. The last two tiles' empty and xsent
//     arrivals are left out (nobody waits for them), so no CTA signals a partner that may have exited.
constexpr int kXLoBytes = kTile / 2 * kLoDims * 2;                  // the partner's round 1: 32 rows x 256 dims
constexpr int kXHiBytes = kTile / 2 * ((kL - kLoDims) * 2 + kR * 2 + 4);  // round 2 + rope + bias
__device__ __forceinline__ int cross_code_offset(int xr, int k) {
  return kRawOff + (k / 8) * kPanelBytes + xr * (kPanelBytes / 2) + (k % 8) * kL;
}
static_assert(kPanelBytes / 2 == 8 * kL && kTile / 2 == 32, "a CTA's 8 code rows fill its half of one panel");

// Dequantizes 16 codes (one uint4) with `scale` and stores them as output chunks 2 k, 2 k + 1 of row t, the odd
// one first when `odd` (a quarter-warp covers 8 consecutive chunks k of one row, 4 in each of two panels: with
// odd = (k / 4) % 2 its eight 16-byte stores hit eight distinct bank groups).
// kF16: to fp16 (dequant16_f16, the scale rounded to fp16) instead.
template <bool kF16>
__device__ __forceinline__ void store_codes(uint8_t* dst, int t, int k, uint4 c, float scale, int odd) {
  uint4 v[2];
  if constexpr (kF16) dequant16_f16(c, __float2half2_rn(scale), v);
  else dequant16_bf16(c, scale, v);
  const uint4 lo = v[0], hi = v[1];
  *reinterpret_cast<uint4*>(dst + tile_chunk_offset(t, 2 * k + odd)) = odd ? hi : lo;
  *reinterpret_cast<uint4*>(dst + tile_chunk_offset(t, 2 * k + 1 - odd)) = odd ? lo : hi;
}

// Crossover: producer thread 0 sends this CTA's rows [32 xr, 32 xr + 32) of panels [p0, p1) of K buffer `buf` (4 KB
// each) to the same place in the partner's buffer (peer_kv: its K buffers' shared::cluster address), completing the
// partner's barrier peer_bar.
__device__ __forceinline__ void send_half_panels(const uint8_t* kv_s, uint32_t peer_kv, int buf, int xr, int p0, int p1,
                                                 uint32_t peer_bar) {
  for (int pn = p0; pn < p1; ++pn) {
    const int off = buf * kOpBytes + pn * kPanelBytes + xr * (kPanelBytes / 2);
    bulk_copy_s2cluster(peer_kv + uint32_t(off), kv_s + off, kPanelBytes / 2, peer_bar);
  }
}

// FP8 rows: WG1 issues each tile's code copies into K buffer tile % 2, warp w (0..3) lanes 0..15 the tile rows
// t = 16 w + lane: the 512 code bytes of a valid row by cp.async.bulk into panels 4..7's place (rawfull's transaction
// bytes). Tiles 0 and 1 at the start, tile i + 2 right after WG1's own P . V of tile i: panels 4..7 were read by
// WG0's Q . K^T of tile i (done before it signalled S_ready) and by WG1's P . V, and last written by the producers'
// round 2 of tile i, whose generic stores are ordered before the copy by their fence.proxy.async -> full[buf] ->
// WG1's wait on full. So the copy needs no wait on WG0 (crossover: it waits on xsent, i.e. on the partner's WG0
// having received this CTA's round 2, the copy's source); panels 0..3 (still read by WG0's P . V) and panel 8 (read by
// Q . K^T, written by the producers) are the producers' only after their wait on empty. The copy then flies while
// the producers dequantize tile i + 1.
// S8a: issued by the producers after their own wait on empty, the copy could only start when they had finished the
// previous tile, and its latency was theirs (s7h: ~2.1k + 0.7k of ~6.3k cycles per tile, mla-wgmma-probe.md).
// One lane per warp announces the bytes of the warp's valid rows, then the lanes issue: one mbarrier operation
// per warp, not per row (rawfull counts kIssueWarps arrivals). `index`: this lane's row index (-1: none), loaded
// one tile ahead (issue_index).
constexpr int kIssueWarps = 4, kIssueRows = kTile / kIssueWarps;  // 16 rows per WG1 warp
// kCross (crossover, at produce_fp8_bulk): only this CTA's half of the tile, rows 32 xr + 8 w + lane (lane < 8) of
// warp w; xr = this CTA's rank in its pair.
template <bool kCross = false>
__device__ __forceinline__ int issue_index(const int32_t* ind, int j0, int j_end, int tile, int wt, int xr = 0) {
  const int lane = wt & 31;
  if constexpr (kCross)
    return row_index(ind, j0, j_end, tile, kTile / 2 * xr + kIssueRows / 2 * (wt >> 5) + lane, lane < kIssueRows / 2);
  return row_index(ind, j0, j_end, tile, kIssueRows * (wt >> 5) + lane, lane < kIssueRows);
}
// Tried, not kept (session 34, call S34d on an H100): WG1's idle lanes 16..31 asking L2 for whole rows
// (cp.async.bulk.prefetch.L2, 656 bytes) 1, 2 or 3 tiles ahead of the codes WG1 issues next, as an L2 stage in front
// of the two-buffer ring. 17% slower at every shape (B 128 x 64 heads 168.6 against 144.5 us), like S7c's and S28g's
// producer-issued forms; alone (tools/probe/gather_probe.cu) an L2 prefetch one tile ahead made a one-deep ring's
// gather 2.41 us per tile against 2.70 without, where a second shared-memory stage gave 2.05.
// Tried, not kept (session 34, S34e, H100): the codes by 16-byte cp.async (LDGSTS) per lane and row, one
// cp.async.mbarrier.arrive per WG1 thread on rawfull. Alone it gathers a one-deep ring's tile in 2.25 us against
// cp.async.bulk's 2.69 (gather_probe), but in the kernel WG1's issue took 2.9k instead of 1.6k cycles per tile: B 128 x
// 64 heads 2.6% faster (139.3 against 143.2 us), B 64 x 64 (S = 2) 4% and B 128 x 128 8% slower.
// Tried, not kept (session 34, S34f, H100): 32-row K tiles in four 36 KB buffers (m64n32k16 for Q . K^T, one row per
// producer lane), so that four tiles' gathers are in flight. Correct (the probe's check against the mma.sync kernel
// unchanged), but 48% slower: B 128 x 64 heads 212.5 / 214.3 against 145.2 / 142.7 us, B 128 x 128 387 against 232.
// Per 64 rows the producers' wait for codes halved (3.8k -> 2.0k cycles, two threads summed), but their round 2
// stores [23] took 8.1k against 2.9k and round 1 [24] 5.9k against 3.8k (one row per lane: half the loads and stores
// in flight, twice the fences), and WG0's Q . K^T 1.33k against 0.89k (m64n32k16's fixed cost per instruction), its
// softmax 1.0k against 0.74k (reports/2026-12-07-h100-mla-gather-s34.md).
// Tried, not kept (session 30, commit 4ed5ead, call S30a on an H100): where a request has several head blocks (128
// query heads, or 64 x s_q 2), the two CTAs of a head-block pair as one thread-block cluster, each copying half of a
// tile's rows into both CTAs (cp.async.bulk .multicast::cluster; a buffer refilled once all 8 WG1 warps of the pair
// arrived on a cluster-scope mbarrier). Same bits (GPU test), but slower: B 128 x 128 heads 258.7 against 226.5 us,
// B 64 x 256 heads 253.7 against 222.9; per tile WG1's issue phase 3.4k against 1.65k cycles (now waiting for the
// partner's P . V: the pair runs in lockstep) and the producers' wait for the codes 6.2k against 3.0k (both WGs).
// Into panels 4..7's place of buffer tile % 2, after WG1's P . V of tile tile - 2 (the last reader of those panels)
// has completed. S8c also tried one 16-byte cp.async per lane per row (the LSU path, not the copy engine): WG1's
// issue took 1.8-2.0k instead of 1.3-1.5k cycles per tile, and the kernel was 2-5% slower.
// kCross: this CTA's 32 rows (issue_index<true>), at cross_code_offset.
template <bool kCross = false>
__device__ __forceinline__ void issue_fp8_codes(const MlaDecodeParams& p, int index, int tile, uint8_t* kv_s,
                                                uint64_t* rawfull, int wt, int xr = 0) {
  const int buf = tile & 1, lane = wt & 31, t = kIssueRows * (wt >> 5) + lane;
  const int valid = __popc(__ballot_sync(0xffffffffu, index >= 0));
  if (lane == 0) mbar_expect_tx(&rawfull[buf], unsigned(valid) * kL);  // one of rawfull's kIssueWarps arrivals
  __syncwarp();
  uint8_t* dst = kCross ? kv_s + buf * kOpBytes + cross_code_offset(xr, kIssueRows / 2 * (wt >> 5) + lane)
                        : kv_s + buf * kOpBytes + kRawOff + t * kL;
  if (index >= 0) bulk_copy_g2s(dst, p.kv + int64_t(index) * kRowB, kL, &rawfull[buf]);
}

// kCross (crossover, above): this CTA's rows only (one per lane: r = xr), sent to the partner's buffer after each
// round (send_half_panels); xfull_lo / xfull are this CTA's barriers for the partner's bytes.
template <bool kF16, bool kCross = false>
__device__ __forceinline__ void produce_fp8_bulk(const MlaDecodeParams& p, int b, int j0, int j_end, int n,
                                                 uint8_t* kv_s, float* bias_s, uint64_t* full, uint64_t* empty,
                                                 uint64_t* rawfull, uint64_t* full_lo, uint64_t* xfull_lo,
                                                 uint64_t* xfull, int pt) {
  const int pw = pt >> 5, lane = pt & 31;
  const int32_t* ind = p.indices + int64_t(b) * p.topk;
  auto index_of = [&](int tile) { return tile_row_index(ind, j0, j_end, n, pw, lane, tile); };
  const int u = lane >> 3, q = lane & 7, odd = (q >> 2) & 1;
  constexpr int kRows = kCross ? 1 : 2;  // rows per lane
  const int xr = kCross ? int(cluster_rank()) : 0, peer = xr ^ 1;
  const uint32_t peer_kv = kCross ? dsmem_addr(kv_s, peer) : 0;
  // This lane's rows pw + 8 (u + 4 r) of a tile, r < kRows (crossover: r = xr): index, fp32 scales and rope chunk q
  // (from the lanes' index window idx_lanes), and where its codes are.
  auto row_of = [&](int r) { return pw + kProducerWarps * (u + 4 * (kCross ? xr : r)); };
  auto codes_of = [&](const uint8_t* d, int r) {
    return kCross ? d + cross_code_offset(xr, pw + kProducerWarps * u) : d + kRawOff + row_of(r) * kL;
  };
  int idx[kRows];
  float4 sc[kRows];
  uint4 rope[kRows];
  auto load_rows = [&](int idx_lanes) {
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      idx[r] = __shfl_sync(0xffffffffu, idx_lanes, u + 4 * (kCross ? xr : r));
      const uint8_t* row = p.kv + int64_t(idx[r] < 0 ? 0 : idx[r]) * kRowB;
      sc[r] = idx[r] >= 0 ? __ldg(reinterpret_cast<const float4*>(row + kL)) : make_float4(0.f, 0.f, 0.f, 0.f);
      rope[r] = idx[r] >= 0 ? __ldg(reinterpret_cast<const uint4*>(row + kRopeOffB) + q) : make_uint4(0, 0, 0, 0);
    }
  };
  int idx_cur = index_of(0), idx_nxt = index_of(1);
  PROBE_T0;
  for (int i = 0; i < n; ++i) {
    const int buf = i & 1;
    uint8_t* dst = kv_s + buf * kOpBytes;
    // In flight while the codes land. (S28c issued tile i + 1's at the end of tile i instead: the fp16 form no
    // faster, the bf16 form 6-12% slower, its producers spilling 56 bytes.)
    load_rows(idx_cur);
    PROBE(21);  // producer: indices, scales and rope issued
    mbar_wait(&rawfull[buf], (i >> 1) & 1);  // the codes have landed
    PROBE(26);  // producer: wait for the codes
    // and WG0's P . V of tile i - 2 is done with panels 0..3 (crossover: in both CTAs of the pair)
    if (i >= 2) {
      if constexpr (kCross) mbar_wait_cluster(&empty[buf], ((i >> 1) - 1) & 1);
      else mbar_wait(&empty[buf], ((i >> 1) - 1) & 1);
    }
    PROBE(22);  // producer: then for the buffer
    if constexpr (kCross) {
      if (pt == 0) {  // the partner's bytes of tile i into this buffer (the previous ones have all landed)
        mbar_expect_tx(&xfull_lo[buf], kXLoBytes);
        mbar_expect_tx(&xfull[buf], kXHiBytes);
      }
      if (lane >= 4 * xr && lane < 4 * xr + 4)  // lanes holding this CTA's rows pw + 8 lane
        bias_s[buf * kTile + pw + kProducerWarps * lane] = idx_cur >= 0 ? 0.f : -INFINITY;
    } else {
      if (lane < kRowsPerWarp) bias_s[buf * kTile + pw + kProducerWarps * lane] = idx_cur >= 0 ? 0.f : -INFINITY;
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r)  // the rope: chunk q of the row's panel-8 line (zeros for invalid rows)
      *reinterpret_cast<uint4*>(dst + tile_chunk_offset(row_of(r), kL / 8 + q)) =
          kF16 ? bf16x8_to_f16x8(rope[r]) : rope[r];  // converted here, not at the load: S28a's probe saw the
                                                      // conversion there wait out the load (+3.5k cycles per tile)
    const uint4 zero = make_uint4(0, 0, 0, 0);
    uint4 v[kRows][2];
#pragma unroll
    for (int r = 0; r < kRows; ++r)  // round 2's reads: chunks 16 + q, 24 + q
#pragma unroll
      for (int h = 0; h < 2; ++h)
        v[r][h] = idx[r] >= 0 ? *reinterpret_cast<const uint4*>(codes_of(dst, r) + 16 * (16 + 8 * h + q)) : zero;
    uint4 w[kRows][2];  // round 1's chunks q (scale group 0) and 8 + q (group 1), all read before the first store
#pragma unroll          // (the compiler cannot tell the stores from the reads, so interleaved it would serialize them)
    for (int r = 0; r < kRows; ++r)
#pragma unroll
      for (int h = 0; h < 2; ++h)
        w[r][h] = idx[r] >= 0 ? *reinterpret_cast<const uint4*>(codes_of(dst, r) + 16 * (8 * h + q)) : zero;
#pragma unroll
    for (int r = 0; r < kRows; ++r)  // round 1's stores
#pragma unroll
      for (int h = 0; h < 2; ++h)
        store_codes<kF16>(dst, row_of(r), 8 * h + q, w[r][h], h ? sc[r].y : sc[r].x, odd);
    wgmma::fence_proxy_async();
    mbar_arrive(&full_lo[buf]);  // panels 0..3 stored: WG0 may start Q . K^T on them
    PROBE(24);                   // producer: round-2 reads + round 1
    wgmma::bar_sync(kBarRawRead, 256);  // every producer has read its round-2 chunks: the codes may go
    if constexpr (kCross)  // and has stored (and fenced) its round 1: panels 0..3's rows to the partner
      if (pt == 0) send_half_panels(kv_s, peer_kv, buf, xr, 0, 4, dsmem_addr(&xfull_lo[buf], peer));
    PROBE(25);                          // producer: the barrier
#pragma unroll
    for (int r = 0; r < kRows; ++r)  // round 2's stores: chunks 16 + q (group 2) and 24 + q (group 3)
#pragma unroll
      for (int h = 0; h < 2; ++h)
        store_codes<kF16>(dst, row_of(r), 16 + 8 * h + q, v[r][h], h ? sc[r].w : sc[r].z, odd);
    idx_cur = idx_nxt;
    idx_nxt = index_of(i + 2);
    wgmma::fence_proxy_async();  // generic-proxy stores -> wgmma's reads; and before the next copies' writes
    mbar_arrive(&full[buf]);
    if constexpr (kCross) {  // panels 4..7, the rope panel and the bias words of this CTA's rows to the partner
      wgmma::bar_sync(kBarXSend, 256);
      if (pt == 0) {
        const uint32_t peer_xhi = dsmem_addr(&xfull[buf], peer);
        send_half_panels(kv_s, peer_kv, buf, xr, 4, kRopePanel + 1, peer_xhi);
        const int bias_off = (Smem::bias - Smem::kv) + 4 * (buf * kTile + kTile / 2 * xr);
        bulk_copy_s2cluster(peer_kv + uint32_t(bias_off), kv_s + bias_off, 4 * kTile / 2, peer_xhi);
      }
    }
    PROBE(23);  // producer: round 2's stores (crossover: and the kBarXSend barrier and the copy's issue)
  }
}

// Multiplies this thread's rows r0 (registers 4q, 4q + 1 of each n8 block) by a0 and r0 + 8 (4q + 2, 4q + 3) by
// a1: the online softmax's rescale of an O half when the running maxima move.
__device__ __forceinline__ void scale_rows(float (&o)[4][32], float a0, float a1) {
#pragma unroll
  for (int j = 0; j < 4; ++j)
#pragma unroll
    for (int q = 0; q < 8; ++q) {
      o[j][4 * q] *= a0;
      o[j][4 * q + 1] *= a0;
      o[j][4 * q + 2] *= a1;
      o[j][4 * q + 3] *= a1;
    }
}

// A K tile's descriptor (desc_sw128: leading byte offset 16 B, unused by one-panel operands) with the panel stride as
// its leading byte offset instead: V as an MN-major B wider than one 64-dim panel (the m64n128 forms below).
__device__ __forceinline__ uint64_t pv_desc(uint64_t dk) {
  return (dk & ~(uint64_t(0x3FFF) << 16)) | (uint64_t(kPanelBytes >> 4) << 16);
}

// O[:, 64 panel0 .. 64 panel0 + 256) += P . V over the tile's 64 rows: 4 k-steps of 16 rows x 4 value panels of
// 64 dims, one m64n64k16 each (V = panels panel0.. of the K tile read as MN-major B), one commit group; the caller
// waits. GLM5_MLA_PV_N128 (session 30, probe builds; not yet measured on a GPU: no device came after it was written):
// two m64n128k16 per k-step instead (P's 64 x 16 slice read once per 128 value dims: 16 KB of P reads per warpgroup
// and tile instead of 32, 8 instructions instead of 16; m64n256k16's 128 accumulators do not fit the 512-thread
// kernel's 128 registers at compile time, ptxas C7602). Its building block is tested on its own
// (GpuWgmma.N128MnMajorBMatchesHost).
template <bool kF16>
__device__ __forceinline__ void issue_pv(float (&o)[4][32], uint64_t dp, uint64_t dk, int panel0) {
#pragma unroll
  for (int j = 0; j < 4; ++j) wgmma::fence_operand(o[j]);  // the rescale's multiplies stay before the fence
  wgmma::fence();
#ifdef GLM5_MLA_PV_N128
  const uint64_t dv = pv_desc(dk);
#pragma unroll
  for (int ks = 0; ks < kTile / 16; ++ks)
#pragma unroll
    for (int j = 0; j < 4; j += 2)
      wgmma::m64n128k16_ss<true, kF16>(o[j], o[j + 1], dp + uint64_t((32 * ks) >> 4),
                                       dv + uint64_t(((panel0 + j) * kPanelBytes + 2048 * ks) >> 4), true);
#else
#pragma unroll
  for (int ks = 0; ks < kTile / 16; ++ks)
#pragma unroll
    for (int j = 0; j < 4; ++j)
      wgmma::m64n64k16_bf16_ss<true, kF16>(o[j], dp + uint64_t((32 * ks) >> 4),
                                     dk + uint64_t(((panel0 + j) * kPanelBytes + 2048 * ks) >> 4), true);
#endif
  wgmma::commit();
}

// WG0's O[:, 0 .. 256) += P . V with P from its registers (pw[q]: the softmax's columns 8 q + 2 (lane % 4) + {0, 1} of
// rows r0 and r0 + 8 as 16-bit pairs, the words it also stores for WG1), so WG0 neither reads P back from shared
// memory nor waits for its four warps' P stores (kBarPWritten). Otherwise as issue_pv's m64n128 form.
// GLM5_MLA_WG0_PV_RS (session 30, probe builds; not yet measured on a GPU).
template <bool kF16>
__device__ __forceinline__ void issue_pv_rs(float (&o)[4][32], const uint32_t (&pw)[8][2], uint64_t dk) {
  const uint64_t dv = pv_desc(dk);
#pragma unroll
  for (int j = 0; j < 4; ++j) wgmma::fence_operand(o[j]);
  wgmma::fence();
#pragma unroll
  for (int ks = 0; ks < kTile / 16; ++ks) {
    const uint32_t a[4] = {pw[2 * ks][0], pw[2 * ks][1], pw[2 * ks + 1][0], pw[2 * ks + 1][1]};
#pragma unroll
    for (int j = 0; j < 4; j += 2)
      wgmma::m64n128k16_rs<true, kF16>(o[j], o[j + 1], a, dv + uint64_t((j * kPanelBytes + 2048 * ks) >> 4), true);
  }
  wgmma::commit();
}

// Writes rows r0 = 16 w + lane / 4 and r0 + 8 of this warpgroup's O half (value dims [256 g, 256 g + 256))
// times inv0 / inv1, to out (unsplit) or the workspace (split).
template <bool kSplit>
__device__ __forceinline__ void store_o(const MlaDecodeParams& p, const float (&o)[4][32], int b, int h0, int HQ,
                                       int g, int r0, float inv0, float inv1, int lane) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int h = h0 + r0 + 8 * half;
    if (h >= HQ) continue;
    const float inv = half ? inv1 : inv0;
    // One address expression for both variants (single-pass: gridDim.z = 1, blockIdx.z = 0): with a separate
    // out-row expression ptxas kept more registers live across the tile loop and spilled 164 bytes.
    float* dst = (kSplit ? p.workspace : p.out) + ((int64_t(b) * HQ + h) * gridDim.z + blockIdx.z) * kL;
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int q = 0; q < 8; ++q) {
        const int d = 256 * g + 64 * j + 8 * q + 2 * (lane & 3);
        *reinterpret_cast<float2*>(dst + d) = make_float2(o[j][4 * q + 2 * half] * inv, o[j][4 * q + 2 * half + 1] * inv);
      }
  }
}

// Split-K inside a thread-block cluster (kMerge; S = 2, kMlaWgmmaClusterMergeMax): the S CTAs of one (head block,
// request) form a cluster along z. Each stores its unnormalized O partial (64 heads x 512 fp32, rows kOStride apart
// against bank conflicts) and its stats m (log2 units) / l over its own K buffers, which are free once both
// consumer warpgroups passed kBarEpilogue; after a cluster barrier, CTA rank r reads the partials of its heads
// [r hs, r hs + hs) from all S CTAs through distributed shared memory and writes out and lse with the log-sum-exp
// rule of mla_decode_combine_kernel (out = sum_s 2^(m_s - M) O_s / sum_s 2^(m_s - M) l_s); a second cluster barrier
// keeps every CTA's shared memory alive until its partners have read it. Why: at batch 64 / 64 heads the workspace
// round trip and the separate combine launch cost ~15 us of a ~95 us decode (S8h), FlashMLA's whole time being 79.5;
// with the merge 78.0 us (S8j). The code handles any S up to the cluster size; the header says why only S = 2 runs.
constexpr int kOStride = kL + 8;
constexpr int kMergeWStride = 8;  // per-head weights in the P panel's place: up to 8 partials (the portable cluster size)
static_assert(kMlaWgmmaClusterMergeMax <= kMergeWStride && kHeads * kMergeWStride * 4 <= kPanelBytes, "merge scratch");
static_assert(kHeads * kOStride * 4 <= 2 * kOpBytes, "the O partial fits the two K buffers");

// This thread's O half (warpgroup g, rows r0 and r0 + 8) into o_s [64][kOStride] fp32, unnormalized.
// st.shared with one 32-bit base and immediate offsets: written as generic float2 stores, ptxas spilled ~170 bytes
// inside the tile loops of the kMerge variants.
__device__ __forceinline__ void store_o_smem(const float (&o)[4][32], float* o_s, int g, int r0, int lane) {
  const uint32_t base = smem_u32(o_s + r0 * kOStride + 256 * g + 2 * (lane & 3));
#pragma unroll
  for (int half = 0; half < 2; ++half)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int q = 0; q < 8; ++q)
        asm volatile("st.shared.v2.f32 [%0], {%1, %2};" ::"r"(base + 4 * (8 * half * kOStride + 64 * j + 8 * q)),
                     "f"(o[j][4 * q + 2 * half]), "f"(o[j][4 * q + 2 * half + 1])
                     : "memory");
}

// The merge of the cluster's kS partials for this CTA's slice of the valid heads (both consumer warpgroups,
// ct = 0..255): rank r takes heads [r hs, r hs + hs) of the hv = min(64, HQ - h0) valid ones, hs = ceil(hv / kS).
// The element loop issues kU float4 loads from every partial (this CTA's by ld.shared, the partners' by
// ld.shared::cluster) before its first multiply: one round trip per kU elements, not per element (review 8).
template <int kS>
// base: the kernel's 1024-byte-aligned shared memory (Smem offsets); b, h0, HQ as in the kernel.
__device__ __forceinline__ void cluster_merge(const MlaDecodeParams& p, uint8_t* base, int b, int h0, int HQ, int ct) {
  const float* o_s = reinterpret_cast<const float*>(base + Smem::kv);
  const float* ml_s = reinterpret_cast<const float*>(base + Smem::ml);
  float* w_s = reinterpret_cast<float*>(base + Smem::p);
  if (cluster_ctas() != unsigned(kS) || gridDim.z != unsigned(kS)) __trap();  // launched without its cluster
  const int rank = int(cluster_rank()), hv = min(kHeads, HQ - h0), hs = (hv + kS - 1) / kS;
  const int h_lo = min(hv, rank * hs), h_hi = min(hv, h_lo + hs);
  cluster_sync();  // every CTA's partial and stats are in its shared memory
  for (int hh = ct; hh < h_hi - h_lo; hh += 256) {
    const int h = h_lo + hh;
    float m[kS], l[kS], M = kNegBig;
#pragma unroll
    for (int r = 0; r < kS; ++r) {
      m[r] = r == rank ? ml_s[h] : ld_dsmem(dsmem_addr(ml_s + h, r));
      l[r] = r == rank ? ml_s[kHeads + h] : ld_dsmem(dsmem_addr(ml_s + kHeads + h, r));
      M = fmaxf(M, m[r]);
    }
    float L = 0.f;
#pragma unroll
    for (int r = 0; r < kS; ++r) L = fmaf(exp2f(m[r] - M), l[r], L);
    const float inv = L > 0.f ? 1.f / L : 0.f;
#pragma unroll
    for (int r = 0; r < kS; ++r) w_s[hh * kMergeWStride + r] = exp2f(m[r] - M) * inv;
    if (p.lse) p.lse[int64_t(b) * HQ + h0 + h] = L > 0.f ? (M + log2f(L)) * kLn2 : -INFINITY;
  }
  wgmma::bar_sync(kBarEpilogue, 256);  // the slice's weights are written
  constexpr int kU = 4, kRow4 = kL / 4;  // float4 elements per head row
  const int n_el = (h_hi - h_lo) * kRow4;
  for (int e0 = ct; e0 < n_el; e0 += 256 * kU) {
    float4 v[kU][kS];
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int e = min(e0 + 256 * u, n_el - 1);  // past the end: a valid address, result not stored
      const float* src = o_s + (h_lo + e / kRow4) * kOStride + 4 * (e % kRow4);
#pragma unroll
      for (int r = 0; r < kS; ++r)
        v[u][r] = r == rank ? *reinterpret_cast<const float4*>(src) : ld_dsmem4(dsmem_addr(src, r));
    }
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int e = e0 + 256 * u;
      if (e >= n_el) break;
      const int hh = e / kRow4, d = 4 * (e % kRow4);
      float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
      for (int r = 0; r < kS; ++r) {
        const float w = w_s[hh * kMergeWStride + r];
        acc.x = fmaf(w, v[u][r].x, acc.x);
        acc.y = fmaf(w, v[u][r].y, acc.y);
        acc.z = fmaf(w, v[u][r].z, acc.z);
        acc.w = fmaf(w, v[u][r].w, acc.w);
      }
      float* dst = p.out + (int64_t(b) * HQ + h0 + h_lo + hh) * kL + d;  // out is 8-byte aligned (mla_decode_cuda)
      *reinterpret_cast<float2*>(dst) = make_float2(acc.x, acc.y);
      *reinterpret_cast<float2*>(dst + 2) = make_float2(acc.z, acc.w);
    }
  }
  cluster_sync_relaxed();  // the partners are done reading this CTA's shared memory
}

// kSplit: CTA z of gridDim.z covers rows [z chunk, (z + 1) chunk); kMerge (with kSplit): the S CTAs of a cluster
// merge their partials in the kernel (cluster_merge), else they go to p.workspace for the combine kernel.
// kF16 (FP8 rows only): Q, K and P as fp16 operands (MlaDecodeKernel::WgmmaF16). kCross (FP8 rows, no cluster merge):
// head-block pairs share each tile's production (crossover, at produce_fp8_bulk).
template <bool kFp8, bool kSplit, bool kMerge, bool kF16, bool kCross>
__global__ void __launch_bounds__(kThreads, 1)
    mla_decode_wgmma_kernel(MlaDecodeParams p, int chunk) {
  static_assert(kSplit || !kMerge, "the cluster merge is a split-K variant");
  static_assert(kFp8 || !kF16, "fp16 operands are dequantized from FP8 rows");
  static_assert(!kCross || (kFp8 && !kMerge), "crossover: FP8 rows (the bulk feed), clusters along x only");
  extern __shared__ uint8_t smem_raw[];
  uint8_t* base = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  uint8_t* q_s = base + Smem::q;
  uint8_t* kv_s = base + Smem::kv;
  uint8_t* p_s = base + Smem::p;
  float* alpha_s = reinterpret_cast<float*>(base + Smem::alpha);
  float* bias_s = reinterpret_cast<float*>(base + Smem::bias);
  float* ml_s = reinterpret_cast<float*>(base + Smem::ml);
  uint64_t* full = reinterpret_cast<uint64_t*>(base + Smem::bars);
  uint64_t* empty = full + 2;
  uint64_t* rawfull = full + 4;
  uint64_t* full_lo = full + 6;
  uint64_t* xfull_lo = full + 8;  // crossover: the partner's bytes
  uint64_t* xfull = full + 10;
  uint64_t* xsent = full + 12;

  const int tid = threadIdx.x, HQ = p.H * p.s_q, h0 = blockIdx.x * kHeads, b = blockIdx.y;
  const int j0 = kSplit ? blockIdx.z * chunk : 0;
  const int j_end = kSplit ? min(p.topk, j0 + chunk) : p.topk;
  const int n = j_end > j0 ? (j_end - j0 + kTile - 1) / kTile : 0;

  if (tid == 0) {
    mbar_init(&full[0], 32 * kProducerWarps);
    mbar_init(&full[1], 32 * kProducerWarps);
    mbar_init(&empty[0], kCross ? 16 : 256);  // crossover: one arrival per consumer warp of both CTAs
    mbar_init(&empty[1], kCross ? 16 : 256);
    mbar_init(&rawfull[0], kIssueWarps);
    mbar_init(&rawfull[1], kIssueWarps);
    mbar_init(&full_lo[0], 32 * kProducerWarps);
    mbar_init(&full_lo[1], 32 * kProducerWarps);
    if constexpr (kCross) {
      for (int k = 0; k < 2; ++k) {
        mbar_init(&xfull_lo[k], 1);  // one arrival: this CTA's announcement of the partner's bytes
        mbar_init(&xfull[k], 1);
        mbar_init(&xsent[k], 1);     // one arrival: the partner's thread 0, this CTA's round 2 received
      }
    }
    mbar_init_fence();
  }
  if constexpr (kCross) cluster_sync();  // the partner's barriers too: both CTAs signal each other's
  else __syncthreads();                  // barriers initialized
  pdl_begin();      // q, kv and the indices come from earlier kernels of the step
  const int wg = tid / 128, lane = tid % 32, r0 = 16 * ((tid % 128) / 32) + lane / 4;
  if (wg >= 2) {  // the producers start gathering while the consumers stage Q
    wgmma::setmaxnreg_dec<80>();
    if constexpr (kFp8)
      produce_fp8_bulk<kF16, kCross>(p, b, j0, j_end, n, kv_s, bias_s, full, empty, rawfull, full_lo, xfull_lo, xfull,
                                     tid - 256);
    else produce_bf16(p, b, j0, j_end, n, kv_s, bias_s, full, empty, tid - 256);
    if constexpr (kCross) cluster_sync_relaxed();  // the kernel's last cluster barrier (at its end), arrived early
    return;
  }
  const int32_t* ind = p.indices + int64_t(b) * p.topk;
  int next_index = -1;  // FP8 rows, WG1: this lane's row of the next tile to issue (issue_index)
  const int xr = kCross ? int(cluster_rank()) : 0;  // crossover: this CTA's rank in its pair
  if (kFp8 && wg == 1) {  // the first two tiles' copies
    for (int tile = 0; tile < 2 && tile < n; ++tile)
      issue_fp8_codes<kCross>(p, issue_index<kCross>(ind, j0, j_end, tile, tid - 128, xr), tile, kv_s, rawfull,
                              tid - 128, xr);
    if (n > 2) next_index = issue_index<kCross>(ind, j0, j_end, 2, tid - 128, xr);
  }
  // A consumer warp is done with buffer buf (tile i): crossover: one arrival per warp on both CTAs' empty[buf], none
  // for the last two tiles (no producer waits for them; the partner may have exited).
  auto release_buffer = [&](int buf, int i) {
    if constexpr (kCross) {
      if (i + 2 < n) {
        __syncwarp();
        if (lane == 0) {
          mbar_arrive(&empty[buf]);
          mbar_arrive_cluster(&empty[buf], uint32_t(xr ^ 1));
        }
      }
    } else {
      mbar_arrive(&empty[buf]);
    }
  };
  PROBE_T0;
  load_q<kF16>(p, b, h0, HQ, q_s, tid);
  wgmma::fence_proxy_async();
  wgmma::bar_sync(kBarQ, 256);
  PROBE(0);  // prologue: Q staging (counted by both consumer warpgroups)

  float o[4][32];
#pragma unroll
  for (int j = 0; j < 4; ++j)
#pragma unroll
    for (int i = 0; i < 32; ++i) o[j][i] = 0.f;
  const uint64_t dq = wgmma::desc_sw128(q_s), dp = wgmma::desc_sw128(p_s);
  const uint64_t dk0 = wgmma::desc_sw128(kv_s), dk1 = wgmma::desc_sw128(kv_s + kOpBytes);

  if (wg == 0) {
    wgmma::setmaxnreg_inc<192>();
    const float sl2 = p.scale * kLog2e;
    float m0 = kNegBig, m1 = kNegBig, l0 = 0.f, l1 = 0.f;  // rows r0, r0 + 8 (l: this thread's columns)
    for (int i = 0; i < n; ++i) {
      const int buf = i & 1;
      const uint64_t dk = buf ? dk1 : dk0;
      float s[32];
      // S = Q . K^T over the 576 dims: 36 k-steps. FP8 rows: the first 16 (panels 0..3) as soon as
      // produce_fp8_bulk's round 1 has stored them (full_lo), overlapping its round 2, then the rest after full.
      mbar_wait(kFp8 ? &full_lo[buf] : &full[buf], (i >> 1) & 1);
      if constexpr (kCross) {  // and the partner's rows (the copy engine's writes, complete on xfull_lo; the proxy
        mbar_wait_cluster(&xfull_lo[buf], (i >> 1) & 1);  // fence is from the st.async form of sessions 32-33, where
        wgmma::fence_proxy_async();                        // generic-proxy writes met wgmma's reads; kept: ~free)
      }
      PROBE(1);  // WG0: wait for a full buffer (FP8: its first four panels)
      wgmma::fence();
      wgmma::m64n64_bf16_ss<kF16>(s, dq, dk, kFp8 ? kLoDims : kW, false);
      if constexpr (kFp8) {
        mbar_wait(&full[buf], (i >> 1) & 1);
        if constexpr (kCross) {
          mbar_wait_cluster(&xfull[buf], (i >> 1) & 1);
          wgmma::fence_proxy_async();  // (not needed after copy-engine writes; kept from the st.async form)
          // The partner's copy has read its source. Unlike the consumers' releases, this arrival passes on a
          // completion thread 0 only observed (its acquire.cluster wait above), not reads of its own; the CTA-scope
          // release does not order that in the PTX model (a .release.cluster here would, at a MEMBAR.GPU per tile).
          // It holds in practice for the same reason as mbar_arrive_cluster's: the copy is complete when xfull is.
          if (tid == 0 && i + 2 < n) mbar_arrive_cluster(&xsent[buf], uint32_t(xr ^ 1));
        }
        PROBE(6);  // WG0 (FP8): wait for the rest of the buffer
        wgmma::m64n64_bf16_ss<kF16>(s, dq + kLoDesc, dk + kLoDesc, kW - kLoDims, true);
      }
      wgmma::commit();
      wgmma::wait<0>();
      wgmma::fence_operand(s);
      PROBE(2);  // WG0: Q . K^T

      // Online softmax over this tile's 64 columns: thread holds columns 8 q + 2 (lane % 4) + {0, 1} of
      // rows r0 (registers 4 q, 4 q + 1) and r0 + 8 (4 q + 2, 4 q + 3); 4 threads share a row.
      const float* bias = bias_s + buf * kTile;
      float mx0 = m0, mx1 = m1;
#pragma unroll
      for (int q = 0; q < 8; ++q) {
        const int c = 8 * q + 2 * (lane & 3);
        const float b0 = bias[c], b1 = bias[c + 1];
        s[4 * q] = fmaf(s[4 * q], sl2, b0);
        s[4 * q + 1] = fmaf(s[4 * q + 1], sl2, b1);
        s[4 * q + 2] = fmaf(s[4 * q + 2], sl2, b0);
        s[4 * q + 3] = fmaf(s[4 * q + 3], sl2, b1);
        mx0 = fmaxf(mx0, fmaxf(s[4 * q], s[4 * q + 1]));
        mx1 = fmaxf(mx1, fmaxf(s[4 * q + 2], s[4 * q + 3]));
      }
#pragma unroll
      for (int o2 = 1; o2 <= 2; o2 <<= 1) {
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, o2));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, o2));
      }
      const float a0 = exp2f(m0 - mx0), a1 = exp2f(m1 - mx1);
      m0 = mx0;
      m1 = mx1;
      float sum0 = 0.f, sum1 = 0.f;
#pragma unroll
      for (int q = 0; q < 8; ++q) {
        s[4 * q] = exp2f(s[4 * q] - mx0);
        s[4 * q + 1] = exp2f(s[4 * q + 1] - mx0);
        s[4 * q + 2] = exp2f(s[4 * q + 2] - mx1);
        s[4 * q + 3] = exp2f(s[4 * q + 3] - mx1);
        sum0 += s[4 * q] + s[4 * q + 1];
        sum1 += s[4 * q + 2] + s[4 * q + 3];
      }
      l0 = fmaf(l0, a0, sum0);
      l1 = fmaf(l1, a1, sum1);
      scale_rows(o, a0, a1);
      PROBE(3);  // WG0: softmax + O rescale
      if (i > 0) wgmma::bar_sync(kBarSFree, 256);  // WG1 is done reading P and alpha of tile i - 1
      PROBE(4);  // WG0: wait for S_free
#ifdef GLM5_MLA_WG0_PV_RS  // (one loop for both forms changed the library's machine code: kept apart until measured)
      uint32_t pw[8][2];  // P as 16-bit pairs: rows r0 / r0 + 8, columns 8 q + 2 (lane % 4) + {0, 1}
#pragma unroll
      for (int q = 0; q < 8; ++q) {
        const int c = 8 * q + 2 * (lane & 3);
        pw[q][0] = pack2<kF16>(s[4 * q], s[4 * q + 1]);
        pw[q][1] = pack2<kF16>(s[4 * q + 2], s[4 * q + 3]);
        *reinterpret_cast<uint32_t*>(p_s + wgmma::sw128_offset(r0, c, kHeads)) = pw[q][0];
        *reinterpret_cast<uint32_t*>(p_s + wgmma::sw128_offset(r0 + 8, c, kHeads)) = pw[q][1];
      }
#else
#pragma unroll
      for (int q = 0; q < 8; ++q) {
        const int c = 8 * q + 2 * (lane & 3);
        *reinterpret_cast<uint32_t*>(p_s + wgmma::sw128_offset(r0, c, kHeads)) = pack2<kF16>(s[4 * q], s[4 * q + 1]);
        *reinterpret_cast<uint32_t*>(p_s + wgmma::sw128_offset(r0 + 8, c, kHeads)) =
            pack2<kF16>(s[4 * q + 2], s[4 * q + 3]);
      }
#endif
      if ((lane & 3) == 0) {
        alpha_s[r0] = a0;
        alpha_s[r0 + 8] = a1;
      }
      wgmma::fence_proxy_async();
      wgmma::bar_arrive(kBarSReady, 256);
#ifdef GLM5_MLA_WG0_PV_RS
      issue_pv_rs<kF16>(o, pw, dk);
#else
      wgmma::bar_sync(kBarPWritten, 128);  // every WG0 warp's P rows are stored before WG0's own wgmma reads them
      issue_pv<kF16>(o, dp, dk, 0);
#endif
      // Waiting here (not after the next tile's Q . K^T) keeps the softmax's writes of s out of an open
      // wgmma stage: ptxas otherwise serializes every wgmma (C7515). WG1's P . V still overlaps.
      wgmma::wait<0>();
#pragma unroll
      for (int j = 0; j < 4; ++j) wgmma::fence_operand(o[j]);
      PROBE(7);  // WG0: P store + P . V
      release_buffer(buf, i);
      PROBE(5);  // WG0: the buffer's release
    }
#pragma unroll
    for (int o2 = 1; o2 <= 2; o2 <<= 1) {
      l0 += __shfl_xor_sync(0xffffffffu, l0, o2);
      l1 += __shfl_xor_sync(0xffffffffu, l1, o2);
    }
    if ((lane & 3) == 0) {
      ml_s[r0] = m0;
      ml_s[r0 + 8] = m1;
      ml_s[64 + r0] = l0;
      ml_s[64 + r0 + 8] = l1;
    }
    wgmma::bar_sync(kBarEpilogue, 256);
    if constexpr (kMerge) {
      store_o_smem(o, reinterpret_cast<float*>(kv_s), 0, r0, lane);  // cluster_merge below
    } else {
      store_o<kSplit>(p, o, b, h0, HQ, 0, r0, kSplit ? 1.f : (l0 > 0.f ? 1.f / l0 : 0.f),
                      kSplit ? 1.f : (l1 > 0.f ? 1.f / l1 : 0.f), lane);
      if ((lane & 3) == 0) {
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int h = h0 + r0 + 8 * half;
          const float m = half ? m1 : m0, l = half ? l1 : l0;
          if (h >= HQ) continue;
          const int S = gridDim.z;
          const int64_t k = (int64_t(b) * HQ + h) * S + blockIdx.z;  // single-pass: the (b, h) index of lse
          if constexpr (kSplit) {
            const int64_t n_part = int64_t(p.B) * HQ * S;
            p.workspace[n_part * kL + k] = l > 0.f ? m * kLn2 : -INFINITY;
            p.workspace[n_part * (kL + 1) + k] = l;
          } else if (p.lse) {
            p.lse[k] = l > 0.f ? (m + log2f(l)) * kLn2 : -INFINITY;
          }
        }
      }
    }
  } else {  // wg == 1: O[:, 256:512]
    wgmma::setmaxnreg_inc<160>();
    for (int i = 0; i < n; ++i) {
      const int buf = i & 1;
      const uint64_t dk = buf ? dk1 : dk0;
      mbar_wait(&full[buf], (i >> 1) & 1);
      if constexpr (kCross) {
        mbar_wait_cluster(&xfull[buf], (i >> 1) & 1);
        wgmma::fence_proxy_async();  // (not needed after copy-engine writes; kept from the st.async form)
      }
      wgmma::bar_sync(kBarSReady, 256);
      PROBE(10);  // WG1: wait for P
      const float a0 = alpha_s[r0], a1 = alpha_s[r0 + 8];
      scale_rows(o, a0, a1);
      issue_pv<kF16>(o, dp, dk, 4);
      wgmma::wait<0>();
#pragma unroll
      for (int j = 0; j < 4; ++j) wgmma::fence_operand(o[j]);
      PROBE(13);  // WG1: rescale + P . V
      release_buffer(buf, i);
      if (i + 1 < n) wgmma::bar_arrive(kBarSFree, 256);
      PROBE(11);  // WG1: the buffer's release + S_free
      if (kFp8 && i + 2 < n) {  // tile i + 2's codes into this buffer's panels 4..7
        if constexpr (kCross) mbar_wait_cluster(&xsent[buf], (i >> 1) & 1);  // once the copy to the partner read them
        issue_fp8_codes<kCross>(p, next_index, i + 2, kv_s, rawfull, tid - 128, xr);
        next_index = i + 3 < n ? issue_index<kCross>(ind, j0, j_end, i + 3, tid - 128, xr) : -1;
        PROBE(12);  // WG1 (FP8): issue of the codes (crossover: after the wait on xsent)
      }
    }
    wgmma::bar_sync(kBarEpilogue, 256);
    if constexpr (kMerge) {
      store_o_smem(o, reinterpret_cast<float*>(kv_s), 1, r0, lane);
    } else {
      const float l0 = ml_s[64 + r0], l1 = ml_s[64 + r0 + 8];
      store_o<kSplit>(p, o, b, h0, HQ, 1, r0, kSplit ? 1.f : (l0 > 0.f ? 1.f / l0 : 0.f),
                      kSplit ? 1.f : (l1 > 0.f ? 1.f / l1 : 0.f), lane);
    }
  }
  if constexpr (kMerge)  // both consumer warpgroups, once their O halves are in shared memory
    cluster_merge<kMlaWgmmaClusterMergeMax>(p, base, b, h0, HQ, tid);
  // Crossover: no CTA exits before its partner has received everything it sent (the partner's consumers arrive only
  // after their last xfull wait), so none of its copies is left in flight (the producers arrived on their way out).
  if constexpr (kCross) cluster_sync_relaxed();
}

template <bool kFp8, bool kSplit, bool kMerge, bool kF16 = false, bool kCross = false>
void launch(const MlaDecodeParams& p, int S, int chunk, cudaStream_t stream) {
  auto kernel = mla_decode_wgmma_kernel<kFp8, kSplit, kMerge, kF16, kCross>;
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Smem::total));
  launch_kernel_cluster(kernel, dim3((p.H * p.s_q + kHeads - 1) / kHeads, p.B, S), kThreads, Smem::total, stream,
                        dim3(kCross ? 2 : 1, 1, kMerge ? S : 1), p, chunk);
}

}  // namespace mla_wg

std::string mla_decode_wgmma_unsupported(const MlaDecodeParams& p) {
  const LatentLayout& l = p.layout;
  if (std::string missing = sm90a_device_missing(); !missing.empty()) return missing;
  if (l.latent_dim != mla_wg::kL || l.rope_dim != mla_wg::kR)
    return "L = 512 and R = 64 (got L = " + std::to_string(l.latent_dim) + ", R = " + std::to_string(l.rope_dim) + ")";
  if (l.fp8 && l.group != 128) return "G = 128 scales for FP8 rows (got G = " + std::to_string(l.group) + ")";
  if (l.fp8 && (l.row_bytes != mla_wg::kRowB || l.rope_offset() != mla_wg::kRopeOffB))  // the bulk feed's fixed offsets
    return "FP8 rows of " + std::to_string(mla_wg::kRowB) + " bytes with the rope at byte " +
           std::to_string(mla_wg::kRopeOffB) + " (got " + std::to_string(l.row_bytes) + ", " +
           std::to_string(l.rope_offset()) + ")";
  if (l.row_bytes % 16 != 0 || l.rope_offset() % 16 != 0 || (reinterpret_cast<uintptr_t>(p.kv) & 15u) != 0 ||
      (reinterpret_cast<uintptr_t>(p.q_latent) & 15u) != 0)
    return "16-byte aligned kv, q_latent and rows";
  return {};
}

bool mla_decode_wgmma_supported(const MlaDecodeParams& p) { return mla_decode_wgmma_unsupported(p).empty(); }

int mla_decode_wgmma_splits(int S_cap, int topk, int* chunk) {
  const int tiles = (topk + kMlaWgmmaTile - 1) / kMlaWgmmaTile;
  int S = std::max(1, std::min(S_cap, tiles));
  const int c = (tiles + S - 1) / S * kMlaWgmmaTile;
  S = S > 1 ? (topk + c - 1) / c : 1;
  if (chunk) *chunk = S > 1 ? c : topk;
  return S;
}

bool mla_decode_wgmma_crossover(const MlaDecodeParams& p, int S) {
  if (p.crossover != 2) return false;  // 0 (auto): off (S34b, H100: within -1.1% .. +1.6% of the form without it)
  const int blocks = (p.H * p.s_q + mla_wg::kHeads - 1) / mla_wg::kHeads;
  std::string missing;
  if (!p.layout.fp8) missing = "FP8 rows";
  else if (blocks % 2 != 0) missing = "an even number of 64-head blocks (got ceil(s_q H / 64) = " + std::to_string(blocks) + ")";
  else if (mla_decode_wgmma_merges_in_cluster(S)) missing = "no split-K cluster merge (S = " + std::to_string(S) + ")";
  if (!missing.empty()) throw Error("mla_decode_cuda: MlaDecodeParams.crossover = 2 needs " + missing);
  return true;
}

void mla_decode_wgmma_launch(const MlaDecodeParams& p, int S, int chunk, bool f16_operands, cudaStream_t stream) {
  require(S >= 1 && S <= 65535 && p.B <= 65535,
          "mla_decode_wgmma_launch: S = " + std::to_string(S) + ", B = " + std::to_string(p.B) + ", expected 1..65535");
  require(S == 1 || (chunk > 0 && chunk % kMlaWgmmaTile == 0 && int64_t(S) * chunk >= p.topk &&
                     (p.workspace || mla_decode_wgmma_merges_in_cluster(S))),
          "mla_decode_wgmma_launch: S = " + std::to_string(S) + ", chunk = " + std::to_string(chunk) +
              ": a split launch needs chunks of whole 64-row tiles covering topk = " + std::to_string(p.topk) +
              " and, above S = " + std::to_string(kMlaWgmmaClusterMergeMax) + ", a workspace");
  require(S > 1 || chunk >= p.topk, "mla_decode_wgmma_launch: S = 1 needs chunk >= topk (got " + std::to_string(chunk) +
                                        " < " + std::to_string(p.topk) + ")");
  require(!f16_operands || p.layout.fp8, "mla_decode_wgmma_launch: fp16 operands need FP8 rows (BF16 rows are bf16)");
  const bool merge = mla_decode_wgmma_merges_in_cluster(S);
  if (mla_decode_wgmma_crossover(p, S)) {  // FP8 rows, no merge
    if (f16_operands) {
      if (S > 1) mla_wg::launch<true, true, false, true, true>(p, S, chunk, stream);
      else mla_wg::launch<true, false, false, true, true>(p, S, chunk, stream);
    } else {
      if (S > 1) mla_wg::launch<true, true, false, false, true>(p, S, chunk, stream);
      else mla_wg::launch<true, false, false, false, true>(p, S, chunk, stream);
    }
  } else if (p.layout.fp8 && f16_operands) {
    if (merge) mla_wg::launch<true, true, true, true>(p, S, chunk, stream);
    else if (S > 1) mla_wg::launch<true, true, false, true>(p, S, chunk, stream);
    else mla_wg::launch<true, false, false, true>(p, S, chunk, stream);
  } else if (p.layout.fp8) {
    if (merge) mla_wg::launch<true, true, true>(p, S, chunk, stream);
    else if (S > 1) mla_wg::launch<true, true, false>(p, S, chunk, stream);
    else mla_wg::launch<true, false, false>(p, S, chunk, stream);
  } else {
    if (merge) mla_wg::launch<false, true, true>(p, S, chunk, stream);
    else if (S > 1) mla_wg::launch<false, true, false>(p, S, chunk, stream);
    else mla_wg::launch<false, false, false>(p, S, chunk, stream);
  }
}

}  // namespace glm5
