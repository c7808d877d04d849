// `glm5prof compare`: the KV-path sweep (src/engine/compare_session.h) on the command line.
#pragma once
#include <CLI/CLI.hpp>

#include <charconv>
#include <cstdint>
#include <string>
#include <system_error>

#include "engine/compare_session.h"

namespace glm5 {

// Digits only, for unsigned options such as --seed (CLI11 stored "-5" in a uint64_t as 2^64 - 5).
inline const CLI::Validator kNonNegativeInteger(
    [](std::string& s) {
      if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos)
        return "expected a non-negative integer, got '" + s + "'";
      // Above 2^64 - 1 the parse would clamp, so different seeds would silently become one (bad-input review, S29).
      uint64_t v = 0;
      if (std::from_chars(s.data(), s.data() + s.size(), v).ec == std::errc::result_out_of_range)
        return "'" + s + "' is above 2^64 - 1 = 18446744073709551615";
      return std::string();
    },
    "", "non-negative integer");

CLI::App* add_compare_subcommand(CLI::App& app, CompareOptions& opt);
int run_compare_cli(const CompareOptions& opt);

}  // namespace glm5
