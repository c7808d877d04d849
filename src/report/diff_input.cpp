#include "report/diff_input.h"

#include <filesystem>
#include <fstream>

#include "common/error.h"
#include "common/json_excerpt.h"
#include "common/input_file.h"
#include "report/report.h"
#include "trace/chrome_trace.h"

namespace glm5 {

namespace {
// A Chrome / Kineto trace (plain or gzip) analysed into a report: one run named after the file, or one per run
// window of a several-run trace (report_of_trace).
nlohmann::json trace_as_report(const std::string& path) {
  ReportInput in = report_of_trace(read_chrome_trace(path), std::filesystem::path(path).filename().string(), Peaks{});
  in.run_spec = {{"command", "diff"}, {"trace", path}};
  return report_to_json(in);
}
}  // namespace

nlohmann::json load_report_or_trace(const std::string& path) {
  require_regular_file(path, "a report.json or trace");
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error("'" + path + "' cannot be read");
  // A gzip file is a trace (.json.gz, as torch.profiler writes them): the trace reader inflates it.
  char magic[2] = {0, 0};
  const bool gzip = f.read(magic, 2) && static_cast<unsigned char>(magic[0]) == 0x1f &&
                    static_cast<unsigned char>(magic[1]) == 0x8b;
  f.clear();
  f.seekg(0);
  if (gzip) return trace_as_report(path);
  nlohmann::json j;
  try {  // the parser's message names the byte and what it found (bad-input attack, session 31: diff named no place)
    j = nlohmann::json::parse(f);
  } catch (const nlohmann::json::exception& e) {
    throw Error("'" + path + "' is not valid JSON (" + json_error_text(e) +
                "; a report.json or a Chrome/Kineto trace expected)");
  }
  if (j.is_object() && j.contains("schema_version") && j["schema_version"].is_string() &&
      j["schema_version"].get<std::string>().rfind("glm5prof.report/", 0) == 0) {
    const std::string v = j["schema_version"].get<std::string>();
    if (v != "glm5prof.report/1")
      throw Error("'" + path + "': schema_version '" + v + "' is not one this glm5prof reads (glm5prof.report/1)");
    return j;
  }
  // The trace reader parses the file again with its own checks; a trace diff is rare enough.
  if (j.is_object() && (j.contains("traceEvents") || j.contains("schemaVersion"))) return trace_as_report(path);
  throw Error("'" + path + "' is neither a glm5prof report (schema_version glm5prof.report/1) nor a trace (traceEvents)");
}

}  // namespace glm5
