// OpTracer for the CUDA backend: NVTX ranges + CUPTI activity tracing with external correlation.
//
// Lifetime: construct before the work to trace (it enables CUPTI activity kinds CONCURRENT_KERNEL,
// MEMCPY, MEMSET, RUNTIME, DRIVER, MARKER, EXTERNAL_CORRELATION), drive it through the OpTracer
// interface, then call finish() once to flush CUPTI and get the Timeline. Only one CuptiTracer may be
// active at a time (CUPTI's buffer callbacks are C functions: they reach the tracer through one static
// pointer, set in the constructor and cleared in finish()/destructor; a second concurrent tracer is
// degraded, not fatal).
//
// Errors: any CUPTI failure degrades tracing (Timeline.complete = false, message kept); the run
// goes on. Constructing one without a GPU gives an incomplete, empty Timeline.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "profiler/cupti_records.h"
#include "profiler/op_tracer.h"
#include "trace/timeline.h"

namespace glm5 {

// Sets NVTX_INJECTION64_PATH to the loaded libcupti (found with dladdr on a CUPTI symbol) unless it is
// already set, so NVTX push/pop reach CUPTI as MARKER records. Must run before the first NVTX call of
// the process (the CLI calls it first thing in main). Never throws; does nothing if libcupti is absent.
void arrange_nvtx_injection();

// Size of each CUPTI activity buffer [bytes] from the value of the environment variable
// GLM5_CUPTI_BUFFER_BYTES: nullptr or "" gives the default 8 MiB; otherwise a decimal integer in
// [1024, 1 GiB], rounded up to a multiple of 8 (CUPTI's buffer alignment). Small buffers make CUPTI
// request buffers more often and may make it drop records, which the Timeline then reports.
// Throws glm5::Error "GLM5_CUPTI_BUFFER_BYTES='...': expected ..." for anything else.
size_t cupti_buffer_bytes(const char* env_value);

// How CUDA graph replays are traced (Nsight Systems' --cuda-graph-trace=node|graph):
//   node:  kernel activity (CONCURRENT_KERNEL) on: every kernel node of a replay gets a record with its
//          graph node id, attributed to (step, layer, op) through the CapturedGraph. CUPTI timestamps
//          each node: about 1 us per kernel node on the H200 (reports/2026-11-29-h200-decode-step.md).
//   graph: kernel activity off, CUPTI_ACTIVITY_KIND_GRAPH_TRACE on: one record per graph launch (its
//          device start / end), no per-node cost and no per-kernel records. Kernels launched eagerly
//          meanwhile are not recorded either.
enum class GraphTraceLevel { node, graph };
// "node" / "graph"; parse throws glm5::Error "--graph-trace 'x': expected graph or node".
const char* to_string(GraphTraceLevel level);
GraphTraceLevel parse_graph_trace_level(const std::string& name);

class CuptiTracer : public OpTracer {
 public:
  // Reads GLM5_CUPTI_BUFFER_BYTES (see cupti_buffer_bytes; throws glm5::Error for a bad value).
  // With GLM5_FORCE_NO_CUPTI=1 it enables nothing and ok() is false, as when cuptiActivityEnable
  // fails (CUPTI unavailable, another profiler attached): callers fall back to the host clock.
  // `level`: the initial graph tracing level (set_graph_trace_level).
  explicit CuptiTracer(GraphTraceLevel level = GraphTraceLevel::node);
  ~CuptiTracer() override;  // disables CUPTI if finish() was not called
  CuptiTracer(const CuptiTracer&) = delete;
  CuptiTracer& operator=(const CuptiTracer&) = delete;

  void begin_range(const std::string& name) override;  // nvtxRangePushA
  void end_range() override;                           // nvtxRangePop
  // nvtxRangePushA(op.op) + push a fresh CUSTOM0 external correlation id mapped to `op`.
  void begin_op(const OpDesc& op) override;
  void end_op() override;                              // pops both
  // A replay of `graph` for `step`: pushes an external id that build_timeline_from_records maps to
  // the launch (the graph is copied the first time it is seen).
  void begin_graph_launch(int step, const CapturedGraph& graph) override;
  void end_graph_launch() override;
  // Pushes an external id marking launch calls made while capturing (they run nothing).
  void begin_graph_capture() override;
  void end_graph_capture() override;

  // Flushes (cuptiActivityFlushAll), disables the activity kinds and builds the Timeline. Call once;
  // a second call returns an empty, incomplete Timeline. Host-side state only: synchronize the
  // device first so all kernels have finished.
  Timeline finish();

  // Switches kernel activity off and GRAPH_TRACE on (graph) or back (node). Call with the device idle
  // (cudaDeviceSynchronize first); it flushes CUPTI's buffers. Whether a graph instantiated under one
  // level is traced as the other is not documented: re-capture the graph after a switch
  // (DecodeEngine::reset_graph) and leave that step out of measurements. If CUPTI refuses
  // GRAPH_TRACE the tracer stays at node level and says so in the Timeline's messages (not an error).
  // Returns the level now in effect. Does nothing (returns the current level) when tracing is off.
  GraphTraceLevel set_graph_trace_level(GraphTraceLevel level);
  GraphTraceLevel graph_trace_level() const { return level_; }

  bool ok() const;                        // no CUPTI error so far
  std::vector<std::string> errors() const;  // the CUPTI errors met so far, in order

  // Called from CUPTI's buffer-completed callback (any thread): parses one buffer of records.
  void consume_buffer(uint8_t* buffer, size_t valid_size);
  void note_error(const std::string& message);
  void note_dropped(size_t count);  // records CUPTI lost (buffer full)
  size_t buffer_bytes() const { return buffer_bytes_; }  // each activity buffer [bytes]

 private:
  size_t buffer_bytes_ = 0;
  bool enabled_ = false;
  GraphTraceLevel level_ = GraphTraceLevel::node;
  std::vector<int> kinds_on_;            // CUpti_ActivityKind values enabled now (disabled in finish())
  std::vector<std::string> notes_;       // for the Timeline's messages (not errors)
  bool enable_kind(int kind, bool report);  // cuptiActivityEnable; notes the error when `report`
  void disable_kind(int kind);
  bool finished_ = false;
  uint64_t next_external_id_ = 1;
  std::map<uint64_t, OpDesc> ops_;
  GraphAttribution graphs_;
  std::map<std::tuple<const CapturedGraph*, uint32_t, size_t>, int> graph_index_;
  void push_external(uint64_t id);
  void pop_external();
  mutable std::mutex mutex_;             // guards records_ and errors_ (CUPTI calls back on its own thread)
  ActivityRecords records_;
  std::vector<std::string> errors_;
};

}  // namespace glm5
