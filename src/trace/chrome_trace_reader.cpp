// read_chrome_trace: Chrome / Kineto trace JSON -> Timeline (see chrome_trace.h).
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "trace/chrome_trace.h"

namespace glm5 {

namespace {

using nlohmann::json;

int64_t as_int(const json& v, int64_t fallback = 0) {
  if (v.is_number_integer() || v.is_number_unsigned()) return v.get<int64_t>();
  if (v.is_number_float()) {
    const double d = v.get<double>();  // out of int64 range (or NaN): the cast would be undefined
    return std::isfinite(d) && std::fabs(d) < 9e18 ? static_cast<int64_t>(d) : fallback;
  }
  return fallback;  // strings such as "Spans"
}

template <class T>
T arg(const json& args, const char* key, T fallback) {
  auto it = args.find(key);
  if (it == args.end() || it->is_null()) return fallback;
  if constexpr (std::is_same_v<T, std::string>) return it->is_string() ? it->get<std::string>() : fallback;
  else if constexpr (std::is_floating_point_v<T>) return it->is_number() ? it->get<double>() : fallback;
  else return static_cast<T>(as_int(*it, static_cast<int64_t>(fallback)));
}

Dim3 dim3_arg(const json& args, const char* key) {
  auto it = args.find(key);
  if (it == args.end() || !it->is_array() || it->size() != 3) return {};
  return {static_cast<int>(as_int((*it)[0])), static_cast<int>(as_int((*it)[1])),
          static_cast<int>(as_int((*it)[2]))};
}

bool kind_of(const std::string& cat, ActivityKind& kind) {
  static const std::map<std::string, ActivityKind> m = {
      {"kernel", ActivityKind::kernel},        {"gpu_memcpy", ActivityKind::memcpy},
      {"gpu_memset", ActivityKind::memset},    {"cuda_runtime", ActivityKind::runtime},
      {"cuda_driver", ActivityKind::driver},   {"cpu_op", ActivityKind::cpu_op},
      {"overhead", ActivityKind::overhead}};
  auto it = m.find(cat);
  if (it == m.end()) return false;
  kind = it->second;
  return true;
}

struct Interval {
  int64_t start, end;
  size_t index;
};

// For each query time (per thread), the innermost interval containing it (intervals nest properly on
// a thread). Sweep over intervals sorted by (start asc, end desc) with a stack. Returns SIZE_MAX if none.
std::vector<size_t> innermost(std::vector<Interval> iv, const std::vector<int64_t>& queries) {
  std::sort(iv.begin(), iv.end(), [](const Interval& a, const Interval& b) {
    return a.start != b.start ? a.start < b.start : a.end > b.end;
  });
  std::vector<size_t> order(queries.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return queries[a] < queries[b]; });
  std::vector<size_t> out(queries.size(), SIZE_MAX);
  std::vector<const Interval*> stack;
  size_t next = 0;
  for (size_t q : order) {
    const int64_t ts = queries[q];
    while (next < iv.size() && iv[next].start <= ts) {
      while (!stack.empty() && stack.back()->end < iv[next].start) stack.pop_back();
      stack.push_back(&iv[next++]);
    }
    while (!stack.empty() && stack.back()->end < ts) stack.pop_back();
    if (!stack.empty()) out[q] = stack.back()->index;
  }
  return out;
}

// Typed access to the fields of traceEvents[index]; every failure is one line naming the trace, the
// event index and the field, e.g. "trace 'x.json': traceEvents[3].dur: expected a number".
class EventFields {
 public:
  EventFields(const json& e, const std::string& path, size_t index) : e_(e), path_(path), index_(index) {}

  [[noreturn]] void fail(const char* key, const std::string& what) const {
    throw Error("trace '" + path_ + "': traceEvents[" + std::to_string(index_) + "]." + key + ": " + what);
  }
  // A string field; "" when absent or null.
  std::string str(const char* key) const {
    auto it = e_.find(key);
    if (it == e_.end() || it->is_null()) return "";
    if (!it->is_string()) fail(key, "expected a string, got " + short_dump(*it));
    return it->get<std::string>();
  }
  // A time field in microseconds: a finite number in [0, max_us]. `*fallback` when absent (fallback ==
  // nullptr: the field is required).
  double micros(const char* key, double max_us, const double* fallback) const {
    auto it = e_.find(key);
    if (it == e_.end() || it->is_null()) {
      if (fallback) return *fallback;
      fail(key, "missing (expected a number of microseconds)");
    }
    if (!it->is_number()) fail(key, "expected a number of microseconds, got " + short_dump(*it));
    const double v = it->get<double>();
    if (!std::isfinite(v)) fail(key, "expected a finite number of microseconds, got " + short_dump(*it));
    if (v < 0) fail(key, "must not be negative, got " + short_dump(*it));
    if (v > max_us) fail(key, "is " + short_dump(*it) + " us, beyond the plausible limit of " + limit(max_us) + " us");
    return v;
  }

 private:
  static std::string short_dump(const json& v) {
    std::string s = v.dump();
    return s.size() > 40 ? s.substr(0, 37) + "..." : s;
  }
  static std::string limit(double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%g", v);
    return b;
  }
  const json& e_;
  const std::string& path_;
  size_t index_;
};

// nlohmann's message without its "[json.exception.parse_error.101] " prefix, on one line.
std::string json_error_text(const json::exception& e) {
  std::string m = e.what();
  if (m.rfind("[json.exception.", 0) == 0 && m.find("] ") != std::string::npos) m = m.substr(m.find("] ") + 2);
  for (char& c : m)
    if (c == '\n' || c == '\r') c = ' ';
  return m;
}

// Plausibility limits [us]. A duration over 1e15 us (31 years) is corrupt. Timestamps may be absolute
// (Kineto before baseTimeNanoseconds: microseconds since the epoch, ~1.7e15 today), so they get a
// wider bound that still keeps base + ts * 1e3 inside int64 nanoseconds (9.2e18).
constexpr double kMaxDurUs = 1e15;
constexpr double kMaxTsUs = 4e15;
constexpr int64_t kMaxBaseNs = 4'000'000'000'000'000'000;

}  // namespace

Timeline read_chrome_trace(const std::string& path) {
  if (path.size() > 3 && path.compare(path.size() - 3, 3, ".gz") == 0)
    throw Error("trace '" + path + "': .json.gz is not supported yet; gunzip it first");
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw Error("trace '" + path + "': is a directory, expected a trace .json file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("trace '" + path + "': cannot open the file");
  json doc;
  try {
    doc = json::parse(in);
  } catch (const json::exception& e) {
    throw Error("trace '" + path + "': not valid JSON (" + json_error_text(e) + ")");
  }
  if (!doc.is_object() || !doc.contains("traceEvents") || !doc["traceEvents"].is_array())
    throw Error("trace '" + path + "': expected a JSON object with a \"traceEvents\" array");

  Timeline t;
  t.source = "file";
  if (doc.contains("baseTimeNanoseconds") && !doc["baseTimeNanoseconds"].is_null()) {
    const json& b = doc["baseTimeNanoseconds"];
    if (!b.is_number() || !std::isfinite(b.get<double>()) || b.get<double>() < 0 || b.get<double>() > double(kMaxBaseNs))
      throw Error("trace '" + path + "': baseTimeNanoseconds: expected a number of nanoseconds in [0, 4e18], got " +
                  b.dump().substr(0, 40));
    t.base_time_ns = as_int(b);
  }
  const int64_t base = t.base_time_ns;

  if (doc.contains("deviceProperties") && doc["deviceProperties"].is_array()) {
    for (const json& d : doc["deviceProperties"]) {
      DeviceProperties p;
      p.id = arg<int>(d, "id", 0);
      p.name = arg<std::string>(d, "name", "");
      p.total_global_mem = arg<uint64_t>(d, "totalGlobalMem", 0);
      p.compute_major = arg<int>(d, "computeMajor", 0);
      p.compute_minor = arg<int>(d, "computeMinor", 0);
      p.num_sms = arg<int>(d, "numSms", 0);
      p.max_threads_per_block = arg<int>(d, "maxThreadsPerBlock", 0);
      p.max_threads_per_multiprocessor = arg<int>(d, "maxThreadsPerMultiprocessor", 0);
      p.warp_size = arg<int>(d, "warpSize", 32);
      p.shared_mem_per_block = arg<uint64_t>(d, "sharedMemPerBlock", 0);
      p.shared_mem_per_multiprocessor = arg<uint64_t>(d, "sharedMemPerMultiprocessor", 0);
      p.regs_per_block = arg<int>(d, "regsPerBlock", 0);
      p.regs_per_multiprocessor = arg<int>(d, "regsPerMultiprocessor", 0);
      t.devices.push_back(p);
    }
  }
  if (doc.contains("glm5prof") && doc["glm5prof"].is_object()) {
    const json& g = doc["glm5prof"];
    t.complete = g.contains("complete") && g["complete"].is_boolean() ? g["complete"].get<bool>() : true;
    t.records_dropped = arg<uint64_t>(g, "records_dropped", 0);
    t.kernels_launched = arg<uint64_t>(g, "kernels_launched", 0);
    t.kernels_recorded = arg<uint64_t>(g, "kernels_recorded", 0);
    if (g.contains("messages") && g["messages"].is_array())
      for (const json& m : g["messages"]) if (m.is_string()) t.messages.push_back(m.get<std::string>());
  }

  static const json kEmpty = json::object();
  const json& events = doc["traceEvents"];
  for (size_t index = 0; index < events.size(); ++index) {
    const json& e = events[index];
    if (!e.is_object()) continue;
    const EventFields f(e, path, index);
    if (f.str("ph") != "X") continue;
    const std::string cat = f.str("cat");
    const json& args = e.contains("args") && e["args"].is_object() ? e["args"] : kEmpty;
    const std::string name = f.str("name");
    const double zero = 0.0;
    const double ts_us = f.micros("ts", kMaxTsUs, nullptr), dur_us = f.micros("dur", kMaxDurUs, &zero);
    const int64_t start = base + std::llround(ts_us * 1e3), end = start + std::llround(dur_us * 1e3);
    if (cat == "user_annotation" || cat == "gpu_user_annotation") {
      Range r;
      r.name = name;
      r.start_ns = start;
      r.end_ns = end;
      r.kind = cat == "user_annotation" ? RangeKind::user_annotation : RangeKind::gpu_user_annotation;
      r.thread = as_int(e.value("tid", json(0)));
      if (r.kind == RangeKind::gpu_user_annotation) r.device = static_cast<int>(as_int(e.value("pid", json(0))));
      r.step = arg<int>(args, "step", -1);
      r.layer = arg<int>(args, "layer", -1);
      r.op = arg<std::string>(args, "op", "");
      t.ranges.push_back(r);
      continue;
    }
    ActivityKind kind;
    if (!kind_of(cat, kind)) continue;
    Activity a;
    a.kind = kind;
    a.name = name;
    a.start_ns = start;
    a.end_ns = end;
    const bool device_kind = kind == ActivityKind::kernel || kind == ActivityKind::memcpy || kind == ActivityKind::memset;
    const int64_t pid = as_int(e.value("pid", json(0))), tid = as_int(e.value("tid", json(0)));
    a.device = device_kind ? arg<int>(args, "device", static_cast<int>(pid)) : -1;
    a.stream = device_kind ? arg<int64_t>(args, "stream", tid) : -1;
    a.thread = device_kind ? 0 : tid;
    a.correlation_id = arg<uint64_t>(args, "correlation", 0);
    a.external_id = arg<uint64_t>(args, "External id", 0);
    a.grid = dim3_arg(args, "grid");
    a.block = dim3_arg(args, "block");
    a.step = arg<int>(args, "step", -1);
    a.layer = arg<int>(args, "layer", -1);
    a.op = arg<std::string>(args, "op", "");
    a.flops = arg<double>(args, "flops", 0.0);
    if (kind == ActivityKind::memcpy || kind == ActivityKind::memset) {
      a.bytes_copied = arg<uint64_t>(args, "bytes", 0);
      a.bytes = arg<double>(args, "op_bytes", 0.0);
    } else {
      a.bytes = arg<double>(args, "bytes", 0.0);
    }
    t.activities.push_back(std::move(a));
  }
  assign_range_nesting(t.ranges);

  // Attribution of device work that carries none of our args: through the launch call (correlation
  // id) to the innermost cpu_op (-> op) and the enclosing step range (-> step) on the launching thread.
  std::unordered_map<uint64_t, const Activity*> launch_of;
  for (const Activity& a : t.activities)
    if ((a.kind == ActivityKind::runtime || a.kind == ActivityKind::driver) && a.correlation_id)
      launch_of[a.correlation_id] = &a;
  std::map<int64_t, std::vector<Interval>> ops_by_thread, steps_by_thread;
  for (size_t i = 0; i < t.activities.size(); ++i)
    if (t.activities[i].kind == ActivityKind::cpu_op)
      ops_by_thread[t.activities[i].thread].push_back({t.activities[i].start_ns, t.activities[i].end_ns, i});
  for (size_t i = 0; i < t.ranges.size(); ++i)
    if (t.ranges[i].kind == RangeKind::user_annotation && parse_step_name(t.ranges[i].name) >= 0)
      steps_by_thread[t.ranges[i].thread].push_back({t.ranges[i].start_ns, t.ranges[i].end_ns, i});
  std::map<int64_t, std::vector<size_t>> pending;  // launching thread -> device activity indices
  for (size_t i = 0; i < t.activities.size(); ++i) {
    const Activity& a = t.activities[i];
    if (a.device < 0 || !a.op.empty() || a.step >= 0) continue;
    auto it = launch_of.find(a.correlation_id);
    if (it != launch_of.end()) pending[it->second->thread].push_back(i);
  }
  for (const auto& [thread, indices] : pending) {
    std::vector<int64_t> when;
    for (size_t i : indices) when.push_back(launch_of[t.activities[i].correlation_id]->start_ns);
    const std::vector<size_t> op = innermost(ops_by_thread[thread], when);
    const std::vector<size_t> step = innermost(steps_by_thread[thread], when);
    for (size_t k = 0; k < indices.size(); ++k) {
      Activity& a = t.activities[indices[k]];
      if (op[k] != SIZE_MAX) {
        a.op = t.activities[op[k]].name;
        if (!a.external_id) a.external_id = t.activities[op[k]].external_id;
      }
      if (step[k] != SIZE_MAX) a.step = parse_step_name(t.ranges[step[k]].name);
    }
  }
  // Op table from our own args.
  for (const Activity& a : t.activities)
    if (a.device >= 0 || a.kind == ActivityKind::kernel)
      if (a.external_id && (a.bytes || a.flops || a.layer >= 0) && !a.op.empty())
        t.ops.try_emplace(a.external_id, OpDesc{a.step, a.layer, a.op, a.bytes, a.flops});
  t.kernels_recorded = std::max<uint64_t>(t.kernels_recorded, std::count_if(
      t.activities.begin(), t.activities.end(), [](const Activity& a) { return a.kind == ActivityKind::kernel; }));
  sort_timeline(t);
  return t;
}

}  // namespace glm5
