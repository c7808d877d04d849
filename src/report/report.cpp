#include "report/report.h"

#include "trace/atomic_file.h"

namespace glm5 {

nlohmann::json to_json(const Analysis& a) { return {{"source", a.source}}; }
nlohmann::json to_json(const PathComparison& c) { return {{"winner", c.winner}}; }
nlohmann::json report_to_json(const ReportInput& in) {
  nlohmann::json j;
  j["schema_version"] = kReportSchema;
  (void)in;
  return j;
}
std::string report_to_markdown(const ReportInput& in) { (void)in; return "# glm5prof report\n"; }
void write_report_json(const ReportInput& in, const std::string& path) {
  write_file_atomic(path, report_to_json(in).dump(2) + "\n");
}
void write_report_md(const ReportInput& in, const std::string& path) {
  write_file_atomic(path, report_to_markdown(in));
}

}  // namespace glm5
