// `glm5prof compare`: the KV-path sweep (src/engine/compare_session.h) on the command line.
#pragma once
#include <CLI/CLI.hpp>

#include "engine/compare_session.h"

namespace glm5 {

CLI::App* add_compare_subcommand(CLI::App& app, CompareOptions& opt);
int run_compare_cli(const CompareOptions& opt);

}  // namespace glm5
