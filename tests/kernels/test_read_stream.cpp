// Read stream (kernels/read_stream.h), host side: the CPU twin's XOR on fresh random bytes against an
// independent word-by-word fold, and one error per bad field.
#include <gtest/gtest.h>

#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "kernels/read_stream.h"
#include "kernel_test_util.h"

namespace glm5 {
namespace {

TEST(ReadStream, CpuXorIsTheXorOfEveryWord) {
  const uint64_t seed = fresh_seed();
  std::mt19937 rng{uint32_t(seed)};
  std::vector<uint32_t> words(4 * 1001);  // 1001 16-byte units
  for (auto& w : words) w = rng();
  uint32_t want = 0;
  for (uint32_t w : words) want ^= w;
  uint32_t sink = 0;
  ReadStreamParams p;
  p.src = words.data();
  p.bytes = words.size() * 4;
  p.sink = &sink;
  EXPECT_EQ(read_stream_xor_cpu(p), want) << "seed " << seed;
  words[17] ^= 0x40u;  // one flipped bit changes the result
  EXPECT_EQ(read_stream_xor_cpu(p), want ^ 0x40u) << "seed " << seed;
}

TEST(ReadStream, BadParamsNameTheField) {
  alignas(16) uint32_t buf[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  uint32_t sink = 0;
  ReadStreamParams ok;
  ok.src = buf;
  ok.bytes = sizeof buf;
  ok.sink = &sink;
  EXPECT_NO_THROW(validate_read_stream_params(ok));
  // Each case: one field of `ok` made bad, and the word the error must name.
  const std::vector<std::pair<std::function<void(ReadStreamParams&)>, std::string>> cases = {
      {[](ReadStreamParams& p) { p.src = nullptr; }, "src"},
      {[](ReadStreamParams& p) { p.sink = nullptr; }, "sink"},
      {[&](ReadStreamParams& p) { p.src = reinterpret_cast<const char*>(buf) + 4; }, "aligned"},
      {[](ReadStreamParams& p) { p.bytes = 24; }, "bytes"},
      {[](ReadStreamParams& p) { p.bytes = 0; }, "bytes"},
      {[](ReadStreamParams& p) { p.ctas_per_sm = 9; }, "ctas_per_sm"},
      {[](ReadStreamParams& p) { p.threads = 96; }, "threads"},
      {[](ReadStreamParams& p) { p.unroll = 3; }, "unroll"},
  };
  for (const auto& [spoil, field] : cases) {
    ReadStreamParams p = ok;
    spoil(p);
    try {
      validate_read_stream_params(p);
      ADD_FAILURE() << "no error for a bad " << field;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace glm5
