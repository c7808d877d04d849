// Shared helpers of the libFuzzer targets (fuzz/*.cpp, built by tools/fuzz.sh).
// A target passes when every input either parses or throws glm5::Error; any other exception, a
// crash, a sanitizer report, a hang or a leak is a finding.
#pragma once
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace glm5::fuzz {

// A per-process temp file for parsers whose public entry takes a path. Rewritten for every input.
class TempFile {
 public:
  explicit TempFile(const char* suffix) {
    const char* dir = std::getenv("TMPDIR");
    path_ = std::string(dir && *dir ? dir : "/tmp") + "/glm5fuzz_" + std::to_string(getpid()) + suffix;
  }
  ~TempFile() { std::remove(path_.c_str()); }
  const std::string& write(const uint8_t* data, size_t size) {
    FILE* f = std::fopen(path_.c_str(), "wb");
    if (!f) std::abort();
    if (size && std::fwrite(data, 1, size, f) != size) std::abort();
    std::fclose(f);
    return path_;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace glm5::fuzz
