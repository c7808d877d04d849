#include "profiler/nvtx_tracer.h"

#include <nvtx3/nvToolsExt.h>

namespace glm5 {

void NvtxTracer::begin_range(const std::string& name) { nvtxRangePushA(name.c_str()); }
void NvtxTracer::end_range() { nvtxRangePop(); }
void NvtxTracer::begin_op(const OpDesc& op) { nvtxRangePushA(op.op.c_str()); }
void NvtxTracer::end_op() { nvtxRangePop(); }

}  // namespace glm5
