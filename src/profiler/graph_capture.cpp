#include "profiler/graph_capture.h"

#include <cupti.h>

#include <algorithm>
#include <vector>

#include "common/error.h"

namespace glm5 {

namespace {

uint64_t node_id(cudaGraphNode_t n) {
  uint64_t id = 0;
  if (cuptiGetGraphNodeId(reinterpret_cast<CUgraphNode>(n), &id) != CUPTI_SUCCESS) return 0;
  return id;
}

// Edge data must be asked for: edges with non-default data (programmatic dependent launch, which
// cuBLASLt and our kernels may use) make a query without it fail with cudaErrorLossyQuery.
std::vector<cudaGraphNode_t> dependencies(cudaGraphNode_t n) {
  size_t count = 0;
  CUDA_CHECK(cudaGraphNodeGetDependencies(n, nullptr, nullptr, &count));
  std::vector<cudaGraphNode_t> deps(count);
  std::vector<cudaGraphEdgeData> edges(count);
  if (count) CUDA_CHECK(cudaGraphNodeGetDependencies(n, deps.data(), edges.data(), &count));
  deps.resize(count);
  return deps;
}

struct CloneSink {
  std::map<uint64_t, uint64_t>* clone_of = nullptr;
  int failures = 0;
};

void CUPTIAPI on_resource(void* user, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* cbdata) {
  if (domain != CUPTI_CB_DOMAIN_RESOURCE || cbid != CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED || !user || !cbdata) return;
  auto* sink = static_cast<CloneSink*>(user);
  const auto* rd = static_cast<const CUpti_ResourceData*>(cbdata);
  const auto* gd = static_cast<const CUpti_GraphData*>(rd->resourceDescriptor);
  uint64_t clone = 0, original = 0;
  if (gd && gd->node && gd->originalNode && cuptiGetGraphNodeId(gd->node, &clone) == CUPTI_SUCCESS &&
      cuptiGetGraphNodeId(gd->originalNode, &original) == CUPTI_SUCCESS)
    (*sink->clone_of)[clone] = original;
  else
    ++sink->failures;
}

std::string cupti_error(CUptiResult r) {
  const char* s = nullptr;
  cuptiGetResultString(r, &s);
  return s ? s : "CUPTI error " + std::to_string(int(r));
}

}  // namespace

namespace {
// CUPTI's id of `stream` (the streamId its activity records carry), 0 if CUPTI cannot say. Asked before the
// capture begins: a query on a capturing stream may be refused.
uint32_t cupti_stream_id(cudaStream_t stream) {
  uint32_t id = 0;
  if (!stream || cuptiGetStreamIdEx(nullptr, reinterpret_cast<CUstream>(stream), 0, &id) != CUPTI_SUCCESS) return 0;
  return id;
}
}  // namespace

GraphCaptureRecorder::GraphCaptureRecorder(cudaStream_t stream, CapturedGraph& out, cudaStream_t side)
    : stream_(stream), side_(side), out_(out), main_id_(cupti_stream_id(stream)), side_id_(cupti_stream_id(side)) {}

void GraphCaptureRecorder::collect(CapturedOp& into, cudaStream_t stream) {
  into.stream_id = stream == side_ && side_ ? side_id_ : main_id_;
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  const cudaGraphNode_t* frontier = nullptr;
  const cudaGraphEdgeData* edges = nullptr;  // asked for: see dependencies()
  size_t n = 0;
  CUDA_CHECK(cudaStreamGetCaptureInfo(stream, &status, nullptr, nullptr, &frontier, &edges, &n));
  require(status == cudaStreamCaptureStatusActive, "graph capture: the engine stream is not capturing");
  // Walk back from the frontier to the nodes already assigned; the walk meets a single-stream
  // capture's nodes newest first, so reversing gives capture order.
  std::vector<cudaGraphNode_t> stack(frontier, frontier + n), found;
  while (!stack.empty()) {
    cudaGraphNode_t x = stack.back();
    stack.pop_back();
    if (!seen_.insert(x).second) continue;
    found.push_back(x);
    for (cudaGraphNode_t d : dependencies(x)) stack.push_back(d);
  }
  std::reverse(found.begin(), found.end());
  for (cudaGraphNode_t x : found) {
    cudaGraphNodeType type = cudaGraphNodeTypeKernel;
    CUDA_CHECK(cudaGraphNodeGetType(x, &type));
    CapturedNode c;
    c.id = node_id(x);
    c.kernel = type == cudaGraphNodeTypeKernel;
    if (c.id == 0 && out_.messages.empty()) out_.messages.push_back("cuptiGetGraphNodeId failed for a captured node");
    into.nodes.push_back(c);
  }
}

void GraphCaptureRecorder::begin_op(const OpDesc& op) {
  flush();  // nodes captured outside ops so far
  open_ = true;
  current_ = op;
}

void GraphCaptureRecorder::end_op() {
  CapturedOp o;
  o.op = current_;
  collect(o, current_.stream ? static_cast<cudaStream_t>(current_.stream) : stream_);
  out_.ops.push_back(std::move(o));
  open_ = false;
}

void GraphCaptureRecorder::flush() {
  CapturedOp o;  // op "" : not any op's
  collect(o, stream_);
  if (!o.nodes.empty()) out_.ops.push_back(std::move(o));
}

cudaGraphExec_t instantiate_tracked(cudaGraph_t graph, CapturedGraph& out) {
  CloneSink sink;
  sink.clone_of = &out.clone_of;
  CUpti_SubscriberHandle sub = nullptr;
  CUptiResult r = cuptiSubscribe(&sub, reinterpret_cast<CUpti_CallbackFunc>(on_resource), &sink);
  if (r == CUPTI_SUCCESS) {
    r = cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED);
    if (r != CUPTI_SUCCESS) out.messages.push_back("cuptiEnableCallback(GRAPHNODE_CLONED): " + cupti_error(r));
  } else {
    sub = nullptr;
    out.messages.push_back("cuptiSubscribe: " + cupti_error(r) +
                           " (graph node ids not mapped; replayed kernels attributed by launch order)");
  }
  cudaGraphExec_t exec = nullptr;
  const cudaError_t e = cudaGraphInstantiate(&exec, graph, 0);
  if (sub) cuptiUnsubscribe(sub);
  if (e != cudaSuccess)
    throw Error(std::string("cudaGraphInstantiate of the decode step failed: ") + cudaGetErrorName(e) + " (" +
                cudaGetErrorString(e) + ")");
  if (sink.failures) out.messages.push_back(std::to_string(sink.failures) + " cloned graph nodes without ids");
  uint32_t id = 0;
  if (cuptiGetGraphId(reinterpret_cast<CUgraph>(graph), &id) == CUPTI_SUCCESS) out.graph_id = id;
  if (cuptiGetGraphExecId(reinterpret_cast<CUgraphExec>(exec), &id) == CUPTI_SUCCESS) out.exec_id = id;
  return exec;
}

}  // namespace glm5
