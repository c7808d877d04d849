// The routed MoE experts (SwiGLU, FP8 weights with 128 x 128 block scales, or BF16 weights: the end of this comment) on
// Hopper's tensor cores, fed by TMA: MoeExpertsParams::fp8_wgmma of moe_experts_cuda, for the expert-grouped path
// (B >= MoeExpertsParams::group_min_tokens, group and pair_out set). Built only as sm_90a machine code
// (kernels/sm90a/).
//
// Why (S25a, H200, `glm5prof bench kernels --only moe`): the grouped mma.sync kernels, which load W straight into
// registers, read the selected experts at 85% of the copy rate at batch 8 and 128 (93% at 32), while one long read
// reaches 98% (`read_stream`, 1 GiB); moe.experts is 82% of the batch-32 and batch-128 decode steps. At batch 8 their
// grid of (expert, row block) CTAs is 3.5 waves of 2 CTAs per SM (a partial last wave); at 128 every expert's CTA loads
// its tokens' fp32 activations from L2 per warp. Here each SM runs one persistent CTA that streams a contiguous range of
// tiles through a ring of shared-memory stages (TMA), the weights' bytes of ~6-8 stages in flight, no waves.
//
// Data flow (four launches after moe_group_kernel's buckets and slot-row schedule, MoeSlotSchedule in kernels/moe.h;
// moe_combine_kernel after them, as the mma.sync path):
//   1. quantize x: the token row of every bucketed (token, slot) pair, per 128 columns (amax / 448, e4m3 round to
//      nearest even; DeepSeek-V3's activation quantization, as linear_fp8_wgmma), into "slot rows": expert e's pairs
//      at rows R[e] .. R[e] + count_e - 1 in bucket order, R[e] = sum over e' < e of count_e' rounded up to 4 (so a
//      token tile's scales are one 16-byte-aligned bulk copy); the pad rows are zeros with scale 1.
//   2. gate_up: tiles (expert e, 64 rows of inter, a token tile of N slot rows), k = hidden: warpgroup 1 multiplies the
//      64 gate rows, warpgroup 2 the same 64 up rows (4 wgmma m64nNk32 per 128 columns each), both promoted per 128
//      columns with s_x s_w (linear_fp8_wgmma's formula); at the tile's end act[pair, i] = silu(g) u (fp32, p.act).
//   3. quantize act: the pairs' act rows into slot rows (as 1, k = inter).
//   4. down: tiles (e, 128 rows of hidden, token tile), k = inter: pair_out[pair, d] (fp32), then the slot combine.
// Tiles (row blocks of an expert, token tiles fastest) are numbered expert by expert over the experts with pairs; CTA c
// of G takes tiles [c T / G, (c + 1) T / G). gate_up's tiles can split k in two, so that few tiles per CTA leave the
// longest CTA half a tile behind instead of a whole one (MoeFp8WgmmaPlan::ksplit, forced only): each half adds its g
// and u sums into zeroed scratch (two fp32 adds onto 0: the same bits in either order), and step 3 computes
// act = silu(g) u from them and re-zeroes them.
//
// Arithmetic: y = sum over 128-column blocks b of s_x[b] s_w[b] (sum_{c in b} q_x[c] q_w[c]), each block's sum on the
// tensor cores (fp32), the outer sum in fp32. Against exact arithmetic on unquantized x / act: x's and act's e4m3
// roundings (2^-4 relative per element); against the CPU twin (moe_experts_fp8_wgmma_cpu): the tensor core's fp32
// accumulation, and the rare act element whose e4m3 rounding flips with g and u's last bits.
//
// BF16 weights (session 26; the mma.sync grouped kernels read them at 58-62% of the copy rate in the step, S26b): the
// same launches with 2-byte elements, so a unit is 64 columns (128 bytes: the same stages and swizzle): steps 1 and 3
// round x and act to bf16 (round to nearest even, no scales), and each unit is 4 wgmma m64nNk16 (bf16) accumulated in
// fp32 straight into the tile's sums (no promotion). Against exact arithmetic: x's and act's bf16 roundings (2^-8
// relative per element); against the twin: the tensor core's fp32 accumulation order.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/moe.h"

namespace glm5 {

// Why moe_fp8_wgmma_experts_cuda does not run p ("" when it does): FP8 weights with block scales or BF16 weights,
// hidden and inter multiples of 128, 16-byte aligned weights, x, act and pair_out, E <= 512 local experts, no fused
// shared expert, the group / pair_out scratch, and a compute capability 9.0 device.
std::string moe_fp8_wgmma_unsupported(const MoeExpertsParams& p);

// Token tile, slot rows and the scratch (one buffer, MoeExpertsParams::wgmma_scratch) for B tokens.
struct MoeFp8WgmmaPlan {
  int N = 0;               // tokens (slot rows) per tile: the smallest of 8 / 16 / 32 / 64 >= 4 x the mean pairs per
                           // expert (B k / total experts); an expert with more pairs takes several token tiles
  int rows = 0;            // slot rows: B k + 3 E rounded up to 4 (the pad of every expert's bucket)
  int scale_ld = 0;        // floats per 128-column block row of the scales (= rows)
  int ksplit = 1;          // gate_up tiles per (expert, row block, token tile) along k: 1 unless forced to 2 (measured
                           // slower at GLM-5 batch 8 / 32 / 128 on the H200: moe_fp8_wgmma_plan's comment)
  size_t x_codes = 0, x_scales = 0, act_codes = 0, act_scales = 0;  // byte offsets in the scratch (128-aligned)
  size_t sched = 0;        // int32 [2 (E + 1) + rows]: the slot-row schedule (MoeSlotSchedule, kernels/moe.h); its
                           // offset does not depend on ksplit
  size_t gu = 0;           // ksplit 2: [B k][2][inter] floats of g and u sums, zero before each call and after (last)
  size_t scratch_bytes = 0;
};
// ksplit 2 forces the k split (MoeExpertsParams::wgmma_ksplit; needs hidden / 128 even and FP8 weights, else 1 is
// taken); 0 or 1: none. w_dtype BF16: the slot rows hold bf16 (2 bytes per element; the scale regions go unused).
// Depends on the shapes only (not the device), so a caller can size the scratch before a device exists.
MoeFp8WgmmaPlan moe_fp8_wgmma_plan(int B, int k, int E, int num_experts_total, int hidden, int inter, int ksplit = 0,
                                   DType w_dtype = DType::F8_E4M3);

// Zeroes a new scratch buffer (the k-split sums must start at zero; every call leaves them zero). Synchronous.
void moe_fp8_wgmma_scratch_init(uint8_t* scratch, size_t bytes);

// moe_fp8_wgmma_plan for p, checked: throws glm5::Error naming the field unless p is supported
// (moe_fp8_wgmma_unsupported), wgmma_ksplit is 0, 1 or 2 and wgmma_scratch is 128-byte aligned with at least the
// plan's scratch_bytes. moe_experts_cuda computes it once per call for the two functions below.
MoeFp8WgmmaPlan moe_fp8_wgmma_checked_plan(const MoeExpertsParams& p);

// Where moe_group_kernel writes the slot-row schedule these kernels read (in p.wgmma_scratch, the plan's `sched`), and
// their token tile. The one-argument form checks the plan first.
MoeSlotSchedule moe_fp8_wgmma_slot_schedule(const MoeExpertsParams& p, const MoeFp8WgmmaPlan& q);
MoeSlotSchedule moe_fp8_wgmma_slot_schedule(const MoeExpertsParams& p);

// Launches 1-4 above on `stream` for p (moe_group_kernel's buckets in p.group and its schedule at
// moe_fp8_wgmma_slot_schedule(p) already, or launched before on the stream), on `sms` persistent CTAs; the caller then launches the combine. Needs p.wgmma_scratch of at least the plan's
// scratch_bytes (for these B, k, experts, shapes, w_dtype and wgmma_ksplit), zeroed once by
// moe_fp8_wgmma_scratch_init. Throws glm5::Error when unsupported (naming why) or on a launch failure.
// `q`: moe_fp8_wgmma_checked_plan(p).
void moe_fp8_wgmma_experts_cuda(const MoeExpertsParams& p, const MoeFp8WgmmaPlan& q, int sms, cudaStream_t stream);

// CPU twin of the whole routed path (no shared expert), FP8 or BF16 weights: x and act quantized as the GPU does (BF16:
// rounded to bf16, scales 1), each 128-column block's
// code products summed in double and promoted with s_x s_w in double, g and u stored as fp32, act = silu(g) u in fp32,
// pair outputs fp32, then out[b] (=|+=) the slots' weighted sum in slot order (fmaf, as moe_combine_kernel). Also
// writes p.act [B k, inter] with the dequantized act each pair used (code x scale), for error bounds. Expert ids
// outside [expert_begin, expert_begin + E) contribute nothing. Any shapes with hidden, inter % 128 == 0.
void moe_experts_fp8_wgmma_cpu(const MoeExpertsParams& p);

}  // namespace glm5
