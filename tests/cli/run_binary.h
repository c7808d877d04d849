// Runs the built glm5prof (GLM5_BINARY_DIR "/glm5prof") for CLI tests: exit status, stdout, stderr.
#pragma once
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace glm5::test {

struct RunResult {
  int status = -1;  // exit status; 124 when the timeout killed it
  std::string out, err;
};

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Runs glm5prof `args` under `timeout 60` ($GLM5_BINARY_DIR/glm5prof when that is set), capturing stdout / stderr in files under `scratch`.
inline RunResult run_glm5prof(const std::vector<std::string>& args, const std::filesystem::path& scratch) {
  static int n = 0;
  const std::filesystem::path out = scratch / ("stdout." + std::to_string(n)), err = scratch / ("stderr." + std::to_string(n));
  ++n;
  // $GLM5_BINARY_DIR overrides the build folder (the GPU machine runs prebuilt copies elsewhere).
  const char* dir = std::getenv("GLM5_BINARY_DIR");
  std::string cmd = "timeout 60 " + shell_quote(std::string(dir && *dir ? dir : GLM5_BINARY_DIR) + "/glm5prof");
  for (const std::string& a : args) cmd += " " + shell_quote(a);
  cmd += " >" + shell_quote(out.string()) + " 2>" + shell_quote(err.string()) + " </dev/null";
  const int raw = std::system(cmd.c_str());
  RunResult r;
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

}  // namespace glm5::test
