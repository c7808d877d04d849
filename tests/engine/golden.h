// The golden decode case (../shared/golden/glm5-tiny): HF transformers' GlmMoeDsaForCausalLM outputs.
#pragma once
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "engine/greedy_decode.h"
#include "model/safetensors.h"
#include "tests/shared_dir.h"

namespace glm5::test {


struct Golden {
  std::vector<int32_t> prompt, generated;
  std::vector<std::vector<float>> logits;  // [8][vocab]
  std::vector<float> hidden_prefill_last;  // [5, hidden]
};

inline Golden load_golden() {
  SafetensorsFile f(golden_dir() + "/expected.safetensors");
  Golden g;
  auto ints = [&](const char* n) {
    const SafetensorsView& v = f.get(n);
    std::vector<int32_t> out(v.numel());
    for (int64_t i = 0; i < v.numel(); ++i) out[i] = int32_t(read_element_as_float(v.dtype, v.data, i));
    return out;
  };
  g.prompt = ints("prompt_ids");
  g.generated = ints("generated_ids");
  const SafetensorsView& l = f.get("logits");
  int64_t rows = l.shape[0], vocab = l.shape[1];
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<float> row(vocab);
    for (int64_t j = 0; j < vocab; ++j) row[j] = read_element_as_float(l.dtype, l.data, r * vocab + j);
    g.logits.push_back(row);
  }
  const SafetensorsView& h = f.get("hidden_prefill_last");
  for (int64_t i = 0; i < h.numel(); ++i) g.hidden_prefill_last.push_back(read_element_as_float(h.dtype, h.data, i));
  return g;
}

using glm5::top1_margin;
inline int argmax(const std::vector<float>& v) { return argmax_index(v); }

}  // namespace glm5::test
