// The per-token work between MLA's down projections and its up projections, fused into one launch
// (GLM-5 / DeepSeek-V3.2 decode). Unfused, at batch 1 these are 8 kernels of ~3 us each that move a
// few kilobytes (H200, 2026-11-29: attn.q_a_norm, attn.kv_a_norm, attn.rope (k), attn.kv_write and
// attn.indexer.k_write's LayerNorm, RoPE and key write cost ~22 us of a ~380 us layer):
//   q_a_norm:  RMSNorm of the q_a rows (in place)                        [HF q_a_layernorm]
//   kv_a_norm: RMSNorm of the latent part of the kv_a rows (in place)    [HF kv_a_layernorm]
//   k_rope:    RoPE of the rope part of the kv_a rows (in place)
//   kv_write:  normalized latent + rotated rope -> the token's KV pool row (FP8 or BF16)
//   indexer (optional): LayerNorm of the indexer key, its RoPE, the key write into the indexer cache.
// Each part runs the standalone kernel's device code (norm.cuh, rope.cuh, kv_cache.cuh). Measured on
// the H200 (tests/kernels/gpu_attn_prologue.cpp): q_a, kv_a and the KV pool bytes equal the unfused
// sequence bit for bit; the indexer key's LayerNorm differs in the last bit for some keys (fp32
// rounding; its FP8 code can then sit one e4m3 step apart). And a second, smaller fusion: RoPE of two
// tensors in one launch (the query heads and the indexer's query heads), bitwise.
#pragma once
#include <cuda_runtime.h>

#include "kernels/kv_cache.h"
#include "kernels/norm.h"
#include "kernels/rope.h"

namespace glm5 {

struct AttnPrologueParams {
  NormParams q_a_norm;            // rows = B
  NormParams kv_a_norm;           // rows = B (latent part of kv_a)
  RopeParams k_rope;              // rows = B, heads = 1 (rope part of kv_a)
  KvWriteParams kv_write;         // B rows: reads what kv_a_norm and k_rope wrote
  // false: the q_a RMSNorm is left out (no blocks for it): DecodeEngine then runs it apart on its main stream
  // (rmsnorm_cuda) and this launch, the KV and indexer-key parts, on its side stream. The same bits when both take
  // the vector row code with the same thread count: q_lora_rank <= 2048 (rmsnorm_vec_threads <= 128) and 16-byte
  // aligned rows, as GLM-5 (2048) and DeepSeek-V3 (1536); gpu_attn_prologue checks it at 1536 and 2048.
  bool q_part = true;
  bool indexer = false;           // the three parts below run only when set
  NormParams idx_k_norm;          // LayerNorm, rows = B
  RopeParams idx_k_rope;          // rows = B, heads = 1
  IndexerKeyWriteParams idx_k_write;
  // true: the kernel instance compiled for 16 blocks per SM (at most 32 registers per thread, 4096 per block: ptxas
  // spills 140 bytes), so a block fits beside six 80-register blocks of the batch-1 FP8 GEMV (61,440 of 65,536
  // registers) and need not wait for attn.q_up_proj's first wave to retire (EngineOptions::prologue_slim). The same
  // arithmetic and bits.
  bool slim = false;
};
// Throws glm5::Error (naming the part) when a part's params are invalid (the parts' own validators)
// or their row counts differ from kv_write.B.
void validate_attn_prologue_params(const AttnPrologueParams& p);
// The parts in order through the CPU twins.
void attn_prologue_cpu(const AttnPrologueParams& p);
// One launch: blocks [0, B) q_a_norm, [B, 2B) kv_a_norm -> k_rope -> kv_write of row b, and with the
// indexer [2B, 3B) idx_k_norm -> idx_k_rope -> idx_k_write (without q_part the others move down by B blocks).
// 128 threads per block.
void attn_prologue_cuda(const AttnPrologueParams& p, cudaStream_t stream);

// RoPE of a then b (independent tensors), as rope_cpu / rope_cuda of each; one launch on CUDA.
struct Rope2Params {
  RopeParams a, b;
};
void rope2_cpu(const Rope2Params& p);
void rope2_cuda(const Rope2Params& p, cudaStream_t stream);

}  // namespace glm5
