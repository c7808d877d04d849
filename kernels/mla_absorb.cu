// CUDA MLA weight absorption (DeepSeek-V2 paper, section 2.1.2) for decode, simple and correct:
//   absorb:   grid (B*H, ceil(L/128)), one thread per latent column c, q_nope staged in shared
//             memory; the nope rows of W_UK[h] are read coalesced along c.
//   unabsorb: grid (B*H, ceil(v/8)), one warp per output value j, a warp-shuffle dot product of
//             o_latent[b,h,:] with row j of W_UV[h].
// kv_b in BF16 (or F32). Bytes: absorb B*H*nope*L*w + unabsorb B*H*v*L*w weight bytes (w = 2 for
// BF16; re-reads across b come from L2) + activations.
#include <cstdint>

#include "common/error.h"
#include "kernels/mla_absorb.h"

namespace glm5 {

namespace {

constexpr int kAbsorbThreads = 128;
constexpr int kUnabsorbWarps = 8;

template <typename T>
__device__ __forceinline__ float load_weight(const T* w, size_t i) {
  if constexpr (sizeof(T) == 4) return w[i];
  else return bf16_bits_to_float(w[i]);
}

// Dynamic shared memory: nope floats (q_nope of this (b, h)).
template <typename T>
__global__ void mla_absorb_kernel(MlaAbsorbParams p) {
  extern __shared__ float q_nope[];
  const int bh = blockIdx.x, h = bh % p.H;
  const float* q = p.q + size_t(bh) * p.q_head_stride;
  for (int d = threadIdx.x; d < p.nope; d += blockDim.x) q_nope[d] = q[d];
  __syncthreads();
  const int c = blockIdx.y * blockDim.x + threadIdx.x;
  if (c >= p.L) return;
  const T* w = static_cast<const T*>(p.kv_b) + size_t(h) * (p.nope + p.v) * p.L;  // W_UK[h] row 0
  float acc = 0.f;
  for (int d = 0; d < p.nope; ++d) acc += q_nope[d] * load_weight(w, size_t(d) * p.L + c);
  p.q_latent[size_t(bh) * p.L + c] = acc;
}

template <typename T>
__global__ void mla_unabsorb_kernel(MlaUnabsorbParams p) {
  const int bh = blockIdx.x, b = bh / p.H, h = bh % p.H;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int j = blockIdx.y * kUnabsorbWarps + warp;
  if (j >= p.v) return;  // whole warp leaves together
  const float* o = p.o_latent + size_t(bh) * p.L;
  const T* w = static_cast<const T*>(p.kv_b) + (size_t(h) * (p.nope + p.v) + p.nope + j) * p.L;
  float acc = 0.f;
  for (int c = lane; c < p.L; c += 32) acc += o[c] * load_weight(w, c);
  for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
  if (lane == 0) p.out[size_t(b) * p.H * p.v + size_t(h) * p.v + j] = acc;
}

}  // namespace

void mla_absorb_cuda(const MlaAbsorbParams& p, cudaStream_t stream) {
  validate_mla_absorb_params(p, "mla_absorb_cuda", true);
  const size_t smem = sizeof(float) * size_t(p.nope);
  require(smem <= 48 * 1024, "mla_absorb_cuda: MlaAbsorbParams.nope = " + std::to_string(p.nope) +
                                 ", expected <= 12288 (q_nope is staged in shared memory)");
  const dim3 grid(p.B * p.H, (p.L + kAbsorbThreads - 1) / kAbsorbThreads);
  if (p.kv_b_dtype == DType::BF16) mla_absorb_kernel<uint16_t><<<grid, kAbsorbThreads, smem, stream>>>(p);
  else mla_absorb_kernel<float><<<grid, kAbsorbThreads, smem, stream>>>(p);
  CUDA_CHECK_LAUNCH();
}

void mla_unabsorb_cuda(const MlaUnabsorbParams& p, cudaStream_t stream) {
  validate_mla_unabsorb_params(p, "mla_unabsorb_cuda", true);
  const dim3 grid(p.B * p.H, (p.v + kUnabsorbWarps - 1) / kUnabsorbWarps);
  if (p.kv_b_dtype == DType::BF16) mla_unabsorb_kernel<uint16_t><<<grid, 32 * kUnabsorbWarps, 0, stream>>>(p);
  else mla_unabsorb_kernel<float><<<grid, 32 * kUnabsorbWarps, 0, stream>>>(p);
  CUDA_CHECK_LAUNCH();
}

}  // namespace glm5
