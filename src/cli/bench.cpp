// `glm5prof bench kernels [--out FILE.json]`: see engine/kernel_bench.h for what is measured and how.
#include "cli/bench.h"

#include <cstdio>
#include <filesystem>

#include "cli/cli_checks.h"
#include "common/error.h"
#include "trace/atomic_file.h"

namespace glm5 {

BenchCli add_bench_subcommand(CLI::App& app) {
  BenchCli cli;
  cli.state = std::make_shared<BenchCliState>();
  cli.bench = app.add_subcommand("bench", "benchmarks (bench kernels: the KV-path kernels against measured ceilings)");
  cli.bench->require_subcommand(1);
  cli.kernels = cli.bench->add_subcommand(
      "kernels", "kv_cast, kv_gather_cast, mla_decode fp8/bf16, indexer_score, topk: median time, GB/s, TFLOP/s, "
                 "roofline fraction vs copy bandwidth and BF16 GEMM peak measured in the same run");
  KernelBenchOptions& o = cli.state->options;
  cli.kernels->add_option("--out", cli.state->out_json, "write the records as a JSON list to this file")->check(non_empty());
  cli.kernels->add_option("--reps", o.reps, "timed launches per shape (median reported)")->capture_default_str()
      ->check(CLI::Range(1, 100000));
  cli.kernels->add_option("--warmup", o.warmup, "untimed launches first")->capture_default_str()->check(CLI::Range(0, 100000));
  cli.kernels->add_option("--pool-tokens", o.pool_tokens, "FP8 pool rows for the casts and mla_decode")
      ->capture_default_str()
      ->check(CLI::Range(kKernelBenchMinPoolTokens, int64_t(1) << 32));
  cli.kernels->add_flag("--quick", o.quick, "batch 1 and 64 only (indexer: batch 1)");
  cli.kernels->add_option("--only", o.only,
                          "kernel families to run (default all): cast, mla, indexer, linear, absorb, moe (moe-pair: its "
                          "batch-1 FP8 part alone)")
      ->delimiter(',')
      ->check(CLI::IsMember({"cast", "mla", "indexer", "linear", "absorb", "moe", "moe-pair"}));
  return cli;
}

int BenchCli::run() const {
  const BenchCliState& s = *state;
  if (!s.out_json.empty()) {  // fail in the first second, not after the run
    std::error_code ec;  // (the non-throwing form: a path it cannot stat is require_writable_dir's to report)
    require_usage(!std::filesystem::is_directory(s.out_json, ec),
                  "--out " + s.out_json + ": is a directory, expected the JSON file to write");
    const std::filesystem::path parent = std::filesystem::path(s.out_json).parent_path();
    require_writable_dir(parent.empty() ? "." : parent.string());
  }
  const std::vector<KernelBenchRecord> records = run_kernel_bench(s.options);
  if (!s.out_json.empty()) {
    write_file_atomic(s.out_json, kernel_bench_json(records).dump(2) + "\n");
    std::fprintf(stderr, "bench kernels: %zu records written to %s\n", records.size(), s.out_json.c_str());
  }
  std::printf("%s", kernel_bench_table(records).c_str());
  return 0;
}

}  // namespace glm5
