#include <gtest/gtest.h>

#include <cstdio>

#include "analysis/analysis.h"
#include "report/report.h"
#include "trace/chrome_trace.h"
#include "synthetic.h"

namespace glm5 {
namespace {

const OpCell* cell(const Analysis& a, int layer, const std::string& op) {
  for (const OpCell& c : a.layer_ops)
    if (c.layer == layer && c.op == op) return &c;
  return nullptr;
}

TEST(Analysis, StepsLeaveOutWarmupAndUseKernelSpan) {
  const Analysis a = analyze(test::decode_run(3, 100, 30), Peaks{4000, 900});
  ASSERT_EQ(a.steps.size(), 3u);
  for (const StepSample& s : a.steps) {
    EXPECT_GE(s.step, 0);
    EXPECT_DOUBLE_EQ(s.time_us, 2 * (20 + 100 + 30 + 60));
    EXPECT_DOUBLE_EQ(s.kernel_us, s.time_us);  // back to back
  }
  EXPECT_DOUBLE_EQ(a.step_median_us, 420);
  EXPECT_DOUBLE_EQ(a.step_min_us, 420);
  EXPECT_DOUBLE_EQ(a.step_max_us, 420);
}

TEST(Analysis, PerLayerOpSumsAreExactAndBytesCountedOncePerOp) {
  const Analysis a = analyze(test::decode_run(2, 100, 30), Peaks{4000, 900});
  const OpCell* q = cell(a, 1, "attn.q_a_proj");
  ASSERT_NE(q, nullptr);
  EXPECT_DOUBLE_EQ(q->time_us, 20);   // 2 kernels x 10 us, per step
  EXPECT_DOUBLE_EQ(q->kernels, 2);
  EXPECT_DOUBLE_EQ(q->bytes, 2e6);    // declared once per op, not per kernel
  const OpCell* e = cell(a, 0, "moe.experts");
  ASSERT_NE(e, nullptr);
  EXPECT_DOUBLE_EQ(e->time_us, 60);
  EXPECT_DOUBLE_EQ(e->flops, 1e9);
  // Canonical order within a layer: q_a_proj, kv_cast, mla, experts.
  ASSERT_EQ(a.layer_ops.size(), 8u);
  EXPECT_EQ(a.layer_ops[0].op, "attn.q_a_proj");
  EXPECT_EQ(a.layer_ops[1].op, "attn.kv_cast");
  EXPECT_EQ(a.layer_ops[2].op, "attn.mla");
  EXPECT_EQ(a.layer_ops[3].op, "moe.experts");
  EXPECT_EQ(a.layer_ops[4].layer, 1);
  // Sums over ops equal the kernel time: nothing counted twice.
  double sum = 0;
  for (const OpCell& c : a.layer_ops) sum += c.time_us;
  EXPECT_DOUBLE_EQ(sum, a.total_kernel_us);
  EXPECT_DOUBLE_EQ(a.attention_us, 2 * (20 + 100 + 30));
  // Roofline: experts move 2 x 6e6 bytes in 120 us per step = 100 GB/s; 2e9 FLOP / 120 us.
  for (const OpSummary& s : a.ops)
    if (s.op == "moe.experts") {
      EXPECT_NEAR(s.achieved_gbps, 100, 1e-9);
      EXPECT_NEAR(s.pct_copy_peak, 2.5, 1e-9);
      EXPECT_NEAR(s.achieved_tflops, 2e9 / 120e-6 / 1e12, 1e-9);
    }
}

// A kernel of step 0, layer 0 on device 0: [start, end] ns on `stream`, attributed to `op`.
Activity kernel_on(int64_t start, int64_t end, int64_t stream, const char* op, const char* name = "k", double bytes = 0) {
  Activity a;
  a.name = name;
  a.start_ns = start;
  a.end_ns = end;
  a.device = 0;
  a.stream = stream;
  a.step = 0;
  a.layer = 0;
  a.op = op;
  a.bytes = bytes;
  return a;
}

// Programmatic dependent launch: a kernel starts (and waits) before its predecessor on the stream ends.
// Its overlap counts once, for the predecessor; other streams and host activities are not clipped.
TEST(Analysis, OverlappingKernelsOnOneStreamCountTheirExclusiveTime) {
  auto act = [](int64_t start, int64_t end, int64_t stream, const char* op) { return kernel_on(start, end, stream, op); };
  Timeline t;
  t.activities = {act(0, 10'000, 7, "attn.q_a_proj"), act(4'000, 25'000, 7, "attn.kv_a_proj"),
                  act(6'000, 9'000, 7, "attn.rope"),  // inside the first: 0 exclusive time
                  act(30'000, 40'000, 7, "attn.mla"), act(5'000, 15'000, 9, "attn.mla")};
  const std::vector<const Activity*> w = {&t.activities[0], &t.activities[1], &t.activities[2], &t.activities[3],
                                          &t.activities[4]};
  const std::vector<int64_t> ns = exclusive_durations_ns(w);
  ASSERT_EQ(ns.size(), 5u);
  EXPECT_EQ(ns[0], 10'000);
  EXPECT_EQ(ns[1], 15'000);  // from the first's end
  EXPECT_EQ(ns[2], 0);
  EXPECT_EQ(ns[3], 10'000);  // a gap: its own duration
  EXPECT_EQ(ns[4], 10'000);  // another stream
  const Analysis a = analyze(t, Peaks{4000, 900});
  ASSERT_EQ(a.steps.size(), 1u);
  EXPECT_DOUBLE_EQ(a.steps[0].time_us, 40);    // span
  EXPECT_DOUBLE_EQ(a.steps[0].kernel_us, 45);  // 35 on stream 7 (its union) + 10 on stream 9
  EXPECT_DOUBLE_EQ(a.total_kernel_us, 45);
  EXPECT_DOUBLE_EQ(cell(a, 0, "attn.kv_a_proj")->time_us, 15);
  EXPECT_DOUBLE_EQ(cell(a, 0, "attn.rope")->time_us, 0);
  EXPECT_DOUBLE_EQ(cell(a, 0, "attn.mla")->time_us, 20);
}

// A side stream beside the main stream (DecodeEngine's EngineOptions::overlap): the side ops' time during which the
// main stream was busy is "overlapped"; main-stream kernels never are, nor is anything of an op not declared on a
// side stream (OpDesc::stream: a foreign trace's NCCL stream is never called hidden); a side kernel's own overlap
// with its predecessor on the side stream is clipped first (exclusive time), and the main stream's gap counts.
TEST(Analysis, SideStreamTimeBehindTheMainStreamIsOverlapped) {
  static int side_stream_tag;  // any non-null cudaStream_t stands for "the side stream" here
  Timeline t;
  uint64_t next_id = 1;
  auto add = [&](int64_t start, int64_t end, int64_t stream, const char* op, bool side) {
    Activity a = kernel_on(start, end, stream, op, op, 1000);
    a.external_id = next_id;
    a.side_stream = side;
    OpDesc d{0, 0, op, 1000, 0};
    if (side) d.stream = &side_stream_tag;
    t.ops[next_id++] = d;
    t.activities.push_back(a);
  };
  add(0, 60'000, 7, "attn.q_up_proj", false);
  add(70'000, 100'000, 7, "attn.indexer.topk", false);        // the main stream idles in [60'000, 70'000]
  add(20'000, 50'000, 9, "attn.q_absorb", true);              // inside the main stream's work: all overlapped
  add(45'000, 75'000, 9, "attn.indexer.weights_proj", true);  // exclusive from 50'000: [50, 60] + [70, 75] overlapped
  add(90'000, 130'000, 9, "moe.shared", true);                // 10'000 of 40'000 overlapped
  add(95'000, 105'000, 11, "nccl.all_reduce", false);         // another stream, not declared side: never hidden
  std::vector<const Activity*> w;
  std::vector<char> side;
  for (const Activity& a : t.activities) {
    w.push_back(&a);
    side.push_back(a.side_stream);
  }
  const std::vector<int64_t> excl = exclusive_durations_ns(w);
  const std::vector<int64_t> hid = overlapped_durations_ns(w, excl, side);
  ASSERT_EQ(hid.size(), 6u);
  EXPECT_EQ(hid[0], 0);
  EXPECT_EQ(hid[1], 0);
  EXPECT_EQ(hid[2], 30'000);
  EXPECT_EQ(excl[3], 25'000);
  EXPECT_EQ(hid[3], 15'000);  // two spans of the main stream
  EXPECT_EQ(hid[4], 10'000 + 5'000);  // the main stream to 100'000, and the NCCL kernel to 105'000
  EXPECT_EQ(hid[5], 0);
  const Analysis a = analyze(t, Peaks{4000, 900});
  double absorb = -1, shared = -1, topk = -1, nccl = -1;
  for (const OpSummary& s : a.ops) {
    if (s.op == "attn.q_absorb") absorb = s.overlapped_us;
    if (s.op == "moe.shared") shared = s.overlapped_us;
    if (s.op == "attn.indexer.topk") topk = s.overlapped_us;
    if (s.op == "nccl.all_reduce") nccl = s.overlapped_us;
  }
  EXPECT_DOUBLE_EQ(absorb, 30);
  EXPECT_DOUBLE_EQ(shared, 15);
  EXPECT_DOUBLE_EQ(topk, 0);
  EXPECT_DOUBLE_EQ(nccl, 0);
  EXPECT_DOUBLE_EQ(cell(a, 0, "moe.shared")->overlapped_us, 15);
  // The trace file keeps it ("side_stream" arg): a saved trace re-read gives the same overlapped time.
  const std::string path = ::testing::TempDir() + "glm5_side_stream_trace.json";
  write_chrome_trace(t, path);
  const Analysis b = analyze(read_chrome_trace(path), Peaks{4000, 900});
  std::remove(path.c_str());
  EXPECT_DOUBLE_EQ(cell(b, 0, "moe.shared")->overlapped_us, 15);
  EXPECT_DOUBLE_EQ(cell(b, 0, "attn.q_absorb")->overlapped_us, 30);
  EXPECT_DOUBLE_EQ(cell(b, 0, "nccl.all_reduce")->overlapped_us, 0);
}

TEST(Analysis, KvCastHotspotComesFirstWithShareAndBandwidth) {
  const Analysis a = analyze(test::decode_run(3, 300, 30), Peaks{4000, 900});
  ASSERT_FALSE(a.hotspots.empty());
  const Hotspot& h = a.hotspots.front();
  EXPECT_EQ(h.kind, "kv_dtype_cast");
  EXPECT_EQ(h.what, "attn.kv_cast");
  const double step = 2 * (20 + 300 + 30 + 60);
  EXPECT_DOUBLE_EQ(a.step_median_us, step);
  EXPECT_DOUBLE_EQ(h.time_us, 600);
  EXPECT_DOUBLE_EQ(h.share_of_step, 600 / step);
  EXPECT_DOUBLE_EQ(h.bytes, 16e6);
  EXPECT_NEAR(h.achieved_gbps, 16e6 / 600e-6 / 1e9, 1e-9);
  EXPECT_NEAR(h.pct_of_peak, 100 * (16e6 / 600e-6 / 1e9) / 4000, 1e-9);
  EXPECT_DOUBLE_EQ(h.est_saving_us, 600);
  EXPECT_NE(h.recommendation.find("--kv-path fp8"), std::string::npos);
  EXPECT_DOUBLE_EQ(a.cast_us, 600);
  // The cast (73%) is not reported a second time as a generic op hotspot.
  for (size_t i = 1; i < a.hotspots.size(); ++i) EXPECT_NE(a.hotspots[i].what, "attn.kv_cast");
}

TEST(Analysis, GenericHotspotAboveThirtyPercent) {
  const Analysis a = analyze(test::decode_run(1, 0, 200), Peaks{4000, 900});
  ASSERT_FALSE(a.hotspots.empty());
  EXPECT_EQ(a.hotspots.front().kind, "op_share");
  EXPECT_EQ(a.hotspots.front().what, "attn.mla");  // 400 of 560 us
  EXPECT_DOUBLE_EQ(a.cast_us, 0);
}

// Batch-1-like steps: per layer a 3 us norm and an 8 us top-k moving a few KB, a 50 us projection at 80% of
// the copy peak, a 5 us projection at 80% (short but bound by its bytes) and a 2 us op that declares no bytes.
// The norm and the top-k are reported together as latency-bound, after the op-share hotspot.
TEST(Analysis, ShortKernelsFarBelowTheRooflineAreLatencyBound) {
  Timeline t = test::layered_steps(4, [](auto op) {
    op("attn.norm", 1, 3'000, 1e4);
    op("attn.indexer.topk", 1, 8'000, 1e5);
    op("attn.o_proj", 1, 50'000, 1.6e8);  // 40 us floor at 4000 GB/s
    op("mlp.down", 1, 5'000, 1.6e7);      // short, but 4 us floor: bound by bytes
    op("moe.route", 1, 2'000, 0);         // declares nothing: not judged
  });
  for (const Activity& a : t.activities) t.kernels_recorded += a.kind == ActivityKind::kernel;
  t.kernels_launched = t.kernels_recorded;
  const Analysis a = analyze(t, Peaks{4000, 900});
  EXPECT_DOUBLE_EQ(a.step_median_us, 4 * 68);
  ASSERT_EQ(a.hotspots.size(), 2u);
  EXPECT_EQ(a.hotspots[0].kind, "op_share");
  EXPECT_EQ(a.hotspots[0].what, "attn.o_proj");
  const Hotspot& h = a.hotspots[1];
  EXPECT_EQ(h.kind, "latency_bound");
  EXPECT_EQ(h.what, "attn.indexer.topk, attn.norm");  // by time: 32 us, then 12 us per step
  EXPECT_NEAR(h.time_us, 44, 1e-9);
  EXPECT_NEAR(h.share_of_step, 44.0 / 272, 1e-12);
  EXPECT_NEAR(h.bytes, 4 * (1e4 + 1e5), 1e-6);
  EXPECT_NEAR(h.est_saving_us, 44 - 4 * (1e4 + 1e5) / 4e12 * 1e6, 1e-9);  // time above the roofline floor
  EXPECT_NE(h.recommendation.find("8 kernels per step (2.0 per layer over 4 layers) belong to ops whose kernels average "
                                  "under 10 us"),
            std::string::npos)
      << h.recommendation;
}

// Kernels of 10-50 us that move next to nothing (floor under 5% of their time: a serial chain inside the kernel, like
// GLM-5's batch-1 top-k) are latency-bound too; the same length at a 10% floor is not.
TEST(Analysis, SerialChainKernelsFarBelowTheRooflineAreLatencyBound) {
  auto run = [](double topk_bytes) {
    return analyze(test::layered_steps(4, [&](auto op) {
                     op("attn.indexer.topk", 1, 16'000, topk_bytes);
                     op("attn.o_proj", 1, 50'000, 1.6e8);  // 40 us floor: bound by bytes
                   }),
                   Peaks{4000, 900});
  };
  // 1.28e5 bytes in 16 us: a 0.032 us floor (0.2%).
  const Analysis a = run(1.28e5);
  const Hotspot* lat = nullptr;
  for (const Hotspot& h : a.hotspots)
    if (h.kind == "latency_bound") lat = &h;
  ASSERT_NE(lat, nullptr);
  EXPECT_EQ(lat->what, "attn.indexer.topk");
  EXPECT_NEAR(lat->time_us, 4 * 16, 1e-9);
  EXPECT_NEAR(lat->share_of_step, 64.0 / (4 * 66), 1e-12);
  EXPECT_NEAR(lat->est_saving_us, 64 - 4 * 1.28e5 / 4e12 * 1e6, 1e-9);
  EXPECT_NE(lat->recommendation.find("or under 50 us with a floor under 5%"), std::string::npos) << lat->recommendation;
  // 6.4e6 bytes in 16 us: a 1.6 us floor (10%): bound by more than its fixed cost; no hotspot.
  for (const Hotspot& h : run(6.4e6).hotspots) EXPECT_NE(h.kind, "latency_bound");
}

// Rule 5: a memory-bound op streaming below 80% of the copy peak (a batch-1 GEMV: 1.6e7 bytes in 12 us at 4000 GB/s,
// a 4 us floor, 33%) beside one at the roofline (o_proj, 1.6e8 bytes in 42 us, 95%) and a latency-bound one (the
// top-k). Only the first is named; its saving is its time less the bytes at 80% of the copy peak, per step.
TEST(Analysis, OpsStreamingBelowTheCopyPeakAreUnderStreaming) {
  auto run = [](double qkv_bytes) {
    return analyze(test::layered_steps(4, [&](auto op) {
                     op("attn.qkv_a_proj", 1, 12'000, qkv_bytes);
                     op("attn.indexer.topk", 1, 16'000, 1.28e5);
                     op("attn.o_proj", 1, 42'000, 1.6e8);
                   }),
                   Peaks{4000, 900});
  };
  const Analysis a = run(1.6e7);
  const Hotspot* u = nullptr;
  for (const Hotspot& h : a.hotspots)
    if (h.kind == "under_streaming") u = &h;
  ASSERT_NE(u, nullptr);
  EXPECT_EQ(u->what, "attn.qkv_a_proj");
  EXPECT_NEAR(u->time_us, 4 * 12, 1e-9);
  EXPECT_NEAR(u->est_saving_us, 4 * (12 - 4 / 0.8), 1e-9);
  EXPECT_NEAR(u->pct_of_peak, 100.0 * 4 / 12, 1e-9);
  EXPECT_NE(u->recommendation.find("attn.qkv_a_proj 48 us at 33% of copy"), std::string::npos) << u->recommendation;
  bool latency = false;
  for (const Hotspot& h : a.hotspots) latency |= h.kind == "latency_bound" && h.what == "attn.indexer.topk";
  EXPECT_TRUE(latency);
  // At 80% of the copy peak (3.84e7 bytes in 12 us) there is nothing to save: no hotspot.
  for (const Hotspot& h : run(3.84e7).hotspots) EXPECT_NE(h.kind, "under_streaming");
  // An op above 30% of the step below 80% of the copy peak is the op-share hotspot, not counted again here.
  const Analysis b = analyze(test::layered_steps(4, [&](auto op) {
                               op("attn.qkv_a_proj", 1, 12'000, 1.6e7);
                               op("moe.experts", 1, 100'000, 2e8);  // 50% of copy, 89% of the step
                             }),
                             Peaks{4000, 900});
  int share = 0, under = 0;
  for (const Hotspot& h : b.hotspots) {
    share += h.kind == "op_share" && h.what == "moe.experts";
    if (h.kind == "under_streaming") {
      ++under;
      EXPECT_EQ(h.what, "attn.qkv_a_proj");
      EXPECT_NEAR(h.est_saving_us, 4 * (12 - 4 / 0.8), 1e-9);
    }
  }
  EXPECT_EQ(share, 1);
  EXPECT_EQ(under, 1);
}

TEST(Analysis, NoLatencyHotspotWhenKernelsAreLongOrFew) {
  // Long: 60 us attention kernels that move little (over 50 us per kernel, 15% of the step) and 20 us projection
  // kernels at a 10% floor (over 5% for kernels of 10 us or more; 10% of the step), beside streaming experts (the
  // op-share hotspot): neither is latency-bound.
  {
    const Analysis a = analyze(test::layered_steps(4, [](auto op) {
                                 op("attn.mla", 1, 60'000, 1e6);
                                 op("attn.q_a_proj", 2, 20'000, 1.6e7);    // 4 us floor of 40 us
                                 op("moe.experts", 1, 300'000, 1.2e9);     // 75%: the op-share one
                               }),
                               Peaks{4000, 900});
    ASSERT_FALSE(a.hotspots.empty());
    EXPECT_EQ(a.hotspots[0].what, "moe.experts");
    for (const Hotspot& h : a.hotspots) EXPECT_NE(h.kind, "latency_bound");
  }
  // Few: one 3 us latency-bound op per step beside 100 us of streaming (2.9% of the step, under 10%).
  const Timeline t = test::layered_steps(1, [](auto op) {
    op("attn.norm", 1, 3'000, 1e4);
    op("moe.experts", 1, 100'000, 3.6e8);
  });
  for (const Hotspot& h : analyze(t, Peaks{4000, 900}).hotspots) EXPECT_NE(h.kind, "latency_bound");
  // Without a copy peak there is no roofline floor: the rule stays silent even for the batch-1-like run's ops.
  Timeline u = t;
  for (Activity& a : u.activities)
    if (a.op == "moe.experts") a.end_ns = a.start_ns + 1'000;
  for (const Hotspot& h : analyze(u, Peaks{0, 0}).hotspots) EXPECT_NE(h.kind, "latency_bound");
}

// Gaps in which no stream of the device runs anything are idle time (the device waited for the host): per step,
// the span minus the union over all streams; a hotspot when they reach 10% of the step; none for back-to-back kernels
// or for the CPU backend's host-timed ops.
TEST(Analysis, DeviceIdleBetweenLaunchesIsMeasuredAndReported) {
  auto at = [](int step, int64_t start_us, int64_t end_us, int64_t stream) {
    Activity a = kernel_on(start_us * 1000, end_us * 1000, stream, "attn.mla");
    a.step = step;
    return a;
  };
  Timeline t;
  t.source = "cupti";
  // Step 0: [0, 10] and [20, 30] on stream 7, [5, 15] on stream 9: busy 25 of 30 us. Step 1: 20 of 60 us.
  t.activities = {at(0, 0, 10, 7), at(0, 20, 30, 7), at(0, 5, 15, 9), at(1, 100, 110, 7), at(1, 150, 160, 7)};
  const Analysis a = analyze(t, Peaks{4000, 900});
  ASSERT_EQ(a.steps.size(), 2u);
  EXPECT_DOUBLE_EQ(a.steps[0].idle_us, 5);
  EXPECT_DOUBLE_EQ(a.steps[1].idle_us, 40);
  EXPECT_DOUBLE_EQ(a.gpu_idle_us, 22.5);
  EXPECT_DOUBLE_EQ(a.kernels_per_step, 2.5);
  const Hotspot* idle = nullptr;
  for (const Hotspot& h : a.hotspots)
    if (h.kind == "gpu_idle") idle = &h;
  ASSERT_NE(idle, nullptr);
  EXPECT_DOUBLE_EQ(idle->time_us, 22.5);
  EXPECT_DOUBLE_EQ(idle->share_of_step, 22.5 / a.step_median_us);
  EXPECT_NE(idle->recommendation.find("launch-bound"), std::string::npos) << idle->recommendation;  // 18 us per kernel
  // The same gaps ten times wider: one kernel every 180 us is not launch overhead.
  Timeline wide = t;
  for (Activity& x : wide.activities) {
    x.start_ns *= 10;
    x.end_ns *= 10;
  }
  bool named_other = false;
  for (const Hotspot& h : analyze(wide, Peaks{4000, 900}).hotspots)
    if (h.kind == "gpu_idle") {
      EXPECT_DOUBLE_EQ(h.time_us, 225);
      named_other = h.recommendation.find("not launch overhead") != std::string::npos;
    }
  EXPECT_TRUE(named_other);
  // Replayed from a CUDA graph: not the host launching.
  Timeline replayed = t;
  replayed.graph_kernels = 5;
  bool named_graph = false;
  for (const Hotspot& h : analyze(replayed, Peaks{4000, 900}).hotspots)
    if (h.kind == "gpu_idle") named_graph = h.recommendation.find("replayed from a CUDA graph") != std::string::npos;
  EXPECT_TRUE(named_graph);
  // Back to back (decode_run): no idle time, no hotspot.
  const Analysis b = analyze(test::decode_run(3, 100, 30), Peaks{4000, 900});
  EXPECT_DOUBLE_EQ(b.gpu_idle_us, 0);
  for (const Hotspot& h : b.hotspots) EXPECT_NE(h.kind, "gpu_idle");
  // The CPU backend's ops are timed on the host: never called device idle.
  t.source = "host-clock";
  const Analysis c = analyze(t, Peaks{4000, 900});
  EXPECT_DOUBLE_EQ(c.gpu_idle_us, 0);
  for (const Hotspot& h : c.hotspots) EXPECT_NE(h.kind, "gpu_idle");
}

TEST(Analysis, PyTorchCastKernelsAreKvCasts) {
  Activity a;
  a.kind = ActivityKind::kernel;
  a.name = "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(...)"
           "::{lambda()#4}, at::native::memory::LoadWithCast<1>, at::native::memory::StoreWithCast<1> >";
  EXPECT_TRUE(is_kv_cast(a));
  a.name = "void at::native::unrolled_elementwise_kernel<at::native::FillFunctor<float> >";
  EXPECT_FALSE(is_kv_cast(a));
  a.op = "aten::copy_";
  EXPECT_TRUE(is_kv_cast(a));
  a.op = "";
  a.name = "fp8_dequantize_kernel";
  EXPECT_TRUE(is_kv_cast(a));
  // Our engine's weight dequantization under a projection op (--fp8-large-m dequant) is not a KV cast; its KV casts
  // are the kv_cast ops whatever their kernels' names.
  a.name = "void glm5::(anonymous namespace)::fp8_block_dequant_bf16_vec16_kernel(glm5::LinearParams, unsigned short*)";
  a.op = "attn.o_proj";
  EXPECT_FALSE(is_kv_cast(a));
  a.op = "moe.shared.gate_up";
  EXPECT_FALSE(is_kv_cast(a));
  a.op = "attn.kv_cast";
  EXPECT_TRUE(is_kv_cast(a));
}

TEST(Analysis, NoStepsGivesOneSampleForTheWholeTimeline) {
  Timeline t;
  int64_t clock = 0;
  test::add_op(t, &clock, 1, -1, -1, "x", 2, 1000, 0);
  const Analysis a = analyze(t, Peaks{});
  ASSERT_EQ(a.steps.size(), 1u);
  EXPECT_DOUBLE_EQ(a.step_median_us, 2);
  EXPECT_TRUE(analyze(Timeline{}, Peaks{}).steps.empty());
}

TEST(ComparePaths, WinnerAndSpeedupVsCast) {
  std::vector<std::pair<std::string, Analysis>> runs = {
      {"cast", analyze(test::decode_run(2, 300, 30), Peaks{4000, 900})},
      {"gather-cast", analyze(test::decode_run(2, 20, 30), Peaks{4000, 900})},
      {"fp8", analyze(test::decode_run(2, 0, 35), Peaks{4000, 900})}};
  const PathComparison c = compare_paths(runs);
  ASSERT_EQ(c.paths.size(), 3u);
  EXPECT_EQ(c.winner, "fp8");
  EXPECT_DOUBLE_EQ(c.paths[0].step_median_us, 820);
  EXPECT_DOUBLE_EQ(c.paths[0].cast_us, 600);
  EXPECT_DOUBLE_EQ(c.paths[0].cast_share, 600.0 / 820);
  EXPECT_DOUBLE_EQ(c.paths[0].speedup_vs_cast, 1);
  EXPECT_DOUBLE_EQ(c.paths[2].step_median_us, 2 * (20 + 35 + 60));
  EXPECT_DOUBLE_EQ(c.paths[2].speedup_vs_cast, 820.0 / 230);
  EXPECT_DOUBLE_EQ(c.paths[2].cast_us, 0);
  EXPECT_DOUBLE_EQ(c.paths[1].attention_us, 2 * (20 + 20 + 30));
}

// The typical layer kernel by kernel (Analysis::layer_timeline): layers 1-3 of steps 0 and 1 run attn.q_a_proj (2 x 10
// us), a gap of `layer` us, attn.mla (5 us), moe.experts (30 us); layer 0 runs another sequence and the warm-up step
// is left out. Medians over the 6 samples: gap 2 us, so attn.mla 22-27 and moe.experts 27-57 us from the layer's
// first kernel; report.md shows the gap, report.json the rows.
TEST(Analysis, LayerTimelineIsTheMedianOfTheCommonSequence) {
  Timeline t;
  t.source = "cupti";
  int64_t clock = 1'000'000;
  uint64_t id = 1;
  for (int s = -1; s < 2; ++s)
    for (int layer = 0; layer < 4; ++layer) {
      if (layer == 0) {
        test::add_op(t, &clock, id++, s, layer, "attn.q_a_proj", 1, 10'000, 1e6);
        test::add_op(t, &clock, id++, s, layer, "mlp.gate_up", 1, 20'000, 1e6);
        continue;
      }
      test::add_op(t, &clock, id++, s, layer, "attn.q_a_proj", 2, 10'000, 1e6);
      clock += int64_t(layer) * 1000 + (s < 0 ? 50'000 : 0);  // the warm-up's gap would move every median
      test::add_op(t, &clock, id++, s, layer, "attn.mla", 1, 5'000, 1e6);
      test::add_op(t, &clock, id++, s, layer, "moe.experts", 1, 30'000, 1e6);
    }
  sort_timeline(t);
  t.base_time_ns = earliest_time_ns(t);
  const Analysis a = analyze(t, Peaks{4000, 900});
  const LayerTimeline& lt = a.layer_timeline;
  EXPECT_EQ(lt.layers, 6);
  EXPECT_EQ(lt.layers_total, 8);
  EXPECT_EQ(lt.example_layer, 1);
  EXPECT_NEAR(lt.span_us, 57.0, 1e-9);
  ASSERT_EQ(lt.rows.size(), 4u);
  const char* ops[] = {"attn.q_a_proj", "attn.q_a_proj", "attn.mla", "moe.experts"};
  const double start[] = {0, 10, 22, 27}, end[] = {10, 20, 27, 57};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(lt.rows[i].op, ops[i]);
    EXPECT_FALSE(lt.rows[i].side);
    EXPECT_NEAR(lt.rows[i].start_us, start[i], 1e-9) << i;
    EXPECT_NEAR(lt.rows[i].end_us, end[i], 1e-9) << i;
  }
  ReportInput in;
  in.runs.push_back({"fp8", {{"kv_path", "fp8"}}, a});
  const std::string md = report_to_markdown(in);
  EXPECT_NE(md.find("Layer timeline: 4 kernels per layer, 57.0 us"), std::string::npos) << md;
  EXPECT_NE(md.find("| 3 | `attn.mla` | main | 22.0 | 27.0 | 5.0 | 2.0 | 7.0 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| 4 | `moe.experts` | main | 27.0 | 57.0 | 30.0 |  | 30.0 |"), std::string::npos) << md;
  const nlohmann::json j = report_to_json(in);
  const nlohmann::json& jt = j["runs"][0]["layer_timeline"];
  EXPECT_EQ(jt["layers"], 6);
  EXPECT_EQ(jt["kernels"].size(), 4u);
  EXPECT_EQ(jt["kernels"][2]["op"], "attn.mla");
  EXPECT_DOUBLE_EQ(jt["kernels"][2]["start_us"].get<double>(), 22.0);
  EXPECT_DOUBLE_EQ(jt["kernels"][2]["adds_us"].get<double>(), 7.0);
  EXPECT_DOUBLE_EQ(jt["span_us"].get<double>(), 57.0);
}

// A --tp profile's timeline holds every rank's kernels: layers group per device, so two devices' copies of a layer
// (started a little apart) are two samples of the same sequence, not one interleaved one.
TEST(Analysis, LayerTimelineGroupsPerDevice) {
  Timeline t;
  t.source = "cupti";
  for (int dev = 0; dev < 2; ++dev) {
    int64_t clock = 1'000'000 + dev * 3'000;  // rank 1 starts 3 us later: interleaved with rank 0 in time
    uint64_t id = 1 + 100 * uint64_t(dev);
    for (int layer = 0; layer < 2; ++layer) {
      test::add_op(t, &clock, id++, 0, layer, "attn.q_a_proj", 1, 10'000, 1e6);
      test::add_op(t, &clock, id++, 0, layer, "attn.mla", 1, 5'000, 1e6);
    }
  }
  for (Activity& a : t.activities)
    if (a.kind == ActivityKind::kernel && a.external_id > 100) a.device = 1;
  sort_timeline(t);
  t.base_time_ns = earliest_time_ns(t);
  const LayerTimeline lt = analyze(t, Peaks{4000, 900}).layer_timeline;
  EXPECT_EQ(lt.layers_total, 4);
  EXPECT_EQ(lt.layers, 4);
  ASSERT_EQ(lt.rows.size(), 2u);
  EXPECT_NEAR(lt.rows[1].start_us, 10.0, 1e-9);
  EXPECT_NEAR(lt.span_us, 15.0, 1e-9);
}

// Programmatic dependent launch: a kernel admitted before its predecessor ends starts early and waits inside, so its
// duration overstates its cost; the adds column is each kernel's end past the latest earlier end, which sums to the
// span. Per layer: attn.q_a_proj 0-10, attn.o_proj admitted at 6 and ending at 18 (adds 8), a side-stream kernel
// 8-10 that ends before (adds 0), then moe.experts admitted at 15, ending at 40 (adds 22).
TEST(Analysis, LayerTimelineAddsIgnoreTheWaitOfAnEarlyAdmission) {
  Timeline t;
  t.source = "cupti";
  int64_t clock = 1'000'000;
  uint64_t id = 1;
  for (int s = 0; s < 2; ++s)
    for (int layer = 0; layer < 2; ++layer) {
      const int64_t t0 = clock;
      test::add_op(t, &clock, id++, s, layer, "attn.q_a_proj", 1, 10'000, 1e6);
      clock = t0 + 6'000;
      test::add_op(t, &clock, id++, s, layer, "attn.o_proj", 1, 12'000, 1e6);
      clock = t0 + 8'000;
      test::add_op(t, &clock, id++, s, layer, "attn.indexer.weights_proj", 1, 2'000, 1e6);
      t.activities.back().side_stream = true;
      clock = t0 + 15'000;
      test::add_op(t, &clock, id++, s, layer, "moe.experts", 1, 25'000, 1e6);
      clock = t0 + 50'000;
    }
  sort_timeline(t);
  t.base_time_ns = earliest_time_ns(t);
  const Analysis a = analyze(t, Peaks{4000, 900});
  const LayerTimeline& lt = a.layer_timeline;
  ASSERT_EQ(lt.rows.size(), 4u);
  EXPECT_EQ(lt.layers, 4);
  const double adds[] = {10, 8, 0, 22};
  double sum = 0;
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_NEAR(lt.rows[i].adds_us, adds[i], 1e-9) << i;
    sum += lt.rows[i].adds_us;
  }
  EXPECT_NEAR(sum, lt.span_us, 1e-9);
  EXPECT_TRUE(lt.rows[2].side);
  ReportInput in;
  in.runs.push_back({"fp8", {{"kv_path", "fp8"}}, a});
  const std::string md = report_to_markdown(in);
  EXPECT_NE(md.find("| 2 | `attn.o_proj` | main | 6.0 | 18.0 | 12.0 |  | 8.0 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| 3 | `attn.indexer.weights_proj` | side | 8.0 | 10.0 | 2.0 |  |  |"), std::string::npos) << md;
  EXPECT_NE(md.find("| 4 | `moe.experts` | main | 15.0 | 40.0 | 25.0 |  | 22.0 |"), std::string::npos) << md;
}

// Fewer than two layers with one sequence: no timeline (and no section).
TEST(Analysis, NoLayerTimelineWithoutARepeatedSequence) {
  Timeline t;
  t.source = "cupti";
  int64_t clock = 1'000'000;
  test::add_op(t, &clock, 1, 0, 0, "attn.q_a_proj", 1, 10'000, 1e6);
  test::add_op(t, &clock, 2, 0, 1, "attn.mla", 1, 10'000, 1e6);
  sort_timeline(t);
  t.base_time_ns = earliest_time_ns(t);
  const Analysis a = analyze(t, Peaks{4000, 900});
  EXPECT_TRUE(a.layer_timeline.rows.empty());
  EXPECT_EQ(a.layer_timeline.layers_total, 2);
  ReportInput in;
  in.runs.push_back({"fp8", {{"kv_path", "fp8"}}, a});
  EXPECT_EQ(report_to_markdown(in).find("Layer timeline"), std::string::npos);
}

}  // namespace
}  // namespace glm5
