// Internal to analysis/: roofline numbers and hotspot rules (see analysis.h for the types).
#pragma once
#include <string>
#include <cstdint>
#include <vector>

#include "analysis/analysis.h"

namespace glm5 {

// "(unattributed)" for an empty op name, else the name.
std::string op_label(const std::string& op);

// Fills share, achieved GB/s and TFLOP/s and % of peak of `s` from its time, bytes and FLOPs.
// GB/s = bytes / time (1 GB = 1e9 bytes); TFLOP/s = flops / time (1e12). Zero time or peak gives 0.
void fill_roofline(OpSummary& s, double step_median_us, const Peaks& peaks);

// Hotspot rules over the measured device work `work` of `a` (per-step numbers already in `a`):
// 1. KV dtype cast (is_kv_cast): share of step, bytes, achieved GB/s, % of copy peak, saving;
// 2. any other op taking more than 30% of the step (sorted by share);
// 3. latency-bound ops ("latency_bound"): per layer, ops that declare bytes or FLOPs, whose kernels average
//    under 10 us and whose roofline floor is under 25% of their time, or under 50 us with a floor under 5% (a
//    serial chain inside the kernel, e.g. a top-k) (needs Peaks.copy_gbps; ops of rules 1 and 2 left out),
//    reported once, together, when they add up to 10% of the step;
// 5. under-streaming ops ("under_streaming"): memory-bound ops (a byte floor of at least 25% of their exposed time)
//    below 80% of the copy peak, not named by rules 1-3, reported together when reaching 80% would save 2% of the
//    step (needs Peaks.copy_gbps);
// 4. the device idle within the step ("gpu_idle") when it reaches 10% of the step.
// Order: cast first, then the op-share hotspots by share, the latency-bound one, the under-streaming one, GPU idle.
// exclusive_ns[i]: work[i]'s exclusive time on its stream (exclusive_durations_ns) [ns].
std::vector<Hotspot> find_hotspots(const std::vector<const Activity*>& work, const std::vector<int64_t>& exclusive_ns,
                                   const Analysis& a, const Peaks& peaks);

}  // namespace glm5
