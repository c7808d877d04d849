// The MoE gate of a decode step in one launch: the MLP input's RMSNorm (HF post_attention_layernorm), the router
// (HF GlmMoeDsaTopkRouter / DeepSeek-V3 MoEGate: logits = xn W_r^T, W_r = mlp.gate.weight [E, hidden] in BF16)
// and the routing (moe.h's MoeRouteParams: sigmoid scores, e_score_correction_bias, group-limited top-k).
//
// Why (H200, GLM-5 batch 1, session 20's S20a trace): between attn.o_proj and the routed experts' first weight load
// the main stream ran three launches, mlp.norm (one CTA), moe.router (a BF16 GEMV of 3.1 MB) and moe.route (one
// warp): 11.6 us per MoE layer on the critical path with HBM idle but for the shared expert on the side stream.
// Each launch pays the previous grid's drain and its own ramp (Nsight Compute, serialized: 4.3 / 4.5 / 5.1 us). Here
// the router's CTAs load all their weight rows before the PDL wait, then each normalizes the hidden state itself (the
// norm kernel's arithmetic), multiplies, and the last CTA to finish routes (moe_route.cuh's block-wide rank form: the
// same picks in the same order as the route kernel's serial warp picks, ~1 us instead of ~2-4): the same bits as
// rmsnorm_cuda + linear_cuda (its BF16 GEMV) + moe_route_cuda.
#pragma once
#include <cuda_runtime.h>

#include "kernels/linear.h"
#include "kernels/moe.h"
#include "kernels/norm.h"

namespace glm5 {

struct MoeGateParams {
  NormParams norm;       // RMSNorm: x [B, hidden] (the residual stream) -> y = xn [B, hidden]; rows B, dim hidden
  LinearParams router;   // x == norm.y, BF16 w [E, hidden] (ldw allowed), y = logits [B, E] fp32; m == B, n == E,
                         // k == hidden, accumulate false
  MoeRouteParams route;  // logits == router.y; B and E as above
  // CUDA: one int, zero before the first launch; every launch leaves it zero (its last CTA resets it), so a CUDA
  // graph replays it. The CPU twin ignores it.
  int* counter = nullptr;
};

// Throws glm5::Error naming `op` and the field unless each part is valid (validate_norm_params,
// validate_linear_params, validate_moe_route_params) and the parts chain: router.x == norm.y, route.logits ==
// router.y, norm.rows == router.m == route.B, norm.dim == router.k, router.n == route.E, !router.accumulate.
void validate_moe_gate_params(const MoeGateParams& p, const char* op);

// Whether moe_gate_cuda runs p as one launch: the above, and B <= 4, the norm's vector path (dim % 4 == 0, 16-byte
// aligned rows, rmsnorm_vec_threads(dim) <= 512: dim <= 8192) with rows dim apart, the BF16 GEMV's conditions
// (linear_bf16_gemv_preferred) with k <= 8192, x and y not overlapping, E a multiple of 32 up to 256, k (experts per
// token) <= 32 and a counter.
bool moe_gate_fusable(const MoeGateParams& p);

// rmsnorm_cpu, linear_cpu and moe_route_cpu in that order.
void moe_gate_cpu(const MoeGateParams& p);
// One launch of ceil(E / 4) CTAs; throws glm5::Error unless moe_gate_fusable(p) (callers run the three ops apart
// then).
void moe_gate_cuda(const MoeGateParams& p, cudaStream_t stream);

}  // namespace glm5
