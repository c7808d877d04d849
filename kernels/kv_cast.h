// The two cast paths of DESIGN.md: FP8 latent rows -> BF16 rows [L + R] (latent dequantized with
// its per-group scale, then rope copied), either for the whole pool or for gathered top-k rows.
#pragma once
#include <cstdint>

#include <cuda_runtime.h>

#include "kernels/kv_layout.h"

namespace glm5 {
// Dequantizes FP8 latent row `row` (layout `l`) into L + R bf16 values `out` (the cast paths' math;
// mla_decode's fp8 path rounds the same way, so all three KV paths see identical K/V values -- except its fp16-operand
// wgmma form, MlaDecodeKernel::WgmmaF16, which rounds e4m3 * scale to fp16 instead).
GLM5_HD void dequant_latent_row_bf16(const uint8_t* row, const LatentLayout& l, uint16_t* out) {
  for (int i = 0; i < l.latent_dim; ++i) {
    float scale;
    memcpy(&scale, row + l.scale_offset() + 4 * (i / l.group), 4);
    out[i] = float_to_bf16_bits(e4m3_bits_to_float(row[i]) * scale);
  }
  for (int i = 0; i < l.rope_dim; ++i) memcpy(out + l.latent_dim + i, row + l.rope_offset() + 2 * i, 2);
}
}  // namespace glm5

namespace glm5 {

// `cast` path: every row of the pool. bytes = rows * (row_bytes + 2*(L+R)).
struct KvCastParams {
  const uint8_t* pool;   // [rows, layout.row_bytes] FP8 rows
  LatentLayout layout;   // must be fp8
  uint16_t* out;         // [rows, L + R] bf16
  int64_t rows = 0;
};
// Value i < L of a row: round_bf16(e4m3(q[i]) * scale[i / G]); values L.. L+R-1: the rope bf16 bits.
// Throws glm5::Error on a non-fp8 layout, null pointers or rows < 0.
void validate_kv_cast_params(const KvCastParams& p);
void kv_cast_cpu(const KvCastParams& p);
void kv_cast_cuda(const KvCastParams& p, cudaStream_t stream);

// Knobs of the CUDA 16-byte tile path (kv_cast.cu header): tests and benchmarks sweep them; any value gives the same
// output bytes. What the engine runs: kKvCastTuning for the full-pool cast, kKvGatherCastTuning for the gather-cast.
// The struct's own defaults (tile_rows 16, stages 2, plain stores) are the gather's, from the H200 sweep
// (GpuKvCast.TuningSweep, 2026-11-29 device call B, % of a 1 GiB copy): cast 87.3%, gather B32 70.3%, B128 79.9%,
// against 85.8 / 63.1-67.5 / 78.9% for the first defaults (16, 3, streaming).
struct KvCastTuning {
  int tile_rows = 16;             // FP8 rows staged per tile, 1..32 (fewer when the row is large)
  int stages = 2;                 // tiles per block in flight (1 cast + stages-1 loading): 2, 3 or 4
  bool streaming_stores = false;  // st.global.cs (L2 evict-first) for the write-once output
  // TMA bulk copies both ways (kv_cast.cu "TMA bulk path"): tiles loaded by cp.async.bulk, cast into a shared-memory
  // output stage, stored by one cp.async.bulk; streaming_stores is then ignored.
  bool bulk = false;
};
// The full-pool cast: TMA bulk, 32-row tiles, 3 stages (one 256-thread block per SM: 2 x 21 KB of loads in flight).
// H200, 2026-11-30 (GpuKvCast.TuningSweep and tools/probe/cast_mix_probe.cu, cold L2, 495,000 rows): 91.1-91.6% of
// the D2D copy in three runs, against 87.8-88.5% for the 16-row cp.async tiles; the bulk gather at 32 rows is 44-49%
// (its 32 656-byte copies per tile are issued by one warp), so the gather keeps kKvGatherCastTuning.
inline constexpr KvCastTuning kKvCastTuning{32, 3, false, true};
inline constexpr KvCastTuning kKvGatherCastTuning{};
// Throws glm5::Error as the 2-argument form, and on tile_rows outside 1..32 or stages outside 2..4.
void kv_cast_cuda(const KvCastParams& p, cudaStream_t stream, const KvCastTuning& tuning);

// `gather-cast` path: row i of `out` is pool row indices[i] (index -1: a zero row).
// Also writes compact_indices[i] = indices[i] < 0 ? -1 : i, so attention can read `out` directly.
struct KvGatherCastParams {
  const uint8_t* pool;
  LatentLayout layout;        // must be fp8
  const int32_t* indices;     // [count] pool slots (e.g. [B, topk] flattened)
  uint16_t* out;              // [count, L + R] bf16
  int32_t* compact_indices;   // [count]
  int64_t count = 0;
};
// Throws glm5::Error on a non-fp8 layout, null pointers or count < 0. The CPU twin also throws on an
// index < -1; the kernel treats any negative index as -1.
void validate_kv_gather_cast_params(const KvGatherCastParams& p);
void kv_gather_cast_cpu(const KvGatherCastParams& p);
void kv_gather_cast_cuda(const KvGatherCastParams& p, cudaStream_t stream);
void kv_gather_cast_cuda(const KvGatherCastParams& p, cudaStream_t stream, const KvCastTuning& tuning);

}  // namespace glm5
