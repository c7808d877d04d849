// Attribution of kernels replayed from a captured CUDA graph (build_timeline_from_records with a
// GraphAttribution), on synthetic CUPTI records: no GPU, no CUPTI calls.
#include <gtest/gtest.h>

#include "analysis/analysis.h"
#include "profiler/cupti_records.h"
#include "profiler/host_clock_tracer.h"

namespace glm5 {
namespace {

// A captured step: embed (-1), layer 0 attn.norm (1 kernel), layer 0 attn.q_a_proj (2 kernels and a
// memset node), layer 1 moe.experts (2 kernels); instantiated ids = captured ids + 9000.
CapturedGraph captured() {
  CapturedGraph g;
  g.graph_id = 3;
  g.exec_id = 4;
  auto op = [&](int layer, const char* name, double bytes, std::vector<CapturedNode> nodes) {
    CapturedOp o;
    o.op = OpDesc{-7, layer, name, bytes, 2 * bytes};  // the capture step's index: replaced per launch
    o.nodes = std::move(nodes);
    g.ops.push_back(o);
  };
  op(-1, "embed", 10, {{101, true}});
  op(0, "attn.norm", 20, {{102, true}});
  op(0, "attn.q_a_proj", 30, {{103, true}, {104, false}, {105, true}});
  op(1, "moe.experts", 40, {{106, true}, {107, true}});
  for (uint64_t id = 101; id <= 107; ++id) g.clone_of[id + 9000] = id;
  return g;
}

const char* kNames[] = {"embed_k", "norm_k", "cast_k", "gemm_k", "up_k", "down_k"};
const uint64_t kKernelNodes[] = {101, 102, 103, 105, 106, 107};

// Records of `launches` replays: launch i has external id 50 + i (step i), correlation id 700 + i;
// each replay's kernels carry node ids (instantiated, + 9000) unless `with_node_ids` is false.
ActivityRecords replays(int launches, bool with_node_ids, int drop_kernel = -1) {
  ActivityRecords r;
  for (int i = 0; i < launches; ++i) {
    const uint64_t corr = 700 + i;
    const int64_t t0 = 1000 * (i + 1);
    r.api_calls.push_back({false, "cudaGraphLaunch", false, t0, t0 + 8, 1, 77, corr});
    r.external.push_back({corr, uint64_t(50 + i)});
    for (int k = 0; k < 6; ++k) {
      if (k == drop_kernel) continue;
      KernelRecord x;
      x.name = kNames[k];
      x.start_ns = t0 + 100 + 10 * k;
      x.end_ns = x.start_ns + 8;
      x.device = 0;
      x.stream = 7;
      x.correlation_id = corr;
      x.graph_node_id = with_node_ids ? kKernelNodes[k] + 9000 : 0;
      x.graph_id = 3;
      r.kernels.insert(r.kernels.begin(), x);  // newest first: CUPTI does not promise record order
    }
    MemcpyRecord m;
    m.is_memset = true;
    m.name = "Memset";
    m.start_ns = t0 + 125;
    m.end_ns = t0 + 127;
    m.correlation_id = corr;
    m.bytes = 64;
    m.graph_node_id = with_node_ids ? 104 + 9000 : 0;
    r.copies.push_back(m);
  }
  return r;
}

GraphAttribution attribution(int launches) {
  GraphAttribution a;
  a.graphs.push_back(captured());
  for (int i = 0; i < launches; ++i) a.launches[50 + i] = GraphLaunch{i, 0};
  return a;
}

const Activity* kernel_named(const Timeline& t, const std::string& name, int step) {
  for (const Activity& a : t.activities)
    if (a.kind == ActivityKind::kernel && a.name == name && a.step == step) return &a;
  return nullptr;
}

void expect_attributed(const Timeline& t, int launches) {
  const int layer_of[] = {-1, 0, 0, 0, 1, 1};
  const char* op_of[] = {"embed", "attn.norm", "attn.q_a_proj", "attn.q_a_proj", "moe.experts", "moe.experts"};
  const double bytes_of[] = {10, 20, 30, 30, 40, 40};
  for (int s = 0; s < launches; ++s)
    for (int k = 0; k < 6; ++k) {
      const Activity* a = kernel_named(t, kNames[k], s);
      ASSERT_NE(a, nullptr) << kNames[k] << " step " << s;
      EXPECT_EQ(a->layer, layer_of[k]) << kNames[k];
      EXPECT_EQ(a->op, op_of[k]) << kNames[k];
      EXPECT_DOUBLE_EQ(a->bytes, bytes_of[k]) << kNames[k];
      EXPECT_NE(a->external_id, 0u);
      // One op instance per (launch, op): its synthesized OpDesc carries the launch's step.
      ASSERT_TRUE(t.ops.count(a->external_id));
      EXPECT_EQ(t.ops.at(a->external_id).step, s);
    }
}

TEST(GraphAttribution, ReplayedKernelsGetStepLayerAndOpFromNodeIds) {
  const Timeline t = build_timeline_from_records(replays(2, true), {}, attribution(2));
  expect_attributed(t, 2);
  EXPECT_EQ(t.kernels_recorded, 12u);
  EXPECT_EQ(t.kernels_launched, 12u);  // each launch counts the graph's 6 kernel nodes
  EXPECT_TRUE(t.complete);
  // The memset node belongs to attn.q_a_proj.
  int memsets = 0;
  for (const Activity& a : t.activities)
    if (a.kind == ActivityKind::memset) {
      ++memsets;
      EXPECT_EQ(a.op, "attn.q_a_proj");
      EXPECT_EQ(a.layer, 0);
    }
  EXPECT_EQ(memsets, 2);
  // One op instance per (launch, op): 4 ops x 2 launches, each with a GPU span.
  EXPECT_EQ(t.ops.size(), 8u);
  int spans = 0;
  for (const Range& r : t.ranges) spans += r.kind == RangeKind::gpu_user_annotation;
  EXPECT_EQ(spans, 8);
  bool said = false;
  for (const std::string& m : t.messages) said |= m.find("14 records attributed by graph node id, 0 by launch order, 0 unattributed") != std::string::npos;
  EXPECT_TRUE(said);
  // The launch call itself carries its step.
  for (const Activity& a : t.activities)
    if (a.kind == ActivityKind::runtime) EXPECT_EQ(a.step, int(a.correlation_id) - 700);
}

// A replay runs parallel branches on the driver's internal streams: kernels come back on each op's capture stream
// (CapturedOp::stream_id), so the main chain is one stream again; ops without a known stream keep the record's.
TEST(GraphAttribution, ReplayedKernelsReturnToTheirOpsCaptureStream) {
  GraphAttribution at = attribution(2);
  for (CapturedOp& o : at.graphs[0].ops) o.stream_id = o.op.op == "attn.norm" ? 31 : 30;  // attn.norm: the side stream
  at.graphs[0].ops[3].stream_id = 0;  // moe.experts: unknown
  ActivityRecords r = replays(2, true);
  for (size_t i = 0; i < r.kernels.size(); ++i) r.kernels[i].stream = 100 + int64_t(i % 3);  // internal streams
  const Timeline t = build_timeline_from_records(r, {}, at);
  expect_attributed(t, 2);
  for (const Activity& a : t.activities) {
    if (a.kind != ActivityKind::kernel) continue;
    if (a.op == "attn.norm") EXPECT_EQ(a.stream, 31) << a.name;
    else if (a.op == "moe.experts") EXPECT_GE(a.stream, 100) << a.name;
    else EXPECT_EQ(a.stream, 30) << a.name;
  }
}

TEST(GraphAttribution, AnalysisCountsReplayedKernelsPerLayerAndOp) {
  const Analysis an = analyze(build_timeline_from_records(replays(3, true), {}, attribution(3)), Peaks{4000, 800});
  EXPECT_EQ(an.steps.size(), 3u);
  EXPECT_TRUE(an.complete);
  bool found = false;
  for (const OpCell& c : an.layer_ops)
    if (c.layer == 0 && c.op == "attn.q_a_proj") {
      found = true;
      EXPECT_DOUBLE_EQ(c.kernels, 3.0);  // per step: 2 kernels + the memset (device work counts)
      EXPECT_DOUBLE_EQ(c.bytes, 30.0);   // declared once per op instance per step
    }
  EXPECT_TRUE(found);
}

TEST(GraphAttribution, CapturedNodeIdsWithoutCloneMapAreUsedAsIs) {
  ActivityRecords r = replays(1, true);
  for (KernelRecord& k : r.kernels) k.graph_node_id -= 9000;
  GraphAttribution a = attribution(1);
  a.graphs[0].clone_of.clear();
  const Timeline t = build_timeline_from_records(r, {}, a);
  for (int k = 0; k < 6; ++k) {
    const Activity* x = kernel_named(t, kNames[k], 0);
    ASSERT_NE(x, nullptr);
    EXPECT_FALSE(x->op.empty()) << kNames[k];
  }
}

TEST(GraphAttribution, UnknownNodeIdsFallBackToLaunchOrder) {
  const Timeline t = build_timeline_from_records(replays(2, false), {}, attribution(2));
  expect_attributed(t, 2);
  bool said = false;
  for (const std::string& m : t.messages) said |= m.find("12 by launch order") != std::string::npos;
  EXPECT_TRUE(said);
}

TEST(GraphAttribution, LaunchOrderNeedsMatchingCounts) {
  // A replay missing one kernel record and without node ids: its kernels keep their step only.
  const Timeline t = build_timeline_from_records(replays(1, false, 2), {}, attribution(1));
  for (const Activity& a : t.activities)
    if (a.kind == ActivityKind::kernel) {
      EXPECT_EQ(a.step, 0);
      EXPECT_TRUE(a.op.empty());
    }
  EXPECT_EQ(t.kernels_launched, 6u);
  EXPECT_EQ(t.kernels_recorded, 5u);
  const Analysis an = analyze(t, Peaks{});
  EXPECT_FALSE(an.complete);  // 6 launched, 5 recorded
}

TEST(GraphAttribution, LaunchesDuringCaptureRunNothing) {
  ActivityRecords r = replays(1, true);
  // Capture: 6 launch calls under external id 40 (no kernel records follow), then the replay.
  for (int k = 0; k < 6; ++k) {
    r.api_calls.push_back({false, "cudaLaunchKernel", true, 100 + 10 * k, 105 + 10 * k, 1, 77, uint64_t(600 + k)});
    r.external.push_back({uint64_t(600 + k), 40});
  }
  GraphAttribution a = attribution(1);
  a.captures.insert(40);
  const Timeline t = build_timeline_from_records(r, {}, a);
  EXPECT_EQ(t.kernels_launched, 6u);
  EXPECT_EQ(t.kernels_recorded, 6u);
  expect_attributed(t, 1);
  // Without the capture mark the same records would look like 6 lost kernels.
  a.captures.clear();
  EXPECT_EQ(build_timeline_from_records(r, {}, a).kernels_launched, 12u);
  // The capture's time window alone also excludes them (launches without external correlation).
  a.capture_windows.push_back({90, 200});
  EXPECT_EQ(build_timeline_from_records(r, {}, a).kernels_launched, 6u);
}

TEST(GraphAttribution, MemsetNodeReportedAsKernelCountsAsLaunched) {
  ActivityRecords r = replays(1, true);
  r.copies.clear();
  KernelRecord k;  // the memset node (captured id 104) reported as a kernel
  k.name = "memset32";
  k.start_ns = 1000 + 125;
  k.end_ns = 1000 + 127;
  k.correlation_id = 700;
  k.graph_node_id = 104 + 9000;
  r.kernels.push_back(k);
  const Timeline t = build_timeline_from_records(r, {}, attribution(1));
  EXPECT_EQ(t.kernels_recorded, 7u);
  EXPECT_EQ(t.kernels_launched, 7u);
  const Activity* m = kernel_named(t, "memset32", 0);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->op, "attn.q_a_proj");
}

TEST(GraphAttribution, EagerOpsAndGraphReplaysMix) {
  ActivityRecords r = replays(1, true);
  // An eager kernel of op external id 5 (step 1) after the replay.
  r.api_calls.push_back({false, "cudaLaunchKernel", true, 5000, 5005, 1, 77, 900});
  r.external.push_back({900, 5});
  KernelRecord k;
  k.name = "eager_k";
  k.start_ns = 5010;
  k.end_ns = 5020;
  k.correlation_id = 900;
  r.kernels.push_back(k);
  std::map<uint64_t, OpDesc> ops{{5, OpDesc{1, 2, "attn.mla", 1, 1}}};
  const Timeline t = build_timeline_from_records(r, ops, attribution(1));
  expect_attributed(t, 1);
  const Activity* e = kernel_named(t, "eager_k", 1);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->op, "attn.mla");
  EXPECT_EQ(e->external_id, 5u);
  // Synthesized ids do not collide with the eager op's.
  for (const auto& [id, op] : t.ops)
    if (id != 5) EXPECT_GT(id, 50u);
  EXPECT_EQ(t.kernels_launched, 7u);
}

// Without CUPTI (host-clock fallback) a replay is one op for the whole step.
TEST(GraphAttribution, HostClockTracerTimesAReplayAsOneOp) {
  HostClockTracer h;
  const CapturedGraph g = captured();
  h.begin_range("step.4");
  h.begin_graph_launch(4, g);
  h.end_graph_launch();
  h.end_range();
  const Timeline t = h.finish();
  int n = 0;
  for (const Activity& a : t.activities)
    if (a.kind == ActivityKind::kernel) {
      ++n;
      EXPECT_EQ(a.op, "graph.replay");
      EXPECT_EQ(a.step, 4);
      EXPECT_EQ(a.layer, -1);
      EXPECT_DOUBLE_EQ(a.bytes, 10 + 20 + 30 + 40);
    }
  EXPECT_EQ(n, 1);
}

}  // namespace
}  // namespace glm5
