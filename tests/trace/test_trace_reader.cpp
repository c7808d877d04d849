// read_chrome_trace as a streaming reader: gzip found by its magic bytes, real Kineto traces (the five
// HolisticTraceAnalysis traces in ../shared and the two copies in traces/), batch and chunk seams in
// the middle of strings and escapes, and malformed or cut-short files giving one line with a byte offset.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "analysis/analysis.h"
#include "common/error.h"
#include "trace/chrome_trace.h"
#include "tests/shared_dir.h"

namespace glm5 {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct TempDir {
  fs::path dir;
  explicit TempDir(const std::string& name)
      : dir(fs::temp_directory_path() / ("glm5_reader_" + name + "_" + std::to_string(getpid()))) {
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~TempDir() { fs::remove_all(dir); }
  std::string write(const std::string& name, const std::string& text) const {
    const std::string p = (dir / name).string();
    std::ofstream(p, std::ios::binary) << text;
    return p;
  }
};

std::string slurp(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string gunzip(const std::string& gz, const std::string& out) {
  if (std::system(("gzip -dc '" + gz + "' > '" + out + "'").c_str()) != 0) return "";
  return out;
}

std::string gzip_file(const std::string& in, const std::string& out) {
  if (std::system(("gzip -c '" + in + "' > '" + out + "'").c_str()) != 0) return "";
  return out;
}

// The message of the glm5::Error that reading `path` throws ("" if none).
std::string error_of(const std::string& path) {
  try {
    read_chrome_trace(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// What a plain DOM reading of the file says the Timeline must hold: "X" events of a category the
// reader keeps.
size_t kept_events(const json& doc) {
  static const std::set<std::string> cats = {"kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime", "cuda_driver",
                                             "cpu_op", "overhead", "user_annotation", "gpu_user_annotation"};
  size_t n = 0;
  for (const json& e : doc["traceEvents"])
    if (e.is_object() && e.value("ph", "") == "X" && cats.count(e.value("cat", ""))) ++n;
  return n;
}

void expect_same(const Timeline& a, const Timeline& b) {
  ASSERT_EQ(a.activities.size(), b.activities.size());
  ASSERT_EQ(a.ranges.size(), b.ranges.size());
  EXPECT_EQ(a.base_time_ns, b.base_time_ns);
  EXPECT_EQ(a.devices.size(), b.devices.size());
  for (size_t i = 0; i < a.activities.size(); ++i) {
    EXPECT_EQ(a.activities[i].name, b.activities[i].name);
    EXPECT_EQ(a.activities[i].start_ns, b.activities[i].start_ns);
    EXPECT_EQ(a.activities[i].end_ns, b.activities[i].end_ns);
    EXPECT_EQ(a.activities[i].op, b.activities[i].op);
    EXPECT_EQ(a.activities[i].correlation_id, b.activities[i].correlation_id);
  }
}

const char* kExternal[] = {
    "hta_timeline_analysis_sampled_rank-0.json.gz", "hta_triton_example_triton_example.json.gz",
    "hta_trace_compare_base_base.json.gz", "hta_trace_compare_test_test.json.gz",
    "hta_distributed_info_unavailable_distributed_info_not_found.json.gz"};

// All five external traces load from .json.gz as they are, and hold what a DOM reading finds.
TEST(TraceReader, ExternalGzipTracesLoad) {
  const std::string dir = glm5::test::shared_dir() + "/traces/external/";
  if (!fs::exists(dir + kExternal[0])) GTEST_SKIP() << "missing " << dir;
  TempDir tmp("external");
  for (const char* name : kExternal) {
    SCOPED_TRACE(name);
    Timeline t;
    ASSERT_NO_THROW(t = read_chrome_trace(dir + name));
    const std::string plain = gunzip(dir + name, (tmp.dir / "plain.json").string());
    ASSERT_FALSE(plain.empty());
    const json doc = json::parse(slurp(plain));
    EXPECT_EQ(t.activities.size() + t.ranges.size(), kept_events(doc));
    EXPECT_GT(t.activities.size(), 0u);
    expect_same(t, read_chrome_trace(plain));  // .gz and plain give the same Timeline
  }
}

// A trace recorded without the CUDA activity (the distributed_info_unavailable one: 2,424 cpu_op and 43
// user_annotation events, no kernel) says so in one message, and only such a trace does.
TEST(TraceReader, HostOnlyTraceSaysGpuWasNotRecorded) {
  const std::string dir = glm5::test::shared_dir() + "/traces/external/";
  if (!fs::exists(dir + kExternal[4])) GTEST_SKIP() << "missing " << dir;
  const Timeline host_only = read_chrome_trace(dir + kExternal[4]);
  EXPECT_EQ(host_only.kernels_recorded, 0u);
  ASSERT_EQ(host_only.messages.size(), 1u);
  EXPECT_NE(host_only.messages[0].find("no GPU kernel events, only 2424 host events"), std::string::npos)
      << host_only.messages[0];
  EXPECT_NE(host_only.messages[0].find("ProfilerActivity.CUDA"), std::string::npos);
  for (int i = 0; i < 4; ++i) {
    SCOPED_TRACE(kExternal[i]);
    const Timeline t = read_chrome_trace(dir + kExternal[i]);
    EXPECT_GT(t.kernels_recorded, 0u);
    for (const std::string& m : t.messages) EXPECT_EQ(m.find("no GPU kernel events"), std::string::npos) << m;
  }
}

// The sampled rank-0 trace (our copy in traces/): 4,855 events, of which 4,810 are kept; the 40 cast
// kernels are found under aten::copy_ and the cast hotspot rule fires.
TEST(TraceReader, SampledRank0CastKernels) {
  const std::string gz = std::string(GLM5_SOURCE_DIR) + "/traces/hta_timeline_analysis_sampled_rank-0.json.gz";
  ASSERT_TRUE(fs::exists(gz)) << gz;
  const Timeline t = read_chrome_trace(gz);
  EXPECT_EQ(t.activities.size() + t.ranges.size(), 4810u);  // + 44 metadata "M" + 1 "Trace" = 4,855
  int kernels = 0, casts = 0;
  for (const Activity& a : t.activities) {
    kernels += a.kind == ActivityKind::kernel;
    if (a.name.find("direct_copy_kernel_cuda") != std::string::npos && a.op == "aten::copy_") ++casts;
  }
  EXPECT_EQ(kernels, 1154);
  EXPECT_EQ(casts, 40);
  const Analysis a = analyze(t, Peaks{});
  ASSERT_FALSE(a.hotspots.empty());
  EXPECT_EQ(a.hotspots.front().kind, "kv_dtype_cast");
  EXPECT_GT(a.hotspots.front().time_us, 0);
}

TEST(TraceReader, TritonExampleHasBaseTimeAndDriverCalls) {
  const std::string gz = std::string(GLM5_SOURCE_DIR) + "/traces/hta_triton_example_triton_example.json.gz";
  ASSERT_TRUE(fs::exists(gz)) << gz;
  const Timeline t = read_chrome_trace(gz);
  EXPECT_GT(t.base_time_ns, 0);
  EXPECT_TRUE(std::any_of(t.activities.begin(), t.activities.end(), [](const Activity& a) { return a.kind == ActivityKind::driver; }));
  EXPECT_TRUE(std::any_of(t.activities.begin(), t.activities.end(), [](const Activity& a) { return a.kind == ActivityKind::kernel; }));
}

// gzip is found by the magic bytes: a .gz under a .json name loads, and so does plain JSON named .gz.
TEST(TraceReader, GzipByMagicNotByName) {
  TempDir tmp("magic");
  const std::string text =
      R"({"traceEvents":[{"ph":"X","cat":"kernel","name":"k","ts":1,"dur":2,"pid":0,"tid":7}],"baseTimeNanoseconds":1000})";
  const std::string plain = tmp.write("a.json", text);
  const std::string gz = gzip_file(plain, (tmp.dir / "b.json").string());  // gzip data, .json name
  ASSERT_FALSE(gz.empty());
  const std::string named_gz = tmp.write("c.json.gz", text);  // plain text, .gz name
  for (const std::string& p : {plain, gz, named_gz}) {
    SCOPED_TRACE(p);
    const Timeline t = read_chrome_trace(p);
    ASSERT_EQ(t.activities.size(), 1u);
    EXPECT_EQ(t.activities[0].start_ns, 2000);  // base 1000 ns (written after the events) + 1 us
    EXPECT_EQ(t.activities[0].end_ns, 4000);
    EXPECT_EQ(t.activities[0].stream, 7);
  }
  // Two gzip members one after the other (cat a.gz b.gz) are one stream.
  const std::string half1 = tmp.write("h1", R"({"traceEvents":[{"ph":"X","cat":"kernel","name":"k",)");
  const std::string half2 = tmp.write("h2", R"("ts":1,"dur":2}]})");
  ASSERT_EQ(std::system(("gzip -c '" + half1 + "' > '" + (tmp.dir / "m.gz").string() + "' && gzip -c '" + half2 +
                         "' >> '" + (tmp.dir / "m.gz").string() + "'").c_str()), 0);
  EXPECT_EQ(read_chrome_trace((tmp.dir / "m.gz").string()).activities.size(), 1u);
}

// A gzip bomb (300 MB of padding in ~0.3 MB) is refused as soon as it inflates past 200x, naming the file.
TEST(TraceReader, GzipBombIsRefused) {
  TempDir tmp("bomb");
  const std::string bomb = (tmp.dir / "bomb.json.gz").string();
  const std::string cmd = "( printf '{\"traceEvents\":['; head -c 300000000 /dev/zero | tr '\\0' ' '; printf ']}' ) | gzip -1 > '" +
                          bomb + "'";
  // (the pipeline's status is gzip's: a missing head or tr would leave a short file, hence the size check)
  std::error_code ec;
  if (std::system(cmd.c_str()) != 0 || fs::file_size(bomb, ec) < 100000) GTEST_SKIP() << "no gzip / head / tr";
  try {
    read_chrome_trace(bomb);
    FAIL() << "a gzip bomb was read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("inflates more than 200x"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(bomb), std::string::npos) << e.what();
  }
}

// Cut-short and corrupt files: one line naming the file, with a byte offset.
TEST(TraceReader, TruncatedAndCorruptFiles) {
  TempDir tmp("trunc");
  std::string text = R"({"schemaVersion":1,"traceEvents":[)";
  for (int i = 0; i < 200; ++i)
    text += std::string(i ? "," : "") + R"({"ph":"X","cat":"kernel","name":"kernel \"q\" \\ )" + std::to_string(i) +
            R"(","ts":)" + std::to_string(i) + R"(,"dur":1,"args":{"correlation":)" + std::to_string(i) + "}}";
  text += R"(],"baseTimeNanoseconds":5})";
  const std::string whole = tmp.write("whole.json", text);
  ASSERT_EQ(read_chrome_trace(whole).activities.size(), 200u);
  // Cut at many places: always an error, never a crash; the message names the file and a byte offset.
  for (size_t cut : {size_t(0), size_t(1), size_t(10), size_t(40), text.size() / 3, text.size() / 2, text.size() - 30,
                     text.size() - 2, text.size() - 1}) {
    SCOPED_TRACE(cut);
    const std::string p = tmp.write("cut.json", text.substr(0, cut));
    const std::string m = error_of(p);
    EXPECT_NE(m.find(p), std::string::npos) << m;
    EXPECT_NE(m.find("not valid JSON"), std::string::npos) << m;
    if (cut > 0) {
      EXPECT_NE(m.find("at byte"), std::string::npos) << m;
    }
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
  // A cut in the middle of the traceEvents array says where the file ends.
  const std::string mid = tmp.write("mid.json", text.substr(0, text.size() / 2));
  EXPECT_NE(error_of(mid).find("at byte " + std::to_string(text.size() / 2)), std::string::npos) << error_of(mid);
  // Cut gzip data: "truncated gzip data" with the compressed offset; flipped bytes: corrupt data.
  const std::string gz = gzip_file(whole, (tmp.dir / "whole.json.gz").string());
  ASSERT_FALSE(gz.empty());
  const std::string zipped = slurp(gz);
  const std::string cut_gz = tmp.write("cut.json.gz", zipped.substr(0, zipped.size() / 2));
  EXPECT_NE(error_of(cut_gz).find("truncated gzip data"), std::string::npos) << error_of(cut_gz);
  std::string bad = zipped;
  for (size_t i = 20; i < 60 && i < bad.size(); ++i) bad[i] = char(bad[i] ^ 0x5a);
  const std::string bad_gz = tmp.write("bad.json.gz", bad);
  const std::string m = error_of(bad_gz);
  EXPECT_FALSE(m.empty());
  EXPECT_NE(m.find(bad_gz), std::string::npos) << m;
  EXPECT_TRUE(m.find("gzip") != std::string::npos || m.find("not valid JSON") != std::string::npos) << m;
  // Only the magic bytes.
  const std::string magic = tmp.write("magic.json", std::string("\x1f\x8b", 2));
  EXPECT_NE(error_of(magic).find("truncated gzip data"), std::string::npos) << error_of(magic);
}

// Malformed JSON inside an event names the event and where it starts; outside, the byte.
TEST(TraceReader, MalformedJsonGivesEventAndOffset) {
  TempDir tmp("malformed");
  const std::string ok = R"({"ph":"X","cat":"kernel","name":"k","ts":0,"dur":5})";
  const std::string head = R"({"traceEvents": [)" + ok + ", ";
  const std::string p1 = tmp.write("e1.json", head + R"({"ph":"X" "cat":"kernel"}]})");
  const std::string m1 = error_of(p1);
  EXPECT_NE(m1.find("not valid JSON"), std::string::npos) << m1;
  EXPECT_NE(m1.find("traceEvents[1]"), std::string::npos) << m1;
  EXPECT_NE(m1.find("at byte " + std::to_string(head.size())), std::string::npos) << m1;
  const std::string p2 = tmp.write("e2.json", head + R"({"ph":"X","cat":"kernel","name":"k","ts":tru,"dur":1}]})");
  EXPECT_NE(error_of(p2).find("traceEvents[1]"), std::string::npos) << error_of(p2);
  const std::string p3 = tmp.write("e3.json", "{\"traceEvents\": [" + ok + ",]}");
  EXPECT_NE(error_of(p3).find("not valid JSON"), std::string::npos) << error_of(p3);
  const std::string p4 = tmp.write("e4.json", "{\"traceEvents\": [," + ok + "]}");
  EXPECT_NE(error_of(p4).find("not valid JSON"), std::string::npos) << error_of(p4);
  const std::string p5 = tmp.write("e5.json", "{\"traceEvents\": [" + ok + "], \"x\": nul}");
  const std::string m5 = error_of(p5);
  EXPECT_NE(m5.find("not valid JSON"), std::string::npos) << m5;
  EXPECT_NE(m5.find("at byte"), std::string::npos) << m5;
  const std::string p6 = tmp.write("e6.json", "{\"traceEvents\": [" + ok + "}}");
  EXPECT_NE(error_of(p6).find("not valid JSON"), std::string::npos) << error_of(p6);
  const std::string p7 = tmp.write("e7.json", "{\"traceEvents\": [" + ok + "]} trailing");
  EXPECT_NE(error_of(p7).find("not valid JSON"), std::string::npos) << error_of(p7);
  // A semantic error keeps the old message.
  const std::string p8 = tmp.write("e8.json", head + R"({"ph":"X","cat":"kernel","name":"k","ts":0,"dur":-5}]})");
  EXPECT_NE(error_of(p8).find("traceEvents[1].dur: must not be negative"), std::string::npos) << error_of(p8);
  // Not gzip although named .gz: the hint says so.
  const std::string p9 = tmp.write("x.json.gz", "x");
  EXPECT_NE(error_of(p9).find("gunzip"), std::string::npos) << error_of(p9);
}

// Several MiB of events: seams of the 2 MiB batches and the 4 MiB read chunks fall inside strings,
// escapes and numbers; "traceEvents" inside strings or deeper objects is not the events array; the
// result equals a DOM reading event for event.
TEST(TraceReader, SeamsInsideStringsAndEscapes) {
  TempDir tmp("seams");
  for (int shift = 0; shift < 6; ++shift) {
    SCOPED_TRACE(shift);
    std::string text = R"({"note": "traceEvents [ , ] { \" }", "meta": {"traceEvents": [1, 2]}, "traceEvents": [)";
    std::vector<std::string> names;
    // A filler event that moves the 4 MiB chunk seam (4194304) onto the escapes of the next events.
    size_t i = 0;
    while (text.size() < (size_t(4) << 20) + 300000) {
      std::string name = "k" + std::to_string(i) + (i % 3 == 0 ? R"( \\\"x\" [a, {b}] \u00e9 \\)" : " plain");
      if (text.size() > (size_t(4) << 20) - 400 && text.size() < (size_t(4) << 20) - 100)
        name += std::string(shift * 7 % 23, 'z');
      text += std::string(i ? ",\n" : "") + R"({"ph": "X", "cat": "kernel", "name": ")" + name + R"(", "ts": )" +
              std::to_string(i) + ".5, \"dur\": 1.25, \"args\": {\"traceEvents\": \"]\", \"stream\": " +
              std::to_string(i % 4) + "}}";
      ++i;
    }
    text += R"(], "baseTimeNanoseconds": 7})";
    const std::string p = tmp.write("seams.json", text);
    const Timeline t = read_chrome_trace(p);
    const json doc = json::parse(text);
    ASSERT_EQ(t.activities.size(), doc["traceEvents"].size());
    for (size_t k = 0; k < t.activities.size(); ++k) {
      const json& e = doc["traceEvents"][k];
      ASSERT_EQ(t.activities[k].name, e["name"].get<std::string>()) << k;
      ASSERT_EQ(t.activities[k].start_ns, 7 + std::llround(e["ts"].get<double>() * 1e3)) << k;
      ASSERT_EQ(t.activities[k].stream, e["args"]["stream"].get<int>()) << k;
    }
  }
}

// Integer args that the field cannot hold, or that are not integers, count as absent: never a wrapped value
// (layer 4294967298 used to read as layer 2, kernels_launched -5 as 2^64 - 5).
TEST(TraceReader, OutOfRangeIntegerArgsAreAbsent) {
  TempDir tmp("int_args");
  auto kernel = [](const std::string& layer, double ts) {
    return "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"pid\":0,\"tid\":7,\"ts\":" + std::to_string(ts) +
           ",\"dur\":1,\"args\":{\"layer\":" + layer + ",\"op\":\"attn.mla\",\"step\":0}}";
  };
  const std::string path = tmp.write(
      "t.json", "{\"traceEvents\": [" +
                    kernel("4294967298", 1) + "," + kernel("1.5", 3) + "," + kernel("-2147483649", 5) + "," +
                    kernel("18446744073709551615", 7) + "," + kernel("2", 9) + "," + kernel("3.0", 11) + "]}");
  const Timeline t = read_chrome_trace(path);
  std::vector<int> layers;
  for (const Activity& a : t.activities) layers.push_back(a.layer);
  EXPECT_EQ(layers, (std::vector<int>{-1, -1, -1, -1, 2, 3}));
  // The glm5prof block's counts decide whether the trace is complete: a count that is not a non-negative integer
  // is a corrupt trace (until session 31 it read as 0, "no count", which skipped the completeness check).
  for (const char* bad : {"\"kernels_launched\": -5", "\"records_dropped\": 1.5", "\"kernels_recorded\": \"9\""}) {
    const std::string p = tmp.write("counts.json", std::string("{\"glm5prof\": {") + bad + "}, \"traceEvents\": [" +
                                                       kernel("2", 1) + "]}");
    try {
      read_chrome_trace(p);
      ADD_FAILURE() << bad << ": expected an error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("must be a non-negative integer"), std::string::npos) << e.what();
    }
  }
  // Metadata that claims more kernels than the file holds: incomplete, and said so.
  const std::string cut = tmp.write("cut.json", "{\"glm5prof\": {\"complete\": true, \"kernels_launched\": 9, "
                                                "\"kernels_recorded\": 9}, \"traceEvents\": [" + kernel("2", 1) + "]}");
  const Timeline c = read_chrome_trace(cut);
  EXPECT_FALSE(c.complete);
  EXPECT_EQ(c.kernels_recorded, 1u);
  ASSERT_EQ(c.messages.size(), 1u);
  EXPECT_EQ(c.messages[0], "the file holds 1 kernel events, its metadata says 9 were recorded");
}

// A GPU activity without "dur" (it counted as 0 us), and byte / FLOP counts that are negative, not finite or
// astronomical (the report printed 46-digit GB/s): one line naming the event and the field (bad-input review,
// session 16). A host range or runtime call may still leave dur out.
TEST(TraceReader, GpuActivityNeedsDurAndSaneAmounts) {
  TempDir tmp("amounts");
  auto ev = [](const std::string& cat, const std::string& extra) {
    return "{\"ph\":\"X\",\"cat\":\"" + cat + "\",\"name\":\"k\",\"pid\":0,\"tid\":7,\"ts\":1" + extra + "}";
  };
  auto doc = [](const std::string& events) { return "{\"traceEvents\": [" + events + "]}"; };
  const std::string ok = tmp.write("ok.json", doc(ev("kernel", ",\"dur\":2,\"args\":{\"bytes\":1e6,\"flops\":0}") + "," +
                                                  ev("cuda_runtime", ",\"dur\":0")));
  const Timeline t = read_chrome_trace(ok);
  ASSERT_EQ(t.activities.size(), 2u);
  for (const Activity& a : t.activities) {
    if (a.kind == ActivityKind::kernel) {
      EXPECT_DOUBLE_EQ(a.bytes, 1e6);
    }
  }
  const std::string no_dur = tmp.write("no_dur.json", doc(ev("cuda_runtime", ",\"dur\":1") + "," + ev("kernel", "")));
  EXPECT_NE(error_of(no_dur).find("traceEvents[1].dur: missing"), std::string::npos) << error_of(no_dur);
  // Host calls and ops too (session 29: an op read as an empty span lost its kernels' attribution silently).
  const std::string host_no_dur = tmp.write("host_no_dur.json", doc(ev("cuda_runtime", "")));
  EXPECT_NE(error_of(host_no_dur).find("traceEvents[0].dur: missing (a host call or op"), std::string::npos)
      << error_of(host_no_dur);
  const std::string null_dur = tmp.write("null_dur.json", doc(ev("gpu_memcpy", ",\"dur\":null")));
  EXPECT_NE(error_of(null_dur).find("traceEvents[0].dur: missing"), std::string::npos) << error_of(null_dur);
  for (const std::string bad : {"-1e300", "-1", "1e300", "\"big\""}) {
    const std::string p = tmp.write("bytes.json", doc(ev("kernel", ",\"dur\":2,\"args\":{\"bytes\":" + bad + "}")));
    EXPECT_NE(error_of(p).find("traceEvents[0].args.bytes"), std::string::npos) << bad << ": " << error_of(p);
    const std::string q = tmp.write("flops.json", doc(ev("kernel", ",\"dur\":2,\"args\":{\"flops\":" + bad + "}")));
    EXPECT_NE(error_of(q).find("traceEvents[0].args.flops"), std::string::npos) << bad << ": " << error_of(q);
  }
  const std::string op_bytes = tmp.write("op_bytes.json", doc(ev("gpu_memset", ",\"dur\":2,\"args\":{\"op_bytes\":-5}")));
  EXPECT_NE(error_of(op_bytes).find("args.op_bytes"), std::string::npos) << error_of(op_bytes);
}

TEST(LayerNames, OursModulePathsAndWithModulesSpans) {
  EXPECT_EQ(parse_layer_name("layer.7"), 7);
  EXPECT_EQ(parse_layer_name("model.layers.12"), 12);
  EXPECT_EQ(parse_layer_name("model.layers.12.self_attn"), 12);
  EXPECT_EQ(parse_layer_name("layers.0.mlp.experts"), 0);
  EXPECT_EQ(parse_layer_name("nn.Module: DeepseekV2DecoderLayer_3"), 3);
  EXPECT_EQ(parse_layer_name("nn.Module: GlmMoeDsaBlock_61"), 61);
  // Not layers: other modules, numbers that do not end the path segment, look-alikes.
  EXPECT_EQ(parse_layer_name("nn.Module: Linear_3"), -1);
  EXPECT_EQ(parse_layer_name("nn.Module: DecoderLayer_3x"), -1);
  EXPECT_EQ(parse_layer_name("nn.Module: Layer_3"), -1);
  EXPECT_EQ(parse_layer_name("model.layers.12x"), -1);
  EXPECT_EQ(parse_layer_name("model.sublayers.3"), -1);
  EXPECT_EQ(parse_layer_name("model.layers."), -1);
  EXPECT_EQ(parse_layer_name("model.layers.99999999999"), -1);
  EXPECT_EQ(parse_layer_name("aten::mm"), -1);
  EXPECT_EQ(parse_layer_name("layer.3.attn"), -1);  // ours are exact: "layer.N"
}

// A foreign Kineto trace (no args of ours): each kernel lands on the layer of the innermost range around its
// launch: a record_function module path, a with_modules python_function span, or none (outside layers).
TEST(TraceReader, ForeignKernelsLandOnTheirLayerRange) {
  TempDir tmp("layers");
  auto span = [](const char* cat, const std::string& name, double ts, double dur, int tid, const std::string& args) {
    return std::string("{\"ph\":\"X\",\"cat\":\"") + cat + "\",\"name\":\"" + name + "\",\"pid\":1,\"tid\":" +
           std::to_string(tid) + ",\"ts\":" + std::to_string(ts) + ",\"dur\":" + std::to_string(dur) +
           ",\"args\":{" + args + "}}";
  };
  auto launch = [&](double ts, int corr) {
    return span("cuda_runtime", "cudaLaunchKernel", ts, 1, 7, "\"correlation\":" + std::to_string(corr)) + "," +
           span("kernel", "k" + std::to_string(corr), 100 + ts, 2, 7,
                "\"correlation\":" + std::to_string(corr) + ",\"stream\":7,\"device\":0");
  };
  const std::string events =
      span("user_annotation", "ProfilerStep#4", 0, 90, 7, "") + "," +
      span("python_function", "nn.Module: DeepseekV2DecoderLayer_0", 1, 20, 7, "") + "," +
      span("cpu_op", "aten::mm", 2, 5, 7, "") + "," + launch(3, 1) + "," +
      span("user_annotation", "model.layers.1.self_attn", 30, 20, 7, "") + "," +
      span("cpu_op", "aten::bmm", 31, 5, 7, "") + "," + launch(32, 2) + "," +
      span("python_function", "nn.Module: Linear_9", 60, 10, 7, "") + "," + launch(61, 3) + "," +
      span("python_function", "model.py(12): forward", 75, 10, 7, "") + "," +
      // A layer-named submodule inside a decoder layer (with_modules numbers each class on its own): the outer
      // layer wins.
      span("python_function", "nn.Module: Qwen2MoeDecoderLayer_3", 91, 20, 7, "") + "," +
      span("python_function", "nn.Module: Qwen2MoeSparseMoeBlock_0", 92, 10, 7, "") + "," + launch(93, 4) + "," +
      // A step that begins inside a layer span (which ends just after it) does not pass that layer on.
      span("python_function", "nn.Module: LlamaDecoderLayer_5", 120, 31, 7, "") + "," +
      span("user_annotation", "ProfilerStep#5", 150, 60, 7, "") + "," + launch(170, 5);
  const std::string path = tmp.write("foreign.json", "{\"traceEvents\":[" + events + "]}");
  const Timeline t = read_chrome_trace(path);
  std::map<std::string, const Activity*> k;
  for (const Activity& a : t.activities)
    if (a.kind == ActivityKind::kernel) k[a.name] = &a;
  ASSERT_EQ(k.size(), 5u);
  EXPECT_EQ(k["k4"]->layer, 3);
  EXPECT_EQ(k["k5"]->layer, -1);
  EXPECT_EQ(k["k5"]->step, 5);
  EXPECT_EQ(k["k1"]->layer, 0);
  EXPECT_EQ(k["k1"]->op, "aten::mm");
  EXPECT_EQ(k["k1"]->step, 4);
  EXPECT_EQ(k["k2"]->layer, 1);
  EXPECT_EQ(k["k2"]->op, "aten::bmm");
  EXPECT_EQ(k["k3"]->layer, -1);  // inside a Linear module span, no layer around it
  EXPECT_EQ(k["k3"]->step, 4);
  // The layer's python_function span is kept as a host range; the other Python spans are not.
  size_t py = 0;
  for (const Range& r : t.ranges) py += r.name.rfind("nn.Module", 0) == 0 || r.name.find("forward") != std::string::npos;
  EXPECT_EQ(py, 4u);
}

}  // namespace
}  // namespace glm5
