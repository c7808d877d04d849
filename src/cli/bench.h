// `glm5prof bench kernels`: the CLI face of engine/kernel_bench.h (registered by main.cpp).
#pragma once
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "engine/kernel_bench.h"

namespace glm5 {

struct BenchCliState {
  KernelBenchOptions options;
  std::string out_json;  // empty: table only
};

struct BenchCli {
  CLI::App* bench = nullptr;
  CLI::App* kernels = nullptr;
  std::shared_ptr<BenchCliState> state;
  bool selected() const { return bench && bench->parsed(); }
  // Runs the parsed bench subcommand: progress on stderr, the table on stdout (last), the JSON list
  // to --out. Returns the exit code; throws glm5::Error on failures (main prints one line).
  int run() const;
};

// Adds `bench` with its `kernels` subcommand (options --out, --reps, --warmup, --pool-tokens, --quick).
BenchCli add_bench_subcommand(CLI::App& app);

}  // namespace glm5
