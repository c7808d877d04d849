// CUDA rotary position embedding, in place: one block per (row, head), one thread per rotated pair.
// Accurate cosf/sinf (not __cosf: positions reach 1e5+ and the fast versions lose accuracy there);
// products rounded separately (__fmul_rn) so the result matches the CPU twin's fp32 arithmetic.
// Bytes per launch: rows * heads * rope_dim * 8 (read and write x).
#include "common/error.h"
#include "kernels/rope.h"

namespace glm5 {

namespace {

__global__ void rope_kernel(RopeParams p) {
  const int r = blockIdx.x / p.heads, h = blockIdx.x % p.heads;
  const int half = p.rope_dim / 2;
  float* x = p.x + size_t(r) * p.row_stride + size_t(h) * p.head_stride + p.offset;
  const float position = float(p.positions[r]);
  for (int i = threadIdx.x; i < half; i += blockDim.x) {
    const float angle = __fmul_rn(position, p.inv_freq[i]);
    const float c = __fmul_rn(cosf(angle), p.attention_scaling);
    const float s = __fmul_rn(sinf(angle), p.attention_scaling);
    const int ia = p.interleave ? 2 * i : i;
    const int ib = p.interleave ? 2 * i + 1 : i + half;
    const float a = x[ia], b = x[ib];
    x[ia] = __fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s));
    x[ib] = __fadd_rn(__fmul_rn(b, c), __fmul_rn(a, s));
  }
}

}  // namespace

void rope_cuda(const RopeParams& p, cudaStream_t stream) {
  validate_rope_params(p, "rope_cuda");
  const int half = p.rope_dim / 2;
  const int threads = half >= 128 ? 128 : (half + 31) / 32 * 32;
  rope_kernel<<<p.rows * p.heads, threads, 0, stream>>>(p);
  CUDA_CHECK_LAUNCH();
}

}  // namespace glm5
