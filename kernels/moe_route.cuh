// Device code of the MoE routing (moe.h's MoeRouteParams), shared by moe.cu's route kernels and moe_gate.cu's
// fused gate: the warp argmax and top-2 helpers, and the one-warp-per-token routing body.
#pragma once
#include <cmath>
#include <cstdint>

#include "kernels/moe.h"

namespace glm5 {
namespace moe_route_dev {

// Largest value across the warp, ties to the lower index; every lane gets (value, index).
__device__ __forceinline__ void warp_argmax(float& v, int& i) {
  for (int off = 16; off > 0; off >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, v, off);
    const int oi = __shfl_xor_sync(0xffffffffu, i, off);
    if (ov > v || (ov == v && oi < i)) { v = ov; i = oi; }
  }
}

// Top-2 bookkeeping of the group scores (both route kernels): top2_add folds one value into (first, second);
// top2_merge_lanes merges the lists of lanes that differ in the bits below `lanes` (a power of two) by
// shuffles: the top-2 of the union of two top-2 lists, order-free, so every lane ends with its lanes' top 2.
__device__ __forceinline__ void top2_add(float c, float& first, float& second) {
  if (c > first) { second = first; first = c; }
  else if (c > second) second = c;
}
__device__ __forceinline__ void top2_merge_lanes(float& first, float& second, int lanes) {
  for (int off = 1; off < lanes; off <<= 1) {
    const float of = __shfl_xor_sync(0xffffffffu, first, off), os = __shfl_xor_sync(0xffffffffu, second, off);
    second = fmaxf(fminf(first, of), fmaxf(second, os));
    first = fmaxf(first, of);
  }
}

// One warp per token with the choice scores in registers: lane l holds experts [l P, l P + P), P = E / 32
// <= 8 (GLM-5 / DeepSeek-V3: 256 experts, P = 8). moe.cu's block-wide kernel spends two barriers per pick
// (k = 8: 16 of them); here a pick is a local argmax over P registers and a warp argmax. Groups (n_group >
// 1) need each group on whole lanes (group_size % P == 0) and a power-of-two lane count per group; the
// group's top-2 is merged across its lanes by shuffles. Same picks and weights as the CPU twin (ties to
// the lower index, the weight sum in pick order, NaN choices as -inf like the block kernel), and a
// taken expert is a bit in a mask (the block kernel marks it +inf in place, so it could never pick an
// expert whose choice score is +inf itself; the CPU twin can).
// route_token_warp: the body, for token b, run by one whole warp (lane = threadIdx.x % 32); `logit(i)` returns
// p.logits[b * E + i] (how it is read is the caller's: moe_gate.cu reads logits other CTAs wrote through L2).
template <int P, class Logit>
__device__ __forceinline__ void route_token_warp(const MoeRouteParams& p, int b, Logit logit) {
  const int lane = threadIdx.x % 32;
  float score[P], choice[P];
#pragma unroll
  for (int i = 0; i < P; ++i) {
    score[i] = 1.0f / (1.0f + expf(-logit(lane * P + i)));
    choice[i] = score[i] + p.bias[lane * P + i];
    if (isnan(choice[i])) choice[i] = -INFINITY;
  }
  if (p.n_group > 1) {
    const int group_size = p.E / p.n_group, lanes = group_size / P, g = lane * P / group_size;
    float first = -INFINITY, second = -INFINITY;
#pragma unroll
    for (int i = 0; i < P; ++i) top2_add(choice[i], first, second);
    top2_merge_lanes(first, second, lanes);
    const float group_score = first + second;  // validated: >= 2 experts per group
    bool kept = false;
    for (int t = 0; t < p.topk_group; ++t) {
      float v = kept ? -INFINITY : group_score;
      int idx = kept ? 0x7fffffff : g;  // a kept group loses every tie, even against -inf
      warp_argmax(v, idx);
      kept = kept || idx == g;
    }
    if (!kept)
#pragma unroll
      for (int i = 0; i < P; ++i) choice[i] = -INFINITY;  // HF masked_fill(~mask, -inf)
  }
  unsigned taken = 0;
  int my_id = 0;
  float my_w = 0.f, weight_sum = 0.f;
  for (int j = 0; j < p.k; ++j) {
    float v = -INFINITY;
    int idx = 0x7fffffff;
#pragma unroll
    for (int i = 0; i < P; ++i)
      if (!(taken >> i & 1u) && (choice[i] > v || idx == 0x7fffffff)) { v = choice[i]; idx = lane * P + i; }
    warp_argmax(v, idx);
    const int owner = idx / P, slot = idx % P;
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < P; ++i)
      if (i == slot) s = score[i];
    s = __shfl_sync(0xffffffffu, s, owner);
    if (lane == owner) taken |= 1u << slot;
    if (lane == j) {
      my_id = idx;
      my_w = s;
    }
    weight_sum += s;  // every lane, in pick order (the CPU twin's order)
  }
  if (lane < p.k) {
    float w = my_w;
    if (p.norm_topk_prob) w /= (weight_sum + 1e-20f);
    p.topk_ids[size_t(b) * p.k + lane] = my_id;
    p.topk_weights[size_t(b) * p.k + lane] = w * p.routed_scaling_factor;
  }
}

// The experts-per-lane count route_token_warp runs with for `p`, or 0 where it does not apply (the callers
// have already required B > 0 and k <= 32, one lane per pick).
inline int route_warp_p(const MoeRouteParams& p) {
  if (p.E % 32 != 0 || p.E > 256) return 0;
  const int P = p.E / 32;
  if (P != 1 && P != 2 && P != 4 && P != 8) return 0;
  if (p.n_group > 1) {
    const int group_size = p.E / p.n_group;
    if (group_size % P != 0) return 0;
    const int lanes = group_size / P;
    if (lanes > 32 || (lanes & (lanes - 1)) != 0) return 0;
  }
  return P;
}

}  // namespace moe_route_dev
}  // namespace glm5
