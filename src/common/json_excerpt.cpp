#include "common/json_excerpt.h"

namespace glm5 {

namespace {

using nlohmann::json;

std::string scalar(const json& v) { return v.dump(-1, ' ', false, json::error_handler_t::replace); }

// Appends `v` to `out` until `out` holds more than `limit` characters; recursion depth <= kJsonExcerptDepth.
void put(const json& v, int depth, size_t limit, std::string& out) {
  if (out.size() > limit) return;
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    out += scalar(json(s.size() > limit ? s.substr(0, limit) : s));
    return;
  }
  if (!v.is_structured()) {
    out += scalar(v);
    return;
  }
  const bool obj = v.is_object();
  if (depth >= kJsonExcerptDepth) {
    out += v.empty() ? (obj ? "{}" : "[]") : (obj ? "{...}" : "[...]");
    return;
  }
  out += obj ? '{' : '[';
  bool first = true;
  for (auto it = v.begin(); it != v.end() && out.size() <= limit; ++it) {
    if (!first) out += ',';
    first = false;
    if (obj) {
      put(json(it.key()), depth + 1, limit, out);
      out += ':';
    }
    put(it.value(), depth + 1, limit, out);
  }
  out += obj ? '}' : ']';
}

}  // namespace

std::string json_excerpt(const nlohmann::json& v, size_t max_chars) {
  if (max_chars < 4) max_chars = 4;
  std::string out;
  put(v, 0, max_chars, out);
  if (out.size() > max_chars) out = out.substr(0, max_chars - 3) + "...";
  return out;
}

std::string json_error_text(const nlohmann::json::exception& e) {
  std::string m = e.what();
  if (m.rfind("[json.exception.", 0) == 0 && m.find("] ") != std::string::npos) m = m.substr(m.find("] ") + 2);
  for (char& c : m)
    if (c == '\n' || c == '\r') c = ' ';
  return m;
}

}  // namespace glm5
