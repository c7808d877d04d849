// Plain copies of the CUPTI activity records the profiler uses, and the one function that turns them
// into a Timeline. The CUPTI callback code only copies fields out of CUPTI's structs into these; all
// attribution logic lives in build_timeline_from_records(), which tests call with synthetic records
// (no GPU, no CUPTI).
#pragma once
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "profiler/graph_record.h"
#include "trace/timeline.h"

namespace glm5 {

struct KernelRecord {            // CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL
  std::string name;              // as CUPTI reports it (mangled for C++ kernels)
  int64_t start_ns = 0, end_ns = 0;
  int device = 0;
  int64_t stream = 0;
  uint64_t correlation_id = 0;
  Dim3 grid, block;
  uint64_t graph_node_id = 0;    // 0 unless replayed from a CUDA graph (the instantiated node's id)
  uint32_t graph_id = 0;         // 0 unless replayed from a CUDA graph
};

struct MemcpyRecord {            // CUPTI_ACTIVITY_KIND_MEMCPY / MEMSET
  bool is_memset = false;
  std::string name;              // "Memcpy HtoD", "Memset", ...
  int64_t start_ns = 0, end_ns = 0;
  int device = 0;
  int64_t stream = 0;
  uint64_t correlation_id = 0;
  uint64_t bytes = 0;
  uint64_t graph_node_id = 0;    // as KernelRecord
  uint32_t graph_id = 0;
};

struct ApiRecord {               // CUPTI_ACTIVITY_KIND_RUNTIME / DRIVER
  bool is_driver = false;
  std::string name;              // "cudaLaunchKernel", "cuLaunchKernel", ... (or "cbid:N")
  bool is_kernel_launch = false; // the call launches a kernel (counts kernels_launched)
  int64_t start_ns = 0, end_ns = 0;
  int64_t process = 0, thread = 0;
  uint64_t correlation_id = 0;
};

struct MarkerRecord {            // CUPTI_ACTIVITY_KIND_MARKER: an NVTX push (start) or pop (end)
  uint32_t id = 0;               // pairs a start with its end
  bool is_start = true;
  std::string name;              // on the start record only
  int64_t timestamp_ns = 0;
  int64_t thread = 0;            // objectId.pt.threadId
};

// CUPTI_ACTIVITY_KIND_GRAPH_TRACE (CUpti_ActivityGraphTrace2 in CUDA 13): one record per CUDA graph
// launch, timing the whole replay on the device with no per-node records (graph-level tracing, what
// Nsight Systems calls --cuda-graph-trace=graph). Filled by graph_trace_record (cupti_parse.h).
struct GraphTraceRecord {
  uint64_t correlation_id = 0;   // correlation id of the API call that launched the graph
  int64_t start_ns = 0, end_ns = 0;  // [ns] first node's start .. last node's end; both 0: not timed
  int device = -1;               // device of the first node; -1 when the graph started on the host
  int end_device = -1;           // device of the last node; -1 when unknown / on the host
  int64_t stream = 0;            // stream the graph was launched into
  uint32_t graph_id = 0;         // CUPTI id of the launched graph
};

struct ExternalCorrelationRecord {  // CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION
  uint64_t correlation_id = 0;   // CUPTI correlation id of the API call made while the id was pushed
  uint64_t external_id = 0;      // the id our begin_op pushed
};

struct ActivityRecords {
  std::vector<KernelRecord> kernels;
  std::vector<MemcpyRecord> copies;
  std::vector<ApiRecord> api_calls;
  std::vector<MarkerRecord> markers;
  std::vector<ExternalCorrelationRecord> external;
  std::vector<GraphTraceRecord> graph_traces;
  uint64_t dropped = 0;
  std::vector<std::string> errors;  // CUPTI errors met while recording (timeline flagged incomplete)
};

// CUDA graph replays seen by the tracer (OpTracer::begin_graph_launch / begin_graph_capture).
struct GraphLaunch {
  int step = -1;   // the decode step the replay ran
  int graph = -1;  // index into GraphAttribution::graphs
  // Kernel activity was on (node-level tracing): the graph's kernel nodes count as launches and
  // produce kernel records. False under graph-level tracing (one GraphTraceRecord, no kernels).
  bool nodes_traced = true;
};
struct GraphAttribution {
  std::vector<CapturedGraph> graphs;
  std::map<uint64_t, GraphLaunch> launches;  // external id pushed around a cudaGraphLaunch -> the launch
  std::set<uint64_t> captures;               // external ids pushed while a step was being captured
  // [start, end] CUPTI timestamps of each capture: launch calls made meanwhile count as no launch
  // even without an external correlation record (e.g. driver launches from a library).
  std::vector<std::pair<int64_t, int64_t>> capture_windows;
  // [start, end] CUPTI timestamps while kernel activity was off (graph-level tracing): kernel launch
  // calls made meanwhile have no kernel record by design and count as no launch.
  std::vector<std::pair<int64_t, int64_t>> graph_level_windows;
};

// Builds the Timeline (source "cupti"): kernels / copies joined correlation id -> external id ->
// `ops` so each gets step, layer, op, bytes and flops; runtime/driver calls as activities; marker
// start/end pairs (by id) as user_annotation Ranges with nesting; one gpu_user_annotation Range per
// op covering its kernels. Unmatched marker starts are closed at the last timestamp seen (message kept).
// base_time_ns = earliest timestamp. Never throws on inconsistent records: it notes them in messages.
//
// Graph replays (`graphs`): a kernel / copy whose correlation id maps to a graph launch's external id
// is attributed through its graph node id: instantiated id -> captured id (CapturedGraph::clone_of;
// an id found directly among the captured ones is taken as is) -> the op that captured it, with the
// launch's step; each (launch, op) gets a fresh external id in Timeline.ops. When any kernel of a
// replay has no known node id, that replay's kernels are matched by order instead (the i-th kernel
// by start time = the i-th captured kernel node: a single-stream capture runs in capture order) if
// the counts agree; otherwise they stay unattributed. A graph launch counts the graph's kernel nodes
// as kernel launches; launch calls made during a capture count none (they run nothing).
// Timeline.messages says how many replayed kernels were attributed each way.
//
// Graph-level records (records.graph_traces): each becomes one gpu_user_annotation Range named
// "graph.step.N" (step N, layer -1, op "") on its device and stream, or "graph.launch" when its step is
// unknown or negative (warm-up / left-out steps). Its step comes from the launch's external id
// (graphs.launches), else from the innermost "step.N" NVTX range open when the launch call ran (its
// API record, same correlation id), else from the last "step.N" range started before the record.
// These are Ranges, not Activities, so the analysis (which sums device Activities) never counts them
// next to the kernels of node-level steps. Records without timestamps are left out (message kept).
Timeline build_timeline_from_records(const ActivityRecords& records,
                                     const std::map<uint64_t, OpDesc>& ops,
                                     const GraphAttribution& graphs = {});

// Device time [us] of each step's graph-level record: the "graph.step.N" Ranges of a Timeline built
// from graph-level records, on `device` (all devices when negative; several launches of one step are
// summed). Empty when there are none.
std::map<int, double> graph_step_us(const Timeline& t, int device = -1);

// Demangles a C++ symbol (abi::__cxa_demangle); returns `name` unchanged if it is not mangled.
std::string demangle(const std::string& name);

}  // namespace glm5
