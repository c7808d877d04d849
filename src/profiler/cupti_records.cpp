#include "profiler/cupti_records.h"

#include <cxxabi.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <unordered_map>

namespace glm5 {

std::string demangle(const std::string& name) {
  if (name.size() < 2 || name[0] != '_' || name[1] != 'Z') return name;
  int status = 0;
  char* out = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status);
  std::string result = (status == 0 && out) ? std::string(out) : name;
  std::free(out);
  return result;
}

namespace {

// Innermost user_annotation range open on `thread` at time `ts` (ranges sorted by start; nesting
// assigned). Returns nullptr if none. Linear in the number of ranges on the thread: records are few.
const Range* innermost_range(const std::vector<Range>& ranges, int64_t thread, int64_t ts) {
  const Range* best = nullptr;
  for (const Range& r : ranges) {
    if (r.thread != thread || r.kind != RangeKind::user_annotation) continue;
    if (r.start_ns <= ts && ts <= r.end_ns && (!best || r.depth > best->depth)) best = &r;
  }
  return best;
}

void attribute(Activity& a, uint64_t external_id, const std::map<uint64_t, OpDesc>& ops) {
  a.external_id = external_id;
  auto it = ops.find(external_id);
  if (it == ops.end()) return;
  a.step = it->second.step;
  a.layer = it->second.layer;
  a.op = it->second.op;
  a.bytes = it->second.bytes;
  a.flops = it->second.flops;
}

}  // namespace

Timeline build_timeline_from_records(const ActivityRecords& records,
                                     const std::map<uint64_t, OpDesc>& ops) {
  Timeline t;
  t.source = "cupti";
  t.ops = ops;
  t.records_dropped = records.dropped;
  for (const std::string& e : records.errors) t.messages.push_back("CUPTI: " + e);
  if (records.dropped > 0)
    t.messages.push_back(std::to_string(records.dropped) +
                         " CUPTI activity records dropped (buffers full): totals are lower bounds");
  t.complete = records.errors.empty() && records.dropped == 0;

  // NVTX markers -> user_annotation ranges (start/end pairs by id).
  int64_t last_ts = INT64_MIN;
  for (const MarkerRecord& m : records.markers) last_ts = std::max(last_ts, m.timestamp_ns);
  std::unordered_map<uint32_t, const MarkerRecord*> open;
  for (const MarkerRecord& m : records.markers) {
    if (m.is_start) {
      open[m.id] = &m;
      continue;
    }
    auto it = open.find(m.id);
    if (it == open.end()) continue;  // an end without start: the push predates tracing
    Range r;
    r.name = it->second->name;
    r.start_ns = it->second->timestamp_ns;
    r.end_ns = m.timestamp_ns;
    r.thread = it->second->thread;
    t.ranges.push_back(r);
    open.erase(it);
  }
  if (!open.empty()) {
    t.messages.push_back(std::to_string(open.size()) + " NVTX ranges still open at the end of tracing");
    for (const auto& [id, m] : open) {
      Range r;
      r.name = m->name;
      r.start_ns = m->timestamp_ns;
      r.end_ns = last_ts;
      r.thread = m->thread;
      t.ranges.push_back(r);
    }
  }
  assign_range_nesting(t.ranges);
  sort_timeline(t);

  std::unordered_map<uint64_t, uint64_t> external_of;  // correlation id -> external id
  for (const ExternalCorrelationRecord& e : records.external) external_of[e.correlation_id] = e.external_id;
  std::unordered_map<uint64_t, const ApiRecord*> api_of;  // correlation id -> API call
  for (const ApiRecord& r : records.api_calls) api_of[r.correlation_id] = &r;

  // Attribution of a device activity: external id first; else the innermost NVTX range open on the
  // launching thread when the launch call ran (DESIGN.md, Attribution).
  auto attribute_device = [&](Activity& a) {
    auto ext = external_of.find(a.correlation_id);
    if (ext != external_of.end()) {
      attribute(a, ext->second, ops);
      if (!a.op.empty()) return;
    }
    auto api = api_of.find(a.correlation_id);
    if (api == api_of.end()) return;
    if (const Range* r = innermost_range(t.ranges, api->second->thread, api->second->start_ns)) {
      a.step = r->step;
      a.layer = r->layer;
      a.op = r->op;
    }
  };

  // Kernel launches: runtime launch calls, plus driver launch calls not made from inside a runtime
  // launch on the same thread (cudaLaunchKernel calls cuLaunchKernel; count it once).
  std::map<int64_t, std::vector<std::pair<int64_t, int64_t>>> runtime_launches;
  for (const ApiRecord& r : records.api_calls)
    if (r.is_kernel_launch && !r.is_driver) runtime_launches[r.thread].push_back({r.start_ns, r.end_ns});
  for (auto& [thread, v] : runtime_launches) std::sort(v.begin(), v.end());
  auto nested_in_runtime_launch = [&](const ApiRecord& r) {
    auto it = runtime_launches.find(r.thread);
    if (it == runtime_launches.end()) return false;
    auto after = std::upper_bound(it->second.begin(), it->second.end(), std::make_pair(r.start_ns, INT64_MAX));
    return after != it->second.begin() && std::prev(after)->second >= r.end_ns;
  };
  for (const ApiRecord& r : records.api_calls) {
    Activity a;
    a.kind = r.is_driver ? ActivityKind::driver : ActivityKind::runtime;
    a.name = r.name;
    a.start_ns = r.start_ns;
    a.end_ns = r.end_ns;
    a.thread = r.thread;
    a.correlation_id = r.correlation_id;
    auto ext = external_of.find(r.correlation_id);
    if (ext != external_of.end()) attribute(a, ext->second, ops);
    if (r.is_kernel_launch && (!r.is_driver || !nested_in_runtime_launch(r))) ++t.kernels_launched;
    t.activities.push_back(std::move(a));
  }
  for (const KernelRecord& k : records.kernels) {
    Activity a;
    a.kind = ActivityKind::kernel;
    a.name = demangle(k.name);
    a.start_ns = k.start_ns;
    a.end_ns = k.end_ns;
    a.device = k.device;
    a.stream = k.stream;
    a.correlation_id = k.correlation_id;
    a.grid = k.grid;
    a.block = k.block;
    attribute_device(a);
    ++t.kernels_recorded;
    t.activities.push_back(std::move(a));
  }
  for (const MemcpyRecord& c : records.copies) {
    Activity a;
    a.kind = c.is_memset ? ActivityKind::memset : ActivityKind::memcpy;
    a.name = c.name;
    a.start_ns = c.start_ns;
    a.end_ns = c.end_ns;
    a.device = c.device;
    a.stream = c.stream;
    a.correlation_id = c.correlation_id;
    a.bytes_copied = c.bytes;
    attribute_device(a);
    t.activities.push_back(std::move(a));
  }

  // One gpu_user_annotation span per op instance (external id), covering its kernels and copies.
  std::map<uint64_t, Range> gpu_spans;
  for (const Activity& a : t.activities) {
    if (a.device < 0 || a.external_id == 0 || a.op.empty()) continue;
    auto [it, fresh] = gpu_spans.try_emplace(a.external_id);
    Range& r = it->second;
    if (fresh) {
      r.name = a.op;
      r.start_ns = a.start_ns;
      r.end_ns = a.end_ns;
      r.thread = a.stream;
      r.kind = RangeKind::gpu_user_annotation;
      r.device = a.device;
      r.step = a.step;
      r.layer = a.layer;
      r.op = a.op;
    }
    r.start_ns = std::min(r.start_ns, a.start_ns);
    r.end_ns = std::max(r.end_ns, a.end_ns);
  }
  for (auto& [id, r] : gpu_spans) t.ranges.push_back(std::move(r));

  if (t.kernels_launched > t.kernels_recorded)
    t.messages.push_back(std::to_string(t.kernels_launched - t.kernels_recorded) +
                         " kernel launches have no kernel record");
  sort_timeline(t);
  t.base_time_ns = earliest_time_ns(t);
  return t;
}

}  // namespace glm5
