#include "trace/chrome_trace.h"

#include "common/error.h"

namespace glm5 {

void write_chrome_trace(const Timeline& t, const std::string& path) {
  (void)t;
  throw Error("write_chrome_trace('" + path + "'): not implemented yet");
}

Timeline read_chrome_trace(const std::string& path) {
  throw Error("read_chrome_trace('" + path + "'): not implemented yet");
}

}  // namespace glm5
