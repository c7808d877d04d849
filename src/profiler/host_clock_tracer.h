// OpTracer for the CPU backend: steady_clock timestamps. Each op becomes an Activity of kind kernel on
// device -1, stream -1 ("cpu" in the Chrome trace) carrying the op's attribution; every range (step,
// layer, op) becomes a user_annotation Range. The same analysis and reports then apply unchanged.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "profiler/op_tracer.h"
#include "trace/timeline.h"

namespace glm5 {

class HostClockTracer : public OpTracer {
 public:
  HostClockTracer();
  // Called before every clock reading when set: the CUDA backend without CUPTI passes a device
  // synchronize, so an op's span covers its kernels (plus launch overhead) instead of its launch.
  void set_sync(std::function<void()> sync) { sync_ = std::move(sync); }
  void begin_range(const std::string& name) override;
  void end_range() override;    // throws glm5::Error if no range is open
  void begin_op(const OpDesc& op) override;
  void end_op() override;       // throws glm5::Error if no op is open
  // A CUDA graph replay of a whole step (--graph without CUPTI): one op "graph.replay" for the step
  // (layer -1) declaring the captured ops' bytes and FLOPs summed; per-op times need CUPTI.
  void begin_graph_launch(int step, const CapturedGraph& graph) override;
  void end_graph_launch() override { end_op(); }
  // The Timeline (source "host-clock"); open ranges/ops are closed at the current time (message kept).
  Timeline finish();

 private:
  struct Open {
    std::string name;
    int64_t start_ns;
    bool is_op;
    OpDesc op;
  };
  int64_t now_ns() const;  // sync_() first when set
  std::function<void()> sync_;
  void close(Open o, int64_t end_ns);
  std::vector<Open> stack_;
  Timeline timeline_;
  uint64_t next_id_ = 1;
};

}  // namespace glm5
