// Option checks shared by the subcommands' CLI11 definitions.
#pragma once
#include <CLI/CLI.hpp>

#include <cmath>
#include <string>

namespace glm5 {

// Refuses an empty string value (`--model ""`, `--json "$UNSET"`): without it an empty value reads as "option not
// given" and, e.g., a CI job whose path variable is unset writes nothing without a word (bad-input attack, session 31).
// CLI11 reports it as "--json: needs a non-empty value" (a usage error, exit 2).
inline CLI::Validator non_empty() {
  return CLI::Validator([](std::string& s) { return s.empty() ? std::string("needs a non-empty value") : std::string(); },
                        "NON-EMPTY");
}

// A finite number in [lo, hi], or (lo, hi] with lo_open; the message names the range as written in `range`, e.g.
// "--alpha: must be a number in (0, 1], got 0". (CLI::Range printed its bounds with %f -- "Value 0 not in range
// 0.000000 to 1.000000" for an alpha whose lower end is open -- and lets NaN through.)
inline CLI::Validator number_in(double lo, double hi, bool lo_open, const std::string& range) {
  return CLI::Validator(
      [=](std::string& s) {
        double v = 0;
        try {
          size_t used = 0;
          v = std::stod(s, &used);
          if (used != s.size()) throw std::invalid_argument(s);
        } catch (const std::exception&) {
          return "must be a number in " + range + ", got '" + s + "'";
        }
        const bool ok = std::isfinite(v) && (lo_open ? v > lo : v >= lo) && v <= hi;
        return ok ? std::string() : "must be a number in " + range + ", got " + s;
      },
      "NUMBER " + range);
}

}  // namespace glm5
