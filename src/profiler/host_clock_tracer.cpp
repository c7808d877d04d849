#include "profiler/host_clock_tracer.h"

#include "profiler/graph_record.h"

#include <chrono>

#include "common/error.h"

namespace glm5 {

HostClockTracer::HostClockTracer() { timeline_.source = "host-clock"; }

int64_t HostClockTracer::now_ns() const {
  if (sync_) sync_();
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void HostClockTracer::begin_range(const std::string& name) {
  stack_.push_back({name, now_ns(), false, {}});
}

void HostClockTracer::end_range() {
  const int64_t end = now_ns();
  require(!stack_.empty() && !stack_.back().is_op,
          stack_.empty() ? "HostClockTracer::end_range: no range is open"
                         : "HostClockTracer::end_range: the innermost open span is op '" +
                               stack_.back().name + "', expected end_op first");
  Open o = std::move(stack_.back());
  stack_.pop_back();
  close(std::move(o), end);
}

void HostClockTracer::begin_op(const OpDesc& op) { stack_.push_back({op.op, now_ns(), true, op}); }

void HostClockTracer::end_op() {
  const int64_t end = now_ns();
  require(!stack_.empty() && stack_.back().is_op,
          stack_.empty() ? "HostClockTracer::end_op: no op is open"
                         : "HostClockTracer::end_op: the innermost open span is range '" +
                               stack_.back().name + "', expected end_range first");
  Open o = std::move(stack_.back());
  stack_.pop_back();
  close(std::move(o), end);
}

void HostClockTracer::close(Open o, int64_t end_ns) {
  Range r;
  r.name = o.name;
  r.start_ns = o.start_ns;
  r.end_ns = end_ns;
  r.thread = 0;
  r.kind = RangeKind::user_annotation;
  if (o.is_op) {
    const uint64_t id = next_id_++;
    timeline_.ops[id] = o.op;
    Activity a;
    a.kind = ActivityKind::kernel;
    a.name = o.op.op;
    a.start_ns = o.start_ns;
    a.end_ns = end_ns;
    a.device = -1;
    a.stream = -1;
    a.external_id = id;
    a.correlation_id = id;
    a.step = o.op.step;
    a.layer = o.op.layer;
    a.op = o.op.op;
    a.bytes = o.op.bytes;
    a.flops = o.op.flops;
    timeline_.activities.push_back(std::move(a));
    r.step = o.op.step;
    r.layer = o.op.layer;
    r.op = o.op.op;
  }
  timeline_.ranges.push_back(std::move(r));
}

Timeline HostClockTracer::finish() {
  if (!stack_.empty()) {
    timeline_.messages.push_back(std::to_string(stack_.size()) +
                                 " ranges/ops still open at finish(); closed now");
    const int64_t end = now_ns();
    while (!stack_.empty()) {
      Open o = std::move(stack_.back());
      stack_.pop_back();
      close(std::move(o), end);
    }
  }
  Timeline t = std::move(timeline_);
  timeline_ = Timeline{};
  timeline_.source = "host-clock";
  assign_range_nesting(t.ranges);
  sort_timeline(t);
  t.kernels_launched = t.kernels_recorded = t.activities.size();
  t.base_time_ns = earliest_time_ns(t);
  return t;
}

void HostClockTracer::begin_graph_launch(int step, const CapturedGraph& graph) {
  OpDesc d{step, -1, "graph.replay", 0, 0};
  for (const CapturedOp& o : graph.ops) {
    d.bytes += o.op.bytes;
    d.flops += o.op.flops;
  }
  begin_op(d);
}

}  // namespace glm5
