// Warp-specialized wgmma sparse MLA decode (sm_90a): MlaDecodeKernel::Wgmma and WgmmaF16 of mla_decode_cuda.
// Built only as sm_90a machine code (kernels/sm90a/, CMakeLists.txt); mla_decode_cuda calls it only
// when mla_decode_wgmma_supported(p) holds, which includes a compute capability 9.0 device.
#pragma once
#include <cuda_runtime.h>

#include <string>

#include "kernels/mla_decode.h"

namespace glm5 {

// Selected rows per tile of the wgmma kernel: split-K chunks are multiples of it.
constexpr int kMlaWgmmaTile = 64;

// Whether the wgmma kernel handles p: L = 512, R = 64, FP8 rows with G = 128 scales or BF16 rows, kv and
// q_latent 16-byte aligned, and the current device is compute capability 9.0 (H100 / H200: sm_90a code).
bool mla_decode_wgmma_supported(const MlaDecodeParams& p);
// Why the wgmma kernel does not handle p, as the end of a sentence ("a compute capability 9.0 GPU (found 8.0)",
// "L = 512 and R = 64 (got ...)", ...); empty when it does (mla_decode_wgmma_supported is this being empty).
std::string mla_decode_wgmma_unsupported(const MlaDecodeParams& p);

// Split-K chunks the wgmma kernel uses when at most S_cap are allowed: chunks are whole 64-row tiles, so
// S = ceil(topk / chunk) with chunk = 64 * ceil(tiles / min(S_cap, tiles)) (1 when S_cap <= 1 or topk <= 64).
// *chunk (optional) receives the chunk length in rows (topk when S == 1).
int mla_decode_wgmma_splits(int S_cap, int topk, int* chunk = nullptr);

// Split-K counts up to which the S CTAs of a (head block, request) merge their partials inside the kernel, as one
// thread-block cluster (distributed shared memory), instead of through p.workspace and mla_decode_cuda's combine
// kernel. Only S = 2: on the H200 (S8j, reports/2026-11-30-h200-kv-kernels.md) the merge took batch 64 / 64 heads
// (S = 2) from 94.6 to 78.0 us, but clusters of 4 (batch 32, S = 4) ran 89.0 us against 59.8 with the workspace:
// a cluster of one-CTA-per-SM blocks must fit in one GPC, and 32 clusters of 4 SMs evidently did not fit at once.
constexpr int kMlaWgmmaClusterMergeMax = 2;
inline bool mla_decode_wgmma_merges_in_cluster(int S) { return S > 1 && S <= kMlaWgmmaClusterMergeMax; }

// Whether a launch of p with S splits runs the crossover form (head-block pairs as clusters sharing each tile's
// production): MlaDecodeParams::crossover 1 (off) or 0 (auto: off, at parity when measured, S34b) give false; 2 gives true where
// the kernel has the form -- FP8 rows, ceil(s_q H / 64) even, no split-K cluster merge (S != 2) -- and throws
// glm5::Error naming what is missing otherwise.
bool mla_decode_wgmma_crossover(const MlaDecodeParams& p, int S);

// Launches the kernel on grid (ceil(s_q H / 64), B, S): CTA (hb, b, z) computes query heads
// [64 hb, 64 hb + 64) of request b over selected rows [z chunk, (z + 1) chunk) (chunk a multiple of
// kMlaWgmmaTile when S > 1). S == 1, or S = 2 (kMlaWgmmaClusterMergeMax; merged in the kernel): out and lse;
// (crossover: CTAs in clusters of 2 along x, mla_decode_wgmma_crossover), larger S: unnormalized partials to p.workspace in mla_decode_cuda's split-K layout (the caller runs the
// combine kernel). Same arithmetic contract as the mma.sync kernel (mla_decode.h): Q and P rounded to bf16,
// fp32 accumulation and softmax; f16_operands (FP8 rows only, MlaDecodeKernel::WgmmaF16): Q, P and the dequantized
// K / V rounded to fp16 instead (its contract in mla_decode.h). Throws glm5::Error for f16_operands with BF16 rows.
void mla_decode_wgmma_launch(const MlaDecodeParams& p, int S, int chunk, bool f16_operands, cudaStream_t stream);

}  // namespace glm5
