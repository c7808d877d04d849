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

// Block-wide routing of token b by ranks (every thread of the block calls it; blockDim.x >= 32 and >= n_group),
// for a block that has its logits at hand (moe_gate.cu's last CTA). The warp body above picks the k experts one
// after the other, each pick a warp argmax (~15 dependent shuffles): ~2 us of latency per token on the H200. Here
// thread e computes its expert's rank in the total order the picks follow (masked choice descending, ties to the
// lower index; no NaN: NaN choices are -inf) by comparing against all E choices in shared memory, and rank r < k
// is pick r: the same ids in the same order. Groups likewise: a group's score is the sum of its top-2 choices
// (top2_add / top2_merge_lanes, order-free: the same sum as the warp body's), kept when its rank among the group
// scores is below topk_group (a group score is NaN only when a bias is infinite; the ranks then may differ from
// the serial picks). Weights: the scores of the picks summed in pick order, as the warp body and the CPU twin do.
// Scratch: score, choice [E] (16-byte aligned), gscore [n_group], picks [k] in shared memory; E % 32 == 0. Ends with a
// barrier.
template <class Logit>
__device__ void route_token_block(const MoeRouteParams& p, int b, Logit logit, float* score, float* choice,
                                  float* gscore, int* picks) {
  const int tid = threadIdx.x, nt = blockDim.x, lane = tid % 32, warp = tid / 32;
  for (int e = tid; e < p.E; e += nt) {
    const float s = 1.0f / (1.0f + expf(-logit(e)));
    float c = s + p.bias[e];
    if (isnan(c)) c = -INFINITY;
    score[e] = s;
    choice[e] = c;
  }
  __syncthreads();
  if (p.n_group > 1) {
    const int group_size = p.E / p.n_group;
    for (int g = warp; g < p.n_group; g += nt / 32) {
      float first = -INFINITY, second = -INFINITY;
      for (int e = g * group_size + lane; e < (g + 1) * group_size; e += 32) top2_add(choice[e], first, second);
      top2_merge_lanes(first, second, 32);
      if (lane == 0) gscore[g] = first + second;  // validated: >= 2 experts per group
    }
    __syncthreads();
    bool drop = false;  // thread g < n_group: whether group g is dropped
    if (tid < p.n_group) {
      const float v = gscore[tid];
      int rank = 0;
      for (int j = 0; j < p.n_group; ++j) rank += gscore[j] > v || (gscore[j] == v && j < tid);
      drop = rank >= p.topk_group;
    }
    __syncthreads();  // every rank read gscore
    if (tid < p.n_group) gscore[tid] = drop ? 1.f : 0.f;
    __syncthreads();
    for (int e = tid; e < p.E; e += nt)
      if (gscore[e / group_size] != 0.f) choice[e] = -INFINITY;  // HF masked_fill(~mask, -inf)
    __syncthreads();
  }
  // E % 32 == 0 (the caller's condition) and choice 16-byte aligned: 32 choices per pass as 8 broadcast float4
  // loads, unrolled (one dependent shared load per choice measured ~4 us per token at E = 256, S20c).
  const float4* c4 = reinterpret_cast<const float4*>(choice);
  for (int e = tid; e < p.E; e += nt) {
    const float v = choice[e];
    int rank = 0;
    for (int j = 0; j < p.E / 4 && rank < p.k; j += 8) {  // stop once k choices rank above: not a pick
      int gt = 0;
#pragma unroll
      for (int u = 0; u < 8; ++u) {
        const float4 c = c4[j + u];
        const int i = 4 * (j + u);
        gt += (c.x > v || (c.x == v && i < e)) + (c.y > v || (c.y == v && i + 1 < e)) +
              (c.z > v || (c.z == v && i + 2 < e)) + (c.w > v || (c.w == v && i + 3 < e));
      }
      rank += gt;
    }
    if (rank < p.k) picks[rank] = e;
  }
  __syncthreads();
  if (tid < p.k) {
    float weight_sum = 0.f;
    for (int j = 0; j < p.k; ++j) weight_sum += score[picks[j]];  // pick order (the warp body's, the CPU twin's)
    float w = score[picks[tid]];
    if (p.norm_topk_prob) w /= (weight_sum + 1e-20f);
    p.topk_ids[size_t(b) * p.k + tid] = picks[tid];
    p.topk_weights[size_t(b) * p.k + tid] = w * p.routed_scaling_factor;
  }
  __syncthreads();  // the scratch may be reused for the next token
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
