// Analysis of one Timeline: per-step times, per layer x op breakdown, top kernels, roofline numbers
// (achieved GB/s and TFLOP/s against the device's peaks) and hotspot rules, KV dtype cast first.
// Also the comparison of the three KV paths (DESIGN.md: cast | gather-cast | fp8).
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "trace/timeline.h"

namespace glm5 {

// Device peaks for the roofline. 0 = unknown (percentages are then reported as 0).
struct Peaks {
  double copy_gbps = 0;    // achievable device-memory bandwidth [GB/s = 1e9 bytes/s]
  double bf16_tflops = 0;  // dense BF16 tensor-core peak [TFLOP/s]
};

struct StepSample {
  int step = -1;           // -1: the whole timeline when it carries no step attribution
  double time_us = 0;      // GPU: span first kernel start .. last kernel end of the step; CPU: the step range
  double kernel_us = 0;    // sum of the step's kernel durations
  // GPU: time within time_us when no kernel, copy or memset ran on any stream (the span minus the union of the
  // step's device work); CPU (host-clock): 0.
  double idle_us = 0;
};

// One (layer, op) cell, averaged per step (sum over measured steps / number of steps).
struct OpCell {
  int layer = -1;
  std::string op;
  double time_us = 0;      // kernel time per step [us]
  double kernels = 0;      // kernels per step
  double bytes = 0;        // declared bytes per step
  double flops = 0;        // declared FLOPs per step
  double overlapped_us = 0;  // part of time_us hidden behind another stream's work (overlapped_durations_ns)
};

// One op summed over all layers, per step, with roofline numbers.
struct OpSummary {
  std::string op;
  double time_us = 0;      // per step [us]
  double share = 0;        // of step time median (0..1)
  double bytes = 0;        // declared per step [bytes]
  double flops = 0;        // declared per step [FLOP]
  double achieved_gbps = 0;     // bytes / time
  double pct_copy_peak = 0;     // 100 * achieved_gbps / Peaks.copy_gbps
  double achieved_tflops = 0;   // flops / time
  double pct_bf16_peak = 0;
  // Per step [us]: the part of time_us that ran on the engine's side stream while another stream of the device was
  // busy (overlapped_durations_ns): off the step's critical path unless that stream waited for it. 0 otherwise.
  double overlapped_us = 0;
};

struct KernelStat {
  std::string name;
  int64_t calls = 0;
  double total_us = 0;     // over the whole timeline
  double mean_us = 0;
  double share = 0;        // of total kernel time (0..1)
};

struct Hotspot {
  std::string kind;        // "kv_dtype_cast" | "op_share" | "latency_bound" | "under_streaming" | "gpu_idle"
  std::string what;        // op or kernel group, e.g. "attn.kv_cast" or "aten::copy_ (cast kernels)"
  double time_us = 0;      // per step [us]
  double share_of_step = 0;     // 0..1 of the median step time
  double bytes = 0;        // per step [bytes] (declared, or copied for file traces when known; else 0)
  double achieved_gbps = 0;
  double pct_of_peak = 0;  // of Peaks.copy_gbps
  double est_saving_us = 0;     // per step, if the recommendation is followed
  std::string recommendation;   // one or two sentences with the estimated saving
};

// One kernel of the typical layer (LayerTimeline): medians over the layers that ran the same op sequence.
struct LayerTimelineRow {
  std::string op;
  bool side = false;      // on the engine's side stream (Activity::side_stream)
  double start_us = 0;    // median start, from the layer's first kernel start [us]
  double end_us = 0;      // median end, from the same origin [us]
  // What this kernel adds to the layer's span [us]: max(0, end_us - the latest end_us of the rows before it), the
  // first row its end_us. Under programmatic dependent launch a kernel's start is its admission, not when its work
  // could begin, so its duration includes its wait for the predecessor; this column does not. The rows' adds sum to
  // the latest end_us (the span of the medians).
  double adds_us = 0;
  // Time since that latest earlier end_us in which no earlier kernel of the layer ran: max(0, start_us - it); 0 for
  // the first row (report.md's gap column).
  double gap_us = 0;
};

// Where a layer's time goes kernel by kernel: the most common per-layer sequence of kernel ops (and streams, main or
// side) over the (device, step, layer) samples of the measured steps (the MoE layers of GLM-5 / DeepSeek-V3), each
// kernel's median start and end from the sample's first kernel start. With programmatic dependent launch a kernel
// may start before its predecessor ends (it waits inside), the layer's first kernel included: its wait for the
// previous layer then counts in every time of the row. The report's gap column (from these medians) is the time
// since the latest end of an earlier kernel of the layer. Empty when fewer than two samples share a sequence, or
// the device work has no layer attribution.
struct LayerTimeline {
  int layers = 0;          // (device, step, layer) samples with this sequence
  int layers_total = 0;    // (device, step, layer) samples with any kernel
  int example_layer = -1;  // the lowest layer index with this sequence
  double span_us = 0;      // median first start .. last end
  std::vector<LayerTimelineRow> rows;  // in start order
};

struct Analysis {
  std::string source;      // Timeline.source
  // The trace is complete when the source reported no degradation (Timeline.complete), no CUPTI
  // record was dropped and every kernel launch has its kernel record (launched == recorded).
  bool complete = true;
  uint64_t records_dropped = 0;   // Timeline.records_dropped (CUPTI buffers full)
  uint64_t kernels_launched = 0;  // Timeline.kernels_launched (launch API calls seen)
  uint64_t kernels_recorded = 0;  // Timeline.kernels_recorded (kernel records received)
  bool launches_counted = true;   // false for foreign trace files (no launch count; recorded = kernel events)
  std::vector<std::string> trace_messages;  // Timeline.messages: why incomplete, warnings
  std::vector<StepSample> steps;  // measured steps (step >= 0), or one sample for the whole timeline
  double step_median_us = 0, step_min_us = 0, step_max_us = 0;
  std::vector<OpCell> layer_ops;  // sorted by layer, then canonical op order
  std::vector<OpSummary> ops;     // canonical op order (unknown ops after, by name)
  std::vector<KernelStat> top_kernels;  // by total time, at most 20
  // Distinct kernel names before top_kernels was cut to 20: equal to top_kernels.size() when the list is
  // complete (a kernel missing from a complete list did not run; from a cut one, it may only be smaller).
  int64_t kernels_distinct = 0;
  std::vector<Hotspot> hotspots;        // KV cast first, then generic, by share
  double attention_us = 0;       // per step, ops "attn.*"
  double cast_us = 0;            // per step, the KV dtype cast (ops or matched cast kernels)
  double total_kernel_us = 0;    // per step, all kernels
  double gpu_idle_us = 0;        // per step (mean of StepSample::idle_us): the device ran nothing
  double kernels_per_step = 0;   // kernel activities per measured step
  bool graph_replayed = false;   // Timeline.graph_kernels > 0: the kernels came from CUDA graph replays
  LayerTimeline layer_timeline;  // the typical layer, kernel by kernel
};

// The LayerTimeline of `work` (device work of the measured steps; kernels only are read).
LayerTimeline layer_timeline(const std::vector<const Activity*>& work);

// Canonical op order for tables: the order in which a decoder layer runs them.
const std::vector<std::string>& canonical_op_order();

// True if the op is a KV dtype cast of ours (attn.kv_cast, attn.kv_gather_cast) or the activity is a
// PyTorch cast kernel (direct_copy_kernel_cuda / unrolled_elementwise_kernel under aten::copy_,
// aten::_to_copy or aten::to, LoadWithCast/StoreWithCast) or an fp8 dequantize kernel.
// Activities of our engine's other ops (attn.*, mlp.*, moe.*, lm_head) are never KV casts: a dequantize kernel there
// converts FP8 weights.
bool is_kv_cast(const Activity& a);

// Exclusive time of each activity on its stream [ns], element i for work[i]: from max(start, the
// latest end of the activities that started earlier on the same (device, stream)) to its end, 0 if
// an earlier one covers it. Kernels launched with programmatic dependent launch (kernels/launch.cuh)
// start, and wait in griddepcontrol.wait, before their predecessor ends, so raw durations overlap and
// their sum exceeds the time the stream was busy; exclusive times add up to the union of the
// intervals per stream, and a kernel's overlap with its predecessor counts once, for the predecessor.
// Without overlap each value is the duration. Activities without a stream (-1: host) are not clipped.
std::vector<int64_t> exclusive_durations_ns(const std::vector<const Activity*>& work);

// For each side-stream activity (side[i] != 0: an op the engine declared on its side stream, OpDesc::stream), the
// part of its exclusive time [ns] during which another stream of the same device was busy (that stream's
// activities' exclusive intervals): time hidden behind it. 0 for the others. Element i for work[i]; `exclusive_ns`
// is exclusive_durations_ns(work).
std::vector<int64_t> overlapped_durations_ns(const std::vector<const Activity*>& work,
                                             const std::vector<int64_t>& exclusive_ns, const std::vector<char>& side);

// Throws nothing; an empty timeline gives an empty Analysis. Only steps >= 0 are measured when any
// activity carries a step; warm-up steps (< 0) are left out. Op, kernel and step-busy times are
// exclusive times (exclusive_durations_ns).
Analysis analyze(const Timeline& t, const Peaks& peaks);

struct PathResult {
  std::string path;               // "cast" | "gather-cast" | "fp8" | any label
  double step_median_us = 0;
  double attention_us = 0;        // per step
  double cast_us = 0;             // per step
  double cast_share = 0;          // cast_us / step_median_us
  double speedup_vs_cast = 0;     // step_median_us("cast") / step_median_us; 0 without a "cast" path
};

struct PathComparison {
  std::vector<PathResult> paths;  // input order
  std::string winner;             // lowest step median; "" for no paths
};

PathComparison compare_paths(const std::vector<std::pair<std::string, Analysis>>& runs);

}  // namespace glm5
