// Block-scaled FP8 GEMM on Hopper's FP8 tensor cores (wgmma e4m3 x e4m3, sm_90a): y[m, n] (=|+=) x[m, k] W^T for
// FP8 weights stored as the GLM-5-FP8 / DeepSeek-V3 checkpoints store them (e4m3 codes with one fp32 scale per 128 x
// 128 block, `weight_scale_inv`) and activations quantized per token and 128 columns (amax / 448, e4m3: what
// DeepSeek-V3's FP8 inference does and what cuBLASLt's block-scaled GEMM would take). LinearContext::Fp8LargeM::Wgmma
// of linear_cuda: the path for batches above the FP8 GEMV / mma.sync range, replacing "dequantize W to BF16 and run
// cuBLASLt", which writes and reads 2 more bytes per weight (S23c, batch 128 at 8192: attn.o_proj 185 us per layer for
// 100 MB of weights, 5.6x its floor). Built only as sm_90a machine code (kernels/sm90a/, CMakeLists.txt).
//
// Arithmetic (the formula of DeepSeek-V3's FP8 GEMM, its "promotion" to CUDA cores every 128 columns): with
// q_x[t, c] = e4m3(x[t, c] / s_x[t, c/128]), s_x = amax / 448 (fp8_quantize_activations_cuda) and W's codes q_w and
// block scales s_w[r/128, c/128]:
//   y[t, r] = sum over 128-column blocks b of s_x[t, b] s_w[r/128, b] (sum_{c in b} q_x[t, c] q_w[r, c])
// each block's inner sum on the tensor cores (fp32 accumulation of exact e4m3 products; Hopper keeps fewer mantissa
// bits in that accumulation, hence a block at a time), the outer sum in fp32 on the CUDA cores.
// Error against exact arithmetic on the unquantized x: dominated by x's e4m3 rounding (relative 2^-4 per element,
// so ~2^-4 / sqrt(k) of sum |x w| for random signs); against the CPU twin (linear_fp8_wgmma_cpu, same quantized x):
// the tensor core's accumulation and the fp32 order, ~1e-5 of sum |x w|.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/linear.h"

namespace glm5 {

// Why linear_fp8_wgmma_cuda does not handle p ("" when it does): FP8 weights with 128 x 128 block scales, k % 128
// == 0, the weight's row stride a multiple of 16 bytes and w 16-byte aligned (the TMA descriptor's rules), x and y
// 16-byte aligned, m <= 4096, m n < 2^31, and a compute capability 9.0 device (sm_90a code).
std::string linear_fp8_wgmma_unsupported(const LinearParams& p);
inline bool linear_fp8_wgmma_supported(const LinearParams& p) { return linear_fp8_wgmma_unsupported(p).empty(); }

// The launch plan for p on a GPU of `sms` SMs: token tile N (8, 16, 32, 64 or 128 tokens per CTA, the smallest that
// holds m; max_n below 128 caps it at 64), tiles (128-row blocks of W x token tiles), and how their 128-column
// blocks ("units", k / 128 per tile) are cut over the CTAs, one CTA per SM in mind:
//   stream_k (one token tile of 64 or 128, asked for, and cheaper than split-K by the .cu's cost model): the tiles x k / 128
//     units in tile order cut evenly over `grid` = min(sms, units / 4) CTAs, so a tile's k range may span several
//     CTAs ("segments") and a CTA several tiles (S24: o_proj's 48 row blocks made 96 CTAs of split-K on 132 SMs).
//   split-K (stream_k false, or several token tiles): S splits of kb_per_split units per tile, grid = tiles x S
//     (S23f: tiles of 64 tokens past 64 were slower than 128, 100.7 against 73.8 us at o_proj, m = 128).
struct Fp8WgmmaPlan {
  int N = 0, token_tiles = 0, row_blocks = 0, S = 1, kb_per_split = 0;
  bool stream_k = false;
  int grid = 0;               // CTAs
  int max_units = 0;          // the most column blocks one CTA streams
  int segments = 1;           // the most CTAs sharing one tile (> 1: partials and counters)
  size_t partial_elems = 0;   // floats of partials (segments > 1: segments * m * n)
  size_t partial_moved = 0;   // floats one launch writes as partials (and reads back): its tiles' segments x sizes
  size_t counters = 0;        // tile counters (segments > 1: row_blocks * token_tiles)
  size_t x_code_bytes = 0;    // the quantized activations: m * k bytes
  size_t x_scale_floats = 0;  // their scales: (k / 128) rows of ld floats, + N slack (the last row's bulk copy)
  int x_scale_ld = 0;         // floats per 128-column block row of the scales (tokens fastest; a multiple of 4)
};
Fp8WgmmaPlan linear_fp8_wgmma_plan(const LinearParams& p, int sms, int max_n = 128, bool stream_k = true);

// The units CTA `cta` of plan q streams for a k-column input: [first, last) in tile order (unit u = tile u / (k / 128),
// column block u % (k / 128); tile = row block * token_tiles + token tile), as the kernel computes them.
struct Fp8WgmmaUnits {
  int first = 0, last = 0;
};
Fp8WgmmaUnits linear_fp8_wgmma_units(const Fp8WgmmaPlan& q, int k, int cta);
// The CTA whose range holds unit u, by the formula the kernel uses to find a tile's first and last segment.
int linear_fp8_wgmma_owner(const Fp8WgmmaPlan& q, int k, int u);

// y (=|+=) x W^T on `stream` with plan q (linear_fp8_wgmma_plan for p; the caller computes it once for the buffers and
// the launch) from x already quantized on that stream into x_codes / x_scales (fp8_quantize_activations_cuda with
// tokens_fastest and scale_ld = q.x_scale_ld; linear_cuda does both: this library links before the one that holds the
// quantization), with one warp-specialized kernel: q.grid CTAs of 384 threads, each streaming its range of units
// (token tiles fastest: those of a row block run together and read its W blocks from L2 after the first);
// warpgroup 0's first thread streams W's
// [128 rows x 128 columns] blocks (TMA, 128-byte swizzle; the first stages before the PDL wait), x's [N tokens x 128
// columns] codes and their N scales into a ring of shared-memory stages; warpgroups 1 and 2 each multiply 64 rows of
// the block by the tokens (4 wgmma m64nNk32) into a temporary and promote it with s_x s_w into their accumulators.
// A tile of several segments: partials [segment][m][n], the last CTA of the tile (its counter) adds them in segment
// order and resets the counter (deterministic; CUDA-graph replays). Buffers come from the caller (sizes: q).
// Throws glm5::Error when unsupported (naming why), for a plan that is not p's, or on a launch failure.
void linear_fp8_wgmma_cuda(const LinearParams& p, const Fp8WgmmaPlan& q, uint8_t* x_codes, float* x_scales,
                           float* partial, int* counters, cudaStream_t stream);

// CPU twin: x quantized exactly as the GPU does (amax / 448, e4m3 round to nearest even), each 128-column block's
// sum of code products in double, promoted with s_x * s_w in double, fp32 stored. Any m, n; k % 128 == 0.
void linear_fp8_wgmma_cpu(const LinearParams& p);

}  // namespace glm5
