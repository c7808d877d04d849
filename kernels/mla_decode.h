// Sparse MLA decode in latent space (absorbed weights), one query token per request:
//   s[b,h,j] = scale * (q_latent[b,h,:] . c[t] + q_rope[b,h,:] . r[t]),  t = indices[b,j] (skip t < 0)
//   p = softmax_j(s);   out[b,h,:] = sum_j p[b,h,j] * c[t]        (values are the latent c, 512-d)
// where row t of the KV buffer holds c (L latent values) and r (R rope values), FP8 (dequantized in
// the kernel: the `fp8` path) or BF16 (the `cast` and `gather-cast` paths). A request with no valid
// index gets out = 0 and lse = -inf.
#pragma once
#include <cstdint>

#include <cuda_runtime.h>

#include "kernels/kv_layout.h"

namespace glm5 {

// Which CUDA kernel mla_decode_cuda runs (the CPU twin ignores it, but for WgmmaF16 below). Auto: Wgmma where
// mla_decode_auto_wgmma says so, else TensorCore(Pipelined) where it handles
// the shapes (L = 512, R % 16 == 0, R <= 64, 16-byte aligned kv and rows: GLM-5, DeepSeek), else
// Fp32. TensorCore: BF16 mma.sync, one CTA per (request, 64 heads, chunk) (kernels/mla_decode_tc.cuh);
// throws glm5::Error on other shapes. Fp32: the FMA kernel, one block per (request, 16 heads, chunk),
// any L <= 512, R <= 128 (kept for the shapes TensorCore does not handle, e.g. glm5-tiny's L = 64).
// TensorCorePipelined (what Auto runs for FP8 rows): TensorCore with FP8 rows fetched two tiles ahead
// and dequantized during the previous tile's P . V; bitwise the same results; for BF16 rows or 17..32
// query heads per request it runs TensorCore.
// Wgmma: the warp-specialized sm_90a kernel (kernels/sm90a/mla_decode_wgmma.cu: a producer warpgroup
// dequantizes 64-row tiles, two consumer warpgroups run wgmma; one CTA per (request, 64 heads, chunk), chunks
// of 64 rows); L = 512, R = 64 on a compute capability 9.0 GPU, else glm5::Error. Same precision contract.
// WgmmaF16 (FP8 rows only, else glm5::Error): Wgmma with fp16 operands. The producers dequantize a code pair with
// one convert (e4m3 -> fp16 is exact) and one fp16 multiply by the scale rounded to fp16, where the bf16 form
// spends three instructions per code; Q, P and the rope are rounded to fp16. Precision: finer than the bf16
// contract below (fp16 keeps 11 significant bits to bf16's 8) wherever the values are inside fp16's range, so the
// result agrees with the cast paths' to bf16 rounding (DESIGN.md), not bitwise. Range, not checked: |q| (latent and
// rope parts), the dequantized |K|, |V| and the rope's |K| must stay below 65504 (beyond: inf / NaN out) and each
// scale in [2^-24, 65504] (a scale below 2^-14 keeps fewer bits). The engine's latents are RMS-normed (scales
// amax / 448); its rope keys and queries are the projections' outputs, far inside the range for GLM-5's weights but
// not guaranteed for arbitrary ones: --mla-fp8-operands bf16 has bf16's fp32 range. The CPU twin honours this one kernel
// choice: with kernel = WgmmaF16 and FP8 rows it uses the kernel's fp16 K / V values (the caller rounds Q, as for
// the bf16 contract), so the kernel matches it within the P rounding.
enum class MlaDecodeKernel { Auto, TensorCore, Fp32, TensorCorePipelined, Wgmma, WgmmaF16 };

struct MlaDecodeParams {
  const float* q_latent;  // [B, H, L]
  const float* q_rope;    // rope part of the query: head h of request b at q_rope + b*q_rope_row_stride + h*q_rope_head_stride
  int q_rope_row_stride = 0;
  int q_rope_head_stride = 0;
  const uint8_t* kv;      // [rows, layout.row_bytes] latent rows (FP8 or BF16 per layout.fp8)
  LatentLayout layout;
  const int32_t* indices; // [B, topk] row of kv per selected token; -1 = none
  float* out;             // [B, H, L]
  float* lse;             // [B, H] log-sum-exp of the scaled scores (may be null)
  int B = 0, H = 0, topk = 0;
  float scale = 1.f;      // softmax scale (1/sqrt(qk_head_dim), x mscale^2 under YaRN)
  // Optional device scratch for the split-K (flash-decoding) path of mla_decode_cuda: the top-k rows
  // of each request are split into chunks, one block per (request, 64 heads, chunk) writes an
  // unnormalized partial (out[L], running max m, sum l) here, and a combine kernel merges the
  // partials with the log-sum-exp rule. Null: the single-pass kernel (one block per request and 64
  // heads; slow at small B: B blocks for 132 SMs). Must hold mla_decode_workspace_bytes(B, H, topk, L) bytes, 16-byte
  // aligned; not read by the CPU twin. Owned by the caller; may be reused once the stream is past.
  float* workspace = nullptr;
  size_t workspace_bytes = 0;
  MlaDecodeKernel kernel = MlaDecodeKernel::Auto;
  // Query tokens per request (MTP / speculative decode; 1 = plain decode). Token t of request b is
  // query row bt = b * s_q + t: q_latent [B * s_q, H, L], its rope at q_rope + bt * q_rope_row_stride
  // + h * q_rope_head_stride, out [B * s_q, H, L], lse [B * s_q, H]; all s_q tokens of request b
  // attend to the same indices[b, :] (each selected row is read once for the s_q * H query heads).
  // Split-K sizing then uses s_q * H heads: mla_decode_workspace_bytes(B, s_q * H, topk, L).
  int s_q = 1;
  // Split-K chunks for the CUDA kernel: 0 = mla_decode_num_splits(B, s_q * H, topk) (the default);
  // 1 .. that number = fewer, longer chunks (tuning: fewer partials to write and combine, Q staged by
  // fewer CTAs, at the price of fewer CTAs). Larger values are refused (the workspace is sized for the
  // default). Ignored by the CPU twin and when workspace is null.
  int splits = 0;
  // Query heads per CTA of the tensor-core kernel: 64 (a request's rows read once for up to 64 heads)
  // or 16 (16-head slices, each re-reading the rows from L2: 4x the CTAs, a quarter of the Q staging
  // and of the partials per CTA; for small batches, where the grid, not the bytes, sets the time).
  // 0 = auto: mla_decode_heads_per_cta. Ignored by the fp32 kernel and the CPU twin.
  int heads_per_cta = 0;
  // Optional L2 prefetch rider (EngineOptions::unabsorb_l2_prefetch): bytes of the *next* consumer's weights
  // (attn.v_unabsorb's W_UV, not written by any kernel of the step) that the combine kernel's CTAs ask into L2
  // before their PDL wait, while this kernel's split-K CTAs run and HBM is nearly idle.
  // CTA (h, request 0) of the combine asks for [l2_prefetch + h * l2_prefetch_head_stride, + l2_prefetch_head_bytes)
  // for h < H (one region per key/value head; s_q > 1 query heads beyond H ask for nothing). Null: no prefetch.
  // Requires a 16-byte aligned pointer and stride and bytes a positive multiple of 16. No effect on any output
  // (the CPU twin ignores it); only runs where the combine kernel runs (split-K without the wgmma cluster merge).
  const void* l2_prefetch = nullptr;
  int64_t l2_prefetch_head_bytes = 0;
  int64_t l2_prefetch_head_stride = 0;
  // false: cp.async.bulk.prefetch.L2 requests (40-register combine); true: plain 16-byte loads by the combine's
  // threads, results discarded (54 registers: the combine then no longer fits beside the batch-1 MLA's blocks).
  // Neither moved the batch-1 step on the H200 (reports/2026-12-03-h200-decode-step.md, S21a / S21b).
  bool l2_prefetch_loads = false;
  // Which form of the wgmma kernel kernel = Auto runs for FP8 rows (where mla_decode_auto_wgmma picks it): false
  // (default) the fp16-operand form (WgmmaF16: 2-5% faster at batch 64-128 on the H100, S28b, and nearer
  // exact dequantization); true the bf16 form (Wgmma: the cast paths' bf16 K / V values, so the three KV paths give
  // identical bits; EngineOptions::mla_fp8_bf16_operands). BF16 rows always take the bf16 form. Ignored by the twin.
  bool fp8_bf16_operands = false;
  // The wgmma kernel's crossover (mla_decode_wgmma_crossover; sm90a/mla_decode_wgmma.cu): where a request has an even
  // number of 64-head blocks (s_q H = 128, 256 ...), the CTAs of each head-block pair run as a thread-block cluster,
  // each producing half of every K tile into both. 0 = auto (off: measured at parity on an H100, S34b), 1 = off, 2 = on where the
  // wgmma kernel runs (mla_decode_cuda throws glm5::Error where that kernel has no such form: BF16 rows, an odd number
  // of head blocks, the split-K cluster merge). The same results either way (the same values reach every CTA). The
  // mma.sync kernels (kernel = Auto where it does not pick wgmma) and the twin ignore it.
  int crossover = 0;
};
// FP8 rows are dequantized exactly as kv_cast does (round_bf16(e4m3 * scale), rope bf16), so the
// `fp8`, `cast` and `gather-cast` paths feed attention identical K/V values; the CPU twin's outputs
// are bit-identical across the three paths, and so are the CUDA kernel's (same values, same order) -- except the
// WgmmaF16 form (Auto's choice for FP8 rows at batches that fill the GPU unless fp8_bf16_operands): its K / V are
// f16(e4m3 * f16(scale)) and the rope f16(bf16), Q and P fp16 (out within 2^-11 max|V| of the twin's WgmmaF16 mode
// fed the fp16 Q; the fp8 path then agrees with the cast paths to bf16 rounding, not bitwise).
// Precision of mla_decode_cuda (tensor-core kernel, L = 512 shapes): Q is rounded to bf16 once, the
// softmax probabilities P are rounded to bf16 for P . V, products accumulate in fp32, the softmax
// (max, exp, sum l, lse) is fp32. Against the CPU twin fed the bf16-rounded Q, |out - ref| <=
// 2^-8 * max|V| (P rounding, relative <= 2^-8 per weight) and lse agrees to fp32 order (~1e-5); the
// fp32 fallback kernel (other shapes, e.g. glm5-tiny's L = 64) matches the twin to fp32 order.
// Index values < 0 are skipped; indices must be < the number of rows of `kv` (not checkable here).
// Throws glm5::Error on null pointers, B/H/topk < 0, s_q < 1, a layout not from make_latent_layout, or (CUDA)
// L > 512, R > 128 (the kernel's register tile; GLM-5 and DeepSeek use L = 512, R = 64).
void validate_mla_decode_params(const MlaDecodeParams& p);
// Whether kernel = Auto runs the wgmma kernel for p: heads_per_cta 0 (auto), at least
// kMlaWgmmaAutoMinHeads query heads per request (s_q H), at least kMlaWgmmaAutoMinCtas (request, 64-head block)
// pairs, and mla_decode_wgmma_supported (L = 512, R = 64, an sm_90 device). Measured on the H200
// (reports/2026-11-30-h200-kv-kernels.md; S7e, FP8 rows through the bulk-copy feed: 1.29 / 1.55 / 1.70 / 2.04x
// faster than the mma.sync kernel at batch 8 / 32 / 64 / 128 with 64 heads; S6k, the rest of this note):
// from batch 8 it is 1.29-1.44x faster with FP8 rows at 64 heads,
// 1.05-1.10x at 16, 1.15-1.53x with BF16 rows at 64 heads (3-4% slower with BF16 rows at 16 heads, batch 8-32);
// at batch 1 the two are level with FP8 rows and the mma.sync kernel is faster with BF16 rows (17.2 vs 19.8 us),
// hence the block threshold; 8 heads per GPU (TP8) is not measured, hence the head threshold. The rule does not
// look at the row format on purpose: the three KV paths run the same kernel family at the same shapes, even where
// FP8 rows alone would favour wgmma (S7e, batch 1 / 16 heads: 14.3 vs 18.0 us). With FP8 rows Auto's wgmma kernel
// takes fp16 operands unless MlaDecodeParams::fp8_bf16_operands (then cast / gather-cast BF16 rows give the fp8
// path's bits, gpu_mla_decode checks it).
constexpr int kMlaWgmmaAutoMinCtas = 8;
constexpr int kMlaWgmmaAutoMinHeads = 16;
bool mla_decode_auto_wgmma(const MlaDecodeParams& p);
// Number of top-k chunks the split-K path uses for (B, H, topk): S = min(132 / (B * ceil(H / 64)),
// tiles of 32 rows), so the grid is at most one wave of an H200 (132 SMs, one CTA each), chunks a
// multiple of 32 rows; 1 = no split (the workspace is then not used).
// Depends only on its arguments (no device query), so a caller can size the workspace up front.
int mla_decode_num_splits(int B, int H, int topk, int heads_per_cta = 64);
// The heads per CTA mla_decode_cuda uses for p: p.heads_per_cta when set; else 16 for a single request
// of 17..64 query heads (measured faster on the H200), 64 otherwise.
int mla_decode_heads_per_cta(const MlaDecodeParams& p);
// Bytes of workspace the split-K path needs: B * H * S * (L + 2) * 4 with S = mla_decode_num_splits
// (0 when S == 1). GLM-5 (H = 64, L = 512, topk = 2048): B = 1 -> 8.4 MB (S = 64), B = 32 -> 17 MB
// (S = 4), B = 64 -> 17 MB (S = 2), B = 128 -> 0 (S = 1). The sm_90a wgmma kernel merges S = 2 inside a
// thread-block cluster and then leaves the workspace untouched (mla_decode_wgmma_merges_in_cluster); mla_decode_cuda
// still sizes S from it, so pass it anyway.
size_t mla_decode_workspace_bytes(int B, int H, int topk, int L);
void mla_decode_cpu(const MlaDecodeParams& p);
void mla_decode_cuda(const MlaDecodeParams& p, cudaStream_t stream);

}  // namespace glm5
