// `glm5prof compare`: the KV-path sweep (src/engine/compare_session.h) on the command line.
#pragma once
#include <CLI/CLI.hpp>

#include "engine/compare_session.h"

namespace glm5 {

// Digits only, for unsigned options such as --seed (CLI11 stored "-5" in a uint64_t as 2^64 - 5).
inline const CLI::Validator kNonNegativeInteger(
    [](std::string& s) {
      return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos
                 ? std::string()
                 : "expected a non-negative integer, got '" + s + "'";
    },
    "", "non-negative integer");

CLI::App* add_compare_subcommand(CLI::App& app, CompareOptions& opt);
int run_compare_cli(const CompareOptions& opt);

}  // namespace glm5
