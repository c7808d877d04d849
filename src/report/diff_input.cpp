#include "report/diff_input.h"

#include <filesystem>
#include <fstream>

#include "common/error.h"
#include "report/report.h"
#include "trace/chrome_trace.h"

namespace glm5 {

nlohmann::json load_report_or_trace(const std::string& path) {
  require_regular_file(path, "a report.json or trace");
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error("'" + path + "' cannot be read");
  nlohmann::json j = nlohmann::json::parse(f, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) throw Error("'" + path + "' is not valid JSON (a report.json or a Chrome/Kineto trace expected)");
  if (j.is_object() && j.contains("schema_version") && j["schema_version"].is_string() &&
      j["schema_version"].get<std::string>().rfind("glm5prof.report/", 0) == 0)
    return j;
  if (j.is_object() && (j.contains("traceEvents") || j.contains("schemaVersion"))) {
    // The trace reader parses the file again with its own checks; a trace diff is rare enough.
    ReportInput in;
    in.run_spec = {{"command", "diff"}, {"trace", path}};
    RunReport r;
    r.name = std::filesystem::path(path).filename().string();
    r.analysis = analyze(read_chrome_trace(path), Peaks{});
    in.runs.push_back(r);
    return report_to_json(in);
  }
  throw Error("'" + path + "' is neither a glm5prof report (schema_version glm5prof.report/1) nor a trace (traceEvents)");
}

}  // namespace glm5
