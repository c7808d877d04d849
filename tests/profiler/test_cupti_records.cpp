// Attribution from recorded CUPTI activity records (no GPU, no CUPTI calls).
#include <gtest/gtest.h>

#include "analysis/analysis.h"
#include "profiler/cupti_records.h"

namespace glm5 {
namespace {

// One decode step of one layer, as CUPTI would report it: NVTX markers step.0 > layer.3 > op, one
// runtime launch per kernel, external correlation records for the ops, plus one kernel launched
// outside any external id (attributed through the NVTX range open at its launch).
struct Recording {
  ActivityRecords records;
  std::map<uint64_t, OpDesc> ops;
};

Recording record_step() {
  Recording r;
  auto marker = [&](uint32_t id, bool start, const std::string& name, int64_t ts) {
    r.records.markers.push_back({id, start, start ? name : "", ts, 77});
  };
  auto launch = [&](uint64_t corr, int64_t ts) {
    r.records.api_calls.push_back({false, "cudaLaunchKernel", true, ts, ts + 5, 1, 77, corr});
    // The driver call the runtime makes inside: not a second launch.
    r.records.api_calls.push_back({true, "cuLaunchKernel", true, ts + 1, ts + 4, 1, 77, corr + 500});
  };
  auto kernel = [&](const std::string& name, uint64_t corr, int64_t start, int64_t end) {
    KernelRecord k;
    k.name = name;
    k.start_ns = start;
    k.end_ns = end;
    k.device = 0;
    k.stream = 7;
    k.correlation_id = corr;
    k.grid = {4, 1, 1};
    k.block = {256, 1, 1};
    r.records.kernels.push_back(k);
  };
  marker(1, true, "step.0", 100);
  marker(2, true, "layer.3", 110);
  // op attn.kv_cast, external id 5: two kernels
  r.ops[5] = OpDesc{0, 3, "attn.kv_cast", 8e6, 0};
  marker(3, true, "attn.kv_cast", 120);
  launch(10, 121);
  r.records.external.push_back({10, 5});
  launch(11, 130);
  r.records.external.push_back({11, 5});
  marker(3, false, "", 140);
  // op attn.mla, external id 6: one kernel
  r.ops[6] = OpDesc{0, 3, "attn.mla", 1e6, 2e6};
  marker(4, true, "attn.mla", 150);
  launch(12, 151);
  r.records.external.push_back({12, 6});
  marker(4, false, "", 160);
  // A kernel launched inside range "moe.router" with no external id pushed.
  marker(5, true, "moe.router", 170);
  launch(13, 171);
  marker(5, false, "", 180);
  marker(2, false, "", 190);
  marker(1, false, "", 200);
  kernel("_Z11kv_cast_fp8PKhPti", 10, 1000, 1400);
  kernel("kv_cast_tail", 11, 1400, 1500);
  kernel("mla_decode", 12, 1500, 1800);
  kernel("router_topk", 13, 1800, 1850);
  MemcpyRecord copy;
  copy.name = "Memcpy DtoD";
  copy.start_ns = 1850;
  copy.end_ns = 1900;
  copy.correlation_id = 12;  // a copy made by attn.mla
  copy.stream = 7;
  copy.bytes = 4096;
  r.records.copies.push_back(copy);
  return r;
}

TEST(CuptiRecords, KernelsJoinExternalIdsToTheirOps) {
  const Recording rec = record_step();
  const Timeline t = build_timeline_from_records(rec.records, rec.ops);
  EXPECT_EQ(t.source, "cupti");
  EXPECT_TRUE(t.complete);
  EXPECT_EQ(t.kernels_recorded, 4u);
  EXPECT_EQ(t.kernels_launched, 4u);  // nested driver launches not counted twice
  std::map<std::string, const Activity*> by_name;
  for (const Activity& a : t.activities)
    if (a.kind == ActivityKind::kernel || a.kind == ActivityKind::memcpy) by_name[a.name] = &a;
  ASSERT_TRUE(by_name.count("kv_cast_fp8(unsigned char const*, unsigned short*, int)"));  // demangled
  const Activity& cast = *by_name["kv_cast_fp8(unsigned char const*, unsigned short*, int)"];
  EXPECT_EQ(cast.op, "attn.kv_cast");
  EXPECT_EQ(cast.step, 0);
  EXPECT_EQ(cast.layer, 3);
  EXPECT_EQ(cast.external_id, 5u);
  EXPECT_EQ(cast.bytes, 8e6);
  EXPECT_EQ(by_name["kv_cast_tail"]->op, "attn.kv_cast");
  EXPECT_EQ(by_name["mla_decode"]->op, "attn.mla");
  EXPECT_EQ(by_name["mla_decode"]->flops, 2e6);
  EXPECT_EQ(by_name["Memcpy DtoD"]->op, "attn.mla");
  EXPECT_EQ(by_name["Memcpy DtoD"]->bytes_copied, 4096u);
  // No external id: the innermost NVTX range open on the launching thread.
  EXPECT_EQ(by_name["router_topk"]->op, "moe.router");
  EXPECT_EQ(by_name["router_topk"]->step, 0);
  EXPECT_EQ(by_name["router_topk"]->layer, 3);
}

TEST(CuptiRecords, MarkersBecomeNestedRangesAndOpsGetGpuSpans) {
  const Recording rec = record_step();
  const Timeline t = build_timeline_from_records(rec.records, rec.ops);
  std::map<std::string, Range> host, gpu;
  for (const Range& r : t.ranges) (r.kind == RangeKind::user_annotation ? host : gpu)[r.name] = r;
  ASSERT_EQ(host.size(), 5u);
  EXPECT_EQ(host["step.0"].depth, 0);
  EXPECT_EQ(host["layer.3"].depth, 1);
  EXPECT_EQ(host["layer.3"].step, 0);
  EXPECT_EQ(host["attn.mla"].depth, 2);
  EXPECT_EQ(host["attn.mla"].layer, 3);
  EXPECT_EQ(host["attn.mla"].op, "attn.mla");
  EXPECT_EQ(host["step.0"].end_ns, 200);
  ASSERT_EQ(gpu.size(), 2u);  // one per op instance with an external id
  EXPECT_EQ(gpu["attn.kv_cast"].start_ns, 1000);
  EXPECT_EQ(gpu["attn.kv_cast"].end_ns, 1500);
  EXPECT_EQ(gpu["attn.mla"].end_ns, 1900);
  EXPECT_EQ(gpu["attn.mla"].device, 0);
  EXPECT_EQ(t.base_time_ns, 100);
}

TEST(CuptiRecords, AnalysisOfRecordedStep) {
  const Recording rec = record_step();
  const Analysis a = analyze(build_timeline_from_records(rec.records, rec.ops), Peaks{4000, 900});
  ASSERT_EQ(a.steps.size(), 1u);
  EXPECT_DOUBLE_EQ(a.step_median_us, 0.9);  // 1000 .. 1900 ns
  EXPECT_DOUBLE_EQ(a.cast_us, 0.5);
  ASSERT_FALSE(a.hotspots.empty());
  EXPECT_EQ(a.hotspots.front().kind, "kv_dtype_cast");
  EXPECT_DOUBLE_EQ(a.hotspots.front().bytes, 8e6);  // once per op, not per kernel
}

TEST(CuptiRecords, DegradesOnDroppedRecordsErrorsAndOpenMarkers) {
  Recording rec = record_step();
  rec.records.dropped = 3;
  rec.records.errors.push_back("cuptiActivityEnable(kind 10): CUPTI_ERROR_NOT_SUPPORTED");
  rec.records.markers.push_back({99, true, "step.1", 2000, 77});  // never closed
  rec.records.markers.push_back({98, false, "", 50, 77});          // end without start
  const Timeline t = build_timeline_from_records(rec.records, rec.ops);
  EXPECT_FALSE(t.complete);
  EXPECT_EQ(t.records_dropped, 3u);
  EXPECT_GE(t.messages.size(), 3u);
  bool open_step = false;
  for (const Range& r : t.ranges) open_step |= r.name == "step.1";
  EXPECT_TRUE(open_step);
  // Empty input: an empty, complete timeline.
  const Timeline empty = build_timeline_from_records({}, {});
  EXPECT_TRUE(empty.activities.empty());
  EXPECT_TRUE(empty.complete);
}

}  // namespace
}  // namespace glm5
