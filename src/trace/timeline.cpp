#include "trace/timeline.h"

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstring>
#include <map>

#include "common/error.h"

namespace glm5 {

namespace {
constexpr const char* kKindNames[] = {"kernel", "memcpy", "memset", "runtime",
                                      "driver", "marker", "cpu_op", "overhead"};

// "prefixN" -> N for a non-negative decimal N, else -1.
int parse_suffix(const std::string& name, const std::string& prefix) {
  if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) return -1;
  long v = 0;
  for (size_t i = prefix.size(); i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return -1;
    v = v * 10 + (name[i] - '0');
    if (v > INT_MAX) return -1;
  }
  return static_cast<int>(v);
}
}  // namespace

const char* to_string(ActivityKind kind) { return kKindNames[static_cast<int>(kind)]; }

ActivityKind parse_activity_kind(const std::string& name) {
  for (int i = 0; i < 8; ++i)
    if (name == kKindNames[i]) return static_cast<ActivityKind>(i);
  throw Error("activity kind '" + name +
              "': expected kernel|memcpy|memset|runtime|driver|marker|cpu_op|overhead");
}

const char* to_string(RangeKind kind) {
  return kind == RangeKind::user_annotation ? "user_annotation" : "gpu_user_annotation";
}

int64_t total_kernel_time_ns(const Timeline& t) {
  int64_t sum = 0;
  for (const Activity& a : t.activities)
    if (a.kind == ActivityKind::kernel) sum += a.duration_ns();
  return sum;
}

uint64_t count_kernels(const Timeline& t) {
  return uint64_t(std::count_if(t.activities.begin(), t.activities.end(),
                                [](const Activity& a) { return a.kind == ActivityKind::kernel; }));
}

int64_t kernel_span_ns(const Timeline& t) {
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  for (const Activity& a : t.activities) {
    if (a.kind != ActivityKind::kernel) continue;
    lo = std::min(lo, a.start_ns);
    hi = std::max(hi, a.end_ns);
  }
  return lo == INT64_MAX ? 0 : hi - lo;
}

void sort_timeline(Timeline& t) {
  std::stable_sort(t.activities.begin(), t.activities.end(), [](const Activity& a, const Activity& b) {
    return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.end_ns < b.end_ns;
  });
  std::stable_sort(t.ranges.begin(), t.ranges.end(), [](const Range& a, const Range& b) {
    return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.depth < b.depth;
  });
}

int64_t earliest_time_ns(const Timeline& t) {
  int64_t lo = INT64_MAX;
  for (const Activity& a : t.activities) lo = std::min(lo, a.start_ns);
  for (const Range& r : t.ranges) lo = std::min(lo, r.start_ns);
  return lo == INT64_MAX ? 0 : lo;
}

int parse_step_name(const std::string& name) {
  int n = parse_suffix(name, "step.");
  return n >= 0 ? n : parse_suffix(name, "ProfilerStep#");
}

namespace {
bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
// The decimal number at name[i..) that ends at a non-digit or the end; -1 if none or > INT_MAX.
int number_at(const std::string& name, size_t i, size_t* end) {
  long v = 0;
  size_t j = i;
  for (; j < name.size() && name[j] >= '0' && name[j] <= '9'; ++j) {
    v = v * 10 + (name[j] - '0');
    if (v > INT_MAX) return -1;
  }
  *end = j;
  return j == i ? -1 : static_cast<int>(v);
}
}  // namespace

int parse_layer_name(const std::string& name) {
  const int own = parse_suffix(name, "layer.");  // ours (NVTX / record_function "layer.N")
  if (own >= 0) return own;
  // A module path: "model.layers.12", "model.layers.12.self_attn" (HF / vLLM / SGLang module names in
  // record_function ranges). "layers" must start the name or follow a '.', and the number must end it or be
  // followed by a '.'.
  for (size_t at = name.find("layers."); at != std::string::npos; at = name.find("layers.", at + 1)) {
    if (at > 0 && name[at - 1] != '.') continue;
    size_t end = 0;
    const int n = number_at(name, at + 7, &end);
    if (n >= 0 && (end == name.size() || name[end] == '.')) return n;
  }
  // torch.profiler(with_modules=True): "nn.Module: DeepseekV2DecoderLayer_3" (the class name, an instance
  // number). Only classes named ...Layer or ...Block count: they are the model's repeated layers.
  const std::string module = "nn.Module: ";
  if (name.compare(0, module.size(), module) == 0) {
    const size_t us = name.rfind('_');
    if (us == std::string::npos || us <= module.size()) return -1;
    const std::string cls = name.substr(module.size(), us - module.size());
    const auto ends_with = [&](const char* tail) {
      const size_t n = std::strlen(tail);
      return cls.size() > n && cls.compare(cls.size() - n, n, tail) == 0;
    };
    if (!ends_with("Layer") && !ends_with("Block")) return -1;
    for (char c : cls) if (!is_name_char(c)) return -1;
    size_t end = 0;
    const int n = number_at(name, us + 1, &end);
    return end == name.size() ? n : -1;
  }
  return -1;
}

RunWindow run_window(const Timeline& t, const std::string& name) {
  const int64_t first = earliest_time_ns(t);
  RunWindow w{name, first, first};
  for (const Activity& a : t.activities) w.end_ns = std::max(w.end_ns, a.end_ns);
  for (const Range& r : t.ranges) w.end_ns = std::max(w.end_ns, r.end_ns);
  return w;
}

Timeline timeline_window(const Timeline& t, const RunWindow& w) {
  Timeline out;
  out.source = t.source;
  out.devices = t.devices;
  out.base_time_ns = t.base_time_ns;
  out.records_dropped = t.records_dropped;
  out.graph_kernels = t.graph_kernels;
  out.complete = t.complete;
  out.messages = t.messages;
  out.copy_gbps = t.copy_gbps;
  out.bf16_tflops = t.bf16_tflops;
  auto inside = [&](int64_t start) { return start >= w.start_ns && start <= w.end_ns; };
  for (const Activity& a : t.activities)
    if (inside(a.start_ns)) out.activities.push_back(a);
  for (const Range& r : t.ranges)
    if (inside(r.start_ns)) out.ranges.push_back(r);
  for (const Activity& a : out.activities)
    if (a.external_id) {
      auto it = t.ops.find(a.external_id);
      if (it != t.ops.end()) out.ops.insert(*it);
    }
  const uint64_t kernels = count_kernels(out);
  const bool all_recorded = t.kernels_launched == t.kernels_recorded;
  out.kernels_recorded = kernels;
  out.kernels_launched = all_recorded ? kernels : t.kernels_launched;
  return out;
}

void assign_range_nesting(std::vector<Range>& ranges) {
  // Per thread and kind, walk ranges by (start asc, end desc) keeping a stack of open ranges.
  std::vector<size_t> order(ranges.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const Range& x = ranges[a];
    const Range& y = ranges[b];
    if (x.kind != y.kind) return x.kind < y.kind;
    if (x.thread != y.thread) return x.thread < y.thread;
    if (x.start_ns != y.start_ns) return x.start_ns < y.start_ns;
    return x.end_ns > y.end_ns;
  });
  std::vector<size_t> stack;
  const Range* prev = nullptr;
  for (size_t idx : order) {
    Range& r = ranges[idx];
    if (prev && (prev->thread != r.thread || prev->kind != r.kind)) stack.clear();
    while (!stack.empty() && ranges[stack.back()].end_ns <= r.start_ns) stack.pop_back();
    r.depth = static_cast<int>(stack.size());
    int step = -1, layer = -1;
    if (!stack.empty()) {
      step = ranges[stack.back()].step;
      layer = ranges[stack.back()].layer;
    }
    const int own_step = parse_step_name(r.name);
    const int own_layer = parse_layer_name(r.name);
    if (own_step >= 0) step = own_step;
    if (own_layer >= 0) layer = own_layer;
    // Ranges from a file may already carry attribution (our args): keep it where set.
    if (r.step < 0) r.step = step;
    if (r.layer < 0) r.layer = layer;
    if (r.op.empty() && own_step < 0 && own_layer < 0 && r.kind == RangeKind::user_annotation)
      r.op = r.name;
    stack.push_back(idx);
    prev = &r;
  }
}

}  // namespace glm5
