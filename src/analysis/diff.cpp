#include "analysis/diff.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "common/error.h"
#include "common/input_file.h"
#include "common/json_excerpt.h"
#include "trace/chrome_trace.h"  // kMaxPlausibleDurationUs

namespace glm5 {

using json = nlohmann::json;

namespace {

// The part of a report run the diff reads.
struct RunView {
  std::string name;
  std::vector<double> step_samples;      // per-step time [us]
  double step_median = 0;
  std::map<std::string, double> ops;     // op -> us per step
  std::map<int, double> layers;          // layer -> us per step
  std::map<std::string, double> kernels; // kernel -> us per step (from the top-kernel list)
  bool kernels_complete = true;           // the top-kernel list holds every kernel of the run
  std::map<std::string, double> hotspots; // "kind: what" -> us per step
  std::string source;                     // the run's timing source ("cupti", "host-clock", "file"; "" if not said)
};

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

// The finite number `key` of `j`, in [lo, hi] (times: [0, kMaxPlausibleDurationUs], the trace reader's limit: a larger
// time is a corrupt report, 1e308 printed as digits and -inf%; a layer index: lo = -1, "not a layer").
double number(const json& j, const char* key, const std::string& where, double lo = 0,
              double hi = kMaxPlausibleDurationUs) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number())
    throw Error(where + ": field '" + key + "' missing or not a number");
  double v = it->get<double>();
  if (!std::isfinite(v)) throw Error(where + ": field '" + key + "' is not finite");
  if (v < lo) throw Error(where + ": field '" + key + "' is below " + std::to_string(int(lo)) + " (" + fmt("%.6g", v) + ")");
  if (v > hi)
    throw Error(where + ": field '" + key + "' is " + fmt("%.6g", v) + ", above the plausible " + fmt("%.6g", hi) +
                " (a corrupt report?)");
  return v;
}

// The string field `key` of `j`, or `def` when it is absent; any other type (null included) is bad input naming
// the field.
std::string text(const json& j, const char* key, const std::string& def, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end()) return def;
  if (!it->is_string()) throw Error(where + ": field '" + key + "' must be a string, got " + json_excerpt(*it, 40));
  return it->get<std::string>();
}

// The string field `key` of `j`, required and not empty (a name things are matched by).
std::string name_field(const json& j, const char* key, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_string() || it->get<std::string>().empty())
    throw Error(where + ": field '" + key + "' missing or not a non-empty string" +
                (it == j.end() ? std::string() : ", got " + json_excerpt(*it, 40)));
  return it->get<std::string>();
}

// The op name of an ops entry: a string; empty is the analysis's own name for kernels outside every op range (written
// by `analyze` / `profile` as "", shown as "(unattributed)"), so it is accepted under that label.
std::string op_field(const json& j, const std::string& where) {
  auto it = j.find("op");
  if (it == j.end() || !it->is_string())
    throw Error(where + ": field 'op' missing or not a string" +
                (it == j.end() ? std::string() : ", got " + json_excerpt(*it, 40)));
  const std::string op = it->get<std::string>();
  return op.empty() ? "(unattributed)" : op;
}

// Adds `v` under `name`; a name seen before in the same list is bad input (a report lists each once).
void add_unique(std::map<std::string, double>& m, const std::string& name, double v, const std::string& where) {
  if (!m.emplace(name, v).second) throw Error(where + ": '" + name + "' is listed twice");
}

const json& array(const json& j, const char* key, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_array()) throw Error(where + ": field '" + key + "' missing or not a list");
  return *it;
}

std::vector<RunView> read_runs(const json& report, const std::string& who) {
  if (!report.is_object()) throw Error(who + ": not a glm5prof report (expected a JSON object)");
  const json& runs = array(report, "runs", who);
  std::vector<RunView> out;
  for (size_t i = 0; i < runs.size(); ++i) {
    const json& r = runs[i];
    std::string where = who + ": runs[" + std::to_string(i) + "]";
    if (!r.is_object()) throw Error(where + ": expected an object");
    RunView v;
    // Runs are matched by name between the two reports, so a run without one is bad input (a made-up "run0" would
    // report the other side's run as missing: a regression verdict for a corrupt file).
    v.name = name_field(r, "name", where);
    if (r.contains("source") && r["source"].is_string()) v.source = r["source"].get<std::string>();
    for (const RunView& seen : out)
      if (seen.name == v.name) throw Error(where + ": run name '" + v.name + "' is used twice in the report");
    auto st = r.find("steps");
    if (st == r.end() || !st->is_object()) throw Error(where + ": field 'steps' missing or not an object");
    v.step_median = number(*st, "median_us", where + ".steps");
    for (const json& s : array(*st, "samples", where + ".steps")) {
      if (!s.is_object()) throw Error(where + ".steps.samples: expected objects");
      v.step_samples.push_back(number(s, "time_us", where + ".steps.samples"));
    }
    // No step sample (an empty trace, or samples dropped from a report) leaves nothing to compare, and the per-step
    // kernel times below would divide by a made-up step count (bad-input review, session 31: an empty new trace
    // passed the gate as a -100% "improvement").
    if (v.step_samples.empty())
      throw Error(where + ".steps: no step samples (the trace has no kernels or step markers?): nothing to compare");
    {  // a median outside its own samples' range is a corrupt report
      const auto [lo, hi] = std::minmax_element(v.step_samples.begin(), v.step_samples.end());
      if (v.step_median < *lo || v.step_median > *hi)
        throw Error(where + ".steps: field 'median_us' (" + fmt("%.6g", v.step_median) + ") is outside its samples' range [" +
                    fmt("%.6g", *lo) + ", " + fmt("%.6g", *hi) + "]");
    }
    if (!(v.step_median > 0)) throw Error(where + ".steps: the step median is 0 us: nothing to compare");
    for (const json& o : array(r, "ops", where)) {
      if (!o.is_object()) throw Error(where + ".ops: expected objects");
      add_unique(v.ops, op_field(o, where + ".ops"), number(o, "time_us", where + ".ops"), where + ".ops");
    }
    for (const json& c : array(r, "layer_ops", where)) {
      if (!c.is_object()) throw Error(where + ".layer_ops: expected objects");
      // A layer index outside int's range (or fractional) is bad input, not a cast with undefined behaviour.
      double lv = number(c, "layer", where + ".layer_ops", -1);  // >= -1 checked there
      if (lv != std::floor(lv) || lv > 1e6)
        throw Error(where + ".layer_ops: field 'layer' is not an integer in [-1, 1000000]");
      int layer = int(lv);
      if (layer >= 0) v.layers[layer] += number(c, "time_us", where + ".layer_ops");
    }
    double nsteps = std::max<size_t>(1, v.step_samples.size());
    for (const json& k : array(r, "top_kernels", where)) {
      if (!k.is_object()) throw Error(where + ".top_kernels: expected objects");
      add_unique(v.kernels, name_field(k, "name", where + ".top_kernels"),
                 number(k, "total_us", where + ".top_kernels") / nsteps, where + ".top_kernels");
    }
    // The analysis keeps the 20 largest kernels; "kernels_distinct" says how many there were (an integer, at least
    // the number listed). A report without it (older) counts as cut when its list is full.
    const size_t listed = v.kernels.size();
    if (r.contains("kernels_distinct")) {
      const double kd = number(r, "kernels_distinct", where);
      if (kd != std::floor(kd))
        throw Error(where + ": field 'kernels_distinct' is not an integer (" + fmt("%.6g", kd) + ")");
      if (kd < double(listed))
        throw Error(where + ": field 'kernels_distinct' (" + fmt("%.0f", kd) + ") is below the " +
                    std::to_string(listed) + " kernels listed in 'top_kernels'");
      v.kernels_complete = kd == double(listed);
    } else {
      v.kernels_complete = listed < 20;
    }
    if (r.contains("hotspots") && !r["hotspots"].is_null()) {
      const std::string hw = where + ".hotspots";
      for (const json& h : array(r, "hotspots", where)) {
        if (!h.is_object()) throw Error(hw + ": expected objects");
        v.hotspots[text(h, "kind", "", hw) + ": " + text(h, "what", "", hw)] =
            h.contains("time_us") ? number(h, "time_us", hw) : 0.0;
      }
    }
    out.push_back(std::move(v));
  }
  return out;
}

double pct(double base, double now) { return base > 0 ? 100.0 * (now - base) / base : 0.0; }

bool gated(const DiffOptions& o, const std::string& group) {
  return std::find(o.gate.begin(), o.gate.end(), group) != o.gate.end();
}

// Effect-size verdict for metrics without samples.
std::string effect_verdict(const DiffOptions& o, double base, double now) {
  double d = pct(base, now), a = std::fabs(now - base);
  if (a < o.min_abs_us || std::fabs(d) < o.threshold_pct) return "unchanged";
  return d > 0 ? "regression" : "improvement";
}

// Compares one metric group of two runs. `complete_base` / `complete_now`: that side lists every name
// it had (the op and layer tables), so a name missing there did not run. A name missing from a list
// cut to its largest entries (the top kernels) may only have been smaller than the cut: it is called
// "entered top list" / "left top list" (never gated) instead of appeared / vanished. (Before, a kernel
// larger than the smallest one the other list kept was called appeared: two CPU-backend runs of the same
// deployment under uneven load crossed that line by timing noise alone and failed the gate.)
void compare_maps(const DiffOptions& o, const std::string& run, const std::string& group, double step_us,
                  const std::map<std::string, double>& base, const std::map<std::string, double>& now,
                  bool detect_presence, bool complete_base, bool complete_now, DiffResult& out) {
  std::set<std::string> names;
  for (auto& [k, v] : base) names.insert(k);
  for (auto& [k, v] : now) names.insert(k);
  for (const std::string& n : names) {
    auto b = base.find(n), w = now.find(n);
    double bv = b == base.end() ? 0 : b->second, nv = w == now.end() ? 0 : w->second;
    double share = step_us > 0 ? std::max(bv, nv) / step_us : 0;
    if (share < o.min_share) continue;
    MetricDiff m{run, group, n, bv, nv, pct(bv, nv), -1, false, ""};
    if (detect_presence && b == base.end()) {
      m.group = complete_base ? "appeared" : group;
      m.verdict = complete_base ? "appeared" : "entered top list";
      m.gated = complete_base && gated(o, "appeared");
    } else if (detect_presence && w == now.end()) {
      m.group = complete_now ? "vanished" : group;
      m.verdict = complete_now ? "vanished" : "left top list";
    } else {
      m.verdict = effect_verdict(o, bv, nv);
      m.gated = gated(o, group);
    }
    out.metrics.push_back(m);
  }
}

}  // namespace

double mann_whitney_greater_p(const std::vector<double>& a, const std::vector<double>& b) {
  const size_t n = a.size(), m = b.size();
  if (n == 0 || m == 0) return 1.0;
  // U = pairs where b beats a, ties counting one half: for each y of b, the a below it plus half the a equal to
  // it, by binary search in sorted a (O((n + m) log n); the pair loop took minutes at 200,000 samples a side).
  std::vector<double> sa = a;
  std::sort(sa.begin(), sa.end());
  double u = 0;
  for (double y : b) {
    const auto lo = std::lower_bound(sa.begin(), sa.end(), y), hi = std::upper_bound(lo, sa.end(), y);
    u += double(lo - sa.begin()) + 0.5 * double(hi - lo);
  }
  if (n * m <= 2500) {
    // Exact null distribution of U: ways[k][s] = subsets of size k of ranks 1..N with rank sum s.
    const size_t N = n + m, max_sum = N * (N + 1) / 2;
    std::vector<std::vector<double>> ways(m + 1, std::vector<double>(max_sum + 1, 0.0));
    ways[0][0] = 1;
    for (size_t r = 1; r <= N; ++r)
      for (size_t k = std::min(r, m); k >= 1; --k)
        for (size_t s = max_sum; s >= r; --s) ways[k][s] += ways[k - 1][s - r];
    double total = 0, tail = 0;
    const double w_obs = std::floor(u + 1e-9) + double(m * (m + 1) / 2);  // rank sum of b for U = floor(u)
    for (size_t s = 0; s <= max_sum; ++s) {
      total += ways[m][s];
      if (double(s) >= w_obs) tail += ways[m][s];
    }
    return total > 0 ? tail / total : 1.0;
  }
  const double mu = double(n * m) / 2, sigma = std::sqrt(double(n * m) * double(n + m + 1) / 12.0);
  const double z = (u - 0.5 - mu) / sigma;
  return 0.5 * std::erfc(z / std::sqrt(2.0));
}

DiffOptions load_diff_options(const std::string& path, DiffOptions o) {
  require_regular_file(path, "diff config '" + path + "': a JSON file");
  std::ifstream f(path);
  if (!f) throw Error("diff config '" + path + "': cannot be read");
  json j;
  try {
    j = json::parse(f);
  } catch (const json::exception& e) {
    throw Error("diff config '" + path + "': not valid JSON (" + json_error_text(e) + ")");
  }
  if (!j.is_object()) throw Error("diff config '" + path + "': expected a JSON object");
  for (const auto& [key, value] : j.items()) {
    static const std::set<std::string> keys = {"threshold_pct", "alpha", "min_abs_us", "min_share", "gate"};
    if (!keys.count(key))
      throw Error("diff config '" + path + "': unknown key '" + key +
                  "' (expected threshold_pct, alpha, min_abs_us, min_share, gate)");
  }
  auto num = [&](const char* key, double& dst, double lo, double hi) {
    if (!j.contains(key)) return;
    if (!j[key].is_number() || j[key].get<double>() < lo || j[key].get<double>() > hi)
      throw Error("diff config '" + path + "': '" + key + "' must be a number in [" + fmt("%g", lo) + ", " +
                  fmt("%g", hi) + "]");
    dst = j[key].get<double>();
  };
  num("threshold_pct", o.threshold_pct, 0, 1000);
  num("alpha", o.alpha, 1e-9, 1);
  num("min_abs_us", o.min_abs_us, 0, 1e9);
  num("min_share", o.min_share, 0, 1);
  if (j.contains("gate")) {
    // An empty list would turn the gate off (exit 0 whatever changed); the command line refuses `--gate ""` too.
    if (!j["gate"].is_array() || j["gate"].empty())
      throw Error("diff config '" + path + "': 'gate' must be a non-empty list of step, op, layer, kernel, appeared");
    o.gate.clear();
    for (const json& g : j["gate"]) {
      static const std::set<std::string> known = {"step", "op", "layer", "kernel", "appeared"};
      if (!g.is_string() || !known.count(g.get<std::string>()))
        throw Error("diff config '" + path + "': 'gate' entries must be step, op, layer, kernel or appeared, got " + json_excerpt(g, 60));
      o.gate.push_back(g.get<std::string>());
    }
  }
  return o;
}

DiffResult diff_reports(const json& base_j, const json& now_j, const DiffOptions& o, const std::string& base_name,
                        const std::string& now_name) {
  std::vector<RunView> base = read_runs(base_j, base_name), now = read_runs(now_j, now_name);
  DiffResult d;
  std::vector<std::pair<const RunView*, const RunView*>> pairs;
  if (base.size() == 1 && now.size() == 1) {
    pairs.push_back({&base[0], &now[0]});
    if (base[0].name != now[0].name) d.notes.push_back("compared run '" + now[0].name + "' with base run '" + base[0].name + "'");
  } else {
    for (const RunView& n : now) {
      auto it = std::find_if(base.begin(), base.end(), [&](const RunView& b) { return b.name == n.name; });
      if (it == base.end()) d.notes.push_back("run '" + n.name + "' has no base run");
      else pairs.push_back({&*it, &n});
    }
    // A base run the new report lacks (a KV path that no longer ran) is a step regression where the step is gated:
    // a gate must not pass because what regressed stopped being measured (bad-input review, session 16).
    for (const RunView& b : base)
      if (std::none_of(now.begin(), now.end(), [&](const RunView& n) { return n.name == b.name; })) {
        d.notes.push_back("base run '" + b.name + "' is missing from the new report");
        d.metrics.push_back(MetricDiff{b.name, "step", "run missing from the new report", b.step_median, 0, -100, -1,
                                       gated(o, "step"), "regression"});
      }
  }
  // A gate that compared nothing must not pass: no run of the new report has a base run.
  if (pairs.empty())
    throw Error(now_name + ": no run to compare with " + base_name + " (" +
                (now.empty() ? std::string("it has no runs") : base.empty() ? std::string("the base has no runs")
                                                                         : "no run name matches: new '" + now[0].name +
                                                                               "', base '" + base[0].name + "'") +
                ")");
  // A new side whose kernels were not recorded must not pass as every kernel "gone"; a host-clock run (CUPTI was
  // unavailable: README) has no kernel records by design and is compared by its steps and ops.
  for (auto [b, n] : pairs)
    if (!b->kernels.empty() && n->kernels.empty() && n->source != "host-clock")
      throw Error(now_name + ": run '" + n->name + "' has no kernel records while its base run has " +
                  std::to_string(b->kernels.size()) + " (was the trace recorded without CUDA activity?)");
  for (auto [b, n] : pairs) {
    MetricDiff s{n->name, "step", "step median", b->step_median, n->step_median, pct(b->step_median, n->step_median),
                 -1, gated(o, "step"), ""};
    const bool big = std::fabs(s.delta_pct) >= o.threshold_pct && std::fabs(s.new_us - s.base_us) >= o.min_abs_us;
    if (b->step_samples.size() >= 2 && n->step_samples.size() >= 2) {
      const bool slower = s.new_us > s.base_us;
      s.p_value = slower ? mann_whitney_greater_p(b->step_samples, n->step_samples)
                         : mann_whitney_greater_p(n->step_samples, b->step_samples);
      s.verdict = !big ? "unchanged" : s.p_value >= o.alpha ? "noise" : slower ? "regression" : "improvement";
    } else {
      s.verdict = effect_verdict(o, s.base_us, s.new_us);
      d.notes.push_back("run '" + n->name + "': fewer than 2 step samples on a side; step verdict by effect size only");
    }
    d.metrics.push_back(s);
    const double step = std::max(b->step_median, n->step_median);
    compare_maps(o, n->name, "op", step, b->ops, n->ops, true, true, true, d);
    std::map<std::string, double> bl, nl;
    for (auto& [l, v] : b->layers) bl["layer " + std::to_string(l)] = v;
    for (auto& [l, v] : n->layers) nl["layer " + std::to_string(l)] = v;
    compare_maps(o, n->name, "layer", step, bl, nl, false, true, true, d);
    compare_maps(o, n->name, "kernel", step, b->kernels, n->kernels, true, b->kernels_complete, n->kernels_complete, d);
    // Hotspots that appeared, vanished or changed (reported, never gated: the ops they name are).
    std::set<std::string> hs;
    for (auto& [k, v] : b->hotspots) hs.insert(k);
    for (auto& [k, v] : n->hotspots) hs.insert(k);
    for (const std::string& h : hs) {
      auto bi = b->hotspots.find(h), ni = n->hotspots.find(h);
      double bv = bi == b->hotspots.end() ? 0 : bi->second, nv = ni == n->hotspots.end() ? 0 : ni->second;
      std::string verdict = bi == b->hotspots.end() ? "new hotspot" : ni == n->hotspots.end() ? "hotspot gone"
                                                                                                : effect_verdict(o, bv, nv);
      d.metrics.push_back(MetricDiff{n->name, "hotspot", h, bv, nv, pct(bv, nv), -1, false, verdict});
    }
  }
  auto rank = [](const MetricDiff& m) {
    static const std::map<std::string, int> order = {{"step", 0}, {"appeared", 1}, {"vanished", 2}, {"hotspot", 3}, {"op", 4}, {"layer", 5}, {"kernel", 6}};
    return order.at(m.group);
  };
  std::stable_sort(d.metrics.begin(), d.metrics.end(), [&](const MetricDiff& a, const MetricDiff& b) { return rank(a) < rank(b); });
  for (const MetricDiff& m : d.metrics)
    if (m.gated && (m.verdict == "regression" || m.verdict == "appeared")) d.regression = true;
  return d;
}

std::string diff_to_markdown(const DiffResult& d, const DiffOptions& o) {
  std::ostringstream s;
  int regressions = 0;
  for (const MetricDiff& m : d.metrics) regressions += m.gated && (m.verdict == "regression" || m.verdict == "appeared");
  s << "# glm5prof diff\n\n";
  s << (d.regression ? "**REGRESSION**: " + std::to_string(regressions) + " gated metric(s) got worse.\n\n"
                     : std::string("**No regression** in the gated metrics.\n\n"));
  s << "Gate: " << o.threshold_pct << "% and " << o.min_abs_us << " us minimum change; step samples one-sided "
    << "Mann-Whitney p < " << o.alpha << "; gated groups:";
  for (const std::string& g : o.gate) s << " " << g;
  s << ".\n\n";
  for (const std::string& n : d.notes) s << "- note: " << n << "\n";
  if (!d.notes.empty()) s << "\n";
  s << "| run | group | metric | base [us] | new [us] | change | p | verdict |\n|---|---|---|---:|---:|---:|---:|---|\n";
  int shown = 0;
  for (const MetricDiff& m : d.metrics) {
    bool notable = m.group == "step" || m.verdict != "unchanged";
    if (!notable || ++shown > 60) continue;
    s << "| " << m.run << " | " << m.group << " | `" << m.metric << "` | " << fmt("%.1f", m.base_us) << " | "
      << fmt("%.1f", m.new_us) << " | " << fmt("%+.1f%%", m.delta_pct) << " | "
      << (m.p_value >= 0 ? fmt("%.3g", m.p_value) : std::string("-")) << " | "
      << (m.gated && (m.verdict == "regression" || m.verdict == "appeared") ? "**" + m.verdict + "**" : m.verdict) << " |\n";
  }
  return s.str();
}

json diff_to_json(const DiffResult& d, const DiffOptions& o) {
  json metrics = json::array();
  for (const MetricDiff& m : d.metrics)
    metrics.push_back({{"run", m.run}, {"group", m.group}, {"metric", m.metric}, {"base_us", m.base_us},
                       {"new_us", m.new_us}, {"delta_pct", m.delta_pct},
                       {"p_value", m.p_value >= 0 ? json(m.p_value) : json(nullptr)}, {"gated", m.gated},
                       {"verdict", m.verdict}});
  return {{"schema_version", "glm5prof.diff/1"},
          {"regression", d.regression},
          {"options", {{"threshold_pct", o.threshold_pct}, {"alpha", o.alpha}, {"min_abs_us", o.min_abs_us},
                       {"min_share", o.min_share}, {"gate", o.gate}}},
          {"notes", d.notes},
          {"metrics", metrics}};
}

std::string diff_to_junit(const DiffResult& d) {
  auto esc = [](const std::string& x) {
    std::string r;
    for (char c : x) {
      switch (c) {
        case '&': r += "&amp;"; break;
        case '<': r += "&lt;"; break;
        case '>': r += "&gt;"; break;
        case '"': r += "&quot;"; break;
        default: r += c;
      }
    }
    return r;
  };
  std::ostringstream cases;
  int n = 0, failures = 0;
  for (const MetricDiff& m : d.metrics) {
    if (!m.gated) continue;
    ++n;
    cases << "  <testcase classname=\"glm5prof." << esc(m.run) << "." << esc(m.group) << "\" name=\"" << esc(m.metric) << "\">\n";
    if (m.verdict == "regression" || m.verdict == "appeared") {
      ++failures;
      cases << "    <failure message=\"" << esc(m.verdict + ": " + fmt("%.1f", m.base_us) + " -> " + fmt("%.1f", m.new_us) +
                                             " us (" + fmt("%+.1f%%", m.delta_pct) + ")" +
                                             (m.p_value >= 0 ? ", p = " + fmt("%.3g", m.p_value) : std::string())) << "\"/>\n";
    }
    cases << "  </testcase>\n";
  }
  std::ostringstream s;
  s << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuite name=\"glm5prof diff\" tests=\"" << n << "\" failures=\""
    << failures << "\">\n" << cases.str() << "</testsuite>\n";
  return s.str();
}

}  // namespace glm5
