// `glm5prof compare`: the KV-path sweep (src/engine/compare_session.h) on the command line.
#pragma once
#include <CLI/CLI.hpp>

#include <algorithm>
#include <string>

#include "engine/compare_session.h"

namespace glm5 {

// Digits only, for unsigned options such as --seed (CLI11 stored "-5" in a uint64_t as 2^64 - 5).
inline const CLI::Validator kNonNegativeInteger(
    [](std::string& s) {
      if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos)
        return "expected a non-negative integer, got '" + s + "'";
      // Above 2^64 - 1 the parse would clamp, so different seeds would silently become one (bad-input review, S29).
      const std::string max = "18446744073709551615";
      const std::string digits = s.substr(std::min(s.find_first_not_of('0'), s.size()));
      if (digits.size() > max.size() || (digits.size() == max.size() && digits > max))
        return "'" + s + "' is above 2^64 - 1 = " + max;
      return std::string();
    },
    "", "non-negative integer");

CLI::App* add_compare_subcommand(CLI::App& app, CompareOptions& opt);
int run_compare_cli(const CompareOptions& opt);

}  // namespace glm5
