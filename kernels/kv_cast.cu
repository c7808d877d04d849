// CUDA kernels of kv_cast.h: FP8 latent rows -> BF16 rows. Memory-bound.
// 16-byte path (row layout and both pointers allow it; GLM-5: 656-byte FP8 rows, 1152-byte BF16 rows):
// the work is a flat list of (row, chunk) items, chunk c < L/16 being 16 latent codes (16 B in, 32 B
// out) and the rest 16 B of rope (16 B in, 16 B out); each thread takes kItems items per step, spaced
// a block apart so a warp's loads are contiguous, issues all their loads (codes, group scale; for the
// gather, the row indices first) before any math or store, then dequantizes and stores; grid-stride
// over steps with as many blocks as fit on the GPU at once. No shared memory.
// 4-byte fallback (glm5-tiny 132-byte rows, an unaligned pointer): one warp per row, 32-bit words.
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

// 4-byte path: one warp dequantizes FP8 row `src` (null: writes a zero row) into BF16 row `dst`.
__device__ void cast_row_warp(const uint8_t* __restrict__ src, uint16_t* __restrict__ dst, const LatentLayout& l,
                              int lane) {
  const int L = l.latent_dim, R = l.rope_dim;
  uint8_t* out = reinterpret_cast<uint8_t*>(dst);
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

constexpr int kItems = 4;  // (row, chunk) items per thread per step: 4 x 16 B loads in flight

// One (row, chunk) item of the 16-byte path: `src` the FP8 row (null: a zero row), `dst` the BF16 row.
struct CastItem {
  uint4 v;
  float scale;
};

__device__ __forceinline__ CastItem load_item(const uint8_t* __restrict__ src, int c, int latent_chunks,
                                              const LatentLayout& l) {
  CastItem it{make_uint4(0, 0, 0, 0), 0.f};
  if (!src) return it;
  if (c < latent_chunks) {
    it.v = __ldg(reinterpret_cast<const uint4*>(src) + c);
    it.scale = __ldg(reinterpret_cast<const float*>(src + l.scale_offset()) + (16 * c) / l.group);
  } else {
    it.v = __ldg(reinterpret_cast<const uint4*>(src + l.rope_offset()) + (c - latent_chunks));
  }
  return it;
}

__device__ __forceinline__ void store_item(const CastItem& it, uint8_t* __restrict__ dst, int c, int latent_chunks,
                                           int L) {
  if (c < latent_chunks) {
    const uint2 a = dequant4_bf16(it.v.x, it.scale), b = dequant4_bf16(it.v.y, it.scale);
    const uint2 c2 = dequant4_bf16(it.v.z, it.scale), d = dequant4_bf16(it.v.w, it.scale);
    uint4* o = reinterpret_cast<uint4*>(dst + 32 * c);
    o[0] = make_uint4(a.x, a.y, b.x, b.y);
    o[1] = make_uint4(c2.x, c2.y, d.x, d.y);
  } else {
    reinterpret_cast<uint4*>(dst + 2 * L)[c - latent_chunks] = it.v;
  }
}

// Full-pool cast, 16-byte path. Index: uint32_t when rows * chunks fits, else uint64_t.
template <class Index>
__global__ void __launch_bounds__(kThreads) kv_cast_vec_kernel(KvCastParams p) {
  const LatentLayout l = p.layout;
  const int latent_chunks = l.latent_dim / 16, chunks = latent_chunks + (2 * l.rope_dim) / 16;
  const int64_t out_row_bytes = 2 * int64_t(l.latent_dim + l.rope_dim);
  const Index items = Index(p.rows) * Index(chunks);
  const Index step = Index(gridDim.x) * (kThreads * kItems);
  uint8_t* out = reinterpret_cast<uint8_t*>(p.out);
  for (Index base = Index(blockIdx.x) * (kThreads * kItems) + threadIdx.x; base < items; base += step) {
    CastItem it[kItems];
    Index row[kItems];
    int c[kItems];
#pragma unroll
    for (int j = 0; j < kItems; ++j) {
      const Index i = base + Index(j) * kThreads;
      row[j] = i / Index(chunks);
      c[j] = int(i - row[j] * Index(chunks));
      if (i < items) it[j] = load_item(p.pool + int64_t(row[j]) * l.row_bytes, c[j], latent_chunks, l);
    }
#pragma unroll
    for (int j = 0; j < kItems; ++j)
      if (base + Index(j) * kThreads < items)
        store_item(it[j], out + int64_t(row[j]) * out_row_bytes, c[j], latent_chunks, l.latent_dim);
  }
}

// Gather-cast, 16-byte path: item (i, c) reads pool row indices[i]; chunk 0's thread also writes
// compact_indices[i].
template <class Index>
__global__ void __launch_bounds__(kThreads) kv_gather_cast_vec_kernel(KvGatherCastParams p) {
  const LatentLayout l = p.layout;
  const int latent_chunks = l.latent_dim / 16, chunks = latent_chunks + (2 * l.rope_dim) / 16;
  const int64_t out_row_bytes = 2 * int64_t(l.latent_dim + l.rope_dim);
  const Index items = Index(p.count) * Index(chunks);
  const Index step = Index(gridDim.x) * (kThreads * kItems);
  uint8_t* out = reinterpret_cast<uint8_t*>(p.out);
  for (Index base = Index(blockIdx.x) * (kThreads * kItems) + threadIdx.x; base < items; base += step) {
    Index row[kItems];
    int c[kItems];
    int32_t t[kItems];
#pragma unroll
    for (int j = 0; j < kItems; ++j) {  // the indices first: the row loads depend on them
      const Index i = base + Index(j) * kThreads;
      row[j] = i / Index(chunks);
      c[j] = int(i - row[j] * Index(chunks));
      t[j] = i < items ? __ldg(p.indices + row[j]) : -1;
    }
    CastItem it[kItems];
#pragma unroll
    for (int j = 0; j < kItems; ++j)
      it[j] = load_item(t[j] >= 0 ? p.pool + int64_t(t[j]) * l.row_bytes : nullptr, c[j], latent_chunks, l);
#pragma unroll
    for (int j = 0; j < kItems; ++j)
      if (base + Index(j) * kThreads < items) {
        store_item(it[j], out + int64_t(row[j]) * out_row_bytes, c[j], latent_chunks, l.latent_dim);
        if (c[j] == 0) p.compact_indices[row[j]] = t[j] >= 0 ? int32_t(row[j]) : -1;
      }
  }
}

__global__ void __launch_bounds__(kThreads) kv_cast_kernel(KvCastParams p) {
  const int lane = threadIdx.x % 32;
  const int64_t W = p.layout.latent_dim + p.layout.rope_dim;
  for (int64_t r = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32; r < p.rows; r += int64_t(gridDim.x) * kWarps)
    cast_row_warp(p.pool + r * p.layout.row_bytes, p.out + r * W, p.layout, lane);
}

__global__ void __launch_bounds__(kThreads) kv_gather_cast_kernel(KvGatherCastParams p) {
  const int lane = threadIdx.x % 32;
  const int64_t W = p.layout.latent_dim + p.layout.rope_dim;
  for (int64_t i = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32; i < p.count; i += int64_t(gridDim.x) * kWarps) {
    const int32_t t = p.indices[i];
    cast_row_warp(t >= 0 ? p.pool + int64_t(t) * p.layout.row_bytes : nullptr, p.out + i * W, p.layout, lane);
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

// Blocks of the 16-byte kernels: as many as are resident at once (a grid-stride loop does the rest),
// fewer when there are fewer steps of work.
template <class Kernel>
int vec_grid(Kernel kernel, int64_t items) {
  int device = 0, sms = 0, per_sm = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, 0));
  const int64_t needed = (items + kThreads * kItems - 1) / (kThreads * kItems);
  return int(std::max<int64_t>(1, std::min<int64_t>(needed, int64_t(sms) * std::max(per_sm, 1))));
}

int chunks_per_row(const LatentLayout& l) { return l.latent_dim / 16 + (2 * l.rope_dim) / 16; }

}  // namespace

void kv_cast_cuda(const KvCastParams& p, cudaStream_t stream) {
  validate_kv_cast_params(p);
  if (p.rows == 0) return;
  require_aligned4(p.pool, "kv_cast_cuda", "pool");
  require_aligned4(p.out, "kv_cast_cuda", "out");
  if (can_vectorize(p.layout, p.pool, p.out)) {
    const int64_t items = p.rows * chunks_per_row(p.layout);
    if (items < (int64_t(1) << 32) - (int64_t(1) << 24)) {
      kv_cast_vec_kernel<uint32_t><<<vec_grid(kv_cast_vec_kernel<uint32_t>, items), kThreads, 0, stream>>>(p);
    } else {
      kv_cast_vec_kernel<uint64_t><<<vec_grid(kv_cast_vec_kernel<uint64_t>, items), kThreads, 0, stream>>>(p);
    }
  } else {
    kv_cast_kernel<<<grid_for(p.rows), kThreads, 0, stream>>>(p);
  }
  CUDA_CHECK_LAUNCH();
}

void kv_gather_cast_cuda(const KvGatherCastParams& p, cudaStream_t stream) {
  validate_kv_gather_cast_params(p);
  if (p.count == 0) return;
  require_aligned4(p.pool, "kv_gather_cast_cuda", "pool");
  require_aligned4(p.out, "kv_gather_cast_cuda", "out");
  if (can_vectorize(p.layout, p.pool, p.out)) {
    const int64_t items = p.count * chunks_per_row(p.layout);
    if (items < (int64_t(1) << 32) - (int64_t(1) << 24)) {
      kv_gather_cast_vec_kernel<uint32_t>
          <<<vec_grid(kv_gather_cast_vec_kernel<uint32_t>, items), kThreads, 0, stream>>>(p);
    } else {
      kv_gather_cast_vec_kernel<uint64_t>
          <<<vec_grid(kv_gather_cast_vec_kernel<uint64_t>, items), kThreads, 0, stream>>>(p);
    }
  } else {
    kv_gather_cast_kernel<<<grid_for(p.count), kThreads, 0, stream>>>(p);
  }
  CUDA_CHECK_LAUNCH();
}

}  // namespace glm5
