// --graph-trace graph|node and --attribution-steps (profile): bad values and misplaced options fail
// with one clear line and a non-zero exit, through the CLI and through run_profile (ProfileOptions).
// CPU only: every case fails before a model is built.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "../cli/run_binary.h"
#include "common/error.h"
#include "engine/decode_engine.h"
#include "engine/profile_session.h"
#include "report/report.h"

namespace glm5 {
namespace {

namespace fs = std::filesystem;

fs::path scratch() {
  const fs::path d = fs::temp_directory_path() / ("glm5_graph_trace_option_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d;
}

ProfileOptions cpu_options() {
  ProfileOptions o;
  o.backend = "cpu";
  o.model = "glm5-tiny";
  o.out_dir = (scratch() / "out").string();
  o.quiet = true;
  return o;
}

std::string error_of(const ProfileOptions& o) {
  try {
    run_profile(o);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(GraphTraceOption, RunProfileRejectsBadValues) {
  ProfileOptions o = cpu_options();
  o.graph_trace = "nodes";
  EXPECT_EQ(error_of(o), "--graph-trace must be graph or node, got 'nodes'");
  o.graph_trace = "graph";  // without --graph
  EXPECT_EQ(error_of(o), "--graph-trace graph applies to CUDA graph replays only: add --graph or drop it");
  o.graph_trace = "";
  o.attribution_steps = 0;
  EXPECT_EQ(error_of(o), "--attribution-steps must be in [1, 100], got 0");
  o.attribution_steps = 101;
  EXPECT_EQ(error_of(o), "--attribution-steps must be in [1, 100], got 101");
  o.attribution_steps = 2;  // without --graph (so at node level)
  EXPECT_EQ(error_of(o),
            "--attribution-steps applies to --graph-trace graph only (node level attributes every measured step)");
  // The L2 prefetch runs on the CUDA side stream; its shaping options need it; the join needs the o_proj prefetch.
  o = cpu_options();
  o.o_proj_l2_prefetch = 0.4;
  EXPECT_EQ(error_of(o),
            "--l2-prefetch-o-proj / --l2-prefetch-q-up run on the side stream: they need the CUDA backend and --overlap on");
  o = cpu_options();
  o.l2_persist_mib = 30;
  EXPECT_NE(error_of(o).find("shape an L2 prefetch"), std::string::npos);
  o = cpu_options();
  o.l2_prefetch_join = "on";
  EXPECT_EQ(error_of(o), "--l2-prefetch-join on joins the o_proj prefetch: add --l2-prefetch-o-proj F");
  // --graph on the CPU backend fails first, whatever --graph-trace says.
  o = cpu_options();
  o.graph = true;
  o.graph_trace = "graph";
  EXPECT_NE(error_of(o).find("--graph needs the CUDA backend"), std::string::npos);
}

struct CliCase {
  std::vector<std::string> args;
  std::string expect;  // in the one stderr line
};

TEST(GraphTraceOption, CliRejectsBadValuesWithOneLine) {
  const char* dir = std::getenv("GLM5_BINARY_DIR");
  const fs::path bin = fs::path(dir && *dir ? dir : GLM5_BINARY_DIR) / "glm5prof";
  if (!fs::exists(bin)) GTEST_SKIP() << "build the glm5prof target first: " << bin;
  const fs::path tmp = scratch();
  const std::vector<CliCase> cases = {
      {{"profile", "--backend", "cpu", "--graph", "--graph-trace", "kernel"}, "--graph-trace: kernel not in {graph,node}"},
      {{"profile", "--backend", "cpu", "--graph-trace", "graph"}, "--graph-trace graph applies to CUDA graph replays only"},
      {{"profile", "--backend", "cpu", "--graph", "--attribution-steps", "0"}, "--attribution-steps: Value 0 not in range 1 to 100"},
      {{"profile", "--backend", "cpu", "--graph", "--graph-trace", "node", "--attribution-steps", "2"},
       "--attribution-steps applies to --graph with --graph-trace graph only"},
      {{"profile", "--backend", "cpu", "--l2-prefetch-o-proj", "1.5"}, "--l2-prefetch-o-proj: '1.5' is not a fraction in [0, 1]"},
      {{"profile", "--backend", "cpu", "--overlap", "off", "--l2-prefetch-o-proj", "0.4"}, "drop --overlap off"},
      {{"profile", "--backend", "cpu", "--l2-prefetch-join", "on"}, "--l2-prefetch-join on joins the o_proj prefetch"},
      {{"profile", "--backend", "cpu", "--l2-persist-mib", "30"}, "shape an L2 prefetch"},
      {{"profile", "--backend", "cpu", "--l2-prefetch-period", "100"}, "--l2-prefetch-period: '100' is not a multiple of 16"},
      {{"profile", "--backend", "cpu", "--l2-prefetch-q-up", "lots"}, "--l2-prefetch-q-up: 'lots' is not a fraction in [0, 1]"},
  };
  for (const CliCase& c : cases) {
    std::vector<std::string> args = c.args;
    args.push_back("--out");
    args.push_back((tmp / "cli-out").string());
    const test::RunResult r = test::run_glm5prof(args, tmp);
    SCOPED_TRACE(c.expect);
    EXPECT_EQ(r.status, 2) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "stderr must be one line: " << r.err;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(tmp / "cli-out" / "report.json"));
  }
}

// report.md states both timings of a --graph-trace graph run, and no node-level excuse for its overhead.
TEST(GraphTraceOption, ReportMarkdownStatesTheAttributionStep) {
  ReportInput in;
  in.run_spec = nlohmann::json{{"command", "profile"}};
  RunReport r;
  r.name = "fp8";
  r.spec = nlohmann::json{{"graph", true}};
  r.timing = nlohmann::json{{"graph_trace", "graph"},       {"untraced_step_us", 22800.0},
                            {"traced_step_us", 23100.0},    {"overhead_pct", 1.3157},
                            {"limit_pct", 2.0},             {"within_limit", true},
                            {"method", "CUDA events"},      {"attribution_steps", 1},
                            {"attribution_step_us", 24500.0}, {"attribution_overhead_pct", 7.456},
                            {"graph_record_step_us", 22950.0}};
  in.runs.push_back(r);
  const std::string md = report_to_markdown(in);
  EXPECT_NE(md.find("traced step 23100.0 us: **1.32%** (limit 2.0%, within)"), std::string::npos) << md;
  EXPECT_NE(md.find("Attribution steps (node-level graph tracing, the kernels of the tables below): 1 step(s), median "
                    "24500.0 us (7.46% over untraced); CUPTI's graph-level records of the traced steps: median 22950.0 us"),
            std::string::npos)
      << md;
  EXPECT_EQ(md.find("node-level graph tracing, about 1 us per node"), std::string::npos);
  // Over the limit at node level: the explanation, pointing at --graph-trace graph.
  in.runs[0].timing["graph_trace"] = "node";
  in.runs[0].timing["within_limit"] = false;
  const std::string md2 = report_to_markdown(in);
  EXPECT_NE(md2.find("--graph-trace graph avoids it"), std::string::npos);
  EXPECT_EQ(md2.find("Attribution steps"), std::string::npos);
}

// The profile command's default fractions are the engine's (ProfileOptions keeps its own copy of the numbers).
TEST(GraphTraceOption, L2PrefetchDefaultIsTheEngineDefault) {
  EXPECT_EQ(ProfileOptions{}.o_proj_l2_prefetch, EngineOptions{}.o_proj_l2_prefetch);
  EXPECT_EQ(ProfileOptions{}.q_up_l2_prefetch, EngineOptions{}.q_up_l2_prefetch);
  EXPECT_EQ(ProfileOptions{}.o_proj_pdl == "on", EngineOptions{}.o_proj_pdl);
  EXPECT_EQ(ProfileOptions{}.mma_pdl == "on", EngineOptions{}.mma_pdl);
  EXPECT_EQ(ProfileOptions{}.absorb_tc == "on", EngineOptions{}.absorb_tc);
  EXPECT_EQ(ProfileOptions{}.moe_down_early == "on", EngineOptions{}.moe_down_early);
  EXPECT_EQ(ProfileOptions{}.moe_shared_late == "on", EngineOptions{}.moe_shared_late);
  EXPECT_EQ(ProfileOptions{}.moe_gate_fused == "on", EngineOptions{}.moe_gate_fused);
  EXPECT_EQ(ProfileOptions{}.qkv_a_admit_at_exit == "on", EngineOptions{}.qkv_a_admit_at_exit);
  EXPECT_EQ(ProfileOptions{}.score_early_keys == "on", EngineOptions{}.score_early_keys);
  EXPECT_EQ(ProfileOptions{}.unabsorb_l2_prefetch == "on", EngineOptions{}.unabsorb_l2_prefetch);
  EXPECT_EQ(ProfileOptions{}.absorb_after_score == "on", EngineOptions{}.absorb_after_score);
  EXPECT_EQ(ProfileOptions{}.topk_gather == "on", EngineOptions{}.topk_gather);
  EXPECT_EQ(ProfileOptions{}.topk_score_hist == "on", EngineOptions{}.topk_score_hist);
  EXPECT_EQ(ProfileOptions{}.topk_flat == "on", EngineOptions{}.topk_flat);
  EXPECT_EQ(ProfileOptions{}.indexer_first == "on", EngineOptions{}.indexer_first);
  EXPECT_EQ(ProfileOptions{}.prologue_slim == "on", EngineOptions{}.prologue_slim);
  EXPECT_EQ(ProfileOptions{}.moe_route_rank == "on", EngineOptions{}.moe_route_rank);
  EXPECT_EQ(ProfileOptions{}.moe_fused == "on", EngineOptions{}.moe_fused);
  EXPECT_EQ(ProfileOptions{}.moe_wgmma == "on", EngineOptions{}.moe_wgmma);
  EXPECT_EQ(ProfileOptions{}.moe_combine_norm == "on", EngineOptions{}.moe_combine_norm);
  EXPECT_EQ(ProfileOptions{}.gemv_fold == "on", EngineOptions{}.gemv_fold);
  EXPECT_EQ(ProfileOptions{}.side_priority == "on", EngineOptions{}.side_priority);
  EXPECT_EQ(ProfileOptions{}.fp8_mma_max_m, EngineOptions{}.fp8_mma_max_m);
  EXPECT_EQ(ProfileOptions{}.fp8_large_m == "wgmma", EngineOptions{}.fp8_large_m == LinearContext::Fp8LargeM::Wgmma);
  EXPECT_EQ(ProfileOptions{}.fp8_wgmma_cut == "stream-k", EngineOptions{}.fp8_wgmma_stream_k);
}

}  // namespace
}  // namespace glm5
