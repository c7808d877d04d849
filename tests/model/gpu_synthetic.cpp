#include <cstdlib>
// GPU: synthetic weights generated on the device equal the host-generated ones bit for bit (F32 and
// BF16), and the golden checkpoint loaded to the device equals the host load.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "common/buffer.h"
#include "common/error.h"
#include "model/config.h"
#include "model/synthetic.h"
#include "model/weights.h"
#include "tests/shared_dir.h"

namespace glm5 {
namespace {

std::vector<uint8_t> download(const WeightTensor& t) {
  std::vector<uint8_t> out(t.bytes());
  CUDA_CHECK(cudaMemcpy(out.data(), t.data, t.bytes(), cudaMemcpyDeviceToHost));
  return out;
}

// Compares every tensor of a device Weights object with the host one; reports the first mismatch.
void expect_equal(const Weights& host, const Weights& dev) {
  ASSERT_EQ(host.tensors().size(), dev.tensors().size());
  for (const auto& [name, h] : host.tensors()) {
    const WeightTensor& d = dev.get(name);
    ASSERT_EQ(h.dtype, d.dtype) << name;
    ASSERT_EQ(h.shape, d.shape) << name;
    std::vector<uint8_t> got = download(d);
    const uint8_t* want = static_cast<const uint8_t*>(h.data);
    size_t mismatches = 0, first = 0;
    for (size_t i = 0; i < got.size(); ++i)
      if (got[i] != want[i] && mismatches++ == 0) first = i;
    EXPECT_EQ(mismatches, 0u) << name << ": " << mismatches << " bytes differ, first at byte " << first;
  }
}

TEST(GpuSynthetic, DeviceEqualsHostBitForBit) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  ModelConfig cfg = builtin_model_config("glm5-tiny");
  for (DType dt : {DType::F32, DType::BF16}) {
    Weights h = synthetic_weights(cfg, 1234, {Where::Host, dt, false});
    Weights d = synthetic_weights(cfg, 1234, {Where::Device, dt, false});
    expect_equal(h, d);
    EXPECT_EQ(h.stored_bytes(), d.stored_bytes());
  }
}

TEST(GpuSynthetic, LargeTensorAndSharing) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  // A tensor longer than the kernel's grid (65536 x 256) exercises the grid-stride loop.
  const int64_t n = int64_t(65536) * 256 * 3 + 17;
  SyntheticFill f = synthetic_fill_for("model.layers.5.mlp.experts.up_proj.weight", {n / 7, 7}, 99);
  Buffer dev(Where::Device, size_t(n) * 2, "test");
  synthetic_fill_cuda(dev.data(), DType::BF16, n, f, nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<uint16_t> got(static_cast<size_t>(n)), want(static_cast<size_t>(n));
  dev.download(got.data(), size_t(n) * 2);
  synthetic_fill_host(want.data(), DType::BF16, n, f);
  size_t bad = 0;
  for (int64_t i = 0; i < n; ++i) bad += got[size_t(i)] != want[size_t(i)];
  EXPECT_EQ(bad, 0u);

  ModelConfig cfg = builtin_model_config("glm5-tiny");
  WeightOptions opt{Where::Device, DType::BF16, true};
  Weights d = synthetic_weights(cfg, 5, opt);
  EXPECT_EQ(d.stored_bytes(), estimate_weight_bytes(cfg, opt));
  EXPECT_EQ(d.get("model.layers.3.mlp.experts.gate_proj.weight").data,
            d.get("model.layers.1.mlp.experts.gate_proj.weight").data);
}

TEST(GpuLoadWeights, GoldenDeviceEqualsHost) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  ModelConfig cfg = builtin_model_config("glm5-tiny");
  const std::string dir = glm5::test::golden_dir();
  for (DType dt : {DType::F32, DType::BF16}) {
    Weights h = load_weights(cfg, dir, {Where::Host, dt, false});
    Weights d = load_weights(cfg, dir, {Where::Device, dt, false});
    expect_equal(h, d);
  }
}

}  // namespace
}  // namespace glm5
