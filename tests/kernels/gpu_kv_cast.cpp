// GPU tests of kernels/kv_cast.h: CUDA cast / gather-cast equal the CPU twins bit for bit, on the
// 16-byte tile path (GLM-5 rows: partial tiles, many tiles per block, -1 / negative indices, count 0)
// and the 4-byte path (glm5-tiny 132-byte rows, L 256 / R 6, pointers only 4-byte aligned).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/buffer.h"
#include "common/cold_timer.h"
#include "common/error.h"
#include "common/rng.h"
#include "kernels/kv_cache.h"
#include "kernels/kv_cast.h"
#include "kernel_test_util.h"

using namespace glm5;


namespace {

constexpr uint8_t kSentinel = 0xA5;  // pre-fill of every output buffer: bytes the kernel must not touch
constexpr size_t kGuard = 64;        // sentinel bytes checked after the last output row

// An FP8 pool of `rows` random rows on the host and on the device at byte `pool_offset`.
struct TestPool {
  LatentLayout l;
  int64_t rows = 0;
  size_t pool_offset = 0;
  std::vector<uint8_t> host;
  Buffer dev;
  const uint8_t* dptr() const { return dev.as<uint8_t>() + pool_offset; }
};
TestPool make_pool(int L, int R, int64_t rows, size_t pool_offset, uint64_t seed) {
  TestPool t;
  t.l = make_latent_layout(L, R, true);
  t.rows = rows;
  t.pool_offset = pool_offset;
  t.host.resize(size_t(rows) * t.l.row_bytes);
  kv_fill_random_cpu({t.host.data(), t.l, nullptr, {}, 0, rows, seed});
  t.dev = Buffer(Where::Device, t.host.size() + pool_offset, "pool");
  t.dev.upload(t.host.data(), t.host.size(), pool_offset);
  return t;
}

// A device output buffer of `values` bf16 at byte `offset`, filled with the sentinel (guard after).
Buffer sentinel_buffer(size_t values, size_t offset) {
  Buffer b(Where::Device, offset + 2 * values + kGuard, "bf16 out");
  CUDA_CHECK(cudaMemset(b.data(), kSentinel, b.bytes()));
  return b;
}

void expect_guard_untouched(const Buffer& b, size_t offset, size_t values) {
  const std::vector<uint8_t> head = to_host<uint8_t>(b, offset, 0);
  for (size_t i = 0; i < head.size(); ++i) ASSERT_EQ(head[i], kSentinel) << "byte " << i << " before the output";
  const std::vector<uint8_t> tail = to_host<uint8_t>(b, kGuard, offset + 2 * values);
  for (size_t i = 0; i < tail.size(); ++i) ASSERT_EQ(tail[i], kSentinel) << "byte " << i << " after the output";
}

void check_cast(const TestPool& pool, size_t out_offset, const KvCastTuning& t) {
  const int W = pool.l.latent_dim + pool.l.rope_dim;
  const size_t values = size_t(pool.rows) * W;
  std::vector<uint16_t> want(values);
  kv_cast_cpu({pool.host.data(), pool.l, want.data(), pool.rows});
  Buffer d_out = sentinel_buffer(values, out_offset);
  kv_cast_cuda({pool.dptr(), pool.l, reinterpret_cast<uint16_t*>(d_out.as<uint8_t>() + out_offset), pool.rows},
               nullptr, t);
  CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<uint16_t> got = to_host<uint16_t>(d_out, values, out_offset);
  for (size_t i = 0; i < values; ++i) ASSERT_EQ(got[i], want[i]) << "row " << i / W << " value " << i % W;
  expect_guard_untouched(d_out, out_offset, values);
}

// Gather-cast of `idx` (any negative index: a zero row on the GPU; the CPU twin gets -1 there).
void check_gather(const TestPool& pool, const std::vector<int32_t>& idx, size_t out_offset, const KvCastTuning& t) {
  const int W = pool.l.latent_dim + pool.l.rope_dim;
  const size_t values = idx.size() * W;
  std::vector<int32_t> cpu_idx = idx;
  for (int32_t& t : cpu_idx) t = std::max(t, -1);
  std::vector<uint16_t> want(values);
  std::vector<int32_t> cwant(idx.size());
  kv_gather_cast_cpu({pool.host.data(), pool.l, cpu_idx.data(), want.data(), cwant.data(), int64_t(idx.size())});
  Buffer d_idx = to_device(idx, "indices"), d_cidx(Where::Device, idx.size() * 4 + 4, "compact");
  CUDA_CHECK(cudaMemset(d_cidx.data(), kSentinel, d_cidx.bytes()));
  Buffer d_out = sentinel_buffer(values, out_offset);
  kv_gather_cast_cuda({pool.dptr(), pool.l, d_idx.as<int32_t>(),
                       reinterpret_cast<uint16_t*>(d_out.as<uint8_t>() + out_offset), d_cidx.as<int32_t>(),
                       int64_t(idx.size())},
                      nullptr, t);
  CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<int32_t> cgot = to_host<int32_t>(d_cidx, idx.size() + 1);
  for (size_t i = 0; i < idx.size(); ++i) ASSERT_EQ(cgot[i], cwant[i]) << "compact index " << i;
  int32_t tail;
  std::memset(&tail, kSentinel, 4);
  EXPECT_EQ(cgot[idx.size()], tail) << "compact index written past count";
  const std::vector<uint16_t> got = to_host<uint16_t>(d_out, values, out_offset);
  for (size_t i = 0; i < values; ++i)
    ASSERT_EQ(got[i], want[i]) << "gathered row " << i / W << " (index " << idx[i / W] << ") value " << i % W;
  expect_guard_untouched(d_out, out_offset, values);
}

// `count` random pool slots, every 11th -1, one -7 and one INT32_MIN (the kernel treats them as -1),
// the pool's first and last row, and a run of one row repeated.
std::vector<int32_t> test_indices(int64_t count, int64_t rows, uint64_t seed) {
  std::vector<int32_t> idx(count);
  for (int64_t i = 0; i < count; ++i)
    idx[i] = i % 11 == 3 ? -1 : int32_t(std::min<int64_t>(rows - 1, int64_t(rng_uniform(seed, 5, i) * rows)));
  if (count > 0) idx[0] = int32_t(rows - 1);
  if (count > 1) idx[count - 1] = 0;
  if (count > 5) idx[5] = -7;
  if (count > 6) idx[6] = INT32_MIN;
  for (int64_t i = 20; i < std::min<int64_t>(count - 1, 40); ++i) idx[i] = int32_t(rows / 2);
  return idx;
}

// Every correctness case runs the engine's two settings (the full pool's TMA bulk 32-row tiles, the gather's 16-row
// cp.async tiles) on both casts, and the bulk kernels at 16 rows (several blocks per SM, partial tiles elsewhere).
// The bulk kernel's 4-stage form too (its stage / mbarrier-phase reuse needs several tiles per block: the 100,003-row
// and 67,589-row cases give them).
const KvCastTuning kTunings[] = {kKvCastTuning, kKvGatherCastTuning, KvCastTuning{16, 2, false, true},
                                 KvCastTuning{32, 4, false, true}};
std::string tuning_name(const KvCastTuning& t) {
  return "tuning tile_rows " + std::to_string(t.tile_rows) + " stages " + std::to_string(t.stages) +
         (t.bulk ? " bulk" : " cp.async");
}

}  // namespace

// Full-pool cast bit for bit against the CPU twin: the tile path (GLM-5 rows, aligned pointers) at
// row counts below, at and around one 16-row tile and over many tiles per block (100,003 rows: not a
// multiple of any tile size), and the 4-byte path (glm5-tiny 132-byte rows, L 256 / R 6, a pool or
// output pointer only 4-byte aligned). Output bytes around the rows stay untouched.
TEST(GpuKvCast, CastMatchesCpu) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  struct Case { int L, R; int64_t rows; size_t pool_offset, out_offset; };
  const Case cases[] = {{512, 64, 1, 0, 0},     {512, 64, 15, 0, 0},    {512, 64, 16, 0, 0},
                        {512, 64, 17, 0, 0},    {512, 64, 1000, 0, 0},  {512, 64, 100003, 0, 0},
                        {512, 64, 1000, 16, 16}, {512, 64, 1000, 4, 0}, {512, 64, 1000, 0, 4},
                        {64, 32, 1000, 0, 0},   {256, 6, 333, 0, 0},    {128, 8, 4097, 0, 0},
                        {1024, 64, 2001, 0, 0}, {1536, 32, 777, 0, 0}};
  for (const Case& c : cases) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE("L " + std::to_string(c.L) + " R " + std::to_string(c.R) + " rows " + std::to_string(c.rows) +
                 " pool offset " + std::to_string(c.pool_offset) + " out offset " + std::to_string(c.out_offset) +
                 " seed " + std::to_string(seed));
    const TestPool pool = make_pool(c.L, c.R, c.rows, c.pool_offset, seed);
    for (const KvCastTuning& t : kTunings) {
      SCOPED_TRACE(tuning_name(t));
      check_cast(pool, c.out_offset, t);
    }
  }
}

// Gather-cast bit for bit against the CPU twin, compact indices included: counts of 1, a partial
// tile, B x 2048 for B 1 and 33 (+5 rows: not a multiple of the tile), -1 and other negative
// indices, repeated rows, the pool's first and last row; tile path and 4-byte path.
TEST(GpuKvCast, GatherCastMatchesCpu) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  struct Case { int L, R; int64_t rows, count; size_t pool_offset, out_offset; };
  const Case cases[] = {{512, 64, 5000, 1, 0, 0},    {512, 64, 5000, 13, 0, 0},  {512, 64, 5000, 777, 0, 0},
                        {512, 64, 5000, 2048, 0, 0}, {512, 64, 70000, 33 * 2048 + 5, 0, 0},
                        {512, 64, 5000, 777, 4, 0},  {512, 64, 5000, 777, 0, 4}, {64, 32, 3000, 777, 0, 0},
                        {256, 6, 3000, 501, 0, 0},   {1024, 64, 3000, 999, 0, 0}};
  for (const Case& c : cases) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE("L " + std::to_string(c.L) + " R " + std::to_string(c.R) + " count " + std::to_string(c.count) +
                 " pool offset " + std::to_string(c.pool_offset) + " out offset " + std::to_string(c.out_offset) +
                 " seed " + std::to_string(seed));
    const TestPool pool = make_pool(c.L, c.R, c.rows, c.pool_offset, seed);
    for (const KvCastTuning& t : kTunings) {
      SCOPED_TRACE(tuning_name(t));
      check_gather(pool, test_indices(c.count, c.rows, seed), c.out_offset, t);
    }
  }
}

// All rows -1: zero rows and compact -1 throughout (every stage zero-filled, nothing read; 70,001 rows: several
// tiles per block, so the bulk kernel's 0-byte mbarrier phases are reused).
TEST(GpuKvCast, GatherCastAllInvalid) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  const TestPool pool = make_pool(512, 64, 100, 0, fresh_seed());
  for (const KvCastTuning& t : kTunings) {
    SCOPED_TRACE(tuning_name(t));
    check_gather(pool, std::vector<int32_t>(70001, -1), 0, t);
  }
}

// rows 0 / count 0: nothing is launched, nothing written, null pointers accepted.
TEST(GpuKvCast, EmptyCastsWriteNothing) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  const LatentLayout l = make_latent_layout(512, 64, true);
  Buffer d_out = sentinel_buffer(576, 0);
  Buffer d_pool(Where::Device, 656, "pool");
  EXPECT_NO_THROW(kv_cast_cuda({d_pool.as<uint8_t>(), l, d_out.as<uint16_t>(), 0}, nullptr));
  EXPECT_NO_THROW(kv_cast_cuda({nullptr, l, nullptr, 0}, nullptr));
  EXPECT_NO_THROW(kv_gather_cast_cuda({nullptr, l, nullptr, nullptr, nullptr, 0}, nullptr));
  Buffer d_idx(Where::Device, 4, "idx"), d_cidx(Where::Device, 4, "compact");
  EXPECT_NO_THROW(kv_gather_cast_cuda(
      {d_pool.as<uint8_t>(), l, d_idx.as<int32_t>(), d_out.as<uint16_t>(), d_cidx.as<int32_t>(), 0}, nullptr));
  CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<uint8_t> got = to_host<uint8_t>(d_out);
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], kSentinel) << "byte " << i;
  EXPECT_THROW(kv_cast_cuda({d_pool.as<uint8_t>(), l, d_out.as<uint16_t>(), -1}, nullptr), Error);
  EXPECT_THROW(kv_gather_cast_cuda({d_pool.as<uint8_t>(), l, nullptr, d_out.as<uint16_t>(), nullptr, 3}, nullptr),
               Error);
}

namespace {

// Median of 9 cold-L2 CUDA-event timings of `fn` (common/cold_timer.h), in us.
template <class F>
double median_cold_us(F fn) {
  return ColdTimer(nullptr, 1, 9).median_us(fn);
}

}  // namespace

// Not a pass/fail check beyond bit-exactness: every KvCastTuning (tile rows 8/16/32, stages 2/3/4,
// streaming or plain stores, or TMA bulk copies) is checked against the CPU twin, then the GLM-5 full-pool cast (495,000
// rows) and gather-cast at B 32 and 128 (x 2048 random rows) are timed cold (median of 9), next to a
// 1 GiB D2D copy timed the same way, so the table shows each variant's % of copy.
TEST(GpuKvCast, TuningSweep) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const TestPool small = make_pool(512, 64, 1000, 0, seed);
  const int W = 576;
  std::vector<uint16_t> want(size_t(1000) * W);
  kv_cast_cpu({small.host.data(), small.l, want.data(), 1000});
  const std::vector<int32_t> sidx = test_indices(777, 1000, seed);
  std::vector<int32_t> cpu_sidx = sidx;
  for (int32_t& t : cpu_sidx) t = std::max(t, -1);
  std::vector<uint16_t> gwant(sidx.size() * W);
  std::vector<int32_t> cwant(sidx.size());
  kv_gather_cast_cpu({small.host.data(), small.l, cpu_sidx.data(), gwant.data(), cwant.data(), int64_t(sidx.size())});
  Buffer d_sidx = to_device(sidx, "indices"), d_scidx(Where::Device, sidx.size() * 4, "compact");
  Buffer d_sout(Where::Device, want.size() * 2, "out");

  const LatentLayout l = small.l;
  const int64_t rows = 495000;
  Buffer pool(Where::Device, size_t(rows) * l.row_bytes, "pool"), out(Where::Device, size_t(rows) * 1152, "bf16");
  kv_fill_random_cuda({pool.as<uint8_t>(), l, nullptr, {}, 0, rows, seed}, nullptr);
  std::vector<int32_t> idx(size_t(128) * 2048);
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = int32_t(std::min<double>(rows - 1, rng_uniform(seed, 9, i) * rows));
  Buffer d_idx = to_device(idx, "gather indices"), d_cidx(Where::Device, idx.size() * 4, "compact");
  Buffer copy_src(Where::Device, size_t(1) << 30, "copy src"), copy_dst(Where::Device, size_t(1) << 30, "copy dst");
  const double copy_us = median_cold_us([&] {
    CUDA_CHECK(cudaMemcpyAsync(copy_dst.data(), copy_src.data(), copy_src.bytes(), cudaMemcpyDeviceToDevice));
  });
  const double copy_gbps = 2.0 * copy_src.bytes() / copy_us / 1e3;
  std::printf("copy_d2d 1 GiB: %.1f us, %.0f GB/s (read + written)\n", copy_us, copy_gbps);
  // The write-only rate, for the cast's 656 : 1152 read : write mix (the copy is 1 : 1).
  const double set_us = median_cold_us([&] { CUDA_CHECK(cudaMemsetAsync(copy_dst.data(), 7, copy_dst.bytes())); });
  std::printf("memset 1 GiB: %.1f us, %.0f GB/s (written)\n", set_us, copy_dst.bytes() / set_us / 1e3);
  const double row_bytes = double(l.row_bytes + 1152);
  for (int tile_rows : {8, 16, 32})
    for (int stages : {2, 3, 4})
      for (int mode : {0, 1, 2}) {  // streaming stores, plain stores, TMA bulk (stores ignored)
        const bool cs = mode == 0, bulk = mode == 2;
        const KvCastTuning t{tile_rows, stages, cs, bulk};
        SCOPED_TRACE("tile_rows " + std::to_string(tile_rows) + " stages " + std::to_string(stages) + " cs " +
                     std::to_string(cs) + " bulk " + std::to_string(bulk));
        kv_cast_cuda({small.dptr(), l, d_sout.as<uint16_t>(), 1000}, nullptr, t);
        CUDA_CHECK(cudaDeviceSynchronize());
        ASSERT_EQ(to_host<uint16_t>(d_sout, want.size()), want);
        kv_gather_cast_cuda({small.dptr(), l, d_sidx.as<int32_t>(), d_sout.as<uint16_t>(), d_scidx.as<int32_t>(),
                             int64_t(sidx.size())},
                            nullptr, t);
        CUDA_CHECK(cudaDeviceSynchronize());
        ASSERT_EQ(to_host<uint16_t>(d_sout, gwant.size()), gwant);
        ASSERT_EQ(to_host<int32_t>(d_scidx, cwant.size()), cwant);
        const double cast_us = median_cold_us(
            [&] { kv_cast_cuda({pool.as<uint8_t>(), l, out.as<uint16_t>(), rows}, nullptr, t); });
        double g_us[2];
        const int Bs[2] = {32, 128};
        for (int k = 0; k < 2; ++k)
          g_us[k] = median_cold_us([&] {
            kv_gather_cast_cuda({pool.as<uint8_t>(), l, d_idx.as<int32_t>(), out.as<uint16_t>(), d_cidx.as<int32_t>(),
                                 int64_t(Bs[k]) * 2048},
                                nullptr, t);
          });
        const auto pct = [&](double bytes, double us) { return 100.0 * bytes / us / 1e3 / copy_gbps; };
        std::printf("tuning rows %2d stages %d cs %d bulk %d: cast %.1f us (%.1f%% of copy)  gather B32 %.1f us (%.1f%%)  "
                    "B128 %.1f us (%.1f%%)\n",
                    tile_rows, stages, int(cs), int(bulk), cast_us, pct(rows * row_bytes, cast_us), g_us[0],
                    pct(32 * 2048 * (row_bytes + 8), g_us[0]), g_us[1], pct(128 * 2048 * (row_bytes + 8), g_us[1]));
      }
  EXPECT_THROW(kv_cast_cuda({pool.as<uint8_t>(), l, out.as<uint16_t>(), rows}, nullptr, KvCastTuning{0, 3, true}),
               Error);
  EXPECT_THROW(kv_cast_cuda({pool.as<uint8_t>(), l, out.as<uint16_t>(), rows}, nullptr, KvCastTuning{16, 5, true}),
               Error);
}

// Not a pass/fail check: the achieved bandwidth of the full-pool cast at GLM-5 size (495,000 rows),
// the cost the `cast` path pays per layer per step.
TEST(GpuKvCast, Glm5PoolCastBandwidth) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  const LatentLayout l = make_latent_layout(512, 64, true);
  const int64_t rows = 495000;
  Buffer pool(Where::Device, size_t(rows) * l.row_bytes, "pool"), out(Where::Device, size_t(rows) * 1152, "bf16");
  kv_fill_random_cuda({pool.as<uint8_t>(), l, nullptr, {}, 0, rows, 1}, nullptr);
  cudaEvent_t a, b;
  CUDA_CHECK(cudaEventCreate(&a));
  CUDA_CHECK(cudaEventCreate(&b));
  kv_cast_cuda({pool.as<uint8_t>(), l, out.as<uint16_t>(), rows}, nullptr);  // warm-up
  const int reps = 20;
  CUDA_CHECK(cudaEventRecord(a));
  for (int i = 0; i < reps; ++i) kv_cast_cuda({pool.as<uint8_t>(), l, out.as<uint16_t>(), rows}, nullptr);
  CUDA_CHECK(cudaEventRecord(b));
  CUDA_CHECK(cudaEventSynchronize(b));
  float ms = 0;
  CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
  const double us = 1000.0 * ms / reps, bytes = double(rows) * (l.row_bytes + 1152);
  const double cold_us =
      median_cold_us([&] { kv_cast_cuda({pool.as<uint8_t>(), l, out.as<uint16_t>(), rows}, nullptr); });
  std::printf("kv_cast GLM-5 pool: %lld rows, %.1f MB, back to back %.1f us (%.0f GB/s), "
              "cold median %.1f us (%.0f GB/s)\n",
              (long long)rows, bytes / 1e6, us, bytes / us / 1e3, cold_us, bytes / cold_us / 1e3);
  RecordProperty("us", std::to_string(us));
  CUDA_CHECK(cudaEventDestroy(a));
  CUDA_CHECK(cudaEventDestroy(b));
  // The engine's setting at the engine's size, bit for bit against the CPU twin (the other tests use smaller pools).
  std::vector<uint8_t> host_pool(size_t(rows) * l.row_bytes);
  pool.download(host_pool.data(), host_pool.size());
  std::vector<uint16_t> want(size_t(rows) * 576);
  kv_cast_cpu({host_pool.data(), l, want.data(), rows});
  const std::vector<uint16_t> got = to_host<uint16_t>(out, want.size());
  size_t differ = 0;
  for (size_t i = 0; i < want.size(); ++i) differ += got[i] != want[i];
  EXPECT_EQ(differ, 0u) << "of " << want.size() << " values";
}
