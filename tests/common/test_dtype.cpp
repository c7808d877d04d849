// The bit conversions of common/dtype.h that the CPU twins use to model the GPU's roundings.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>

#include "common/dtype.h"

namespace glm5 {
namespace {

TEST(DtypeF16, ExamplesRoundToNearestEven) {
  EXPECT_EQ(round_f16(1.f + 0x1p-11f), 1.f);                // tie -> even (down)
  EXPECT_EQ(round_f16(1.f + 3 * 0x1p-11f), 1.f + 0x1p-9f);  // tie -> even (up)
  EXPECT_EQ(round_f16(65504.f), 65504.f);
  EXPECT_EQ(round_f16(65519.f), 65504.f);
  EXPECT_TRUE(std::isinf(round_f16(65520.f)));  // halfway to 2^16 rounds to inf
  EXPECT_TRUE(std::isinf(round_f16(-1e30f)) && round_f16(-1e30f) < 0);
  EXPECT_EQ(round_f16(0x1p-24f), 0x1p-24f);  // smallest subnormal
  EXPECT_EQ(round_f16(0x1p-25f), 0.f);       // tie -> even (0)
  EXPECT_EQ(round_f16(0x1p-25f * 1.0000001f), 0x1p-24f);
  EXPECT_EQ(round_f16(3 * 0x1p-26f), 0x1p-24f);
  EXPECT_EQ(round_f16(-2.5f), -2.5f);
  EXPECT_EQ(float_to_f16_bits(-0.f), 0x8000u);
  EXPECT_EQ(float_to_f16_bits(1e-40f), 0u);  // a float subnormal
  EXPECT_TRUE(std::isnan(round_f16(std::nanf(""))));
  EXPECT_EQ(float_to_f16_bits(0x1p-14f - 0x1p-25f), 0x0400u);  // rounds up into the smallest normal (tie, odd k)
}

// Every finite f16 value converts back to its own bits, and the float midway between two neighbours rounds to the
// one with the even significand while the floats just beside the midpoint round to the nearer one. This covers
// every rounding boundary of the format (normals, subnormals, the carry into the next binade).
TEST(DtypeF16, EveryValueAndEveryMidpoint) {
  for (uint32_t h = 0; h < 0x7c00u; ++h) {
    for (const uint16_t sign : {uint16_t(0), uint16_t(0x8000u)}) {
      const uint16_t bits = uint16_t(h | sign);
      const float v = f16_bits_to_float(bits);
      ASSERT_EQ(float_to_f16_bits(v), bits) << std::hex << bits;
      if (h + 1 == 0x7c00u) continue;  // 65504's upper neighbour is inf: the midpoint case is the 65520 example
      const float up = f16_bits_to_float(uint16_t((h + 1) | sign));
      const float mid = (v + up) / 2;  // exact: f16 neighbours differ in bits far below float's
      const uint16_t even = (h & 1u) ? uint16_t((h + 1) | sign) : bits;
      ASSERT_EQ(float_to_f16_bits(mid), even) << std::hex << bits;
      ASSERT_EQ(float_to_f16_bits(std::nextafter(mid, 0.f)), bits) << std::hex << bits;
      ASSERT_EQ(float_to_f16_bits(std::nextafter(mid, sign ? -INFINITY : INFINITY)), uint16_t((h + 1) | sign))
          << std::hex << bits;
    }
  }
}

#if defined(__FLT16_MAX__)
TEST(DtypeF16, AgreesWithTheCompilersConversion) {
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<float> u(-30.f, 17.f);
  for (int i = 0; i < 200000; ++i) {
    const float v = (i % 2 ? -1.f : 1.f) * std::exp2(u(rng));
    ASSERT_EQ(round_f16(v), float(static_cast<_Float16>(v))) << v;
  }
}
#endif

}  // namespace
}  // namespace glm5
