// Test helper: writes safetensors files (header JSON padded to 8 bytes, as the reference writer does)
// from raw tensors, for checkpoints the tests build (malformed, sharded, FP8 block-scaled).
#pragma once
#include <cstdint>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace glm5::test {

struct RawTensor {
  std::string dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};
using RawTensors = std::map<std::string, RawTensor>;

// Writes a well-formed safetensors file (header padded to 8 bytes as the reference writer does).
inline void write_safetensors(const std::string& path, const RawTensors& ts) {
  nlohmann::json h = nlohmann::json::object();
  h["__metadata__"] = {{"format", "pt"}};
  size_t off = 0;
  for (const auto& [name, t] : ts) {
    h[name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {off, off + t.bytes.size()}}};
    off += t.bytes.size();
  }
  std::string hs = h.dump();
  while (hs.size() % 8) hs += ' ';
  std::ofstream o(path, std::ios::binary);
  uint64_t n = hs.size();
  o.write(reinterpret_cast<const char*>(&n), 8);
  o.write(hs.data(), std::streamsize(hs.size()));
  for (const auto& [name, t] : ts) o.write(reinterpret_cast<const char*>(t.bytes.data()), std::streamsize(t.bytes.size()));
}

}  // namespace glm5::test
