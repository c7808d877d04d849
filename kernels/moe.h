// MoE decode: routing (DeepSeek-V3 noaux_tc, as HF GlmMoeDsaMoE.route_tokens_to_experts) and the
// routed experts (SwiGLU), all selected experts of all tokens in one grouped launch family.
#pragma once
#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "common/dtype.h"

namespace glm5 {

// s = sigmoid(logits); choice = s + bias; group score = sum of the top-2 choice scores of each of
// n_group groups; keep topk_group groups; top-k experts by choice among them; weight = s (un-biased)
// of the chosen, divided by their sum (+1e-20) if norm_topk_prob, times routed_scaling_factor.
struct MoeRouteParams {
  const float* logits;   // [B, E] router logits (fp32)
  const float* bias;     // [E] e_score_correction_bias
  int32_t* topk_ids;     // [B, k]
  float* topk_weights;   // [B, k]
  int B = 0, E = 0, k = 0, n_group = 1, topk_group = 1;
  bool norm_topk_prob = true;
  float routed_scaling_factor = 1.f;
  // CUDA: where E % 32 == 0 and n_group <= 256, route each token with a 256-thread block by ranks
  // (moe_route.cuh's route_token_block: every expert's rank at once) instead of one warp picking the k experts one
  // after the other (~15 dependent shuffles a pick). The same ids and weights (EngineOptions::moe_route_rank).
  bool rank_form = false;
};
// As HF (transformers 5.x GlmMoeDsaMoE), experts of dropped groups get choice score -inf
// (masked_fill(~mask, -inf)): they are picked only once the kept groups run out. Ties: lower
// expert index wins. topk_ids come out by descending choice score. A NaN choice score (NaN logit or bias)
// counts as -inf: picked only after every finite one.
// Throws glm5::Error naming `op` and the field unless pointers are non-null, B, E, k > 0, k <= E,
// n_group divides E with >= 2 experts per group (the top-2 group score) or n_group == 1,
// 1 <= topk_group <= n_group.
void validate_moe_route_params(const MoeRouteParams& p, const char* op);
void moe_route_cpu(const MoeRouteParams& p);
void moe_route_cuda(const MoeRouteParams& p, cudaStream_t stream);

// out[b,:] = sum_j topk_weights[b,j] * down_e(silu(gate_e x_b) * up_e x_b),  e = topk_ids[b,j]
constexpr int kMoeGroupMinTokens = 4;  // the engine's smallest batch on the expert-grouped path
// The slot-row schedule of the TMA-fed expert kernels (kernels/sm90a/moe_fp8_wgmma.h), written by the bucketing
// kernel (moe_group_kernel) in the same pass as the buckets, so the four launches after it read it instead of each
// CTA re-deriving it from the bucket offsets. out (int32, in the wgmma scratch, moe_fp8_wgmma_slot_schedule):
//   [0, E]            R[e]: expert e's first slot row, sum over e' < e of count_e' rounded up to 4; R[E] = used rows
//   [E + 1, 2 E + 1]  U[e]: expert e's first token tile, sum over e' < e of ceil(count_e' / tile_n); U[E] = all tiles
//   [2 E + 2, + R[E]) the source of slot row j: its pair index (token * k + slot), or -1 for a pad row (zeros)
// out null: only the buckets.
struct MoeSlotSchedule {
  int32_t* out = nullptr;
  int tile_n = 0;  // token (slot-row) tile of the GEMMs: 8, 16, 32 or 64
};
// Where a schedule for E local experts keeps each slot row's source (int32 entries from out), and its size in bytes
// for `rows` slot rows: the one description of the layout above for its writer, readers and tests.
constexpr int moe_slot_schedule_src(int E) { return 2 * (E + 1); }
constexpr size_t moe_slot_schedule_bytes(int E, int rows) {
  return (size_t(moe_slot_schedule_src(E)) + size_t(rows)) * sizeof(int32_t);
}
struct MoeExpertsParams {
  const float* x;            // [B, hidden]
  const int32_t* topk_ids;   // [B, k]
  const float* topk_weights; // [B, k]
  const void* w_gate;        // [E, inter, hidden]
  const void* w_up;          // [E, inter, hidden]
  const void* w_down;        // [E, hidden, inter]
  DType w_dtype = DType::F32;  // CPU: F32, BF16 or F8_E4M3; CUDA: BF16 or F8_E4M3
  // F8_E4M3 only: 128x128 block scales (HF weight_scale_inv, stacked per expert), fp32:
  // s_gate, s_up [E, ceil(inter/128), ceil(hidden/128)], s_down [E, ceil(hidden/128), ceil(inter/128)];
  // weight (e, r, c) = e4m3(w[e, r, c]) * s[e, r/128, c/128].
  const float* s_gate = nullptr;
  const float* s_up = nullptr;
  const float* s_down = nullptr;
  float* act;                // [B, k, inter] scratch
  float* out;                // [B, hidden] (overwritten)
  int B = 0, E = 0, k = 0, hidden = 0, inter = 0;
  // Expert parallelism (--tp N): the weights hold global experts [expert_begin, expert_begin + E) of
  // num_experts_total; a slot routed to another rank's expert contributes nothing here (its rank adds
  // it, and the all-reduce sums the ranks). 0 = E: all experts local.
  int expert_begin = 0;
  int num_experts_total = 0;
  // Optional CUDA scratch for expert-grouped execution (used when both are set and B >= group_min_tokens): the
  // (token, slot) pairs are bucketed by expert, and each selected expert's weights are read once for
  // all the tokens routed to it instead of once per token (at GLM-5 batch 32, ~163 distinct experts
  // for 256 slots; at 128, ~250 for 1024). group: int32 [E + 1 + B*k] (bucket offsets, then pair
  // indices); pair_out: fp32 [B*k, hidden] (each pair's down projection, summed per token in slot
  // order as the per-token kernel does). Null: one block row per (token, slot).
  // pair_out alone (group null or B < 4) with FP8 weights: the per-token down projection runs per
  // (token, slot) pair into pair_out and a combine kernel sums the slots (bitwise the same result as
  // without it, and faster: see moe_down_pair_fp8_kernel in moe.cu).
  int32_t* group = nullptr;
  float* pair_out = nullptr;
  // Grouped path (group and pair_out set, B >= 4) with weight rows that are 16-byte multiples:
  // true = the tensor-core kernels (moe_*_grouped_mma_kernel, W read straight into registers, 8 pairs of
  // an expert per n-tile), for FP8 and BF16 experts alike (the name predates the BF16 variant).
  // FP8: linear_fp8_mma's warp tile; x (gate_up) and act (down) rounded to f16 with per-128-column
  // power-of-two scales (|error| <= 2^-11 |value|, kernels/linear_fp8.h). BF16: bf16_mma_warp_tile
  // (kernels/linear_bf16_mma.cuh); x and act split into bf16 hi + lo (|error| <= 2^-16 |value|).
  // So they are NOT bit-compatible with the per-token path: gate/up differ by <= eps sum |x w| each, down
  // by <= sum |w_d| (|d act| + eps |act|) (eps 2^-11 / 2^-16, plus fp32 summation);
  // tests/kernels/gpu_moe_grouped.cpp checks this bound per output.
  // false = the fp32 GEMV-style grouped kernels (bitwise equal to the per-token path).
  bool fp8_mma = true;
  // FP8 or BF16 weights on the grouped path: true (default) with wgmma_scratch set runs the experts on the tensor
  // cores fed by TMA (kernels/sm90a/moe_fp8_wgmma.h: persistent CTAs; FP8: x and act quantized per 128 columns to
  // e4m3; BF16: rounded to bf16) where moe_fp8_wgmma_unsupported(p) is empty, instead of the fp8_mma kernels. Not
  // bit-compatible with them: tests/kernels/gpu_moe_grouped.cpp bounds both against exact arithmetic. (The name
  // predates the BF16 form.)
  bool fp8_wgmma = true;
  uint8_t* wgmma_scratch = nullptr;  // moe_fp8_wgmma_plan(B, k, E, ...).scratch_bytes bytes, 128-byte aligned
  size_t wgmma_scratch_bytes = 0;
  int wgmma_ksplit = 0;  // gate_up's k split: 0 = moe_fp8_wgmma_plan's choice, 1 or 2 forced (tests, A/B)
  // The smallest batch B that takes the grouped path when group and pair_out are set (below it: the per-token pair
  // path). The engine keeps kMoeGroupMinTokens; 1 lets the bench time the grouped kernels (the FP8 wgmma family) at
  // batch 1-3 against the pair path (`bench kernels --only moe`, moe_experts_fp8_wgmma at batch 1).
  int group_min_tokens = kMoeGroupMinTokens;
  // Tensor-core grouped kernels only: each warp issues the next column step's weight loads before the
  // current step's math (the warp tiles' PF option; more bytes in flight, more registers). -1 (default):
  // per weight type as measured on the H200 (S9f, `glm5prof bench kernels --only moe`, moe_experts_*_mma_pf):
  // on for BF16 (+3-7%: 59.5 -> 63.7% of copy at batch 32), off for FP8 (the FP8 kernels already hold ~200
  // registers; with the prefetch 91.5 -> 60.4%); 0 off; 1 on. Either way the same bits.
  int mma_prefetch = -1;
  // Per-token FP8 down projection (moe_down_pair_fp8_kernel): 1 (default) issues each warp's first step of weight
  // loads before the wait for moe_gate_up_fp8_kernel (PDL), so the first wave's DRAM round trips overlap gate_up's
  // tail (S17a, H200, GLM-5 batch 1: moe.experts 6.85 -> 6.73 ms per step); 0 waits first. The same bits either
  // way. Throws glm5::Error outside {0, 1}. (Session 16's register caps, 3 CTAs per SM, were slower in both
  // kernels, S16d and S17a, and were removed.)
  int down_early_loads = 1;
  // Stage Shared of the per-token FP8 path (the shared expert on DecodeEngine's side stream, batch < 4): 1 (default)
  // lets its down kernel's CTAs be scheduled only when the gate_up CTAs exit (no early
  // griddepcontrol.launch_dependents); 0 lets them in at gate_up's start, as every other stage does. Why (S19g
  // trace, GLM-5 batch 1): the early-admitted down CTAs (192, waiting in their PDL wait) and the gate_up CTAs (128)
  // held all 264 slots of the 132 SMs while the routing ran on the main stream, so the routed experts' gate_up, the
  // step's longest kernel, started ~2.7 us after the routing ended. The same bits either way. Throws glm5::Error
  // outside {0, 1}.
  int shared_late_trigger = 1;
  // Per-token FP8 path, routed pairs (stage All or Routed): non-null runs gate_up and down as ONE persistent launch
  // (moe_pair_fused_fp8_kernel; the combine stays a second launch). Scratch of moe_pair_sync_ints(B, k) ints (the
  // shared expert's pairs included),
  // zero before the first call; every call leaves it zero. One stream at a time per scratch. The same bits as the
  // two-kernel path.
  int* pair_sync = nullptr;
  // Optional shared expert fused into the routed launches (DeepSeek / GLM-5 `shared_experts`): out[b]
  // gets + down_s(silu(gate_s x_b) * up_s x_b) after the routed slots, as the HF order (routed sum, then
  // + shared). Rows: shared_gate_up [2 * inter, hidden] = [gate; up], shared_down [hidden, inter] (the
  // same inter as the routed experts), dense, w_dtype, F8_E4M3 with 128x128 block scales
  // s_shared_gate_up [2 * inter / 128, ceil(hidden / 128)] and s_shared_down [ceil(hidden / 128),
  // ceil(inter / 128)]. act then holds B * (k + 1) rows (the shared expert's act of token b is row
  // B*k + b) and pair_out B * (k + 1) rows. CUDA: only the per-token FP8 path (B < 4, pair_out set,
  // 16-byte aligned rows); elsewhere moe_experts_cuda throws. At GLM-5 batch 1 the shared expert ran as
  // two GEMVs and an activation kernel: ~23 us per layer for 37.7 MB on the H200 (2026-11-29).
  const void* shared_gate_up = nullptr;
  const void* shared_down = nullptr;
  const float* s_shared_gate_up = nullptr;
  const float* s_shared_down = nullptr;
  // out[b, :] += the result instead of out[b, :] = result: the residual stream's add fused in
  // (DecodeEngine at --tp 1 with the shared expert fused). The same bits as out + result computed apart.
  bool accumulate = false;
  // Optional RMSNorm of the result rows (the next layer's input norm, or the final norm): with next_norm_weight
  // set, next_norm_out[b, :] = rmsnorm(out[b, :]) * next_norm_weight (HF GlmMoeDsaRMSNorm, eps next_norm_eps) is
  // written after out, by the combine launch itself on the CUDA paths that have one (pair_out set): the last CTA
  // of each token's row normalizes it, instead of the norm's own launch (session 17). The same bits as
  // rmsnorm_cuda on out. CUDA needs hidden % 4 == 0, hidden <= 16384, 16-byte aligned out / weight / next_norm_out
  // and a combine launch (pair_out); next_norm_out must not overlap out. Throws glm5::Error otherwise, before any
  // launch (the CPU twin: both pointers or neither).
  const float* next_norm_weight = nullptr;  // [hidden]
  float* next_norm_out = nullptr;           // [B, hidden]
  float next_norm_eps = 1e-5f;
  int* combine_counters = nullptr;          // CUDA with next_norm_weight: [B] ints, zero before, left zero
  // Which launches moe_experts_cuda makes (the fused shared expert's per-token FP8 path only; else All):
  //   All:    gate_up and down of every (token, slot) pair, then the slot combine;
  //   Shared: gate_up and down of the B shared-expert pairs only (reads no topk_ids / topk_weights: it can run
  //           before routing, e.g. on another stream; DecodeEngine's side stream at batch < 4);
  //   Routed: gate_up and down of the B*k routed pairs only;
  //   Combine: the slot combine only (after Shared and Routed have both completed).
  // Shared + Routed (either order, or concurrently: they write disjoint act / pair_out rows) + Combine give All's bits.
  enum class Stage { All, Shared, Routed, Combine };
  Stage stage = Stage::All;
};
// Throws glm5::Error naming `op` and the field unless pointers are non-null, B, E, k, hidden,
// inter > 0 and w_dtype is BF16 or F8_E4M3 with its three scale pointers (or F32 when
// allow_f32_weight: the CPU twin). Expert ids are not
// checked here (device data): the CPU twin throws on an id outside [0, E); the CUDA kernels let such
// a slot contribute nothing (act row 0, skipped in the sum).
void validate_moe_experts_params(const MoeExpertsParams& p, const char* op, bool allow_f32_weight);
void moe_experts_cpu(const MoeExpertsParams& p);
void moe_experts_cuda(const MoeExpertsParams& p, cudaStream_t stream);
// Ints of MoeExpertsParams::pair_sync for B tokens and top-k k: a tile counter, a finished-CTA counter, one done
// counter per pair the launch runs: the B*k routed pairs and, at Stage::All with the fused shared expert, its B pairs.
inline size_t moe_pair_sync_ints(int B, int k) { return 2 + size_t(B) * (size_t(k) + 1); }

}  // namespace glm5
