// What the full-pool cast and the gather-cast could reach at best on this GPU: their DRAM traffic without the
// conversion. Issue 3 asks for >= 90% of the device-to-device copy rate, whose reads and writes are 1 : 1; the cast
// reads 656 B and writes 1152 B per row (1 : 1.76) and the gather reads rows at random pool slots. A diagnostic,
// not a test: it prints a table and checks nothing but the copies' bytes.
//   copy_d2d      cudaMemcpyAsync of 1 GiB (the issue's ceiling, read + written);
//   memset        cudaMemsetAsync of 1 GiB (write-only rate);
//   read          every thread streams 16-byte loads of 1 GiB, U in flight, the sum kept live (read-only rate);
//   move<IN,OUT>  per row, IN 16-byte chunks read from the pool row (or the row indices[r] names, for the gather)
//                 and OUT chunks written contiguously: the first IN copied, the rest filled from registers. Thread t
//                 takes output chunks t, t + stride, ... (U at a time, loads before stores). <41, 72> is the cast's
//                 traffic exactly; <41, 41> a copy of the same rows (1 : 1).
//   kv_cast / kv_gather_cast  the engine's kernels (default tuning, and the TMA bulk kernels), on the same pool.
// Timing: median of 9 CUDA-event timings, each after a 256 MiB memset (cold L2; common/cold_timer.h).
// Build: nvcc -std=c++20 --expt-relaxed-constexpr -O3 -arch=sm_90a -I. -Isrc tools/probe/cast_mix_probe.cu
//          build-lead/libglm5_kernels.a build-lead/libglm5_common.a -o build-lead/cast_mix_probe
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "common/buffer.h"
#include "common/cold_timer.h"
#include "common/error.h"
#include "kernels/kv_cache.h"
#include "kernels/kv_cast.h"
#include "kernels/kv_layout.h"

using namespace glm5;

namespace {

template <int U>
__global__ void __launch_bounds__(256) read_kernel(const uint4* __restrict__ p, size_t n16, unsigned* sink) {
  unsigned acc = 0;
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n16; i += U * stride) {
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) v[u] = i + u * stride < n16 ? __ldcs(p + i + u * stride) : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int u = 0; u < U; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  if (acc == 0x9e3779b9u) *sink = acc;  // keeps the loads live
}

// rows x OUT output chunks; chunk j < IN of row r copies pool chunk j of row (indices ? indices[r] : r).
template <int IN, int OUT, int U>
__global__ void __launch_bounds__(256) move_kernel(const uint8_t* __restrict__ pool, const int32_t* __restrict__ indices,
                                                   uint4* __restrict__ out, int64_t rows) {
  const int64_t n = rows * OUT, stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t c0 = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; c0 < n; c0 += U * stride) {
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t c = c0 + u * stride;
      const int64_t r = c / OUT;
      const int j = int(c - r * OUT);
      v[u] = make_uint4(uint32_t(r), uint32_t(j), 0u, 0u);
      if (c < n && j < IN) {
        const int64_t src = indices ? int64_t(__ldg(indices + r)) : r;
        v[u] = __ldcs(reinterpret_cast<const uint4*>(pool + src * (IN * 16)) + j);
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (c0 + u * stride < n) out[c0 + u * stride] = v[u];
  }
}

template <class F>
double median_cold_us(F fn) {
  return ColdTimer(nullptr, 1, 9).median_us(fn);
}

}  // namespace

int main() {
  int sms = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  Buffer src(Where::Device, size_t(1) << 30, "copy src"), dst(Where::Device, size_t(1) << 30, "copy dst");
  Buffer sink(Where::Device, 4, "sink");
  CUDA_CHECK(cudaMemset(src.data(), 1, src.bytes()));
  const double copy_us = median_cold_us(
      [&] { CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data(), src.bytes(), cudaMemcpyDeviceToDevice)); });
  const double copy_gbps = 2.0 * src.bytes() / copy_us / 1e3;
  std::printf("%-34s %9.1f us %6.0f GB/s  (read + written; the ceiling)\n", "copy_d2d 1 GiB", copy_us, copy_gbps);
  const double set_us = median_cold_us([&] { CUDA_CHECK(cudaMemsetAsync(dst.data(), 7, dst.bytes())); });
  std::printf("%-34s %9.1f us %6.0f GB/s  %5.1f%% of copy\n", "memset 1 GiB (write only)", set_us,
              dst.bytes() / set_us / 1e3, 100.0 * dst.bytes() / set_us / 1e3 / copy_gbps);
  for (int U : {4, 8}) {
    const double us = median_cold_us(
        [&] {
          const size_t n16 = src.bytes() / 16;
          if (U == 4) read_kernel<4><<<sms * 8, 256>>>(src.as<uint4>(), n16, sink.as<unsigned>());
          else read_kernel<8><<<sms * 8, 256>>>(src.as<uint4>(), n16, sink.as<unsigned>());
        });
    std::printf("read 1 GiB, U %d%*s %9.1f us %6.0f GB/s  %5.1f%% of copy\n", U, 19, "", us, src.bytes() / us / 1e3,
                100.0 * src.bytes() / us / 1e3 / copy_gbps);
  }

  const LatentLayout l = make_latent_layout(512, 64, true);  // GLM-5: 656-byte FP8 rows
  const int64_t rows = 495000;
  Buffer pool(Where::Device, size_t(rows) * l.row_bytes, "pool"), out(Where::Device, size_t(rows) * 1152, "bf16");
  kv_fill_random_cuda({pool.as<uint8_t>(), l, nullptr, {}, 0, rows, 1234}, nullptr);
  std::vector<int32_t> idx(size_t(128) * 2048);
  std::mt19937_64 g(42);
  for (int32_t& i : idx) i = int32_t(g() % uint64_t(rows));
  Buffer d_idx(Where::Device, idx.size() * 4, "indices"), d_cidx(Where::Device, idx.size() * 4, "compact");
  CUDA_CHECK(cudaMemcpy(d_idx.data(), idx.data(), idx.size() * 4, cudaMemcpyHostToDevice));
  const double cast_bytes = double(l.row_bytes + 1152);

  auto row = [&](const char* what, double bytes, double us) {
    std::printf("%-34s %9.1f us %6.0f GB/s  %5.1f%% of copy\n", what, us, bytes / us / 1e3,
                100.0 * bytes / us / 1e3 / copy_gbps);
  };
  // Full pool: the cast's traffic, then a 1 : 1 copy of the same rows, then the engine's cast.
  for (int blocks : {4, 8}) {
    const int grid = sms * blocks;
    char name[64];
    std::snprintf(name, sizeof name, "move<41,72> U4, %d blk/SM", blocks);
    row(name, rows * cast_bytes, median_cold_us([&] {
          move_kernel<41, 72, 4><<<grid, 256>>>(pool.as<uint8_t>(), nullptr, out.as<uint4>(), rows);
        }));
    std::snprintf(name, sizeof name, "move<41,72> U8, %d blk/SM", blocks);
    row(name, rows * cast_bytes, median_cold_us([&] {
          move_kernel<41, 72, 8><<<grid, 256>>>(pool.as<uint8_t>(), nullptr, out.as<uint4>(), rows);
        }));
    std::snprintf(name, sizeof name, "move<41,41> U4, %d blk/SM (1:1)", blocks);
    row(name, rows * 2.0 * l.row_bytes, median_cold_us([&] {
          move_kernel<41, 41, 4><<<grid, 256>>>(pool.as<uint8_t>(), nullptr, out.as<uint4>(), rows);
        }));
  }
  row("kv_cast (engine)", rows * cast_bytes,
      median_cold_us([&] { kv_cast_cuda({pool.as<uint8_t>(), l, out.as<uint16_t>(), rows}, nullptr); }));
  for (const KvCastTuning t : {KvCastTuning{16, 3, false, true}, KvCastTuning{24, 3, false, true},
                               KvCastTuning{24, 4, false, true}, KvCastTuning{32, 2, false, true},
                               KvCastTuning{32, 3, false, true}, KvCastTuning{32, 4, false, true}}) {
    char name[64];
    std::snprintf(name, sizeof name, "kv_cast bulk T%d S%d", t.tile_rows, t.stages);
    row(name, rows * cast_bytes,
        median_cold_us([&] { kv_cast_cuda({pool.as<uint8_t>(), l, out.as<uint16_t>(), rows}, nullptr, t); }));
  }
  // Gather: random rows, the gather-cast's traffic (plus its 8 bytes of index per row).
  for (int B : {32, 128}) {
    const int64_t n = int64_t(B) * 2048;
    const double bytes = n * (cast_bytes + 8);
    char name[64];
    for (int blocks : {4, 8}) {
      std::snprintf(name, sizeof name, "gather move<41,72> B%d U4 %d blk", B, blocks);
      row(name, bytes, median_cold_us([&] {
            move_kernel<41, 72, 4><<<sms * blocks, 256>>>(pool.as<uint8_t>(), d_idx.as<int32_t>(), out.as<uint4>(), n);
          }));
    }
    std::snprintf(name, sizeof name, "gather move<41,72> B%d U8 8 blk", B);
    row(name, bytes, median_cold_us([&] {
          move_kernel<41, 72, 8><<<sms * 8, 256>>>(pool.as<uint8_t>(), d_idx.as<int32_t>(), out.as<uint4>(), n);
        }));
    for (const KvCastTuning t : {KvCastTuning{8, 4, false, true}, KvCastTuning{16, 2, false, true},
                                 KvCastTuning{16, 3, false, true}, KvCastTuning{32, 2, false, true}}) {
      std::snprintf(name, sizeof name, "kv_gather_cast B%d bulk T%d S%d", B, t.tile_rows, t.stages);
      row(name, bytes, median_cold_us([&] {
            kv_gather_cast_cuda(
                {pool.as<uint8_t>(), l, d_idx.as<int32_t>(), out.as<uint16_t>(), d_cidx.as<int32_t>(), n}, nullptr, t);
          }));
    }
    std::snprintf(name, sizeof name, "kv_gather_cast B%d (engine)", B);
    row(name, bytes, median_cold_us([&] {
          kv_gather_cast_cuda({pool.as<uint8_t>(), l, d_idx.as<int32_t>(), out.as<uint16_t>(), d_cidx.as<int32_t>(), n},
                              nullptr);
        }));
  }
  // The move kernel's bytes are checked once (the first and last row of the full-pool <41, 72> move).
  move_kernel<41, 72, 4><<<sms * 4, 256>>>(pool.as<uint8_t>(), nullptr, out.as<uint4>(), rows);
  CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<uint8_t> a(656), b(656);
  for (int64_t r : {int64_t(0), rows - 1}) {
    CUDA_CHECK(cudaMemcpy(a.data(), pool.as<uint8_t>() + r * 656, 656, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(b.data(), out.as<uint8_t>() + r * 1152, 656, cudaMemcpyDeviceToHost));
    if (a != b) {
      std::printf("move check FAILED at row %lld\n", (long long)r);
      return 1;
    }
  }
  std::printf("move check ok\n");
  return 0;
}
