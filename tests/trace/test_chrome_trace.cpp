#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "analysis/analysis.h"
#include "common/error.h"
#include "synthetic.h"
#include "trace/chrome_trace.h"
#include "tests/shared_dir.h"

namespace glm5 {
namespace {

namespace fs = std::filesystem;

fs::path temp_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("glm5_trace_" + name + "_" + std::to_string(getpid()));
  fs::create_directories(d);
  return d;
}

Timeline sample() {
  Timeline t = test::decode_run(2, 100, 30);
  Range step{"step.0", 1'000'000, 2'000'000, 0, 11, RangeKind::user_annotation};
  t.ranges.push_back(step);
  DeviceProperties d;
  d.name = "NVIDIA H200";
  d.num_sms = 132;
  d.compute_major = 9;
  t.devices.push_back(d);
  return t;
}

TEST(ChromeTrace, WritesKinetoKeysAndEvents) {
  const fs::path dir = temp_dir("keys");
  const std::string path = (dir / "trace.json").string();
  write_chrome_trace(sample(), path);
  std::ifstream in(path);
  const nlohmann::json j = nlohmann::json::parse(in);
  EXPECT_EQ(j["schemaVersion"], 1);
  EXPECT_EQ(j["displayTimeUnit"], "ms");
  EXPECT_EQ(j["distributedInfo"]["rank"], 0);
  EXPECT_EQ(j["distributedInfo"]["world_size"], 1);
  EXPECT_EQ(j["deviceProperties"][0]["name"], "NVIDIA H200");
  EXPECT_EQ(j["deviceProperties"][0]["numSms"], 132);
  EXPECT_TRUE(j["baseTimeNanoseconds"].is_number_integer());
  int kernels = 0, runtime = 0, flows_s = 0, flows_f = 0, annotations = 0, meta = 0;
  for (const auto& e : j["traceEvents"]) {
    const std::string cat = e.value("cat", "");
    if (e["ph"] == "M") ++meta;
    if (cat == "kernel") {
      ++kernels;
      EXPECT_TRUE(e["args"].contains("correlation"));
      EXPECT_TRUE(e["args"].contains("External id"));
      EXPECT_EQ(e["args"]["grid"].size(), 3u);
      EXPECT_TRUE(e["args"].contains("layer"));
      EXPECT_TRUE(e["args"].contains("op"));
      EXPECT_TRUE(e["ts"].is_number_float());
      EXPECT_GE(e["ts"].get<double>(), 0);
    }
    if (cat == "cuda_runtime") ++runtime;
    if (cat == "ac2g") (e["ph"] == "s" ? flows_s : flows_f)++;
    if (cat == "user_annotation") ++annotations;
  }
  EXPECT_EQ(kernels, 3 * 2 * 7);  // (warm-up + 2 steps) x 2 layers x 7 kernels
  EXPECT_EQ(runtime, kernels);
  EXPECT_EQ(flows_s, kernels);
  EXPECT_EQ(flows_f, kernels);
  EXPECT_EQ(annotations, 1);
  EXPECT_GT(meta, 0);
  fs::remove_all(dir);
}

TEST(ChromeTrace, RoundTripKeepsKernelsAndAttribution) {
  const fs::path dir = temp_dir("roundtrip");
  const std::string path = (dir / "trace.json").string();
  const Timeline t = sample();
  write_chrome_trace(t, path);
  const Timeline r = read_chrome_trace(path);
  EXPECT_EQ(r.source, "file");
  EXPECT_EQ(r.base_time_ns, t.base_time_ns);
  std::vector<const Activity*> a, b;
  for (const Activity& x : t.activities) if (x.kind == ActivityKind::kernel) a.push_back(&x);
  for (const Activity& x : r.activities) if (x.kind == ActivityKind::kernel) b.push_back(&x);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i]->name, b[i]->name);
    EXPECT_EQ(a[i]->start_ns, b[i]->start_ns);
    EXPECT_EQ(a[i]->end_ns, b[i]->end_ns);
    EXPECT_EQ(a[i]->step, b[i]->step);
    EXPECT_EQ(a[i]->layer, b[i]->layer);
    EXPECT_EQ(a[i]->op, b[i]->op);
    EXPECT_EQ(a[i]->bytes, b[i]->bytes);
    EXPECT_EQ(a[i]->flops, b[i]->flops);
    EXPECT_EQ(a[i]->correlation_id, b[i]->correlation_id);
    EXPECT_EQ(a[i]->external_id, b[i]->external_id);
    EXPECT_EQ(a[i]->grid, b[i]->grid);
    EXPECT_EQ(a[i]->device, b[i]->device);
    EXPECT_EQ(a[i]->stream, b[i]->stream);
  }
  EXPECT_EQ(r.ops.size(), t.ops.size());
  ASSERT_EQ(r.devices.size(), 1u);
  EXPECT_EQ(r.devices[0].name, "NVIDIA H200");
  // Same analysis from the file as from the live Timeline.
  const Analysis x = analyze(t, Peaks{4000, 900}), y = analyze(r, Peaks{4000, 900});
  EXPECT_DOUBLE_EQ(x.step_median_us, y.step_median_us);
  EXPECT_DOUBLE_EQ(x.cast_us, y.cast_us);
  ASSERT_EQ(x.layer_ops.size(), y.layer_ops.size());
  for (size_t i = 0; i < x.layer_ops.size(); ++i) EXPECT_DOUBLE_EQ(x.layer_ops[i].bytes, y.layer_ops[i].bytes);
  fs::remove_all(dir);
}

// The recording run's roofline ceilings travel in glm5prof.peaks (Timeline::copy_gbps / bf16_tflops); a trace
// without them reads as unknown (0); a malformed value is bad input naming the field.
TEST(ChromeTrace, PeaksRoundTripAndBadPeaksAreRefused) {
  const fs::path dir = temp_dir("peaks");
  const std::string path = (dir / "trace.json").string();
  Timeline t = sample();
  write_chrome_trace(t, path);
  Timeline r = read_chrome_trace(path);
  EXPECT_EQ(r.copy_gbps, 0.0);
  EXPECT_EQ(r.bf16_tflops, 0.0);
  t.copy_gbps = 3031.3;
  t.bf16_tflops = 790;
  write_chrome_trace(t, path);
  r = read_chrome_trace(path);
  EXPECT_DOUBLE_EQ(r.copy_gbps, 3031.3);
  EXPECT_DOUBLE_EQ(r.bf16_tflops, 790.0);
  std::ifstream in(path);
  const nlohmann::json doc = nlohmann::json::parse(in);
  for (const auto& [value, msg] : std::vector<std::pair<nlohmann::json, std::string>>{
           {nlohmann::json("fast"), "field 'glm5prof.peaks' must be an object"},
           {nlohmann::json{{"copy_gbps", -1.0}}, "field 'glm5prof.peaks.copy_gbps' must be a number from 0 to"},
           {nlohmann::json{{"bf16_tflops", "many"}}, "field 'glm5prof.peaks.bf16_tflops' must be a number"}}) {
    nlohmann::json bad = doc;
    bad["glm5prof"]["peaks"] = value;
    std::ofstream((dir / "bad.json").string()) << bad.dump();
    try {
      read_chrome_trace((dir / "bad.json").string());
      ADD_FAILURE() << "expected an error for " << value.dump();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(msg), std::string::npos) << e.what();
    }
  }
  fs::remove_all(dir);
}

// A trace of two runs one after the other (profile --kv-path all) carries their windows; the file split by them
// analyzes as each run did live (before, analyze merged the runs' step N into one step several runs long).
TEST(ChromeTrace, RunWindowsSplitASeveralRunTrace) {
  const fs::path dir = temp_dir("windows");
  const std::string path = (dir / "trace.json").string();
  const Timeline cast = test::decode_run(3, 100, 50), fp8_alone = test::decode_run(3, 0, 50);
  Timeline fp8 = fp8_alone;  // the same run 10 s later, its ids after the first run's
  for (Activity& a : fp8.activities) {
    a.start_ns += 10'000'000'000;
    a.end_ns += 10'000'000'000;
    if (a.external_id) a.external_id += 100'000;
    if (a.correlation_id) a.correlation_id += 100'000'000;
  }
  for (Range& r : fp8.ranges) r.start_ns += 10'000'000'000, r.end_ns += 10'000'000'000;
  Timeline both = cast;
  both.activities.insert(both.activities.end(), fp8.activities.begin(), fp8.activities.end());
  both.ranges.insert(both.ranges.end(), fp8.ranges.begin(), fp8.ranges.end());
  for (const auto& [id, op] : fp8.ops) both.ops[id + 100'000] = op;
  both.kernels_launched += fp8.kernels_launched;
  both.kernels_recorded += fp8.kernels_recorded;
  both.runs = {run_window(cast, "cast"), run_window(fp8, "fp8")};
  sort_timeline(both);
  write_chrome_trace(both, path);
  const Timeline r = read_chrome_trace(path);
  ASSERT_EQ(r.runs.size(), 2u);
  EXPECT_EQ(r.runs[0].name, "cast");
  EXPECT_EQ(r.runs[1].name, "fp8");
  EXPECT_EQ(r.runs[0].start_ns, both.runs[0].start_ns);
  EXPECT_EQ(r.runs[1].end_ns, both.runs[1].end_ns);
  const Analysis whole = analyze(r, Peaks{});
  for (int i = 0; i < 2; ++i) {
    SCOPED_TRACE(r.runs[i].name);
    const Timeline part = timeline_window(r, r.runs[i]);
    const Analysis live = analyze(i == 0 ? cast : fp8_alone, Peaks{}), file = analyze(part, Peaks{});
    EXPECT_DOUBLE_EQ(file.step_median_us, live.step_median_us);
    EXPECT_DOUBLE_EQ(file.cast_us, live.cast_us);
    EXPECT_EQ(file.steps.size(), 3u);
    EXPECT_TRUE(file.complete);
    EXPECT_EQ(part.kernels_recorded, i == 0 ? cast.kernels_recorded : fp8.kernels_recorded);
  }
  EXPECT_GT(whole.step_median_us, 1e6);  // unsplit, step N spans both runs (10 s apart): what analyze used to show
  // A malformed window list is bad input naming the field.
  std::ifstream in(path);
  nlohmann::json doc = nlohmann::json::parse(in);
  doc["glm5prof"]["runs"][1]["end_us"] = "late";
  std::ofstream((dir / "bad.json").string()) << doc.dump();
  try {
    read_chrome_trace((dir / "bad.json").string());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("glm5prof.runs: each entry needs a finite number 'end_us'"), std::string::npos)
        << e.what();
  }
  fs::remove_all(dir);
}

TEST(ChromeTrace, BadInputGivesOneClearError) {
  EXPECT_THROW(read_chrome_trace("/nonexistent/trace.json"), Error);
  const fs::path dir = temp_dir("bad");
  const std::string path = (dir / "bad.json").string();
  std::ofstream(path) << "{\"traceEvents\": [";
  try {
    read_chrome_trace(path);
    FAIL() << "expected glm5::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos);
  }
  EXPECT_THROW(write_chrome_trace(sample(), "/nonexistent_dir_glm5/trace.json"), Error);
  fs::remove_all(dir);
}

// A real torch.profiler trace (HolisticTraceAnalysis test data): cast kernels under aten::copy_.
TEST(ChromeTrace, ReadsKinetoTraceAndFindsCastKernels) {
  const std::string gz = glm5::test::shared_dir() + "/traces/external/hta_timeline_analysis_sampled_rank-0.json.gz";
  if (!fs::exists(gz)) GTEST_SKIP() << "missing " << gz;
  const fs::path dir = temp_dir("kineto");
  const std::string path = (dir / "hta.json").string();
  if (std::system(("gzip -dc '" + gz + "' > '" + path + "'").c_str()) != 0) GTEST_SKIP() << "no gzip";
  const Timeline t = read_chrome_trace(path);
  int kernels = 0, copies_attributed = 0;
  for (const Activity& a : t.activities) {
    kernels += a.kind == ActivityKind::kernel;
    if (a.name.find("direct_copy_kernel_cuda") != std::string::npos && a.op == "aten::copy_") ++copies_attributed;
  }
  EXPECT_EQ(kernels, 1154);
  EXPECT_EQ(copies_attributed, 40);  // every cast kernel found its aten::copy_ through the launch call
  const Analysis a = analyze(t, Peaks{});
  ASSERT_FALSE(a.hotspots.empty());
  EXPECT_EQ(a.hotspots.front().kind, "kv_dtype_cast");
  EXPECT_GT(a.hotspots.front().time_us, 0);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace glm5
