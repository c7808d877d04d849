// Option checks shared by the subcommands' CLI11 definitions.
#pragma once
#include <CLI/CLI.hpp>

#include <string>

namespace glm5 {

// Refuses an empty string value (`--model ""`, `--json "$UNSET"`): without it an empty value reads as "option not
// given" and, e.g., a CI job whose path variable is unset writes nothing without a word (bad-input attack, session 31).
// CLI11 reports it as "--json: needs a non-empty value" (a usage error, exit 2).
inline CLI::Validator non_empty() {
  return CLI::Validator([](std::string& s) { return s.empty() ? std::string("needs a non-empty value") : std::string(); },
                        "NON-EMPTY");
}

}  // namespace glm5
