// Synthetic Timelines for the trace/analysis/report tests: exact, hand-checkable numbers.
#pragma once
#include <string>

#include "trace/timeline.h"

namespace glm5::test {

// Adds one op instance (external id `id`) with `kernels` kernels of `dur_ns` each, back to back from
// `*clock_ns` on device 0 stream 7, each with a runtime launch call on thread 11 (correlation ids
// 1000*id + k). Declares `bytes` and `flops` for the whole op.
inline void add_op(Timeline& t, int64_t* clock_ns, uint64_t id, int step, int layer, const std::string& op,
                   int kernels, int64_t dur_ns, double bytes, double flops = 0) {
  t.ops[id] = OpDesc{step, layer, op, bytes, flops};
  for (int k = 0; k < kernels; ++k) {
    Activity launch;
    launch.kind = ActivityKind::runtime;
    launch.name = "cudaLaunchKernel";
    launch.start_ns = *clock_ns - 500;
    launch.end_ns = *clock_ns - 400;
    launch.thread = 11;
    launch.correlation_id = 1000 * id + k;
    launch.external_id = id;
    t.activities.push_back(launch);
    Activity a;
    a.kind = ActivityKind::kernel;
    a.name = op + "_kernel" + std::to_string(k);
    a.start_ns = *clock_ns;
    a.end_ns = *clock_ns + dur_ns;
    a.device = 0;
    a.stream = 7;
    a.correlation_id = 1000 * id + k;
    a.external_id = id;
    a.grid = {k + 1, 2, 1};
    a.block = {128, 1, 1};
    a.step = step;
    a.layer = layer;
    a.op = op;
    a.bytes = bytes;
    a.flops = flops;
    t.activities.push_back(a);
    *clock_ns += dur_ns;
  }
}

// A decode run of `steps` steps x 2 layers, the given KV path:
//   per layer: attn.q_a_proj 2 kernels x 10 us (bytes 2e6), attn.kv_cast `cast_us` (1 kernel, bytes 8e6)
//   when cast_us > 0, attn.mla 1 kernel x mla_us, moe.experts 3 kernels x 20 us (bytes 6e6, flops 1e9).
// A warm-up step -1 (same content) comes first and must not count. Kernels are back to back, so a
// step lasts 2 * (20 + cast_us + mla_us + 60) us.
// A warm-up step (-1) and steps 0 and 1, each running layers 0 .. layers - 1 in order; for each, `body(op)` adds that
// step's and layer's ops by op(name, kernels, dur_ns, bytes) (add_op, back to back). Sorted, base time set.
template <typename F>
Timeline layered_steps(int layers, F body) {
  Timeline t;
  t.source = "cupti";
  int64_t clock = 1'000'000;
  uint64_t id = 1;
  for (int s = -1; s < 2; ++s)
    for (int layer = 0; layer < layers; ++layer)
      body([&](const std::string& op, int kernels, int64_t dur_ns, double bytes) {
        add_op(t, &clock, id++, s, layer, op, kernels, dur_ns, bytes);
      });
  sort_timeline(t);
  t.base_time_ns = earliest_time_ns(t);
  return t;
}

inline Timeline decode_run(int steps, double cast_us, double mla_us) {
  Timeline t;
  t.source = "cupti";
  int64_t clock = 1'000'000;
  uint64_t id = 1;
  for (int s = -1; s < steps; ++s) {
    for (int layer = 0; layer < 2; ++layer) {
      add_op(t, &clock, id++, s, layer, "attn.q_a_proj", 2, 10'000, 2e6);
      if (cast_us > 0) add_op(t, &clock, id++, s, layer, "attn.kv_cast", 1, int64_t(cast_us * 1e3), 8e6);
      add_op(t, &clock, id++, s, layer, "attn.mla", 1, int64_t(mla_us * 1e3), 1e6);
      add_op(t, &clock, id++, s, layer, "moe.experts", 3, 20'000, 6e6, 1e9);
    }
    clock += 5'000;  // gap between steps (not part of any step's span)
  }
  sort_timeline(t);
  t.base_time_ns = earliest_time_ns(t);
  t.kernels_launched = t.kernels_recorded = 0;
  for (const Activity& a : t.activities) t.kernels_recorded += a.kind == ActivityKind::kernel;
  t.kernels_launched = t.kernels_recorded;
  return t;
}

}  // namespace glm5::test
