// Graph-level CUDA graph tracing (--graph-trace graph): the CUPTI_ACTIVITY_KIND_GRAPH_TRACE record
// parser on hand-built CUpti_ActivityGraphTrace2 structs, and build_timeline_from_records on graph-level
// launches mixed with node-level ones (synthetic records: no GPU, no CUPTI calls).
#include <gtest/gtest.h>

#include <climits>
#include <cstdlib>
#include <cstring>

#include "analysis/analysis.h"
#include "profiler/cupti_parse.h"
#include "common/error.h"
#include "profiler/cupti_records.h"
#include "profiler/cupti_tracer.h"

namespace glm5 {
namespace {

CUpti_ActivityGraphTrace2 cupti_graph_record() {
  CUpti_ActivityGraphTrace2 g;
  std::memset(&g, 0xAB, sizeof g);  // every field set below; the rest (reserved) is junk on purpose
  g.kind = CUPTI_ACTIVITY_KIND_GRAPH_TRACE;
  g.correlationId = 4242;
  g.start = 1700000000123456789ull;
  g.end = 1700000000146000000ull;
  g.deviceId = 2;
  g.graphId = 17;
  g.contextId = 1;
  g.streamId = 13;
  g.endDeviceId = 3;
  g.endContextId = 1;
  return g;
}

TEST(GraphTraceParse, CopiesEveryField) {
  const GraphTraceRecord x = graph_trace_record(cupti_graph_record());
  EXPECT_EQ(x.correlation_id, 4242u);
  EXPECT_EQ(x.start_ns, 1700000000123456789ll);
  EXPECT_EQ(x.end_ns, 1700000000146000000ll);
  EXPECT_EQ(x.end_ns - x.start_ns, 22543211);
  EXPECT_EQ(x.device, 2);
  EXPECT_EQ(x.end_device, 3);
  EXPECT_EQ(x.stream, 13);
  EXPECT_EQ(x.graph_id, 17u);
}

TEST(GraphTraceParse, HostSideDevicesAndMissingTimestamps) {
  CUpti_ActivityGraphTrace2 g = cupti_graph_record();
  g.deviceId = uint32_t(INT_MAX);  // "the start is on the host" (cupti_activity.h)
  g.endDeviceId = uint32_t(INT_MAX);
  g.start = g.end = 0;             // CUPTI could not time it
  const GraphTraceRecord x = graph_trace_record(g);
  EXPECT_EQ(x.device, -1);
  EXPECT_EQ(x.end_device, -1);
  EXPECT_EQ(x.start_ns, 0);
  EXPECT_EQ(x.end_ns, 0);
  EXPECT_EQ(x.correlation_id, 4242u);
}

// A captured step of two ops (embed: 1 kernel node, layer 0 attn.mla: 2 kernel nodes).
CapturedGraph captured() {
  CapturedGraph g;
  g.graph_id = 5;
  CapturedOp a;
  a.op = OpDesc{-9, -1, "embed", 100, 0};
  a.nodes = {{11, true}};
  CapturedOp b;
  b.op = OpDesc{-9, 0, "attn.mla", 1000, 2000};
  b.nodes = {{12, true}, {13, true}};
  g.ops = {a, b};
  return g;
}

void step_markers(ActivityRecords& r, uint32_t id, int step, int64_t t0, int64_t t1) {
  r.markers.push_back({id, true, "step." + std::to_string(step), t0, 77});
  r.markers.push_back({id, false, "", t1, 77});
}

// Steps 0..2 at graph level (launch external ids 50.., correlation 700..), then step 3 at node level
// (external id 60, correlation 800) with its three kernel records.
struct Mixed {
  ActivityRecords records;
  GraphAttribution graphs;
};

Mixed mixed_run() {
  Mixed m;
  m.graphs.graphs.push_back(captured());
  m.graphs.graph_level_windows.push_back({500, 3900});
  for (int s = 0; s < 3; ++s) {
    const int64_t t0 = 1000 * (s + 1);
    const uint64_t corr = 700 + s, ext = 50 + s;
    step_markers(m.records, s + 1, s, t0, t0 + 900);
    m.records.api_calls.push_back({false, "cudaGraphLaunch", false, t0 + 10, t0 + 20, 1, 77, corr});
    m.records.external.push_back({corr, ext});
    m.graphs.launches[ext] = GraphLaunch{s, 0, false};
    GraphTraceRecord g;
    g.correlation_id = corr;
    g.start_ns = t0 + 100;
    g.end_ns = t0 + 100 + 500 + 10 * s;  // 500, 510, 520 ns
    g.device = 0;
    g.stream = 7;
    g.graph_id = 5;
    m.records.graph_traces.push_back(g);
  }
  // An eager launch call while kernel activity was off: no record by design.
  m.records.api_calls.push_back({false, "cudaLaunchKernel", true, 3950 - 100, 3950 - 90, 1, 77, 790});
  const int64_t t0 = 4000;
  step_markers(m.records, 9, 3, t0, t0 + 900);
  m.records.api_calls.push_back({false, "cudaGraphLaunch", false, t0 + 10, t0 + 20, 1, 77, 800});
  m.records.external.push_back({800, 60});
  m.graphs.launches[60] = GraphLaunch{3, 0, true};
  const uint64_t nodes[] = {11, 12, 13};
  for (int k = 0; k < 3; ++k) {
    KernelRecord x;
    x.name = "k" + std::to_string(k);
    x.start_ns = t0 + 100 + 50 * k;
    x.end_ns = x.start_ns + 40;
    x.device = 0;
    x.stream = 7;
    x.correlation_id = 800;
    x.graph_node_id = nodes[k];
    x.graph_id = 5;
    m.records.kernels.push_back(x);
  }
  return m;
}

TEST(GraphLevelTimeline, OneSpanPerGraphLevelStepAndNoDoubleCounting) {
  const Mixed m = mixed_run();
  const Timeline t = build_timeline_from_records(m.records, {}, m.graphs);
  // Launch accounting: the node-level replay's 3 kernel nodes; the graph-level replays and the eager
  // call made during graph-level tracing expect no kernel records.
  EXPECT_EQ(t.kernels_recorded, 3u);
  EXPECT_EQ(t.kernels_launched, 3u);
  EXPECT_TRUE(t.complete);
  // One "graph.step.N" span per graph-level launch, on the launch's device and stream, with its step.
  std::vector<const Range*> spans;
  for (const Range& r : t.ranges)
    if (r.name.rfind("graph.", 0) == 0) spans.push_back(&r);
  ASSERT_EQ(spans.size(), 3u);
  for (int s = 0; s < 3; ++s) {
    EXPECT_EQ(spans[s]->name, "graph.step." + std::to_string(s));
    EXPECT_EQ(spans[s]->kind, RangeKind::gpu_user_annotation);
    EXPECT_EQ(spans[s]->step, s);
    EXPECT_EQ(spans[s]->layer, -1);
    EXPECT_EQ(spans[s]->op, "");
    EXPECT_EQ(spans[s]->device, 0);
    EXPECT_EQ(spans[s]->thread, 7);
    EXPECT_EQ(spans[s]->end_ns - spans[s]->start_ns, 500 + 10 * s);
  }
  const std::map<int, double> us = graph_step_us(t);
  ASSERT_EQ(us.size(), 3u);
  EXPECT_DOUBLE_EQ(us.at(0), 0.5);
  EXPECT_DOUBLE_EQ(us.at(2), 0.52);
  EXPECT_TRUE(graph_step_us(t, 1).empty());
  // The node-level step's kernels are attributed as before.
  for (const Activity& a : t.activities)
    if (a.kind == ActivityKind::kernel) {
      EXPECT_EQ(a.step, 3);
      EXPECT_EQ(a.op, a.name == "k0" ? "embed" : "attn.mla");
      EXPECT_EQ(a.layer, a.name == "k0" ? -1 : 0);
    }
  // The analysis sees only the node-level step: its span and op times, not the graph-level spans.
  const Analysis an = analyze(t, Peaks{4000, 790});
  ASSERT_EQ(an.steps.size(), 1u);
  EXPECT_EQ(an.steps[0].step, 3);
  EXPECT_DOUBLE_EQ(an.steps[0].time_us, 0.14);  // 4100 .. 4240 ns
  EXPECT_DOUBLE_EQ(an.steps[0].kernel_us, 0.12);
  EXPECT_DOUBLE_EQ(an.total_kernel_us, 0.12);
  EXPECT_TRUE(an.complete);
  bool said = false;
  for (const std::string& msg : t.messages) said |= msg.find("graph-level records: 3 graph launches") != std::string::npos;
  EXPECT_TRUE(said);
}

TEST(GraphLevelTimeline, StepFromNvtxRangeOrTimeWhenTheExternalIdIsMissing) {
  Mixed m = mixed_run();
  // Step 1's launch lost its external correlation record: its API call sits in the "step.1" range.
  // Step 2's record has a correlation id no API record carries: the last "step.N" range before it.
  m.records.external.erase(m.records.external.begin() + 1);
  m.records.graph_traces[2].correlation_id = 999;
  const Timeline t = build_timeline_from_records(m.records, {}, m.graphs);
  std::map<std::string, int> steps;
  for (const Range& r : t.ranges)
    if (r.name.rfind("graph.", 0) == 0) steps[r.name] = r.step;
  EXPECT_EQ(steps, (std::map<std::string, int>{{"graph.step.0", 0}, {"graph.step.1", 1}, {"graph.step.2", 2}}));
  bool said = false;
  for (const std::string& msg : t.messages)
    said |= msg.find("step from the launch 1, from the NVTX step range 1, by time 1") != std::string::npos;
  EXPECT_TRUE(said);
}

TEST(GraphLevelTimeline, UntimedAndLeftOutLaunches) {
  Mixed m = mixed_run();
  m.records.graph_traces[0].start_ns = m.records.graph_traces[0].end_ns = 0;  // CUPTI could not time it
  m.graphs.launches[51].step = -1;                                           // a left-out step
  const Timeline t = build_timeline_from_records(m.records, {}, m.graphs);
  std::vector<std::string> names;
  for (const Range& r : t.ranges)
    if (r.name.rfind("graph.", 0) == 0) names.push_back(r.name);
  EXPECT_EQ(names, (std::vector<std::string>{"graph.launch", "graph.step.2"}));
  EXPECT_EQ(graph_step_us(t).size(), 1u);
  bool said = false;
  for (const std::string& msg : t.messages) said |= msg.find("without timestamps 1") != std::string::npos;
  EXPECT_TRUE(said);
}

// Node-level tracing only (no graph-level window, nodes traced): exactly the behaviour before.
TEST(GraphLevelTimeline, NodeLevelLaunchesStillCountTheirKernelNodes) {
  Mixed m = mixed_run();
  m.records.graph_traces.clear();
  m.graphs.graph_level_windows.clear();
  for (auto& [ext, l] : m.graphs.launches) l.nodes_traced = true;
  const Timeline t = build_timeline_from_records(m.records, {}, m.graphs);
  // 4 replays x 3 kernel nodes + the eager launch; only the last replay's 3 kernels were recorded.
  EXPECT_EQ(t.kernels_launched, 13u);
  EXPECT_EQ(t.kernels_recorded, 3u);
  for (const Range& r : t.ranges) EXPECT_NE(r.name.rfind("graph.", 0), 0u) << r.name;
}

}  // namespace
}  // namespace glm5

namespace glm5 {
namespace {

// Levels are names on the command line; a tracer that records nothing (CUPTI unavailable) stays at
// node level whatever is asked, so `profile` runs its plain schedule on the host-clock fallback.
TEST(GraphTraceLevelNames, ParseAndPrint) {
  EXPECT_EQ(parse_graph_trace_level("graph"), GraphTraceLevel::graph);
  EXPECT_EQ(parse_graph_trace_level("node"), GraphTraceLevel::node);
  EXPECT_STREQ(to_string(GraphTraceLevel::graph), "graph");
  EXPECT_STREQ(to_string(GraphTraceLevel::node), "node");
  try {
    parse_graph_trace_level("Graph");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "--graph-trace 'Graph': expected graph or node");
  }
}

TEST(GraphTraceLevelNames, DisabledTracerStaysAtNodeLevel) {
  setenv("GLM5_FORCE_NO_CUPTI", "1", 1);
  CuptiTracer t(GraphTraceLevel::graph);
  EXPECT_EQ(t.graph_trace_level(), GraphTraceLevel::node);
  EXPECT_EQ(t.set_graph_trace_level(GraphTraceLevel::graph), GraphTraceLevel::node);
  const Timeline tl = t.finish();
  EXPECT_FALSE(tl.complete);
  unsetenv("GLM5_FORCE_NO_CUPTI");
}

}  // namespace
}  // namespace glm5
