// libFuzzer target: read_chrome_trace (Chrome / Kineto trace JSON, or .json.gz) through its public function only,
// then what `glm5prof analyze` does with the Timeline it returns: analyze, report JSON and Markdown.
#include <cstdint>

#include "analysis/analysis.h"
#include "common/error.h"
#include "fuzz/fuzz_util.h"
#include "report/report.h"
#include "trace/chrome_trace.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Inputs starting with the gzip magic go through the reader's .json.gz path (zlib inflate).
  static glm5::fuzz::TempFile plain(".json"), gz(".json.gz");
  const bool is_gz = size >= 2 && data[0] == 0x1f && data[1] == 0x8b;
  const std::string& path = (is_gz ? gz : plain).write(data, size);
  try {
    glm5::Timeline t = glm5::read_chrome_trace(path);
    glm5::ReportInput in;
    in.device = nlohmann::json{{"name", t.devices.empty() ? "unknown" : t.devices[0].name}};
    glm5::RunReport r;
    r.name = path;
    r.analysis = glm5::analyze(t, glm5::Peaks{});
    in.runs.push_back(r);
    (void)glm5::report_to_json(in).dump();
    (void)glm5::report_to_markdown(in);
  } catch (const glm5::Error&) {
  }
  return 0;
}
