// Robustness of `glm5prof profile` (issue 7) that this machine can check without a GPU: --backend cuda
// with no GPU / driver, and a KV pool that does not fit (CPU backend budget), each one clear line on
// stderr, exit 1, and no output folder. The GPU cases (CUPTI unavailable, a pool larger than GPU
// memory) are tests/cli/gpu_robustness.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "common/buffer.h"
#include "run_binary.h"

using namespace glm5;
namespace fs = std::filesystem;

namespace {

fs::path scratch(const std::string& name) {
  fs::path d = fs::path(::testing::TempDir()) / ("glm5_robust_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

int lines(const std::string& s) { return int(std::count(s.begin(), s.end(), '\n')); }

// The one "glm5prof: error: ..." line (profile also prints a plan line before failing).
std::string error_line(const std::string& err) {
  const size_t p = err.find("glm5prof: error: ");
  if (p == std::string::npos) return "";
  return err.substr(p, err.find('\n', p) - p);
}

}  // namespace

TEST(Robustness, BackendCudaWithoutGpuIsOneLineExit1) {
  if (cuda_available()) GTEST_SKIP() << "a CUDA device is present";
  const fs::path d = scratch("nogpu");
  test::RunResult r = test::run_glm5prof({"profile", "--backend", "cuda", "--model", "glm5-tiny", "--steps", "1",
                                          "--out", (d / "out").string()}, d);
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_EQ(lines(r.err), 1) << r.err;
  EXPECT_EQ(r.err, "glm5prof: error: --backend cuda: no usable CUDA device (driver missing or no GPU)\n");
  EXPECT_FALSE(fs::exists(d / "out"));
}

TEST(Robustness, PoolLargerThanMemoryNamesBytesAndWritesNothing) {
  const fs::path d = scratch("oom");
  test::RunResult r = test::run_glm5prof({"profile", "--backend", "cpu", "--model", "glm5-tiny", "--steps", "1",
                                          "--pool-tokens", "100000000", "--out", (d / "out").string()}, d);
  EXPECT_EQ(r.status, 1) << r.err;
  const std::string e = error_line(r.err);
  EXPECT_NE(e.find("model does not fit"), std::string::npos) << r.err;
  EXPECT_NE(e.find("KV pool 74.5 GiB"), std::string::npos) << e;
  EXPECT_NE(e.find(" bytes), but only 24.0 GiB (25769803776 bytes) is free"), std::string::npos) << e;
  EXPECT_EQ(r.err.find("glm5prof: error: ", r.err.find("glm5prof: error: ") + 1), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(d / "out"));
}

TEST(Robustness, AbsurdPoolIsRefusedBeforeAnyArithmetic) {
  const fs::path d = scratch("absurd");
  for (const char* p : {"100000000000000000", "9223372036854775807"}) {
    test::RunResult r = test::run_glm5prof({"profile", "--backend", "cpu", "--model", "glm5-tiny", "--steps", "1",
                                            "--pool-tokens", p, "--out", (d / "out").string()}, d);
    EXPECT_EQ(r.status, 2) << r.err;  // a value out of range: bad usage (README; exit 1 before session 16)
    EXPECT_EQ(error_line(r.err), std::string("glm5prof: error: --pool-tokens ") + p +
                                     " is absurd: at most 2^40 = 1099511627776 tokens per layer");
    EXPECT_FALSE(fs::exists(d / "out"));
  }
}
