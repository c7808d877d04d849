// Probes (DISABLED_: run by hand with --gtest_also_run_disabled_tests --gtest_filter=...): is a CUDA
// graph instantiated under one CUPTI tracing level (CuptiTracer::set_graph_trace_level) replayed
// safely, and traced, at the other level without capturing it again? `profile` does not rely on it: it
// re-captures after every switch (DecodeEngine::reset_graph) and leaves that step out. Device round P1
// (H200, CUDA 13.0, driver 580.159): one process doing both switches without re-capture died with
// SIGSEGV (rc 139) before finishing; these two tests take one switch each, in separate processes, and
// print a line after every step so the log shows where it stops.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <memory>

#include "common/buffer.h"
#include "common/error.h"
#include "engine/decode_engine.h"
#include "model/config.h"
#include "model/weights.h"
#include "profiler/cupti_records.h"
#include "profiler/cupti_tracer.h"
#include "profiler/nvtx_tracer.h"

using namespace glm5;

namespace {

Weights tiny_weights(const ModelConfig& cfg) {
  WeightOptions wo;
  wo.where = Where::Device;
  wo.matrix_dtype = DType::BF16;
  return synthetic_weights(cfg, 3, wo);
}

// glm5-tiny, batch 2, CUDA graph on; two untraced warm-up steps (eager, then captured).
struct Probe {
  ModelConfig cfg = builtin_model_config("glm5-tiny");
  Weights w = tiny_weights(cfg);
  NvtxTracer untraced;
  std::unique_ptr<DecodeEngine> e;
  std::vector<int32_t> tokens = {5, 6};
  Probe() {
    EngineOptions eo;
    eo.backend = Backend::Cuda;
    eo.kv_path = KvPath::Fp8;
    eo.batch = 2;
    eo.max_seq_len = 516;
    eo.pool_tokens = 2 * (eo.max_seq_len + 64) + 4096;
    eo.seed = 99;
    eo.precision = ActivationPrecision::Bf16;
    eo.graph = true;
    e = std::make_unique<DecodeEngine>(cfg, w, eo, untraced);
    e->pool().fill_context(500, e->stream());
    e->set_step_index(-2);
    for (int i = 0; i < 2; ++i) tokens = e->step(tokens);
  }
  void step(const char* what) {
    const int s = e->steps_done();
    tokens = e->step(tokens);
    CUDA_CHECK(cudaDeviceSynchronize());
    std::printf("PROBE step %d (%s): %.1f us\n", s, what, e->last_step_us());
    std::fflush(stdout);
  }
  void report(CuptiTracer& t) {
    e->set_tracer(untraced);
    const Timeline tl = t.finish();
    std::printf("PROBE finish() done\n");
    std::map<int, int> kernels;
    for (const Activity& a : tl.activities)
      if (a.kind == ActivityKind::kernel) ++kernels[a.step];
    const std::map<int, double> rec = graph_step_us(tl);
    for (int s = 0; s < 3; ++s)
      std::printf("PROBE step %d: %d kernel records, graph-level record %s\n", s, kernels.count(s) ? kernels[s] : 0,
                  rec.count(s) ? (std::to_string(rec.at(s)) + " us").c_str() : "none");
    for (const std::string& m : tl.messages) std::printf("  timeline: %s\n", m.c_str());
    std::fflush(stdout);
  }
};

}  // namespace

TEST(GraphTraceProbe, DISABLED_NodeLevelReplayOfAGraphInstantiatedAtGraphLevel) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  arrange_nvtx_injection();
  Probe p;
  CuptiTracer t(GraphTraceLevel::graph);
  p.e->set_tracer(t);
  p.e->reset_graph();
  p.e->set_step_index(0);
  p.step("graph level, captured and instantiated now");
  p.step("graph level");
  t.set_graph_trace_level(GraphTraceLevel::node);
  std::printf("PROBE switched to node level\n");
  std::fflush(stdout);
  p.step("node level, graph instantiated at graph level");
  p.report(t);
}

TEST(GraphTraceProbe, DISABLED_GraphLevelReplayOfAGraphInstantiatedAtNodeLevel) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  arrange_nvtx_injection();
  Probe p;
  CuptiTracer t(GraphTraceLevel::node);
  p.e->set_tracer(t);
  p.e->reset_graph();
  p.e->set_step_index(0);
  p.step("node level, captured and instantiated now");
  p.step("node level");
  t.set_graph_trace_level(GraphTraceLevel::graph);
  std::printf("PROBE switched to graph level\n");
  std::fflush(stdout);
  p.step("graph level, graph instantiated at node level");
  p.report(t);
}
