// report.json: schema "glm5prof.report/1" (see report.h).
#include "report/report.h"
#include "trace/atomic_file.h"

namespace glm5 {

using nlohmann::json;

json to_json(const Analysis& a) {
  json samples = json::array();
  for (const StepSample& s : a.steps)
    samples.push_back({{"step", s.step}, {"time_us", s.time_us}, {"kernel_us", s.kernel_us}, {"idle_us", s.idle_us}});
  json ops = json::array();
  for (const OpSummary& o : a.ops)
    ops.push_back({{"op", o.op}, {"time_us", o.time_us}, {"share", o.share}, {"bytes", o.bytes},
                   {"flops", o.flops}, {"achieved_gbps", o.achieved_gbps},
                   {"pct_copy_peak", o.pct_copy_peak}, {"achieved_tflops", o.achieved_tflops},
                   {"pct_bf16_peak", o.pct_bf16_peak}, {"overlapped_us", o.overlapped_us}});
  json cells = json::array();
  for (const OpCell& c : a.layer_ops)
    cells.push_back({{"layer", c.layer}, {"op", c.op}, {"time_us", c.time_us}, {"kernels", c.kernels},
                     {"bytes", c.bytes}, {"flops", c.flops}, {"overlapped_us", c.overlapped_us}});
  json kernels = json::array();
  for (const KernelStat& k : a.top_kernels)
    kernels.push_back({{"name", k.name}, {"calls", k.calls}, {"total_us", k.total_us},
                       {"mean_us", k.mean_us}, {"share", k.share}});
  json hotspots = json::array();
  for (const Hotspot& h : a.hotspots)
    hotspots.push_back({{"kind", h.kind}, {"what", h.what}, {"time_us", h.time_us},
                        {"share_of_step", h.share_of_step}, {"bytes", h.bytes},
                        {"achieved_gbps", h.achieved_gbps}, {"pct_of_peak", h.pct_of_peak},
                        {"est_saving_us", h.est_saving_us}, {"recommendation", h.recommendation}});
  json timeline_rows = json::array();
  for (const LayerTimelineRow& r : a.layer_timeline.rows)
    timeline_rows.push_back({{"op", r.op}, {"side", r.side}, {"start_us", r.start_us}, {"end_us", r.end_us},
                             {"adds_us", r.adds_us}});
  const json timeline = {{"layers", a.layer_timeline.layers},
                         {"layers_total", a.layer_timeline.layers_total},
                         {"example_layer", a.layer_timeline.example_layer},
                         {"span_us", a.layer_timeline.span_us},
                         {"kernels", timeline_rows}};
  json trace = {{"complete", a.complete},
                {"records_dropped", a.records_dropped},
                {"kernels_launched", a.launches_counted ? json(a.kernels_launched) : json(nullptr)},
                {"kernels_recorded", a.kernels_recorded},
                {"messages", a.trace_messages}};
  return {{"source", a.source},
          {"complete", a.complete},
          {"trace", trace},
          {"steps",
           {{"samples", samples},
            {"median_us", a.step_median_us},
            {"min_us", a.step_min_us},
            {"max_us", a.step_max_us}}},
          {"attention_us", a.attention_us},
          {"cast_us", a.cast_us},
          {"total_kernel_us", a.total_kernel_us},
          {"gpu_idle_us", a.gpu_idle_us},
          {"kernels_per_step", a.kernels_per_step},
          {"ops", ops},
          {"layer_ops", cells},
          {"top_kernels", kernels},
          {"kernels_distinct", a.kernels_distinct},
          {"hotspots", hotspots},
          {"layer_timeline", timeline}};
}

json to_json(const PathComparison& c) {
  json paths = json::array();
  for (const PathResult& p : c.paths)
    paths.push_back({{"path", p.path}, {"step_median_us", p.step_median_us},
                     {"attention_us", p.attention_us}, {"cast_us", p.cast_us},
                     {"cast_share", p.cast_share}, {"speedup_vs_cast", p.speedup_vs_cast}});
  return {{"paths", paths}, {"winner", c.winner}};
}

bool report_complete(const ReportInput& in) {
  for (const RunReport& r : in.runs)
    if (!r.analysis.complete) return false;
  return true;
}

std::vector<std::string> incomplete_trace_lines(const ReportInput& in) {
  std::vector<std::string> lines;
  for (const RunReport& r : in.runs) {
    const Analysis& a = r.analysis;
    if (a.complete) continue;
    std::string l = r.name + ": ";
    if (a.launches_counted)
      l += std::to_string(a.kernels_recorded) + " of " + std::to_string(a.kernels_launched) + " kernel launches recorded";
    else
      l += std::to_string(a.kernels_recorded) + " kernels recorded (launches not counted)";
    l += ", " + std::to_string(a.records_dropped) + " CUPTI records dropped";
    for (const std::string& m : a.trace_messages) l += "; " + m;
    lines.push_back(std::move(l));
  }
  return lines;
}

json report_to_json(const ReportInput& in) {
  json runs = json::array();
  for (const RunReport& r : in.runs) {
    json j = to_json(r.analysis);
    j["name"] = r.name;
    j["spec"] = r.spec;
    if (!r.timing.is_null()) j["timing"] = r.timing;
    if (!r.floor.is_null()) j["floor"] = r.floor;
    runs.push_back(std::move(j));
  }
  return {{"schema_version", kReportSchema},
          {"generated_by", "glm5prof"},
          {"trace_complete", report_complete(in)},
          {"incomplete_traces", incomplete_trace_lines(in)},
          {"run_spec", in.run_spec},
          {"device", in.device},
          {"model", in.model},
          {"memory_fit", in.memory_fit},
          {"runs", runs},
          {"comparison", in.comparison ? to_json(*in.comparison) : json(nullptr)}};
}

ReportInput report_of_trace(const Timeline& t, const std::string& name, const Peaks& peaks) {
  ReportInput in;
  in.device = json{{"name", t.devices.empty() ? "unknown" : t.devices[0].name}};
  if (t.runs.size() > 1) {
    std::vector<std::pair<std::string, Analysis>> analyses;
    for (const RunWindow& w : t.runs) {
      RunReport r;
      r.name = w.name;
      r.analysis = analyze(timeline_window(t, w), peaks);
      analyses.emplace_back(w.name, r.analysis);
      in.runs.push_back(r);
    }
    in.comparison = compare_paths(analyses);
  } else {
    RunReport r;
    r.name = name;
    r.analysis = analyze(t, peaks);
    in.runs.push_back(r);
  }
  return in;
}

void write_report_json(const ReportInput& in, const std::string& path, AtomicOutputs* outputs) {
  const std::string doc = report_to_json(in).dump(2) + "\n";
  if (outputs) outputs->stage(path, doc);
  else write_file_atomic(path, doc);
}

}  // namespace glm5
