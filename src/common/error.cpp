#include "common/error.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

namespace glm5 {

void require_regular_file(const std::string& path, const std::string& what) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    throw Error("'" + path + "' cannot be read: " + std::strerror(errno) + " (" + what + " expected)");
  if (S_ISDIR(st.st_mode)) throw Error("'" + path + "' is a directory (" + what + " expected)");
  if (!S_ISREG(st.st_mode))
    throw Error("'" + path + "': not a regular file (a pipe or device; " + what + " expected: save it to a file first)");
}

void throw_cuda_error(cudaError_t err, const char* expr, const char* file, int line) {
  throw Error(std::string("CUDA error ") + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) +
              ") in " + expr + " at " + file + ":" + std::to_string(line));
}

}  // namespace glm5
