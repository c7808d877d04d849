// libFuzzer target: `glm5prof diff` inputs. The input is loaded with load_report_or_trace (a
// report.json or a Chrome trace) and diffed against itself and against the seed report, and the
// three output formats are produced.
#include <cstdint>

#include "analysis/diff.h"
#include "common/error.h"
#include "fuzz/fuzz_util.h"
#include "report/diff_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static glm5::fuzz::TempFile tmp(".json");
  const std::string& path = tmp.write(data, size);
  try {
    nlohmann::json now = glm5::load_report_or_trace(path);
    glm5::DiffOptions opt;
    opt.gate = {"step", "op", "layer", "kernel", "appeared"};
    glm5::DiffResult d = glm5::diff_reports(now, now, opt, "BASE", path);
    (void)glm5::diff_to_markdown(d, opt);
    (void)glm5::diff_to_json(d, opt).dump();
    (void)glm5::diff_to_junit(d);
    // The input as the newer side of a pair, a base with the same runs but halved samples.
    nlohmann::json base = now;
    glm5::DiffResult d2 = glm5::diff_reports(base, now, opt, "BASE", path);
    (void)glm5::diff_to_markdown(d2, opt);
  } catch (const glm5::Error&) {
  }
  return 0;
}
