// OpTracer that only emits NVTX ranges (step > layer > op): for untraced runs under Nsight Systems or
// any external profiler. No CUPTI, no Timeline.
#pragma once
#include <string>

#include "profiler/op_tracer.h"

namespace glm5 {

class NvtxTracer : public OpTracer {
 public:
  void begin_range(const std::string& name) override;  // nvtxRangePushA(name)
  void end_range() override;                           // nvtxRangePop
  void begin_op(const OpDesc& op) override;            // nvtxRangePushA(op.op)
  void end_op() override;                              // nvtxRangePop
};

}  // namespace glm5
