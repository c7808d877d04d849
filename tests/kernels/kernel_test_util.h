// Helpers shared by the kernel tests: fresh random seeds, host <-> device copies, short numbers.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "common/buffer.h"

namespace glm5 {

// A seed drawn fresh for every run (tests never reuse one fixed input).
inline uint64_t fresh_seed() {
  std::random_device rd;
  return (uint64_t(rd()) << 32) | rd();
}

// `v` copied into a new device buffer.
template <class T>
Buffer to_device(const std::vector<T>& v, const char* label = "test input") {
  Buffer b(Where::Device, v.size() * sizeof(T), label);
  b.upload(v.data(), v.size() * sizeof(T));
  return b;
}

// `n` elements of `b` from byte `offset_bytes`, copied to the host.
template <class T>
std::vector<T> to_host(const Buffer& b, size_t n, size_t offset_bytes = 0) {
  std::vector<T> v(n);
  b.download(v.data(), n * sizeof(T), offset_bytes);
  return v;
}

// The whole of `b`, copied to the host.
template <class T>
std::vector<T> to_host(const Buffer& b) {
  return to_host<T>(b, b.bytes() / sizeof(T));
}

// "%.3g" of v, for failure messages.
// Request b owns pages [b * max_pages, (b + 1) * max_pages) of the result: a shuffled, disjoint assignment of the
// pool pages 0 .. B * max_pages - 1 (seeded).
inline std::vector<int32_t> shuffled_block_table(int B, int max_pages, uint64_t seed) {
  std::vector<int32_t> pages(size_t(B) * max_pages);
  for (size_t i = 0; i < pages.size(); ++i) pages[i] = int32_t(i);
  std::mt19937_64 g(seed);
  std::shuffle(pages.begin(), pages.end(), g);
  return pages;
}

inline std::string sci(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

}  // namespace glm5
