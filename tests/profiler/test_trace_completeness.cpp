// Tracing loses nothing silently: dropped CUPTI records and launches without a kernel record make
// the Timeline, the analysis and both reports say the trace is incomplete; GLM5_CUPTI_BUFFER_BYTES
// is parsed with one clear error. CPU only (synthetic CUPTI records, no GPU, no CUPTI calls).
#include <gtest/gtest.h>

#include "analysis/analysis.h"
#include "common/error.h"
#include "profiler/cupti_records.h"
#include "profiler/cupti_tracer.h"
#include "report/report.h"

namespace glm5 {
namespace {

// `launches` kernel launches in one op of step 0; only the first `recorded` have a kernel record.
ActivityRecords launches(int n, int recorded, uint64_t dropped) {
  ActivityRecords r;
  r.dropped = dropped;
  for (int i = 0; i < n; ++i) {
    const uint64_t corr = 100 + i;
    r.api_calls.push_back({false, "cudaLaunchKernel", true, 10 * i, 10 * i + 5, 1, 77, corr});
    r.external.push_back({corr, 1});
    if (i < recorded) {
      KernelRecord k;
      k.name = "tick";
      k.start_ns = 1000 + 100 * i;
      k.end_ns = k.start_ns + 50;
      k.stream = 7;
      k.correlation_id = corr;
      r.kernels.push_back(k);
    }
  }
  return r;
}

ReportInput report_of(const Timeline& t) {
  ReportInput in;
  RunReport r;
  r.name = "run";
  r.analysis = analyze(t, Peaks{});
  in.runs.push_back(r);
  return in;
}

const std::map<uint64_t, OpDesc> kOps = {{1, OpDesc{0, 0, "tick", 0, 0}}};

TEST(TraceCompleteness, AllLaunchesRecordedIsComplete) {
  const Timeline t = build_timeline_from_records(launches(5, 5, 0), kOps);
  EXPECT_EQ(t.kernels_launched, 5u);
  EXPECT_EQ(t.kernels_recorded, 5u);
  const ReportInput in = report_of(t);
  EXPECT_TRUE(in.runs[0].analysis.complete);
  EXPECT_TRUE(report_complete(in));
  const nlohmann::json j = report_to_json(in);
  EXPECT_TRUE(j["trace_complete"].get<bool>());
  EXPECT_TRUE(j["incomplete_traces"].empty());
  EXPECT_EQ(j["runs"][0]["trace"]["kernels_launched"], 5);
  EXPECT_EQ(j["runs"][0]["trace"]["kernels_recorded"], 5);
  EXPECT_EQ(j["runs"][0]["trace"]["records_dropped"], 0);
  const std::string md = report_to_markdown(in);
  EXPECT_EQ(md.find("INCOMPLETE"), std::string::npos) << md;
  EXPECT_NE(md.find("5 kernel records of 5 launches, 0 records dropped (complete)"), std::string::npos) << md;
}

TEST(TraceCompleteness, DroppedRecordsAreIncomplete) {
  const Timeline t = build_timeline_from_records(launches(5, 5, 7), kOps);
  const ReportInput in = report_of(t);
  EXPECT_FALSE(in.runs[0].analysis.complete);
  EXPECT_EQ(in.runs[0].analysis.records_dropped, 7u);
  EXPECT_FALSE(report_complete(in));
  const nlohmann::json j = report_to_json(in);
  EXPECT_FALSE(j["trace_complete"].get<bool>());
  ASSERT_EQ(j["incomplete_traces"].size(), 1u);
  EXPECT_NE(j["incomplete_traces"][0].get<std::string>().find("7 CUPTI records dropped"), std::string::npos)
      << j["incomplete_traces"].dump();
  EXPECT_EQ(j["runs"][0]["trace"]["records_dropped"], 7);
  EXPECT_FALSE(j["runs"][0]["complete"].get<bool>());
  const std::string md = report_to_markdown(in);
  EXPECT_NE(md.find("INCOMPLETE TRACE"), std::string::npos) << md;
  EXPECT_NE(md.find("(**incomplete**)"), std::string::npos) << md;
}

TEST(TraceCompleteness, LaunchWithoutKernelRecordIsIncomplete) {
  // No record dropped as far as CUPTI says, but 2 of 6 launches never got a kernel record.
  const Timeline t = build_timeline_from_records(launches(6, 4, 0), kOps);
  EXPECT_EQ(t.kernels_launched, 6u);
  EXPECT_EQ(t.kernels_recorded, 4u);
  const ReportInput in = report_of(t);
  EXPECT_FALSE(in.runs[0].analysis.complete);
  const std::vector<std::string> lines = incomplete_trace_lines(in);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("run: 4 of 6 kernel launches recorded"), std::string::npos) << lines[0];
  EXPECT_NE(report_to_markdown(in).find("INCOMPLETE TRACE"), std::string::npos);
}

TEST(TraceCompleteness, ForeignTraceFileWithoutLaunchCountsIsNotFlagged) {
  Timeline t;
  t.source = "file";
  Activity k;
  k.name = "gemm";
  k.device = 0;
  k.start_ns = 0;
  k.end_ns = 100;
  t.activities.push_back(k);
  t.kernels_recorded = 1;  // what the reader counts; a foreign file has no launch count
  const ReportInput in = report_of(t);
  EXPECT_TRUE(in.runs[0].analysis.complete);
  EXPECT_FALSE(in.runs[0].analysis.launches_counted);
  const nlohmann::json j = report_to_json(in);
  EXPECT_TRUE(j["runs"][0]["trace"]["kernels_launched"].is_null());
  EXPECT_NE(report_to_markdown(in).find("1 kernel records, 0 records dropped (complete)"), std::string::npos);
}

TEST(CuptiBufferBytes, DefaultAndValidValues) {
  EXPECT_EQ(cupti_buffer_bytes(nullptr), size_t(8) << 20);
  EXPECT_EQ(cupti_buffer_bytes(""), size_t(8) << 20);
  EXPECT_EQ(cupti_buffer_bytes("1024"), 1024u);
  EXPECT_EQ(cupti_buffer_bytes("1025"), 1032u);  // rounded up to 8-byte multiples
  EXPECT_EQ(cupti_buffer_bytes("1073741824"), size_t(1) << 30);
}

TEST(CuptiBufferBytes, BadValuesAreOneClearError) {
  for (const char* bad : {"abc", "0", "-4096", "1023", "1073741825", "4k", " 4096", "99999999999999999999"}) {
    try {
      (void)cupti_buffer_bytes(bad);
      ADD_FAILURE() << "accepted GLM5_CUPTI_BUFFER_BYTES=" << bad;
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find(std::string("GLM5_CUPTI_BUFFER_BYTES='") + bad + "'"), std::string::npos) << m;
      EXPECT_NE(m.find("[1024, 1073741824]"), std::string::npos) << m;
      EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    }
  }
}

}  // namespace
}  // namespace glm5
