// Recording which CUDA graph nodes each op of a captured decode step became (graph_record.h).
//
// GraphCaptureRecorder is the OpTracer the engine uses while `stream` is being captured
// (cudaStreamBeginCapture .. cudaStreamEndCapture): at each op boundary it asks the capture sequence
// for its current frontier (cudaStreamGetCaptureInfo) and walks back through node dependencies to
// the nodes not seen yet: those are the op's nodes (an op on a side stream, OpDesc::stream: that
// stream's frontier; its fork from the main stream leads back to nodes already seen). Each gets its CUPTI node id
// (cuptiGetGraphNodeId). Nodes captured outside any op go into an op with an empty name.
//
// instantiate_tracked() instantiates the captured graph while a CUPTI resource callback records
// CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED (instantiated node id -> captured node id): replayed kernels
// carry the instantiated node's id. If CUPTI cannot subscribe (another subscriber, e.g. a profiler
// attached from outside) the map stays empty and a message says so; attribution then falls back to
// the launch order of kernels within a replay (cupti_records.h).
#pragma once
#include <cuda_runtime.h>

#include <string>
#include <unordered_set>

#include "profiler/graph_record.h"
#include "profiler/op_tracer.h"

namespace glm5 {

class GraphCaptureRecorder : public OpTracer {
 public:
  // `out` receives the ops; it must outlive the recorder. `stream` must be capturing while ops run; `side`
  // (optional) is the engine's side stream, whose ops declare it in OpDesc::stream. Construct before the
  // capture begins (the streams' CUPTI ids are asked here: CapturedOp::stream_id).
  GraphCaptureRecorder(cudaStream_t stream, CapturedGraph& out, cudaStream_t side = nullptr);
  void begin_op(const OpDesc& op) override;
  void end_op() override;
  // Collects the nodes captured since the last op boundary (call before cudaStreamEndCapture).
  // Throws glm5::Error if the stream is not capturing.
  void flush();

 private:
  void collect(CapturedOp& into, cudaStream_t stream);

  cudaStream_t stream_, side_;
  CapturedGraph& out_;
  uint32_t main_id_ = 0, side_id_ = 0;  // CUPTI stream ids (0: unknown)
  std::unordered_set<cudaGraphNode_t> seen_;
  bool open_ = false;
  OpDesc current_;
};

// cudaGraphInstantiate(graph) with the clone map, graph_id and exec_id recorded into `out`.
// Throws glm5::Error if instantiation fails.
cudaGraphExec_t instantiate_tracked(cudaGraph_t graph, CapturedGraph& out);

}  // namespace glm5
