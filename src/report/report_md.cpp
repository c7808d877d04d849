// report.md: the same content as report.json, for people (summary first).
#include <algorithm>
#include <cstring>
#include <cstdio>
#include <map>
#include <sstream>

#include "common/json_excerpt.h"
#include "report/report.h"
#include "trace/atomic_file.h"

namespace glm5 {

namespace {

std::string f1(double v) {
  char b[48];
  std::snprintf(b, sizeof b, "%.1f", v);
  return b;
}
std::string f2(double v) {
  char b[48];
  std::snprintf(b, sizeof b, "%.2f", v);
  return b;
}
std::string pct(double share) { return f1(100 * share) + "%"; }

// `s` cut to n characters, '|' as '/' (a table cell); its callers then make it one line (md_text / code_span).
std::string shorten(const std::string& s, size_t n = 90) {
  std::string t = s.size() > n ? s.substr(0, n - 3) + "..." : s;
  std::replace(t.begin(), t.end(), '|', '/');
  return t;
}

// Control characters (NUL, newlines, tabs) as spaces: text from a trace stays on its line or table row.
std::string one_line(std::string s) {
  for (char& c : s)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  return s;
}

// `s` as plain Markdown text on one line (free text and names that come from a trace: run names, messages,
// recommendations, device fields): control characters become spaces, '|' becomes '/' (table cells), and the
// characters that start Markdown constructs (` * < > [ ] \; not _, which starts nothing inside a word) are
// backslash-escaped (CommonMark: any ASCII punctuation may be). Names such as "gather-cast" or "attn.kv_cast" pass unchanged.
std::string md_text(const std::string& s) {
  std::string t;
  t.reserve(s.size());
  for (char c : one_line(s)) {
    if (c == '|') c = '/';
    if (std::strchr("`*<>[]\\", c) && c != '\0') t += '\\';
    t += c;
  }
  return t;
}

// `s` as a Markdown code span whatever it holds (names come from traces: kernels, runs, hotspots): control
// characters (NUL, newlines) become spaces, and the fence is one backtick longer than the longest run of backticks
// inside, padded with spaces when s starts or ends with one (CommonMark's rule), so a name never closes its span.
std::string code_span(const std::string& s) {
  const std::string t = one_line(s);
  size_t longest = 0, run = 0;
  for (char c : t) longest = std::max(longest, run = c == '`' ? run + 1 : 0);
  if (t.find_first_not_of(' ') == std::string::npos) return "(empty)";  // "``" is no code span; all-space is odd
  const std::string fence(longest + 1, '`');
  // CommonMark strips one space at each end when both ends are spaces, and needs a space next to a backtick end.
  const bool pad = t.front() == '`' || t.back() == '`' || (t.front() == ' ' && t.back() == ' ');
  return fence + (pad ? " " : "") + t + (pad ? " " : "") + fence;
}

// Op groups of the per-layer table.
constexpr const char* kGroups[] = {"attention", "indexer", "kv cast", "mlp / moe", "other"};
int group_of(const std::string& op) {
  if (op == "attn.kv_cast" || op == "attn.kv_gather_cast") return 2;
  if (op.rfind("attn.indexer", 0) == 0 || op == "attn.topk") return 1;
  if (op.rfind("attn.", 0) == 0) return 0;
  if (op.rfind("moe.", 0) == 0 || op.rfind("mlp.", 0) == 0) return 3;
  return 4;
}

struct LayerRow {
  int layer = -1;
  bool moe = false;
  double group_us[5] = {0, 0, 0, 0, 0};
  double total() const { return group_us[0] + group_us[1] + group_us[2] + group_us[3] + group_us[4]; }
};

void row(std::ostringstream& o, const std::string& label, const double* g, double total) {
  o << "| " << label;
  for (int i = 0; i < 5; ++i) o << " | " << f1(g[i]);
  o << " | " << f1(total) << " |\n";
}

void layer_table(std::ostringstream& o, const Analysis& a) {
  std::map<int, LayerRow> rows;
  for (const OpCell& c : a.layer_ops) {
    LayerRow& r = rows[c.layer];
    r.layer = c.layer;
    r.group_us[group_of(c.op)] += c.time_us;
    if (c.op.rfind("moe.", 0) == 0) r.moe = true;
  }
  if (rows.empty()) return;
  o << "\nPer-layer time per step [us]:\n\n| layers | attention | indexer | kv cast | mlp / moe | other | total |\n"
       "|---|---:|---:|---:|---:|---:|---:|\n";
  std::vector<LayerRow> layers;
  for (const auto& [l, r] : rows) {
    if (l < 0) row(o, "outside layers", r.group_us, r.total());
    else layers.push_back(r);
  }
  if (layers.size() <= 12) {
    for (const LayerRow& r : layers) row(o, "layer " + std::to_string(r.layer), r.group_us, r.total());
    return;
  }
  // Many layers: one mean row per consecutive run of dense / MoE layers, then the slowest layers.
  for (size_t i = 0; i < layers.size();) {
    size_t j = i;
    double g[5] = {0, 0, 0, 0, 0};
    while (j < layers.size() && layers[j].moe == layers[i].moe) {
      for (int k = 0; k < 5; ++k) g[k] += layers[j].group_us[k];
      ++j;
    }
    const double n = static_cast<double>(j - i);
    for (double& v : g) v /= n;
    row(o, std::string(layers[i].moe ? "MoE" : "dense") + " layers " + std::to_string(layers[i].layer) + "-" +
               std::to_string(layers[j - 1].layer) + " (mean of " + std::to_string(j - i) + ")",
        g, g[0] + g[1] + g[2] + g[3] + g[4]);
    i = j;
  }
  std::vector<LayerRow> slow = layers;
  std::stable_sort(slow.begin(), slow.end(), [](const LayerRow& x, const LayerRow& y) { return x.total() > y.total(); });
  for (size_t i = 0; i < std::min<size_t>(5, slow.size()); ++i)
    row(o, "slowest: layer " + std::to_string(slow[i].layer), slow[i].group_us, slow[i].total());
}

// The typical layer kernel by kernel (Analysis::layer_timeline): each kernel's median start and end from the layer's
// first kernel, and the gap since the latest end before it (time in which no earlier kernel of the layer ran).
void layer_timeline_table(std::ostringstream& o, const Analysis& a) {
  const LayerTimeline& t = a.layer_timeline;
  if (t.rows.empty()) return;
  o << "\nLayer timeline: " << t.rows.size() << " kernels per layer, " << f1(t.span_us) << " us from the first start to "
    << "the last end; medians over the " << t.layers << " of " << t.layers_total << " layer samples (layers x steps"
    << " x devices) that ran this kernel sequence (the lowest: layer " << t.example_layer << "). Times in us from the "
    << "layer's first kernel start; a kernel launched early (programmatic dependent launch) starts before its "
    << "predecessor ends and waits inside. gap (from the medians): time since the latest end of an earlier kernel of "
    << "the layer in which none of them ran. adds: how much later the layer's latest end is after this kernel "
    << "(its end less the latest earlier end; not counting a wait inside it for an earlier kernel); the adds sum to "
    << "the layer's span.\n\n"
    << "| # | op | stream | start | end | duration | gap | adds |\n|---:|---|---|---:|---:|---:|---:|---:|\n";
  for (size_t i = 0; i < t.rows.size(); ++i) {
    const LayerTimelineRow& r = t.rows[i];
    o << "| " << i + 1 << " | " << code_span(r.op) << " | " << (r.side ? "side" : "main") << " | " << f1(r.start_us)
      << " | " << f1(r.end_us) << " | " << f1(r.end_us - r.start_us) << " | " << (r.gap_us >= 0.05 ? f1(r.gap_us) : "") << " | "
      << (r.adds_us >= 0.05 ? f1(r.adds_us) : "") << " |\n";
  }
}

std::string verdict(const ReportInput& in) {
  for (const RunReport& r : in.runs)
    for (const Hotspot& h : r.analysis.hotspots)
      if (h.kind == "kv_dtype_cast")
        return "**The KV dtype cast takes " + pct(h.share_of_step) + " of the decode step** (" + f1(h.time_us) +
               " us of " + f1(r.analysis.step_median_us) + " us per step, run " + code_span(r.name) +
               (h.achieved_gbps > 0 ? ", " + f1(h.achieved_gbps) + " GB/s" : std::string()) +
               "); removing it saves up to " + f1(h.est_saving_us) + " us per step.";
  if (!in.runs.empty() && !in.runs.front().analysis.ops.empty()) {
    const Analysis& a = in.runs.front().analysis;
    auto top = std::max_element(a.ops.begin(), a.ops.end(),
                                [](const OpSummary& x, const OpSummary& y) { return x.time_us < y.time_us; });
    return "No KV dtype cast found; the largest op is " +
           code_span(top->op.empty() ? std::string("(unattributed)") : top->op) + " at " + pct(top->share) + " of the step (" + f1(top->time_us) + " us of " + f1(a.step_median_us) + " us).";
  }
  // The reader's reason for an empty trace, when it gave one (a trace recorded without the GPU); other
  // messages (CUPTI, graphs) stay in the run's section.
  if (!in.runs.empty())
    for (const std::string& m : in.runs.front().analysis.trace_messages)
      if (m.rfind("no GPU kernel events", 0) == 0 || m.rfind("the file holds", 0) == 0)
        return "No kernels were recorded: " + m + ".";
  return "No kernels were recorded.";
}

void json_lines(std::ostringstream& o, const char* title, const nlohmann::json& j) {
  if (!j.is_object() || j.empty()) return;
  o << "- " << title << ": ";
  bool first = true;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it->is_structured()) continue;
    o << (first ? "" : ", ") << md_text(it.key()) << " " << md_text(it->is_string() ? it->get<std::string>() : json_excerpt(*it, 120));
    first = false;
  }
  o << "\n";
}

}  // namespace

std::string report_to_markdown(const ReportInput& in) {
  std::ostringstream o;
  o << "# glm5prof report\n\n## Summary\n\n";
  if (!report_complete(in)) {
    o << "**INCOMPLETE TRACE: the numbers below miss work that was not recorded (totals are lower bounds).**\n\n";
    for (const std::string& l : incomplete_trace_lines(in)) o << "- " << l << "\n";
    o << "\n";
  }
  o << verdict(in) << "\n";
  if (in.comparison && !in.comparison->winner.empty()) {
    const PathComparison& c = *in.comparison;
    for (const PathResult& p : c.paths)
      if (p.path == c.winner)
        o << "\nFastest KV path: **" << md_text(c.winner) << "** at " << f1(p.step_median_us) << " us per step"
          << (p.speedup_vs_cast > 0 ? " (" + f2(p.speedup_vs_cast) + "x vs cast)" : std::string()) << ".\n";
  }
  o << "\n";
  json_lines(o, "device", in.device);
  json_lines(o, "model", in.model);
  json_lines(o, "run", in.run_spec);
  if (in.run_spec.is_object() && in.run_spec.contains("tuning")) json_lines(o, "tuning", in.run_spec["tuning"]);
  json_lines(o, "memory", in.memory_fit);

  if (in.comparison && !in.comparison->paths.empty()) {
    o << "\n## KV paths side by side\n\n| path | step median [us] | attention [us] | cast [us] | cast share | speedup vs cast |\n"
         "|---|---:|---:|---:|---:|---:|\n";
    for (const PathResult& p : in.comparison->paths)
      o << "| " << md_text(p.path) << (p.path == in.comparison->winner ? " (winner)" : "") << " | " << f1(p.step_median_us)
        << " | " << f1(p.attention_us) << " | " << f1(p.cast_us) << " | " << pct(p.cast_share) << " | "
        << (p.speedup_vs_cast > 0 ? f2(p.speedup_vs_cast) + "x" : std::string("-")) << " |\n";
  }

  for (const RunReport& r : in.runs) {
    const Analysis& a = r.analysis;
    o << "\n## Run " << code_span(r.name) << "\n\n" << a.steps.size() << " measured steps: median " << f1(a.step_median_us)
      << " us, min " << f1(a.step_min_us) << " us, max " << f1(a.step_max_us) << " us (source: " << a.source
      << (a.complete ? "" : ", INCOMPLETE") << ").\n";
    o << "\nTrace: " << a.kernels_recorded << " kernel records";
    if (a.launches_counted) o << " of " << a.kernels_launched << " launches";
    o << ", " << a.records_dropped << " records dropped"
      << (a.complete ? " (complete)" : " (**incomplete**)") << ".\n";
    for (const std::string& m : a.trace_messages) o << "- " << md_text(m) << "\n";
    if (r.timing.is_object()) {
      const nlohmann::json& t = r.timing;
      o << "\nTracing overhead: untraced step " << f1(t.value("untraced_step_us", 0.0)) << " us, traced step "
        << f1(t.value("traced_step_us", 0.0)) << " us";
      if (t.contains("overhead_pct") && t["overhead_pct"].is_number()) {
        o << ": **" << f2(t["overhead_pct"].get<double>()) << "%**";
        if (t.contains("within_limit"))
          o << " (limit " << f1(t.value("limit_pct", 2.0)) << "%, " << (t.value("within_limit", false) ? "within" : "**over**")
            << ")";
      }
      o << "; " << t.value("method", std::string()) << ".";
      const bool graph_level = t.value("graph_trace", std::string()) == "graph";
      if (r.spec.is_object() && r.spec.value("graph", false) && !graph_level && !t.value("within_limit", true))
        o << " With --graph CUPTI timestamps every graph kernel node (node-level graph tracing, about 1 us per node "
             "on the H200), a cost eager launches hide in their launch gaps: the traced graph step is no faster than "
             "the traced eager one (reports/2026-11-29-h200-decode-step.md); --graph-trace graph avoids it.";
      o << "\n";
      if (graph_level && t.contains("attribution_step_us")) {
        // --graph-trace graph: the steps above were traced at graph level; the op tables below come from
        // the node-level attribution steps, whose own overhead is stated here.
        o << "\nAttribution steps (node-level graph tracing, the kernels of the tables below): "
          << t.value("attribution_steps", 0) << " step(s), median " << f1(t.value("attribution_step_us", 0.0)) << " us";
        if (t["attribution_overhead_pct"].is_number()) o << " (" << f2(t["attribution_overhead_pct"].get<double>()) << "% over untraced)";
        o << "; CUPTI's graph-level records of the traced steps: median " << f1(t.value("graph_record_step_us", 0.0))
          << " us on the device.\n";
      }
    }
    if (r.floor.is_object()) {
      const nlohmann::json& fl = r.floor;
      o << "\nStep floor: " << f1(fl.value("floor_us", 0.0)) << " us (" << f2(fl.value("total_bytes", 0.0) / 1e9)
        << " GB at " << f1(fl.value("copy_gbps", 0.0)) << " GB/s; " << f1(fl.value("experts_per_moe_layer", 0.0))
        << " routed experts per MoE layer, " << fl.value("experts_basis", std::string()) << "); step "
        << f1(fl.value("step_us", 0.0)) << " us = **" << f2(fl.value("ratio", 0.0)) << "x** the floor.\n";
    }
    if (!a.hotspots.empty()) {
      o << "\nHotspots:\n\n";
      for (const Hotspot& h : a.hotspots)
        o << "- **" << h.kind << "** " << code_span(h.what) << ": " << pct(h.share_of_step) << " of the step. "
          << md_text(h.recommendation) << "\n";
    }
    if (!a.ops.empty()) {
      // The "overlapped" column only when some op ran on a side stream beside busy work (EngineOptions::overlap).
      bool any_overlap = false;
      for (const OpSummary& s : a.ops) any_overlap |= s.overlapped_us > 0;
      o << "\n| op | us / step |" << (any_overlap ? " overlapped |" : "")
        << " share | GB/s | % copy peak | TFLOP/s | % bf16 peak |\n|---|---:|" << (any_overlap ? "---:|" : "")
        << "---:|---:|---:|---:|---:|\n";
      for (const OpSummary& s : a.ops) {
        o << "| " << (s.op.empty() ? "(unattributed)" : md_text(shorten(s.op, 60))) << " | " << f1(s.time_us) << " | ";
        if (any_overlap) o << f1(s.overlapped_us) << " | ";
        o << pct(s.share) << " | " << f1(s.achieved_gbps) << " | " << f1(s.pct_copy_peak) << " | "
          << f2(s.achieved_tflops) << " | " << f1(s.pct_bf16_peak) << " |\n";
      }
      if (any_overlap)
        o << "\noverlapped: us per step of the op's time that ran on the engine's side stream while another stream of "
             "the device was busy (off the step's critical path unless that stream waited for it); the latency_bound "
             "hotspot counts only the rest.\n";
    }
    layer_table(o, a);
    layer_timeline_table(o, a);
    if (!a.top_kernels.empty()) {
      o << "\nTop kernels (whole run):\n\n| kernel | calls | total [us] | mean [us] | share |\n|---|---:|---:|---:|---:|\n";
      for (size_t i = 0; i < std::min<size_t>(10, a.top_kernels.size()); ++i) {
        const KernelStat& k = a.top_kernels[i];
        o << "| " << code_span(shorten(k.name)) << " | " << k.calls << " | " << f1(k.total_us) << " | " << f2(k.mean_us)
          << " | " << pct(k.share) << " |\n";
      }
    }
  }
  return o.str();
}

void write_report_md(const ReportInput& in, const std::string& path, AtomicOutputs* outputs) {
  if (outputs) outputs->stage(path, report_to_markdown(in));
  else write_file_atomic(path, report_to_markdown(in));
}

}  // namespace glm5
