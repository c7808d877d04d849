// write_chrome_trace: Timeline -> Kineto-flavoured Chrome trace JSON (see chrome_trace.h).
#include <unistd.h>

#include <map>
#include <set>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "trace/atomic_file.h"
#include "trace/chrome_trace.h"

namespace glm5 {

namespace {

using nlohmann::json;

const char* category(ActivityKind k) {
  switch (k) {
    case ActivityKind::kernel: return "kernel";
    case ActivityKind::memcpy: return "gpu_memcpy";
    case ActivityKind::memset: return "gpu_memset";
    case ActivityKind::runtime: return "cuda_runtime";
    case ActivityKind::driver: return "cuda_driver";
    case ActivityKind::cpu_op: return "cpu_op";
    case ActivityKind::overhead: return "overhead";
    case ActivityKind::marker: return nullptr;  // markers are Ranges already
  }
  return nullptr;
}

json device_properties(const DeviceProperties& d) {
  return {{"id", d.id},
          {"name", d.name},
          {"totalGlobalMem", d.total_global_mem},
          {"computeMajor", d.compute_major},
          {"computeMinor", d.compute_minor},
          {"maxThreadsPerBlock", d.max_threads_per_block},
          {"maxThreadsPerMultiprocessor", d.max_threads_per_multiprocessor},
          {"regsPerBlock", d.regs_per_block},
          {"regsPerMultiprocessor", d.regs_per_multiprocessor},
          {"warpSize", d.warp_size},
          {"sharedMemPerBlock", d.shared_mem_per_block},
          {"sharedMemPerMultiprocessor", d.shared_mem_per_multiprocessor},
          {"numSms", d.num_sms}};
}

void add_attribution(json& args, int step, int layer, const std::string& op) {
  if (op.empty() && step < 0 && layer < 0) return;
  args["step"] = step;
  args["layer"] = layer;
  args["op"] = op;
}

}  // namespace

void write_chrome_trace(const Timeline& t, const std::string& path, int rank, int world_size, AtomicOutputs* outputs) {
  const int64_t base = t.base_time_ns;
  const int64_t host_pid = static_cast<int64_t>(getpid());
  auto us = [base](int64_t ns) { return static_cast<double>(ns - base) / 1e3; };
  auto dur = [](int64_t a, int64_t b) { return static_cast<double>(b - a) / 1e3; };

  json events = json::array();
  std::set<int64_t> device_pids;
  std::set<std::pair<int64_t, int64_t>> streams, threads;  // (pid, tid)
  std::unordered_map<uint64_t, const Activity*> launch_of;  // correlation id -> runtime/driver call

  for (const Activity& a : t.activities)
    if ((a.kind == ActivityKind::runtime || a.kind == ActivityKind::driver) && a.correlation_id)
      launch_of[a.correlation_id] = &a;

  for (const Activity& a : t.activities) {
    const char* cat = category(a.kind);
    if (!cat) continue;
    const bool on_device = a.device >= 0 && (a.kind == ActivityKind::kernel ||
                                             a.kind == ActivityKind::memcpy ||
                                             a.kind == ActivityKind::memset);
    const int64_t pid = on_device ? a.device : host_pid;
    const int64_t tid = on_device ? a.stream : a.thread;
    (on_device ? streams : threads).insert({pid, tid});
    if (on_device) device_pids.insert(pid);
    json args = json::object();
    if (a.correlation_id) args["correlation"] = a.correlation_id;
    if (a.external_id) args["External id"] = a.external_id;
    if (a.kind == ActivityKind::kernel || a.kind == ActivityKind::memcpy || a.kind == ActivityKind::memset) {
      args["device"] = a.device;
      args["stream"] = a.stream;
    }
    if (a.kind == ActivityKind::kernel) {
      args["grid"] = {a.grid.x, a.grid.y, a.grid.z};
      args["block"] = {a.block.x, a.block.y, a.block.z};
    }
    add_attribution(args, a.step, a.layer, a.op);
    if (a.kind == ActivityKind::memcpy || a.kind == ActivityKind::memset) {
      args["bytes"] = a.bytes_copied;  // Kineto's meaning for copies
      if (a.bytes) args["op_bytes"] = a.bytes;
    } else if (a.bytes) {
      args["bytes"] = a.bytes;
    }
    if (a.flops) args["flops"] = a.flops;
    if (a.side_stream) args["side_stream"] = 1;
    events.push_back({{"ph", "X"}, {"cat", cat}, {"name", a.name}, {"pid", pid}, {"tid", tid},
                      {"ts", us(a.start_ns)}, {"dur", dur(a.start_ns, a.end_ns)}, {"args", args}});
    // ac2g flow: launch call -> device activity.
    if (on_device && a.correlation_id) {
      auto it = launch_of.find(a.correlation_id);
      if (it != launch_of.end()) {
        const Activity& l = *it->second;
        events.push_back({{"ph", "s"}, {"id", a.correlation_id}, {"pid", host_pid}, {"tid", l.thread},
                          {"ts", us(l.start_ns)}, {"cat", "ac2g"}, {"name", "ac2g"}});
        events.push_back({{"ph", "f"}, {"id", a.correlation_id}, {"pid", pid}, {"tid", tid},
                          {"ts", us(a.start_ns)}, {"cat", "ac2g"}, {"name", "ac2g"}, {"bp", "e"}});
      }
    }
  }

  for (const Range& r : t.ranges) {
    const bool gpu = r.kind == RangeKind::gpu_user_annotation;
    const int64_t pid = gpu ? std::max(r.device, 0) : host_pid;
    (gpu ? streams : threads).insert({pid, r.thread});
    if (gpu) device_pids.insert(pid);
    json args = json::object();
    add_attribution(args, r.step, r.layer, r.op);
    events.push_back({{"ph", "X"}, {"cat", to_string(r.kind)}, {"name", r.name}, {"pid", pid},
                      {"tid", r.thread}, {"ts", us(r.start_ns)}, {"dur", dur(r.start_ns, r.end_ns)},
                      {"args", args}});
  }

  // Metadata: names for processes and threads, as Kineto writes them.
  auto meta = [&](const char* name, int64_t pid, int64_t tid, const std::string& value) {
    events.push_back({{"ph", "M"}, {"name", name}, {"pid", pid}, {"tid", tid}, {"ts", 0},
                      {"args", {{"name", value}}}});
  };
  if (!threads.empty()) meta("process_name", host_pid, 0, "host (glm5prof)");
  for (int64_t d : device_pids) meta("process_name", d, 0, "GPU " + std::to_string(d));
  for (const auto& [pid, tid] : streams) meta("thread_name", pid, tid, "stream " + std::to_string(tid));
  for (const auto& [pid, tid] : threads)
    meta("thread_name", pid, tid, tid < 0 ? std::string("cpu") : "thread " + std::to_string(tid));

  json props = json::array();
  for (const DeviceProperties& d : t.devices) props.push_back(device_properties(d));
  json info = {{"source", t.source},
               {"complete", t.complete},
               {"records_dropped", t.records_dropped},
               {"kernels_launched", t.kernels_launched},
               {"kernels_recorded", t.kernels_recorded},
               {"messages", t.messages}};
  if (t.copy_gbps > 0 || t.bf16_tflops > 0) info["peaks"] = {{"copy_gbps", t.copy_gbps}, {"bf16_tflops", t.bf16_tflops}};
  if (!t.runs.empty()) {
    json runs = json::array();
    for (const RunWindow& w : t.runs) runs.push_back({{"name", w.name}, {"start_us", us(w.start_ns)}, {"end_us", us(w.end_ns)}});
    info["runs"] = runs;  // microseconds from baseTimeNanoseconds, as the events' ts
  }
  // Written by hand, one event per line, distributedInfo first: HolisticTraceAnalysis finds a trace's
  // rank by the regex "rank":\s+(\d+) on the first line that matches (hta/common/trace_file.py), so
  // the key needs its space and must come before any event; one line per event keeps the file
  // greppable and avoids one multi-GB line. Still one JSON document.
  std::string doc;
  doc.reserve(events.size() * 160 + 4096);
  doc += "{\"schemaVersion\": 1, \"distributedInfo\": {\"rank\": " + std::to_string(rank) +
         ", \"world_size\": " + std::to_string(world_size) + ", \"backend\": \"nccl\"},\n";
  doc += "\"deviceProperties\": " + props.dump() + ",\n";
  doc += "\"baseTimeNanoseconds\": " + std::to_string(base) + ", \"displayTimeUnit\": \"ms\",\n";
  doc += "\"glm5prof\": " + info.dump() + ",\n";
  doc += "\"traceEvents\": [";
  for (size_t i = 0; i < events.size(); ++i) {
    doc += i ? ",\n" : "\n";
    doc += events[i].dump();
  }
  doc += "\n]}\n";
  if (outputs) outputs->stage(path, doc);
  else write_file_atomic(path, doc);
}

}  // namespace glm5
