// CUDA kernel of kernels/read_stream.h.
#include <cstdint>

#include "common/error.h"
#include "kernels/launch.cuh"
#include "kernels/read_stream.h"

namespace glm5 {
namespace {

__device__ __forceinline__ uint4 load_nc_no_l1(const uint4* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

// Thread t of the grid reads words t, t + T, ... (T = grid threads), `U` of them per step, all issued before any is
// used. The tail (fewer than U * T words left) is read one word per thread per step.
template <int U>
__global__ void read_stream_kernel(const uint4* __restrict__ src, size_t n, uint32_t* sink) {
  const size_t T = size_t(gridDim.x) * blockDim.x;
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  uint32_t acc = 0;
  for (; i + (U - 1) * T < n; i += U * T) {
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) v[u] = load_nc_no_l1(src + i + u * T);
#pragma unroll
    for (int u = 0; u < U; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  for (; i < n; i += T) {
    const uint4 v = load_nc_no_l1(src + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
#pragma unroll
  for (int o = 16; o > 0; o /= 2) acc ^= __shfl_xor_sync(0xffffffffu, acc, o);
  pdl_wait();  // launch.cuh's contract: no global write before the predecessor completes
  if (threadIdx.x % 32 == 0) atomicXor(sink, acc);
}

// Warp w reads rows [R*w, R*w + R) (those that exist) in steps of U x 512 bytes per row.
template <int R, int U>
__global__ void read_rows_kernel(const uint8_t* __restrict__ src, int rows, int row_bytes, uint32_t* sink) {
  const int lane = threadIdx.x % 32;
  const int warp = int(blockIdx.x) * int(blockDim.x / 32) + int(threadIdx.x / 32);
  uint32_t acc = 0;
  const int r0 = warp * R;
  if (r0 < rows) {
    for (int base = lane * 16; base < row_bytes; base += U * 512) {
      uint4 v[R][U];
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int r = 0; r < R; ++r) {
          const int row = min(r0 + r, rows - 1), c = base + u * 512;
          v[r][u] = c < row_bytes && r0 + r < rows ? load_nc_no_l1(reinterpret_cast<const uint4*>(src + size_t(row) * row_bytes + c))
                                                   : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int r = 0; r < R; ++r) acc ^= v[r][u].x ^ v[r][u].y ^ v[r][u].z ^ v[r][u].w;
    }
  }
#pragma unroll
  for (int o = 16; o > 0; o /= 2) acc ^= __shfl_xor_sync(0xffffffffu, acc, o);
  pdl_wait();
  if (lane == 0) atomicXor(sink, acc);
}

template <int R>
void launch_read_rows(const ReadRowsParams& p, unsigned grid, int rows, cudaStream_t stream) {
  const auto* src = static_cast<const uint8_t*>(p.s.src);
  auto k = p.s.unroll == 1 ? read_rows_kernel<R, 1> : p.s.unroll == 2 ? read_rows_kernel<R, 2>
           : p.s.unroll == 4 ? read_rows_kernel<R, 4> : read_rows_kernel<R, 8>;
  if (p.smem_pad > 48 * 1024) CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, p.smem_pad));
  launch_kernel(k, grid, p.s.threads, size_t(p.smem_pad), stream, src, rows, p.row_bytes, p.s.sink);
}

}  // namespace

void read_rows_cuda(const ReadRowsParams& p, cudaStream_t stream) {
  validate_read_rows_params(p);
  const int rows = int(p.s.bytes / size_t(p.row_bytes));
  const int per_cta = p.rows_per_warp * p.s.threads / 32;
  const unsigned grid = unsigned((rows + per_cta - 1) / per_cta);
  switch (p.rows_per_warp) {
    case 1: launch_read_rows<1>(p, grid, rows, stream); break;
    case 2: launch_read_rows<2>(p, grid, rows, stream); break;
    case 4: launch_read_rows<4>(p, grid, rows, stream); break;
    default: launch_read_rows<8>(p, grid, rows, stream); break;
  }
}

void read_stream_cuda(const ReadStreamParams& p, cudaStream_t stream) {
  validate_read_stream_params(p);
  const unsigned grid = unsigned(p.ctas_per_sm * current_device_sm_count());
  const auto* src = static_cast<const uint4*>(p.src);
  const size_t n = p.bytes / 16;
  switch (p.unroll) {
    case 1: launch_kernel(read_stream_kernel<1>, grid, p.threads, 0, stream, src, n, p.sink); break;
    case 2: launch_kernel(read_stream_kernel<2>, grid, p.threads, 0, stream, src, n, p.sink); break;
    case 4: launch_kernel(read_stream_kernel<4>, grid, p.threads, 0, stream, src, n, p.sink); break;
    case 8: launch_kernel(read_stream_kernel<8>, grid, p.threads, 0, stream, src, n, p.sink); break;
    default: launch_kernel(read_stream_kernel<16>, grid, p.threads, 0, stream, src, n, p.sink); break;
  }
}

}  // namespace glm5
