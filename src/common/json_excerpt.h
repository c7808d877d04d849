// A short single-line rendering of a JSON value for error messages. No CUDA: the fuzz targets (tools/fuzz.sh)
// link it without the CUDA runtime.
#pragma once
#include <cstddef>
#include <string>

#include <nlohmann/json.hpp>

namespace glm5 {

// `v` as compact JSON, cut to at most `max_chars` characters (the last three then "..."). Containers nested
// deeper than kJsonExcerptDepth are shown as [...] / {...} and long strings are cut before they are escaped,
// so the work and the stack depth are bounded whatever the input: nlohmann::json::dump() recurses once per
// nesting level and overflowed the stack on a value nested 100,000 deep (bad-input review, session 16), and
// it rendered a 2 MB string whole before the caller shortened it. Invalid UTF-8 is replaced, never thrown.
inline constexpr int kJsonExcerptDepth = 8;
std::string json_excerpt(const nlohmann::json& v, size_t max_chars = 60);

// nlohmann's message for a failed parse without its "[json.exception.parse_error.101] " prefix, on one line
// (for "FILE: not valid JSON (...)" errors).
std::string json_error_text(const nlohmann::json::exception& e);

}  // namespace glm5
