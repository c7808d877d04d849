#include "analysis/hotspots.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

namespace glm5 {

namespace {

bool contains(const std::string& s, const char* needle) { return s.find(needle) != std::string::npos; }

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Our engine's two KV cast ops (rule 1 reports them; the other rules leave them out).
bool kv_cast_op(const std::string& op) { return op == "attn.kv_cast" || op == "attn.kv_gather_cast"; }

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

// Fraction of the copy peak a well-written streaming kernel reaches on HBM (nvbench-style copy tests
// reach ~85-90%): the target used to estimate savings of under-performing memory-bound ops.
constexpr double kAchievableFraction = 0.8;
constexpr double kOpShareThreshold = 0.30;
// Latency-bound kernels: an op (in one layer) that declares its bytes or FLOPs, whose kernels average under
// kLatencyKernelUs and whose roofline floor max(bytes / copy peak, FLOPs / BF16 peak) is under
// kLatencyRooflineFraction of its time.
// On an H200 a dependent kernel costs ~2-4 us before it does any work (reports/2026-11-30-h200-decode-step.md),
// so below ~10 us that fixed cost dominates. Reported when such ops add up to kLatencyShareThreshold.
constexpr double kLatencyKernelUs = 10.0;
constexpr double kLatencyRooflineFraction = 0.25;
constexpr double kLatencyShareThreshold = 0.10;
// Also latency-bound: kernels averaging under kSerialKernelUs whose floor is under kSerialRooflineFraction of their
// time. Longer than a launch's fixed cost, but they move next to nothing for it: a serial chain inside the kernel
// (radix passes, cluster barriers, dependent memory round trips). GLM-5's batch-1 top-k is one: ~16 us per layer for
// 128 KB of scores on an H100, 0.3% of copy (reports/2026-12-07-h100-decode-step.md, 1234 us per step), which the
// 10 us rule alone left out of the report.
constexpr double kSerialKernelUs = 50.0;
constexpr double kSerialRooflineFraction = 0.05;
// Under-streaming: ops that must stream their declared bytes (a roofline floor of at least kLatencyRooflineFraction of
// their exposed time, bytes rather than FLOPs) but run below kAchievableFraction of the copy peak, not already named
// by the rules above; reported when what they would save at that fraction adds up to kUnderStreamShareThreshold of
// the step. GLM-5's batch-1 projections on an H100 (S36b, Nsight Compute): attn.qkv_a_proj at 32% of DRAM peak, the
// GEMV's warps stalled on one step of loads at a time.
constexpr double kUnderStreamShareThreshold = 0.02;
// GPU idle: reported when the device ran nothing for at least this share of the step's span.
constexpr double kIdleShareThreshold = 0.10;
// Kernels launched at least this often (us per kernel, step / kernels) with the device idle: launch-bound. An eager
// GLM-5 batch-1 step on the H200 launches one every 10.6 us (S18f: 1709 kernels in 18.1 ms).
constexpr double kLaunchBoundUsPerKernel = 20.0;

}  // namespace

bool is_kv_cast(const Activity& a) {
  if (kv_cast_op(a.op)) return true;
  if (a.kind != ActivityKind::kernel) return false;
  // Our engine casts KV only in the two ops above; any other op of ours (attn.*, mlp.*, moe.*, lm_head) that runs a
  // dequantize kernel converts FP8 weights (fp8_block_dequant_bf16_*: --fp8-large-m dequant), not the KV cache
  // (session 23: batch-128 profiles counted the projections' weight dequantization as a KV cast).
  const bool ours = a.op.rfind("attn.", 0) == 0 || a.op.rfind("mlp.", 0) == 0 || a.op.rfind("moe.", 0) == 0 ||
                    a.op == "lm_head";
  if (ours) return false;
  // PyTorch casts: the copy kernel (direct_copy_kernel_cuda, run through unrolled_elementwise_kernel
  // with LoadWithCast/StoreWithCast when dtypes differ) under aten::copy_ / _to_copy / to.
  const bool cast_op = a.op == "aten::copy_" || a.op == "aten::_to_copy" || a.op == "aten::to";
  if (contains(a.name, "direct_copy_kernel_cuda") && (cast_op || contains(a.name, "WithCast")))
    return true;
  if (contains(a.name, "unrolled_elementwise_kernel") && cast_op) return true;
  // fp8 dequantize kernels (SGLang / vLLM / FlashInfer name them so).
  const std::string n = lower(a.name);
  return contains(n, "dequant") && (contains(n, "fp8") || contains(n, "e4m3") || contains(n, "float8"));
}

void fill_roofline(OpSummary& s, double step_median_us, const Peaks& peaks) {
  s.share = step_median_us > 0 ? s.time_us / step_median_us : 0;
  const double seconds = s.time_us * 1e-6;
  s.achieved_gbps = seconds > 0 ? s.bytes / seconds / 1e9 : 0;
  s.achieved_tflops = seconds > 0 ? s.flops / seconds / 1e12 : 0;
  s.pct_copy_peak = peaks.copy_gbps > 0 ? 100.0 * s.achieved_gbps / peaks.copy_gbps : 0;
  s.pct_bf16_peak = peaks.bf16_tflops > 0 ? 100.0 * s.achieved_tflops / peaks.bf16_tflops : 0;
}

std::vector<Hotspot> find_hotspots(const std::vector<const Activity*>& work, const std::vector<int64_t>& exclusive_ns,
                                   const Analysis& a, const Peaks& peaks) {
  std::vector<Hotspot> out;
  const double n_steps = std::max<size_t>(a.steps.size(), 1);

  // 1. KV dtype cast.
  double cast_ns = 0, cast_bytes = 0;
  std::set<uint64_t> instances;
  std::set<std::string> ours, kernels;
  for (size_t i = 0; i < work.size(); ++i) {
    const Activity* x = work[i];
    if (!is_kv_cast(*x)) continue;
    cast_ns += exclusive_ns[i];
    if (kv_cast_op(x->op)) {
      ours.insert(x->op);
      if (x->external_id == 0 || instances.insert(x->external_id).second) cast_bytes += x->bytes;
    } else {
      kernels.insert(x->op.empty() ? std::string("cast kernels") : x->op + " cast kernels");
      cast_bytes += static_cast<double>(x->bytes_copied);
    }
  }
  if (cast_ns > 0) {
    Hotspot h;
    h.kind = "kv_dtype_cast";
    for (const auto* set : {&ours, &kernels})
      for (const std::string& s : *set) h.what += (h.what.empty() ? "" : ", ") + s;
    h.time_us = cast_ns / 1e3 / n_steps;
    h.bytes = cast_bytes / n_steps;
    h.share_of_step = a.step_median_us > 0 ? h.time_us / a.step_median_us : 0;
    h.achieved_gbps = h.time_us > 0 ? h.bytes / (h.time_us * 1e-6) / 1e9 : 0;
    h.pct_of_peak = peaks.copy_gbps > 0 ? 100.0 * h.achieved_gbps / peaks.copy_gbps : 0;
    h.est_saving_us = h.time_us;  // the native FP8 path removes the cast (upper bound)
    const std::string numbers =
        fmt("%.1f", h.time_us) + " us per step (" + fmt("%.1f", 100 * h.share_of_step) + "% of " +
        fmt("%.1f", a.step_median_us) + " us)" +
        (h.bytes > 0 ? ", moving " + fmt("%.1f", h.bytes / 1e6) + " MB at " + fmt("%.0f", h.achieved_gbps) +
                           " GB/s" + (peaks.copy_gbps > 0 ? " (" + fmt("%.0f", h.pct_of_peak) + "% of copy peak)" : "")
                     : std::string());
    const double after = a.step_median_us - h.est_saving_us;
    const std::string saving = "saves up to " + fmt("%.1f", h.est_saving_us) + " us per step" +
                               (after > 0 ? " (step " + fmt("%.1f", a.step_median_us) + " -> " +
                                                fmt("%.1f", after) + " us, " +
                                                fmt("%.2f", a.step_median_us / after) + "x)"
                                          : std::string());
    if (ours.count("attn.kv_cast"))
      h.recommendation = "Casting the whole FP8 KV pool to BF16 takes " + numbers +
                         ". Read FP8 directly in the attention kernel (--kv-path fp8): " + saving +
                         "; or gather the top-k rows before casting (--kv-path gather-cast), whose cost "
                         "grows with the referenced rows instead of the pool capacity.";
    else if (ours.count("attn.kv_gather_cast"))
      h.recommendation = "Gathering and casting the referenced KV rows takes " + numbers +
                         ". Reading FP8 directly in the attention kernel (--kv-path fp8) " + saving + ".";
    else
      h.recommendation = "Dtype-cast kernels (" + h.what + ") take " + numbers +
                         ". If they convert an FP8 KV cache for a BF16 attention kernel, use an attention "
                         "kernel that reads FP8 directly (" + saving +
                         "), or gather the referenced rows before casting.";
    out.push_back(h);
  }

  // 2. Any other op above 30% of the step.
  std::vector<Hotspot> generic;
  for (const OpSummary& s : a.ops) {
    if (kv_cast_op(s.op) || s.share <= kOpShareThreshold) continue;
    Hotspot h;
    h.kind = "op_share";
    h.what = op_label(s.op);
    h.time_us = s.time_us;
    h.share_of_step = s.share;
    h.bytes = s.bytes;
    h.achieved_gbps = s.achieved_gbps;
    h.pct_of_peak = s.pct_copy_peak;
    std::string text = h.what + " takes " + fmt("%.1f", s.time_us) + " us per step (" +
                       fmt("%.1f", 100 * s.share) + "% of the step)";
    if (peaks.copy_gbps > 0 && s.bytes > 0) {
      const double ideal_us = s.bytes / (kAchievableFraction * peaks.copy_gbps * 1e9) * 1e6;
      h.est_saving_us = std::max(0.0, s.time_us - ideal_us);
      text += " at " + fmt("%.0f", s.achieved_gbps) + " GB/s (" + fmt("%.0f", s.pct_copy_peak) +
              "% of copy peak). ";
      text += h.est_saving_us > 0
                  ? "A kernel reaching 80% of the copy peak would save about " +
                        fmt("%.1f", h.est_saving_us) + " us per step."
                  : "It is at the bandwidth roofline: only moving fewer bytes makes it faster.";
    } else {
      text += ". No declared bytes or device peak: no roofline estimate.";
    }
    h.recommendation = text;
    generic.push_back(h);
  }
  std::stable_sort(generic.begin(), generic.end(),
                   [](const Hotspot& x, const Hotspot& y) { return x.share_of_step > y.share_of_step; });
  out.insert(out.end(), generic.begin(), generic.end());

  // 3. Latency-bound kernels: many short kernels far below both roofline ceilings (batch-1 decode).
  // Only ops that declare their bytes or FLOPs (no roofline floor otherwise: a foreign trace's short kernels
  // are not called latency-bound on no evidence), on a device with a known copy peak, and not already reported
  // by rules 1 and 2 (no time counted twice).
  std::set<std::string> reported;
  for (const Hotspot& h : out) reported.insert(h.what);
  double lat_us = 0, lat_floor_us = 0, lat_kernels = 0, lat_layer_kernels = 0, lat_bytes = 0;
  std::map<std::string, double> by_op;  // op -> us per step
  std::set<int> lat_layers;
  for (const OpCell& c : a.layer_ops) {
    if (peaks.copy_gbps <= 0 || (c.bytes <= 0 && c.flops <= 0)) continue;
    if (c.kernels <= 0 || c.time_us <= 0) continue;
    const double kernel_us = c.time_us / c.kernels;
    if (kernel_us >= kSerialKernelUs) continue;
    if (kv_cast_op(c.op) || reported.count(op_label(c.op))) continue;
    // Only the exposed part counts: time a side stream spent behind the main chain's work costs the step nothing.
    const double exposed_us = c.time_us - c.overlapped_us;
    const double floor_us = std::max(c.bytes / (peaks.copy_gbps * 1e3),
                                     peaks.bf16_tflops > 0 ? c.flops / (peaks.bf16_tflops * 1e6) : 0.0);
    const double max_floor =
        (kernel_us < kLatencyKernelUs ? kLatencyRooflineFraction : kSerialRooflineFraction) * exposed_us;
    if (exposed_us <= 0 || floor_us >= max_floor) continue;
    const double exposed = exposed_us / c.time_us;  // the exposed share: bytes, floor and kernels scale with it
    lat_us += exposed_us;
    lat_floor_us += floor_us * exposed;
    lat_kernels += c.kernels * exposed;
    lat_bytes += c.bytes * exposed;
    by_op[op_label(c.op)] += exposed_us;
    if (c.layer >= 0) {
      lat_layers.insert(c.layer);
      lat_layer_kernels += c.kernels * exposed;
    }
  }
  const bool latency_reported = a.step_median_us > 0 && lat_us >= kLatencyShareThreshold * a.step_median_us;
  if (latency_reported) {
    Hotspot h;
    h.kind = "latency_bound";
    std::vector<std::pair<std::string, double>> ops(by_op.begin(), by_op.end());
    std::stable_sort(ops.begin(), ops.end(), [](const auto& x, const auto& y) { return x.second > y.second; });
    std::string list;
    for (size_t i = 0; i < ops.size(); ++i) {
      if (i == 6) {
        list += ", and " + std::to_string(ops.size() - 6) + " more";
        break;
      }
      h.what += (i ? ", " : "") + ops[i].first;
      list += (i ? ", " : "") + ops[i].first + " " + fmt("%.0f", ops[i].second) + " us";
    }
    h.time_us = lat_us;
    h.share_of_step = lat_us / a.step_median_us;
    h.bytes = lat_bytes;
    h.achieved_gbps = lat_bytes / (lat_us * 1e-6) / 1e9;
    h.pct_of_peak = peaks.copy_gbps > 0 ? 100.0 * h.achieved_gbps / peaks.copy_gbps : 0;
    h.est_saving_us = lat_us - lat_floor_us;
    const std::string per_layer =
        lat_layers.empty() ? std::string()
                           : " (" + fmt("%.1f", lat_layer_kernels / double(lat_layers.size())) + " per layer over " +
                                 std::to_string(lat_layers.size()) + " layers)";
    h.recommendation = fmt("%.0f", lat_kernels) + " kernels per step" + per_layer + " belong to ops whose kernels " +
                       "average under " + fmt("%.0f", kLatencyKernelUs) + " us with a roofline floor under " +
                       fmt("%.0f", 100 * kLatencyRooflineFraction) + "% of their time, or under " +
                       fmt("%.0f", kSerialKernelUs) + " us with a floor under " +
                       fmt("%.0f", 100 * kSerialRooflineFraction) + "%: " + fmt("%.1f", lat_us) +
                       " us per step (" +
                       fmt("%.1f", 100 * h.share_of_step) + "% of the step; " + list +
                       "). At this size a kernel's time is its fixed cost (the previous kernel's drain, the launch, "
                       "the first memory round trip) or a serial chain inside it (passes, barriers, dependent round "
                       "trips), not its work; CUDA graphs and programmatic dependent launch hide only part of it. "
                       "Fusing these ops into their neighbours (a norm into the next "
                       "projection, a combine into its producer) or one persistent kernel per layer would save up "
                       "to " + fmt("%.1f", h.est_saving_us) + " us per step (their time above their roofline floor).";
    out.push_back(h);
  }

  // 5. Under-streaming ops (kUnderStreamShareThreshold): memory-bound, neither latency-bound (rule 3) nor named above.
  if (peaks.copy_gbps > 0 && a.step_median_us > 0) {
    Hotspot h;
    h.kind = "under_streaming";
    std::string list;
    int named = 0;  // ops counted; the first 6 (in canonical op order) are named
    for (const OpSummary& s : a.ops) {
      if (s.bytes <= 0 || s.time_us <= 0 || kv_cast_op(s.op) || reported.count(op_label(s.op)) ||
          (latency_reported && by_op.count(op_label(s.op))))
        continue;
      const double exposed_us = s.time_us - s.overlapped_us;
      const double bytes_us = s.bytes / (peaks.copy_gbps * 1e3);
      const double flops_us = peaks.bf16_tflops > 0 ? s.flops / (peaks.bf16_tflops * 1e6) : 0.0;
      if (exposed_us <= 0 || flops_us > bytes_us || bytes_us < kLatencyRooflineFraction * exposed_us) continue;
      const double exposed = exposed_us / s.time_us;
      const double saving = exposed_us - bytes_us * exposed / kAchievableFraction;
      if (saving <= 0) continue;
      if (++named <= 6) {
        h.what += (h.what.empty() ? "" : ", ") + op_label(s.op);
        list += (list.empty() ? "" : ", ") + op_label(s.op) + " " + fmt("%.0f", exposed_us) + " us at " +
                fmt("%.0f", s.pct_copy_peak) + "% of copy";
      }
      h.time_us += exposed_us;
      h.bytes += s.bytes * exposed;
      h.est_saving_us += saving;
    }
    if (named > 6) list += ", and " + std::to_string(named - 6) + " more";
    if (h.est_saving_us >= kUnderStreamShareThreshold * a.step_median_us) {
      h.share_of_step = h.time_us / a.step_median_us;
      h.achieved_gbps = h.bytes / (h.time_us * 1e-6) / 1e9;
      h.pct_of_peak = 100.0 * h.achieved_gbps / peaks.copy_gbps;
      h.recommendation =
          "Ops that stream their bytes run below " + fmt("%.0f", 100 * kAchievableFraction) + "% of the copy peak: " +
          list + " per step. Their time is set by bytes, but their kernels keep too few in flight for their size "
          "(typical of batch-1 GEMVs: each warp waits for one step of weight loads before it issues the next, and a "
          "split-K reduction tail; in a trace, a kernel admitted early under programmatic dependent launch also counts "
          "its wait). Deeper load pipelines (more steps in flight, a TMA ring, an L2 lookahead), fewer splits or a "
          "fused neighbour would save up to " + fmt("%.1f", h.est_saving_us) + " us per step (to " +
          fmt("%.0f", 100 * kAchievableFraction) + "% of the copy peak).";
      out.push_back(h);
    }
  }

  // 4. The device idle within the step: its work waited on the host (launch-bound). Measured on the device's own
  // timeline (a CPU-backend run has none: its gpu_idle_us is 0).
  if (a.step_median_us > 0 && a.gpu_idle_us >= kIdleShareThreshold * a.step_median_us) {
    Hotspot h;
    h.kind = "gpu_idle";
    h.what = "no device work";
    h.time_us = a.gpu_idle_us;
    h.share_of_step = a.gpu_idle_us / a.step_median_us;
    h.est_saving_us = a.gpu_idle_us;  // upper bound: the gaps closed, nothing else faster
    const double every_us = a.kernels_per_step > 0 ? a.step_median_us / a.kernels_per_step : 0;
    const std::string gaps = "The device ran no kernel, copy or memset for " + fmt("%.1f", h.time_us) + " us per step (" +
                             fmt("%.1f", 100 * h.share_of_step) + "% of the step, its first kernel to its last); " +
                             fmt("%.0f", a.kernels_per_step) + " kernels per step, one every " + fmt("%.1f", every_us) +
                             " us. ";
    // Launch-bound when the kernels come faster than a launch path keeps up with (a few us per launch, more with a
    // tracer attached); with long stretches between kernels the host is doing something else.
    if (a.graph_replayed)
      h.recommendation =
          gaps + "The kernels were replayed from a CUDA graph, so the gaps are not the host launching them: with "
          "node-level graph tracing each kernel node's CUPTI record adds some (compare the graph-level step time, "
          "glm5prof --graph-trace graph), else the graph's own dependencies (event waits, host nodes, memcpy nodes).";
    else if (every_us > 0 && every_us <= kLaunchBoundUsPerKernel)
      h.recommendation =
          gaps + "At that rate the host's launches set the pace (launch-bound). Launch the step as one CUDA graph "
          "(glm5prof --graph; PyTorch CUDA graphs or torch.compile mode=\"reduce-overhead\"; the serving engine's "
          "CUDA-graph decode) or fewer, larger kernels: up to " + fmt("%.1f", h.est_saving_us) +
          " us per step. A tracer's own per-launch work adds to the host's: compare with the untraced step time.";
    else
      h.recommendation =
          gaps + "Kernels this far apart are not launch overhead: in the gaps the host waits on something else "
          "(synchronization, a copy to the host, data loading, CPU-side ops, another rank). Look at the host "
          "timeline in those gaps: up to " + fmt("%.1f", h.est_saving_us) + " us per step.";
    out.push_back(h);
  }
  return out;
}

PathComparison compare_paths(const std::vector<std::pair<std::string, Analysis>>& runs) {
  PathComparison c;
  double cast_median = 0;
  for (const auto& [name, a] : runs)
    if (name == "cast") cast_median = a.step_median_us;
  double best = 0;
  for (const auto& [name, a] : runs) {
    PathResult r;
    r.path = name;
    r.step_median_us = a.step_median_us;
    r.attention_us = a.attention_us;
    r.cast_us = a.cast_us;
    r.cast_share = a.step_median_us > 0 ? r.cast_us / a.step_median_us : 0;
    r.speedup_vs_cast = cast_median > 0 && a.step_median_us > 0 ? cast_median / a.step_median_us : 0;
    if (a.step_median_us > 0 && (c.winner.empty() || a.step_median_us < best)) {
      best = a.step_median_us;
      c.winner = name;
    }
    c.paths.push_back(r);
  }
  return c;
}

}  // namespace glm5
