// Reports: report.json (schema "glm5prof.report/1") for tools and regression diffs, report.md for
// people. Both written atomically (temp + rename); a bad output folder gives one clear glm5::Error.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/analysis.h"
#include "trace/atomic_file.h"

namespace glm5 {

inline constexpr const char* kReportSchema = "glm5prof.report/1";

struct RunReport {
  std::string name;          // e.g. the KV path: "cast", "gather-cast", "fp8", or the trace file
  nlohmann::json spec;       // this run's parameters (batch, context, ...), any JSON the caller likes
  Analysis analysis;
  // Tracing overhead (profile): untraced_step_us, traced_step_us (medians of the engine's own CUDA-
  // event step times, without / with CUPTI), overhead_pct, limit_pct, within_limit, the samples.
  // null when not measured (file traces).
  nlohmann::json timing;
  // The step's byte floor (engine/step_floor.h) with step_us and ratio = step_us / floor_us; null
  // when not computed (CPU backend, file traces).
  nlohmann::json floor;
};

struct ReportInput {
  nlohmann::json run_spec;   // the CLI RunSpec
  nlohmann::json device;     // name, peaks, ...
  nlohmann::json model;      // config summary
  nlohmann::json memory_fit; // how the model fits (shared experts, ...)
  std::vector<RunReport> runs;
  std::optional<PathComparison> comparison;
};

// The report as JSON (what write_report_json writes).
nlohmann::json report_to_json(const ReportInput& in);
// The report of a trace read from a file: one run named `name` (a trace of several runs: one per RunWindow,
// named as the runs, with the paths side by side in `comparison`); `device` from the trace's first device.
ReportInput report_of_trace(const Timeline& t, const std::string& name, const Peaks& peaks);

// The Markdown report as a string (what write_report_md writes).
std::string report_to_markdown(const ReportInput& in);

// True when every run's trace is complete (Analysis.complete: no dropped CUPTI records, every
// kernel launch recorded, no tracer error). report.json says so as "trace_complete"; report.md puts
// a warning under the summary otherwise; `glm5prof profile` exits 3.
bool report_complete(const ReportInput& in);

// One line per incomplete run: "RUN: N of M kernel launches recorded, D CUPTI records dropped (...)".
std::vector<std::string> incomplete_trace_lines(const ReportInput& in);

// Atomic writes of report.json / report.md; with `outputs`, staged there (see AtomicOutputs) instead.
void write_report_json(const ReportInput& in, const std::string& path, AtomicOutputs* outputs = nullptr);
void write_report_md(const ReportInput& in, const std::string& path, AtomicOutputs* outputs = nullptr);

// JSON for single pieces (also used by the CLI for diffs).
nlohmann::json to_json(const Analysis& a);
nlohmann::json to_json(const PathComparison& c);

}  // namespace glm5
