// The engine's one window onto profiling. The engine opens ranges step.N > layer.N > op around its
// work and declares, per op, the bytes it must move and the FLOPs it must do. Implementations:
//   - NVTX + CUPTI external correlation (CUDA backend): ranges become NVTX push/pop, each op pushes
//     a CUPTI external correlation id so every kernel it launches is attributed to (step, layer, op);
//   - host clock (CPU backend): the op's wall time becomes a CPU "kernel" in the same Timeline;
//   - null: does nothing (untraced runs).
#pragma once
#include <cstdint>
#include <string>

namespace glm5 {

struct CapturedGraph;  // profiler/graph_record.h

// One op of the decode step, as the engine declares it at the launch site.
struct OpDesc {
  int step = -1;        // decode step index (warm-up steps are negative or flagged by the caller)
  int layer = -1;       // decoder layer, -1 outside layers (embedding, final norm, lm_head)
  std::string op;       // e.g. "attn.q_a_proj", "attn.indexer", "attn.kv_cast", "attn.mla", "moe.experts"
  double bytes = 0;     // bytes the op must move through device memory (each input read once, output written once)
  double flops = 0;     // floating-point operations (multiply-add = 2)
  // CUDA backend: the cudaStream_t the op's kernels go to when it is not the engine's main stream (an op the
  // engine overlaps with the main chain on its side stream); null: the main stream. Graph capture asks this
  // stream for the op's nodes (GraphCaptureRecorder).
  void* stream = nullptr;
};

class OpTracer {
 public:
  virtual ~OpTracer() = default;
  // A named range (e.g. "step.3", "layer.12"); ranges nest and must be closed in LIFO order.
  virtual void begin_range(const std::string& name) { (void)name; }
  virtual void end_range() {}
  // An op: a range named op.op whose kernels are attributed to (step, layer, op).
  virtual void begin_op(const OpDesc& op) { (void)op; }
  virtual void end_op() {}
  // A replay of a captured CUDA graph (the whole decode step) is about to be launched / was launched:
  // its kernels belong to `step`, their layer and op come from `graph` (which must outlive the
  // tracer's use of it; the tracer may copy it). The launch happens between the two calls.
  virtual void begin_graph_launch(int step, const CapturedGraph& graph) { (void)step; (void)graph; }
  virtual void end_graph_launch() {}
  // The engine is capturing its step into a CUDA graph between these calls: launch API calls made
  // meanwhile run nothing (no kernel records follow them), and op scopes go to the capture recorder.
  virtual void begin_graph_capture() {}
  virtual void end_graph_capture() {}
};

// RAII helpers for the engine.
class RangeScope {
 public:
  RangeScope(OpTracer& t, const std::string& name) : t_(t) { t_.begin_range(name); }
  ~RangeScope() { t_.end_range(); }
  RangeScope(const RangeScope&) = delete;
  RangeScope& operator=(const RangeScope&) = delete;

 private:
  OpTracer& t_;
};

class OpScope {
 public:
  OpScope(OpTracer& t, const OpDesc& op) : t_(t) { t_.begin_op(op); }
  ~OpScope() { t_.end_op(); }
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;

 private:
  OpTracer& t_;
};

}  // namespace glm5
