// Projections y = x W^T (nn.Linear without bias). CPU: plain loops in fp32. CUDA: cuBLASLt with
// BF16 weights and BF16-rounded activations, fp32 accumulation and fp32 output; FP8 weights (e4m3 with
// 128x128 block scales, as DeepSeek-V3 / GLM-5-FP8 checkpoints store them: `weight` + `weight_scale_inv`)
// through kernels/linear_fp8.cu.
#pragma once
#include <cuda_runtime.h>

#include <memory>

#include "common/dtype.h"
#include "kernels/rope.h"

namespace glm5 {

struct LinearParams {
  const float* x;      // [m, k] activations, fp32, row-major
  const void* w;       // [n, k] weight in `w_dtype` (HF layout: out_features x in_features)
  DType w_dtype = DType::F32;  // CPU: F32, BF16 or F8_E4M3; CUDA: BF16 or F8_E4M3
  float* y;            // [m, n] fp32 output
  int m = 0;
  int n = 0;
  int k = 0;
  bool accumulate = false;  // y += x W^T instead of y = x W^T
  // CUDA only: carry x as two bf16 halves, x ~ hi + lo (hi = bf16(x), lo = bf16(x - hi): ~16 mantissa
  // bits instead of 8), as one GEMM over 2m rows (the weight is read once) plus a small sum kernel:
  // the GPU engine then tracks the fp32 CPU reference (see ActivationPrecision in decode_engine.h).
  bool split_bf16 = false;
  // Elements between rows of w (0: k). A tensor-parallel shard that takes columns [c0, c0 + k) of a
  // [n, K] weight passes w + c0 and ldw = K (row-parallel o_proj / down_proj of DESIGN.md's --tp).
  int ldw = 0;
  GLM5_HD int w_stride() const { return ldw > 0 ? ldw : k; }
  // F8_E4M3 only: the weight's block scales (HF `weight_scale_inv`), fp32, row-major
  // [ceil(n/128), ld_scale]: element (r, c) of W is e4m3(w[r*ldw + c]) * w_scale[(r/128)*ld_scale + c/128].
  // A shard passes w_scale already offset to its first block (row and column offsets must be multiples
  // of 128). ld_scale 0: ceil(w_stride()/128).
  const float* w_scale = nullptr;
  int ld_scale = 0;
  GLM5_HD int scale_stride() const { return ld_scale > 0 ? ld_scale : (w_stride() + 127) / 128; }
};

constexpr int kFp8WeightBlock = 128;  // rows and columns per weight_scale_inv entry

// Throws glm5::Error naming `op` and the field unless x, w, y are non-null, m, n, k > 0 and w_dtype
// is BF16 or F8_E4M3 with a non-null w_scale (or F32 when allow_f32_weight: the CPU twin).
void validate_linear_params(const LinearParams& p, const char* op, bool allow_f32_weight);

// y[m, n] (=|+=) sum_k x[m, k] * w[n, k], dot products accumulated in double, stored as fp32.
void linear_cpu(const LinearParams& p);

// cuBLASLt handle, workspace and a bf16 staging buffer for activations; one per engine/stream.
class LinearContext {
 public:
  LinearContext();
  ~LinearContext();
  LinearContext(const LinearContext&) = delete;
  LinearContext& operator=(const LinearContext&) = delete;
  struct Impl;
  Impl* impl() { return impl_.get(); }
  int fp8_gemv_max_m = 16;  // FP8 weights: largest m run by the GEMV kernel (tests set 0 to force dequant)
  // FP8 weights, 2 <= m <= fp8_mma_max_m: the tensor-core kernel linear_fp8_mma_cuda (x rounded to f16
  // with per-128-column power-of-two scales; kernels/linear_fp8.h) when its shape rules hold, else the
  // GEMV / dequant paths above. 64: one CTA pass covers 64 tokens; beyond it W is re-read per 64 tokens
  // and the dequantize + cuBLASLt path is expected to win (measure: glm5prof bench kernels --only linear).
  // 0 or 1 disables it (the GEMV for m <= fp8_gemv_max_m, as before; with fp8_large_m Wgmma, every m >= 2 takes the
  // Wgmma path instead, so the GEMV-only groups of linear_group_cuda (fused, norm, rope) serve m = 1 only).
  int fp8_mma_max_m = 64;
  // The tensor-core path above launched with PDL (its CTAs scheduled while the previous kernel runs, waiting in
  // griddepcontrol.wait). false: scheduled after it completes. Measured per batch (S14e), EngineOptions::mma_pdl.
  bool fp8_mma_pdl = true;
  // BF16 weights, m <= 4, n * k <= 2^24 (the router, the indexer's weights_proj): linear_bf16_gemv_cuda
  // (one launch, fp32 x) instead of x -> BF16 + cuBLASLt. false: always cuBLASLt (tests pin it).
  bool bf16_gemv = true;
  // FP8 weights, m = 1, a single projection: the TMA-fed GEMV linear_fp8_tma_cuda (kernels/linear_fp8_tma.h)
  // where it is supported, instead of linear_fp8_gemv. Off by default until the decode step measures it.
  bool fp8_tma_gemv = false;
  // LinearGroupParams::l2_lookahead for every register-fed FP8 GEMV this context runs, grouped or single (it replaces
  // a group's own value; the TMA-fed GEMV and the scalar fallback for unaligned shapes ignore it). 0: off.
  int fp8_gemv_l2_lookahead = 0;
  // FP8 weights, m > fp8_gemv_max_m (Wgmma: m >= 2 above fp8_mma_max_m): Dequant = W to a BF16 staging copy + the
  // BF16 cuBLASLt GEMM;
  // BlockScaled = cuBLASLt's block-scaled FP8 GEMM (CUDA >= 12.9, Hopper): x quantized per token and
  // 128-column block (scale = amax / 448, e4m3, as DeepSeek-V3's FP8 inference does), W with its
  // 128x128 scales (BLK128x128_32F), x with VEC128_32F scales, fp32 output. `act_scale_tokens_fastest`
  // picks the order of x's scales ([k/128][m] vs [m][k/128]); the GPU test checks both.
  // Wgmma = our block-scaled FP8 tensor-core GEMM (kernels/sm90a/linear_fp8_wgmma.h: x quantized as for
  // BlockScaled, e4m3 x e4m3 wgmma, W's codes read once by TMA; compute capability 9.0), else Dequant.
  enum class Fp8LargeM { Dequant, BlockScaled, Wgmma };
  Fp8LargeM fp8_large_m = Fp8LargeM::Dequant;
  long fp8_wgmma_calls = 0;  // how many calls took the Wgmma path
  int fp8_wgmma_max_n = 128;  // the Wgmma path's largest token tile (128 or 64; linear_fp8_wgmma_plan)
  // The Wgmma path's cut of the work (linear_fp8_wgmma_plan): true lets the plan take stream-K (one token tile of
  // 64 / 128: k / 128 column blocks x row blocks spread evenly over one CTA per SM) where its cost model favours it;
  // false always splits whole ranges per tile (split-K, session 23's).
  bool fp8_wgmma_stream_k = true;
  bool act_scale_tokens_fastest = true;
  long fp8_block_scaled_calls = 0;  // how many calls took the BlockScaled path (cuBLASLt had an algorithm)

 private:
  std::unique_ptr<Impl> impl_;
};

// BF16 weights: y = x W^T on `stream` via cublasLtMatmul: x is rounded to BF16 into the context's staging buffer
// (grown on demand: the first call with a new largest m*k allocates, so warm up before graph
// capture), W BF16, fp32 accumulation (CUBLAS_COMPUTE_32F) and fp32 y; accumulate uses beta = 1.
// FP8 weights: 2 <= m <= fp8_mma_max_m (default 64) runs linear_fp8_mma (tensor cores, x in f16 with
// power-of-two block scales) where supported; else m <= fp8_gemv_max_m (default 16) runs linear_fp8_gemv
// (fp32 x, weight dequantized in registers, memory-bound: reads each weight byte once), except that with
// fp8_large_m Wgmma every m >= 2 above fp8_mma_max_m takes the Wgmma path where it is supported; larger m takes
// fp8_large_m's path: Dequant (W into a BF16 staging copy, grown on demand, then the BF16 path: 2 extra bytes
// written + read per weight), BlockScaled (cuBLASLt) or Wgmma (kernels/sm90a/linear_fp8_wgmma.h).
// Throws glm5::Error on bad params or any cuBLASLt failure (status named).
void linear_cuda(const LinearParams& p, LinearContext& ctx, cudaStream_t stream);

// Up to kMaxLinearGroup projections of the same activations, e.g. a decoder layer's q_a_proj,
// kv_a_proj_with_mqa and the indexer's wk, which all read the normalized hidden state (DeepSeek-V3 /
// SGLang fuse the first two as fused_qkv_a_proj_with_mqa). Each p[s] is a full LinearParams with its
// own weight, scales, y and accumulate flag.
constexpr int kMaxLinearGroup = 4;
// An RMSNorm of the activations folded into the projections that read them (HF GlmMoeDsaRMSNorm, norm.h):
// with `weight` set, every projection of the group computes
//   y[t, n] = inv_rms[t] * sum_k W[n, k] * (weight[k] * x[t, k]),  inv_rms[t] = 1 / sqrt(mean_k x[t, k]^2 + eps),
// i.e. rmsnorm(x) W^T with x the un-normalized rows (the scalar inv_rms of a token factors out of its dot
// products). The same value as rmsnorm_cuda then the projection up to fp32 rounding order (the product is not
// rounded to fp32 per element before the sum). GPU: the FP8 GEMV only (linear_group_norm_fused); each CTA sums
// x^2 over the columns it already reads, so the norm costs no launch and no extra pass over x.
struct InputRmsNorm {
  const float* weight = nullptr;  // [k] fp32, 16-byte aligned; null: no norm
  float eps = 1e-6f;
};
struct LinearGroupParams {
  int count = 0;
  LinearParams p[kMaxLinearGroup] = {};
  InputRmsNorm norm;  // optional: normalize the shared x first (every p[s].x must be the same rows)
  // Optional per projection (rope[s].positions non-null): RoPE (rope.h) of projection s's output rows, applied to
  // y after the product, exactly as rope_cuda(rope[s]) would apply it then (the same arithmetic, rope_dev::rope_pair).
  // rope[s].x must be p[s].y, rows = m, row_stride = n, heads * head_stride = n, interleave (rotated pairs are
  // adjacent columns), offset and head_stride even, p[s].accumulate false. GPU: the FP8 GEMV without a k split
  // (linear_group_gemv); at GLM-5 batch 1 the query heads' and the indexer's query heads' RoPE in attn.q_up_proj.
  RopeParams rope[kMaxLinearGroup] = {};
  // With norm on the GPU (the NORM GEMV): true lets the next grid on the stream (PDL) be scheduled only when this
  // grid's CTAs exit, not after each CTA's main loop. Scheduling only; the same results.
  bool admit_next_at_exit = false;
  // FP8 GEMV (m <= 16): each warp asks L2 for its rows' weights this many steps ahead of its loads
  // (cp.async.bulk.prefetch.L2 of 1024 columns per row and step; the first ones before the PDL wait), so that DRAM
  // keeps streaming while the warp computes a step and waits for the next one's loads. 0: off. Scheduling only; the
  // same results. (Session 36: Nsight Compute had the batch-1 GEMVs at 32-72% of DRAM peak, stalled on their loads.)
  int l2_lookahead = 0;
};
// Whether `r` can be LinearGroupParams::rope of projection `p` (the shape and pairing rules above; r's own fields
// are checked by validate_rope_params). The engine asks it before folding; validate_linear_group requires it.
bool output_rope_foldable(const RopeParams& r, const LinearParams& p);
// Whether any g.rope[s] is set (positions non-null).
bool linear_group_has_rope(const LinearGroupParams& g);
// Throws glm5::Error naming `op` unless 1 <= g.count <= kMaxLinearGroup and each used p[s] passes
// validate_linear_params(p[s], op, allow_f32_weight).
void validate_linear_group(const LinearGroupParams& g, const char* op, bool allow_f32_weight);
// linear_cpu on each projection (with g.norm: rmsnorm_cpu of x into a temporary first, then linear_cpu on it;
// with g.rope[s]: rope_cpu(g.rope[s]) on its output after).
void linear_group_cpu(const LinearGroupParams& g);
// Whether linear_group_cuda runs the group as ONE launch: at least two projections, all where
// linear_cuda alone would run the FP8 GEMV (m <= fp8_gemv_max_m, below the tensor-core range), sharing
// x, m and k (linear_fp8_gemv_group_supported). Small GEMVs at batch 1 (q_a 2048, kv_a 576, wk 128
// rows) are launch- and latency-bound alone; as one grid they fill the GPU once.
bool linear_group_fused(const LinearGroupParams& g, const LinearContext& ctx);
// Whether linear_group_cuda can run g with g.norm set (its weight non-null): one FP8 GEMV launch (count >= 1, every
// projection on the GEMV path at this m, sharing x, m and k, the norm weight 16-byte aligned). Callers that get
// false run the norm as its own kernel and the group without it.
bool linear_group_norm_fused(const LinearGroupParams& g, const LinearContext& ctx);
// Whether linear_group_cuda runs g (count >= 1) as one FP8 GEMV launch: every projection F8_E4M3 on the GEMV path
// at this m, sharing x, m and k (what g.rope needs; with g.norm also linear_group_norm_fused).
bool linear_group_gemv(const LinearGroupParams& g, const LinearContext& ctx);
// Fused: linear_fp8_gemv_group_cuda (each output row the same arithmetic as the GEMV alone, the split
// count chosen for the whole grid); otherwise linear_cuda per projection. Throws as linear_cuda, and when
// g.norm is set and linear_group_norm_fused(g, ctx) is false, or a g.rope is set and linear_group_gemv is false.
void linear_group_cuda(const LinearGroupParams& g, LinearContext& ctx, cudaStream_t stream);

}  // namespace glm5
