// libFuzzer target: parse_model_config on arbitrary JSON (a HuggingFace config.json). Inputs that
// are not JSON are skipped (nlohmann's parser is not ours); derived quantities are evaluated too, so
// a config that parses must give non-crashing softmax_scale / num_moe_layers. (parameter_count needs
// model/weights.cpp, which needs CUDA sources: left out.)
#include <cstdint>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "model/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  nlohmann::json j = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return -1;  // not JSON: not added to the corpus
  try {
    glm5::ModelConfig c = glm5::parse_model_config(j, "fuzz/config.json");
    volatile float s = c.softmax_scale();
    volatile int m = c.num_moe_layers() + c.qk_head_dim();
    (void)s, (void)m;
  } catch (const glm5::Error&) {
  }
  return 0;
}
