// CUDA kernels of kv_cast.h: FP8 latent rows -> BF16 rows. Memory-bound.
// Bytes moved: rows * (row_bytes + 2*(L+R)) (GLM-5: 656 + 1152; gather-cast: plus 4 bytes of index
// in, 4 out per row).
//
// 16-byte tile path (row layout and both pointers allow it; GLM-5). Design, reasoned before measuring:
// - Staging. A tile of T rows (T <= KvCastTuning::tile_rows, default 16; GLM-5 16 x 656 = 10,496 B) is copied into
//   shared memory with 16-byte cp.async.cg (L1 bypassed): for the full pool one contiguous run, so
//   every warp load instruction covers 512 contiguous bytes; for the gather one 656-B row per warp
//   (lane c: chunks c, c+32), row address from indices[] loaded one iteration ahead. A -1 index is
//   a zero-filled stage (cp.async with 0 source bytes), which casts to the zero row the twin writes.
// - Casting. The T output rows are contiguous in `out` (T x 1152 B), so the tile's output is a flat
//   run of 16-byte chunks; thread t writes chunks t, t+256, ...: every warp store is 512 contiguous
//   bytes, each 16-byte store whole (8 codes -> 8 bf16 with the group scale, or 16 B of rope), with
//   st.global.cs (evict-first: the output is written once and not re-read by this kernel). The old
//   item kernel stored each 16-B load as two 16-B stores 32 B apart (half-sector writes) and paid a
//   divide and a 4-B scale load per item; here the scale comes from shared memory and (row, chunk)
//   walks incrementally (no divide in the loop; the scale group via a host-computed multiply-high).
// - Bytes in flight. 3 stages per block (default): tile j is cast while tiles j+1, j+2 load (~21 KB per
//   block in flight); 31.5 KB of shared memory per block -> up to 7 blocks / SM (by registers maybe
//   6): ~120+ KB of loads requested per SM, far above Little's law for HBM3 (4.8 TB/s x ~0.8 us /
//   132 SMs ~ 30 KB / SM). Stores are fire-and-forget behind that.
// - Grid. Persistent: the blocks resident at once (occupancy API, shared-memory carveout at max), each
//   taking tiles b, b + grid, ...; the tile size is balanced on the host so every block gets the
//   same number of tiles (GLM-5 pool 495,000 rows: T = 16, 33-34 tiles per block, <= 1.5% imbalance).
// - Instruction budget. At 4.2 TB/s an SM moves ~16 B/clk of which ~10 B/clk output: ~0.65 output
//   chunks/clk/SM at ~30 instructions each (~20 thread-instr/clk of 128) and ~8 conversions each (~5
//   of ~16/clk): neither issue nor the conversion pipe should limit; shared memory traffic ~14 B/clk of
//   128. Expected: the full-pool cast at ~90-95% of the D2D copy rate (it is a copy with a 1.76x
//   write/read ratio); the gather at ~85-90% for B >= 32 (656-B rows are 16-B but not 32/64-B
//   aligned, random rows lose DRAM locality: ~2-5% more sectors than the byte model), B <= 8 is
//   latency / launch bound (<= 30 MB moved).
//   Measured (H200, round 1, cold L2, % of the 4226 GB/s D2D copy): full pool 247 us = 85.7% (the
//   item kernel: 343 us, 61.7%); gather B 8 / 32 / 64 / 128: 51.9 / 71.5 / 77.8 / 80.9%. Below the
//   plan: GpuKvCast.TuningSweep times every KvCastTuning against the copy and a memset (write-only
//   rate) so the defaults can follow the measurement.
//   Session 12 (2026-11-30): the full-pool cast moved to the TMA bulk kernel below (kKvCastTuning): 91.1-91.6% of
//   copy against 87.8-88.5%; the gather keeps the tile kernel (79-80% at B 128; the bulk gather is slower).
// 4-byte fallback (glm5-tiny 132-byte rows, an unaligned pointer): one warp per row, 32-bit words.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include "common/error.h"
#include "kernels/kv_cast.cuh"
#include "kernels/kv_cast.h"
#include "kernels/launch.cuh"
#include "kernels/mbarrier.cuh"

namespace glm5 {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

// 4-byte path: one warp dequantizes FP8 row `src` (null: writes a zero row) into BF16 row `dst`.
__device__ void cast_row_warp(const uint8_t* __restrict__ src, uint16_t* __restrict__ dst, const LatentLayout& l,
                              int lane) {
  const int L = l.latent_dim, R = l.rope_dim;
  uint8_t* out = reinterpret_cast<uint8_t*>(dst);
  const int latent_words = L / 4, rope_words = R / 2;
  for (int w = lane; w < latent_words + rope_words; w += 32) {
    if (w < latent_words) {
      uint32_t v = src ? __ldg(reinterpret_cast<const uint32_t*>(src) + w) : 0u;
      float scale = src ? __ldg(reinterpret_cast<const float*>(src + L) + (4 * w) / l.group) : 0.f;
      uint2 a = dequant4_bf16(v, scale);
      uint32_t* o = reinterpret_cast<uint32_t*>(out + 8 * w);
      o[0] = a.x;
      o[1] = a.y;
    } else {
      const int rw = w - latent_words;
      uint32_t v = src ? __ldg(reinterpret_cast<const uint32_t*>(src + l.rope_offset()) + rw) : 0u;
      reinterpret_cast<uint32_t*>(out + 2 * L)[rw] = v;
    }
  }
}

// ---- 16-byte tile path -------------------------------------------------------------------------

constexpr int kMaxTileRows = 32;                      // KvCastTuning::tile_rows bound
constexpr int kMaxRowsPerWarp = kMaxTileRows / kWarps;  // gather: rows whose loads one warp issues
constexpr int kMaxSmemBytes = 227 * 1024;             // all stages of one block
static_assert(kMaxTileRows % kWarps == 0, "gather loads: whole rows per warp");

// 16-byte asynchronous global -> shared copy (sm_80+ cp.async, L1 bypassed); src_bytes 0 writes 16
// zero bytes and reads nothing (the gather's -1 rows).
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(smem)), "l"(gmem), "r"(src_bytes) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// Per-launch constants of the tile kernels, computed on the host (tile_plan()).
struct TileGeom {
  int tile_rows = 1;        // rows per tile, 1..kMaxTileRows (balanced over the grid)
  int64_t tiles = 0;        // ceil(rows / tile_rows)
  int out_chunks = 0;       // 16-byte BF16 chunks per output row, 2(L+R)/16 (GLM-5: 72)
  int latent_chunks = 0;    // of which latent: L/8, 8 codes each (GLM-5: 64)
  uint32_t group_magic = 0; // ceil(2^32 / (G/8)): latent chunk k's scale group = umulhi(k, magic)
  int step_rows = 0, step_k = 0;   // kThreads / out_chunks, kThreads % out_chunks (walk of o += kThreads)
};

// Dequantizes the `n` staged FP8 rows at `tile` (row_bytes apart in shared memory) into the n
// contiguous BF16 rows at `out`: output chunk o = threadIdx.x + i*kThreads (row o / out_chunks,
// chunk o % out_chunks, both walked incrementally), so each warp stores 512 contiguous bytes.
// `zero` (the bulk gather's staged indices, null elsewhere): rows whose index is negative are written as zeros (their
// stage holds stale bytes: a bulk copy cannot zero-fill). `out` may point to shared memory (the bulk path's
// output stage, stored to global by one cp.async.bulk).
template <bool kStreamingStores>
__device__ __forceinline__ void cast_tile(const uint8_t* __restrict__ tile, int n, uint8_t* __restrict__ out,
                                          const LatentLayout& l, const TileGeom& g, const int32_t* zero = nullptr) {
  const int total = n * g.out_chunks;
  int r = int(threadIdx.x) / g.out_chunks, k = int(threadIdx.x) % g.out_chunks;
  for (int o = threadIdx.x; o < total; o += kThreads) {
    const uint8_t* row = tile + r * l.row_bytes;
    uint4 v;
    if (zero && zero[r] < 0) {
      v = make_uint4(0u, 0u, 0u, 0u);
    } else if (k < g.latent_chunks) {
      const uint2 codes = *reinterpret_cast<const uint2*>(row + 8 * k);
      const int group = int(__umulhi(uint32_t(k), g.group_magic));
      const float scale = *reinterpret_cast<const float*>(row + l.latent_dim + 4 * group);
      const uint2 a = dequant4_bf16(codes.x, scale), b = dequant4_bf16(codes.y, scale);
      v = make_uint4(a.x, a.y, b.x, b.y);
    } else {
      v = *reinterpret_cast<const uint4*>(row + l.rope_offset() + 16 * (k - g.latent_chunks));
    }
    if (kStreamingStores) __stcs(reinterpret_cast<uint4*>(out) + o, v);  // write-once output: evict-first
    else reinterpret_cast<uint4*>(out)[o] = v;
    r += g.step_rows;
    k += g.step_k;
    if (k >= g.out_chunks) {
      k -= g.out_chunks;
      ++r;
    }
  }
}

// Full-pool cast: block b casts tiles b, b + grid, ...; tile j + kStages-1 is loading (one
// contiguous run of tile_rows * row_bytes bytes, 16-byte cp.async per thread) while tile j is cast.
template <int kStages, bool kStreamingStores>
__global__ void __launch_bounds__(kThreads) kv_cast_tile_kernel(KvCastParams p, TileGeom g) {
  pdl_begin();
  extern __shared__ __align__(16) uint8_t smem[];
  const LatentLayout l = p.layout;
  const int stage_bytes = g.tile_rows * l.row_bytes;
  const int64_t out_row_bytes = 2 * int64_t(l.latent_dim + l.rope_dim);
  const int my_tiles = g.tiles > blockIdx.x ? int((g.tiles - 1 - blockIdx.x) / gridDim.x + 1) : 0;
  auto issue = [&](int j) {
    if (j < my_tiles) {
      const int64_t row0 = (int64_t(blockIdx.x) + int64_t(j) * gridDim.x) * g.tile_rows;
      const int n = int(min(int64_t(g.tile_rows), p.rows - row0));
      const int chunks = n * l.row_bytes / 16;
      const uint8_t* src = p.pool + row0 * l.row_bytes;
      uint8_t* dst = smem + (j % kStages) * stage_bytes;
      for (int q = threadIdx.x; q < chunks; q += kThreads) cp_async16(dst + 16 * q, src + 16 * q, 16);
    }
    cp_async_commit();  // an empty group past the end keeps the wait_group count uniform
  };
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) issue(s);
  for (int j = 0; j < my_tiles; ++j) {
    issue(j + kStages - 1);
    cp_async_wait<kStages - 1>();  // this thread's copies of tile j have landed ...
    __syncthreads();               // ... and everyone's
    const int64_t row0 = (int64_t(blockIdx.x) + int64_t(j) * gridDim.x) * g.tile_rows;
    const int n = int(min(int64_t(g.tile_rows), p.rows - row0));
    cast_tile<kStreamingStores>(smem + (j % kStages) * stage_bytes, n,
                                reinterpret_cast<uint8_t*>(p.out) + row0 * out_row_bytes, l, g);
    __syncthreads();  // stage j % kStages is reloaded by the next iteration's issue
  }
  cp_async_wait<0>();
}

// Gather-cast: as the full-pool cast, but tile row r is pool row indices[row0 + r]; warp w issues
// the copies of rows w, w + kWarps, ... (lane c: 16-byte chunks c, c + 32, ...), a negative index
// zero-fills the staged row (cp.async with 0 source bytes), so it casts to a zero row. The indices
// of the tile to issue next are loaded one iteration ahead, so their latency is hidden too.
template <int kStages, bool kStreamingStores>
__global__ void __launch_bounds__(kThreads, 6) kv_gather_cast_tile_kernel(KvGatherCastParams p, TileGeom g) {
  pdl_begin();
  extern __shared__ __align__(16) uint8_t smem[];
  const LatentLayout l = p.layout;
  const int stage_bytes = g.tile_rows * l.row_bytes, in_chunks = l.row_bytes / 16;
  const int64_t out_row_bytes = 2 * int64_t(l.latent_dim + l.rope_dim);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int my_tiles = g.tiles > blockIdx.x ? int((g.tiles - 1 - blockIdx.x) / gridDim.x + 1) : 0;
  // indices of this warp's rows of tile j (kNoRow: past the tile's end)
  constexpr int32_t kNoRow = INT32_MIN;
  auto load_indices = [&](int j, int32_t (&idx)[kMaxRowsPerWarp]) {
    const int64_t row0 = (int64_t(blockIdx.x) + int64_t(j) * gridDim.x) * g.tile_rows;
#pragma unroll
    for (int rr = 0; rr < kMaxRowsPerWarp; ++rr) {
      const int r = warp + rr * kWarps;
      idx[rr] = (j < my_tiles && r < g.tile_rows && row0 + r < p.count) ? max(__ldg(p.indices + row0 + r), -1)
                                                                          : kNoRow;  // any negative: -1
    }
  };
  auto issue = [&](int j, const int32_t (&idx)[kMaxRowsPerWarp]) {
    if (j < my_tiles) {
      const int64_t row0 = (int64_t(blockIdx.x) + int64_t(j) * gridDim.x) * g.tile_rows;
      uint8_t* dst = smem + (j % kStages) * stage_bytes;
#pragma unroll
      for (int rr = 0; rr < kMaxRowsPerWarp; ++rr) {
        if (idx[rr] == kNoRow) continue;
        const int r = warp + rr * kWarps;
        const bool valid = idx[rr] >= 0;
        const uint8_t* src = valid ? p.pool + int64_t(idx[rr]) * l.row_bytes : p.pool;
        for (int c = lane; c < in_chunks; c += 32)
          cp_async16(dst + r * l.row_bytes + 16 * c, src + 16 * c, valid ? 16 : 0);
        if (lane == 0) p.compact_indices[row0 + r] = valid ? int32_t(row0 + r) : -1;
      }
    }
    cp_async_commit();
  };
  int32_t idx[kMaxRowsPerWarp];
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    load_indices(s, idx);
    issue(s, idx);
  }
  load_indices(kStages - 1, idx);
  for (int j = 0; j < my_tiles; ++j) {
    issue(j + kStages - 1, idx);
    load_indices(j + kStages, idx);  // consumed next iteration
    cp_async_wait<kStages - 1>();
    __syncthreads();
    const int64_t row0 = (int64_t(blockIdx.x) + int64_t(j) * gridDim.x) * g.tile_rows;
    const int n = int(min(int64_t(g.tile_rows), p.count - row0));
    cast_tile<kStreamingStores>(smem + (j % kStages) * stage_bytes, n,
                                reinterpret_cast<uint8_t*>(p.out) + row0 * out_row_bytes, l, g);
    __syncthreads();
  }
  cp_async_wait<0>();
}

// ---- TMA bulk path (KvCastTuning::bulk; sm_90 cp.async.bulk) ------------------------------------
// Why: the probe tools/probe/cast_mix_probe.cu (2026-11-30, H200) moved the cast's exact traffic (656 B read, 1152 B
// written per row) with plain 16-byte loads and stores at 82-86% of the D2D copy rate, below the engine's tile kernel
// (88.3%), although a read-only stream reaches 99% and a write-only one 108%: the loss is in how the SMs interleave
// the two streams, not in the bytes. Here the copy engine of each SM (TMA) moves whole tiles both ways:
// - one thread loads tile j as one cp.async.bulk of tile_rows x row_bytes (full pool) or warp 0 as one 656-B bulk
//   copy per row (gather, lane r: row r; its index staged in shared memory), completing on the stage's mbarrier;
// - all threads cast the staged FP8 rows into an output stage in shared memory (T x 1152 B, the tile's contiguous
//   output run), fence it to the async proxy, and one thread stores it with one cp.async.bulk shared -> global;
// - two output stages: before a stage is rewritten, its store two tiles back must have read it
//   (cp.async.bulk.wait_group.read 1). A gather row with a negative index is cast as zeros (cast_tile's mask).
// Prediction (before measuring): the full-pool cast from 88% to >= 90% of copy if the interleaving is what loses.
constexpr int kBulkOutStages = 2;
// Shared memory of the bulk kernels: kStages input stages, kBulkOutStages output stages, then kStages mbarriers and
// (gather) kStages x kMaxTileRows staged indices.
__host__ __device__ constexpr size_t bulk_smem_bytes(int stages, int tile_rows, int row_bytes, int out_row_bytes) {
  return size_t(stages) * tile_rows * row_bytes + size_t(kBulkOutStages) * tile_rows * out_row_bytes +
         size_t(stages) * (8 + 4 * kMaxTileRows);
}

// One kernel for both casts: indices null = the full pool (tile j = rows [row0, row0 + n) of the pool). As on the
// other paths, gather indices must be < the pool's rows (not checkable here): a larger one is an out-of-bounds bulk
// copy (a fault) where the tile kernel would read stray bytes.
struct BulkCastArgs {
  const uint8_t* pool;
  LatentLayout layout;
  const int32_t* indices;    // gather: [count] pool slots; null: full pool
  int32_t* compact_indices;  // gather only
  uint8_t* out;              // [count, L + R] bf16
  int64_t count;
};
template <int kStages>
__global__ void __launch_bounds__(kThreads) kv_cast_bulk_kernel(BulkCastArgs p, TileGeom g) {
  pdl_begin();
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ __align__(128) uint8_t smem[];
  const LatentLayout l = p.layout;
  const int T = g.tile_rows, in_bytes = T * l.row_bytes, out_row_bytes = 2 * (l.latent_dim + l.rope_dim);
  uint8_t* in_s = smem;
  uint8_t* out_s = smem + size_t(kStages) * in_bytes;
  uint64_t* bar = reinterpret_cast<uint64_t*>(out_s + size_t(kBulkOutStages) * T * out_row_bytes);
  int32_t* idx_s = reinterpret_cast<int32_t*>(bar + kStages);  // [kStages][kMaxTileRows]
  const bool gather = p.indices != nullptr;
  const int my_tiles = g.tiles > blockIdx.x ? int((g.tiles - 1 - blockIdx.x) / gridDim.x + 1) : 0;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) mbar_init(&bar[s], 1);
    mbar_init_fence();
  }
  __syncthreads();
  auto tile_row0 = [&](int j) { return (int64_t(blockIdx.x) + int64_t(j) * gridDim.x) * T; };
  auto issue = [&](int j) {
    if (j >= my_tiles) return;
    const int s = j % kStages;
    const int64_t row0 = tile_row0(j);
    const int n = int(min(int64_t(T), p.count - row0));
    uint8_t* dst = in_s + size_t(s) * in_bytes;
    if (!gather) {
      if (threadIdx.x == 0) {
        mbar_expect_tx(&bar[s], unsigned(n * l.row_bytes));
        bulk_copy_g2s(dst, p.pool + row0 * l.row_bytes, unsigned(n * l.row_bytes), &bar[s]);
      }
    } else if (threadIdx.x < 32) {
      const int lane = threadIdx.x;
      const int32_t t = lane < n ? max(__ldg(p.indices + row0 + lane), -1) : -1;
      if (lane < T) idx_s[s * kMaxTileRows + lane] = t;
      if (lane < n) p.compact_indices[row0 + lane] = t >= 0 ? int32_t(row0 + lane) : -1;
      const unsigned valid = __popc(__ballot_sync(0xffffffffu, t >= 0));
      if (lane == 0) mbar_expect_tx(&bar[s], valid * unsigned(l.row_bytes));
      __syncwarp();
      if (t >= 0) bulk_copy_g2s(dst + lane * l.row_bytes, p.pool + int64_t(t) * l.row_bytes, unsigned(l.row_bytes), &bar[s]);
    }
  };
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) issue(s);
  for (int j = 0; j < my_tiles; ++j) {
    issue(j + kStages - 1);  // its stage was last read in iteration j - 1, before that iteration's second barrier
    const int s = j % kStages, o = j % kBulkOutStages;
    if (threadIdx.x == 0) bulk_wait_read<kBulkOutStages - 1>();  // the store of tile j - 2 has read out stage o
    __syncthreads();  // also orders idx_s (written by warp 0 in issue) before the cast reads it
    mbar_wait(&bar[s], unsigned(j / kStages) & 1u);
    const int64_t row0 = tile_row0(j);
    const int n = int(min(int64_t(T), p.count - row0));
    uint8_t* ostage = out_s + size_t(o) * T * out_row_bytes;
    cast_tile<false>(in_s + size_t(s) * in_bytes, n, ostage, l, g, gather ? idx_s + s * kMaxTileRows : nullptr);
    fence_proxy_async();  // this thread's shared-memory writes, visible to the bulk store
    __syncthreads();
    if (threadIdx.x == 0) bulk_store_s2g(p.out + row0 * out_row_bytes, ostage, unsigned(n * out_row_bytes));
  }
  if (threadIdx.x == 0) bulk_wait_all();
#else
  __trap();  // the library is built for sm_90 only (CMakeLists.txt); a build for older GPUs must not write nothing
#endif
}

__global__ void __launch_bounds__(kThreads) kv_cast_kernel(KvCastParams p) {
  pdl_begin();
  const int lane = threadIdx.x % 32;
  const int64_t W = p.layout.latent_dim + p.layout.rope_dim;
  for (int64_t r = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32; r < p.rows; r += int64_t(gridDim.x) * kWarps)
    cast_row_warp(p.pool + r * p.layout.row_bytes, p.out + r * W, p.layout, lane);
}

__global__ void __launch_bounds__(kThreads) kv_gather_cast_kernel(KvGatherCastParams p) {
  pdl_begin();
  const int lane = threadIdx.x % 32;
  const int64_t W = p.layout.latent_dim + p.layout.rope_dim;
  for (int64_t i = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32; i < p.count; i += int64_t(gridDim.x) * kWarps) {
    const int32_t t = p.indices[i];
    cast_row_warp(t >= 0 ? p.pool + int64_t(t) * p.layout.row_bytes : nullptr, p.out + i * W, p.layout, lane);
    if (lane == 0) p.compact_indices[i] = t >= 0 ? int32_t(i) : -1;
  }
}


// 16-byte path: FP8 rows, their rope part and BF16 rows all 16-byte multiples, pointers aligned.
bool can_vectorize(const LatentLayout& l, const void* pool, const void* out) {
  return l.latent_dim <= 65536 && l.group % 16 == 0 && l.row_bytes % 16 == 0 && l.rope_offset() % 16 == 0 &&
         (2 * l.rope_dim) % 16 == 0 && (2 * (l.latent_dim + l.rope_dim)) % 16 == 0 && aligned16(pool) &&
         aligned16(out);
}

void require_aligned4(const void* ptr, const char* who, const char* field) {
  require((reinterpret_cast<uintptr_t>(ptr) & 3u) == 0,
          std::string(who) + ": " + field + " must be 4-byte aligned (the kernel moves 32-bit words)");
}

int grid_for(int64_t rows) {
  const int sms = current_device_sm_count();
  const int64_t needed = (rows + kWarps - 1) / kWarps;
  return int(std::min<int64_t>(needed, int64_t(sms) * 8));
}

// Launch plan of a tile kernel over `rows` rows: dynamic shared memory for kStages tiles of the
// largest tile that fits, a persistent grid of the blocks resident at once (shared memory carveout
// at its maximum: the kernels use no L1-cached loads), and the tile size balanced so that every block
// gets the same number of tiles: with k = ceil(rows / (resident * max_rows)) tiles per block,
// tile_rows = ceil(rows / (k * resident)). grid 0: the row does not fit (use the 4-byte path).
struct TilePlan {
  TileGeom geom;
  int grid = 0;
  size_t smem = 0;
};
// `bulk`: the bulk kernels' shared memory (bulk_smem_bytes: output stages, barriers and indices too).
template <class Kernel>
TilePlan tile_plan(Kernel kernel, int64_t rows, const LatentLayout& l, int stages, int tile_rows, bool bulk = false) {
  TilePlan plan;
  const int out_row_bytes = 2 * (l.latent_dim + l.rope_dim);
  const auto smem_for = [&](int t) {
    return bulk ? bulk_smem_bytes(stages, t, l.row_bytes, out_row_bytes) : size_t(stages) * t * l.row_bytes;
  };
  int max_rows = tile_rows;
  while (max_rows >= 1 && smem_for(max_rows) > size_t(kMaxSmemBytes)) --max_rows;
  if (max_rows < 1) return plan;
  plan.smem = smem_for(max_rows);
  const int sms = current_device_sm_count();
  int per_sm = 0;
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                  int(cudaSharedmemCarveoutMaxShared)));
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(plan.smem)));
  CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, plan.smem));
  const int64_t resident = int64_t(sms) * std::max(per_sm, 1);
  const int64_t per_block = (rows + resident * max_rows - 1) / (resident * max_rows);
  TileGeom& g = plan.geom;
  g.tile_rows = int(std::min<int64_t>(max_rows, (rows + per_block * resident - 1) / (per_block * resident)));
  g.tiles = (rows + g.tile_rows - 1) / g.tile_rows;
  g.out_chunks = (2 * (l.latent_dim + l.rope_dim)) / 16;
  g.latent_chunks = l.latent_dim / 8;
  const uint64_t d = uint64_t(l.group / 8);  // latent chunks per scale group (>= 2: G >= 16)
  g.group_magic = uint32_t(((uint64_t(1) << 32) + d - 1) / d);
  g.step_rows = kThreads / g.out_chunks;
  g.step_k = kThreads % g.out_chunks;
  plan.grid = int(std::min<int64_t>(resident, g.tiles));
  return plan;
}

template <int S, bool CS>
bool launch_cast_variant(const KvCastParams& p, int tile_rows, cudaStream_t stream) {
  const TilePlan plan = tile_plan(kv_cast_tile_kernel<S, CS>, p.rows, p.layout, S, tile_rows);
  if (plan.grid == 0) return false;
  launch_kernel(kv_cast_tile_kernel<S, CS>, plan.grid, kThreads, plan.smem, stream, p, plan.geom);
  return true;
}
template <int S, bool CS>
bool launch_gather_variant(const KvGatherCastParams& p, int tile_rows, cudaStream_t stream) {
  const TilePlan plan = tile_plan(kv_gather_cast_tile_kernel<S, CS>, p.count, p.layout, S, tile_rows);
  if (plan.grid == 0) return false;
  launch_kernel(kv_gather_cast_tile_kernel<S, CS>, plan.grid, kThreads, plan.smem, stream, p, plan.geom);
  return true;
}
template <int S>
bool launch_bulk_variant(const BulkCastArgs& a, int tile_rows, cudaStream_t stream) {
  const TilePlan plan = tile_plan(kv_cast_bulk_kernel<S>, a.count, a.layout, S, tile_rows, true);
  if (plan.grid == 0) return false;
  launch_kernel(kv_cast_bulk_kernel<S>, plan.grid, kThreads, plan.smem, stream, a, plan.geom);
  return true;
}
bool launch_bulk(const BulkCastArgs& a, const KvCastTuning& t, cudaStream_t stream) {
  if (t.stages == 2) return launch_bulk_variant<2>(a, t.tile_rows, stream);
  if (t.stages == 3) return launch_bulk_variant<3>(a, t.tile_rows, stream);
  return launch_bulk_variant<4>(a, t.tile_rows, stream);
}
// The tile kernel of `t` (false: the layout's row does not fit; use the 4-byte path).
bool launch_cast_tiles(const KvCastParams& p, const KvCastTuning& t, cudaStream_t stream) {
  if (t.bulk)
    return launch_bulk({p.pool, p.layout, nullptr, nullptr, reinterpret_cast<uint8_t*>(p.out), p.rows}, t, stream);
  if (t.streaming_stores) {
    if (t.stages == 2) return launch_cast_variant<2, true>(p, t.tile_rows, stream);
    if (t.stages == 3) return launch_cast_variant<3, true>(p, t.tile_rows, stream);
    return launch_cast_variant<4, true>(p, t.tile_rows, stream);
  }
  if (t.stages == 2) return launch_cast_variant<2, false>(p, t.tile_rows, stream);
  if (t.stages == 3) return launch_cast_variant<3, false>(p, t.tile_rows, stream);
  return launch_cast_variant<4, false>(p, t.tile_rows, stream);
}
bool launch_gather_tiles(const KvGatherCastParams& p, const KvCastTuning& t, cudaStream_t stream) {
  if (t.bulk)
    return launch_bulk({p.pool, p.layout, p.indices, p.compact_indices, reinterpret_cast<uint8_t*>(p.out), p.count}, t,
                       stream);
  if (t.streaming_stores) {
    if (t.stages == 2) return launch_gather_variant<2, true>(p, t.tile_rows, stream);
    if (t.stages == 3) return launch_gather_variant<3, true>(p, t.tile_rows, stream);
    return launch_gather_variant<4, true>(p, t.tile_rows, stream);
  }
  if (t.stages == 2) return launch_gather_variant<2, false>(p, t.tile_rows, stream);
  if (t.stages == 3) return launch_gather_variant<3, false>(p, t.tile_rows, stream);
  return launch_gather_variant<4, false>(p, t.tile_rows, stream);
}

void validate_tuning(const KvCastTuning& t, const char* who) {
  require(t.tile_rows >= 1 && t.tile_rows <= kMaxTileRows,
          std::string(who) + ": tuning.tile_rows = " + std::to_string(t.tile_rows) + ", expected 1..32");
  require(t.stages >= 2 && t.stages <= 4,
          std::string(who) + ": tuning.stages = " + std::to_string(t.stages) + ", expected 2, 3 or 4");
}

}  // namespace

void kv_cast_cuda(const KvCastParams& p, cudaStream_t stream) { kv_cast_cuda(p, stream, kKvCastTuning); }

void kv_cast_cuda(const KvCastParams& p, cudaStream_t stream, const KvCastTuning& tuning) {
  validate_kv_cast_params(p);
  validate_tuning(tuning, "kv_cast_cuda");
  if (p.rows == 0) return;
  require_aligned4(p.pool, "kv_cast_cuda", "pool");
  require_aligned4(p.out, "kv_cast_cuda", "out");
  if (!(can_vectorize(p.layout, p.pool, p.out) && launch_cast_tiles(p, tuning, stream)))
    launch_kernel(kv_cast_kernel, grid_for(p.rows), kThreads, 0, stream, p);
  CUDA_CHECK_LAUNCH();
}

void kv_gather_cast_cuda(const KvGatherCastParams& p, cudaStream_t stream) {
  kv_gather_cast_cuda(p, stream, kKvGatherCastTuning);
}

void kv_gather_cast_cuda(const KvGatherCastParams& p, cudaStream_t stream, const KvCastTuning& tuning) {
  validate_kv_gather_cast_params(p);
  validate_tuning(tuning, "kv_gather_cast_cuda");
  if (p.count == 0) return;
  require_aligned4(p.pool, "kv_gather_cast_cuda", "pool");
  require_aligned4(p.out, "kv_gather_cast_cuda", "out");
  if (!(can_vectorize(p.layout, p.pool, p.out) && launch_gather_tiles(p, tuning, stream)))
    launch_kernel(kv_gather_cast_kernel, grid_for(p.count), kThreads, 0, stream, p);
  CUDA_CHECK_LAUNCH();
}

}  // namespace glm5
