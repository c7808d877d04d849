#include "profiler/cupti_tracer.h"

#include <cuda_runtime.h>
#include <cupti.h>
#include <dlfcn.h>
#include <nvtx3/nvToolsExt.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>

#include "common/error.h"

namespace glm5 {

namespace {

constexpr size_t kBufferBytes = 8u << 20;  // 8 MB per activity buffer (GLM5_CUPTI_BUFFER_BYTES overrides)
constexpr size_t kMinBufferBytes = 1024;
constexpr size_t kMaxBufferBytes = size_t(1) << 30;
constexpr size_t kBufferAlign = 8;         // CUPTI requires 8-byte aligned buffers

// The one piece of global state: CUPTI's buffer callbacks are plain C functions with no user pointer,
// so they reach the tracer that enabled them through this pointer. Set by the CuptiTracer
// constructor, cleared by finish()/the destructor; at most one tracer is active.
CuptiTracer* g_active_tracer = nullptr;

std::string result_string(CUptiResult r) {
  const char* s = nullptr;
  cuptiGetResultString(r, &s);
  return s ? s : "CUPTI error " + std::to_string(static_cast<int>(r));
}

// Enabled at every graph tracing level; CONCURRENT_KERNEL (node) or GRAPH_TRACE (graph) come on top.
const CUpti_ActivityKind kCommonKinds[] = {CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET,
                                           CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER,
                                           CUPTI_ACTIVITY_KIND_MARKER, CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION};

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  const CuptiTracer* t = g_active_tracer;
  const size_t bytes = t && t->buffer_bytes() ? t->buffer_bytes() : kBufferBytes;
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(kBufferAlign, bytes));
  *size = *buffer ? bytes : 0;
  *max_records = 0;  // as many as fit
}

void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream_id, uint8_t* buffer, size_t size,
                               size_t valid_size) {
  (void)size;
  if (g_active_tracer && buffer) {
    g_active_tracer->consume_buffer(buffer, valid_size);
    size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(context, stream_id, &dropped) == CUPTI_SUCCESS && dropped)
      g_active_tracer->note_dropped(dropped);
  }
  std::free(buffer);
}

}  // namespace

const char* to_string(GraphTraceLevel level) { return level == GraphTraceLevel::graph ? "graph" : "node"; }

GraphTraceLevel parse_graph_trace_level(const std::string& name) {
  if (name == "graph") return GraphTraceLevel::graph;
  if (name == "node") return GraphTraceLevel::node;
  throw Error("--graph-trace '" + name + "': expected graph or node");
}

size_t cupti_buffer_bytes(const char* env_value) {
  if (!env_value || !*env_value) return kBufferBytes;
  const std::string v = env_value;
  const std::string expected = "GLM5_CUPTI_BUFFER_BYTES='" + v + "': expected a whole number of bytes in [" +
                               std::to_string(kMinBufferBytes) + ", " + std::to_string(kMaxBufferBytes) + "]";
  if (v.size() > 12 || v.find_first_not_of("0123456789") != std::string::npos) throw Error(expected);
  const unsigned long long n = std::stoull(v);
  if (n < kMinBufferBytes || n > kMaxBufferBytes) throw Error(expected);
  return size_t((n + kBufferAlign - 1) / kBufferAlign * kBufferAlign);
}

void arrange_nvtx_injection() {
  if (std::getenv("NVTX_INJECTION64_PATH")) return;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&cuptiActivityEnable), &info) && info.dli_fname)
    setenv("NVTX_INJECTION64_PATH", info.dli_fname, 0);
}

CuptiTracer::CuptiTracer(GraphTraceLevel level) : buffer_bytes_(cupti_buffer_bytes(std::getenv("GLM5_CUPTI_BUFFER_BYTES"))) {
  // GLM5_FORCE_NO_CUPTI=1 simulates CUPTI being unavailable (no driver support, another profiler
  // attached: cuptiActivityEnable fails) so the fallback to the host clock can be tested.
  if (const char* force = std::getenv("GLM5_FORCE_NO_CUPTI"); force && std::strcmp(force, "1") == 0) {
    note_error("GLM5_FORCE_NO_CUPTI=1 (simulating cuptiActivityEnable failing)");
    return;
  }
  if (g_active_tracer) {
    note_error("another CuptiTracer is already active; this one records nothing");
    return;
  }
  CUptiResult r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
  if (r != CUPTI_SUCCESS) {
    note_error("cuptiActivityRegisterCallbacks: " + result_string(r));
    return;
  }
  g_active_tracer = this;
  for (CUpti_ActivityKind k : kCommonKinds) enable_kind(k, true);
  enabled_ = true;
  if (level == GraphTraceLevel::graph) set_graph_trace_level(GraphTraceLevel::graph);
  else enable_kind(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, true);
}

bool CuptiTracer::enable_kind(int kind, bool report) {
  if (std::find(kinds_on_.begin(), kinds_on_.end(), kind) != kinds_on_.end()) return true;
  const CUptiResult r = cuptiActivityEnable(static_cast<CUpti_ActivityKind>(kind));
  if (r == CUPTI_SUCCESS) {
    kinds_on_.push_back(kind);
    return true;
  }
  if (report) note_error("cuptiActivityEnable(kind " + std::to_string(kind) + "): " + result_string(r));
  else notes_.push_back("cuptiActivityEnable(kind " + std::to_string(kind) + "): " + result_string(r));
  return false;
}

void CuptiTracer::disable_kind(int kind) {
  auto it = std::find(kinds_on_.begin(), kinds_on_.end(), kind);
  if (it == kinds_on_.end()) return;
  cuptiActivityDisable(static_cast<CUpti_ActivityKind>(kind));
  kinds_on_.erase(it);
}

GraphTraceLevel CuptiTracer::set_graph_trace_level(GraphTraceLevel want) {
  if (!enabled_ || finished_ || want == level_) return level_;
  // Hand over what the previous level recorded before the kinds change (the device is idle).
  const CUptiResult fr = cuptiActivityFlushAll(0);
  if (fr != CUPTI_SUCCESS) note_error("cuptiActivityFlushAll: " + result_string(fr));
  uint64_t ts = 0;
  cuptiGetTimestamp(&ts);
  if (want == GraphTraceLevel::graph) {
    disable_kind(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    bool on = enable_kind(CUPTI_ACTIVITY_KIND_GRAPH_TRACE, false);
    if (!on) {  // not documented as exclusive with copies; try without them before giving up
      disable_kind(CUPTI_ACTIVITY_KIND_MEMCPY);
      disable_kind(CUPTI_ACTIVITY_KIND_MEMSET);
      on = enable_kind(CUPTI_ACTIVITY_KIND_GRAPH_TRACE, false);
      if (on) {
        notes_.push_back("CUPTI enables GRAPH_TRACE only without MEMCPY / MEMSET activity: copies during "
                         "graph-level tracing are not recorded");
      } else {
        enable_kind(CUPTI_ACTIVITY_KIND_MEMCPY, true);
        enable_kind(CUPTI_ACTIVITY_KIND_MEMSET, true);
      }
    }
    if (!on) {
      notes_.push_back("CUPTI refused graph-level tracing (CUPTI_ACTIVITY_KIND_GRAPH_TRACE): graph replays "
                       "traced at node level instead");
      enable_kind(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, true);
      return level_;
    }
    graphs_.graph_level_windows.push_back({int64_t(ts), INT64_MAX});
    level_ = GraphTraceLevel::graph;
  } else {
    disable_kind(CUPTI_ACTIVITY_KIND_GRAPH_TRACE);
    enable_kind(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, true);
    enable_kind(CUPTI_ACTIVITY_KIND_MEMCPY, true);
    enable_kind(CUPTI_ACTIVITY_KIND_MEMSET, true);
    if (!graphs_.graph_level_windows.empty()) graphs_.graph_level_windows.back().second = int64_t(ts);
    level_ = GraphTraceLevel::node;
  }
  return level_;
}

CuptiTracer::~CuptiTracer() {
  if (!finished_) {
    try {
      (void)finish();
    } catch (...) {  // a destructor never throws; finish() only builds host structures
    }
  }
}

void CuptiTracer::begin_range(const std::string& name) { nvtxRangePushA(name.c_str()); }
void CuptiTracer::end_range() { nvtxRangePop(); }

void CuptiTracer::begin_op(const OpDesc& op) {
  nvtxRangePushA(op.op.c_str());
  const uint64_t id = next_external_id_++;
  ops_[id] = op;
  if (!enabled_) return;
  const CUptiResult r = cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, id);
  if (r != CUPTI_SUCCESS && ok()) note_error("cuptiActivityPushExternalCorrelationId: " + result_string(r));
}

void CuptiTracer::end_op() {
  if (enabled_) {
    uint64_t last = 0;
    const CUptiResult r = cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &last);
    if (r != CUPTI_SUCCESS && ok()) note_error("cuptiActivityPopExternalCorrelationId: " + result_string(r));
  }
  nvtxRangePop();
}

void CuptiTracer::push_external(uint64_t id) {
  if (!enabled_) return;
  const CUptiResult r = cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, id);
  if (r != CUPTI_SUCCESS && ok()) note_error("cuptiActivityPushExternalCorrelationId: " + result_string(r));
}

void CuptiTracer::pop_external() {
  if (!enabled_) return;
  uint64_t last = 0;
  const CUptiResult r = cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &last);
  if (r != CUPTI_SUCCESS && ok()) note_error("cuptiActivityPopExternalCorrelationId: " + result_string(r));
}

void CuptiTracer::begin_graph_launch(int step, const CapturedGraph& graph) {
  const auto key = std::make_tuple(&graph, graph.exec_id, graph.ops.size());
  auto it = graph_index_.find(key);
  if (it == graph_index_.end()) {
    graphs_.graphs.push_back(graph);
    it = graph_index_.emplace(key, int(graphs_.graphs.size()) - 1).first;
  }
  const uint64_t id = next_external_id_++;
  graphs_.launches[id] = GraphLaunch{step, it->second, level_ == GraphTraceLevel::node};
  push_external(id);
}

void CuptiTracer::end_graph_launch() { pop_external(); }

void CuptiTracer::begin_graph_capture() {
  const uint64_t id = next_external_id_++;
  graphs_.captures.insert(id);
  uint64_t ts = 0;
  if (enabled_ && cuptiGetTimestamp(&ts) == CUPTI_SUCCESS) graphs_.capture_windows.push_back({int64_t(ts), INT64_MAX});
  push_external(id);
}

void CuptiTracer::end_graph_capture() {
  pop_external();
  uint64_t ts = 0;
  if (enabled_ && !graphs_.capture_windows.empty() && cuptiGetTimestamp(&ts) == CUPTI_SUCCESS)
    graphs_.capture_windows.back().second = int64_t(ts);
}

bool CuptiTracer::ok() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return errors_.empty();
}

std::vector<std::string> CuptiTracer::errors() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return errors_;
}

void CuptiTracer::note_error(const std::string& message) {
  std::lock_guard<std::mutex> lock(mutex_);
  errors_.push_back(message);
  records_.errors.push_back(message);
}

void CuptiTracer::note_dropped(size_t count) {
  std::lock_guard<std::mutex> lock(mutex_);
  records_.dropped += count;
}

Timeline CuptiTracer::finish() {
  if (finished_) {
    Timeline t;
    t.source = "cupti";
    t.complete = false;
    t.messages.push_back("CuptiTracer::finish() called twice: the records went to the first call");
    return t;
  }
  finished_ = true;
  if (enabled_) {
    CUptiResult r = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    if (r != CUPTI_SUCCESS) note_error("cuptiActivityFlushAll: " + result_string(r));
    for (int k : kinds_on_) cuptiActivityDisable(static_cast<CUpti_ActivityKind>(k));
    kinds_on_.clear();
    g_active_tracer = nullptr;
    enabled_ = false;
  }
  ActivityRecords records;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    records = std::move(records_);
    records_ = ActivityRecords{};
  }
  Timeline t = build_timeline_from_records(records, ops_, graphs_);
  t.messages.insert(t.messages.end(), notes_.begin(), notes_.end());
  std::set<int> devices;
  for (const KernelRecord& k : records.kernels) devices.insert(k.device);
  for (int d : devices) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, d) != cudaSuccess) continue;
    DeviceProperties dp;
    dp.id = d;
    dp.name = p.name;
    dp.total_global_mem = p.totalGlobalMem;
    dp.compute_major = p.major;
    dp.compute_minor = p.minor;
    dp.num_sms = p.multiProcessorCount;
    dp.max_threads_per_block = p.maxThreadsPerBlock;
    dp.max_threads_per_multiprocessor = p.maxThreadsPerMultiProcessor;
    dp.warp_size = p.warpSize;
    dp.shared_mem_per_block = p.sharedMemPerBlock;
    dp.shared_mem_per_multiprocessor = p.sharedMemPerMultiprocessor;
    dp.regs_per_block = p.regsPerBlock;
    dp.regs_per_multiprocessor = p.regsPerMultiprocessor;
    t.devices.push_back(dp);
  }
  return t;
}

}  // namespace glm5
