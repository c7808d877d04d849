// Read stream (kernels/read_stream.h) on the GPU: the XOR of fresh random bytes equals the CPU twin's for every
// launch shape the benchmark uses and for sizes that leave a ragged tail (not a multiple of the grid's step).
#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <vector>

#include "common/buffer.h"
#include "common/error.h"
#include "kernels/read_stream.h"
#include "kernel_test_util.h"

namespace glm5 {
namespace {

TEST(GpuReadStream, XorMatchesCpuTwin) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  const uint64_t seed = fresh_seed();
  std::printf("seed %llu\n", (unsigned long long)seed);
  std::mt19937 rng{uint32_t(seed)};
  for (size_t units : {size_t(1), size_t(1000003), size_t(3) << 20}) {
    std::vector<uint32_t> h(units * 4);
    for (auto& w : h) w = rng();
    Buffer d = to_device(h, "read_stream input");
    Buffer sink(Where::Device, 4, "read_stream sink");
    ReadStreamParams p;
    p.src = h.data();
    p.bytes = units * 16;
    p.sink = reinterpret_cast<uint32_t*>(h.data());  // validation only
    const uint32_t want = read_stream_xor_cpu(p);
    p.src = d.data();
    p.sink = sink.as<uint32_t>();
    for (int ctas : {1, 2, 4})
      for (int threads : {256, 1024})
        for (int unroll : {1, 4, 8, 16}) {
          p.ctas_per_sm = ctas;
          p.threads = threads;
          p.unroll = unroll;
          CUDA_CHECK(cudaMemset(sink.data(), 0, 4));
          read_stream_cuda(p, nullptr);
          CUDA_CHECK(cudaDeviceSynchronize());
          const uint32_t got = to_host<uint32_t>(sink, 1)[0];
          EXPECT_EQ(got, want) << units << " units, " << ctas << " CTAs/SM x " << threads << " threads, unroll " << unroll;
        }
  }
}

}  // namespace
}  // namespace glm5
