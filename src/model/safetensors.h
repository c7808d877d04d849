// SafetensorsFile: a read-only, memory-mapped view of one .safetensors file.
//
// Format (huggingface/safetensors): 8-byte little-endian header length N, then N bytes of JSON
// {"NAME": {"dtype": "BF16", "shape": [..], "data_offsets": [begin, end]}, ..., "__metadata__": {..}},
// then the data section; offsets are relative to the start of the data section.
//
// open() validates the whole header before returning: file at least 8 bytes, N below 100 MB and
// within the file, the header a JSON object, every entry with a string dtype (BF16, F16, F32, F8_E4M3,
// I32, I64), a shape of non-negative integers and two integer data_offsets with begin <= end inside
// the data section, end - begin == numel x dtype size, and no two tensors overlapping. Every error is
// one glm5::Error line naming the file (and the tensor, where one is at fault).
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/dtype.h"

namespace glm5 {

// One tensor inside a mapped file. `data` points into the mapping (not necessarily aligned to the
// element size: read multi-byte elements with memcpy) and lives as long as the SafetensorsFile.
struct SafetensorsView {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;  // row-major
  const uint8_t* data = nullptr;
  size_t nbytes = 0;
  int64_t numel() const;
};

class SafetensorsFile {
 public:
  SafetensorsFile() = default;
  explicit SafetensorsFile(const std::string& path) { open(path); }
  ~SafetensorsFile();
  SafetensorsFile(SafetensorsFile&& o) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&& o) noexcept;
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  // Maps `path` and validates its header (see the file comment). Throws glm5::Error.
  void open(const std::string& path);
  const std::string& path() const { return path_; }
  // Tensor names, sorted.
  std::vector<std::string> tensors() const;
  bool has(const std::string& name) const { return views_.count(name) != 0; }
  // Throws glm5::Error "PATH: no tensor 'NAME'" when absent.
  const SafetensorsView& get(const std::string& name) const;
  const std::map<std::string, SafetensorsView>& views() const { return views_; }
  // Values of "__metadata__" (string -> string), empty when absent.
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  void close();
  std::string path_;
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
  std::map<std::string, SafetensorsView> views_;
  std::map<std::string, std::string> metadata_;
};

// Parses a safetensors dtype string ("BF16", "F16", "F32", "F8_E4M3", "I32", "I64").
// Returns false for anything else.
bool parse_safetensors_dtype(const std::string& s, DType* out);

// Reads element `i` of a floating tensor (BF16, F16, F32, F8_E4M3) as float. Integer dtypes convert
// by value. `data` need not be aligned.
float read_element_as_float(DType dtype, const uint8_t* data, int64_t i);

}  // namespace glm5
