// MLA weight absorption for decode (DeepSeek-V2 paper, section 2.1.2; FlashMLA's decode interface):
// kv_b_proj [H*(nope+v), L] holds, per head h, W_UK[h] = rows h*(nope+v) .. +nope and
// W_UV[h] = rows h*(nope+v)+nope .. +v.
//   absorb:   q_latent[b,h,c] = sum_d q_nope[b,h,d] * W_UK[h][d][c]
//   unabsorb: out[b, h*v + j] = sum_c o_latent[b,h,c] * W_UV[h][j][c]
#pragma once
#include <cuda_runtime.h>

#include "common/dtype.h"

namespace glm5 {

struct MlaAbsorbParams {
  const float* q;        // [B, H, qk_head_dim]: q_nope is the first `nope` floats of each head
  const void* kv_b;      // [H*(nope+v), L] in kv_b_dtype (F32 or BF16)
  DType kv_b_dtype = DType::F32;
  float* q_latent;       // [B, H, L]
  int B = 0, H = 0, nope = 0, v = 0, L = 0;
  int q_head_stride = 0;  // floats between heads of q (qk_head_dim)
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
};
void validate_mla_unabsorb_params(const MlaUnabsorbParams& p, const char* op, bool allow_f32_weight);
void mla_unabsorb_cpu(const MlaUnabsorbParams& p);
void mla_unabsorb_cuda(const MlaUnabsorbParams& p, cudaStream_t stream);

}  // namespace glm5
