// `glm5prof diff BASE NEW`: the regression gate (src/analysis/diff.h) on the command line.
// Exit status: 0 no regression, 1 regression, 2 bad input.
#pragma once
#include <CLI/CLI.hpp>

#include <memory>
#include <string>
#include <vector>

namespace glm5 {

struct DiffCliArgs {
  std::string base, now, config, md_out, json_out, junit_out;
  double threshold_pct = -1, alpha = -1, min_abs_us = -1;  // -1: from --config or the default
  std::vector<std::string> gate;
};

CLI::App* add_diff_subcommand(CLI::App& app, DiffCliArgs& args);
int run_diff_cli(const DiffCliArgs& args);

}  // namespace glm5
