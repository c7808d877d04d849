// HolisticTraceAnalysis reads our trace.json and its kernel breakdown equals ours (issue 5, "Trace
// export"): a GPU-like synthetic Timeline (CUPTI-shaped kernels on device 0 with fractional-us
// durations, two runs merged as `profile --kv-path all` merges them) is written by write_chrome_trace,
// analysed into report.json, and tools/hta_check.py compares HTA's get_gpu_kernel_breakdown with the
// report's top kernels. Skipped when python3 cannot import hta (pip install HolisticTraceAnalysis).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "analysis/analysis.h"
#include "report/report.h"
#include "synthetic.h"
#include "trace/chrome_trace.h"

using namespace glm5;

namespace {

bool hta_importable() { return std::system("python3 -c 'from hta.trace_analysis import TraceAnalysis' > /dev/null 2>&1") == 0; }

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Two KV-path runs (cast, fp8) merged into one trace, as `profile --kv-path all` writes it; the
// durations carry fractional microseconds (ns resolution) like CUPTI's.
struct Fixture {
  std::string dir, trace, report;
};

Fixture write_fixture(const std::string& name, bool warmup_in_trace) {
  Fixture f;
  f.dir = ::testing::TempDir() + "/glm5_hta_" + name;
  std::filesystem::remove_all(f.dir);
  std::filesystem::create_directories(f.dir);
  f.trace = f.dir + "/trace.json";
  f.report = f.dir + "/report.json";
  Timeline a = test::decode_run(3, 41.337, 23.019), b = test::decode_run(3, 0, 17.777);
  ReportInput in;
  in.run_spec = {{"command", "profile"}};
  for (auto [t, run] : {std::pair<Timeline*, const char*>{&a, "cast"}, {&b, "fp8"}}) {
    if (!warmup_in_trace)
      std::erase_if(t->activities, [](const Activity& x) { return x.step < 0; });
    RunReport r;
    r.name = run;
    r.analysis = analyze(*t, Peaks{});
    in.runs.push_back(r);
  }
  Timeline merged = a;
  const int64_t shift = b.activities.front().start_ns - a.activities.back().end_ns - 1'000'000;
  for (Activity x : b.activities) {  // b after a, as the runs of one profile follow each other
    x.start_ns -= shift;
    x.end_ns -= shift;
    x.correlation_id += 10'000'000;
    merged.activities.push_back(x);
  }
  sort_timeline(merged);
  merged.base_time_ns = earliest_time_ns(merged);
  write_chrome_trace(merged, f.trace);
  write_report_json(in, f.report);
  return f;
}

int run_check(const Fixture& f, const std::string& extra, std::string* out) {
  const std::string log = f.dir + "/hta_check.log";
  const std::string cmd = "python3 " GLM5_SOURCE_DIR "/tools/hta_check.py " + f.trace + " " + f.report + " " + extra +
                          " > " + log + " 2>&1";
  const int rc = std::system(cmd.c_str());
  *out = read_all(log);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

}  // namespace

TEST(HtaCheck, TraceCarriesWhatHtaNeeds) {
  Fixture f = write_fixture("fields", false);
  const std::string text = read_all(f.trace);
  // HTA finds the rank with the regex "rank":\s+(\d+) on the first line that matches.
  EXPECT_NE(text.find("\"distributedInfo\": {\"rank\": 0"), std::string::npos) << text.substr(0, 300);
  EXPECT_NE(text.find("\"cat\":\"kernel\""), std::string::npos);
  EXPECT_NE(text.find("\"stream\":7"), std::string::npos);
  // `profile --tp 8 --rank 3` writes rank 3 of 8.
  write_chrome_trace(test::decode_run(1, 0, 10), f.trace, 3, 8);
  EXPECT_EQ(read_all(f.trace).rfind("{\"schemaVersion\": 1, \"distributedInfo\": {\"rank\": 3, \"world_size\": 8,", 0), 0u);
}

TEST(HtaCheck, KernelBreakdownEqualsOurs) {
  if (!hta_importable()) GTEST_SKIP() << "python3 cannot import hta (pip install HolisticTraceAnalysis)";
  Fixture f = write_fixture("equal", false);
  std::string out;
  const int rc = run_check(f, "", &out);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("hta_check: OK"), std::string::npos) << out;
  EXPECT_NE(out.find("attn.kv_cast_kernel0"), std::string::npos) << out;
}

TEST(HtaCheck, WarmUpKernelsAreLeftOutLikeOurs) {
  // A trace holding warm-up (step -1) kernels: our analysis ignores them; the script hands HTA a copy
  // without them and says so, and the totals still agree.
  if (!hta_importable()) GTEST_SKIP() << "python3 cannot import hta";
  Fixture f = write_fixture("warmup", true);
  std::string out;
  EXPECT_EQ(run_check(f, "", &out), 0) << out;
  EXPECT_NE(out.find("warm-up"), std::string::npos) << out;
}

TEST(HtaCheck, DetectsADifference) {
  // A report whose totals differ from the trace: the script must say which kernel and exit 1.
  if (!hta_importable()) GTEST_SKIP() << "python3 cannot import hta";
  Fixture f = write_fixture("differ", false);
  std::string text = read_all(f.report);
  nlohmann::json j = nlohmann::json::parse(text);
  j["runs"][0]["top_kernels"][0]["total_us"] = j["runs"][0]["top_kernels"][0]["total_us"].get<double>() + 5.0;
  std::ofstream(f.report) << j.dump();
  std::string out;
  EXPECT_EQ(run_check(f, "", &out), 1) << out;
  EXPECT_NE(out.find("MISMATCH"), std::string::npos) << out;
}
