// CUDA kernel of moe_gate.h: RMSNorm + BF16 router GEMV + routing in one launch (B <= 4).
// Grid: ceil(E / 4) CTAs (GLM-5: 64), each computing 4 router rows as linear_bf16.cu's GEMV does (8 warps split k,
// lane l of warp w reads the 16 bytes at column 8 (32 w + l) + 2048 s of each row, warp sums, then the 8 warp
// partials in warp order). Before the PDL wait a CTA issues all its weight loads (4 rows x k BF16: 48 KB at GLM-5,
// up to 4 steps of 16 B per row and lane in registers), so its bytes stream while attn.o_proj finishes. After it,
// every CTA normalizes the B rows of x itself (norm.cuh's vector path: the standalone kernel's arithmetic) into
// shared memory; CTA 0 also writes them to norm.y for the experts. Then the dot products, the logits written, and
// the last CTA to count itself in (a gpu-scope fence, then an atomic on `counter`) routes each token with one warp
// (moe_route.cuh's route_token_block, the rank form; the logits read through L2: other CTAs wrote them) and resets
// the counter.
// Bytes: E * hidden * 2 (router) + B * hidden * 4 * (64 CTAs reading x, mostly from L2) + writes; negligible FLOPs.
#include <algorithm>
#include <cstdint>
#include <string>

#include "common/error.h"
#include "kernels/bf16_dot.cuh"
#include "kernels/kv_cast.cuh"
#include "kernels/kv_layout.h"
#include "kernels/launch.cuh"
#include "kernels/linear_bf16.h"
#include "kernels/moe_gate.h"
#include "kernels/moe_route.cuh"
#include "kernels/norm.cuh"

namespace glm5 {

namespace {

constexpr int kWarps = 8, kGemvThreads = 32 * kWarps;  // the GEMV's warps (linear_bf16.cu's layout)
constexpr int kRows = 4;                                // router rows per CTA
constexpr int kStep = kGemvThreads * 8;                 // columns per step (2048)
constexpr int kMaxSteps = 4;                            // k <= 8192: every weight load before the wait
constexpr int kMaxThreads = 512;                        // rmsnorm_vec_threads(8192)
constexpr int kMaxTokens = 4;
constexpr int kMaxExperts = 256;  // the routing's shared scratch (moe_gate_fusable: route_warp_p's E <= 256)

template <int MT>
__global__ void __launch_bounds__(kMaxThreads) moe_gate_kernel(MoeGateParams p, int norm_threads) {
  extern __shared__ float4 xs4[];  // [B][hidden] the normalized rows
  float* xs = reinterpret_cast<float*>(xs4);
  __shared__ float red[kWarps][kRows][MT];
  __shared__ int last;
  __shared__ __align__(16) float score[kMaxExperts], choice[kMaxExperts];  // the routing's scratch
  __shared__ float gscore[kMaxExperts / 2];
  __shared__ int picks[32];
  const LinearParams& q = p.router;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int r0 = blockIdx.x * kRows, ldw = q.w_stride(), c0 = tid * 8;
  const bool gemv = tid < kGemvThreads;
  const uint16_t* w = static_cast<const uint16_t*>(q.w);
  uint4 wv[kMaxSteps][kRows];
#pragma unroll
  for (int s = 0; s < kMaxSteps; ++s)
#pragma unroll
    for (int r = 0; r < kRows; ++r) {  // weights: no kernel of the step writes them
      const int c = c0 + s * kStep;
      wv[s][r] = gemv && c < q.k ? __ldg(reinterpret_cast<const uint4*>(w + size_t(min(r0 + r, q.n - 1)) * ldw + c))
                                 : make_uint4(0, 0, 0, 0);
    }
  pdl_wait();
  const NormParams& nm = p.norm;
  const int n4 = nm.dim / 4;
#pragma unroll
  for (int t = 0; t < MT; ++t) {
    if (t >= nm.rows) break;  // uniform over the block: block_sum's barriers stay matched
    const float4* x = reinterpret_cast<const float4*>(nm.x + size_t(t) * nm.x_stride);
    float4 v[norm_dev::kVecPerThread];
#pragma unroll
    for (int j = 0; j < norm_dev::kVecPerThread; ++j) {
      const int i = tid + j * norm_threads;
      v[j] = i < n4 && tid < norm_threads ? x[i] : make_float4(0.f, 0.f, 0.f, 0.f);
    }
    norm_dev::rmsnorm_vec_regs(v, nm.weight, xs + size_t(t) * nm.dim, nm.dim, nm.eps, norm_threads);
  }
  __syncthreads();
  if (blockIdx.x == 0)  // the experts' input (the other CTAs' copies stay in their shared memory)
    for (int i = tid; i < nm.rows * n4; i += blockDim.x) reinterpret_cast<float4*>(nm.y)[i] = xs4[i];
  float acc[kRows][MT] = {};
  if (gemv) {
#pragma unroll
    for (int s = 0; s < kMaxSteps; ++s) {
      const int c = c0 + s * kStep;
      if (c >= q.k) break;
#pragma unroll
      for (int t = 0; t < MT; ++t) {
        if (t < q.m) {
          const float4* xr = reinterpret_cast<const float4*>(xs + size_t(t) * q.k + c);
          const float4 a = xr[0], b = xr[1];
#pragma unroll
          for (int r = 0; r < kRows; ++r) acc[r][t] += dot8_bf16(wv[s][r], a, b);
        }
      }
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r)
#pragma unroll
      for (int t = 0; t < MT; ++t) {
        const float v = warp_sum(acc[r][t]);
        if (lane == 0) red[warp][r][t] = v;
      }
  }
  __syncthreads();
  if (tid < kRows * MT) {
    const int r = tid / MT, t = tid % MT;
    if (r0 + r < q.n && t < q.m) {
      float s = 0.f;
#pragma unroll
      for (int w8 = 0; w8 < kWarps; ++w8) s += red[w8][r][t];
      q.y[size_t(t) * q.n + r0 + r] = s;
    }
  }
  __syncthreads();  // this CTA's logits are written (by threads < 16)
  if (tid == 0) {
    __threadfence();  // cumulative over the CTA's writes, ordered before the count
    last = atomicAdd(p.counter, 1) == int(gridDim.x) - 1;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();  // every other CTA's logits are visible from here (they counted after their fences)
  for (int b = 0; b < p.route.B; ++b) {  // the block-wide rank form (route_token_block: ~1 us, not ~2-4 per token)
    const float* logits = p.route.logits + size_t(b) * p.route.E;
    moe_route_dev::route_token_block(p.route, b, [&](int i) { return __ldcg(logits + i); }, score, choice, gscore,
                                     picks);
  }
  if (tid == 0) *p.counter = 0;  // for the next launch (all CTAs have counted)
}

using GateKernel = void (*)(MoeGateParams, int);

bool overlaps(const void* a, size_t a_bytes, const void* b, size_t b_bytes) {
  const auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return x < y + b_bytes && y < x + a_bytes;
}

}  // namespace

bool moe_gate_fusable(const MoeGateParams& p) {
  try {
    validate_moe_gate_params(p, "moe_gate_fusable");
  } catch (const Error&) {
    return false;
  }
  const NormParams& n = p.norm;
  const int B = n.rows;
  return B <= kMaxTokens && norm_dev::rmsnorm_vec_ok(n, kMaxThreads) && n.x_stride == n.dim &&
         !overlaps(n.x, size_t(B) * n.dim * 4, n.y, size_t(B) * n.dim * 4) && linear_bf16_gemv_preferred(p.router) &&
         p.router.k <= kMaxSteps * kStep && p.route.k <= 32 && p.route.E <= kMaxExperts && p.route.E % 32 == 0 &&
         size_t(B) * n.dim * 4 <= 227 * 1024 && p.counter != nullptr;
}

void moe_gate_cuda(const MoeGateParams& p, cudaStream_t stream) {
  validate_moe_gate_params(p, "moe_gate_cuda");
  require(moe_gate_fusable(p),
          "moe_gate_cuda: MoeGateParams not fusable (needs B <= 4, dim % 4 == 0 and <= 8192 with aligned, contiguous, "
          "non-overlapping rows, a BF16 router GEMV, E a multiple of 32 up to 256, k <= 32, a counter); got B = " +
              std::to_string(p.norm.rows) + ", dim = " + std::to_string(p.norm.dim) + ", E = " +
              std::to_string(p.route.E));
  const int B = p.norm.rows;
  const int norm_threads = norm_dev::rmsnorm_vec_threads(p.norm.dim);
  const int threads = std::max(kGemvThreads, norm_threads);
  const size_t smem = size_t(B) * p.norm.dim * 4;
  GateKernel k = B == 1 ? moe_gate_kernel<1> : B == 2 ? moe_gate_kernel<2> : moe_gate_kernel<4>;
  // (the static scratch counts against the 48 KiB default too: B 2 at GLM-5 is 48 KiB dynamic alone)
  if (smem > 32 * 1024) CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  launch_kernel(k, (p.router.n + kRows - 1) / kRows, threads, smem, stream, p, norm_threads);
  CUDA_CHECK_LAUNCH();
}

}  // namespace glm5
