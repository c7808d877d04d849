// Counter-based pseudo-random numbers, identical on host and device: the value for (seed, stream,
// index) needs no state, so synthetic weights and KV contents generated on the GPU equal those
// generated on the CPU element for element. splitmix64 finalizer (Steele, Lea, Flood 2014).
#pragma once
#include <cmath>
#include <cstdint>
#include <string_view>

#include "common/dtype.h"  // GLM5_HD

namespace glm5 {

GLM5_HD uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Uniform in (0, 1), 24-bit resolution, never 0.
GLM5_HD float rng_uniform(uint64_t seed, uint64_t stream, uint64_t index) {
  uint64_t h = splitmix64(seed ^ splitmix64(stream ^ splitmix64(index)));
  return (float((h >> 40) & 0xffffffu) + 0.5f) * (1.0f / 16777216.0f);
}

// Approximately standard normal: sum of 4 uniforms, centred and scaled (Irwin-Hall; exact mean 0,
// variance 1, tails bounded at +-3.46). Cheap, branch-free and bit-identical on host and device.
GLM5_HD float rng_normal(uint64_t seed, uint64_t stream, uint64_t index) {
  float s = rng_uniform(seed, stream, 4 * index) + rng_uniform(seed, stream, 4 * index + 1) +
            rng_uniform(seed, stream, 4 * index + 2) + rng_uniform(seed, stream, 4 * index + 3);
  return (s - 2.0f) * 1.7320508f;
}

// FNV-1a hash of a name, used as the `stream` of a tensor's values.
inline uint64_t name_stream(std::string_view name) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : name) h = (h ^ uint8_t(c)) * 0x100000001b3ull;
  return h;
}

}  // namespace glm5
