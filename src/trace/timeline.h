// The Timeline: the one shared model of a profiled run. Every activity source (CUPTI live tracing,
// the host clock of the CPU backend, a Chrome/Kineto trace file) fills it; every analysis and report
// reads it. Plain structs, no behaviour beyond small helpers.
//
// Times are integer nanoseconds on the source's clock (CUPTI clock, steady_clock, or the file's
// microseconds x 1000). `base_time_ns` is the origin the Chrome trace writer subtracts.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "profiler/op_tracer.h"  // OpDesc (header only; glm5_trace does not link glm5_profiler)

namespace glm5 {

// What an Activity is. `cpu_op` is a host-side operator span from a file (aten::copy_ ...); ops timed
// by the host clock of the CPU backend are `kernel`s on device -1 so the GPU analysis applies as is.
enum class ActivityKind { kernel, memcpy, memset, runtime, driver, marker, cpu_op, overhead };

// "kernel", "memcpy", ... (the enumerator's name). Parse throws glm5::Error on an unknown name.
const char* to_string(ActivityKind kind);
ActivityKind parse_activity_kind(const std::string& name);

struct Dim3 {
  int x = 0, y = 0, z = 0;
  bool operator==(const Dim3& o) const { return x == o.x && y == o.y && z == o.z; }
};

// One thing that took time: a kernel, a copy, a runtime API call, a host op.
struct Activity {
  ActivityKind kind = ActivityKind::kernel;
  std::string name;             // kernel (demangled if known) / API / op name
  int64_t start_ns = 0;         // [ns] on the source clock
  int64_t end_ns = 0;           // [ns], >= start_ns
  int device = -1;              // CUDA device ordinal; -1 = host (CPU backend ops, runtime calls)
  int64_t stream = -1;          // CUDA stream id; -1 = none / host ("cpu" in the Chrome trace)
  int64_t thread = 0;           // host thread id for runtime / driver / cpu_op activities
  uint64_t correlation_id = 0;  // CUPTI correlation id: links a runtime launch to its kernel; 0 = none
  uint64_t external_id = 0;     // external correlation id pushed per op (ours) or Kineto "External id"
  Dim3 grid, block;             // kernels only
  uint64_t bytes_copied = 0;    // memcpy / memset only [bytes]
  // Attribution (filled by the source; step/layer -1 and op "" when unknown).
  int step = -1;
  int layer = -1;
  std::string op;               // our op name ("attn.kv_cast") or the enclosing cpu_op in a Kineto file
  double bytes = 0;             // bytes the op declared (whole op, not per kernel) [bytes]
  double flops = 0;             // FLOPs the op declared (whole op) [FLOP]
  bool side_stream = false;     // the op ran on the engine's side stream (OpDesc::stream; trace arg "side_stream")

  int64_t duration_ns() const { return end_ns - start_ns; }
};

enum class RangeKind { user_annotation, gpu_user_annotation };
const char* to_string(RangeKind kind);

// A named span: an NVTX push/pop range on a host thread (user_annotation) or the GPU-side span covering
// the kernels of an op range (gpu_user_annotation, as Kineto draws them).
struct Range {
  std::string name;   // "step.3", "layer.12", "attn.kv_cast", "ProfilerStep#4", ...
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  int depth = 0;      // nesting depth on its thread, 0 = outermost
  int64_t thread = 0; // host thread id (user_annotation) or stream (gpu_user_annotation)
  RangeKind kind = RangeKind::user_annotation;
  int device = -1;    // gpu_user_annotation: the device its kernels ran on; -1 for host ranges
  int step = -1;      // from the enclosing "step.N" range (or the name itself); -1 if none
  int layer = -1;     // from the enclosing "layer.N" range; -1 if none
  std::string op;     // the op name when the range is an op range, else ""
};

// Device properties as Kineto's deviceProperties lists them (subset).
struct DeviceProperties {
  int id = 0;
  std::string name;
  uint64_t total_global_mem = 0;  // [bytes]
  int compute_major = 0, compute_minor = 0;
  int num_sms = 0;
  int max_threads_per_block = 0;
  int max_threads_per_multiprocessor = 0;
  int warp_size = 32;
  uint64_t shared_mem_per_block = 0;           // [bytes]
  uint64_t shared_mem_per_multiprocessor = 0;  // [bytes]
  int regs_per_block = 0;
  int regs_per_multiprocessor = 0;
};

// The time window of one run in a trace that holds several (`profile --kv-path all` runs one per KV path, one
// after another on the same clock): analyzing the file splits it by these windows, so each run keeps its own
// steps instead of three runs' step N being read as one step.
struct RunWindow {
  std::string name;  // the run's name in the report ("cast", "gather-cast", "fp8")
  int64_t start_ns = 0, end_ns = 0;
};

struct Timeline {
  std::vector<Activity> activities;
  std::vector<Range> ranges;
  std::map<uint64_t, OpDesc> ops;  // external correlation id -> op as declared by the engine
  // Metadata
  std::string source;              // "cupti" | "host-clock" | "file"
  std::vector<DeviceProperties> devices;
  int64_t base_time_ns = 0;        // origin of the Chrome trace's microsecond timestamps
  uint64_t records_dropped = 0;    // CUPTI activity records lost (buffer full)
  uint64_t kernels_launched = 0;   // kernel launch API calls seen (runtime records)
  uint64_t kernels_recorded = 0;   // kernel activity records received
  uint64_t graph_kernels = 0;      // kernel records of CUDA graph replays (node-level tracing; any window)
  bool complete = true;            // false if the source degraded (CUPTI error, dropped records)
  std::vector<std::string> messages;  // why it is incomplete, warnings, in order
  std::vector<RunWindow> runs;     // several runs in one trace (empty: one run); see RunWindow
  // The roofline ceilings the recording run used (glm5prof profile: the copy rate it measured on the device, the BF16
  // GEMM ceiling it assumed); 0: unknown (foreign traces). Written to and read from a trace's glm5prof.peaks, so that
  // `glm5prof analyze` of a saved profile trace reports the same roofline hotspots as the profile did.
  double copy_gbps = 0;    // [GB/s]
  double bf16_tflops = 0;  // [TFLOP/s]
};

// The part of `t` in window `w`: activities and ranges that start in [w.start_ns, w.end_ns], with t's metadata.
// Its kernel counts are those of the window when t recorded every launch (else t's totals, and incomplete).
Timeline timeline_window(const Timeline& t, const RunWindow& w);
// The window [first start, last end] of everything in `t`, named `name`.
RunWindow run_window(const Timeline& t, const std::string& name);

// Sum of kernel durations [ns] (device >= 0 and host-clock kernels alike). Overlapping kernels on
// different streams are each counted: this is "kernel time", not wall time.
int64_t total_kernel_time_ns(const Timeline& t);
// Number of kernel activities in t.
uint64_t count_kernels(const Timeline& t);
// Wall span [ns] of all kernels (first start to last end); 0 if there are none.
int64_t kernel_span_ns(const Timeline& t);
// Sorts activities by (start_ns, end_ns) and ranges by (start_ns, depth). Stable.
void sort_timeline(Timeline& t);
// The smallest start among activities and ranges (INT64_MAX-safe: 0 for an empty timeline).
int64_t earliest_time_ns(const Timeline& t);
// Parses "step.N" / "ProfilerStep#N" into N; returns -1 when `name` has another form.
int parse_step_name(const std::string& name);
// The layer a range's name denotes, or -1: "layer.N" (ours: NVTX and record_function), a module path with
// "layers.N" ("model.layers.12", "model.layers.12.mlp": HF / vLLM / SGLang module names), or torch.profiler's
// with_modules name of a layer class, "nn.Module: <Class>_N" with <Class> ending in "Layer" or "Block"
// ("nn.Module: DeepseekV2DecoderLayer_3").
int parse_layer_name(const std::string& name);
// Fills Range.depth / step / layer / op from nesting on each thread: a range inside "step.N" gets
// step N, inside "layer.N" gets layer N; a range that is neither step, layer nor ProfilerStep is an op
// range (op = its name). Used by every source after it collected its ranges.
void assign_range_nesting(std::vector<Range>& ranges);

}  // namespace glm5
