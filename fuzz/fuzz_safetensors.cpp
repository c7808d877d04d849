// libFuzzer target: SafetensorsFile::open on an arbitrary file (the header length, the JSON header
// and the data section), then every view read back element by element (first/last elements) so an
// accepted view that points outside the mapping is caught by ASan.
#include <cstdint>

#include "common/error.h"
#include "fuzz/fuzz_util.h"
#include "model/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static glm5::fuzz::TempFile tmp(".safetensors");
  const std::string& path = tmp.write(data, size);
  try {
    glm5::SafetensorsFile f(path);
    for (const auto& [name, v] : f.views()) {
      volatile float x = 0;
      const int64_t n = v.numel();
      if (n > 0) {
        x = glm5::read_element_as_float(v.dtype, v.data, 0);
        x = glm5::read_element_as_float(v.dtype, v.data, n - 1);
      }
      (void)x;
      (void)f.get(name);
    }
    (void)f.tensors();
    (void)f.metadata();
  } catch (const glm5::Error&) {
  }
  return 0;
}
