#include "profiler/cupti_records.h"

#include <cxxabi.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <set>
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
  a.side_stream = it->second.stream != nullptr;
}

struct PendingGraphWork {
  size_t index = 0;        // into Timeline.activities
  uint64_t launch = 0;     // the graph launch's external id
  uint64_t node_id = 0;    // CUPTI graph node id of the record (0: none)
  bool kernel = true;
};

// See build_timeline_from_records (cupti_records.h): node id first, launch order as the fallback.
void attribute_graph_replays(Timeline& t, const std::vector<PendingGraphWork>& pending, const GraphAttribution& graphs) {
  if (pending.empty()) return;
  struct GraphIndex {
    std::unordered_map<uint64_t, int> op_of_node;  // captured node id -> op index
    std::unordered_map<uint64_t, bool> kernel_node;  // captured node id -> a kernel node
    std::vector<int> kernel_order;                 // op index of each captured kernel node, in order
  };
  std::vector<GraphIndex> index(graphs.graphs.size());
  for (size_t g = 0; g < graphs.graphs.size(); ++g)
    for (size_t i = 0; i < graphs.graphs[g].ops.size(); ++i)
      for (const CapturedNode& n : graphs.graphs[g].ops[i].nodes) {
        if (n.id) {
          index[g].op_of_node[n.id] = int(i);
          index[g].kernel_node[n.id] = n.kernel;
        }
        if (n.kernel) index[g].kernel_order.push_back(int(i));
      }
  uint64_t next_id = 1;
  if (!t.ops.empty()) next_id = std::max(next_id, t.ops.rbegin()->first + 1);
  if (!graphs.launches.empty()) next_id = std::max(next_id, graphs.launches.rbegin()->first + 1);
  if (!graphs.captures.empty()) next_id = std::max(next_id, *graphs.captures.rbegin() + 1);
  std::map<std::pair<uint64_t, int>, uint64_t> op_instance;  // (launch, op index) -> external id
  // rehome: by node id only. The by-order fallback matches kernels sorted by start time to capture order, which
  // can swap two kernels of parallel branches; moving a swapped kernel to the other branch's stream would also
  // break the analysis' per-stream PDL clipping, so there the record keeps its own stream.
  auto assign = [&](Activity& a, uint64_t launch_ext, const GraphLaunch& L, int op_index, bool rehome = true) {
    const CapturedOp& co = graphs.graphs[L.graph].ops[op_index];
    a.step = L.step;
    if (rehome && co.stream_id) a.stream = co.stream_id;  // the op's capture stream, not the replay's internal one
    if (co.op.op.empty()) return;  // captured outside any op
    auto [it, fresh] = op_instance.try_emplace({launch_ext, op_index}, next_id);
    if (fresh) {
      OpDesc d = co.op;
      d.step = L.step;
      t.ops[next_id++] = d;
    }
    attribute(a, it->second, t.ops);
  };
  std::map<uint64_t, std::vector<const PendingGraphWork*>> by_launch;
  for (const PendingGraphWork& p : pending) by_launch[p.launch].push_back(&p);
  size_t by_node = 0, by_order = 0, unattributed = 0;
  for (const auto& [launch_ext, work] : by_launch) {
    const GraphLaunch& L = graphs.launches.at(launch_ext);
    if (L.graph < 0 || L.graph >= int(graphs.graphs.size())) {
      unattributed += work.size();
      continue;
    }
    const CapturedGraph& g = graphs.graphs[L.graph];
    const GraphIndex& gi = index[L.graph];
    bool all_kernels_known = true;
    std::vector<std::pair<const PendingGraphWork*, int>> resolved;
    for (const PendingGraphWork* p : work) {
      uint64_t id = p->node_id;
      auto c = g.clone_of.find(id);
      if (c != g.clone_of.end()) id = c->second;
      auto it = id ? gi.op_of_node.find(id) : gi.op_of_node.end();
      if (it == gi.op_of_node.end()) {
        if (p->kernel) all_kernels_known = false;
        resolved.push_back({p, -1});
      } else {
        resolved.push_back({p, it->second});
        // A kernel record from a node captured as a memset / memcpy (CUPTI may report such nodes as
        // kernels): its launch was not counted among the graph's kernel nodes.
        if (p->kernel && !gi.kernel_node.at(id)) ++t.kernels_launched;
      }
    }
    if (all_kernels_known) {
      for (auto& [p, op] : resolved) {
        if (op >= 0) {
          assign(t.activities[p->index], launch_ext, L, op);
          ++by_node;
        } else {
          ++unattributed;
        }
      }
      continue;
    }
    std::vector<const PendingGraphWork*> kernels;
    for (const PendingGraphWork* p : work)
      if (p->kernel) kernels.push_back(p);
    std::stable_sort(kernels.begin(), kernels.end(), [&](const PendingGraphWork* a, const PendingGraphWork* b) {
      return t.activities[a->index].start_ns < t.activities[b->index].start_ns;
    });
    if (kernels.size() == gi.kernel_order.size()) {
      for (size_t i = 0; i < kernels.size(); ++i)
        assign(t.activities[kernels[i]->index], launch_ext, L, gi.kernel_order[i], false);
      by_order += kernels.size();
      for (auto& [p, op] : resolved)
        if (!p->kernel) {
          if (op >= 0) {
            assign(t.activities[p->index], launch_ext, L, op);
            ++by_node;
          } else {
            ++unattributed;
          }
        }
    } else {
      for (const PendingGraphWork* p : work) t.activities[p->index].step = L.step;
      unattributed += work.size();
      t.messages.push_back("graph launch (external id " + std::to_string(launch_ext) + "): " +
                           std::to_string(kernels.size()) + " kernel records but " +
                           std::to_string(gi.kernel_order.size()) +
                           " captured kernel nodes and unknown node ids: its kernels keep only their step");
    }
  }
  t.graph_kernels += by_node + by_order + unattributed;
  t.messages.push_back("CUDA graph replays: " + std::to_string(by_node) + " records attributed by graph node id, " +
                       std::to_string(by_order) + " by launch order, " + std::to_string(unattributed) +
                       " unattributed");
  for (const CapturedGraph& g : graphs.graphs)
    for (const std::string& m : g.messages) t.messages.push_back("graph capture: " + m);
}

// Graph-level records -> "graph.step.N" spans (see build_timeline_from_records in cupti_records.h).
// t.ranges must already hold the NVTX ranges (with step / depth assigned).
void add_graph_level_spans(Timeline& t, const ActivityRecords& records, const GraphAttribution& graphs,
                           const std::unordered_map<uint64_t, uint64_t>& external_of,
                           const std::unordered_map<uint64_t, const ApiRecord*>& api_of) {
  if (records.graph_traces.empty()) return;
  // "step.N" host ranges by start, for the last fallback.
  std::vector<std::pair<int64_t, int>> step_starts;
  for (const Range& r : t.ranges)
    if (r.kind == RangeKind::user_annotation && parse_step_name(r.name) >= 0)
      step_starts.push_back({r.start_ns, parse_step_name(r.name)});
  std::sort(step_starts.begin(), step_starts.end());
  size_t by_launch = 0, by_range = 0, by_time = 0, untimed = 0;
  std::vector<Range> spans;
  for (const GraphTraceRecord& g : records.graph_traces) {
    if (g.start_ns == 0 && g.end_ns == 0) {
      ++untimed;
      continue;
    }
    int step = -1;
    bool known = false;
    auto ext = external_of.find(g.correlation_id);
    if (ext != external_of.end()) {
      auto launch = graphs.launches.find(ext->second);
      if (launch != graphs.launches.end()) {
        step = launch->second.step;
        known = true;
        ++by_launch;
      }
    }
    if (!known) {
      auto api = api_of.find(g.correlation_id);
      if (api != api_of.end())
        if (const Range* r = innermost_range(t.ranges, api->second->thread, api->second->start_ns); r && r->step >= 0) {
          step = r->step;
          known = true;
          ++by_range;
        }
    }
    if (!known) {
      auto after = std::upper_bound(step_starts.begin(), step_starts.end(), std::make_pair(g.start_ns, INT_MAX));
      if (after != step_starts.begin()) {
        step = std::prev(after)->second;
        ++by_time;
      }
    }
    Range r;
    r.name = step >= 0 ? "graph.step." + std::to_string(step) : std::string("graph.launch");
    r.start_ns = g.start_ns;
    r.end_ns = std::max(g.end_ns, g.start_ns);
    r.thread = g.stream;
    r.kind = RangeKind::gpu_user_annotation;
    r.device = std::max(g.device, 0);
    r.step = step;
    spans.push_back(std::move(r));
  }
  t.messages.push_back("CUDA graph-level records: " + std::to_string(records.graph_traces.size()) +
                       " graph launches (no per-kernel records), step from the launch " + std::to_string(by_launch) +
                       ", from the NVTX step range " + std::to_string(by_range) + ", by time " +
                       std::to_string(by_time) + ", without timestamps " + std::to_string(untimed));
  t.ranges.insert(t.ranges.end(), std::make_move_iterator(spans.begin()), std::make_move_iterator(spans.end()));
}

}  // namespace

std::map<int, double> graph_step_us(const Timeline& t, int device) {
  std::map<int, double> out;
  for (const Range& r : t.ranges)
    if (r.kind == RangeKind::gpu_user_annotation && r.step >= 0 && r.name.rfind("graph.step.", 0) == 0 &&
        (device < 0 || r.device == device))
      out[r.step] += double(r.end_ns - r.start_ns) / 1e3;
  return out;
}

Timeline build_timeline_from_records(const ActivityRecords& records,
                                     const std::map<uint64_t, OpDesc>& ops,
                                     const GraphAttribution& graphs) {
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

  // Device work replayed from a CUDA graph: attributed after all activities are in (below).
  std::vector<PendingGraphWork> pending;
  auto defer_to_graph = [&](const Activity& a, uint64_t node_id, bool kernel) {
    auto ext = external_of.find(a.correlation_id);
    if (ext == external_of.end() || !graphs.launches.count(ext->second)) return false;
    pending.push_back({t.activities.size(), ext->second, node_id, kernel});
    return true;
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
  std::set<uint64_t> graph_launches_counted;  // external ids of graph launches already counted
  size_t eager_launches_untraced = 0;          // launch calls made while kernel activity was off
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
    bool capturing = ext != external_of.end() && graphs.captures.count(ext->second);
    for (const auto& [w0, w1] : graphs.capture_windows) capturing |= r.start_ns >= w0 && r.end_ns <= w1;
    bool kernels_off = false;  // kernel activity disabled (graph-level tracing): no record will follow
    for (const auto& [w0, w1] : graphs.graph_level_windows) kernels_off |= r.start_ns >= w0 && r.end_ns <= w1;
    if (r.is_kernel_launch && !capturing && (!r.is_driver || !nested_in_runtime_launch(r))) {
      if (kernels_off) ++eager_launches_untraced;
      else ++t.kernels_launched;
    }
    if (ext != external_of.end()) {
      auto launch = graphs.launches.find(ext->second);
      if (launch != graphs.launches.end()) {
        a.step = launch->second.step;
        const int g = launch->second.graph;
        if (launch->second.nodes_traced && g >= 0 && g < int(graphs.graphs.size()) &&
            graph_launches_counted.insert(ext->second).second)
          t.kernels_launched += graphs.graphs[g].kernel_nodes();
      }
    }
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
    ++t.kernels_recorded;
    if (!defer_to_graph(a, k.graph_node_id, true)) attribute_device(a);
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
    if (!defer_to_graph(a, c.graph_node_id, false)) attribute_device(a);
    t.activities.push_back(std::move(a));
  }
  attribute_graph_replays(t, pending, graphs);
  if (eager_launches_untraced)
    t.messages.push_back(std::to_string(eager_launches_untraced) +
                         " kernel launch calls made during graph-level tracing (kernel activity off): not counted, no records");
  add_graph_level_spans(t, records, graphs, external_of, api_of);

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
