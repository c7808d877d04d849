// What the profiler needs to know about a captured CUDA graph to attribute its replayed kernels
// (DESIGN.md, Attribution): under cudaGraphLaunch every kernel carries the launch's correlation id,
// so (step, layer, op) cannot come from per-op external correlation ids. Instead, while the step is
// captured, each op records which graph nodes its launches became; CUPTI kernel records of a replay
// carry the graph node id (CUpti_ActivityKernel.graphNodeId) of the *instantiated* node, which maps
// back to the captured node through the clone map recorded at instantiation
// (CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED). Plain structs: filled by src/profiler/graph_capture.*,
// read by build_timeline_from_records (cupti_records.h), testable without a GPU.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "profiler/op_tracer.h"

namespace glm5 {

struct CapturedNode {
  uint64_t id = 0;       // CUPTI graph node id of the captured (template) node (cuptiGetGraphNodeId)
  bool kernel = true;    // a kernel node (else memset / memcpy / other: not counted as a kernel launch)
};

struct CapturedOp {
  OpDesc op;                        // as declared at capture time; `step` is replaced by each launch's step
  std::vector<CapturedNode> nodes;  // the nodes its launches became, in capture order
  // CUPTI stream id of the stream the op was captured on (cuptiGetStreamIdEx; 0: unknown). A replay runs the
  // graph's parallel branches on the driver's internal streams, so its kernel records carry stream ids that say
  // nothing of the engine's order; attribution puts each replayed kernel back on its op's capture stream (the
  // main chain on one stream: the analysis' per-stream clipping of PDL overlap stays right).
  uint32_t stream_id = 0;
};

struct CapturedGraph {
  uint32_t graph_id = 0;            // cuptiGetGraphId of the captured graph (0: unknown)
  uint32_t exec_id = 0;             // cuptiGetGraphExecId of the instantiated graph (0: unknown)
  std::vector<CapturedOp> ops;      // in capture order (= execution order of a single-stream capture)
  std::map<uint64_t, uint64_t> clone_of;  // instantiated node id -> captured node id
  std::vector<std::string> messages;      // what went wrong while recording (ids missing, ...)

  size_t kernel_nodes() const {
    size_t n = 0;
    for (const CapturedOp& o : ops)
      for (const CapturedNode& x : o.nodes) n += x.kernel;
    return n;
  }
};

}  // namespace glm5
