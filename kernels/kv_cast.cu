// CUDA kernels of kv_cast.h: FP8 latent rows -> BF16 rows. Memory-bound: one warp per row, grid-stride
// over rows; 16-byte loads/stores when the row layout and both pointers allow it (GLM-5: 656-byte FP8
// rows, 1152-byte BF16 rows), else 4-byte words (every layout's rows are 4-byte multiples).
// Bytes moved: rows * (row_bytes + 2*(L+R)) (gather-cast: plus 4 bytes of index in, 4 out per row).
#include <algorithm>
#include <cstring>
#include <string>

#include "common/error.h"
#include "kernels/kv_cast.cuh"
#include "kernels/kv_cast.h"

namespace glm5 {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

// One warp dequantizes FP8 row `src` (null: writes a zero row) into BF16 row `dst`.
template <bool kVec16>
__device__ void cast_row_warp(const uint8_t* __restrict__ src, uint16_t* __restrict__ dst, const LatentLayout& l,
                              int lane) {
  const int L = l.latent_dim, R = l.rope_dim;
  uint8_t* out = reinterpret_cast<uint8_t*>(dst);
  if (kVec16) {
    const int latent_chunks = L / 16, rope_chunks = 2 * R / 16;
    for (int c = lane; c < latent_chunks + rope_chunks; c += 32) {
      if (c < latent_chunks) {
        uint4 v = src ? __ldg(reinterpret_cast<const uint4*>(src) + c) : make_uint4(0, 0, 0, 0);
        float scale = src ? __ldg(reinterpret_cast<const float*>(src + L) + (16 * c) / l.group) : 0.f;
        uint2 a = dequant4_bf16(v.x, scale), b = dequant4_bf16(v.y, scale);
        uint2 c2 = dequant4_bf16(v.z, scale), d = dequant4_bf16(v.w, scale);
        uint4* o = reinterpret_cast<uint4*>(out + 32 * c);
        o[0] = make_uint4(a.x, a.y, b.x, b.y);
        o[1] = make_uint4(c2.x, c2.y, d.x, d.y);
      } else {
        const int rc = c - latent_chunks;
        uint4 v = src ? __ldg(reinterpret_cast<const uint4*>(src + l.rope_offset()) + rc) : make_uint4(0, 0, 0, 0);
        reinterpret_cast<uint4*>(out + 2 * L)[rc] = v;
      }
    }
  } else {
    const int latent_words = L / 4, rope_words = R / 2;
    for (int w = lane; w < latent_words + rope_words; w += 32) {
      if (w < latent_words) {
        uint32_t v = src ? __ldg(reinterpret_cast<const uint32_t*>(src) + w) : 0u;
        float scale = src ? __ldg(reinterpret_cast<const float*>(src + L) + (4 * w) / l.group) : 0.f;
        uint2 a = dequant4_bf16(v, scale);
        uint32_t* o = reinterpret_cast<uint32_t*>(out + 8 * w);
        o[0] = a.x;
        o[1] = a.y;
      } else {
        const int rw = w - latent_words;
        uint32_t v = src ? __ldg(reinterpret_cast<const uint32_t*>(src + l.rope_offset()) + rw) : 0u;
        reinterpret_cast<uint32_t*>(out + 2 * L)[rw] = v;
      }
    }
  }
}

template <bool kVec16>
__global__ void __launch_bounds__(kThreads) kv_cast_kernel(KvCastParams p) {
  const int lane = threadIdx.x % 32;
  const int64_t W = p.layout.latent_dim + p.layout.rope_dim;
  for (int64_t r = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32; r < p.rows; r += int64_t(gridDim.x) * kWarps)
    cast_row_warp<kVec16>(p.pool + r * p.layout.row_bytes, p.out + r * W, p.layout, lane);
}

template <bool kVec16>
__global__ void __launch_bounds__(kThreads) kv_gather_cast_kernel(KvGatherCastParams p) {
  const int lane = threadIdx.x % 32;
  const int64_t W = p.layout.latent_dim + p.layout.rope_dim;
  for (int64_t i = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32; i < p.count; i += int64_t(gridDim.x) * kWarps) {
    const int32_t t = p.indices[i];
    cast_row_warp<kVec16>(t >= 0 ? p.pool + int64_t(t) * p.layout.row_bytes : nullptr, p.out + i * W, p.layout, lane);
    if (lane == 0) p.compact_indices[i] = t >= 0 ? int32_t(i) : -1;
  }
}

bool aligned16(const void* ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15u) == 0; }

// 16-byte path: FP8 rows, their rope part and BF16 rows all 16-byte multiples, pointers aligned.
bool can_vectorize(const LatentLayout& l, const void* pool, const void* out) {
  return l.row_bytes % 16 == 0 && l.rope_offset() % 16 == 0 && (2 * l.rope_dim) % 16 == 0 &&
         (2 * (l.latent_dim + l.rope_dim)) % 16 == 0 && aligned16(pool) && aligned16(out);
}

void require_aligned4(const void* ptr, const char* who, const char* field) {
  require((reinterpret_cast<uintptr_t>(ptr) & 3u) == 0,
          std::string(who) + ": " + field + " must be 4-byte aligned (the kernel moves 32-bit words)");
}

int grid_for(int64_t rows) {
  int device = 0, sms = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const int64_t needed = (rows + kWarps - 1) / kWarps;
  return int(std::min<int64_t>(needed, int64_t(sms) * 8));
}

}  // namespace

void kv_cast_cuda(const KvCastParams& p, cudaStream_t stream) {
  validate_kv_cast_params(p);
  if (p.rows == 0) return;
  require_aligned4(p.pool, "kv_cast_cuda", "pool");
  require_aligned4(p.out, "kv_cast_cuda", "out");
  const int grid = grid_for(p.rows);
  if (can_vectorize(p.layout, p.pool, p.out)) kv_cast_kernel<true><<<grid, kThreads, 0, stream>>>(p);
  else kv_cast_kernel<false><<<grid, kThreads, 0, stream>>>(p);
  CUDA_CHECK_LAUNCH();
}

void kv_gather_cast_cuda(const KvGatherCastParams& p, cudaStream_t stream) {
  validate_kv_gather_cast_params(p);
  if (p.count == 0) return;
  require_aligned4(p.pool, "kv_gather_cast_cuda", "pool");
  require_aligned4(p.out, "kv_gather_cast_cuda", "out");
  const int grid = grid_for(p.count);
  if (can_vectorize(p.layout, p.pool, p.out)) kv_gather_cast_kernel<true><<<grid, kThreads, 0, stream>>>(p);
  else kv_gather_cast_kernel<false><<<grid, kThreads, 0, stream>>>(p);
  CUDA_CHECK_LAUNCH();
}

}  // namespace glm5
