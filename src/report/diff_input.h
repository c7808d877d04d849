// Inputs of `glm5prof diff`: a glm5prof report.json as it is, or a Chrome / Kineto trace read into
// the Timeline, analyzed, and turned into the same report form (one run named after the file).
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace glm5 {

// Throws glm5::Error naming `path` for a missing file, invalid JSON, or JSON that is neither a
// glm5prof report (schema glm5prof.report/*) nor a trace with traceEvents.
nlohmann::json load_report_or_trace(const std::string& path);

}  // namespace glm5
