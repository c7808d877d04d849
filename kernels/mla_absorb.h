// MLA weight absorption for decode (DeepSeek-V2 paper, section 2.1.2; FlashMLA's decode interface):
// kv_b_proj [H*(nope+v), L] holds, per head h, W_UK[h] = rows h*(nope+v) .. +nope and
// W_UV[h] = rows h*(nope+v)+nope .. +v.
//   absorb:   q_latent[b,h,c] = sum_d q_nope[b,h,d] * W_UK[h][d][c]
//   unabsorb: out[b, h*v + j] = sum_c o_latent[b,h,c] * W_UV[h][j][c]
#pragma once
#include <cuda_runtime.h>

#include <cstddef>

#include "common/dtype.h"

namespace glm5 {

struct MlaAbsorbParams {
  const float* q;        // [B, H, qk_head_dim]: q_nope is the first `nope` floats of each head
  const void* kv_b;      // [H*(nope+v), L] in kv_b_dtype (F32 or BF16)
  DType kv_b_dtype = DType::F32;
  float* q_latent;       // [B, H, L]
  int B = 0, H = 0, nope = 0, v = 0, L = 0;
  int q_head_stride = 0;  // floats between heads of q (qk_head_dim)
  bool tensor_cores = true;  // false: the dispatch leaves the tensor-core kernels out (EngineOptions::absorb_tc)
};
// Throws glm5::Error naming `op` and the field unless pointers are non-null, B, H, nope, v, L > 0,
// q_head_stride >= nope and kv_b_dtype is BF16 (or F32 when allow_f32_weight; both twins allow it).
void validate_mla_absorb_params(const MlaAbsorbParams& p, const char* op, bool allow_f32_weight);
void mla_absorb_cpu(const MlaAbsorbParams& p);
void mla_absorb_cuda(const MlaAbsorbParams& p, cudaStream_t stream);

struct MlaUnabsorbParams {
  const float* o_latent;  // [B, H, L]
  const void* kv_b;       // [H*(nope+v), L]
  DType kv_b_dtype = DType::F32;
  float* out;             // [B, H*v]
  int B = 0, H = 0, nope = 0, v = 0, L = 0;
  bool tensor_cores = true;  // as MlaAbsorbParams::tensor_cores
};
void validate_mla_unabsorb_params(const MlaUnabsorbParams& p, const char* op, bool allow_f32_weight);
void mla_unabsorb_cpu(const MlaUnabsorbParams& p);
void mla_unabsorb_cuda(const MlaUnabsorbParams& p, cudaStream_t stream);

// The CUDA launch plan (host-only, no device needed; mla_absorb.cu follows it, tests check it).
// Fast path: one CTA per (head, tile of `tile` output columns) stages that tile of W (read once
// from HBM with 16-byte loads, converted to fp32 in shared memory) and loops over the batch in
// chunks of 4 * batch_groups rows; requires kv_b 16-byte aligned, L % 8 == 0 (BF16) or L % 4 == 0
// (F32), smem_bytes <= kMlaAbsorbMaxSmem and not simple_faster. Otherwise `fast` is false and the
// simple kernels run.
constexpr size_t kMlaAbsorbMaxSmem = 200 * 1024;  // H100/H200 opt-in limit is 227 KB per block
struct MlaAbsorbPlan {
  bool fast = false;
  int tile = 0;          // output columns per CTA (absorb: latent columns; unabsorb: v rows)
  int batch_groups = 0;  // batch rows per pass = 4 * batch_groups; K is split over 256 / (tile / 8) / batch_groups threads
  int passes = 0;        // ceil(B / (4 * batch_groups))
  size_t smem_bytes = 0;
  int ctas = 0;          // H * ceil(N / tile)
  bool eligible = false;       // the tiled kernels can run this shape (alignment, shared memory)
  bool simple_faster = false;  // the simple kernels measured faster at this (B, H): not fast
  // The GEMV kernels (B <= 4, BF16 kv_b 16-byte aligned, L % 8 == 0; unabsorb also o_latent 16-byte
  // aligned) can run this shape; gemv: the dispatch takes them (fast is then false): unabsorb wherever
  // eligible, absorb at B 1 with H > 16 (measured; mla_absorb_cpu.cpp).
  bool gemv_eligible = false;
  bool gemv = false;
  // The tensor-core kernels (mla_absorb.cu: BF16 mma.sync with X split into three BF16 terms, fp32 accuracy) can
  // run this shape: BF16 kv_b 16-byte aligned, L % 8 == 0, K % 16 == 0 (absorb: nope, unabsorb: L), activations
  // 8-byte aligned with even row strides, tc_smem_bytes <= kMlaAbsorbMaxSmem. tc: the dispatch takes them (fast
  // and gemv are then false): where eligible, the params' tensor_cores allow it
  // and they measured faster: absorb from B 2, unabsorb from B kMlaAbsorbTcMinBatch at H > 16 and above B 16 at
  // H <= 16 (mla_absorb_cpu.cpp).
  bool tc_eligible = false;
  bool tc = false;
  size_t tc_smem_bytes = 0;  // the W tile of 64 output columns: absorb nope x 72, unabsorb 64 x (L + 8) BF16
};
// The smallest batch the dispatch gives the tensor-core unabsorb (below it the GEMV kernel, measured faster).
constexpr int kMlaAbsorbTcMinBatch = 5;
MlaAbsorbPlan plan_mla_absorb(const MlaAbsorbParams& p);
MlaAbsorbPlan plan_mla_unabsorb(const MlaUnabsorbParams& p);
// The first, simple kernels (one thread per (b, h, column) / one warp per (b, h, v row)): the
// fallback of the fast path and the bench's baseline. Same validation and results.
void mla_absorb_simple_cuda(const MlaAbsorbParams& p, cudaStream_t stream);
void mla_unabsorb_simple_cuda(const MlaUnabsorbParams& p, cudaStream_t stream);
// The tiled (fast-path) kernels whatever simple_faster says (bench, tests); throw glm5::Error naming
// the reason when the shape is not eligible.
void mla_absorb_tiled_cuda(const MlaAbsorbParams& p, cudaStream_t stream);
void mla_unabsorb_tiled_cuda(const MlaUnabsorbParams& p, cudaStream_t stream);
// The GEMV kernels for small batches (one CTA per (head, 128 latent columns) / per (head, 32 v rows),
// W read once with all of a thread's 16-byte loads in flight); throw glm5::Error unless gemv_eligible.
void mla_absorb_gemv_cuda(const MlaAbsorbParams& p, cudaStream_t stream);
void mla_unabsorb_gemv_cuda(const MlaUnabsorbParams& p, cudaStream_t stream);
// The tensor-core kernels (grid: ceil(N / 64) x H CTAs of 128 threads, the W tile in shared memory, every batch
// row); throw glm5::Error unless tc_eligible. warps_per_m_tile: how many of the 4 warps share one 16-row batch tile
// (1, 2 or 4, each 64 / that many columns); 0 = as measured fastest (absorb 1; unabsorb 2 below 4 tiles, else 1).
// Bench / tests.
void mla_absorb_tc_cuda(const MlaAbsorbParams& p, cudaStream_t stream, int warps_per_m_tile = 0);
void mla_unabsorb_tc_cuda(const MlaUnabsorbParams& p, cudaStream_t stream, int warps_per_m_tile = 0);

}  // namespace glm5
